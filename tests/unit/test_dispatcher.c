/*
 * The dispatcher against real nng: each test starts a dispatcher process (this program re-executed with
 * --dispatcher, because nng is not fork-safe and this process already runs nng threads), plays fetchers (raw REQ
 * sockets, so that every message the dispatcher sends them is seen) and workers (raw REQ sockets over ipc, or the
 * real dispatch_client on a libuv loop) and checks what reaches whom, and when.
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
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
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
#include "gateway/http/dispatch_client.h"
#include "gateway/dispatcher/dispatcher.h"

extern char **environ;

#define VID_A "vidAAAAAAA1"
#define VID_B "vidBBBBBBB2"
#define VID_C "vidCCCCCCC3"
#define BODY_OK                                                                                                    \
  "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"hello\",\"segments\":[{\"text\":\"hello\",\"start\":0," \
  "\"duration\":1.5}]}"
#define QUIET_MS 300 /* how long "nothing arrives" is watched */

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

/* Starts a dispatcher with test defaults; extra ("VAR=value", NULL-terminated) overrides them. */
static void disp_start(struct disp *d, const char *const *extra) {
  static int seq;
  snprintf(d->jobs_url, sizeof(d->jobs_url), "tcp://127.0.0.1:%d", free_tcp_port());
  snprintf(d->worker_url, sizeof(d->worker_url), "ipc:///tmp/vts-test-disp-%d-%d.ipc", (int)getpid(), ++seq);
  static char jobs_env[96];
  snprintf(jobs_env, sizeof(jobs_env), "VTS_JOBS_URL=%s", d->jobs_url);
  const char *log_level = getenv("VTS_TEST_DISPATCHER_LOG") ? "VTS_LOG_LEVEL=debug" : "VTS_LOG_LEVEL=error";
  const char *defaults[] = {jobs_env, log_level, "VTS_JOB_TIMEOUT_MS=2000", "VTS_CACHE_TTL_S=60",
                            "VTS_NEGATIVE_TTL_S=1", "VTS_SPEECH_FALLBACK=false",
                            /*
                             * A stopping dispatcher waits for connected workers up to the drain time and 2 s: a
                             * test peer whose close sticks (the nng 1.5.2 race above) must not hold it past
                             * disp_stop's wait.
                             */
                            "VTS_DRAIN_TIMEOUT_MS=0", NULL};

  /* Built before fork: between fork and exec the child may only call async-signal-safe functions. */
  size_t n = 0;
  while (environ[n] != NULL) n++;
  const char **envp = calloc(n + 32, sizeof(*envp));
  size_t k = 0;
  for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) envp[k++] = extra[i]; /* getenv takes the first */
  for (size_t i = 0; defaults[i] != NULL; i++) envp[k++] = defaults[i];
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "VTS_", 4) != 0) envp[k++] = environ[i];
  envp[k] = NULL;
  char *argv[] = {"test_dispatcher", "--dispatcher", d->worker_url, NULL};

  d->pid = fork();
  assert_true(d->pid >= 0);
  if (d->pid == 0) {
    execve("/proc/self/exe", argv, (char *const *)envp);
    _exit(127);
  }
  live_pid = d->pid;
  free(envp);
}

static int wait_exit(pid_t pid, int timeout_ms) {
  uint64_t end = util_now_ms() + (uint64_t)timeout_ms;
  int status;
  while (util_now_ms() < end) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    usleep(5000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

/* SIGTERM must stop the dispatcher promptly with status 0 (and, under ASan, without a leak). */
static void disp_stop(struct disp *d) {
  if (d->pid <= 0) return;
  kill(d->pid, SIGTERM);
  int status = wait_exit(d->pid, 5000);
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

static void dial_wait(nng_socket s, const char *url) {
  uint64_t end = util_now_ms() + 5000;
  int rv = nng_dial(s, url, NULL, 0);
  while (rv != 0 && util_now_ms() < end) {
    usleep(10000);
    rv = nng_dial(s, url, NULL, 0);
  }
  assert_int_equal(rv, 0);
}

/* ---- fake peers: raw REQ sockets ---- */

struct peer {
  nng_socket s;
  uint32_t last_id;          /* request id of the last request sent */
  nng_pipe pipe;             /* the connection the last message came in on */
  _Atomic int pipes_removed; /* connections nng has finished closing */
};

static void peer_pipe_removed(nng_pipe pipe, nng_pipe_ev ev, void *arg) {
  (void)pipe, (void)ev;
  atomic_fetch_add(&((struct peer *)arg)->pipes_removed, 1);
}

/*
 * Gives nng up to 1 s to finish closing a connection the other end closed: closing the socket while nng 1.5.2 is still
 * reaping that connection can leak its pipe (seen under load), which the leak checker reports. What the test checks
 * does not depend on it.
 */
static void peer_settle_remote_close(struct peer *p) {
  uint64_t end = util_now_ms() + 1000;
  while (atomic_load(&p->pipes_removed) == 0 && util_now_ms() < end) usleep(5000);
}

struct reply {
  nng_msg *msg;
  uint32_t id;
  uint32_t ttl_ms;         /* workers only: the cache lifetime prefix */
  struct proto_result res; /* workers */
  struct proto_job job;    /* fetchers */
};

static void peer_open(struct peer *p, const char *url) {
  static uint32_t ids = 1;
  assert_int_equal(nng_req0_open_raw(&p->s), 0);
  atomic_init(&p->pipes_removed, 0);
  assert_int_equal(nng_pipe_notify(p->s, NNG_PIPE_EV_REM_POST, peer_pipe_removed, p), 0);
  p->last_id = ids;
  ids += 1000;
  dial_wait(p->s, url);
}

static void *peer_close_thread(void *arg) {
  nng_close(*(nng_socket *)arg);
  return NULL;
}

/*
 * nng 1.5.2 can hang for good in nng_close (its reaper waits on a pipe forever, nanomsg/nng#1543): the test moves
 * on after 1 s, leaving the socket to the stuck thread. No test relies on a close for what it checks.
 */
static void peer_close(struct peer *p) {
  nng_socket *s = malloc(sizeof(*s));
  pthread_t t;
  *s = p->s;
  assert_int_equal(pthread_create(&t, NULL, peer_close_thread, s), 0);
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 1; /* a close that works takes milliseconds; a stuck one never ends */
  if (pthread_timedjoin_np(t, NULL, &until) == 0) {
    free(s);
    return;
  }
  fprintf(stderr, "note: nng_close of a test peer is stuck (nng 1.5.2 close race); going on\n");
  pthread_detach(t);
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
static void fetcher_expect_ready(struct peer *f, int timeout_ms) {
  struct reply r;
  struct buf ready = BUF_INIT;
  assert_int_equal(proto_encode_ready(&ready), 0);
  assert_int_equal(peer_recv(f, timeout_ms, &r), 0);
  assert_int_equal(r.id, 0x80000000u | f->last_id);
  assert_int_equal(nng_msg_len(r.msg), ready.len);
  assert_memory_equal(nng_msg_body(r.msg), ready.data, ready.len);
  assert_int_equal(proto_peek_type(nng_msg_body(r.msg), nng_msg_len(r.msg)), PROTO_READY);
  reply_free(&r);
  buf_free(&ready);
}

/* A job must reach a fetcher as the answer to its latest request. */
static int fetcher_job(struct peer *f, int timeout_ms, struct proto_job *job) {
  struct reply r;
  int rv = peer_recv(f, timeout_ms, &r);
  if (rv != 0) return rv;
  assert_int_equal(r.id, 0x80000000u | f->last_id);
  assert_int_equal(proto_decode_job(nng_msg_body(r.msg), nng_msg_len(r.msg), job), 0);
  reply_free(&r);
  return 0;
}

static void fetcher_expect_nothing(struct peer *f, int ms) {
  struct reply r;
  int rv = peer_recv(f, ms, &r);
  if (rv == 0) {
    reply_free(&r);
    fail_msg("a fetcher received a message it must not get");
  }
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

static int worker_reply(struct peer *w, int timeout_ms, struct reply *r) {
  int rv = peer_recv(w, timeout_ms, r);
  if (rv != 0) return rv;
  const unsigned char *b = nng_msg_body(r->msg);
  size_t len = nng_msg_len(r->msg);
  assert_int_equal(proto_peek_type(b, len), PROTO_RESULT);
  assert_int_equal(proto_decode_result(b, len, &r->res), 0);
  r->ttl_ms = r->res.cache_ms;
  return 0;
}

static void expect_body(const struct proto_result *res, const char *body) {
  assert_int_equal(res->body_len, strlen(body));
  assert_memory_equal(res->body, body, strlen(body));
}

/* Runs one job through fetcher f and returns the worker's reply (caller frees). */
static void round_trip(struct peer *w, struct peer *f, const char *vid, uint8_t outcome, const char *body,
                       struct reply *r) {
  struct proto_job job;
  worker_send(w, vid, "en");
  assert_int_equal(fetcher_job(f, 2000, &job), 0);
  assert_string_equal(job.video_id, vid);
  fetcher_result(f, job.job_id, outcome, outcome == PROTO_OK ? PROTO_SOURCE_CAPTIONS : PROTO_SOURCE_NONE, body);
  assert_int_equal(worker_reply(w, 2000, r), 0);
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

/* ---- dispatcher behaviour ---- */

static void test_job_goes_only_to_an_idle_fetcher(void **state) {
  (void)state;
  struct rig g;
  struct peer f1;
  struct proto_job job, job_b;
  struct reply r;
  rig_up(&g, NULL, true, true);
  peer_open(&f1, g.d.jobs_url); /* connected, has not asked */

  uint32_t wid = worker_send(&g.w, VID_A, "en");
  assert_int_equal(fetcher_job(&g.f, 2000, &job), 0);
  assert_string_equal(job.video_id, VID_A);
  assert_string_equal(job.lang, "en");
  assert_string_equal(job.request_id, "req-" VID_A);
  assert_int_equal(job.kind, PROTO_KIND_CAPTIONS);
  assert_true(job.job_id != 0);
  assert_true(job.deadline_ms > 1500 && job.deadline_ms <= 2000);

  /* The only asking fetcher is busy and f1 never asked: the second job waits. */
  worker_send(&g.w, VID_B, "en");
  fetcher_expect_nothing(&f1, QUIET_MS);
  fetcher_expect_nothing(&g.f, 1);

  fetcher_ready(&f1);
  assert_int_equal(fetcher_job(&f1, 2000, &job_b), 0);
  assert_string_equal(job_b.video_id, VID_B);
  assert_true(job_b.job_id != job.job_id);

  fetcher_result(&g.f, job.job_id, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);
  assert_int_equal(worker_reply(&g.w, 2000, &r), 0);
  assert_int_equal(r.id, wid);
  assert_int_equal(r.res.outcome, PROTO_OK);
  expect_body(&r.res, BODY_OK);
  reply_free(&r);
  fetcher_expect_nothing(&g.f, QUIET_MS);

  peer_close(&f1);
  rig_down(&g);
}

static void test_hundred_identical_jobs_make_one_fetch(void **state) {
  (void)state;
  struct rig g;
  struct peer f[3];
  rig_up(&g, NULL, false, true);
  for (int i = 0; i < 3; i++) {
    peer_open(&f[i], g.d.jobs_url);
    fetcher_ready(&f[i]);
  }
  /* All from one worker connection: a hundred replies at once must all get through. */
  uint32_t ids[100];
  for (int i = 0; i < 100; i++) ids[i] = worker_send(&g.w, VID_A, "");

  int got = -1, count = 0;
  struct proto_job job;
  uint64_t end = util_now_ms() + 2000;
  while (got < 0 && util_now_ms() < end) {
    for (int i = 0; i < 3 && got < 0; i++) {
      if (fetcher_job(&f[i], 10, &job) == 0) {
        got = i;
        count++;
      }
    }
  }
  assert_int_equal(count, 1);
  for (int i = 0; i < 3; i++)
    if (i != got) fetcher_expect_nothing(&f[i], QUIET_MS / 2);
  fetcher_result(&f[got], job.job_id, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);

  bool seen[100] = {false};
  for (int n = 0; n < 100; n++) {
    struct reply r;
    assert_int_equal(worker_reply(&g.w, 2000, &r), 0);
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
  for (int i = 0; i < 3; i++) fetcher_expect_nothing(&f[i], i == 0 ? QUIET_MS : 1);

  for (int i = 0; i < 3; i++) peer_close(&f[i]);
  rig_down(&g);
}

static void test_cached_result_is_answered_without_a_fetcher(void **state) {
  (void)state;
  struct rig g;
  struct reply r;
  struct proto_job job;
  rig_up(&g, NULL, true, true);
  round_trip(&g.w, &g.f, VID_A, PROTO_OK, BODY_OK, &r);
  assert_int_equal(r.res.outcome, PROTO_OK);
  assert_int_equal(r.ttl_ms, 60000);
  reply_free(&r);

  worker_send(&g.w, VID_A, "en");
  assert_int_equal(worker_reply(&g.w, 500, &r), 0);
  assert_int_equal(r.res.outcome, PROTO_OK);
  assert_int_equal(r.res.source, PROTO_SOURCE_CAPTIONS);
  assert_string_equal(r.res.lang, "en");
  expect_body(&r.res, BODY_OK);
  assert_true(r.ttl_ms > 55000 && r.ttl_ms <= 60000);
  reply_free(&r);
  fetcher_expect_nothing(&g.f, QUIET_MS);

  /* Another language of the same video is another key. */
  worker_send(&g.w, VID_A, "de");
  assert_int_equal(fetcher_job(&g.f, 2000, &job), 0);
  assert_string_equal(job.lang, "de");
  rig_down(&g);
}

static void test_not_available_is_cached_for_the_negative_ttl(void **state) {
  (void)state;
  struct rig g;
  struct reply r;
  struct proto_job job;
  rig_up(&g, NULL, true, true); /* VTS_NEGATIVE_TTL_S=1 */
  uint64_t t0 = util_now_ms();
  round_trip(&g.w, &g.f, VID_A, PROTO_NOT_AVAILABLE, NULL, &r);
  assert_int_equal(r.res.outcome, PROTO_NOT_AVAILABLE);
  assert_int_equal(proto_outcome_status(r.res.outcome), 404);
  assert_int_equal(r.ttl_ms, 1000);
  reply_free(&r);

  worker_send(&g.w, VID_A, "en");
  assert_int_equal(worker_reply(&g.w, 500, &r), 0);
  assert_int_equal(r.res.outcome, PROTO_NOT_AVAILABLE);
  assert_true(r.ttl_ms <= 1000);
  reply_free(&r);
  fetcher_expect_nothing(&g.f, 100);

  uint64_t elapsed = util_now_ms() - t0;
  if (elapsed < 1100) usleep((useconds_t)(1100 - elapsed) * 1000);
  worker_send(&g.w, VID_A, "en");
  assert_int_equal(fetcher_job(&g.f, 2000, &job), 0);
  assert_string_equal(job.video_id, VID_A);
  rig_down(&g);
}

static void test_upstream_failure_is_not_cached(void **state) {
  (void)state;
  struct rig g;
  struct reply r;
  struct proto_job job;
  rig_up(&g, NULL, true, true);
  round_trip(&g.w, &g.f, VID_A, PROTO_UPSTREAM_FAILED, NULL, &r);
  assert_int_equal(r.res.outcome, PROTO_UPSTREAM_FAILED);
  assert_int_equal(proto_outcome_status(r.res.outcome), 502);
  assert_int_equal(r.ttl_ms, 0);
  reply_free(&r);

  worker_send(&g.w, VID_A, "en");
  assert_int_equal(fetcher_job(&g.f, 2000, &job), 0);
  assert_string_equal(job.video_id, VID_A);
  rig_down(&g);
}

static void test_fetcher_lost_with_its_job_fails_it_at_once_and_never_reruns_it(void **state) {
  (void)state;
  struct rig g;
  struct peer f2;
  struct reply r;
  struct proto_job job;
  rig_up(&g, NULL, true, true);
  worker_send(&g.w, VID_A, "en");
  assert_int_equal(fetcher_job(&g.f, 2000, &job), 0);
  peer_open(&f2, g.d.jobs_url);
  fetcher_ready(&f2);
  usleep(50000); /* f2 is surely idle at the dispatcher */

  /* The connection drops (nng_pipe_close does not wait for nng's reaper, unlike nng_close: see peer_close). */
  uint64_t t0 = util_now_ms();
  assert_int_equal(nng_pipe_close(g.f.pipe), 0);
  assert_int_equal(worker_reply(&g.w, 1000, &r), 0);
  uint64_t took = util_now_ms() - t0;
  assert_int_equal(r.res.outcome, PROTO_INTERNAL);
  assert_int_equal(proto_outcome_status(r.res.outcome), 500);
  assert_string_equal(r.res.detail, "fetcher_lost");
  reply_free(&r);
  if (took >= 100) fail_msg("the worker got its 500 after %llu ms, expected under 100", (unsigned long long)took);
  fetcher_expect_nothing(&f2, QUIET_MS);

  peer_close(&f2);
  rig_down(&g);
}

static void test_job_without_fetcher_fails_at_its_deadline(void **state) {
  (void)state;
  struct rig g;
  struct peer f;
  struct reply r;
  const char *env[] = {"VTS_JOB_TIMEOUT_MS=300", NULL};
  rig_up(&g, env, false, true);
  uint64_t t0 = util_now_ms();
  worker_send(&g.w, VID_A, "en");
  assert_int_equal(worker_reply(&g.w, 2000, &r), 0);
  uint64_t took = util_now_ms() - t0;
  assert_int_equal(r.res.outcome, PROTO_INTERNAL);
  assert_string_equal(r.res.detail, "queue_timeout");
  reply_free(&r);
  if (took < 280 || took > 700) fail_msg("failed after %llu ms, expected about 300", (unsigned long long)took);

  /* The failed job is gone: a fetcher arriving now gets nothing. */
  peer_open(&f, g.d.jobs_url);
  fetcher_ready(&f);
  fetcher_expect_nothing(&f, QUIET_MS);
  peer_close(&f);
  rig_down(&g);
}

static void test_job_held_past_its_deadline_fails_and_late_result_only_frees_the_fetcher(void **state) {
  (void)state;
  struct rig g;
  struct reply r;
  struct proto_job job, job2;
  const char *env[] = {"VTS_JOB_TIMEOUT_MS=300", NULL};
  rig_up(&g, env, true, true);
  uint64_t t0 = util_now_ms();
  worker_send(&g.w, VID_A, "en");
  assert_int_equal(fetcher_job(&g.f, 2000, &job), 0);
  assert_true(job.deadline_ms <= 300);

  assert_int_equal(worker_reply(&g.w, 3000, &r), 0);
  uint64_t took = util_now_ms() - t0;
  assert_int_equal(r.res.outcome, PROTO_INTERNAL);
  assert_string_equal(r.res.detail, "job_timeout");
  reply_free(&r);
  /* Deadline plus the grace for a result in transit. */
  if (took < 1250 || took > 1800) fail_msg("failed after %llu ms, expected about 1300", (unsigned long long)took);

  fetcher_result(&g.f, job.job_id, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);
  struct reply none;
  assert_int_equal(peer_recv(&g.w, QUIET_MS, &none), -ETIMEDOUT);

  /* The late result made the fetcher idle; the next job is new, not the failed one again. */
  worker_send(&g.w, VID_B, "en");
  assert_int_equal(fetcher_job(&g.f, 2000, &job2), 0);
  assert_string_equal(job2.video_id, VID_B);
  assert_true(job2.job_id != job.job_id);

  /* And the late result was not cached. */
  worker_send(&g.w, VID_A, "en");
  fetcher_result(&g.f, job2.job_id, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);
  assert_int_equal(fetcher_job(&g.f, 2000, &job), 0);
  assert_string_equal(job.video_id, VID_A);
  rig_down(&g);
}

static void test_no_captions_is_not_available_when_speech_is_off(void **state) {
  (void)state;
  struct rig g;
  struct reply r;
  rig_up(&g, NULL, true, true);
  round_trip(&g.w, &g.f, VID_A, PROTO_NO_CAPTIONS, NULL, &r);
  assert_int_equal(r.res.outcome, PROTO_NOT_AVAILABLE);
  assert_int_equal(r.ttl_ms, 1000);
  reply_free(&r);
  fetcher_expect_nothing(&g.f, QUIET_MS);
  rig_down(&g);
}

static void test_no_captions_becomes_a_speech_job_when_speech_is_on(void **state) {
  (void)state;
  struct rig g;
  struct reply r;
  struct proto_job job, speech;
  const char *env[] = {"VTS_SPEECH_FALLBACK=true", "VTS_SPEECH_TIMEOUT_MS=5000", NULL};
  rig_up(&g, env, true, true);
  worker_send(&g.w, VID_A, "en");
  assert_int_equal(fetcher_job(&g.f, 2000, &job), 0);
  assert_int_equal(job.kind, PROTO_KIND_CAPTIONS);
  fetcher_result(&g.f, job.job_id, PROTO_NO_CAPTIONS, PROTO_SOURCE_NONE, NULL);

  assert_int_equal(fetcher_job(&g.f, 2000, &speech), 0);
  assert_int_equal(speech.kind, PROTO_KIND_SPEECH);
  assert_string_equal(speech.video_id, VID_A);
  assert_string_equal(speech.lang, "en");
  assert_true(speech.job_id == job.job_id);
  assert_true(speech.deadline_ms > 4000 && speech.deadline_ms <= 5000);
  assert_int_equal(peer_recv(&g.w, 1, &r), -ETIMEDOUT); /* no answer yet */

  fetcher_result(&g.f, speech.job_id, PROTO_OK, PROTO_SOURCE_SPEECH, BODY_OK);
  assert_int_equal(worker_reply(&g.w, 2000, &r), 0);
  assert_int_equal(r.res.outcome, PROTO_OK);
  assert_int_equal(r.res.source, PROTO_SOURCE_SPEECH);
  expect_body(&r.res, BODY_OK);
  reply_free(&r);
  rig_down(&g);
}

/* Answers the one job the fetcher is given, checking its kind and translation, and reads the worker's reply. */
static void serve_one(struct rig *g, uint8_t kind, const char *translate, uint8_t outcome, const char *body,
                      uint8_t want_outcome) {
  struct proto_job job;
  struct reply r;
  assert_int_equal(fetcher_job(&g->f, 2000, &job), 0);
  assert_int_equal(job.kind, kind);
  assert_string_equal(job.translate, translate);
  fetcher_result(&g->f, job.job_id, outcome, kind == PROTO_KIND_TRACKS ? PROTO_SOURCE_NONE : PROTO_SOURCE_CAPTIONS,
                 body);
  assert_int_equal(worker_reply(&g->w, 2000, &r), 0);
  assert_int_equal(r.res.outcome, want_outcome);
  if (body != NULL) expect_body(&r.res, body);
  reply_free(&r);
}

static void test_tracks_and_translations_are_jobs_and_cache_entries_of_their_own(void **state) {
  (void)state;
  struct rig g;
  struct reply r;
  static const char tracks[] = "{\"tracks\":[],\"translationLanguages\":[]}";
  const char *env[] = {"VTS_SPEECH_FALLBACK=true", NULL};
  rig_up(&g, env, true, true);
  /* A translation of a video without captions is not available: no speech job follows. */
  worker_send_job(&g.w, PROTO_KIND_CAPTIONS, VID_A, "en", "fr");
  serve_one(&g, PROTO_KIND_CAPTIONS, "fr", PROTO_NO_CAPTIONS, NULL, PROTO_NOT_AVAILABLE);
  worker_send_job(&g.w, PROTO_KIND_CAPTIONS, VID_A, "en", "fr");
  assert_int_equal(worker_reply(&g.w, 500, &r), 0);
  assert_int_equal(r.res.outcome, PROTO_NOT_AVAILABLE); /* cached for the negative lifetime */
  reply_free(&r);
  fetcher_expect_nothing(&g.f, QUIET_MS);
  /* Neither the tracks nor the untranslated transcript are that cached answer. */
  worker_send_job(&g.w, PROTO_KIND_TRACKS, VID_A, "", "");
  serve_one(&g, PROTO_KIND_TRACKS, "", PROTO_OK, tracks, PROTO_OK);
  worker_send_job(&g.w, PROTO_KIND_CAPTIONS, VID_A, "en", "");
  serve_one(&g, PROTO_KIND_CAPTIONS, "", PROTO_OK, BODY_OK, PROTO_OK);
  /* The tracks are cached under their own key. */
  worker_send_job(&g.w, PROTO_KIND_TRACKS, VID_A, "", "");
  assert_int_equal(worker_reply(&g.w, 500, &r), 0);
  expect_body(&r.res, tracks);
  reply_free(&r);
  fetcher_expect_nothing(&g.f, QUIET_MS);
  rig_down(&g);
}

static void test_captions_go_first_and_speech_respects_its_limit(void **state) {
  (void)state;
  struct rig g;
  struct peer f2;
  struct reply r;
  struct proto_job a, b, a_speech, c, c_speech;
  const char *env[] = {"VTS_SPEECH_FALLBACK=true", "VTS_SPEECH_MAX_CONCURRENT=1", NULL};
  rig_up(&g, env, true, true);
  worker_send(&g.w, VID_A, "en");
  assert_int_equal(fetcher_job(&g.f, 2000, &a), 0);
  worker_send(&g.w, VID_B, "en");
  usleep(50000); /* B is queued before A comes back without captions */
  fetcher_result(&g.f, a.job_id, PROTO_NO_CAPTIONS, PROTO_SOURCE_NONE, NULL);

  /* Captions job B goes before speech job A. */
  assert_int_equal(fetcher_job(&g.f, 2000, &b), 0);
  assert_string_equal(b.video_id, VID_B);
  assert_int_equal(b.kind, PROTO_KIND_CAPTIONS);
  fetcher_result(&g.f, b.job_id, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);
  assert_int_equal(fetcher_job(&g.f, 2000, &a_speech), 0);
  assert_string_equal(a_speech.video_id, VID_A);
  assert_int_equal(a_speech.kind, PROTO_KIND_SPEECH);
  assert_int_equal(worker_reply(&g.w, 2000, &r), 0);
  expect_body(&r.res, BODY_OK);
  reply_free(&r);

  /* With one speech job running, a second waits even though a fetcher is idle. */
  peer_open(&f2, g.d.jobs_url);
  fetcher_ready(&f2);
  worker_send(&g.w, VID_C, "en");
  assert_int_equal(fetcher_job(&f2, 2000, &c), 0);
  fetcher_result(&f2, c.job_id, PROTO_NO_CAPTIONS, PROTO_SOURCE_NONE, NULL);
  fetcher_expect_nothing(&f2, QUIET_MS);

  fetcher_result(&g.f, a_speech.job_id, PROTO_NOT_AVAILABLE, PROTO_SOURCE_NONE, NULL);
  assert_int_equal(fetcher_job(&f2, 2000, &c_speech), 0);
  assert_string_equal(c_speech.video_id, VID_C);
  assert_int_equal(c_speech.kind, PROTO_KIND_SPEECH);
  assert_int_equal(worker_reply(&g.w, 2000, &r), 0);
  assert_int_equal(r.res.outcome, PROTO_NOT_AVAILABLE);
  reply_free(&r);

  peer_close(&f2);
  rig_down(&g);
}

static void test_fetcher_speaking_garbage_fails_its_job(void **state) {
  (void)state;
  struct rig g;
  struct reply r;
  struct proto_job job;
  rig_up(&g, NULL, true, true);
  worker_send(&g.w, VID_A, "en");
  assert_int_equal(fetcher_job(&g.f, 2000, &job), 0);
  struct buf junk = BUF_INIT;
  buf_puts(&junk, "VT\x01\x02 not a result");
  peer_send(&g.f, &junk);
  buf_free(&junk);
  assert_int_equal(worker_reply(&g.w, 500, &r), 0);
  assert_int_equal(r.res.outcome, PROTO_INTERNAL);
  assert_string_equal(r.res.detail, "protocol_error");
  reply_free(&r);
  peer_settle_remote_close(&g.f); /* the dispatcher closed that fetcher's connection */
  rig_down(&g);
}

static void test_ok_result_that_is_not_a_transcript_fails_its_job_and_is_not_cached(void **state) {
  (void)state;
  struct rig g;
  struct reply r;
  rig_up(&g, NULL, true, true);
  round_trip(&g.w, &g.f, VID_A, PROTO_OK, "{\"videoId\":\"test\",\"text\":\"hello\"}", &r);
  assert_int_equal(r.res.outcome, PROTO_INTERNAL);
  assert_string_equal(r.res.detail, "bad_result");
  assert_int_equal(r.ttl_ms, 0);
  assert_int_equal(r.res.body_len, 0);
  reply_free(&r);
  /* Nothing was kept: the same video is asked of a fetcher again, and a real transcript is served. */
  round_trip(&g.w, &g.f, VID_A, PROTO_OK, BODY_OK, &r);
  assert_int_equal(r.res.outcome, PROTO_OK);
  expect_body(&r.res, BODY_OK);
  reply_free(&r);
  rig_down(&g);
}

static void test_fetcher_connections_beyond_the_limit_get_no_job(void **state) {
  (void)state;
  static const char *const env[] = {"VTS_JOBS_MAX_FETCHERS=1", NULL};
  struct rig g;
  struct reply r;
  struct proto_job job;
  rig_up(&g, env, true, true);
  /* The first fetcher takes a job; the second connection is over the limit, so the next job waits for the first. */
  worker_send(&g.w, VID_A, "en");
  assert_int_equal(fetcher_job(&g.f, 2000, &job), 0);
  uint64_t job_a = job.job_id;
  struct peer f2;
  memset(&f2, 0, sizeof(f2));
  assert_int_equal(nng_req0_open_raw(&f2.s), 0);
  /*
   * Refused at once, a peer would redial every few milliseconds and churn connections through the dispatcher's
   * shutdown, where nng 1.5.2 may leave one half made (a leak report under ASan): it dials once here.
   */
  assert_int_equal(nng_socket_set_ms(f2.s, NNG_OPT_RECONNMINT, 60000), 0);
  assert_int_equal(nng_socket_set_ms(f2.s, NNG_OPT_RECONNMAXT, 60000), 0);
  dial_wait(f2.s, g.d.jobs_url);
  /*
   * Its connections are closed as soon as they are made, so its READY may find none to go out on: it is offered
   * once, without waiting, and dropped if it cannot leave (a message left queued on a socket without a connection is
   * never freed by nng 1.5.2's close), never blocking the test.
   */
  struct buf b = BUF_INIT;
  nng_msg *m;
  assert_int_equal(proto_encode_ready(&b), 0);
  assert_int_equal(nng_msg_alloc(&m, 0), 0);
  assert_int_equal(nng_msg_header_append_u32(m, 0x80000000u | ++f2.last_id), 0);
  assert_int_equal(nng_msg_append(m, b.data, b.len), 0);
  buf_free(&b);
  if (nng_sendmsg(f2.s, m, NNG_FLAG_NONBLOCK) != 0) nng_msg_free(m);
  worker_send(&g.w, VID_B, "en");
  fetcher_expect_nothing(&f2, QUIET_MS);
  peer_close(&f2);
  fetcher_result(&g.f, job_a, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);
  assert_int_equal(worker_reply(&g.w, 2000, &r), 0);
  reply_free(&r);
  assert_int_equal(fetcher_job(&g.f, 2000, &job), 0);
  assert_string_equal(job.video_id, VID_B);
  rig_down(&g);
}

static void test_declined_job_goes_to_another_fetcher_first_in_line_and_is_no_failure(void **state) {
  (void)state;
  struct rig g;
  struct reply r;
  struct proto_job job, again, next;
  rig_up(&g, NULL, true, true);
  worker_send(&g.w, VID_A, "en");
  assert_int_equal(fetcher_job(&g.f, 2000, &job), 0);
  assert_string_equal(job.video_id, VID_A);
  worker_send(&g.w, VID_B, "en"); /* queued behind A's fetcher: no other one yet */
  fetcher_expect_nothing(&g.f, QUIET_MS);
  /* The fetcher is busy elsewhere: it gives A back, and the acknowledgement is a READY. */
  struct buf b = BUF_INIT;
  assert_int_equal(proto_encode_decline(&b, job.job_id), 0);
  peer_send(&g.f, &b);
  buf_free(&b);
  fetcher_expect_ready(&g.f, 2000);
  /* The next idle fetcher gets A, the same job, before B; the one that declined is given nothing meanwhile. */
  struct peer f2;
  peer_open(&f2, g.d.jobs_url);
  fetcher_ready(&f2);
  assert_int_equal(fetcher_job(&f2, 2000, &again), 0);
  assert_true(again.job_id == job.job_id);
  assert_string_equal(again.video_id, VID_A);
  fetcher_expect_nothing(&g.f, QUIET_MS);
  fetcher_result(&f2, again.job_id, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);
  assert_int_equal(worker_reply(&g.w, 2000, &r), 0);
  assert_int_equal(r.res.outcome, PROTO_OK);
  expect_body(&r.res, BODY_OK);
  reply_free(&r);
  assert_int_equal(fetcher_job(&f2, 2000, &next), 0);
  assert_string_equal(next.video_id, VID_B);
  peer_close(&f2);
  rig_down(&g);
}

static void test_result_for_an_unknown_job_on_a_new_connection_means_idle(void **state) {
  (void)state;
  struct rig g;
  struct proto_job job;
  rig_up(&g, NULL, false, true);
  peer_open(&g.f, g.d.jobs_url);
  g.has_f = true;
  /* What a fetcher's REQ socket re-sends to a restarted dispatcher. */
  fetcher_result(&g.f, 424242, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);
  worker_send(&g.w, VID_A, "en");
  assert_int_equal(fetcher_job(&g.f, 2000, &job), 0);
  assert_string_equal(job.video_id, VID_A);
  rig_down(&g);
}

static void test_last_result_is_acknowledged_and_the_queued_job_goes_to_another_fetcher(void **state) {
  (void)state;
  struct rig g;
  struct peer f2;
  struct reply r;
  struct proto_job job_a, job_b, job_c;
  rig_up(&g, NULL, true, true);
  uint32_t wid_a = worker_send(&g.w, VID_A, "en");
  assert_int_equal(fetcher_job(&g.f, 2000, &job_a), 0);
  uint32_t wid_b = worker_send(&g.w, VID_B, "en"); /* queued: the only fetcher is busy */
  fetcher_expect_nothing(&g.f, 50);

  /* The fetcher is stopping: its result is delivered, acknowledged at once, and B is not handed to it. */
  fetcher_result_as(&g.f, true, job_a.job_id, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);
  fetcher_expect_ready(&g.f, 500);
  assert_int_equal(worker_reply(&g.w, 2000, &r), 0);
  assert_int_equal(r.id, wid_a);
  assert_int_equal(r.res.outcome, PROTO_OK);
  expect_body(&r.res, BODY_OK);
  reply_free(&r);
  fetcher_expect_nothing(&g.f, QUIET_MS);

  /* Another fetcher takes the queued job. */
  peer_open(&f2, g.d.jobs_url);
  fetcher_ready(&f2);
  assert_int_equal(fetcher_job(&f2, 2000, &job_b), 0);
  assert_string_equal(job_b.video_id, VID_B);

  /* The leaving fetcher is forgotten: asking for work again gets it nothing, even ahead of f2 in line. */
  fetcher_ready(&g.f);
  usleep(50000);
  fetcher_result(&f2, job_b.job_id, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);
  assert_int_equal(worker_reply(&g.w, 2000, &r), 0);
  assert_int_equal(r.id, wid_b);
  assert_int_equal(r.res.outcome, PROTO_OK);
  reply_free(&r);
  worker_send(&g.w, VID_C, "en");
  assert_int_equal(fetcher_job(&f2, 2000, &job_c), 0);
  assert_string_equal(job_c.video_id, VID_C);
  fetcher_expect_nothing(&g.f, QUIET_MS);

  /* Its connection dropping now fails nothing: f2's job C is still answered with f2's result. */
  assert_int_equal(nng_pipe_close(g.f.pipe), 0);
  fetcher_result(&f2, job_c.job_id, PROTO_NOT_AVAILABLE, PROTO_SOURCE_NONE, NULL);
  assert_int_equal(worker_reply(&g.w, 2000, &r), 0);
  assert_int_equal(r.res.outcome, PROTO_NOT_AVAILABLE);
  reply_free(&r);

  peer_close(&f2);
  rig_down(&g);
}

static void test_last_result_for_no_job_is_acknowledged_and_gets_no_job(void **state) {
  (void)state;
  struct rig g;
  rig_up(&g, NULL, false, true);
  peer_open(&g.f, g.d.jobs_url);
  g.has_f = true;
  /* A stopping fetcher whose RESULT_LAST reaches a restarted dispatcher. */
  fetcher_result_as(&g.f, true, 424242, PROTO_OK, PROTO_SOURCE_CAPTIONS, BODY_OK);
  fetcher_expect_ready(&g.f, 500);
  worker_send(&g.w, VID_A, "en");
  fetcher_expect_nothing(&g.f, QUIET_MS);
  rig_down(&g);
}

static void test_malformed_worker_request_gets_500(void **state) {
  (void)state;
  struct rig g;
  struct reply r;
  rig_up(&g, NULL, false, true);
  struct buf junk = BUF_INIT;
  buf_puts(&junk, "hello");
  peer_send(&g.w, &junk);
  buf_free(&junk);
  assert_int_equal(worker_reply(&g.w, 1000, &r), 0);
  assert_int_equal(r.res.outcome, PROTO_INTERNAL);
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
  assert_int_equal(dispatch_client_init(&u->loop, &u->cfg, u->g.d.worker_url), 0);

  memset(&u->submitted, 0, sizeof(u->submitted));
  u->submitted.kind = PROTO_KIND_CAPTIONS;
  memcpy(u->submitted.video_id, vid, 12);
  memcpy(u->submitted.lang, "en", 3);
  memcpy(u->submitted.request_id, "req-client", 11);
  assert_int_equal(dispatch_submit(&u->submitted, record_cb, c), 0);
  assert_int_equal(fetcher_job(&u->g.f, 3000, &u->taken), 0);
  assert_string_equal(u->taken.request_id, "req-client");
  assert_string_equal(u->taken.video_id, vid);
}

/* Runs the loop until c has been called n times or timeout_ms passes. */
static void client_run_until(struct client_rig *u, struct calls *c, int n, int timeout_ms) {
  uint64_t end = util_now_ms() + (uint64_t)timeout_ms;
  while (c->n < n && util_now_ms() < end) uv_run(&u->loop, UV_RUN_ONCE);
}

/* Closes the client (if still open), the loop and the rig; a dispatcher already killed is not stopped again. */
static void client_down(struct client_rig *u) {
  dispatch_client_close();
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
  client_run_until(&u, &c1, 1, 2000);
  client_run_until(&u, &c1, 2, 200);
  assert_int_equal(c1.n, 1);
  assert_true(c1.had_result);
  assert_int_equal(c1.outcome, PROTO_OK);
  assert_string_equal(c1.body, BODY_OK);

  /* With the dispatcher gone, the worker's own cache still answers the hot entry. */
  disp_kill(&u.g.d);
  assert_int_equal(dispatch_submit(&u.submitted, record_cb, &c2), 0);
  assert_int_equal(c2.n, 0); /* never inside dispatch_submit */
  client_run_until(&u, &c2, 1, 500);
  client_run_until(&u, &c2, 2, 100);
  assert_int_equal(c2.n, 1);
  assert_true(c2.had_result);
  assert_int_equal(c2.outcome, PROTO_OK);
  assert_int_equal(c2.source, PROTO_SOURCE_CAPTIONS);
  assert_string_equal(c2.body, BODY_OK);
  client_down(&u);
}

static void test_client_fails_in_flight_jobs_at_once_when_the_dispatcher_dies(void **state) {
  (void)state;
  struct client_rig u;
  struct calls c = {0};
  client_up(&u, VID_B, &c);
  uint64_t t0 = util_now_ms();
  disp_kill(&u.g.d);
  client_run_until(&u, &c, 1, 2000);
  uint64_t took = c.at_ms - t0;
  client_run_until(&u, &c, 2, 200);
  assert_int_equal(c.n, 1);
  assert_false(c.had_result);
  if (took >= 100)
    fail_msg("cb(NULL) came %llu ms after the dispatcher died, expected under 100", (unsigned long long)took);
  client_down(&u);
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
  assert_int_equal(dispatch_client_init(&loop, &cfg, url), 0);
  struct proto_job j;
  memset(&j, 0, sizeof(j));
  j.kind = PROTO_KIND_CAPTIONS;
  memcpy(j.video_id, VID_A, 12);
  uint64_t t0 = util_now_ms();
  assert_int_equal(dispatch_submit(&j, record_cb, &c), 0);
  uint64_t end = t0 + 3000;
  while (c.n == 0 && util_now_ms() < end) uv_run(&loop, UV_RUN_ONCE);
  uint64_t took = c.at_ms - t0;
  assert_int_equal(c.n, 1);
  assert_false(c.had_result);
  if (took < 900 || took > 1500) fail_msg("cb(NULL) after %llu ms, expected about 1000", (unsigned long long)took);
  dispatch_client_close();
  uv_close((uv_handle_t *)&keepalive, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--dispatcher") == 0) {
    struct vts_config cfg;
    char err[256];
    if (config_load(&cfg, err, sizeof(err)) != 0) {
      fprintf(stderr, "%s\n", err);
      return 2;
    }
    return dispatcher_main(&cfg, argv[2]);
  }
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_job_goes_only_to_an_idle_fetcher, kill_leftover),
      cmocka_unit_test_teardown(test_hundred_identical_jobs_make_one_fetch, kill_leftover),
      cmocka_unit_test_teardown(test_cached_result_is_answered_without_a_fetcher, kill_leftover),
      cmocka_unit_test_teardown(test_not_available_is_cached_for_the_negative_ttl, kill_leftover),
      cmocka_unit_test_teardown(test_upstream_failure_is_not_cached, kill_leftover),
      cmocka_unit_test_teardown(test_fetcher_lost_with_its_job_fails_it_at_once_and_never_reruns_it, kill_leftover),
      cmocka_unit_test_teardown(test_job_without_fetcher_fails_at_its_deadline, kill_leftover),
      cmocka_unit_test_teardown(test_job_held_past_its_deadline_fails_and_late_result_only_frees_the_fetcher,
                                kill_leftover),
      cmocka_unit_test_teardown(test_no_captions_is_not_available_when_speech_is_off, kill_leftover),
      cmocka_unit_test_teardown(test_no_captions_becomes_a_speech_job_when_speech_is_on, kill_leftover),
      cmocka_unit_test_teardown(test_captions_go_first_and_speech_respects_its_limit, kill_leftover),
      cmocka_unit_test_teardown(test_tracks_and_translations_are_jobs_and_cache_entries_of_their_own, kill_leftover),
      cmocka_unit_test_teardown(test_fetcher_speaking_garbage_fails_its_job, kill_leftover),
      cmocka_unit_test_teardown(test_ok_result_that_is_not_a_transcript_fails_its_job_and_is_not_cached, kill_leftover),
      cmocka_unit_test_teardown(test_fetcher_connections_beyond_the_limit_get_no_job, kill_leftover),
      cmocka_unit_test_teardown(test_declined_job_goes_to_another_fetcher_first_in_line_and_is_no_failure,
                                kill_leftover),
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
  return cmocka_run_group_tests(tests, NULL, NULL);
}
