/*
 * The dispatcher's shell against real nng: what tests/unit/test_dispatch_core.c cannot see because it drives the core
 * by hand. Each test runs in a process of its own, which first forks its dispatcher (before it uses nng, which is not
 * fork-safe), then plays fetchers (raw REQ sockets, so that every message the dispatcher sends them is seen, with the
 * request it answers) and workers (raw REQ sockets over ipc, or the real dispatch_client on a libuv loop), and checks
 * what reaches whom: the wire framing of jobs and answers, the answer to the right request, the connections the shell
 * watches and closes, the timer it arms for the core's deadlines, and the workers' client.
 *
 * No test waits on the clock to learn that something happened: each waits, with a bound, for the event itself (a
 * message, a connection opened or closed, a process ended). "Nothing else reached this fetcher" is proven by the
 * next message it receives being the one the test provokes next. The decisions themselves (caching and its lifetimes,
 * speech jobs and their limit, declines, refused connections, deadlines) are the core's, tested there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <uv.h>

#include "common/buf.h"
#include "common/config.h"
#include "common/util.h"
#include "gateway/dispatcher/dispatcher.h"
#include "gateway/http/dispatch_client.h"
#include "gateway/http/l1cache.h"

extern char **environ;

#define VID_A "vidAAAAAAA1"
#define VID_B "vidBBBBBBB2"
#define VID_C "vidCCCCCCC3"
#define VID_D "vidDDDDDDD4"
#define BODY_OK                                                                                                    \
  "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"hello\",\"segments\":[{\"text\":\"hello\",\"start\":0," \
  "\"duration\":1.5}]}"
#define WAIT_MS 5000 /* the bound of every wait for an event that must come */

/* ---- the dispatcher process ---- */

/* The dispatcher of the running test, killed by the teardown when a failed assertion skipped disp_stop. */
static pid_t live_pid;

struct disp {
  pid_t pid;
  char jobs_url[64];
  char worker_url[128];
};

static int free_tcp_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(sa);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
  close(fd);
  return ntohs(sa.sin_port);
}

/*
 * Starts a dispatcher with test defaults; extra ("VAR=value", NULL-terminated) overrides them. It is forked from the
 * test's process, which must not have used nng yet (nng is not fork-safe): every test calls this first.
 */
static void disp_start(struct disp *d, const char *const *extra) {
  static int seq;
  snprintf(d->jobs_url, sizeof(d->jobs_url), "tcp://127.0.0.1:%d", free_tcp_port());
  snprintf(d->worker_url, sizeof(d->worker_url), "ipc:///tmp/vts-test-disp-%d-%d.ipc", (int)getpid(), ++seq);
  static char jobs_env[96];
  snprintf(jobs_env, sizeof(jobs_env), "VTS_JOBS_URL=%s", d->jobs_url);
  const char *log_level = getenv("VTS_TEST_DISPATCHER_LOG") ? "VTS_LOG_LEVEL=debug" : "VTS_LOG_LEVEL=error";
  const char *defaults[] = {jobs_env, log_level, "VTS_JOB_TIMEOUT_MS=2000", "VTS_CACHE_TTL_S=60",
                            "VTS_NEGATIVE_TTL_S=60", "VTS_SPEECH_FALLBACK=false",
                            /*
                             * A stopping dispatcher waits for connected workers up to the drain time and 2 s: a
                             * worker peer whose connection is still closing must not hold it that long.
                             */
                            "VTS_DRAIN_TIMEOUT_MS=0", NULL};

  size_t n = 0;
  while (environ[n] != NULL) n++;
  const char **envp = calloc(n + 32, sizeof(*envp));
  size_t k = 0;
  for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) envp[k++] = extra[i]; /* getenv takes the first */
  for (size_t i = 0; defaults[i] != NULL; i++) envp[k++] = defaults[i];
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "VTS_", 4) != 0) envp[k++] = environ[i];
  envp[k] = NULL;

  fflush(NULL); /* what this process has buffered is written once, by itself */
  d->pid = fork();
  assert_true(d->pid >= 0);
  if (d->pid == 0) {
    struct vts_config cfg;
    char err[256];
    environ = (char **)envp;
    if (config_load(&cfg, err, sizeof(err)) != 0) {
      fprintf(stderr, "%s\n", err);
      exit(2);
    }
    /* No limiter's table: no batch item takes a unit of the month here. */
    exit(dispatcher_main(&cfg, d->worker_url, NULL, -1)); /* exit, not _exit: the leak checker runs at exit */
  }
  live_pid = d->pid;
  free(envp);
}

/* Waits up to timeout_ms for pid to end (its pidfd becomes readable), else kills it. Returns its status, or -1. */
static int wait_exit(pid_t pid, int timeout_ms) {
  int status;
  int pfd = pidfd_open(pid, 0);
  if (pfd >= 0) {
    struct pollfd p = {.fd = pfd, .events = POLLIN};
    int ready = poll(&p, 1, timeout_ms);
    close(pfd);
    if (ready == 1 && waitpid(pid, &status, 0) == pid) return status;
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

/* SIGTERM must stop the dispatcher promptly with status 0 (and, under ASan, without a leak). */
static void disp_stop(struct disp *d) {
  if (d->pid <= 0) return;
  kill(d->pid, SIGTERM);
  int status = wait_exit(d->pid, WAIT_MS);
  d->pid = 0;
  live_pid = 0;
  /* A dispatcher whose nng teardown stuck leaves without removing its socket file: the test leaves nothing in /tmp. */
  unlink(d->worker_url + strlen("ipc://"));
  assert_true(status != -1);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

static void disp_kill(struct disp *d) {
  kill(d->pid, SIGKILL);
  waitpid(d->pid, NULL, 0);
  unlink(d->worker_url + strlen("ipc://")); /* a killed listener leaves its socket file */
  d->pid = 0;
  live_pid = 0;
}

static int kill_leftover(void **state) {
  (void)state;
  if (live_pid > 0) {
    kill(live_pid, SIGKILL);
    waitpid(live_pid, NULL, 0);
    live_pid = 0;
  }
  return 0;
}

/* ---- fake peers: raw REQ sockets ---- */

/* The connections nng has made and finished closing for a peer, told by its pipe notifications. */
struct pipe_events {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  int added, removed;
};

struct peer {
  nng_socket s;
  uint32_t last_id; /* request id of the last request sent */
  nng_pipe pipe;    /* the connection the last message came in on */
  nng_dialer dialer;
  struct pipe_events *ev;
};

static void peer_pipe_event(nng_pipe pipe, nng_pipe_ev which, void *arg) {
  (void)pipe;
  struct pipe_events *ev = arg;
  pthread_mutex_lock(&ev->lock);
  if (which == NNG_PIPE_EV_ADD_POST)
    ev->added++;
  else
    ev->removed++;
  pthread_cond_broadcast(&ev->changed);
  pthread_mutex_unlock(&ev->lock);
}

/* Waits up to timeout_ms until *count (a field of p->ev) reaches n. Returns whether it did. */
static bool peer_wait_pipes(struct peer *p, const int *count, int n, int timeout_ms) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += timeout_ms / 1000;
  until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&p->ev->lock);
  int rv = 0;
  while (*count < n && rv == 0) rv = pthread_cond_timedwait(&p->ev->changed, &p->ev->lock, &until);
  bool reached = *count >= n;
  pthread_mutex_unlock(&p->ev->lock);
  return reached;
}

/* Opens a peer and waits until its first connection to url is made (the dialer retries until the listener is up). */
static void peer_open(struct peer *p, const char *url) {
  static uint32_t ids = 1;
  memset(p, 0, sizeof(*p));
  p->ev = calloc(1, sizeof(*p->ev));
  assert_non_null(p->ev);
  pthread_mutex_init(&p->ev->lock, NULL);
  pthread_cond_init(&p->ev->changed, NULL);
  assert_int_equal(nng_req0_open_raw(&p->s), 0);
  assert_int_equal(nng_pipe_notify(p->s, NNG_PIPE_EV_ADD_POST, peer_pipe_event, p->ev), 0);
  assert_int_equal(nng_pipe_notify(p->s, NNG_PIPE_EV_REM_POST, peer_pipe_event, p->ev), 0);
  /* The first connection is made as soon as the listener is there: the dialer retries every 10 to 50 ms. */
  assert_int_equal(nng_socket_set_ms(p->s, NNG_OPT_RECONNMINT, 10), 0);
  assert_int_equal(nng_socket_set_ms(p->s, NNG_OPT_RECONNMAXT, 50), 0);
  p->last_id = ids;
  ids += 1000;
  assert_int_equal(nng_dial(p->s, url, &p->dialer, NNG_FLAG_NONBLOCK), 0);
  if (!peer_wait_pipes(p, &p->ev->added, 1, WAIT_MS)) fail_msg("no connection to %s within %d ms", url, WAIT_MS);
  /*
   * Connected: no test needs it to dial again soon. A peer that redialled at once when the dispatcher closes its
   * connection would churn connections through the dispatcher's shutdown, where nng 1.5.2 may leave one half made (a
   * leak report under ASan).
   */
  assert_int_equal(nng_dialer_set_ms(p->dialer, NNG_OPT_RECONNMINT, 60000), 0);
  assert_int_equal(nng_dialer_set_ms(p->dialer, NNG_OPT_RECONNMAXT, 60000), 0);
}

/*
 * Ends a peer's connections: its dialer closes, with them, and dials no more. Its socket stays open until the process
 * ends: nng 1.5.2 can hang for good in nng_close (its reaper waits on a pipe forever, nanomsg/nng#1543), and from then
 * on every close and every connection's end in the process waits behind it. A dialer's close does not wait for the
 * reaper, and what an open socket holds stays reachable: no leak is reported.
 */
static void peer_close(struct peer *p) { assert_int_equal(nng_dialer_close(p->dialer), 0); }

/* Waits for the dispatcher to close p's connection. */
static void peer_expect_closed_by_the_dispatcher(struct peer *p) {
  if (!peer_wait_pipes(p, &p->ev->removed, 1, WAIT_MS))
    fail_msg("the dispatcher did not close the connection within %d ms", WAIT_MS);
}

static uint32_t peer_send(struct peer *p, const struct buf *b) {
  nng_msg *m;
  uint32_t id = 0x80000000u | ++p->last_id;
  assert_int_equal(nng_msg_alloc(&m, 0), 0);
  assert_int_equal(nng_msg_header_append_u32(m, id), 0);
  assert_int_equal(nng_msg_append(m, b->data, b->len), 0);
  assert_int_equal(nng_sendmsg(p->s, m, 0), 0);
  return id;
}

struct reply {
  nng_msg *msg;
  uint32_t id;
  uint32_t ttl_ms;         /* workers only: the cache lifetime prefix */
  struct proto_result res; /* workers */
};

/* Receives one message within timeout_ms. Returns 0, or -ETIMEDOUT. */
static int peer_recv(struct peer *p, int timeout_ms, struct reply *r) {
  memset(r, 0, sizeof(*r));
  assert_int_equal(nng_socket_set_ms(p->s, NNG_OPT_RECVTIMEO, timeout_ms), 0);
  int rv = nng_recvmsg(p->s, &r->msg, 0);
  if (rv == NNG_ETIMEDOUT) return -ETIMEDOUT;
  assert_int_equal(rv, 0);
  p->pipe = nng_msg_get_pipe(r->msg);
  assert_int_equal(nng_msg_header_len(r->msg), 4);
  assert_int_equal(nng_msg_header_trim_u32(r->msg, &r->id), 0);
  return 0;
}

/* Waits up to timeout_ms for a message on any of n peers. Returns the index of one that has one, or -1. */
static int peer_wait_any(struct peer *ps, int n, int timeout_ms) {
  struct pollfd pfd[8];
  assert_true(n <= 8);
  for (int i = 0; i < n; i++) {
    int fd;
    assert_int_equal(nng_socket_get_int(ps[i].s, NNG_OPT_RECVFD, &fd), 0);
    pfd[i] = (struct pollfd){.fd = fd, .events = POLLIN};
  }
  if (poll(pfd, (nfds_t)n, timeout_ms) <= 0) return -1;
  for (int i = 0; i < n; i++)
    if (pfd[i].revents & POLLIN) return i;
  return -1;
}

static void reply_free(struct reply *r) {
  if (r->msg != NULL) nng_msg_free(r->msg);
  r->msg = NULL;
}

static void fetcher_ready(struct peer *f) {
  struct buf b = BUF_INIT;
  assert_int_equal(proto_encode_ready(&b), 0);
  peer_send(f, &b);
  buf_free(&b);
}

/* Sends a RESULT, or a RESULT_LAST (a stopping fetcher's) when last. */
static void fetcher_result_as(struct peer *f, bool last, uint64_t job_id, uint8_t outcome, uint8_t source,
                              const char *body) {
  struct proto_result r;
  memset(&r, 0, sizeof(r));
  r.job_id = job_id;
  r.outcome = outcome;
  r.source = source;
  r.fetch_ms = 5;
  memcpy(r.lang, "en", 3);
  r.body = body;
  r.body_len = body ? (uint32_t)strlen(body) : 0;
  struct buf b = BUF_INIT;
  assert_int_equal(last ? proto_encode_result_last(&b, &r) : proto_encode_result(&b, &r), 0);
  peer_send(f, &b);
  buf_free(&b);
}

static void fetcher_result(struct peer *f, uint64_t job_id, uint8_t outcome, uint8_t source, const char *body) {
  fetcher_result_as(f, false, job_id, outcome, source, body);
}

/* The acknowledgement of a RESULT_LAST: a READY answering the fetcher's latest request. */
static void fetcher_expect_ready(struct peer *f) {
  struct reply r;
  struct buf ready = BUF_INIT;
  assert_int_equal(proto_encode_ready(&ready), 0);
  assert_int_equal(peer_recv(f, WAIT_MS, &r), 0);
  assert_int_equal(r.id, 0x80000000u | f->last_id);
  assert_int_equal(nng_msg_len(r.msg), ready.len);
  assert_memory_equal(nng_msg_body(r.msg), ready.data, ready.len);
  assert_int_equal(proto_peek_type(nng_msg_body(r.msg), nng_msg_len(r.msg)), PROTO_READY);
  reply_free(&r);
  buf_free(&ready);
}

/*
 * The next message f receives, which must be a job answering its latest request: any other message that reached f
 * before it fails the test.
 */
static void fetcher_job(struct peer *f, struct proto_job *job) {
  struct reply r;
  if (peer_recv(f, WAIT_MS, &r) != 0) fail_msg("no job reached the fetcher within %d ms", WAIT_MS);
  assert_int_equal(r.id, 0x80000000u | f->last_id);
  assert_int_equal(proto_peek_type(nng_msg_body(r.msg), nng_msg_len(r.msg)), PROTO_JOB);
  assert_int_equal(proto_decode_job(nng_msg_body(r.msg), nng_msg_len(r.msg), job), 0);
  reply_free(&r);
}

/* The next job f receives, which must be of video_id. */
static uint64_t fetcher_job_of(struct peer *f, const char *video_id) {
  struct proto_job job;
  fetcher_job(f, &job);
  assert_string_equal(job.video_id, video_id);
  return job.job_id;
}

/* Sends a worker's request for a job of kind on video_id, in lang, translated into translate ("" for none). */
static uint32_t worker_send_job(struct peer *w, uint8_t kind, const char *video_id, const char *lang,
                                const char *translate) {
  struct proto_job j;
  memset(&j, 0, sizeof(j));
  j.kind = kind;
  memcpy(j.video_id, video_id, 12);
  snprintf(j.lang, sizeof(j.lang), "%s", lang);
  snprintf(j.translate, sizeof(j.translate), "%s", translate);
  snprintf(j.request_id, sizeof(j.request_id), "req-%s", video_id);
  struct buf b = BUF_INIT;
  assert_int_equal(proto_encode_job(&b, &j), 0);
  uint32_t id = peer_send(w, &b);
  buf_free(&b);
  return id;
}

static uint32_t worker_send(struct peer *w, const char *video_id, const char *lang) {
  return worker_send_job(w, PROTO_KIND_CAPTIONS, video_id, lang, "");
}

/* The next answer w receives (caller frees). */
static void worker_reply(struct peer *w, struct reply *r) {
  if (peer_recv(w, WAIT_MS, r) != 0) fail_msg("no answer reached the worker within %d ms", WAIT_MS);
  const unsigned char *b = nng_msg_body(r->msg);
  size_t len = nng_msg_len(r->msg);
  assert_int_equal(proto_peek_type(b, len), PROTO_RESULT);
  assert_int_equal(proto_decode_result(b, len, &r->res), 0);
  r->ttl_ms = r->res.cache_ms;
}

static void expect_body(const struct proto_result *res, const char *body) {
  assert_int_equal(res->body_len, strlen(body));
  assert_memory_equal(res->body, body, strlen(body));
}

/* The next answer w receives, which must answer request id with outcome (and body, unless NULL). */
static void worker_expect(struct peer *w, uint32_t id, uint8_t outcome, const char *body) {
  struct reply r;
  worker_reply(w, &r);
  assert_int_equal(r.id, id);
  assert_int_equal(r.res.outcome, outcome);
  if (body != NULL) expect_body(&r.res, body);
  reply_free(&r);
}

/* A dispatcher with one fetcher that has asked for work and one worker, the start of most tests. */
struct rig {
  struct disp d;
  struct peer f, w;
  bool has_f, has_w;
};

static void rig_up(struct rig *r, const char *const *env, bool fetcher, bool worker) {
  memset(r, 0, sizeof(*r));
  disp_start(&r->d, env);
  r->has_f = fetcher;
  r->has_w = worker;
  if (fetcher) {
    peer_open(&r->f, r->d.jobs_url);
    fetcher_ready(&r->f);
  }
  if (worker) peer_open(&r->w, r->d.worker_url);
}

static void rig_down(struct rig *r) {
  if (r->has_f) peer_close(&r->f);
  if (r->has_w) peer_close(&r->w);
  disp_stop(&r->d);
}

/* ---- the shell on the wire ---- */

static void test_a_job_reaches_a_fetcher_that_asked_and_its_answer_the_request(void **state) {
  (void)state;
  struct rig g;
  struct peer f1;
  struct proto_job job;
  rig_up(&g, NULL, true, true);
  peer_open(&f1, g.d.jobs_url); /* connected, has not asked */

  uint32_t wid = worker_send(&g.w, VID_A, "en");
  fetcher_job(&g.f, &job);
  assert_string_equal(job.video_id, VID_A);
  assert_string_equal(job.lang, "en");
  assert_string_equal(job.request_id, "req-" VID_A);
  assert_int_equal(job.kind, PROTO_KIND_CAPTIONS);
  assert_true(job.job_id != 0);
  assert_true(job.deadline_ms > 1500 && job.deadline_ms <= 2000);

  /* The only asking fetcher is busy: the second job waits until f1 asks, and answers f1's request. */
  worker_send(&g.w, VID_B, "en");
  fetcher_ready(&f1);
  assert_true(fetcher_job_of(&f1, VID_B) != job.job_id);

  fetcher_result(&g.f, job.job_id, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);
  struct reply r;
  worker_reply(&g.w, &r);
  assert_int_equal(r.id, wid);
  assert_int_equal(r.res.outcome, PROTO_OK);
  assert_int_equal(r.res.source, PROTO_SOURCE_CAPTIONS);
  assert_string_equal(r.res.lang, "en");
  assert_int_equal(r.ttl_ms, 60000); /* VTS_CACHE_TTL_S: how long the worker may keep it */
  expect_body(&r.res, BODY_OK);
  reply_free(&r);

  /* Its result made g.f idle: the next message it gets is the next request's job (so B never reached it). */
  worker_send(&g.w, VID_C, "en");
  fetcher_job_of(&g.f, VID_C);

  peer_close(&f1);
  rig_down(&g);
}

static void test_a_hundred_identical_requests_on_one_connection_make_one_fetch_and_a_hundred_answers(void **state) {
  (void)state;
  struct rig g;
  struct peer f[3];
  struct proto_job job;
  rig_up(&g, NULL, false, true);
  for (int i = 0; i < 3; i++) {
    peer_open(&f[i], g.d.jobs_url);
    fetcher_ready(&f[i]);
  }
  uint32_t ids[100];
  for (int i = 0; i < 100; i++) ids[i] = worker_send(&g.w, VID_A, "");

  int got = peer_wait_any(f, 3, WAIT_MS);
  if (got < 0) fail_msg("no fetcher got the job within %d ms", WAIT_MS);
  fetcher_job(&f[got], &job);
  assert_string_equal(job.video_id, VID_A);
  fetcher_result(&f[got], job.job_id, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);

  /* All from one worker connection: a hundred answers at once must all get through, each to its request. */
  bool seen[100] = {false};
  for (int n = 0; n < 100; n++) {
    struct reply r;
    worker_reply(&g.w, &r);
    assert_int_equal(r.res.outcome, PROTO_OK);
    expect_body(&r.res, BODY_OK);
    int k = -1;
    for (int i = 0; i < 100; i++)
      if (ids[i] == r.id) k = i;
    assert_true(k >= 0);
    assert_false(seen[k]);
    seen[k] = true;
    reply_free(&r);
  }

  /*
   * One fetch: once every answer is out, each fetcher is given exactly one of the next three requests' jobs as the
   * next message it receives, whichever order the three asked in (no fetcher was given A twice, or A's duplicates).
   */
  worker_send(&g.w, VID_B, "en");
  worker_send(&g.w, VID_C, "en");
  worker_send(&g.w, VID_D, "en");
  const char *next[] = {VID_B, VID_C, VID_D};
  bool taken[3] = {false, false, false};
  for (int i = 0; i < 3; i++) {
    fetcher_job(&f[i], &job);
    int k = 0;
    while (k < 3 && strcmp(job.video_id, next[k]) != 0) k++;
    if (k == 3 || taken[k]) fail_msg("fetcher %d got %s, expected one of the jobs of B, C and D once", i, job.video_id);
    taken[k] = true;
  }

  for (int i = 0; i < 3; i++) peer_close(&f[i]);
  rig_down(&g);
}

static void test_fetcher_lost_with_its_job_fails_it_at_once_and_never_reruns_it(void **state) {
  (void)state;
  struct rig g;
  struct peer f2;
  struct reply r;
  rig_up(&g, NULL, true, true);
  uint32_t wid_a = worker_send(&g.w, VID_A, "en");
  uint64_t job_a = fetcher_job_of(&g.f, VID_A);
  peer_open(&f2, g.d.jobs_url);
  fetcher_ready(&f2);
  uint32_t wid_b = worker_send(&g.w, VID_B, "en");
  uint64_t job_b = fetcher_job_of(&f2, VID_B);

  /* The connection drops (nng_pipe_close does not wait for nng's reaper, unlike nng_close: see peer_close). */
  uint64_t t0 = util_now_ms();
  assert_int_equal(nng_pipe_close(g.f.pipe), 0);
  worker_reply(&g.w, &r);
  uint64_t took = util_now_ms() - t0;
  assert_int_equal(r.id, wid_a);
  assert_int_equal(r.res.outcome, PROTO_INTERNAL);
  assert_int_equal(proto_outcome_status(r.res.outcome), 500);
  assert_string_equal(r.res.detail, "fetcher_lost");
  reply_free(&r);
  if (took >= 100) fail_msg("the worker got its 500 after %llu ms, expected under 100", (unsigned long long)took);

  /* f2, idle again, is given the next request's job: A was not queued again behind B. */
  fetcher_result(&f2, job_b, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);
  worker_expect(&g.w, wid_b, PROTO_OK, BODY_OK);
  worker_send(&g.w, VID_C, "en");
  assert_true(fetcher_job_of(&f2, VID_C) != job_a);

  peer_close(&f2);
  rig_down(&g);
}

static void test_job_without_fetcher_is_shed_at_its_deadline(void **state) {
  (void)state;
  struct rig g;
  struct peer f;
  struct reply r;
  const char *env[] = {"VTS_JOB_TIMEOUT_MS=300", NULL};
  rig_up(&g, env, false, true);
  uint64_t t0 = util_now_ms();
  worker_send(&g.w, VID_A, "en");
  worker_reply(&g.w, &r);
  uint64_t took = util_now_ms() - t0;
  assert_int_equal(r.res.outcome, PROTO_OVERLOADED);
  assert_int_equal(r.res.retry_after_s, 1);
  assert_string_equal(r.res.detail, "queue_timeout");
  assert_int_equal(r.ttl_ms, 0);
  reply_free(&r);
  /* The shell wakes for the core's deadline, neither before it nor long after. */
  if (took < 280 || took > 1000) fail_msg("failed after %llu ms, expected about 300", (unsigned long long)took);

  /* The failed job is gone: a fetcher arriving now is first given the next request's job. */
  peer_open(&f, g.d.jobs_url);
  fetcher_ready(&f);
  worker_send(&g.w, VID_B, "en");
  fetcher_job_of(&f, VID_B);
  peer_close(&f);
  rig_down(&g);
}

/* Answers the next job the fetcher is given, checking its kind, language and translation, and reads the answer. */
static void serve_one(struct rig *g, uint8_t kind, const char *lang, const char *translate, uint8_t outcome,
                      const char *body, uint8_t want_outcome) {
  struct proto_job job;
  struct reply r;
  fetcher_job(&g->f, &job);
  assert_int_equal(job.kind, kind);
  assert_string_equal(job.lang, lang);
  assert_string_equal(job.translate, translate);
  fetcher_result(&g->f, job.job_id, outcome, kind == PROTO_KIND_TRACKS ? PROTO_SOURCE_NONE : PROTO_SOURCE_CAPTIONS,
                 body);
  worker_reply(&g->w, &r);
  assert_int_equal(r.res.outcome, want_outcome);
  if (body != NULL) expect_body(&r.res, body);
  reply_free(&r);
}

static void test_tracks_translations_and_languages_are_jobs_and_cache_entries_of_their_own(void **state) {
  (void)state;
  struct rig g;
  struct reply r;
  static const char tracks[] = "{\"tracks\":[],\"translationLanguages\":[]}";
  const char *env[] = {"VTS_SPEECH_FALLBACK=true", NULL};
  rig_up(&g, env, true, true);
  /* A translation of a video without captions is not available: no speech job follows (the next job is C's). */
  worker_send_job(&g.w, PROTO_KIND_CAPTIONS, VID_A, "en", "fr");
  serve_one(&g, PROTO_KIND_CAPTIONS, "en", "fr", PROTO_NO_CAPTIONS, NULL, PROTO_NOT_AVAILABLE);
  worker_send_job(&g.w, PROTO_KIND_CAPTIONS, VID_A, "en", "fr");
  worker_reply(&g.w, &r);
  assert_int_equal(r.res.outcome, PROTO_NOT_AVAILABLE); /* cached for the negative lifetime */
  assert_true(r.ttl_ms > 50000 && r.ttl_ms <= 60000);
  reply_free(&r);
  /* Neither the tracks nor the untranslated transcript nor another language are that cached answer. */
  worker_send_job(&g.w, PROTO_KIND_TRACKS, VID_A, "", "");
  serve_one(&g, PROTO_KIND_TRACKS, "", "", PROTO_OK, tracks, PROTO_OK);
  worker_send_job(&g.w, PROTO_KIND_CAPTIONS, VID_A, "en", "");
  serve_one(&g, PROTO_KIND_CAPTIONS, "en", "", PROTO_OK, BODY_OK, PROTO_OK);
  /* The tracks are cached under their own key. */
  worker_send_job(&g.w, PROTO_KIND_TRACKS, VID_A, "", "");
  worker_reply(&g.w, &r);
  expect_body(&r.res, tracks);
  reply_free(&r);
  worker_send_job(&g.w, PROTO_KIND_CAPTIONS, VID_A, "de", "");
  serve_one(&g, PROTO_KIND_CAPTIONS, "de", "", PROTO_OK, BODY_OK, PROTO_OK);
  rig_down(&g);
}

static void test_fetcher_speaking_garbage_fails_its_job_and_loses_its_connection(void **state) {
  (void)state;
  struct rig g;
  struct reply r;
  rig_up(&g, NULL, true, true);
  worker_send(&g.w, VID_A, "en");
  fetcher_job_of(&g.f, VID_A);
  struct buf junk = BUF_INIT;
  buf_puts(&junk, "VT\x01\x02 not a result");
  peer_send(&g.f, &junk);
  buf_free(&junk);
  worker_reply(&g.w, &r);
  assert_int_equal(r.res.outcome, PROTO_INTERNAL);
  assert_string_equal(r.res.detail, "protocol_error");
  reply_free(&r);
  peer_expect_closed_by_the_dispatcher(&g.f);
  rig_down(&g);
}

static void test_result_for_an_unknown_job_on_a_new_connection_means_idle(void **state) {
  (void)state;
  struct rig g;
  rig_up(&g, NULL, false, true);
  peer_open(&g.f, g.d.jobs_url);
  g.has_f = true;
  /* What a fetcher's REQ socket re-sends to a restarted dispatcher. */
  fetcher_result(&g.f, 424242, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);
  worker_send(&g.w, VID_A, "en");
  fetcher_job_of(&g.f, VID_A);
  rig_down(&g);
}

static void test_last_result_is_acknowledged_and_the_queued_job_goes_to_another_fetcher(void **state) {
  (void)state;
  struct rig g;
  struct peer f2;
  rig_up(&g, NULL, true, true);
  uint32_t wid_a = worker_send(&g.w, VID_A, "en");
  uint64_t job_a = fetcher_job_of(&g.f, VID_A);
  uint32_t wid_b = worker_send(&g.w, VID_B, "en"); /* queued: the only fetcher is busy */

  /* The fetcher is stopping: its result is delivered, and the answer to that last request is a READY. */
  fetcher_result_as(&g.f, true, job_a, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);
  fetcher_expect_ready(&g.f);
  worker_expect(&g.w, wid_a, PROTO_OK, BODY_OK);

  /* Another fetcher takes the queued job. */
  peer_open(&f2, g.d.jobs_url);
  fetcher_ready(&f2);
  uint64_t job_b = fetcher_job_of(&f2, VID_B);
  fetcher_result(&f2, job_b, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);
  worker_expect(&g.w, wid_b, PROTO_OK, BODY_OK);

  /* The leaving fetcher's connection dropping now fails nothing: f2's job C is answered with f2's result. */
  uint32_t wid_c = worker_send(&g.w, VID_C, "en");
  uint64_t job_c = fetcher_job_of(&f2, VID_C);
  assert_int_equal(nng_pipe_close(g.f.pipe), 0);
  fetcher_result(&f2, job_c, PROTO_NOT_AVAILABLE, PROTO_SOURCE_NONE, NULL);
  worker_expect(&g.w, wid_c, PROTO_NOT_AVAILABLE, NULL);

  peer_close(&f2);
  rig_down(&g);
}

static void test_last_result_for_no_job_is_acknowledged_and_gets_no_job(void **state) {
  (void)state;
  struct rig g;
  struct peer f2;
  rig_up(&g, NULL, false, true);
  peer_open(&g.f, g.d.jobs_url);
  g.has_f = true;
  /* A stopping fetcher whose RESULT_LAST reaches a restarted dispatcher. */
  fetcher_result_as(&g.f, true, 424242, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);
  fetcher_expect_ready(&g.f);
  /* It is not idle: the job waits for a fetcher that asks after it, whichever of the two the dispatcher hears first. */
  worker_send(&g.w, VID_A, "en");
  peer_open(&f2, g.d.jobs_url);
  fetcher_ready(&f2);
  fetcher_job_of(&f2, VID_A);
  peer_close(&f2);
  rig_down(&g);
}

static void test_malformed_worker_request_gets_500(void **state) {
  (void)state;
  struct rig g;
  struct reply r;
  rig_up(&g, NULL, false, true);
  struct buf junk = BUF_INIT;
  buf_puts(&junk, "hello");
  uint32_t id = peer_send(&g.w, &junk);
  buf_free(&junk);
  worker_reply(&g.w, &r);
  assert_int_equal(r.id, id);
  assert_int_equal(r.res.outcome, PROTO_INTERNAL);
  assert_int_equal(proto_outcome_status(r.res.outcome), 500);
  assert_int_equal(r.ttl_ms, 0);
  reply_free(&r);
  rig_down(&g);
}

/* ---- the workers' client on a libuv loop ---- */

struct calls {
  int n;
  bool had_result;
  uint8_t outcome;
  uint8_t source;
  char body[256];
  uint64_t at_ms;
};

static void record_cb(void *arg, const struct proto_result *res, struct entity *ent) {
  struct calls *c = arg;
  /* The entity handed beside a result holds exactly its body. */
  if (res != NULL) {
    assert_non_null(ent);
    assert_int_equal(ent->form[ENTITY_IDENTITY].len, res->body_len);
    if (res->body_len > 0) assert_memory_equal(ent->form[ENTITY_IDENTITY].data, res->body, res->body_len);
  } else {
    assert_null(ent);
  }
  c->n++;
  c->at_ms = util_now_ms();
  c->had_result = res != NULL;
  if (res != NULL) {
    c->outcome = res->outcome;
    c->source = res->source;
    snprintf(c->body, sizeof(c->body), "%.*s", (int)res->body_len, res->body ? res->body : "");
  }
}

static void keepalive_cb(uv_timer_t *t) { (void)t; }

/* A rig whose worker is the real client on a libuv loop, with one job submitted and taken by the fetcher. */
struct client_rig {
  struct rig g;
  uv_loop_t loop;
  uv_timer_t keepalive; /* the link does not hold the loop open by itself */
  struct vts_config cfg;
  struct l1cache *l1;         /* the worker's L1, lent to the link */
  struct proto_job submitted; /* what was submitted */
  struct proto_job taken;     /* what the fetcher received */
};

static void client_up(struct client_rig *u, const char *vid, struct calls *c) {
  char err[256];
  rig_up(&u->g, NULL, true, false);
  assert_int_equal(config_load(&u->cfg, err, sizeof(err)), 0);
  u->cfg.job_timeout_ms = 2000;
  u->cfg.speech_fallback = false;
  assert_int_equal(uv_loop_init(&u->loop), 0);
  uv_timer_init(&u->loop, &u->keepalive);
  uv_timer_start(&u->keepalive, keepalive_cb, 10, 10);
  u->l1 = l1cache_new();
  assert_non_null(u->l1);
  assert_int_equal(dispatch_client_init(&u->loop, &u->cfg, u->g.d.worker_url, u->l1), 0);

  memset(&u->submitted, 0, sizeof(u->submitted));
  u->submitted.kind = PROTO_KIND_CAPTIONS;
  memcpy(u->submitted.video_id, vid, 12);
  memcpy(u->submitted.lang, "en", 3);
  memcpy(u->submitted.request_id, "req-client", 11);
  assert_int_equal(dispatch_submit(&u->submitted, record_cb, c), 0);
  fetcher_job(&u->g.f, &u->taken);
  assert_string_equal(u->taken.request_id, "req-client");
  assert_string_equal(u->taken.video_id, vid);
}

/* Runs the loop until c has been called n times or timeout_ms passes. */
static void client_run_until(struct client_rig *u, struct calls *c, int n, int timeout_ms) {
  uint64_t end = util_now_ms() + (uint64_t)timeout_ms;
  while (c->n < n && util_now_ms() < end) uv_run(&u->loop, UV_RUN_ONCE);
}

/*
 * Closes the client (if still open), runs the loop until nothing is left on it, closes it and the rig (a dispatcher
 * already killed is not stopped again): every callback still due has been made when it returns.
 */
static void client_down(struct client_rig *u) {
  dispatch_client_close();
  l1cache_free(u->l1);
  uv_close((uv_handle_t *)&u->keepalive, NULL);
  uv_run(&u->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&u->loop), 0);
  rig_down(&u->g);
}

static void test_client_calls_back_once_with_the_result_then_answers_from_l1(void **state) {
  (void)state;
  struct client_rig u;
  struct calls c1 = {0}, c2 = {0};
  client_up(&u, VID_A, &c1);
  fetcher_result(&u.g.f, u.taken.job_id, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);
  client_run_until(&u, &c1, 1, WAIT_MS);
  assert_int_equal(c1.n, 1);
  assert_true(c1.had_result);
  assert_int_equal(c1.outcome, PROTO_OK);
  assert_string_equal(c1.body, BODY_OK);

  /* With the dispatcher gone, the worker's own cache still answers the hot entry. */
  disp_kill(&u.g.d);
  assert_int_equal(dispatch_submit(&u.submitted, record_cb, &c2), 0);
  assert_int_equal(c2.n, 0); /* never inside dispatch_submit */
  client_run_until(&u, &c2, 1, WAIT_MS);
  assert_int_equal(c2.n, 1);
  assert_true(c2.had_result);
  assert_int_equal(c2.outcome, PROTO_OK);
  assert_int_equal(c2.source, PROTO_SOURCE_CAPTIONS);
  assert_string_equal(c2.body, BODY_OK);
  client_down(&u);
  /* The loop ran dry: no second call came for either. */
  assert_int_equal(c1.n, 1);
  assert_int_equal(c2.n, 1);
}

static void test_client_fails_in_flight_jobs_at_once_when_the_dispatcher_dies(void **state) {
  (void)state;
  struct client_rig u;
  struct calls c = {0};
  client_up(&u, VID_B, &c);
  uint64_t t0 = util_now_ms();
  disp_kill(&u.g.d);
  client_run_until(&u, &c, 1, WAIT_MS);
  uint64_t took = c.at_ms - t0;
  assert_int_equal(c.n, 1);
  assert_false(c.had_result);
  if (took >= 100)
    fail_msg("cb(NULL) came %llu ms after the dispatcher died, expected under 100", (unsigned long long)took);
  client_down(&u);
  assert_int_equal(c.n, 1);
}

static void test_client_close_fails_pending_jobs_with_null(void **state) {
  (void)state;
  struct client_rig u;
  struct calls c = {0};
  client_up(&u, VID_C, &c);
  dispatch_client_close();
  assert_int_equal(c.n, 1);
  assert_false(c.had_result);
  assert_int_equal(dispatch_submit(&u.submitted, record_cb, &c), -ENOTCONN);
  client_down(&u);
  assert_int_equal(c.n, 1);
}

static void test_client_without_dispatcher_fails_after_the_connect_wait(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_timer_t keepalive;
  struct vts_config cfg;
  struct calls c = {0};
  char err[256], url[128];
  assert_int_equal(config_load(&cfg, err, sizeof(err)), 0);
  snprintf(url, sizeof(url), "ipc:///tmp/vts-test-disp-%d-nobody.ipc", (int)getpid());
  assert_int_equal(uv_loop_init(&loop), 0);
  uv_timer_init(&loop, &keepalive);
  uv_timer_start(&keepalive, keepalive_cb, 10, 10);
  struct l1cache *l1 = l1cache_new();
  assert_non_null(l1);
  assert_int_equal(dispatch_client_init(&loop, &cfg, url, l1), 0);
  struct proto_job j;
  memset(&j, 0, sizeof(j));
  j.kind = PROTO_KIND_CAPTIONS;
  memcpy(j.video_id, VID_A, 12);
  uint64_t t0 = util_now_ms();
  assert_int_equal(dispatch_submit(&j, record_cb, &c), 0);
  uint64_t end = t0 + WAIT_MS;
  while (c.n == 0 && util_now_ms() < end) uv_run(&loop, UV_RUN_ONCE);
  uint64_t took = c.at_ms - t0;
  assert_int_equal(c.n, 1);
  assert_false(c.had_result);
  /* The wait for a connection is the client's own (about 1 s): what this test is about. */
  if (took < 900 || took > 1500) fail_msg("cb(NULL) after %llu ms, expected about 1000", (unsigned long long)took);
  dispatch_client_close();
  l1cache_free(l1);
  uv_close((uv_handle_t *)&keepalive, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  assert_int_equal(c.n, 1);
}

/*
 * Runs each test in a process of its own (forked from this one, which never uses nng), at most TEST_PROCESS_MS each:
 * nng 1.5.2's reaper, one per process, can stick for good on a connection's end (nanomsg/nng#1543), and every close
 * and every connection's end after it in that process waits behind it. A test must not pay for what an earlier one
 * left. Returns the number of tests that failed.
 */
#define TEST_PROCESS_MS 60000
static int run_each_in_its_own_process(const struct CMUnitTest *tests, size_t n) {
  int failed = 0;
  for (size_t i = 0; i < n; i++) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return (int)n;
    if (pid == 0) {
      exit(_cmocka_run_group_tests(tests[i].name, &tests[i], 1, NULL, NULL));
    }
    int status = wait_exit(pid, TEST_PROCESS_MS);
    if (status == -1)
      fprintf(stderr, "[  FAILED  ] %s: its process did not end within %d ms\n", tests[i].name, TEST_PROCESS_MS);
    else if (WIFSIGNALED(status))
      fprintf(stderr, "[  FAILED  ] %s: its process was killed by signal %d\n", tests[i].name, WTERMSIG(status));
    else if (WEXITSTATUS(status) != 0)
      fprintf(stderr, "[  FAILED  ] %s: its process exited with %d\n", tests[i].name, WEXITSTATUS(status));
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed++;
  }
  fprintf(stderr, "[==========] %zu test(s), each in a process of its own: %zu passed, %d failed\n", n,
          n - (size_t)failed, failed);
  return failed;
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_a_job_reaches_a_fetcher_that_asked_and_its_answer_the_request, kill_leftover),
      cmocka_unit_test_teardown(
          test_a_hundred_identical_requests_on_one_connection_make_one_fetch_and_a_hundred_answers, kill_leftover),
      cmocka_unit_test_teardown(test_fetcher_lost_with_its_job_fails_it_at_once_and_never_reruns_it, kill_leftover),
      cmocka_unit_test_teardown(test_job_without_fetcher_is_shed_at_its_deadline, kill_leftover),
      cmocka_unit_test_teardown(test_tracks_translations_and_languages_are_jobs_and_cache_entries_of_their_own,
                                kill_leftover),
      cmocka_unit_test_teardown(test_fetcher_speaking_garbage_fails_its_job_and_loses_its_connection, kill_leftover),
      cmocka_unit_test_teardown(test_result_for_an_unknown_job_on_a_new_connection_means_idle, kill_leftover),
      cmocka_unit_test_teardown(test_last_result_is_acknowledged_and_the_queued_job_goes_to_another_fetcher,
                                kill_leftover),
      cmocka_unit_test_teardown(test_last_result_for_no_job_is_acknowledged_and_gets_no_job, kill_leftover),
      cmocka_unit_test_teardown(test_malformed_worker_request_gets_500, kill_leftover),
      cmocka_unit_test_teardown(test_client_calls_back_once_with_the_result_then_answers_from_l1, kill_leftover),
      cmocka_unit_test_teardown(test_client_fails_in_flight_jobs_at_once_when_the_dispatcher_dies, kill_leftover),
      cmocka_unit_test_teardown(test_client_close_fails_pending_jobs_with_null, kill_leftover),
      cmocka_unit_test_teardown(test_client_without_dispatcher_fails_after_the_connect_wait, kill_leftover),
  };
  return run_each_in_its_own_process(tests, sizeof(tests) / sizeof(tests[0])) == 0 ? 0 : 1;
}
