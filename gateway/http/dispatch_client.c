/*
 * A worker's link to the dispatcher: a req0 socket over ipc, one nng context and aio per job, with the small cache of
 * hot results (l1cache.c) in front of it.
 *
 * nng completes our aios on its own threads. Those callbacks touch nothing but a pending job's state and the done
 * queue, under one mutex, and wake the loop with uv_async_send; the loop thread then drains the whole queue (libuv
 * coalesces wake-ups), calls each dispatch_cb and frees the aio and context there, never inside their own callback.
 * The in-flight list changes only on the loop thread (under the mutex, because the pipe callback walks it).
 *
 * Single flight: a job that misses L1 while the same job (video and key, no If-None-Match) is already in flight from
 * this worker does not go to the dispatcher; it waits on the first one (a follower) and is answered from the same
 * reply, or fails with it. Without this, every request arriving between an L1 entry's expiry and the first reply
 * after it fetched the whole body through the dispatcher again.
 *
 * Refresh ahead: a transcript hit in the last VTS_L1_REFRESH_AHEAD_MS of its L1 entry is answered from L1 as any hit,
 * and also sends the dispatcher one refresh (at most one in flight a key): the entity's ETag, answered from the
 * dispatcher's memory cache only, by a 304 that keeps the entry for the shared entry's time left (no body crosses the
 * link), or by the answer it holds now. So a hot transcript's entry does not expire under its requests, and none of
 * them waits for the dispatcher (at each expiry, they all did: the first one's round trip with the whole body). An
 * entry that ended less than VTS_L1_CACHE_TTL_MS ago (no request came in its last part) answers the same way while
 * its refresh is out; a refresh that does not renew the entry or replace it drops it.
 */
#include "gateway/http/dispatch_client.h"
#include "gateway/metrics/metrics.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/http/l1cache.h"

/* A reply is a result from a fetcher (at most VTS_MAX_MESSAGE_BYTES on the wire) plus our prefix and backtrace. */
#define CLIENT_RECV_MAX_BYTES (VTS_MAX_MESSAGE_BYTES + 64)

enum pending_state { P_SENDING, P_RECEIVING, P_DONE };

struct pending {
  struct pending *prev, *next; /* in flight */
  struct pending *done_next;
  nng_ctx ctx;
  bool has_ctx;
  nng_aio *aio;
  enum pending_state state;
  bool link_lost; /* the dispatcher's connection dropped: fail instead of waiting for a re-send */
  bool in_flight;
  nng_msg *reply; /* P_DONE: the reply, NULL for a failure */
  bool l1_hit;
  struct proto_result hit; /* l1_hit: the answer, its body borrowed from ent */
  struct entity *ent;      /* l1_hit: a reference to the L1 entry's entity */
  dispatch_cb cb;
  void *arg;
  bool shared;                   /* may lead or follow: not a browse page, no If-None-Match */
  bool refresh;                  /* L1's refresh of an answer it holds: no callback, never a leader */
  struct pending *fhead, *ftail; /* a job in flight: the followers answered with its reply, in arrival order */
  struct pending *fnext;         /* a follower: the next of its leader's */
  char video_id[VTS_VIDEO_ID_LEN + 1];
  char key[PROTO_MAX_JOB_KEY + 1]; /* proto_job_key: the L1 key besides the video id */
};

static struct {
  bool open;
  uv_loop_t *loop;
  uv_async_t async;
  nng_socket sock;
  struct l1cache *l1;        /* the worker's, borrowed for the link's life */
  uint64_t reply_timeout_ms; /* the dispatcher's longest possible answer time, plus a margin */
  pthread_mutex_t lock;      /* guards what follows, and every pending's state, link_lost and reply */
  struct pending *in_flight;
  struct pending *done_head, *done_tail;
  bool closing;
} client = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Call with client.lock held. */
static void mark_done(struct pending *p, nng_msg *reply) {
  p->state = P_DONE;
  p->reply = reply;
  p->done_next = NULL;
  if (client.done_tail != NULL)
    client.done_tail->done_next = p;
  else
    client.done_head = p;
  client.done_tail = p;
}

/* runs on an nng thread */
static void pending_cb(void *arg) {
  struct pending *p = arg;
  int rv = nng_aio_result(p->aio);
  pthread_mutex_lock(&client.lock);
  if (p->state == P_SENDING) {
    if (rv != 0) {
      /* A failed send leaves the request with us. */
      nng_msg_free(nng_aio_get_msg(p->aio));
      nng_aio_set_msg(p->aio, NULL);
    } else if (!p->link_lost && !client.closing) {
      p->state = P_RECEIVING;
      nng_aio_set_timeout(p->aio, (nng_duration)client.reply_timeout_ms);
      nng_ctx_recv(p->ctx, p->aio);
      pthread_mutex_unlock(&client.lock);
      return;
    }
    mark_done(p, NULL);
  } else if (p->state == P_RECEIVING) {
    nng_msg *reply = NULL;
    if (rv == 0) {
      reply = nng_aio_get_msg(p->aio);
      nng_aio_set_msg(p->aio, NULL);
    }
    mark_done(p, reply);
  }
  pthread_mutex_unlock(&client.lock);
  uv_async_send(&client.async);
}

/*
 * runs on an nng thread. The dispatcher went away: every job it held is lost with it. nng 1.5.2 already fails a
 * waiting receive with NNG_ECONNRESET when its pipe closes and re-sending is off; cancelling here as well covers a
 * job whose send has just completed (its callback, seeing link_lost, does not start a receive that nothing would
 * answer) and keeps "fail at once, never re-sent" true whatever the resend setting.
 */
static void pipe_gone_cb(nng_pipe pipe, nng_pipe_ev ev, void *arg) {
  (void)pipe;
  (void)ev;
  (void)arg;
  int lost = 0;
  pthread_mutex_lock(&client.lock);
  for (struct pending *p = client.in_flight; p != NULL; p = p->next) {
    if (p->state == P_DONE) continue;
    p->link_lost = true;
    nng_aio_cancel(p->aio);
    lost++;
  }
  pthread_mutex_unlock(&client.lock);
  if (lost > 0) log_msg(LOG_WARN, "dispatcher connection lost: jobs failed", NULL);
}

static void pending_free(struct pending *p) {
  while (p->fhead != NULL) {
    struct pending *f = p->fhead;
    p->fhead = f->fnext;
    free(f);
  }
  if (p->aio != NULL) nng_aio_free(p->aio);
  if (p->has_ctx) nng_ctx_close(p->ctx);
  if (p->reply != NULL) nng_msg_free(p->reply);
  entity_unref(p->ent);
  free(p);
}

/*
 * A refresh's reply: a 304 renews the L1 entry, another answer the dispatcher holds takes its place; anything else (a
 * failure, "not_cached") drops the entry, so that no request after it is answered from what may be gone there.
 */
static void refreshed(struct pending *p, bool fail) {
  struct proto_result res;
  const unsigned char *body = p->reply != NULL ? nng_msg_body(p->reply) : NULL;
  size_t len = p->reply != NULL ? nng_msg_len(p->reply) : 0;
  bool decoded =
      !fail && body != NULL && proto_peek_type(body, len) == PROTO_RESULT && proto_decode_result(body, len, &res) == 0;
  if (!fail && body != NULL && !decoded) log_msg(LOG_WARN, "malformed reply from dispatcher", NULL);
  if (decoded && res.notmod && l1cache_renew(client.l1, p->video_id, p->key, &res) == 0) return;
  if (decoded && !res.notmod && res.outcome == PROTO_OK && res.cache_ms > 0) {
    entity_unref(l1cache_answer(client.l1, p->video_id, p->key, &res));
    return;
  }
  if (l1cache_forget(client.l1, p->video_id, p->key)) metrics_l1_drop();
}

/*
 * Calls the job's callback with its reply (or NULL), and keeps a cacheable answer in L1 first. A transcript's entity
 * (its compressed forms and ETag) is made there, once per answer from the dispatcher: every L1 hit after it shares it.
 */
static void deliver(struct pending *p, bool fail) {
  if (p->refresh) {
    refreshed(p, fail);
    return;
  }
  if (fail) {
    p->cb(p->arg, NULL, NULL);
    for (struct pending *f = p->fhead; f != NULL; f = f->fnext) f->cb(f->arg, NULL, NULL);
    return;
  }
  if (p->l1_hit) {
    p->cb(p->arg, &p->hit, p->ent);
    return;
  }
  struct proto_result res;
  const struct proto_result *r = NULL;
  struct entity *ent = NULL;
  if (p->reply != NULL) {
    const unsigned char *body = nng_msg_body(p->reply);
    size_t len = nng_msg_len(p->reply);
    if (proto_peek_type(body, len) == PROTO_RESULT && proto_decode_result(body, len, &res) == 0) {
      r = &res;
      /*
       * A browse page is the asking request's alone: no L1, no entity (its caller reads the result's body); nor has a
       * 304 the dispatcher decided (it carries no body).
       */
      if (proto_key_kind(p->key) != PROTO_KIND_BROWSE && !res.notmod)
        ent = l1cache_answer(client.l1, p->video_id, p->key, &res);
    } else {
      log_msg(LOG_WARN, "malformed reply from dispatcher", NULL);
    }
  }
  /*
   * The followers asked for the very same job: the same result, an error or a failure included, is what the
   * dispatcher would have given each (it coalesces them onto one job too). Their callbacks answer each its own
   * request (its format, Accept-Encoding, rate-limit lines and unit) from it; ent stays referenced until the last.
   */
  p->cb(p->arg, r, ent);
  for (struct pending *f = p->fhead; f != NULL; f = f->fnext) f->cb(f->arg, r, ent);
  entity_unref(ent);
}

/* Takes the done queue off the nng side and unlinks its jobs from the in-flight list. */
static struct pending *take_done(void) {
  pthread_mutex_lock(&client.lock);
  struct pending *list = client.done_head;
  client.done_head = client.done_tail = NULL;
  for (struct pending *p = list; p != NULL; p = p->done_next) {
    if (!p->in_flight) continue;
    if (p->prev != NULL)
      p->prev->next = p->next;
    else
      client.in_flight = p->next;
    if (p->next != NULL) p->next->prev = p->prev;
    p->in_flight = false;
  }
  pthread_mutex_unlock(&client.lock);
  return list;
}

static void drain(bool fail_all) {
  struct pending *p = take_done();
  while (p != NULL) {
    struct pending *next = p->done_next;
    deliver(p, fail_all);
    pending_free(p);
    p = next;
  }
}

static void async_cb(uv_async_t *handle) {
  (void)handle;
  drain(false);
}

int dispatch_client_init(uv_loop_t *loop, const struct vts_config *cfg, const char *url, struct l1cache *l1) {
  if (client.open) return -EALREADY;
  client.loop = loop;
  client.l1 = l1;
  client.in_flight = NULL;
  client.done_head = client.done_tail = NULL;
  client.closing = false;
  /* The dispatcher answers every job by then: queue wait and fetch within the job timeout, then speech. */
  client.reply_timeout_ms =
      (uint64_t)cfg->job_timeout_ms + VTS_DISPATCH_RESULT_GRACE_MS + VTS_DISPATCH_CLIENT_MARGIN_MS;
  if (cfg->speech_fallback) client.reply_timeout_ms += (uint64_t)cfg->speech_timeout_ms + VTS_DISPATCH_RESULT_GRACE_MS;

  bool sock_open = false;
  nng_dialer dialer;
  int rv = nng_req0_open(&client.sock);

  if (rv != 0) goto nng_fail;
  sock_open = true;
  /* A job must never be re-sent behind the client's back (nng 1.5 re-sends every 60 s by default). */
  rv = nng_socket_set_ms(client.sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
  if (rv != 0) goto nng_fail;
  rv = nng_pipe_notify(client.sock, NNG_PIPE_EV_REM_POST, pipe_gone_cb, NULL);
  if (rv != 0) goto nng_fail;
  rv = nng_dialer_create(&dialer, client.sock, url);
  if (rv != 0) goto nng_fail;
  rv = nng_dialer_set_size(dialer, NNG_OPT_RECVMAXSZ, CLIENT_RECV_MAX_BYTES);
  if (rv != 0) goto nng_fail;
  rv = nng_dialer_set_ms(dialer, NNG_OPT_RECONNMINT, VTS_DISPATCH_RECONNECT_MIN_MS);
  if (rv != 0) goto nng_fail;
  rv = nng_dialer_set_ms(dialer, NNG_OPT_RECONNMAXT, VTS_DISPATCH_RECONNECT_MAX_MS);
  if (rv != 0) goto nng_fail;
  /* Non-blocking: the dispatcher may start after us; nng keeps dialing. */
  rv = nng_dialer_start(dialer, NNG_FLAG_NONBLOCK);
  if (rv != 0) goto nng_fail;

  rv = uv_async_init(loop, &client.async, async_cb);

  if (rv != 0) goto fail;
  /* The link alone does not keep the loop running; each job's HTTP connection does. */
  uv_unref((uv_handle_t *)&client.async);
  client.open = true;
  return 0;

nng_fail:
  log_msg(LOG_ERROR, "cannot connect to the dispatcher", "url", url, "error", nng_strerror(rv), NULL);
  rv = -EIO;
fail:
  if (sock_open) nng_close(client.sock);
  client.l1 = NULL;
  return rv;
}

/* runs on its own thread */
static void *close_thread(void *arg) {
  nng_socket s = *(nng_socket *)arg;
  free(arg);
  nng_close(s);
  return NULL;
}

/*
 * nng 1.5.2 can hang for good in nng_close (a race in its reaper: nanomsg/nng#1543, fixed in 1.8). The close runs
 * on a thread of its own and is abandoned after VTS_DISPATCH_STOP_TIMEOUT_MS, so that it never holds a worker's
 * shutdown.
 */
static void close_bounded(nng_socket s) {
  nng_socket *arg = malloc(sizeof(*arg));
  pthread_t t;
  if (arg == NULL) return;
  *arg = s;
  if (pthread_create(&t, NULL, close_thread, arg) != 0) {
    free(arg);
    return;
  }
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += VTS_DISPATCH_STOP_TIMEOUT_MS / 1000;
  until.tv_nsec += (VTS_DISPATCH_STOP_TIMEOUT_MS % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  if (pthread_timedjoin_np(t, NULL, &until) != 0) {
    log_msg(LOG_WARN, "dispatcher link close stuck in nng: abandoned", NULL);
    pthread_detach(t);
  }
}

void dispatch_client_close(void) {
  if (!client.open) return;
  pthread_mutex_lock(&client.lock);
  client.closing = true;
  pthread_mutex_unlock(&client.lock);
  /*
   * Only the loop thread changes the in-flight list, so walking it here needs no lock; nng_aio_stop waits for each
   * callback, which takes the lock and, seeing closing, queues its job as done instead of going on.
   */
  for (struct pending *p = client.in_flight; p != NULL; p = p->next) nng_aio_stop(p->aio);
  drain(true);
  close_bounded(client.sock);
  uv_close((uv_handle_t *)&client.async, NULL);
  client.l1 = NULL;
  client.open = false;
}

/*
 * The job in flight with p's video and key that is a leader (refresh false: see leader_of) or a refresh, or NULL:
 * one still waiting, or one whose reply came and waits in the done queue for the loop to deliver it (a request that
 * misses L1 between the two shares that reply instead of fetching the whole body again), never one that failed (a
 * failure, a lost link). The list holds the jobs this worker waits on at once: short next to decoding one reply.
 */
static struct pending *in_flight_of(const struct pending *p, bool refresh) {
  struct pending *l;
  pthread_mutex_lock(&client.lock);
  for (l = client.in_flight; l != NULL; l = l->next)
    if ((refresh ? l->refresh : l->shared) && (l->state != P_DONE || l->reply != NULL) && !l->link_lost &&
        memcmp(l->video_id, p->video_id, sizeof(l->video_id)) == 0 && strcmp(l->key, p->key) == 0)
      break;
  pthread_mutex_unlock(&client.lock);
  return l;
}

/* The job in flight that a new one with the same video and key can wait on, or NULL: a follower shares a reply still
 * to come, or one come and not yet delivered, never a failure. */
static struct pending *leader_of(const struct pending *p) { return in_flight_of(p, false); }

struct entity *dispatch_cached(const char *video_id, const char *key) {
  return client.open ? l1cache_known(client.l1, video_id, key) : NULL;
}

/* Sends p's job (a copy of job, its id 0) to the dispatcher and puts p in flight; on failure p is the caller's. */
static int job_send(struct pending *p, const struct proto_job *job) {
  struct proto_job req = *job;
  req.job_id = 0;
  struct buf b = BUF_INIT;
  nng_msg *msg = NULL;
  int rv = proto_encode_job(&b, &req);
  if (rv != 0) goto fail;
  rv = -ENOMEM;
  if (nng_msg_alloc(&msg, 0) != 0 || nng_msg_append(msg, b.data, b.len) != 0) goto fail;
  if (nng_aio_alloc(&p->aio, pending_cb, p) != 0) goto fail;
  rv = -EIO;
  if (nng_ctx_open(&p->ctx, client.sock) != 0) goto fail;
  p->has_ctx = true;
  if (nng_ctx_set_ms(p->ctx, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE) != 0) goto fail;
  buf_free(&b);

  p->state = P_SENDING;
  nng_aio_set_msg(p->aio, msg);
  /* The send completes once a connection takes the request: a missing dispatcher costs this long, not the job's. */
  nng_aio_set_timeout(p->aio, VTS_DISPATCH_CONNECT_WAIT_MS);
  pthread_mutex_lock(&client.lock);
  p->next = client.in_flight;
  if (client.in_flight != NULL) client.in_flight->prev = p;
  client.in_flight = p;
  p->in_flight = true;
  pthread_mutex_unlock(&client.lock);
  nng_ctx_send(p->ctx, p->aio);
  return 0;

fail:
  buf_free(&b);
  if (msg != NULL) nng_msg_free(msg);
  if (p->aio != NULL) nng_aio_free(p->aio);
  p->aio = NULL;
  if (p->has_ctx) nng_ctx_close(p->ctx);
  p->has_ctx = false;
  return rv;
}

/*
 * Sends the dispatcher a refresh of the L1 entry that hit answers (job's video and key; ent its entity), unless one
 * is in flight already. Nothing waits on it. Returns 0 when one is out, or -ENOMEM or -EIO (none is).
 */
static int refresh_send(const struct pending *hit, const struct proto_job *job) {
  struct pending *p = calloc(1, sizeof(*p));
  if (p == NULL) return -ENOMEM;
  memcpy(p->video_id, hit->video_id, sizeof(p->video_id));
  memcpy(p->key, hit->key, sizeof(p->key));
  p->refresh = true;
  if (in_flight_of(p, true) != NULL) {
    free(p);
    return 0;
  }
  char etag[ENTITY_ETAG_BYTES];
  entity_etag(hit->ent, ENTITY_IDENTITY, etag);
  struct proto_job req = *job;
  req.inm = etag;
  req.inm_len = (uint32_t)strlen(etag);
  req.refresh = 1;
  int rv = job_send(p, &req);
  if (rv != 0) {
    pending_free(p);
    return rv;
  }
  metrics_l1_refresh();
  return 0;
}

int dispatch_submit(const struct proto_job *job, dispatch_cb cb, void *arg) {
  if (!client.open || client.closing) return -ENOTCONN;
  struct pending *p = calloc(1, sizeof(*p));
  if (p == NULL) return -ENOMEM;
  p->cb = cb;
  p->arg = arg;
  int browse = job->kind == PROTO_KIND_BROWSE;
  if (strlen(job->video_id) != (browse ? 0 : VTS_VIDEO_ID_LEN) || strlen(job->lang) > PROTO_MAX_LANG) {
    free(p);
    return -EINVAL;
  }
  memcpy(p->video_id, job->video_id, sizeof(p->video_id));
  proto_job_key(job, p->key);

  bool refresh = false;
  int found = browse ? -ENOENT : l1cache_lookup(client.l1, job->video_id, p->key, &p->hit, &p->ent, &refresh);
  /* An entry that just ended answers only while its refresh is out; with none out or sent, it is a miss. */
  if (found == -ESTALE && refresh_send(p, job) != 0) {
    entity_unref(p->ent);
    p->ent = NULL;
    found = -ENOENT;
  }
  if (found == 0 || found == -ESTALE) {
    /*
     * Answered from L1, still through the loop so that the callback never runs inside dispatch_submit. The body is
     * not copied: the reference keeps it alive even if L1 drops the entry meanwhile.
     */
    p->l1_hit = true;
    metrics_l1_hit();
    if (found == 0 && refresh) (void)refresh_send(p, job);
    pthread_mutex_lock(&client.lock);
    mark_done(p, NULL);
    pthread_mutex_unlock(&client.lock);
    uv_async_send(&client.async);
    return 0;
  }

  p->shared = !browse && job->inm == NULL;
  struct pending *l = p->shared ? leader_of(p) : NULL;
  if (l != NULL) {
    if (l->ftail != NULL)
      l->ftail->fnext = p;
    else
      l->fhead = p;
    l->ftail = p;
    metrics_l1_wait();
    return 0;
  }

  int rv = job_send(p, job);
  if (rv != 0) pending_free(p);
  return rv;
}
