/*
 * The dispatcher: one process, forked by the gateway master, between the HTTP workers and the fetchers.
 *
 * Threading model. One dispatcher thread owns every piece of state (cache, jobs, queues, fetchers, worker
 * requests) and is the only thread that decides anything. nng's threads only report: the aio and pipe callbacks
 * push an event onto a mutex-protected queue and signal a condition variable; the dispatcher thread takes the whole
 * queue, handles each event, fails what passed its deadline and hands queued jobs to idle fetchers. Deadlines need no
 * timer of their own: the thread waits on the condition variable (CLOCK_MONOTONIC) no longer than the earliest
 * deadline. Signals are blocked in every thread (the mask is set before nng starts its threads) and taken by a small
 * sigwait thread, which raises the stop flag on SIGTERM or SIGINT.
 *
 * Fetcher side: a raw rep0 socket. A raw socket hands us each request with its backtrace in the message header, so
 * a request can be held for as long as its fetcher is idle, and answered later (with that fetcher's next job) by
 * sending a message carrying the same header. Each fetcher has at most one request outstanding, so the raw socket's
 * per-connection send queue (64 messages, overflow silently dropped) is never at risk. The one request answered at
 * once is a stopping fetcher's PROTO_RESULT_LAST: with a PROTO_READY, and that fetcher gets no more jobs.
 *
 * Worker side: a cooked rep0 socket with one context per worker request. A raw socket would work the same way, but
 * its 64-message per-connection send queue drops replies beyond that: one worker with a hundred clients waiting on
 * the same video would lose answers when the job finishes. A context's send waits in line for its connection instead.
 */
#include "gateway/dispatcher/dispatcher.h"
#include "gateway/metrics/metrics.h"
#include "gateway/cache/rcache.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/cache/cache.h"
#include "gateway/dispatcher/bodycheck.h"
#include "proto/link.h"

#define JOB_TABLE_BUCKETS 4096 /* coalescing table; VTS_DISPATCH_MAX_JOBS bounds the chains */
#define IDLE_WAKE_MS 1000      /* the loop turns at least this often, to publish stats and retry a failed rearm */
#define REARM_RETRY_MS 100     /* retry of a worker receive that could not be armed (out of memory) */

/* An intrusive doubly-linked list with a sentinel; one implementation for every list below. */
struct link {
  struct link *prev, *next;
};
struct list {
  struct link head;
  size_t n;
};

#define CONTAINER_OF(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

static void list_init(struct list *l) {
  l->head.prev = l->head.next = &l->head;
  l->n = 0;
}
static bool list_empty(const struct list *l) { return l->n == 0; }
static void list_append(struct list *l, struct link *k) {
  k->prev = l->head.prev;
  k->next = &l->head;
  l->head.prev->next = k;
  l->head.prev = k;
  l->n++;
}
static void list_remove(struct list *l, struct link *k) {
  k->prev->next = k->next;
  k->next->prev = k->prev;
  k->prev = k->next = NULL;
  l->n--;
}
static void list_prepend(struct list *l, struct link *k) {
  k->next = l->head.next;
  k->prev = &l->head;
  l->head.next->prev = k;
  l->head.next = k;
  l->n++;
}
static struct link *list_first(const struct list *l) { return l->n ? l->head.next : NULL; }

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
  struct event ev;
  struct link all;    /* dispatcher.slots */
  struct link waiter; /* job.waiters while SLOT_HOLDING */
  struct dispatcher *d;
  nng_ctx ctx;
  nng_aio *aio;
  enum slot_state state;
  char request_id[PROTO_MAX_REQUEST_ID + 1];
};

enum fetcher_state {
  F_CONNECTED, /* connected, has asked for nothing yet */
  F_IDLE,      /* holds a request: may be given a job */
  F_BUSY,      /* was given job_id; job is NULL once that job failed without it */
  F_DEAD,      /* connection closed; kept a while so messages still queued from it are refused */
};
struct fetcher {
  struct link all;  /* dispatcher.fetchers */
  struct link idle; /* dispatcher.idle, FIFO: the longest idle fetcher gets the next job */
  nng_pipe pipe;
  enum fetcher_state state;
  nng_msg *held; /* F_IDLE: the request to answer, body cleared, backtrace header kept */
  struct job *job;
  uint64_t job_id;
  uint64_t dead_since_ms;
};

struct job {
  struct job *hnext; /* coalescing table chain */
  struct link q;     /* a queue, or the running list */
  struct list *in;   /* which of them, NULL for none */
  uint64_t id;
  uint64_t hash;
  struct proto_job pj;             /* video, language, kind, first requester's request id */
  char key[PROTO_MAX_JOB_KEY + 1]; /* proto_job_key of the request: the cache and coalescing key with the video */
  uint64_t created_ms;
  uint64_t deadline_ms; /* queued: fail when not taken by then; running: fail at deadline + grace */
  uint64_t assigned_ms;
  struct fetcher *fetcher;
  struct list waiters; /* slots */
};

struct dispatcher {
  struct rcache *rcache; /* the transcript cache in Redis behind d->cache, NULL without VTS_REDIS_URL */
  const struct vts_config *cfg;
  nng_socket fsock, wsock;
  bool fsock_open, wsock_open;
  nng_aio *faio;
  bool wrecv_armed;
  bool stopping;
  struct cache *cache;
  struct job *table[JOB_TABLE_BUCKETS];
  size_t njobs;
  struct list q_captions, q_speech, running;
  uint64_t speech_running;
  struct list fetchers, idle;
  uint64_t fetchers_live; /* fetchers not F_DEAD: at most VTS_JOBS_MAX_FETCHERS */
  struct list slots;
  uint64_t next_job_id;
  struct dispatcher_stats st;

  /* Shared with nng threads and the signal thread, under lock. */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct event *ev_head, *ev_tail;
  bool stop_asked;           /* SIGTERM or SIGINT came */
  uint64_t stop_deadline_ms; /* stop then even with workers still connected */
  int workers_connected;     /* worker connections open on the worker socket */
};

/* Past the workers' own drain deadline, how long a stopping dispatcher still waits for them to go. */
#define DISPATCH_STOP_GRACE_MS 2000

static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static struct dispatcher_stats stats_published;

void dispatcher_stats(struct dispatcher_stats *out) {
  pthread_mutex_lock(&stats_lock);
  *out = stats_published;
  pthread_mutex_unlock(&stats_lock);
}

static const char *u64s(char *buf, size_t len, uint64_t v) {
  snprintf(buf, len, "%" PRIu64, v);
  return buf;
}
#define NUM(v) u64s((char[24]){0}, 24, (uint64_t)(v))

/* ---- events: the only code that runs on nng threads ---- */

static void push_event(struct dispatcher *d, struct event *ev) {
  ev->next = NULL;
  pthread_mutex_lock(&d->lock);
  if (d->ev_tail != NULL)
    d->ev_tail->next = ev;
  else
    d->ev_head = ev;
  d->ev_tail = ev;
  pthread_cond_signal(&d->cond);
  pthread_mutex_unlock(&d->lock);
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

/* runs on an nng thread */
/* runs on an nng thread: a worker connected or went away (its process ended, or it closed the link draining). */
static void worker_pipe_cb(nng_pipe pipe, nng_pipe_ev which, void *arg) {
  (void)pipe;
  struct dispatcher *d = arg;
  pthread_mutex_lock(&d->lock);
  d->workers_connected += which == NNG_PIPE_EV_REM_POST ? -1 : 1;
  pthread_cond_signal(&d->cond);
  pthread_mutex_unlock(&d->lock);
}

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
  list_append(&d->slots, &s->all);
  return s;
}

static void slot_free(struct dispatcher *d, struct slot *s) {
  nng_msg *m = nng_aio_get_msg(s->aio);
  if (m != NULL) nng_msg_free(m);
  nng_aio_free(s->aio);
  nng_ctx_close(s->ctx);
  list_remove(&d->slots, &s->all);
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
static void send_reply(struct dispatcher *d, struct slot *s, const struct buf *enc) {
  nng_msg *m = NULL;
  if (enc->len == 0 || nng_msg_alloc(&m, 0) != 0 || nng_msg_append(m, enc->data, enc->len) != 0) {
    /* The worker's own deadline answers this request with a 500. */
    log_msg(LOG_ERROR, "cannot build worker reply", "request_id", s->request_id, NULL);
    if (m != NULL) nng_msg_free(m);
    slot_free(d, s);
    return;
  }
  s->state = SLOT_SENDING;
  nng_aio_set_msg(s->aio, m);
  nng_ctx_send(s->ctx, s->aio);
}

static void answer_one(struct dispatcher *d, struct slot *s, const struct proto_result *res, uint64_t ttl_ms) {
  struct buf b = BUF_INIT;
  encode_reply(&b, res, ttl_ms);
  send_reply(d, s, &b);
  buf_free(&b);
}

static void answer_internal(struct dispatcher *d, struct slot *s, const char *detail) {
  struct proto_result r = {.outcome = PROTO_INTERNAL};
  snprintf(r.detail, sizeof(r.detail), "%s", detail);
  answer_one(d, s, &r, 0);
}

/* ---- jobs ---- */

/* The kind's name in logs. */
static const char *kind_name(uint8_t kind) {
  return kind == PROTO_KIND_SPEECH ? "speech" : kind == PROTO_KIND_TRACKS ? "tracks" : "captions";
}

static struct job **job_bucket(struct dispatcher *d, uint64_t hash) { return &d->table[hash % JOB_TABLE_BUCKETS]; }

static struct job *job_find(struct dispatcher *d, const char *video_id, const char *key) {
  uint64_t h = cache_key_hash(video_id, key);
  for (struct job *j = *job_bucket(d, h); j != NULL; j = j->hnext) {
    if (j->hash == h && strcmp(j->pj.video_id, video_id) == 0 && strcmp(j->key, key) == 0) return j;
  }
  return NULL;
}

static struct job *job_new(struct dispatcher *d, const struct proto_job *req, uint64_t now) {
  struct job *j = calloc(1, sizeof(*j));
  if (j == NULL) return NULL;
  j->id = ++d->next_job_id;
  j->pj = *req;
  /* A worker asks for a transcript or for tracks; only the dispatcher turns a transcript job into a speech job. */
  j->pj.kind = req->kind == PROTO_KIND_TRACKS ? PROTO_KIND_TRACKS : PROTO_KIND_CAPTIONS;
  proto_job_key(&j->pj, j->key);
  j->hash = cache_key_hash(req->video_id, j->key);
  j->created_ms = now;
  j->deadline_ms = now + (uint64_t)d->cfg->job_timeout_ms;
  list_init(&j->waiters);
  struct job **b = job_bucket(d, j->hash);
  j->hnext = *b;
  *b = j;
  d->njobs++;
  d->st.jobs_created++;
  return j;
}

static void job_enqueue(struct list *q, struct job *j) {
  list_append(q, &j->q);
  j->in = q;
}

/* Takes the job out of its queue or the running list, and away from its fetcher. */
static void job_detach(struct dispatcher *d, struct job *j) {
  if (j->in == &d->running && j->pj.kind == PROTO_KIND_SPEECH) d->speech_running--;
  if (j->in != NULL) list_remove(j->in, &j->q);
  j->in = NULL;
  if (j->fetcher != NULL) {
    j->fetcher->job = NULL;
    j->fetcher = NULL;
  }
}

static void job_destroy(struct dispatcher *d, struct job *j) {
  job_detach(d, j);
  struct job **pp = job_bucket(d, j->hash);
  while (*pp != j) pp = &(*pp)->hnext;
  *pp = j->hnext;
  d->njobs--;
  free(j);
}

static void count_outcome(struct dispatcher *d, uint8_t outcome) {
  switch (outcome) {
    case PROTO_OK:
      d->st.outcome_ok++;
      break;
    case PROTO_NOT_AVAILABLE:
      d->st.outcome_not_available++;
      break;
    case PROTO_UPSTREAM_FAILED:
      d->st.outcome_upstream_failed++;
      break;
    default:
      d->st.outcome_internal++;
      break;
  }
}

/* Answers every waiter with the job's final result, keeps it in the cache when it may be kept, and ends the job. */
static void job_finish(struct dispatcher *d, struct job *j, const struct proto_result *in) {
  struct proto_result res = *in;
  res.job_id = j->id;
  if (res.outcome == PROTO_NO_CAPTIONS) res.outcome = PROTO_NOT_AVAILABLE;
  uint64_t ttl = 0;
  if (cache_put(d->cache, j->pj.video_id, j->key, &res, UINT64_MAX, &ttl) != 0) ttl = 0;
  /* Other gateways sharing Redis see it too; a Redis that cannot take it now costs nothing but the sharing. */
  if (ttl > 0 && d->rcache != NULL) rcache_put(d->rcache, j->pj.video_id, j->key, &res, ttl);

  struct buf b = BUF_INIT;
  encode_reply(&b, &res, ttl);
  size_t nwaiters = j->waiters.n;
  struct link *k;
  for (k = list_first(&j->waiters); k != NULL; k = list_first(&j->waiters)) {
    list_remove(&j->waiters, k);
    send_reply(d, CONTAINER_OF(k, struct slot, waiter), &b);
  }
  buf_free(&b);

  count_outcome(d, res.outcome);
  uint64_t now = util_now_ms();
  uint64_t queue_ms = (j->assigned_ms ? j->assigned_ms : now) - j->created_ms;
  log_msg(res.outcome == PROTO_INTERNAL ? LOG_WARN : LOG_INFO, "job finished", "request_id", j->pj.request_id,
          "=job_id", NUM(j->id), "video_id", j->pj.video_id, "lang", j->pj.lang, "kind", kind_name(j->pj.kind),
          "=status", NUM(proto_outcome_status(res.outcome)), "detail", res.detail, "reason",
          proto_reason_name(res.reason), "=waiters", NUM(nwaiters), "=queue_ms", NUM(queue_ms), "=fetch_ms",
          NUM(res.fetch_ms), "=dur_ms", NUM(now - j->created_ms), NULL);
  job_destroy(d, j);
}

static void job_fail(struct dispatcher *d, struct job *j, const char *detail) {
  struct proto_result r = {.outcome = PROTO_INTERNAL};
  snprintf(r.detail, sizeof(r.detail), "%s", detail);
  job_finish(d, j, &r);
}

/* A fetcher's result for a job it holds: the end of the job, or its second life as a speech job. */
static void job_result(struct dispatcher *d, struct job *j, const struct proto_result *res) {
  uint64_t fetcher = j->fetcher != NULL ? nng_pipe_id(j->fetcher->pipe) : 0;
  job_detach(d, j);
  metrics_upstream(res);
  const char *why = NULL;
  int (*bodycheck)(const char *, size_t, const char **) =
      j->pj.kind == PROTO_KIND_TRACKS ? bodycheck_tracks : bodycheck_transcript;
  if (res->outcome == PROTO_OK && bodycheck(res->body, res->body_len, &why) != 0) {
    /* Neither cached nor served: the waiters get a 500, and the next request for the video asks a fetcher again. */
    d->st.results_refused++;
    log_msg(LOG_WARN, "fetcher result refused: not what its job asked for", "request_id", j->pj.request_id, "=job_id",
            NUM(j->id), "video_id", j->pj.video_id, "why", why, "=bytes", NUM(res->body_len), "=fetcher", NUM(fetcher),
            NULL);
    job_fail(d, j, "bad_result");
    return;
  }
  /* A translation is of a caption track: a video without one has none to offer, speech or not. */
  if (res->outcome == PROTO_NO_CAPTIONS && d->cfg->speech_fallback && j->pj.kind == PROTO_KIND_CAPTIONS &&
      j->pj.translate[0] == '\0') {
    uint64_t now = util_now_ms();
    j->pj.kind = PROTO_KIND_SPEECH;
    j->deadline_ms = now + (uint64_t)d->cfg->speech_timeout_ms;
    j->assigned_ms = 0;
    job_enqueue(&d->q_speech, j);
    d->st.speech_jobs++;
    log_msg(LOG_INFO, "job queued for speech", "request_id", j->pj.request_id, "=job_id", NUM(j->id), "video_id",
            j->pj.video_id, "=fetch_ms", NUM(res->fetch_ms), NULL);
    return;
  }
  job_finish(d, j, res);
}

static void handle_worker_request(struct dispatcher *d, struct slot *s, nng_msg *msg) {
  struct proto_job req;
  d->st.requests++;
  int rv = proto_decode_job(nng_msg_body(msg), nng_msg_len(msg), &req);
  nng_msg_free(msg);
  if (rv != 0 || req.job_id != 0) {
    d->st.protocol_errors++;
    log_msg(LOG_WARN, "malformed worker request", NULL);
    answer_internal(d, s, "bad_request");
    return;
  }
  memcpy(s->request_id, req.request_id, sizeof(s->request_id));

  char key[PROTO_MAX_JOB_KEY + 1];
  proto_job_key(&req, key);
  struct proto_result hit;
  uint64_t ttl_left;
  if (cache_get(d->cache, req.video_id, key, &hit, &ttl_left) == 0) {
    d->st.cache_hits++;
    log_msg(LOG_DEBUG, "cache hit", "request_id", req.request_id, "video_id", req.video_id, "lang", req.lang, "=status",
            NUM(proto_outcome_status(hit.outcome)), NULL);
    answer_one(d, s, &hit, ttl_left);
    return;
  }

  struct job *j = job_find(d, req.video_id, key);
  if (j == NULL && d->rcache != NULL && rcache_get(d->rcache, req.video_id, key, &hit, &ttl_left) == 0) {
    /* Another gateway fetched it: keep it here too for what is left of its lifetime. */
    d->st.cache_hits++;
    uint64_t ttl = 0;
    if (cache_put(d->cache, req.video_id, key, &hit, ttl_left, &ttl) != 0) ttl = 0;
    log_msg(LOG_DEBUG, "redis cache hit", "request_id", req.request_id, "video_id", req.video_id, "lang", req.lang,
            NULL);
    answer_one(d, s, &hit, ttl);
    return;
  }
  d->st.cache_misses++;
  if (j != NULL) {
    d->st.coalesced++;
    list_append(&j->waiters, &s->waiter);
    s->state = SLOT_HOLDING;
    log_msg(LOG_DEBUG, "job coalesced", "request_id", req.request_id, "=job_id", NUM(j->id), "video_id", req.video_id,
            NULL);
    return;
  }
  if (d->njobs >= VTS_DISPATCH_MAX_JOBS) {
    d->st.rejected_full++;
    log_msg(LOG_WARN, "job refused: queue full", "request_id", req.request_id, "video_id", req.video_id, NULL);
    answer_internal(d, s, "queue_full");
    return;
  }
  j = job_new(d, &req, util_now_ms());
  if (j == NULL) {
    answer_internal(d, s, "no_memory");
    return;
  }
  list_append(&j->waiters, &s->waiter);
  s->state = SLOT_HOLDING;
  job_enqueue(&d->q_captions, j);
  log_msg(LOG_INFO, "job queued", "request_id", req.request_id, "=job_id", NUM(j->id), "video_id", req.video_id, "lang",
          req.lang, NULL);
}

/* ---- fetchers ---- */

static struct fetcher *fetcher_find(struct dispatcher *d, nng_pipe pipe) {
  for (struct link *k = d->fetchers.head.next; k != &d->fetchers.head; k = k->next) {
    struct fetcher *f = CONTAINER_OF(k, struct fetcher, all);
    if (nng_pipe_id(f->pipe) == nng_pipe_id(pipe)) return f;
  }
  return NULL;
}

/* From here on the fetcher is dead: it no longer counts against VTS_JOBS_MAX_FETCHERS. */
static void fetcher_set_dead(struct dispatcher *d, struct fetcher *f) {
  if (f->state != F_DEAD) d->fetchers_live--;
  f->state = F_DEAD;
  f->dead_since_ms = util_now_ms();
}

/*
 * The fetcher of a connection, made on its first event. A connection beyond VTS_JOBS_MAX_FETCHERS live ones is
 * closed at once and remembered as dead, so its messages are refused: a peer cannot grow the dispatcher's state by
 * opening connections.
 */
static struct fetcher *fetcher_get(struct dispatcher *d, nng_pipe pipe) {
  struct fetcher *f = fetcher_find(d, pipe);
  if (f != NULL) return f;
  f = calloc(1, sizeof(*f));
  if (f == NULL) return NULL;
  f->pipe = pipe;
  f->state = F_CONNECTED;
  list_append(&d->fetchers, &f->all);
  if (++d->fetchers_live > (uint64_t)d->cfg->jobs_max_fetchers) {
    d->st.fetchers_refused++;
    log_msg(LOG_WARN, "fetcher connection refused: VTS_JOBS_MAX_FETCHERS reached", "=fetcher", NUM(nng_pipe_id(pipe)),
            "=max", NUM(d->cfg->jobs_max_fetchers), NULL);
    fetcher_set_dead(d, f);
    nng_pipe_close(pipe);
  }
  return f;
}

static void fetcher_unidle(struct dispatcher *d, struct fetcher *f) {
  if (f->state != F_IDLE) return;
  list_remove(&d->idle, &f->idle);
  if (f->held != NULL) nng_msg_free(f->held);
  f->held = NULL;
}

/* The fetcher asked for work: keep its request (the header is the way back) and put it at the end of the line. */
static void fetcher_set_idle(struct dispatcher *d, struct fetcher *f, nng_msg *msg) {
  bool was_idle = f->state == F_IDLE;
  if (was_idle && f->held != NULL) nng_msg_free(f->held);
  nng_msg_clear(msg);
  f->held = msg;
  f->state = F_IDLE;
  if (!was_idle) list_append(&d->idle, &f->idle);
}

/* Ends a fetcher: its job fails with detail, its connection is closed, later messages from it are refused. */
static void fetcher_kill(struct dispatcher *d, struct fetcher *f, const char *detail, bool close_pipe) {
  if (f->job != NULL) job_fail(d, f->job, detail);
  fetcher_unidle(d, f);
  fetcher_set_dead(d, f);
  if (close_pipe) nng_pipe_close(f->pipe);
}

/*
 * A stopping fetcher delivered its last result: it is not idle, so it gets no job; the READY answer tells it the
 * result arrived and it may close. It is forgotten now (its later messages are refused), so its connection dropping
 * afterwards fails nothing.
 */
static void answer_ready(struct dispatcher *d, nng_msg *msg) {
  struct buf b = BUF_INIT;
  nng_msg_clear(msg); /* the header, the way back to the fetcher's request, stays */
  int rv = proto_encode_ready(&b);
  if (rv == 0) rv = nng_msg_append(msg, b.data, b.len) != 0 ? -ENOMEM : 0;
  buf_free(&b);
  if (rv == 0) rv = nng_sendmsg(d->fsock, msg, 0);
  /* Unanswered, the fetcher goes on after its own short wait: nothing is lost either way. */
  if (rv != 0) nng_msg_free(msg);
}

static void fetcher_leaving(struct dispatcher *d, struct fetcher *f, nng_msg *msg) {
  answer_ready(d, msg);
  log_msg(LOG_INFO, "fetcher leaving", "=fetcher", NUM(nng_pipe_id(f->pipe)), NULL);
  fetcher_unidle(d, f);
  fetcher_set_dead(d, f);
}

/*
 * The fetcher gave job_id back unrun: it is busy with another dispatcher's job. The job goes first in line for another
 * idle fetcher, with its deadline unchanged (no failure, never run twice); this fetcher stays connected but is given
 * nothing until it asks again. The READY answer is the acknowledgement.
 */
static void fetcher_declined(struct dispatcher *d, struct fetcher *f, uint64_t job_id, nng_msg *msg) {
  if (f->state == F_BUSY && f->job_id == job_id && f->job != NULL) {
    struct job *j = f->job;
    job_detach(d, j);
    j->assigned_ms = 0;
    struct list *q = j->pj.kind == PROTO_KIND_SPEECH ? &d->q_speech : &d->q_captions;
    list_prepend(q, &j->q);
    j->in = q;
    d->st.jobs_declined++;
    log_msg(LOG_INFO, "job declined by a busy fetcher: queued again", "request_id", j->pj.request_id, "=job_id",
            NUM(j->id), "=fetcher", NUM(nng_pipe_id(f->pipe)), NULL);
  }
  fetcher_unidle(d, f);
  f->state = F_CONNECTED;
  answer_ready(d, msg);
}

static void handle_fetcher_msg(struct dispatcher *d, nng_msg *msg, nng_pipe pipe) {
  struct fetcher *f = fetcher_get(d, pipe);
  if (f == NULL || f->state == F_DEAD) {
    nng_msg_free(msg);
    return;
  }
  const void *body = nng_msg_body(msg);
  size_t len = nng_msg_len(msg);
  int type = proto_peek_type(body, len);
  if (type == PROTO_READY) {
    if (f->state == F_BUSY && f->job != NULL) {
      /* It gave up on its job without a word: that job is lost, not re-run elsewhere. */
      log_msg(LOG_WARN, "fetcher asked for work while holding a job", "=fetcher", NUM(nng_pipe_id(pipe)), NULL);
      job_fail(d, f->job, "fetcher_abandoned");
    }
    fetcher_set_idle(d, f, msg);
    return;
  }
  uint64_t declined;
  if (type == PROTO_DECLINE && proto_decode_decline(body, len, &declined) == 0) {
    fetcher_declined(d, f, declined, msg);
    return;
  }
  struct proto_result res;
  if ((type == PROTO_RESULT || type == PROTO_RESULT_LAST) && proto_decode_result(body, len, &res) == 0) {
    bool last = type == PROTO_RESULT_LAST;
    if (f->state == F_BUSY && res.job_id == f->job_id) {
      if (f->job != NULL) {
        job_result(d, f->job, &res);
      } else {
        d->st.late_results++;
        log_msg(LOG_INFO, "late result dropped", "=job_id", NUM(res.job_id), "=fetcher", NUM(nng_pipe_id(pipe)),
                "=fetch_ms", NUM(res.fetch_ms), NULL);
      }
      /* after job_result: res.body borrows from msg */
      if (last)
        fetcher_leaving(d, f, msg);
      else
        fetcher_set_idle(d, f, msg);
      return;
    }
    if (f->state != F_BUSY) {
      /*
       * A result for no job of ours: a fetcher's REQ socket re-sends its last request when its connection is
       * replaced, so a dispatcher restart delivers results of the previous one here. It still means "idle" (or,
       * for a RESULT_LAST, "leaving").
       */
      d->st.late_results++;
      log_msg(LOG_INFO, "stale result dropped", "=job_id", NUM(res.job_id), "=fetcher", NUM(nng_pipe_id(pipe)), NULL);
      if (last)
        fetcher_leaving(d, f, msg);
      else
        fetcher_set_idle(d, f, msg);
      return;
    }
  }
  d->st.protocol_errors++;
  log_msg(LOG_WARN, "fetcher protocol error: connection closed", "=fetcher", NUM(nng_pipe_id(pipe)), "=type",
          NUM(type < 0 ? 0 : type), "=bytes", NUM(len), NULL);
  nng_msg_free(msg);
  fetcher_kill(d, f, "protocol_error", true);
}

static void handle_fetcher_gone(struct dispatcher *d, nng_pipe pipe) {
  struct fetcher *f = fetcher_get(d, pipe);
  if (f == NULL || f->state == F_DEAD) return;
  if (f->job != NULL) {
    d->st.fetcher_lost++;
    log_msg(LOG_WARN, "fetcher lost while holding a job", "=job_id", NUM(f->job->id), "=fetcher",
            NUM(nng_pipe_id(pipe)), NULL);
  }
  fetcher_kill(d, f, "fetcher_lost", false);
}

/* Hands queued jobs to idle fetchers: captions first, speech only below its concurrency limit. */
static void assign_jobs(struct dispatcher *d) {
  while (!list_empty(&d->idle)) {
    struct list *q = NULL;
    if (!list_empty(&d->q_captions))
      q = &d->q_captions;
    else if (!list_empty(&d->q_speech) && d->speech_running < (uint64_t)d->cfg->speech_max_concurrent)
      q = &d->q_speech;
    if (q == NULL) return;
    struct job *j = CONTAINER_OF(list_first(q), struct job, q);
    uint64_t now = util_now_ms();
    if (j->deadline_ms <= now) {
      d->st.queue_timeouts++;
      job_fail(d, j, "queue_timeout");
      continue;
    }
    struct fetcher *f = CONTAINER_OF(list_first(&d->idle), struct fetcher, idle);
    uint64_t left = j->deadline_ms - now;
    j->pj.job_id = j->id;
    j->pj.deadline_ms = left > UINT32_MAX ? UINT32_MAX : (uint32_t)left;

    struct buf b = BUF_INIT;
    nng_msg *m = f->held;
    int rv = proto_encode_job(&b, &j->pj);
    if (rv == 0) rv = nng_msg_append(m, b.data, b.len) != 0 ? -ENOMEM : 0;
    buf_free(&b);
    if (rv != 0) {
      job_fail(d, j, "encode_failed");
      continue;
    }
    list_remove(&d->idle, &f->idle);
    f->held = NULL;
    f->state = F_BUSY;
    f->job_id = j->id;
    rv = nng_sendmsg(d->fsock, m, 0);
    if (rv != 0) {
      /* Not handed to nng, so the fetcher never saw it: the job stays first in line; the fetcher is dropped. */
      nng_msg_free(m);
      log_msg(LOG_WARN, "cannot send job to fetcher", "=fetcher", NUM(nng_pipe_id(f->pipe)), "error", nng_strerror(rv),
              NULL);
      fetcher_kill(d, f, "send_failed", true);
      continue;
    }
    list_remove(q, &j->q);
    job_enqueue(&d->running, j);
    if (j->pj.kind == PROTO_KIND_SPEECH) d->speech_running++;
    j->fetcher = f;
    j->assigned_ms = now;
    f->job = j;
    log_msg(LOG_INFO, "job assigned", "request_id", j->pj.request_id, "=job_id", NUM(j->id), "video_id", j->pj.video_id,
            "kind", kind_name(j->pj.kind), "=fetcher", NUM(nng_pipe_id(f->pipe)), "=wait_ms", NUM(now - j->created_ms),
            "=deadline_ms", NUM(left), NULL);
  }
}

/* Fails what passed its deadline and forgets old dead connections; returns when to look again. */
static uint64_t expire(struct dispatcher *d, uint64_t now) {
  uint64_t wake = now + (d->wrecv_armed ? IDLE_WAKE_MS : REARM_RETRY_MS);
  struct list *queues[2] = {&d->q_captions, &d->q_speech};
  for (int i = 0; i < 2; i++) {
    /* Each queue is FIFO with one timeout for all its jobs, so its deadlines only grow: the head is the earliest. */
    struct link *k;
    for (k = list_first(queues[i]); k != NULL; k = list_first(queues[i])) {
      struct job *j = CONTAINER_OF(k, struct job, q);
      if (j->deadline_ms > now) {
        if (j->deadline_ms < wake) wake = j->deadline_ms;
        break;
      }
      d->st.queue_timeouts++;
      job_fail(d, j, "queue_timeout");
    }
  }
  struct link *k = d->running.head.next;
  while (k != &d->running.head) {
    struct job *j = CONTAINER_OF(k, struct job, q);
    k = k->next;
    uint64_t until = j->deadline_ms + VTS_DISPATCH_RESULT_GRACE_MS;
    if (until <= now) {
      /* Its fetcher stays busy: its own watchdog ends it, or its late result makes it idle again. */
      d->st.run_timeouts++;
      job_fail(d, j, "job_timeout");
    } else if (until < wake) {
      wake = until;
    }
  }
  k = d->fetchers.head.next;
  while (k != &d->fetchers.head) {
    struct fetcher *f = CONTAINER_OF(k, struct fetcher, all);
    k = k->next;
    if (f->state != F_DEAD) continue;
    uint64_t until = f->dead_since_ms + VTS_DISPATCH_PIPE_TOMBSTONE_MS;
    if (until <= now) {
      list_remove(&d->fetchers, &f->all);
      free(f);
    } else if (until < wake) {
      wake = until;
    }
  }
  return wake;
}

static void metrics_publish_dispatcher(const struct dispatcher_stats *st);

static void publish_stats(struct dispatcher *d) {
  struct cache_stats cs;
  cache_get_stats(d->cache, &cs);
  d->st.jobs_queued = d->q_captions.n + d->q_speech.n;
  d->st.jobs_in_flight = d->running.n;
  d->st.speech_in_flight = d->speech_running;
  d->st.fetchers_idle = d->idle.n;
  d->st.fetchers_connected = d->fetchers_live;
  d->st.cache_entries = cs.entries;
  d->st.cache_bytes = cs.bytes;
  d->st.cache_evictions = cs.evictions;
  pthread_mutex_lock(&stats_lock);
  stats_published = d->st;
  pthread_mutex_unlock(&stats_lock);
  metrics_publish_dispatcher(&d->st);
}

/* Copies the dispatcher's counters into the gateway's shared metrics region, read by /metrics in the workers. */
static void metrics_publish_dispatcher(const struct dispatcher_stats *st) {
  struct metrics_shm *shm = metrics_shared();
  if (shm == NULL) return;
  struct metrics_dispatcher *m = &shm->dispatcher;
  atomic_store_explicit(&m->cache_hits, st->cache_hits, memory_order_relaxed);
  atomic_store_explicit(&m->cache_misses, st->cache_misses, memory_order_relaxed);
  atomic_store_explicit(&m->coalesced, st->coalesced, memory_order_relaxed);
  atomic_store_explicit(&m->jobs_total[PROTO_KIND_CAPTIONS], st->jobs_created, memory_order_relaxed);
  atomic_store_explicit(&m->jobs_total[PROTO_KIND_SPEECH], st->speech_jobs, memory_order_relaxed);
  atomic_store_explicit(&m->jobs_queued, (int64_t)st->jobs_queued, memory_order_relaxed);
  atomic_store_explicit(&m->jobs_in_flight, (int64_t)st->jobs_in_flight, memory_order_relaxed);
  atomic_store_explicit(&m->speech_in_flight, (int64_t)st->speech_in_flight, memory_order_relaxed);
  atomic_store_explicit(&m->fetchers_connected, (int64_t)st->fetchers_connected, memory_order_relaxed);
  atomic_store_explicit(&m->fetchers_idle, (int64_t)st->fetchers_idle, memory_order_relaxed);
  atomic_store_explicit(&m->fetchers_lost_with_job, st->fetcher_lost, memory_order_relaxed);
  atomic_store_explicit(&m->job_deadline_expired, st->queue_timeouts + st->run_timeouts, memory_order_relaxed);
  atomic_store_explicit(&m->jobs_declined, st->jobs_declined, memory_order_relaxed);
  atomic_store_explicit(&m->results_refused, st->results_refused, memory_order_relaxed);
  atomic_store_explicit(&m->fetchers_refused, st->fetchers_refused, memory_order_relaxed);
  atomic_store_explicit(&m->rejected_full, st->rejected_full, memory_order_relaxed);
  atomic_store_explicit(&m->protocol_errors, st->protocol_errors, memory_order_relaxed);
  atomic_store_explicit(&m->cache_bytes, (int64_t)st->cache_bytes, memory_order_relaxed);
  atomic_store_explicit(&m->cache_entries, (int64_t)st->cache_entries, memory_order_relaxed);
}

static void handle_slot(struct dispatcher *d, struct slot *s) {
  int rv = nng_aio_result(s->aio);
  if (s->state == SLOT_RECEIVING) {
    d->wrecv_armed = false;
    arm_worker_recv(d);
    if (rv != 0) {
      if (rv != NNG_ECLOSED) log_msg(LOG_WARN, "worker receive failed", "error", nng_strerror(rv), NULL);
      slot_free(d, s);
      return;
    }
    nng_msg *msg = nng_aio_get_msg(s->aio);
    nng_aio_set_msg(s->aio, NULL);
    handle_worker_request(d, s, msg);
    return;
  }
  /* SLOT_SENDING: a worker that went away is not an error worth more than a debug line. */
  if (rv != 0) log_msg(LOG_DEBUG, "worker reply not sent", "error", nng_strerror(rv), NULL);
  slot_free(d, s);
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
      fetcher_get(d, ev->pipe);
      break;
    case EV_FETCHER_REM:
      handle_fetcher_gone(d, ev->pipe);
      break;
  }
  free(ev);
}

static void discard_event(struct event *ev) {
  if (ev->type == EV_WORKER_SLOT) return;
  if (ev->msg != NULL) nng_msg_free(ev->msg);
  free(ev);
}

/*
 * Under lock: whether the dispatcher may stop now. A stop waits for the workers it serves: when the master stops the
 * gateway they are gone already, but when the master dies every child gets SIGTERM at once (PR_SET_PDEATHSIG) and the
 * workers' in-flight requests still need their answers while they drain.
 */
static bool stop_due(const struct dispatcher *d, uint64_t now) {
  return d->stop_asked && (d->workers_connected <= 0 || now >= d->stop_deadline_ms);
}

static void run(struct dispatcher *d) {
  for (;;) {
    arm_worker_recv(d);
    uint64_t wake = expire(d, util_now_ms());
    assign_jobs(d);
    publish_stats(d);

    pthread_mutex_lock(&d->lock);
    if (d->stop_asked && d->stop_deadline_ms < wake) wake = d->stop_deadline_ms;
    while (d->ev_head == NULL && !stop_due(d, util_now_ms()) && util_now_ms() < wake) {
      struct timespec ts = {.tv_sec = (time_t)(wake / 1000), .tv_nsec = (long)(wake % 1000) * 1000000L};
      pthread_cond_timedwait(&d->cond, &d->lock, &ts);
    }
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
    if (stop) return;
  }
}

/* ---- process ---- */

static void *signal_thread(void *arg) {
  struct dispatcher *d = arg;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
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
    pthread_cond_signal(&d->cond);
    pthread_mutex_unlock(&d->lock);
    return NULL;
  }
}

/*
 * Listens on url; the fetchers' listener (cfg not NULL) takes the link's TLS for a tls+tcp URL. Returns 0, an nng
 * error, or -1 with a message in err for a TLS setting that cannot be used.
 */
static int open_listener(nng_socket sock, const char *url, const struct vts_config *cfg, char *err, size_t errlen) {
  nng_listener l;
  int rv = nng_listener_create(&l, sock, url);
  if (rv != 0) return rv;
  /* Per listener: a message over the limit closes only the connection that sent it (a 500 for its job). */
  rv = nng_listener_set_size(l, NNG_OPT_RECVMAXSZ, VTS_MAX_MESSAGE_BYTES);
  if (rv == 0 && cfg != NULL && link_tls_listener(cfg, l, url, err, errlen) != 0) rv = -1;
  if (rv == 0) rv = nng_listener_start(l, 0);
  return rv;
}

/* Stops every nng activity first (so no callback runs any more), then frees what is left. */
static void teardown(struct dispatcher *d) {
  d->stopping = true;
  if (d->fsock_open) nng_close(d->fsock);
  if (d->wsock_open) nng_close(d->wsock);
  if (d->faio != NULL) nng_aio_stop(d->faio);
  for (struct link *k = d->slots.head.next; k != &d->slots.head; k = k->next)
    nng_aio_stop(CONTAINER_OF(k, struct slot, all)->aio);

  pthread_mutex_lock(&d->lock);
  struct event *ev = d->ev_head;
  d->ev_head = d->ev_tail = NULL;
  pthread_mutex_unlock(&d->lock);
  while (ev != NULL) {
    struct event *next = ev->next;
    discard_event(ev);
    ev = next;
  }

  struct link *k;
  for (k = list_first(&d->slots); k != NULL; k = list_first(&d->slots)) slot_free(d, CONTAINER_OF(k, struct slot, all));
  for (k = list_first(&d->fetchers); k != NULL; k = list_first(&d->fetchers)) {
    struct fetcher *f = CONTAINER_OF(k, struct fetcher, all);
    if (f->held != NULL) nng_msg_free(f->held);
    list_remove(&d->fetchers, k);
    free(f);
  }
  for (size_t i = 0; i < JOB_TABLE_BUCKETS; i++) {
    while (d->table[i] != NULL) {
      struct job *j = d->table[i];
      d->table[i] = j->hnext;
      free(j);
    }
  }
  if (d->faio != NULL) nng_aio_free(d->faio);
  d->faio = NULL;
  cache_free(d->cache);
  d->cache = NULL;
  rcache_free(d->rcache);
  d->rcache = NULL;
}

/* The dispatcher's state lives for the whole process: an nng callback can never outlive it. */
static struct dispatcher the_dispatcher;

int dispatcher_main(const struct vts_config *cfg, const char *worker_url) {
  enum log_level level = LOG_INFO;
  log_level_parse(cfg->log_level, &level);
  log_init("dispatcher", level);

  /* Blocked before nng starts any thread, so that every thread inherits the mask and only sigwait sees them. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);

  struct dispatcher *d = &the_dispatcher;
  pthread_t sig_thread;
  memset(d, 0, sizeof(*d));
  d->cfg = cfg;
  list_init(&d->q_captions);
  list_init(&d->q_speech);
  list_init(&d->running);
  list_init(&d->fetchers);
  list_init(&d->idle);
  list_init(&d->slots);
  pthread_mutex_init(&d->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* util_now_ms is monotonic: deadlines are in its time */
  pthread_cond_init(&d->cond, &ca);
  pthread_condattr_destroy(&ca);

  const char *what = "cache";
  const char *url = "";
  char tls_err[256] = "";
  int rv = 0;
  struct cache_limits lim = {
      .max_bytes = (size_t)cfg->cache_max_mb * 1024 * 1024,
      .ok_ttl_ms = (uint64_t)cfg->cache_ttl_s * 1000,
      .negative_ttl_ms = (uint64_t)cfg->negative_ttl_s * 1000,
  };
  d->cache = cache_new(&lim, NULL);
  d->rcache = rcache_new(cfg);
  if (d->cache == NULL) goto fail;

  what = "fetcher socket";
  url = cfg->jobs_url;
  rv = nng_rep0_open_raw(&d->fsock);
  if (rv != 0) goto fail;
  d->fsock_open = true;
  rv = nng_pipe_notify(d->fsock, NNG_PIPE_EV_ADD_POST, fetcher_pipe_cb, d);
  if (rv != 0) goto fail;
  rv = nng_pipe_notify(d->fsock, NNG_PIPE_EV_REM_POST, fetcher_pipe_cb, d);
  if (rv != 0) goto fail;
  rv = nng_socket_set_ms(d->fsock, NNG_OPT_SENDTIMEO, VTS_DISPATCH_SEND_TIMEOUT_MS);
  if (rv != 0) goto fail;
  rv = open_listener(d->fsock, cfg->jobs_url, cfg, tls_err, sizeof(tls_err));
  if (rv != 0) goto fail;
  if (!link_url_tls(cfg->jobs_url) && !link_url_loopback(cfg->jobs_url))
    log_msg(LOG_WARN,
            "jobs link is plain tcp on a non-loopback address: any process that reaches it can take jobs and answer "
            "them; use tls+tcp:// with VTS_JOBS_TLS_CA, VTS_JOBS_TLS_CERT and VTS_JOBS_TLS_KEY",
            "url", cfg->jobs_url, NULL);

  what = "worker socket";
  url = worker_url;
  rv = nng_rep0_open(&d->wsock);
  if (rv != 0) goto fail;
  d->wsock_open = true;
  rv = nng_pipe_notify(d->wsock, NNG_PIPE_EV_ADD_POST, worker_pipe_cb, d);
  if (rv != 0) goto fail;
  rv = nng_pipe_notify(d->wsock, NNG_PIPE_EV_REM_POST, worker_pipe_cb, d);
  if (rv != 0) goto fail;
  rv = open_listener(d->wsock, worker_url, NULL, NULL, 0);
  if (rv != 0) goto fail;

  what = "fetcher receive";
  rv = nng_aio_alloc(&d->faio, fetcher_recv_cb, d);
  if (rv != 0) goto fail;
  nng_recv_aio(d->fsock, d->faio);

  what = "signal thread";
  rv = pthread_create(&sig_thread, NULL, signal_thread, d);
  if (rv != 0) goto fail;

  log_msg(LOG_INFO, "dispatcher started", "jobs_url", cfg->jobs_url, "worker_url", worker_url, NULL);
  run(d);
  pthread_join(sig_thread, NULL);
  link_teardown_watchdog(VTS_DISPATCH_STOP_TIMEOUT_MS, 0, "dispatcher teardown stuck in nng: exiting without it");
  teardown(d);
  log_msg(LOG_INFO, "dispatcher stopped", NULL);
  return 0;

fail:
  log_msg(LOG_ERROR, "dispatcher cannot start", "what", what, "url", url, "error",
          tls_err[0] != '\0' ? tls_err
          : rv != 0          ? nng_strerror(rv)
                             : "out of memory",
          NULL);
  link_teardown_watchdog(VTS_DISPATCH_STOP_TIMEOUT_MS, 1, "dispatcher teardown stuck in nng: exiting without it");
  teardown(d);
  return 1;
}
