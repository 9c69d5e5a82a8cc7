/*
 * Over 800 lines: the process's shell is one set of statics around one struct dispatcher (nng's callbacks, the core's
 * acts, the named start steps and the teardown that undoes them); split, that struct and its callbacks would need a
 * header of their own that only the halves would share.
 *
 * The dispatcher process: the shell around the decision core (core.h), forked by the gateway master, between the HTTP
 * workers and the fetchers.
 *
 * Threading model. One thread runs a libuv loop that owns the core and every nng message the core holds a handle of;
 * it alone calls the core. nng's threads only report: the aio and pipe callbacks push an event onto a mutex-protected
 * queue and wake the loop (uv_async_send); the loop takes the whole queue, hands each event to the core with the
 * time, then lets the core fail what passed its deadline and hand queued jobs to idle fetchers (core_tick), and
 * sleeps on one timer until the earliest deadline the core named. The transcript cache and claims in Redis
 * (rcache.h) are asynchronous on the same loop, each command with its own deadline: a slow Redis delays only the
 * jobs that wait for it. Signals are blocked in every thread (the mask is set before nng starts its threads) and
 * taken by a small sigwait thread, which raises the stop flag on SIGTERM or SIGINT.
 *
 * Fetcher side: a raw rep0 socket. A raw socket hands us each request with its backtrace in the message header, so
 * a request can be held for as long as its fetcher is idle, and answered later (with that fetcher's next job) by
 * sending a message carrying the same header: that message is the core's "token" of the request. Each fetcher has at
 * most one request outstanding, so the raw socket's per-connection send queue (64 messages, overflow silently
 * dropped) is never at risk.
 *
 * Worker side: a cooked rep0 socket with one context per worker request. A raw socket would work the same way, but
 * its 64-message per-connection send queue drops replies beyond that: one worker with a hundred clients waiting on
 * the same video would lose answers when the job finishes. A context's send waits in line for its connection instead.
 */
#include "gateway/dispatcher/dispatcher.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <uv.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/cache/rcache.h"
#include "gateway/dispatcher/hooks.h"
#include "gateway/dispatcher/runner.h"
#include "gateway/metrics/metrics.h"
#include "proto/link.h"

#define IDLE_WAKE_MS 1000  /* the loop turns at least this often, to publish stats and retry a failed rearm */
#define REARM_RETRY_MS 100 /* retry of a worker receive that could not be armed (out of memory) */

enum ev_type { EV_FETCHER_MSG, EV_FETCHER_ADD, EV_FETCHER_REM, EV_WORKER_SLOT };

struct event {
  struct event *next;
  enum ev_type type;
  nng_msg *msg;      /* EV_FETCHER_MSG */
  nng_pipe pipe;     /* EV_FETCHER_* */
  struct slot *slot; /* EV_WORKER_SLOT: the event is embedded in the slot, never freed on its own */
};

/* One worker request: the nng context that received it and will answer it. */
enum slot_state { SLOT_RECEIVING, SLOT_HOLDING, SLOT_SENDING };
struct slot {
  struct core_waiter waiter; /* the core's handle while SLOT_HOLDING */
  struct event ev;
  struct slot *prev, *next; /* dispatcher.slots */
  struct dispatcher *d;
  nng_ctx ctx;
  nng_aio *aio;
  enum slot_state state;
};

struct dispatcher {
  const struct vts_config *cfg;
  struct core *core;
  struct rcache *rcache; /* NULL without VTS_REDIS_URL */
  /* The rate limiter's, lent by the master: the batch items' units of the month are taken from its table. */
  const struct ratelimit_shared *limits;
  struct runner *runner; /* the batch jobs' runner; NULL when the job store cannot be opened */
  struct hooks *hooks;   /* the batch jobs' webhooks; NULL without the runner */
  uv_loop_t loop;
  uv_async_t wake;
  uv_timer_t timer;
  uv_timer_t lonely;   /* VTS_NO_FETCHER_WARN_MS after the start: says so when no fetcher has connected */
  uv_prepare_t turn;   /* measures each loop turn, before the loop waits */
  uv_poll_t jobs_made; /* the master's eventfd, readable when a worker made a batch job */
  int jobs_made_fd;    /* that eventfd, -1 without one */
  bool jobs_made_on;
  int schedstat_fd; /* the loop thread's scheduler statistics (/proc/thread-self/schedstat), -1 without them */
  struct metrics_turn turn_end; /* the previous turn's end */
  uint64_t turn_queued_ns;      /* the thread's wait for a core in all, when a turn's end last read it */
  bool loop_ready;
  nng_socket fsock, wsock;
  bool fsock_open, wsock_open;
  nng_listener flistener; /* the fetchers' listener, once fsock_open */
  struct link_handshakes handshakes;
  uint64_t next_handshakes_ms; /* when to read the listener's failed handshakes again */
  nng_aio *faio;
  bool wrecv_armed;
  bool stopping;
  struct slot slots; /* sentinel of every slot */

  /* Shared with nng threads and the signal thread, under lock. */
  pthread_mutex_t lock;
  struct event *ev_head, *ev_tail;
  bool stop_asked;           /* SIGTERM or SIGINT came */
  uint64_t stop_deadline_ms; /* stop then even with workers still connected */
  int workers_connected;     /* worker connections open on the worker socket */
};

/* Past the workers' own drain deadline, how long a stopping dispatcher still waits for them to go. */
#define DISPATCH_STOP_GRACE_MS 2000

/* ---- events: the only code that runs on nng threads ---- */

static void push_event(struct dispatcher *d, struct event *ev) {
  ev->next = NULL;
  pthread_mutex_lock(&d->lock);
  if (d->ev_tail != NULL)
    d->ev_tail->next = ev;
  else
    d->ev_head = ev;
  d->ev_tail = ev;
  pthread_mutex_unlock(&d->lock);
  uv_async_send(&d->wake);
}

/* runs on an nng thread */
static struct event *event_new(enum ev_type type) {
  struct event *ev = calloc(1, sizeof(*ev));
  if (ev == NULL) {
    /* Losing an event would strand a fetcher or a job with no deadline to rescue it; the master restarts us. */
    log_msg(LOG_ERROR, "dispatcher out of memory", NULL);
    abort();
  }
  ev->type = type;
  return ev;
}

/* runs on an nng thread */
static void fetcher_recv_cb(void *arg) {
  struct dispatcher *d = arg;
  int rv = nng_aio_result(d->faio);
  if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) return;
  if (rv == 0) {
    struct event *ev = event_new(EV_FETCHER_MSG);
    ev->msg = nng_aio_get_msg(d->faio);
    ev->pipe = nng_msg_get_pipe(ev->msg);
    nng_aio_set_msg(d->faio, NULL);
    push_event(d, ev);
  }
  nng_recv_aio(d->fsock, d->faio);
}

/* runs on an nng thread: a worker connected or went away (its process ended, or it closed the link draining). */
static void worker_pipe_cb(nng_pipe pipe, nng_pipe_ev which, void *arg) {
  (void)pipe;
  struct dispatcher *d = arg;
  pthread_mutex_lock(&d->lock);
  d->workers_connected += which == NNG_PIPE_EV_REM_POST ? -1 : 1;
  pthread_mutex_unlock(&d->lock);
  uv_async_send(&d->wake);
}

/* runs on an nng thread */
static void fetcher_pipe_cb(nng_pipe pipe, nng_pipe_ev which, void *arg) {
  struct event *ev = event_new(which == NNG_PIPE_EV_REM_POST ? EV_FETCHER_REM : EV_FETCHER_ADD);
  ev->pipe = pipe;
  push_event(arg, ev);
}

/* runs on an nng thread */
static void slot_cb(void *arg) {
  struct slot *s = arg;
  push_event(s->d, &s->ev);
}

/* ---- worker requests ---- */

static struct slot *slot_new(struct dispatcher *d) {
  struct slot *s = calloc(1, sizeof(*s));
  if (s == NULL) return NULL;
  s->d = d;
  s->ev.type = EV_WORKER_SLOT;
  s->ev.slot = s;
  if (nng_aio_alloc(&s->aio, slot_cb, s) != 0) {
    free(s);
    return NULL;
  }
  if (nng_ctx_open(&s->ctx, d->wsock) != 0) {
    nng_aio_free(s->aio);
    free(s);
    return NULL;
  }
  s->next = &d->slots;
  s->prev = d->slots.prev;
  d->slots.prev->next = s;
  d->slots.prev = s;
  return s;
}

static void slot_free(struct slot *s) {
  nng_msg *m = nng_aio_get_msg(s->aio);
  if (m != NULL) nng_msg_free(m);
  nng_aio_free(s->aio);
  nng_ctx_close(s->ctx);
  s->prev->next = s->next;
  s->next->prev = s->prev;
  free(s);
}

/* Keeps one context waiting for the next worker request; a failure is retried on the next loop turn. */
static void arm_worker_recv(struct dispatcher *d) {
  if (d->wrecv_armed || d->stopping) return;
  struct slot *s = slot_new(d);
  if (s == NULL) {
    log_msg(LOG_WARN, "cannot arm worker receive", NULL);
    return;
  }
  s->state = SLOT_RECEIVING;
  d->wrecv_armed = true;
  nng_ctx_recv(s->ctx, s->aio);
}

/* Encodes the reply to a worker once, whatever the number of waiters: the result with its cache lifetime left. */
static int encode_reply(struct buf *out, const struct proto_result *res, uint64_t ttl_ms) {
  struct proto_result r = *res;
  r.cache_ms = ttl_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ttl_ms;
  int rv = proto_encode_result(out, &r);
  if (rv != 0) {
    /* Only an allocation can fail here (results come from a decoder that checked them); answer 500 instead. */
    struct proto_result fail = {.job_id = res->job_id, .outcome = PROTO_INTERNAL};
    buf_reset(out);
    rv = proto_encode_result(out, &fail);
  }
  return rv;
}

/* Sends an encoded reply on the slot's context; the slot is freed when the send completes. */
static void send_reply(struct slot *s, const struct buf *enc) {
  nng_msg *m = NULL;
  if (enc->len == 0 || nng_msg_alloc(&m, 0) != 0 || nng_msg_append(m, enc->data, enc->len) != 0) {
    /* The worker's own deadline answers this request with a 500. */
    log_msg(LOG_ERROR, "cannot build worker reply", NULL);
    if (m != NULL) nng_msg_free(m);
    slot_free(s);
    return;
  }
  s->state = SLOT_SENDING;
  nng_aio_set_msg(s->aio, m);
  nng_ctx_send(s->ctx, s->aio);
}

/* ---- the core's actions ---- */

#define SLOT_OF(w) ((struct slot *)(void *)((char *)(w)-offsetof(struct slot, waiter)))

static void act_answer(void *ctx, struct core_waiter *waiters, const struct proto_result *res, uint64_t cache_ms) {
  struct dispatcher *d = ctx;
  struct buf b = BUF_INIT;
  while (waiters != NULL) {
    struct core_waiter *next = waiters->next;
    if (waiters->internal == HOOKS_WAITER) {
      hooks_answer(d->hooks, waiters, res); /* a webhook's try: the hooks made it, so they exist */
    } else if (waiters->internal) {
      runner_answer(d->runner, waiters, res); /* a batch job's item: the runner made it, so it exists */
    } else {
      if (b.len == 0) encode_reply(&b, res, cache_ms);
      send_reply(SLOT_OF(waiters), &b);
    }
    waiters = next;
  }
  buf_free(&b);
}

static nng_pipe pipe_of(uint64_t id) {
  nng_pipe p = NNG_PIPE_INITIALIZER;
  p.id = (uint32_t)id;
  return p;
}

/* Answers a fetcher's request (token: a message with its header) with body; the message is nng's or freed. */
static int answer_fetcher(struct dispatcher *d, nng_msg *m, const struct buf *body) {
  nng_msg_clear(m); /* the header, the way back to the fetcher's request, stays */
  int rv = nng_msg_append(m, body->data, body->len) != 0 ? -ENOMEM : 0;
  if (rv == 0) rv = nng_sendmsg(d->fsock, m, 0);
  if (rv != 0) nng_msg_free(m);
  return rv;
}

static int act_send_job(void *ctx, uint64_t fetcher, void *token, const struct proto_job *job) {
  struct buf b = BUF_INIT;
  int rv = proto_encode_job(&b, job);
  if (rv == 0)
    rv = answer_fetcher(ctx, token, &b);
  else
    nng_msg_free(token);
  buf_free(&b);
  if (rv != 0)
    log_msg(LOG_WARN, "cannot send job to fetcher", "error", rv > 0 ? nng_strerror(rv) : "out of memory", NULL);
  (void)fetcher;
  return rv;
}

static void act_send_ready(void *ctx, uint64_t fetcher, void *token) {
  (void)fetcher;
  struct buf b = BUF_INIT;
  /* Unanswered, the fetcher goes on after its own short wait: nothing is lost either way. */
  if (proto_encode_ready(&b) == 0)
    answer_fetcher(ctx, token, &b);
  else
    nng_msg_free(token);
  buf_free(&b);
}

static void act_drop_token(void *ctx, void *token) {
  (void)ctx;
  nng_msg_free(token);
}

static void act_close_fetcher(void *ctx, uint64_t fetcher) {
  (void)ctx;
  nng_pipe_close(pipe_of(fetcher));
}

/* The Redis actions of the core's ops table: one call each, alike in shape only (each forwards its own arguments). */
static void act_redis_get(void *ctx, uint64_t job_id, const char *video_id, const char *key) {
  struct dispatcher *d = ctx;
  rcache_get(d->rcache, job_id, video_id, key);
}

static void act_redis_claim(void *ctx, uint64_t job_id, const char *video_id, const char *key, uint64_t ttl_ms) {
  struct dispatcher *d = ctx;
  rcache_claim(d->rcache, job_id, video_id, key, ttl_ms);
}

static void act_redis_put(void *ctx, const char *video_id, const char *key, const struct proto_result *res,
                          uint64_t ttl_ms) {
  struct dispatcher *d = ctx;
  /* A Redis that cannot take it now costs nothing but the sharing. */
  rcache_put(d->rcache, video_id, key, res, ttl_ms);
}

static void act_redis_release(void *ctx, uint64_t job_id, const char *video_id, const char *key) {
  struct dispatcher *d = ctx;
  rcache_release(d->rcache, job_id, video_id, key);
}

static void act_redis_renew(void *ctx, uint64_t job_id, const char *video_id, const char *key, uint64_t ttl_ms) {
  struct dispatcher *d = ctx;
  rcache_renew(d->rcache, job_id, video_id, key, ttl_ms);
}

/* ---- the loop ---- */

static void metrics_publish_dispatcher(const struct dispatcher_stats *st);

/*
 * The fetchers' failed TLS handshakes, which nng counts without telling anyone: read every VTS_LINK_HANDSHAKE_POLL_MS,
 * logged (rate limited) and counted here.
 */
static void poll_handshakes(struct dispatcher *d, uint64_t now) {
  if (now < d->next_handshakes_ms) return;
  d->next_handshakes_ms = now + VTS_LINK_HANDSHAKE_POLL_MS;
  uint64_t n;
  if (link_listener_handshake_failures(d->flistener, &n) == 0)
    link_handshakes_note(&d->handshakes, n, now, d->cfg->jobs_url);
}

static void publish_stats(struct dispatcher *d) {
  struct dispatcher_stats st;
  core_stats(d->core, &st);
  hooks_stats(d->hooks, &st);
  runner_stats(d->runner, &st);
  st.link_handshake_failures = d->handshakes.failed;
  metrics_publish_dispatcher(&st);
}

/*
 * Under lock: whether the dispatcher may stop now. A stop waits for the workers it serves: when the master stops the
 * gateway they are gone already, but when the master dies every child gets SIGTERM at once (PR_SET_PDEATHSIG) and the
 * workers' in-flight requests still need their answers while they drain.
 */
static bool stop_due(const struct dispatcher *d, uint64_t now) {
  return d->stop_asked && (d->workers_connected <= 0 || now >= d->stop_deadline_ms);
}

static void on_timer(uv_timer_t *t);

/* After every batch of events: the core's deadlines and assignments, the stats, and when to look again. */
static void settle(struct dispatcher *d) {
  arm_worker_recv(d);
  uint64_t now = util_now_ms();
  pthread_mutex_lock(&d->lock);
  bool stopping = d->stop_asked;
  pthread_mutex_unlock(&d->lock);
  /*
   * Batch work (it starts only into fetchers idle now), then the core hands queued jobs to fetchers. Webhook tries
   * first: at most one a key, they take a slot a key's share frees before that key's next item does.
   */
  uint64_t hooks_wake = d->hooks != NULL && !stopping ? hooks_pump(d->hooks, now) : UINT64_MAX;
  uint64_t runner_wake = d->runner == NULL ? UINT64_MAX
                         : stopping        ? runner_hold(d->runner, now)
                                           : runner_pump(d->runner, now);
  if (hooks_wake < runner_wake) runner_wake = hooks_wake;
  uint64_t wake = core_tick(d->core, now, d->wrecv_armed ? IDLE_WAKE_MS : REARM_RETRY_MS);
  if (runner_wake < wake) wake = runner_wake;
  if (d->fsock_open) poll_handshakes(d, now);
  publish_stats(d);
  pthread_mutex_lock(&d->lock);
  bool stop = stop_due(d, now);
  if (d->stop_asked && d->stop_deadline_ms < wake) wake = d->stop_deadline_ms;
  pthread_mutex_unlock(&d->lock);
  if (stop) {
    uv_stop(&d->loop);
    return;
  }
  uv_update_time(&d->loop); /* the timer counts from the loop's time, which may be older than now */
  uv_timer_start(&d->timer, on_timer, wake > now ? wake - now : 0, 0);
}

static void on_timer(uv_timer_t *t) { settle(t->data); }

/* A worker made a batch job: the runner takes at once and polls often again, the webhooks too (hooks.h). */
static void on_jobs_made(uv_poll_t *p, int status, int events) {
  (void)events;
  struct dispatcher *d = p->data;
  uint64_t n;
  if (status < 0) { /* the fd failed: the store's polls still find every job, within RUNNER_IDLE_POLL_MS */
    log_msg(LOG_WARN, "new batch jobs wait for the job store's polls", "error", uv_strerror(status), NULL);
    uv_poll_stop(p);
    return;
  }
  if (read(d->jobs_made_fd, &n, sizeof(n)) < 0) return; /* EAGAIN: nothing to read after all */
  if (d->hooks != NULL) hooks_wake(d->hooks);
  if (d->runner != NULL) runner_wake(d->runner); /* kicks: settle at the next turn */
}

/* A job store call answered: the runner may start more, at the loop's next turn (kicks in one turn coalesce). */
static void kick_runner(void *arg) {
  struct dispatcher *d = arg;
  uv_timer_start(&d->timer, on_timer, 0, 0);
}

/*
 * A gateway without fetchers answers /health but every transcript waits for its deadline and fails: say why, once,
 * where an operator looks first.
 */
static void on_lonely(uv_timer_t *t) {
  struct dispatcher *d = t->data;
  struct dispatcher_stats st;
  core_stats(d->core, &st);
  if (st.fetchers_connected > 0) return;
  char after[24];
  snprintf(after, sizeof(after), "%d", VTS_NO_FETCHER_WARN_MS / 1000);
  log_msg(LOG_WARN, "no fetcher connected: transcript requests wait for one and fail at their deadline", "=after_s",
          after, "jobs_url", d->cfg->jobs_url, NULL);
}

/* A fetcher's message to the core: its request (the message, body cleared, or a copy of its header) and content. */
static void handle_fetcher_msg(struct dispatcher *d, nng_msg *msg, nng_pipe pipe) {
  uint64_t id = nng_pipe_id(pipe);
  uint64_t now = util_now_ms();
  const void *body = nng_msg_body(msg);
  size_t len = nng_msg_len(msg);
  int type = proto_peek_type(body, len);
  uint64_t declined = 0;
  uint8_t why = PROTO_DECLINE_BUSY;
  if (type == PROTO_READY) {
    nng_msg_clear(msg);
    core_fetcher_msg(d->core, now, id, msg, CORE_READY, 0, NULL);
    return;
  }
  if (type == PROTO_DECLINE && proto_decode_decline(body, len, &declined, &why) == 0) {
    nng_msg_clear(msg);
    core_fetcher_msg(d->core, now, id, msg, why == PROTO_DECLINE_BUDGET ? CORE_DECLINE_BUDGET : CORE_DECLINE, declined,
                     NULL);
    return;
  }
  struct proto_result res;
  bool result = (type == PROTO_RESULT || type == PROTO_RESULT_LAST) && proto_decode_result(body, len, &res) == 0;
  /* The result's body lives in msg: the core is handed a request of its own, the header alone. */
  nng_msg *token = NULL;
  if (nng_msg_alloc(&token, 0) != 0 ||
      nng_msg_header_append(token, nng_msg_header(msg), nng_msg_header_len(msg)) != 0) {
    log_msg(LOG_ERROR, "dispatcher out of memory", NULL);
    abort();
  }
  if (result) {
    /* A webhook's receiver is not the platform: its answers are counted by the hooks (vts_webhook_deliveries_total). */
    if (res.source != PROTO_SOURCE_WEBHOOK) metrics_upstream(&res);
    core_fetcher_msg(d->core, now, id, token, type == PROTO_RESULT_LAST ? CORE_RESULT_LAST : CORE_RESULT, 0, &res);
  } else {
    core_fetcher_msg(d->core, now, id, token, CORE_MALFORMED, 0, NULL);
  }
  nng_msg_free(msg);
}

static void handle_slot(struct dispatcher *d, struct slot *s) {
  int rv = nng_aio_result(s->aio);
  if (s->state == SLOT_RECEIVING) {
    d->wrecv_armed = false;
    arm_worker_recv(d);
    if (rv != 0) {
      if (rv != NNG_ECLOSED) log_msg(LOG_WARN, "worker receive failed", "error", nng_strerror(rv), NULL);
      slot_free(s);
      return;
    }
    nng_msg *msg = nng_aio_get_msg(s->aio);
    nng_aio_set_msg(s->aio, NULL);
    struct proto_job req;
    bool ok = proto_decode_job(nng_msg_body(msg), nng_msg_len(msg), &req) == 0;
    s->state = SLOT_HOLDING;
    /* The request borrows from the message (a browse target): the core copies what it keeps. */
    core_request(d->core, util_now_ms(), &s->waiter, ok ? &req : NULL);
    nng_msg_free(msg);
    return;
  }
  /* SLOT_SENDING: a worker that went away is not an error worth more than a debug line. */
  if (rv != 0) log_msg(LOG_DEBUG, "worker reply not sent", "error", nng_strerror(rv), NULL);
  slot_free(s);
}

static void handle_event(struct dispatcher *d, struct event *ev) {
  switch (ev->type) {
    case EV_WORKER_SLOT:
      handle_slot(d, ev->slot);
      return;
    case EV_FETCHER_MSG:
      handle_fetcher_msg(d, ev->msg, ev->pipe);
      break;
    case EV_FETCHER_ADD:
      core_fetcher_added(d->core, util_now_ms(), nng_pipe_id(ev->pipe));
      break;
    case EV_FETCHER_REM:
      core_fetcher_gone(d->core, util_now_ms(), nng_pipe_id(ev->pipe));
      break;
  }
  free(ev);
}

static void discard_event(struct event *ev) {
  if (ev->type == EV_WORKER_SLOT) return;
  if (ev->msg != NULL) nng_msg_free(ev->msg);
  free(ev);
}

static void on_wake(uv_async_t *a) {
  struct dispatcher *d = a->data;
  pthread_mutex_lock(&d->lock);
  struct event *ev = d->ev_head;
  d->ev_head = d->ev_tail = NULL;
  bool stop = stop_due(d, util_now_ms());
  pthread_mutex_unlock(&d->lock);
  while (ev != NULL) {
    struct event *next = ev->next;
    if (stop)
      discard_event(ev);
    else
      handle_event(d, ev);
    ev = next;
  }
  settle(d);
}

/*
 * How long the loop's thread has waited for a core in all (runnable, not running: the second field of its schedstat),
 * in ns; 0 without the file, so that a turn then counts whole.
 */
static uint64_t thread_queued_ns(const struct dispatcher *d) {
  char text[96];
  if (d->schedstat_fd < 0) return 0;
  ssize_t n = pread(d->schedstat_fd, text, sizeof(text) - 1, 0);
  if (n <= 0) return 0;
  text[n] = '\0';
  char *end;
  errno = 0;
  (void)strtoull(text, &end, 10);
  unsigned long long queued = strtoull(end, NULL, 10);
  return errno == 0 ? (uint64_t)queued : 0;
}

/*
 * The end of a loop turn, before the loop waits, measured as a worker's (metrics_turn_end): the stall a request
 * arriving meanwhile sees; and the same less the time the thread waited for a core, which is the loop's own: its work
 * and any call it blocked in (a store call on the loop, as before the store's thread), without what a busy machine's
 * other processes took. Every L1 miss crosses this loop, so the wait for a core is read only for a turn long enough to
 * leave the histograms' first bucket; a shorter one counts its own time as its length, in the same bucket. The wait
 * read is then the one since the last read, so a long turn after short ones also leaves out what they and the waits for
 * events between them waited for a core: its own time errs short by that, never long.
 */
static void on_turn_prepare(uv_prepare_t *h) {
  struct dispatcher *d = h->data;
  uint64_t busy_ns;
  if (!metrics_turn_end(&d->turn_end, &d->loop, &busy_ns)) {
    d->turn_queued_ns = thread_queued_ns(d);
    return;
  }
  uint64_t own_ns = busy_ns;
  if (!metrics_turn_unresolved(busy_ns / 1000)) {
    uint64_t queued = thread_queued_ns(d);
    uint64_t off = queued > d->turn_queued_ns ? queued - d->turn_queued_ns : 0;
    d->turn_queued_ns = queued;
    own_ns = busy_ns > off ? busy_ns - off : 0;
  }
  metrics_dispatcher_loop_turn(busy_ns / 1000, own_ns / 1000);
}

static void on_redis_got(void *arg, uint64_t job_id, int status, const struct proto_result *res, uint64_t ttl_left) {
  struct dispatcher *d = arg;
  core_redis_got(d->core, util_now_ms(), job_id, status, res, ttl_left);
  settle(d);
}

static void on_redis_claimed(void *arg, uint64_t job_id, int status) {
  struct dispatcher *d = arg;
  core_redis_claimed(d->core, util_now_ms(), job_id, status);
  settle(d);
}

/* Copies the dispatcher's counters into the gateway's shared metrics region, read by /metrics in the workers. */
static void metrics_publish_dispatcher(const struct dispatcher_stats *st) {
  struct metrics_shm *shm = metrics_shared();
  if (shm == NULL) return;
  _Atomic uint64_t *m = shm->dispatcher.counters;
#define PUBLISH_(field, type, metric, labels, help) \
  atomic_store_explicit(&m[DC_##field], st->field, memory_order_relaxed);
  DISPATCHER_COUNTERS(PUBLISH_)
#undef PUBLISH_
}

/* ---- process ---- */

/*
 * The signals the process takes: the stop (SIGTERM, SIGINT) and SIGHUP, which is the workers' business. Built as the
 * worker builds its own set: alike in shape, other signals for another process.
 */
static void stop_signals(sigset_t *set) {
  sigemptyset(set);
  sigaddset(set, SIGTERM);
  sigaddset(set, SIGINT);
  sigaddset(set, SIGHUP);
}

static void *signal_thread(void *arg) {
  struct dispatcher *d = arg;
  sigset_t set;
  stop_signals(&set);
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0 || sig == SIGHUP) continue; /* the key file is the workers' business */
    pthread_mutex_lock(&d->lock);
    if (d->workers_connected > 0) {
      char n[16];
      snprintf(n, sizeof(n), "%d", d->workers_connected);
      log_msg(LOG_INFO, "stopping once the workers have drained", "=workers", n, NULL);
    }
    d->stop_asked = true;
    d->stop_deadline_ms = util_now_ms() + (uint64_t)d->cfg->drain_timeout_ms + DISPATCH_STOP_GRACE_MS;
    pthread_mutex_unlock(&d->lock);
    uv_async_send(&d->wake);
    return NULL;
  }
}

/*
 * Listens on url; the fetchers' listener (cfg not NULL) takes the link's TLS for a tls+tcp URL. Returns 0, an nng
 * error, or -1 with a message in err for a TLS setting that cannot be used.
 */
/* Stops every nng activity first (so no callback runs any more), then frees what is left. */
static void teardown(struct dispatcher *d) {
  d->stopping = true;
  if (d->fsock_open) {
    d->next_handshakes_ms = 0;
    poll_handshakes(d, util_now_ms());
    link_handshakes_flush(&d->handshakes, d->cfg->jobs_url);
    nng_close(d->fsock);
  }
  if (d->wsock_open) nng_close(d->wsock);
  if (d->faio != NULL) nng_aio_stop(d->faio);
  for (struct slot *s = d->slots.next; s != &d->slots; s = s->next) nng_aio_stop(s->aio);

  pthread_mutex_lock(&d->lock);
  struct event *ev = d->ev_head;
  d->ev_head = d->ev_tail = NULL;
  pthread_mutex_unlock(&d->lock);
  while (ev != NULL) {
    struct event *next = ev->next;
    discard_event(ev);
    ev = next;
  }

  /* Redis first, quietly: what it still answers goes to no one. The core's tokens are messages, its waiters slots. */
  rcache_close(d->rcache);
  d->rcache = NULL;
  core_free(d->core);
  d->core = NULL;
  /* The runner's store queue runs what is queued, the webhooks' calls too, before the hooks go. */
  runner_free(d->runner);
  d->runner = NULL;
  hooks_free(d->hooks);
  d->hooks = NULL;
  while (d->slots.next != &d->slots) slot_free(d->slots.next);
  if (d->faio != NULL) nng_aio_free(d->faio);
  d->faio = NULL;
  if (d->loop_ready) {
    uv_close((uv_handle_t *)&d->wake, NULL);
    uv_close((uv_handle_t *)&d->timer, NULL);
    uv_close((uv_handle_t *)&d->lonely, NULL);
    uv_close((uv_handle_t *)&d->turn, NULL);
    if (d->jobs_made_on) uv_close((uv_handle_t *)&d->jobs_made, NULL);
    uv_run(&d->loop, UV_RUN_DEFAULT);
    if (d->schedstat_fd >= 0) close(d->schedstat_fd);
    d->schedstat_fd = -1;
    uv_loop_close(&d->loop);
    d->loop_ready = false;
  }
}

/* The dispatcher's state lives for the whole process: an nng callback can never outlive it. */
static struct dispatcher the_dispatcher;

/* Where a start failed, for its one log line: the step, the address it opened ("" for none), and what went wrong. */
struct start_err {
  const char *what;
  const char *url;
  char msg[256];
};

/* An nng error as -errno, its text kept for the log line. */
static int nng_fail(struct start_err *e, int nrv) {
  snprintf(e->msg, sizeof(e->msg), "%s", nng_strerror(nrv));
  return link_errno(nrv);
}

/*
 * A listener of url on sock, with the TLS settings of cfg (NULL: plain, the workers' local socket). Returns 0 or
 * -errno, e->msg saying why (nng's words, or the TLS setting at fault).
 */
static int open_listener(nng_socket sock, const char *url, const struct vts_config *cfg, nng_listener *out,
                         struct start_err *e) {
  nng_listener l;
  int rv = nng_listener_create(&l, sock, url);
  if (rv != 0) return nng_fail(e, rv);
  /* Per listener: a message over the limit closes only the connection that sent it (a 500 for its job). */
  rv = nng_listener_set_size(l, NNG_OPT_RECVMAXSZ, VTS_MAX_MESSAGE_BYTES);
  if (rv != 0) return nng_fail(e, rv);
  if (cfg != NULL && (rv = link_tls_listener(cfg, l, url, e->msg, sizeof(e->msg))) != 0) return rv < 0 ? rv : -EINVAL;
  rv = nng_listener_start(l, 0);
  if (rv != 0) return nng_fail(e, rv);
  if (out != NULL) *out = l;
  return 0;
}

/* Blocked before nng starts any thread, so that every thread inherits the mask and only sigwait sees them. */
static void block_signals(void) {
  sigset_t set;
  stop_signals(&set);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
}

/*
 * The loop and its handles: the wake-up of nng's threads, the core's timer, the "no fetcher yet" warning, and the
 * measure of its turns (which keeps no loop alive).
 */
static int start_loop(struct dispatcher *d, struct start_err *e) {
  e->what = "loop";
  int rv = uv_loop_init(&d->loop); /* libuv's codes are -errno already */
  if (rv != 0) {
    snprintf(e->msg, sizeof(e->msg), "%s", uv_strerror(rv));
    return rv;
  }
  /* The time the loop waits for events, so that a turn's length leaves it out (on_turn_prepare). */
  uv_loop_configure(&d->loop, UV_METRICS_IDLE_TIME);
  uv_async_init(&d->loop, &d->wake, on_wake);
  uv_timer_init(&d->loop, &d->timer);
  uv_timer_init(&d->loop, &d->lonely);
  uv_prepare_init(&d->loop, &d->turn);
  d->wake.data = d->timer.data = d->lonely.data = d->turn.data = d;
  /* Opened by the loop's thread: thread-self is the thread that opens it. */
  d->schedstat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  uv_prepare_start(&d->turn, on_turn_prepare);
  uv_unref((uv_handle_t *)&d->turn);
  d->loop_ready = true;
  return 0;
}

/* The decision core with its acts, the shared cache (when Redis is configured), the batch jobs' runner and hooks. */
static int start_core(struct dispatcher *d, struct start_err *e) {
  e->what = "cache";
  d->rcache = rcache_new(&d->loop, d->cfg, on_redis_got, on_redis_claimed, d);
  struct core_ops ops = {
      .ctx = d,
      .answer = act_answer,
      .send_job = act_send_job,
      .send_ready = act_send_ready,
      .drop_token = act_drop_token,
      .close_fetcher = act_close_fetcher,
  };
  if (d->rcache != NULL) {
    ops.redis_get = act_redis_get;
    ops.redis_claim = act_redis_claim;
    ops.redis_put = act_redis_put;
    ops.redis_release = act_redis_release;
    ops.redis_renew = act_redis_renew;
  }
  d->core = core_new(d->cfg, &ops);
  if (d->core == NULL) {
    snprintf(e->msg, sizeof(e->msg), "out of memory");
    return -ENOMEM;
  }
  d->runner = runner_new(d->cfg, d->limits, d->core, &d->loop, kick_runner, d);
  if (d->runner != NULL) d->hooks = hooks_new(d->cfg, d->core, d->runner);
  if (d->runner != NULL && d->jobs_made_fd >= 0 && uv_poll_init(&d->loop, &d->jobs_made, d->jobs_made_fd) == 0) {
    d->jobs_made.data = d;
    d->jobs_made_on = true;
    uv_poll_start(&d->jobs_made, UV_READABLE, on_jobs_made);
    uv_unref((uv_handle_t *)&d->jobs_made);
  }
  return 0;
}

/*
 * One of the two sockets, opened by open_fn into *sock (*opened then set, for the teardown), with pipe_cb told of
 * every pipe that comes and goes; e->msg says why not.
 */
static int open_socket(struct dispatcher *d, int (*open_fn)(nng_socket *), nng_socket *sock, bool *opened,
                       nng_pipe_cb pipe_cb, struct start_err *e) {
  int rv = open_fn(sock);
  if (rv != 0) return nng_fail(e, rv);
  *opened = true;
  if ((rv = nng_pipe_notify(*sock, NNG_PIPE_EV_ADD_POST, pipe_cb, d)) != 0 ||
      (rv = nng_pipe_notify(*sock, NNG_PIPE_EV_REM_POST, pipe_cb, d)) != 0)
    return nng_fail(e, rv);
  return 0;
}

/* The fetchers' socket (raw rep0: replies in any order) and its listener on VTS_JOBS_URL. */
static int start_fetcher_socket(struct dispatcher *d, struct start_err *e) {
  const char *url = d->cfg->jobs_url;
  e->what = "fetcher socket";
  e->url = url;
  int rv = open_socket(d, nng_rep0_open_raw, &d->fsock, &d->fsock_open, fetcher_pipe_cb, e);
  if (rv != 0) return rv;
  rv = nng_socket_set_ms(d->fsock, NNG_OPT_SENDTIMEO, VTS_DISPATCH_SEND_TIMEOUT_MS);
  if (rv != 0) return nng_fail(e, rv);
  rv = open_listener(d->fsock, url, d->cfg, &d->flistener, e);
  if (rv != 0) return rv;
  if (!link_url_tls(url) && !link_url_loopback(url))
    log_msg(LOG_WARN,
            "jobs link is plain tcp on a non-loopback address: any process that reaches it can take jobs and answer "
            "them; use tls+tcp:// with VTS_JOBS_TLS_CA, VTS_JOBS_TLS_CERT and VTS_JOBS_TLS_KEY",
            "url", url, NULL);
  return 0;
}

/* The first receive of the fetchers' socket (each callback posts the next), once the workers' socket is open. */
static int start_receiving(struct dispatcher *d, struct start_err *e) {
  e->what = "fetcher receive";
  int rv = nng_aio_alloc(&d->faio, fetcher_recv_cb, d);
  if (rv != 0) return nng_fail(e, rv);
  nng_recv_aio(d->fsock, d->faio);
  return 0;
}

/* The HTTP workers' socket and its listener on the master's local address. */
static int start_worker_socket(struct dispatcher *d, const char *worker_url, struct start_err *e) {
  e->what = "worker socket";
  e->url = worker_url;
  int rv = open_socket(d, nng_rep0_open, &d->wsock, &d->wsock_open, worker_pipe_cb, e);
  if (rv != 0) return rv;
  return open_listener(d->wsock, worker_url, NULL, NULL, e);
}

/* The thread that waits for SIGTERM, SIGINT and SIGHUP (pthread's codes are errno values). */
static int start_signal_thread(struct dispatcher *d, pthread_t *out, struct start_err *e) {
  e->what = "signal thread";
  int rv = pthread_create(out, NULL, signal_thread, d);
  if (rv != 0) snprintf(e->msg, sizeof(e->msg), "%s", rv == EAGAIN ? "no resources for a thread" : "no thread");
  return -rv;
}

int dispatcher_main(const struct vts_config *cfg, const char *worker_url, const struct ratelimit_shared *limits,
                    int jobs_made_fd) {
  enum log_level level = LOG_INFO;
  log_level_parse(cfg->log_level, &level);
  log_init("dispatcher", level);
  block_signals();

  struct dispatcher *d = &the_dispatcher;
  pthread_t sig_thread;
  memset(d, 0, sizeof(*d));
  d->cfg = cfg;
  d->limits = limits;
  d->jobs_made_fd = jobs_made_fd;
  d->slots.next = d->slots.prev = &d->slots;
  pthread_mutex_init(&d->lock, NULL);

  struct start_err e = {.what = "", .url = "", .msg = ""};
  int rv = start_loop(d, &e);
  if (rv == 0) rv = start_core(d, &e);
  if (rv == 0) rv = start_fetcher_socket(d, &e);
  if (rv == 0) rv = start_worker_socket(d, worker_url, &e);
  if (rv == 0) rv = start_receiving(d, &e);
  if (rv == 0) rv = start_signal_thread(d, &sig_thread, &e);
  if (rv != 0) {
    log_msg(LOG_ERROR, "dispatcher cannot start", "what", e.what, "url", e.url, "error", e.msg, NULL);
    link_teardown_watchdog(VTS_DISPATCH_STOP_TIMEOUT_MS, 1, "dispatcher teardown stuck in nng: exiting without it");
    teardown(d);
    return 1;
  }

  log_msg(LOG_INFO, "dispatcher started", "jobs_url", cfg->jobs_url, "worker_url", worker_url, "redis",
          d->rcache != NULL ? "cache and claims" : "none", NULL);
  settle(d);
  uv_timer_start(&d->lonely, on_lonely, VTS_NO_FETCHER_WARN_MS, 0);
  uv_run(&d->loop, UV_RUN_DEFAULT);
  pthread_join(sig_thread, NULL);
  link_teardown_watchdog(VTS_DISPATCH_STOP_TIMEOUT_MS, 0, "dispatcher teardown stuck in nng: exiting without it");
  teardown(d);
  log_msg(LOG_INFO, "dispatcher stopped", NULL);
  return 0;
}
