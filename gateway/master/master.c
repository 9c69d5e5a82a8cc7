#include "gateway/master/master.h"
#include "gateway/metrics/metrics.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/confine.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/cache/entity.h"
#include "gateway/dispatcher/counters.h"
#include "gateway/dispatcher/dispatcher.h"
#include "gateway/limits/ratelimit.h"
#include "gateway/http/routes.h"
#include "gateway/http/worker.h"
#include "gateway/jobs/jobstore.h"

/* A child that ran at least this long before dying is replaced at once; a shorter run counts as a crash loop. */
#define MASTER_HEALTHY_RUN_MS 1000
#define MASTER_BACKOFF_MIN_MS 100
#define MASTER_BACKOFF_MAX_MS 5000
/* Beyond the workers' own drain deadline, how long they (then the dispatcher) get before SIGKILL. */
#define MASTER_STOP_GRACE_MS 5000
/* The longest sleep of the supervision loop when nothing is scheduled. */
#define MASTER_TICK_MS 1000
/* ipc paths must fit sockaddr_un.sun_path (108 bytes) with room to spare. */
#define MASTER_IPC_PATH_MAX 100
/* The socket's name inside its private directory. */
#define MASTER_IPC_NAME "/dispatcher.ipc"

enum role { ROLE_WORKER, ROLE_DISPATCHER };

struct child {
  enum role role;
  pid_t pid; /* 0 when not running */
  uint64_t started_ms;
  unsigned fails; /* consecutive short runs */
  int restart_pending;
  uint64_t restart_at_ms;
};

enum phase { RUNNING, STOPPING_WORKERS, STOPPING_DISPATCHER };

struct master {
  const struct vts_config *cfg;
  struct keystore *keys;
  struct ratelimit_shared *limits; /* made before fork, lent to every child */
  int jobs_made_fd;                /* an eventfd: a worker that made a batch job says so to the dispatcher; or -1 */
  pid_t pid;
  uint64_t started_ms;
  enum log_level log_level;
  struct child *children; /* workers, then the dispatcher last */
  size_t nchildren;
  char ipc_dir[MASTER_IPC_PATH_MAX + 1];
  char ipc_path[MASTER_IPC_PATH_MAX + sizeof(MASTER_IPC_NAME)];
  char ipc_url[MASTER_IPC_PATH_MAX + sizeof(MASTER_IPC_NAME) + 6];
  enum phase phase;
  uint64_t phase_deadline_ms;
  int killed; /* SIGKILL sent in the current phase */
  int exit_status;
};

static const char *role_name(enum role r) { return r == ROLE_WORKER ? "worker" : "dispatcher"; }

/*
 * The workers' socket to the dispatcher lives in a directory of its own, made fresh by mkdtemp (mode 0700) under
 * XDG_RUNTIME_DIR, else TMPDIR, else /tmp: no other user can reach the socket, and nobody can plant a file or a link at
 * a name we would use, as they could with a predictable path in a shared /tmp.
 */
static int make_ipc_dir(struct master *m) {
  const char *dirs[] = {getenv("XDG_RUNTIME_DIR"), getenv("TMPDIR"), "/tmp"};
  int rv = -ENAMETOOLONG;
  for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
    const char *dir = dirs[i];
    if (dir == NULL || dir[0] != '/') continue;
    int n = snprintf(m->ipc_dir, sizeof(m->ipc_dir), "%s/vts-XXXXXX", dir);
    if (n <= 0 || (size_t)n >= sizeof(m->ipc_dir) - sizeof(MASTER_IPC_NAME)) continue;
    if (mkdtemp(m->ipc_dir) == NULL) {
      rv = -errno;
      continue;
    }
    snprintf(m->ipc_path, sizeof(m->ipc_path), "%s%s", m->ipc_dir, MASTER_IPC_NAME);
    snprintf(m->ipc_url, sizeof(m->ipc_url), "ipc://%s", m->ipc_path);
    return 0;
  }
  m->ipc_dir[0] = '\0';
  return rv;
}

static void remove_ipc_dir(struct master *m) {
  if (m->ipc_dir[0] == '\0') return;
  unlink(m->ipc_path); /* a dispatcher killed by a signal leaves its socket file */
  rmdir(m->ipc_dir);
}

/* In the new child: never returns. */
static void child_run(struct master *m, struct child *c) {
  /* Die with the master; if it died already (before prctl took effect), go now. */
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != m->pid) _exit(0);
  /*
   * Ctrl-C reaches the whole process group; only the master decides what it means. The rest stays blocked, as the
   * master had it when it forked: a SIGHUP (a reload storm) or a SIGTERM that reaches this child before its own
   * handlers exist waits for them instead of killing it. worker_main unblocks once its handlers are installed; the
   * dispatcher takes them with sigwait.
   */
  signal(SIGINT, SIG_IGN);
  signal(SIGCHLD, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGHUP, c->role == ROLE_WORKER ? SIG_DFL : SIG_IGN);
  prctl(PR_SET_NAME, c->role == ROLE_WORKER ? "vts-worker" : "vts-dispatcher");
  log_init(role_name(c->role), m->log_level);
  if (confine_gateway_child(m->cfg) != 0) exit(1);
  int status;
  if (c->role == ROLE_WORKER) {
    metrics_set_worker((int)(c - m->children));
    status = worker_main(m->cfg, m->ipc_url, m->started_ms, m->keys, m->limits, m->jobs_made_fd);
  } else {
    keystore_free(m->keys);
    status = dispatcher_main(m->cfg, m->ipc_url, m->limits, m->jobs_made_fd);
  }
  exit(status);
}

static int spawn(struct master *m, struct child *c) {
  c->restart_pending = 0;
  pid_t pid = fork();
  if (pid < 0) {
    int rv = -errno;
    log_msg(LOG_ERROR, "fork failed", "role", role_name(c->role), "error", strerror(errno), NULL);
    return rv;
  }
  if (pid == 0) child_run(m, c);
  c->pid = pid;
  c->started_ms = util_now_ms();
  char p[16];
  snprintf(p, sizeof(p), "%d", (int)pid);
  log_msg(LOG_INFO, "child started", "role", role_name(c->role), "=child_pid", p, NULL);
  return 0;
}

static void schedule_restart(struct master *m, struct child *c) {
  uint64_t now = util_now_ms();
  if (now - c->started_ms >= MASTER_HEALTHY_RUN_MS)
    c->fails = 0;
  else
    c->fails++;
  uint64_t delay = 0;
  if (c->fails > 0) {
    delay = MASTER_BACKOFF_MIN_MS;
    for (unsigned i = 1; i < c->fails && delay < MASTER_BACKOFF_MAX_MS; i++) delay *= 2;
    if (delay > MASTER_BACKOFF_MAX_MS) delay = MASTER_BACKOFF_MAX_MS;
  }
  (void)m;
  struct metrics_shm *ms = metrics_shared();
  if (ms != NULL)
    atomic_fetch_add_explicit(c->role == ROLE_WORKER ? &ms->master.worker_restarts : &ms->master.dispatcher_restarts, 1,
                              memory_order_relaxed);
  c->restart_pending = 1;
  c->restart_at_ms = now + delay;
}

static void signal_children(struct master *m, enum role role, int sig) {
  for (size_t i = 0; i < m->nchildren; i++) {
    struct child *c = &m->children[i];
    if (c->role == role && c->pid > 0) kill(c->pid, sig);
  }
}

static size_t alive(const struct master *m, enum role role) {
  size_t n = 0;
  for (size_t i = 0; i < m->nchildren; i++) {
    if (m->children[i].role == role && m->children[i].pid > 0) n++;
  }
  return n;
}

static void begin_stop(struct master *m) {
  if (m->phase != RUNNING) return;
  log_msg(LOG_INFO, "stopping: draining workers", NULL);
  m->phase = STOPPING_WORKERS;
  m->killed = 0;
  m->phase_deadline_ms = util_now_ms() + (uint64_t)m->cfg->drain_timeout_ms + MASTER_STOP_GRACE_MS;
  for (size_t i = 0; i < m->nchildren; i++) m->children[i].restart_pending = 0;
  signal_children(m, ROLE_WORKER, SIGTERM);
}

static void reap(struct master *m) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    struct child *c = NULL;
    for (size_t i = 0; i < m->nchildren; i++) {
      if (m->children[i].pid == pid) c = &m->children[i];
    }
    if (c == NULL) continue;
    c->pid = 0;
    /* A worker killed mid-connection never counted its connections down: its replacement starts from zero. */
    if (c->role == ROLE_WORKER) metrics_worker_gone((int)(c - m->children));
    char p[16], code[16];
    snprintf(p, sizeof(p), "%d", (int)pid);
    if (WIFSIGNALED(status))
      snprintf(code, sizeof(code), "%d", WTERMSIG(status));
    else
      snprintf(code, sizeof(code), "%d", WEXITSTATUS(status));
    log_msg(m->phase == RUNNING ? LOG_WARN : LOG_INFO, "child exited", "role", role_name(c->role), "=child_pid", p,
            WIFSIGNALED(status) ? "=signal" : "=exit_code", code, NULL);
    if (m->phase != RUNNING) continue;
    if (WIFEXITED(status) && WEXITSTATUS(status) == WORKER_EXIT_CONFIG) {
      log_msg(LOG_ERROR, "a worker cannot start with this configuration; stopping", NULL);
      m->exit_status = 1;
      begin_stop(m);
      continue;
    }
    schedule_restart(m, c);
  }
}

static void run_due_restarts(struct master *m) {
  uint64_t now = util_now_ms();
  for (size_t i = 0; i < m->nchildren; i++) {
    struct child *c = &m->children[i];
    if (c->restart_pending && c->restart_at_ms <= now && spawn(m, c) != 0) {
      /* fork itself failed (no memory, process limit): try again later rather than spin. */
      c->restart_pending = 1;
      c->restart_at_ms = now + MASTER_BACKOFF_MAX_MS;
    }
  }
}

/* Whether no child of role is left; past the phase deadline, SIGKILLs the rest once. */
static int phase_done(struct master *m, enum role role, uint64_t now) {
  if (alive(m, role) == 0) return 1;
  if (now >= m->phase_deadline_ms && !m->killed) {
    log_msg(LOG_WARN, "children did not stop in time: SIGKILL", "role", role_name(role), NULL);
    signal_children(m, role, SIGKILL);
    m->killed = 1;
  }
  return 0;
}

/* Moves the stop sequence on: workers gone -> stop the dispatcher. Returns 1 once every child is gone. */
static int advance_stop(struct master *m) {
  uint64_t now = util_now_ms();
  if (m->phase == STOPPING_WORKERS) {
    if (!phase_done(m, ROLE_WORKER, now)) return 0;
    m->phase = STOPPING_DISPATCHER;
    m->killed = 0;
    m->phase_deadline_ms = now + MASTER_STOP_GRACE_MS;
    signal_children(m, ROLE_DISPATCHER, SIGTERM);
  }
  return phase_done(m, ROLE_DISPATCHER, now);
}

static uint64_t next_wait_ms(const struct master *m) {
  uint64_t now = util_now_ms();
  uint64_t wait = MASTER_TICK_MS;
  for (size_t i = 0; i < m->nchildren; i++) {
    const struct child *c = &m->children[i];
    if (!c->restart_pending) continue;
    uint64_t d = c->restart_at_ms > now ? c->restart_at_ms - now : 0;
    if (d < wait) wait = d;
  }
  if (m->phase != RUNNING) {
    uint64_t d = m->phase_deadline_ms > now ? m->phase_deadline_ms - now : 0;
    if (d < wait) wait = d;
  }
  return wait;
}

static void on_sighup(struct master *m) {
  /* The master's copy seeds workers started later; a file that does not load keeps the old copy. */
  char err[256] = "";
  struct keystore *ks = keystore_load(m->cfg->keys_file, err, sizeof(err));
  if (ks != NULL) {
    keystore_free(m->keys);
    m->keys = ks;
  } else {
    log_msg(LOG_ERROR, "key file reload failed in the master", "error", err, NULL);
    metrics_keys_reload_failed();
  }
  signal_children(m, ROLE_WORKER, SIGHUP);
}

/* A worker holds one descriptor per connection: allow as many as the hard limit does. */
static void raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

/*
 * The workers (forked from here) keep their large cached bodies in unnamed files of the state directory, made if it is
 * not there yet; where it cannot hold them, in memory files, which is said once.
 */
static void body_dir(const char *state_dir) {
  int rv = util_make_dirs(state_dir);
  if (rv == 0) rv = entity_body_dir(state_dir);
  if (rv != 0)
    log_msg(LOG_INFO, "large cached answers kept in memory files", "path", state_dir, "error", strerror(-rv), NULL);
}

/* Over 80 lines: the master's steps before fork and its supervision loop in order, failures leaving by one exit. */
int master_run(const struct vts_config *cfg, struct keystore *keys) {
  struct master m;
  memset(&m, 0, sizeof(m));
  m.jobs_made_fd = -1;
  m.cfg = cfg;
  m.keys = keys;
  m.pid = getpid();
  m.started_ms = util_now_ms();
  if (log_level_parse(cfg->log_level, &m.log_level) != 0) m.log_level = LOG_INFO;

  int rv = make_ipc_dir(&m);
  if (rv != 0) {
    log_msg(LOG_ERROR, "cannot make a private directory for the dispatcher socket", "error", strerror(-rv), NULL);
    goto fail;
  }
  char rl_err[512];
  rv = ratelimit_shared_new(cfg, &m.limits, rl_err, sizeof(rl_err));
  if (rv != 0) {
    log_msg(LOG_ERROR, rl_err, NULL);
    log_msg(LOG_ERROR, "rate-limit shared memory failed", "error", strerror(-rv), NULL);
    goto fail;
  }
  rv = jobstore_init(cfg, rl_err, sizeof(rl_err));
  if (rv != 0) {
    log_msg(LOG_ERROR, rl_err, NULL);
    goto fail;
  }
  /* Without it the dispatcher still finds a new job, by its store's polls (RUNNER_IDLE_POLL_MS at most). */
  m.jobs_made_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (m.jobs_made_fd < 0)
    log_msg(LOG_WARN, "no eventfd: new batch jobs start at the job store's next poll", "error", strerror(errno), NULL);
  body_dir(cfg->state_dir);
  rv = metrics_init();
  if (rv != 0) {
    log_msg(LOG_ERROR, "metrics shared memory failed", "error", strerror(-rv), NULL);
    goto fail;
  }
  routes_metrics_register();
  counters_metrics_register();
  raise_fd_limit();
  /* A peer that closes early must cost a failed write, not the process. */
  signal(SIGPIPE, SIG_IGN);

  long nworkers = cfg->workers;
  if (nworkers == 0) nworkers = sysconf(_SC_NPROCESSORS_ONLN);
  if (nworkers < 1) nworkers = 1;
  m.nchildren = (size_t)nworkers + 1;
  m.children = calloc(m.nchildren, sizeof(*m.children));
  if (m.children == NULL) {
    rv = -ENOMEM;
    goto fail;
  }
  for (size_t i = 0; i < m.nchildren; i++) m.children[i].role = ROLE_WORKER;
  m.children[m.nchildren - 1].role = ROLE_DISPATCHER;

  /* Signals are taken synchronously with sigtimedwait: no handler runs between fork and anything else. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigprocmask(SIG_BLOCK, &set, NULL);

  char nw[24], port[16];
  snprintf(nw, sizeof(nw), "%ld", nworkers);
  snprintf(port, sizeof(port), "%d", cfg->listen_port);
  log_msg(LOG_INFO, "gateway starting", "=workers", nw, "host", cfg->listen_host, "=port", port, "version", VTS_VERSION,
          NULL);
  /* The dispatcher first, so that its socket usually exists when the workers dial it. */
  for (size_t i = m.nchildren; i-- > 0;) {
    if (spawn(&m, &m.children[i]) != 0) schedule_restart(&m, &m.children[i]);
  }

  for (;;) {
    uint64_t wait = next_wait_ms(&m);
    struct timespec ts = {(time_t)(wait / 1000), (long)(wait % 1000) * 1000000L};
    int sig = sigtimedwait(&set, NULL, &ts);
    if (sig == SIGTERM || sig == SIGINT)
      begin_stop(&m);
    else if (sig == SIGHUP && m.phase == RUNNING)
      on_sighup(&m);
    reap(&m);
    if (m.phase == RUNNING)
      run_due_restarts(&m);
    else if (advance_stop(&m))
      break;
  }
  /* The workers are gone: the last monthly usage they counted is written once more, so a restart loses none. */
  ratelimit_snapshot_now(m.limits, cfg);
  log_msg(LOG_INFO, "gateway stopped", NULL);
  rv = 0;

fail:
  if (m.jobs_made_fd >= 0) close(m.jobs_made_fd);
  ratelimit_shared_free(m.limits);
  remove_ipc_dir(&m);
  free(m.children);
  keystore_free(m.keys);
  if (rv != 0) return 1;
  return m.exit_status;
}
