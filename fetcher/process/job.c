#include "fetcher/process/job.h"
#include "fetcher/process/sandbox.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/ident.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "fetcher/course/course.h"
#include "fetcher/process/peers.h"
#include "fetcher/egress/upstream.h"
#include "fetcher/egress/webhook.h"
#include "proto/link.h"

#if defined(__SANITIZE_ADDRESS__)
#define JOB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define JOB_ASAN 1
#endif
#endif
#ifndef JOB_ASAN
#define JOB_ASAN 0
#endif

/* Exit status of a process killed by its watchdog (as timeout(1) does), so the supervisor's log says why. */
#define JOB_WATCHDOG_EXIT 124

struct job_runner {
  const struct vts_config *cfg;
  struct upstream *up;
  struct course *it;
  struct webhook *hook;
  struct course_result out;
};

int job_limits_init(const struct vts_config *cfg) {
  struct rlimit core = {0, 0};
  if (setrlimit(RLIMIT_CORE, &core) != 0) return -errno;
  /*
   * glibc reserves a 64 MiB heap arena per thread that allocates (nng and curl run threads): under an address space
   * cap that reservation, not our data, would be what runs out. Two arenas are plenty for one job at a time.
   */
  mallopt(M_ARENA_MAX, 2);
  if (!JOB_ASAN) {
    rlim_t max = (rlim_t)cfg->fetcher_max_memory_mb * 1024 * 1024;
    struct rlimit as = {max, max};
    if (setrlimit(RLIMIT_AS, &as) != 0) return -errno;
  }
  return 0;
}

/*
 * The watchdog is a real-time interval timer whose SIGALRM handler writes one log line prepared in advance and
 * exits: nothing in a handler may allocate or lock, and a job that overran its deadline may hold any lock.
 */
static char watchdog_line[512];
static size_t watchdog_line_len;
static atomic_int watchdog_fired;

/*
 * The handler may run on any thread while the job's own thread goes on (a stopped process resumes every thread at
 * once), so the job thread checks the clock too before it answers: whichever notices first writes the line, and an
 * overrun job never delivers a result.
 */
static _Noreturn void watchdog_exit(void) {
  if (atomic_exchange(&watchdog_fired, 1) == 0) {
    ssize_t n = write(STDERR_FILENO, watchdog_line, watchdog_line_len);
    (void)n;
  }
  _exit(JOB_WATCHDOG_EXIT);
}

static void on_watchdog(int sig) {
  (void)sig;
  watchdog_exit();
}

static void watchdog_arm(const struct proto_job *job, uint64_t limit_ms) {
  struct buf line = BUF_INIT;
  struct timeval tv;
  gettimeofday(&tv, NULL);
  char ts[40];
  util_rfc3339(ts, sizeof(ts), (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000 + (int64_t)limit_ms);
  buf_printf(&line,
             "{\"ts\":\"%s\",\"level\":\"error\",\"component\":\"fetcher\",\"pid\":%d,\"msg\":\"job overran "
             "its deadline: killed by the watchdog\",\"request_id\":\"",
             ts, (int)getpid());
  buf_json_escape(&line, job->request_id, strlen(job->request_id));
  buf_printf(&line, "\",\"job_id\":%llu}\n", (unsigned long long)job->job_id);
  watchdog_line_len = 0;
  if (line.data != NULL && line.len < sizeof(watchdog_line)) {
    memcpy(watchdog_line, line.data, line.len);
    watchdog_line_len = line.len;
  }
  buf_free(&line);

  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_watchdog;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval it = {{0, 0}, {(time_t)(limit_ms / 1000), (suseconds_t)(limit_ms % 1000) * 1000}};
  setitimer(ITIMER_REAL, &it, NULL);

  /*
   * RLIMIT_CPU counts the whole life of the process, so each job gets a soft limit relative to what was used so far:
   * twice its deadline (threads can burn more than one core) plus a margin. Past it the kernel sends SIGXCPU, whose
   * default action ends the process. The hard limit is left alone so the next job can raise the soft one again.
   */
  struct rusage ru;
  struct rlimit cpu;
  if (getrusage(RUSAGE_SELF, &ru) == 0 && getrlimit(RLIMIT_CPU, &cpu) == 0) {
    rlim_t used = (rlim_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1);
    rlim_t soft = used + (rlim_t)(2 * limit_ms / 1000) + VTS_FETCHER_CPU_GRACE_S;
    if (cpu.rlim_max == RLIM_INFINITY || soft < cpu.rlim_max) {
      cpu.rlim_cur = soft;
      setrlimit(RLIMIT_CPU, &cpu);
    }
  }
}

static void watchdog_disarm(void) {
  struct itimerval it = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &it, NULL);
}

int job_runner_new(const struct vts_config *cfg, struct job_runner **out, char *err, size_t errlen) {
  struct job_runner *r = calloc(1, sizeof(*r));
  if (r == NULL) return -ENOMEM;
  r->cfg = cfg;
  int rv = upstream_new(cfg, &r->up, err, errlen);
  if (rv == 0) rv = course_new(cfg, r->up, &r->it, err, errlen);
  if (rv == 0) rv = webhook_new(cfg, &r->hook, err, errlen);
  if (rv != 0) {
    job_runner_free(r);
    return rv;
  }
  *out = r;
  return 0;
}

void job_runner_free(struct job_runner *r) {
  if (r == NULL) return;
  course_free(r->it);
  webhook_free(r->hook);
  upstream_free(r->up);
  buf_free(&r->out.body);
  buf_free(&r->out.player);
  free(r);
}

void job_runner_run(struct job_runner *r, const struct proto_job *job, struct proto_result *res) {
  uint64_t start = util_now_ms();
  uint64_t budget = job->deadline_ms > 0 ? job->deadline_ms : (uint64_t)r->cfg->job_timeout_ms;
  watchdog_arm(job, budget + VTS_FETCHER_WATCHDOG_GRACE_MS);
  struct course_result *out = &r->out;
  buf_reset(&out->body);
  out->lang[0] = '\0';
  out->nattempts = 0;
  out->retry_after_s = 0;
  out->player_ttl_ms = 0;
  out->pot_failures = 0;
  buf_reset(&out->player);
  out->reason = PROTO_REASON_INTERNAL;
  course_refresh_profiles(r->it);
  /* A browse target is a string for the platform's request: decoded jobs hold no NUL in it, and it is copied here. */
  char *target = NULL;
  if (job->kind == PROTO_KIND_BROWSE && job->browse_len > 0 && (target = malloc(job->browse_len + 1)) != NULL) {
    memcpy(target, job->browse, job->browse_len);
    target[job->browse_len] = '\0';
  }
  if (job->kind == PROTO_KIND_WEBHOOK) {
    /* No platform request: the body is the receiver's status, whatever the outcome. */
    struct fetch_outcome o;
    webhook_deliver(r->hook, job, start + budget, &o, &out->body);
    out->outcome = o.outcome;
    out->reason = o.reason;
    snprintf(out->detail, sizeof(out->detail), "%s", o.detail);
  } else if (job->kind == PROTO_KIND_BROWSE ? target == NULL
                                            : !ident_video_id_valid(job->video_id, strlen(job->video_id))) {
    out->outcome = PROTO_INTERNAL;
    snprintf(out->detail, sizeof(out->detail), "bad_job");
  } else {
    upstream_begin_job(r->up, start + budget, job->request_id);
    if (job->kind == PROTO_KIND_BROWSE)
      course_fetch_browse(r->it, job->browse_what, target, job->request_id, out);
    else if (job->kind == PROTO_KIND_SPEECH)
      course_fetch_speech(r->it, job->video_id, job->request_id, out);
    else if (job->kind == PROTO_KIND_TRACKS)
      course_fetch_tracks(r->it, job->video_id, job->request_id, job->player, job->player_len, out);
    else if (job->kind == PROTO_KIND_METADATA && (job->include & PROTO_INCLUDE_CHAPTERS))
      course_fetch_chapters(r->it, job->video_id, job->request_id, job->player, job->player_len, out);
    else if (job->kind == PROTO_KIND_METADATA)
      course_fetch_metadata(r->it, job->video_id, job->request_id, job->player, job->player_len, out);
    else
      course_fetch_captions(r->it, job->video_id, job->lang, job->translate, job->request_id, job->player,
                            job->player_len, out);
  }
  free(target);
  watchdog_disarm();
  if (util_now_ms() - start >= budget + VTS_FETCHER_WATCHDOG_GRACE_MS) watchdog_exit();

  memset(res, 0, sizeof(*res));
  res->job_id = job->job_id;
  res->outcome = out->outcome;
  res->source = job->kind == PROTO_KIND_WEBHOOK ? PROTO_SOURCE_WEBHOOK
                : out->outcome != PROTO_OK || job->kind == PROTO_KIND_TRACKS || job->kind == PROTO_KIND_METADATA ||
                        job->kind == PROTO_KIND_BROWSE
                    ? PROTO_SOURCE_NONE
                : job->kind == PROTO_KIND_SPEECH ? PROTO_SOURCE_SPEECH
                                                 : PROTO_SOURCE_CAPTIONS;
  res->fetch_ms = (uint32_t)(util_now_ms() - start);
  snprintf(res->lang, sizeof(res->lang), "%s", out->outcome == PROTO_OK ? out->lang : "");
  snprintf(res->detail, sizeof(res->detail), "%s", out->detail);
  res->reason = out->reason;
  res->nattempts = out->nattempts;
  memcpy(res->attempts, out->attempts, sizeof(res->attempts));
  res->retry_after_s = out->outcome == PROTO_UPSTREAM_FAILED ? out->retry_after_s : 0;
  /* No egress had a unit of its budget in time: the 502 says when the first holds one (at least 1 s). */
  if (out->outcome == PROTO_UPSTREAM_FAILED && out->reason == PROTO_REASON_BUDGET) {
    uint64_t s = (upstream_budget_wait_ms(r->up) + 999) / 1000;
    res->retry_after_s = s == 0 ? 1 : s > UINT32_MAX ? UINT32_MAX : (uint32_t)s;
  }
  if (out->player_ttl_ms > 0 && out->player.len > 0) {
    res->player = out->player.data;
    res->player_len = (uint32_t)out->player.len;
    res->player_ttl_ms = out->player_ttl_ms;
  }
  res->negress = (uint8_t)upstream_budget_report(r->up, res->egress);
  res->pot_failures = out->pot_failures;
  res->sandbox = sandbox_layers();
  int with_body = out->outcome == PROTO_OK || job->kind == PROTO_KIND_WEBHOOK;
  res->body = with_body ? out->body.data : NULL;
  res->body_len = with_body ? (uint32_t)out->body.len : 0;

  char job_id[24], outcome[8], dur[24];
  snprintf(job_id, sizeof(job_id), "%llu", (unsigned long long)job->job_id);
  snprintf(outcome, sizeof(outcome), "%d", res->outcome);
  snprintf(dur, sizeof(dur), "%u", res->fetch_ms);
  log_msg(LOG_INFO, "job done", "request_id", job->request_id, "=job_id", job_id, "video_id", job->video_id, "=outcome",
          outcome, "lang", res->lang, "detail", res->detail, "reason", proto_reason_name(res->reason), "=dur_ms", dur,
          NULL);
}

int job_runner_declines(struct job_runner *r, const struct proto_job *job) {
  /* A webhook spends no platform budget. */
  if (!r->cfg->egress_decline || job->declines >= VTS_EGRESS_MAX_DECLINES || job->kind == PROTO_KIND_WEBHOOK) return 0;
  uint64_t budget = job->deadline_ms > 0 ? job->deadline_ms : (uint64_t)r->cfg->job_timeout_ms;
  if (upstream_budget_wait_ms(r->up) < budget) return 0;
  upstream_budget_declined(r->up);
  return 1;
}

/* Shared between the job loop and its signal thread. */
struct loop_state {
  pthread_mutex_t mu;
  struct peers *ps;
  int done; /* the loop has ended: the signal thread just leaves */
  sigset_t signals;
};

static void *signal_thread(void *arg) {
  struct loop_state *st = arg;
  for (;;) {
    int sig;
    if (sigwait(&st->signals, &sig) != 0) continue;
    pthread_mutex_lock(&st->mu);
    int done = st->done;
    pthread_mutex_unlock(&st->mu);
    if (done) return NULL;
    /* Idle, the loop waits for a job and returns at once; busy, it finishes the job and sends a RESULT_LAST. */
    peers_stop(st->ps);
  }
}

int job_loop_run(const struct vts_config *cfg, struct job_runner *r) {
  struct loop_state st;
  memset(&st, 0, sizeof(st));
  pthread_mutex_init(&st.mu, NULL);
  sigemptyset(&st.signals);
  sigaddset(&st.signals, SIGTERM);
  sigaddset(&st.signals, SIGINT);
  /* Blocked before nng starts its threads, so that they inherit the mask and only sigwait sees the signals. */
  pthread_sigmask(SIG_BLOCK, &st.signals, NULL);

  char err[256];
  int rv = peers_new(cfg, &st.ps, err, sizeof(err));
  if (rv != 0) {
    log_msg(LOG_ERROR, "cannot open the jobs links", "url", cfg->jobs_url, "error", err, NULL);
    pthread_mutex_destroy(&st.mu);
    return -EIO;
  }
  pthread_t tid;
  if (pthread_create(&tid, NULL, signal_thread, &st) != 0) {
    peers_free(st.ps);
    pthread_mutex_destroy(&st.mu);
    return -EAGAIN;
  }

  struct proto_job job;
  struct proto_result res;
  while (peers_wait_job(st.ps, &job)) {
    if (job_runner_declines(r, &job)) {
      if (peers_give_back(st.ps, &job)) break;
      continue;
    }
    job_runner_run(r, &job, &res);
    if (peers_finish(st.ps, &res)) break;
  }

  pthread_mutex_lock(&st.mu);
  st.done = 1;
  pthread_mutex_unlock(&st.mu);
  /* Wake the signal thread so it can leave, then reap it. */
  pthread_kill(tid, SIGTERM);
  pthread_join(tid, NULL);
  link_teardown_watchdog(VTS_FETCHER_STOP_TIMEOUT_MS, 0, "fetcher teardown stuck in nng: exiting without it");
  peers_free(st.ps);
  pthread_mutex_destroy(&st.mu);
  log_msg(LOG_INFO, "fetcher stopped", NULL);
  return 0;
}
