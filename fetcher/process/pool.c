#include "fetcher/process/pool.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"

struct slot {
  pid_t pid;           /* 0 when not running */
  uint64_t started_ms; /* when it was started */
  uint64_t restart_at; /* when a dead child is due to start again, 0 when not scheduled */
  uint64_t backoff_ms; /* delay before the next restart after a quick death */
};

static pid_t spawn(int (*child_main)(void *), void *arg, const sigset_t *old_mask, pid_t parent) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  /* The child: back to default dispositions and the mask the program started with. */
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  signal(SIGCHLD, SIG_DFL);
  sigprocmask(SIG_SETMASK, old_mask, NULL);
  /* A child never outlives its supervisor; the check closes the race of a supervisor that died before prctl. */
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(0);
  exit(child_main(arg));
}

static void log_exit(pid_t pid, int status) {
  char p[16], code[16];
  snprintf(p, sizeof(p), "%d", (int)pid);
  if (WIFSIGNALED(status)) {
    snprintf(code, sizeof(code), "%d", WTERMSIG(status));
    log_msg(LOG_WARN, "fetcher child killed", "=child_pid", p, "=signal", code, NULL);
  } else {
    snprintf(code, sizeof(code), "%d", WEXITSTATUS(status));
    log_msg(WEXITSTATUS(status) == 0 ? LOG_INFO : LOG_WARN, "fetcher child exited", "=child_pid", p, "=exit_status",
            code, NULL);
  }
}

int pool_run(int n, int (*child_main)(void *arg), void *arg) {
  if (n < 1 || n > VTS_FETCHER_MAX_WORKERS) return 2;
  struct slot *slots = calloc((size_t)n, sizeof(*slots));
  if (slots == NULL) return 1;
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  /* Signals are taken synchronously with sigtimedwait: no handler, no race with the loop below. */
  sigprocmask(SIG_BLOCK, &set, &old);
  pid_t self = getpid();

  for (int i = 0; i < n; i++) {
    slots[i].backoff_ms = VTS_FETCHER_RESTART_MIN_MS;
    slots[i].restart_at = util_now_ms();
  }
  int stopping = 0;
  for (;;) {
    uint64_t now = util_now_ms();
    int running = 0;
    uint64_t next = now + 1000;
    for (int i = 0; i < n; i++) {
      struct slot *s = &slots[i];
      if (s->pid == 0 && !stopping && s->restart_at != 0 && s->restart_at <= now) {
        s->pid = spawn(child_main, arg, &old, self);
        if (s->pid < 0) {
          log_msg(LOG_ERROR, "fork failed", "error", strerror(errno), NULL);
          s->pid = 0;
          s->restart_at = now + VTS_FETCHER_RESTART_MAX_MS;
        } else {
          s->started_ms = now;
          s->restart_at = 0;
        }
      }
      if (s->pid != 0) running++;
      if (s->pid == 0 && s->restart_at != 0 && s->restart_at < next) next = s->restart_at;
    }
    if (stopping && running == 0) break;

    uint64_t wait_ms = next > now ? next - now : 0;
    struct timespec ts = {(time_t)(wait_ms / 1000), (long)(wait_ms % 1000) * 1000000L};
    int sig = sigtimedwait(&set, NULL, &ts);
    if (sig == SIGTERM || sig == SIGINT) {
      if (!stopping) log_msg(LOG_INFO, "stop requested: stopping fetcher children", NULL);
      stopping = 1;
      for (int i = 0; i < n; i++)
        if (slots[i].pid > 0) kill(slots[i].pid, SIGTERM);
    }
    /* Reap on every wake-up: several SIGCHLD may have merged into one. */
    for (;;) {
      int status;
      pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      log_exit(pid, status);
      now = util_now_ms();
      for (int i = 0; i < n; i++) {
        struct slot *s = &slots[i];
        if (s->pid != pid) continue;
        s->pid = 0;
        if (stopping) break;
        /* A child that ran for a while died of something transient; one that dies at once gets slowed down. */
        if (now - s->started_ms >= VTS_FETCHER_STABLE_MS) s->backoff_ms = VTS_FETCHER_RESTART_MIN_MS;
        s->restart_at = now + s->backoff_ms;
        s->backoff_ms = s->backoff_ms * 2 < VTS_FETCHER_RESTART_MAX_MS ? s->backoff_ms * 2 : VTS_FETCHER_RESTART_MAX_MS;
      }
    }
  }
  free(slots);
  sigprocmask(SIG_SETMASK, &old, NULL);
  log_msg(LOG_INFO, "fetcher supervisor stopped", NULL);
  return 0;
}
