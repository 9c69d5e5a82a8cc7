#include "fetcher/loop/job.h"

#include <errno.h>
#include <malloc.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <signal.h>
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
#include "fetcher/platform/innertube.h"
#include "fetcher/platform/upstream.h"

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
  struct innertube *it;
  struct innertube_result out;
};

int job_limits_init(void) {
  struct rlimit core = {0, 0};
  if (setrlimit(RLIMIT_CORE, &core) != 0) return -errno;
  /*
   * glibc reserves a 64 MiB heap arena per thread that allocates (nng and curl run threads): under an address space
   * cap that reservation, not our data, would be what runs out. Two arenas are plenty for one job at a time.
   */
  mallopt(M_ARENA_MAX, 2);
  if (!JOB_ASAN) {
    struct rlimit as = {VTS_FETCHER_ADDRESS_SPACE_BYTES, VTS_FETCHER_ADDRESS_SPACE_BYTES};
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

static void on_watchdog(int sig) {
  (void)sig;
  ssize_t n = write(STDERR_FILENO, watchdog_line, watchdog_line_len);
  (void)n;
  _exit(JOB_WATCHDOG_EXIT);
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
  if (rv == 0) rv = innertube_new(cfg, r->up, &r->it, err, errlen);
  if (rv != 0) {
    job_runner_free(r);
    return rv;
  }
  *out = r;
  return 0;
}

void job_runner_free(struct job_runner *r) {
  if (r == NULL) return;
  innertube_free(r->it);
  upstream_free(r->up);
  buf_free(&r->out.body);
  free(r);
}

void job_runner_run(struct job_runner *r, const struct proto_job *job, struct proto_result *res) {
  uint64_t start = util_now_ms();
  uint64_t budget = job->deadline_ms > 0 ? job->deadline_ms : (uint64_t)r->cfg->job_timeout_ms;
  watchdog_arm(job, budget + VTS_FETCHER_WATCHDOG_GRACE_MS);
  struct innertube_result *out = &r->out;
  buf_reset(&out->body);
  out->lang[0] = '\0';
  out->nattempts = 0;
  out->reason = PROTO_REASON_INTERNAL;
  innertube_refresh_profiles(r->it);
  if (!ident_video_id_valid(job->video_id, strlen(job->video_id))) {
    out->outcome = PROTO_INTERNAL;
    snprintf(out->detail, sizeof(out->detail), "bad_job");
  } else {
    upstream_begin_job(r->up, start + budget, job->request_id);
    if (job->kind == PROTO_KIND_SPEECH)
      innertube_fetch_speech(r->it, job->video_id, job->request_id, out);
    else if (job->kind == PROTO_KIND_TRACKS)
      innertube_fetch_tracks(r->it, job->video_id, job->request_id, out);
    else
      innertube_fetch_captions(r->it, job->video_id, job->lang, job->translate, job->request_id, out);
  }
  watchdog_disarm();

  memset(res, 0, sizeof(*res));
  res->job_id = job->job_id;
  res->outcome = out->outcome;
  res->source = out->outcome != PROTO_OK || job->kind == PROTO_KIND_TRACKS ? PROTO_SOURCE_NONE
                : job->kind == PROTO_KIND_SPEECH                           ? PROTO_SOURCE_SPEECH
                                                                           : PROTO_SOURCE_CAPTIONS;
  res->fetch_ms = (uint32_t)(util_now_ms() - start);
  snprintf(res->lang, sizeof(res->lang), "%s", out->outcome == PROTO_OK ? out->lang : "");
  snprintf(res->detail, sizeof(res->detail), "%s", out->detail);
  res->reason = out->reason;
  res->nattempts = out->nattempts;
  memcpy(res->attempts, out->attempts, sizeof(res->attempts));
  res->body = out->outcome == PROTO_OK ? out->body.data : NULL;
  res->body_len = out->outcome == PROTO_OK ? (uint32_t)out->body.len : 0;

  char job_id[24], outcome[8], dur[24];
  snprintf(job_id, sizeof(job_id), "%llu", (unsigned long long)job->job_id);
  snprintf(outcome, sizeof(outcome), "%d", res->outcome);
  snprintf(dur, sizeof(dur), "%u", res->fetch_ms);
  log_msg(LOG_INFO, "job done", "request_id", job->request_id, "=job_id", job_id, "video_id", job->video_id, "=outcome",
          outcome, "lang", res->lang, "detail", res->detail, "reason", proto_reason_name(res->reason), "=dur_ms", dur,
          NULL);
}

/* Shared between the job loop and its signal thread. */
struct loop_state {
  pthread_mutex_t mu;
  nng_socket sock;
  int busy;     /* a job is running: a stop waits for its result */
  int stopping; /* SIGTERM or SIGINT arrived */
  int closed;   /* the socket is closed */
  int done;     /* the loop has ended: the signal thread just leaves */
  sigset_t signals;
};

static int loop_stopping(struct loop_state *st) {
  pthread_mutex_lock(&st->mu);
  int stopping = st->stopping;
  pthread_mutex_unlock(&st->mu);
  return stopping;
}

static void *signal_thread(void *arg) {
  struct loop_state *st = arg;
  for (;;) {
    int sig;
    if (sigwait(&st->signals, &sig) != 0) continue;
    pthread_mutex_lock(&st->mu);
    if (st->done) {
      pthread_mutex_unlock(&st->mu);
      return NULL;
    }
    if (!st->stopping) log_msg(LOG_INFO, st->busy ? "stop requested: finishing the job" : "stop requested", NULL);
    st->stopping = 1;
    /* Idle, the loop is blocked in nng_recv: closing the socket is what wakes it. */
    if (!st->busy && !st->closed) {
      nng_close(st->sock);
      st->closed = 1;
    }
    pthread_mutex_unlock(&st->mu);
  }
}

static int open_socket(const struct vts_config *cfg, nng_socket *sock) {
  nng_dialer d;
  int rv = nng_req0_open(sock);
  if (rv != 0) return rv;
  /*
   * nng resends an unanswered request every 60 s by default: a RESULT or READY would then be delivered twice, and
   * after a dispatcher restart a stale one would be taken for a new request. The dispatcher answers every request
   * exactly once, so never resend.
   */
  if (rv == 0) rv = nng_socket_set_ms(*sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
  if (rv == 0) rv = nng_socket_set_size(*sock, NNG_OPT_RECVMAXSZ, VTS_MAX_MESSAGE_BYTES);
  if (rv == 0) rv = nng_dialer_create(&d, *sock, cfg->jobs_url);
  /* The limit must be on the dialer too: a pipe takes it from its dialer, and a larger job would close the pipe. */
  if (rv == 0) rv = nng_dialer_set_size(d, NNG_OPT_RECVMAXSZ, VTS_MAX_MESSAGE_BYTES);
  if (rv == 0) rv = nng_dialer_set_ms(d, NNG_OPT_RECONNMINT, 100);
  if (rv == 0) rv = nng_dialer_set_ms(d, NNG_OPT_RECONNMAXT, 2000);
  /* Non-blocking: a dispatcher that is not up yet is retried in the background instead of failing the start. */
  if (rv == 0) rv = nng_dialer_start(d, NNG_FLAG_NONBLOCK);
  if (rv != 0) nng_close(*sock);
  return rv;
}

/*
 * Encodes the result (a RESULT_LAST when the process is stopping), or an internal failure when the result itself
 * cannot travel.
 */
static void encode_result(struct buf *out, struct proto_result *res, int last) {
  int (*encode)(struct buf *, const struct proto_result *) = last ? proto_encode_result_last : proto_encode_result;
  buf_reset(out);
  if (encode(out, res) == 0 && out->len <= VTS_MAX_MESSAGE_BYTES) return;
  buf_reset(out);
  res->outcome = PROTO_INTERNAL;
  res->reason = PROTO_REASON_INTERNAL;
  res->source = PROTO_SOURCE_NONE;
  res->lang[0] = '\0';
  snprintf(res->detail, sizeof(res->detail), "result_too_large");
  res->body = NULL;
  res->body_len = 0;
  encode(out, res);
}

/* Waits a little for the READY that acknowledges a RESULT_LAST; either way the process leaves after it. */
static void wait_last_ack(nng_socket sock) {
  nng_socket_set_ms(sock, NNG_OPT_RECVTIMEO, VTS_FETCHER_STOP_LINGER_MS);
  char *ack = NULL;
  size_t ack_len = 0;
  int nrv = nng_recv(sock, &ack, &ack_len, NNG_FLAG_ALLOC);
  if (nrv != 0) {
    log_msg(LOG_WARN, "last result not acknowledged", "error", nng_strerror(nrv), NULL);
    return;
  }
  if (proto_peek_type(ack, ack_len) != PROTO_READY) log_msg(LOG_WARN, "unexpected answer to the last result", NULL);
  nng_free(ack, ack_len);
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

  int rv = open_socket(cfg, &st.sock);
  if (rv != 0) {
    log_msg(LOG_ERROR, "cannot open the jobs socket", "url", cfg->jobs_url, "error", nng_strerror(rv), NULL);
    pthread_mutex_destroy(&st.mu);
    return -EIO;
  }
  pthread_t tid;
  if (pthread_create(&tid, NULL, signal_thread, &st) != 0) {
    nng_close(st.sock);
    pthread_mutex_destroy(&st.mu);
    return -EAGAIN;
  }
  log_msg(LOG_INFO, "fetcher ready", "jobs_url", cfg->jobs_url, NULL);

  struct buf out = BUF_INIT;
  proto_encode_ready(&out);
  struct proto_result res;
  int have_result = 0; /* res holds a finished job whose result is the next message */
  rv = 0;
  for (;;) {
    int last = 0;
    if (have_result) {
      /*
       * Decided as late as possible: a stop that came during the job makes this a RESULT_LAST, which the dispatcher
       * acknowledges instead of answering with a job this process would have to refuse (a 500 for that job).
       */
      last = loop_stopping(&st);
      encode_result(&out, &res, last);
      have_result = 0;
    }
    int nrv = nng_send(st.sock, out.data, out.len, 0);
    if (nrv != 0) {
      if (!loop_stopping(&st)) {
        log_msg(LOG_ERROR, "send failed", "error", nng_strerror(nrv), NULL);
        rv = -EIO;
      }
      break;
    }
    if (last) {
      /* nng_close could drop a message still queued: the acknowledgement proves the result arrived. */
      wait_last_ack(st.sock);
      break;
    }
    /* Sent: the process is idle from here, and a stop closes the socket under the receive below. */
    pthread_mutex_lock(&st.mu);
    st.busy = 0;
    int stopping = st.stopping;
    pthread_mutex_unlock(&st.mu);
    if (stopping) break;

    char *msg = NULL;
    size_t len = 0;
    nrv = nng_recv(st.sock, &msg, &len, NNG_FLAG_ALLOC);
    if (nrv != 0) {
      /* A stop closes the socket under a blocked receive, which then fails with ECLOSED or ECONNRESET. */
      if (loop_stopping(&st)) break;
      if (nrv == NNG_ECONNRESET) {
        /*
         * The dispatcher went away with our request unanswered (nng fails it rather than resending, as we asked).
         * Its jobs died with the connection, a RESULT included, so we only say we are idle again; the dialer
         * reconnects on its own and the READY waits for it.
         */
        log_msg(LOG_WARN, "dispatcher connection lost: waiting for it", NULL);
        buf_reset(&out);
        proto_encode_ready(&out);
        continue;
      }
      log_msg(LOG_ERROR, "receive failed", "error", nng_strerror(nrv), NULL);
      rv = -EIO;
      break;
    }
    struct proto_job job;
    int drv = proto_decode_job(msg, len, &job);
    nng_free(msg, len);
    if (drv != 0) {
      /* Not a job we can trust: say so in the log and ask again; the dispatcher will see no result for it. */
      log_msg(LOG_WARN, "bad message from the dispatcher: ignored", NULL);
      buf_reset(&out);
      proto_encode_ready(&out);
      continue;
    }
    pthread_mutex_lock(&st.mu);
    int closed = st.closed;
    st.busy = !closed;
    pthread_mutex_unlock(&st.mu);
    if (closed) {
      /* The stop closed the socket as the job arrived: no result could be sent, the dispatcher fails it. */
      log_msg(LOG_WARN, "job dropped: stopping", "request_id", job.request_id, NULL);
      break;
    }
    /* Busy until the result is sent: a stop meanwhile leaves the socket open for it. */
    job_runner_run(r, &job, &res);
    have_result = 1;
  }

  pthread_mutex_lock(&st.mu);
  st.done = 1;
  if (!st.closed) nng_close(st.sock);
  st.closed = 1;
  pthread_mutex_unlock(&st.mu);
  /* Wake the signal thread so it can leave, then reap it. */
  pthread_kill(tid, SIGTERM);
  pthread_join(tid, NULL);
  pthread_mutex_destroy(&st.mu);
  buf_free(&out);
  log_msg(LOG_INFO, "fetcher stopped", NULL);
  return rv;
}
