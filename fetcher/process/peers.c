/*
 * Threading: the job loop's thread waits and runs jobs; each link has one aio whose callback (an nng thread) carries
 * its next step: a send is followed by a receive, a received job is taken or declined. Every state below is under
 * ps->mu, and a link has at most one operation in flight, started either by its own callback or, when it has none,
 * by the loop's thread.
 */
#include "fetcher/process/peers.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "proto/link.h"

#define PEERS_URL_MAX 300 /* scheme://[address]:port */
#define PEERS_HOST_MAX 256

enum peer_state {
  P_RESTING,   /* nothing asked: offered again when the process is idle */
  P_OFFERED,   /* a READY or RESULT is out: its answer is a job */
  P_RUNNING,   /* its job is the one in progress */
  P_DECLINING, /* a DECLINE is out: its answer is the acknowledgement */
  P_LEAVING,   /* a RESULT_LAST is out: its answer is the acknowledgement */
};

enum peer_io { IO_NONE, IO_SEND, IO_RECV };

struct peer {
  struct peers *ps;
  char url[PEERS_URL_MAX];   /* the address dialed */
  char name[PEERS_HOST_MAX]; /* the host of VTS_JOBS_URL it came from: the name its certificate must carry */
  nng_socket sock;
  nng_dialer dialer;
  nng_aio *aio;
  struct link_handshakes handshakes; /* the loop's thread only */
  enum peer_state state;
  enum peer_io io;
  bool seen;    /* in the latest resolution */
  bool closing; /* being closed: its callback does nothing more */
};

struct peers {
  const struct vts_config *cfg;
  pthread_mutex_t mu;
  pthread_cond_t cond; /* a job arrived, an acknowledgement arrived, or a stop */
  struct peer *links[VTS_FETCHER_MAX_DISPATCHERS];
  size_t n;
  bool busy;     /* a job was taken and its result is not sent yet */
  bool have_job; /* job is taken but not yet handed to the loop */
  struct proto_job job;
  struct buf job_player; /* a copy of the job's player summary (the message it came in is freed at once) */
  struct buf job_browse; /* a copy of a browse job's target, likewise */
  struct buf job_hook;   /* a copy of a webhook job's URL and body, for the same reason */
  struct peer *job_from;
  bool stopping;
  bool acked; /* the RESULT_LAST was acknowledged */
  uint64_t next_resolve_ms;
  uint64_t next_handshakes_ms; /* when to read the links' failed handshakes again (the loop's thread only) */
  atomic_bool ready;           /* a link to a dispatcher was made once: "fetcher ready" was logged */
};

static const char *peer_state_name(enum peer_state s) {
  static const char *const names[] = {"resting", "offered", "running", "declining", "leaving"};
  return names[s];
}

/* ---- one link: sending and the callback (under ps->mu) ---- */

/* Sends the encoded message b on p's aio; its answer is then received by the callback. */
static void peer_send(struct peer *p, const struct buf *b, enum peer_state next) {
  nng_msg *m = NULL;
  if (b->len == 0 || nng_msg_alloc(&m, 0) != 0 || nng_msg_append(m, b->data, b->len) != 0) {
    if (m != NULL) nng_msg_free(m);
    log_msg(LOG_WARN, "cannot build a message to the dispatcher", "url", p->url, NULL);
    p->state = P_RESTING; /* offered again at the next idle wake */
    return;
  }
  p->state = next;
  p->io = IO_SEND;
  nng_aio_set_msg(p->aio, m);
  nng_send_aio(p->sock, p->aio);
}

static void peer_offer(struct peer *p) {
  struct buf b = BUF_INIT;
  proto_encode_ready(&b);
  peer_send(p, &b, P_OFFERED);
  buf_free(&b);
}

static void peer_decline(struct peer *p, const struct proto_job *job) {
  struct buf b = BUF_INIT;
  proto_encode_decline(&b, job->job_id, PROTO_DECLINE_BUSY);
  log_msg(LOG_INFO, "job declined: busy with another", "request_id", job->request_id, "url", p->url, NULL);
  peer_send(p, &b, P_DECLINING);
  buf_free(&b);
}

/* Offers the process to every link that has nothing out, while it is idle. */
static void offer_resting(struct peers *ps) {
  if (ps->busy || ps->stopping) return;
  for (size_t i = 0; i < ps->n; i++) {
    struct peer *p = ps->links[i];
    if (p->state == P_RESTING && p->io == IO_NONE) peer_offer(p);
  }
}

/* Copies len bytes of data into b and points *out at the copy; NULL/0 when there are none or no memory. */
static void keep_copy(struct buf *b, const char *data, uint32_t len, const char **out, uint32_t *out_len) {
  buf_reset(b);
  *out = NULL;
  *out_len = 0;
  if (len > 0 && buf_append(b, data, len) == 0) {
    *out = b->data;
    *out_len = len;
  }
}

/* The answer to what p sent. */
static void peer_answered(struct peer *p, const void *body, size_t len) {
  struct peers *ps = p->ps;
  struct proto_job job;
  switch (p->state) {
    case P_OFFERED:
      if (proto_decode_job(body, len, &job) != 0) {
        /* Not a job we can trust: say so in the log and ask again; the dispatcher will see no result for it. */
        log_msg(LOG_WARN, "bad message from the dispatcher: ignored", "url", p->url, NULL);
        peer_offer(p);
      } else if (ps->busy || ps->stopping) {
        peer_decline(p, &job);
      } else {
        ps->busy = true;
        ps->have_job = true;
        ps->job = job;
        /*
         * Without memory for its copy the job goes without the summary (it asks the platform instead), and a browse
         * job without its target (it fails as a bad job).
         */
        keep_copy(&ps->job_player, job.player, job.player_len, &ps->job.player, &ps->job.player_len);
        keep_copy(&ps->job_browse, job.browse, job.browse_len, &ps->job.browse, &ps->job.browse_len);
        /* A webhook job without its URL and body is no job: without memory for them it is answered bad_job. */
        buf_reset(&ps->job_hook);
        ps->job.hook_url_len = 0;
        ps->job.hook_body_len = 0;
        if (job.hook_url_len > 0 && buf_append(&ps->job_hook, job.hook_url, job.hook_url_len) == 0 &&
            (job.hook_body_len == 0 || buf_append(&ps->job_hook, job.hook_body, job.hook_body_len) == 0)) {
          ps->job.hook_url = ps->job_hook.data;
          ps->job.hook_url_len = job.hook_url_len;
          ps->job.hook_body = ps->job_hook.data + job.hook_url_len;
          ps->job.hook_body_len = job.hook_body_len;
        }
        ps->job_from = p;
        p->state = P_RUNNING;
        pthread_cond_broadcast(&ps->cond);
      }
      return;
    case P_DECLINING:
      if (proto_peek_type(body, len) != PROTO_READY)
        log_msg(LOG_WARN, "unexpected answer to a decline", "url", p->url, NULL);
      p->state = P_RESTING;
      pthread_cond_broadcast(&ps->cond); /* a stopping process waits for its declines */
      offer_resting(ps);
      return;
    case P_LEAVING:
      if (proto_peek_type(body, len) != PROTO_READY) log_msg(LOG_WARN, "unexpected answer to the last result", NULL);
      p->state = P_RESTING;
      ps->acked = true;
      pthread_cond_broadcast(&ps->cond);
      return;
    default:
      log_msg(LOG_WARN, "answer to no request: ignored", "url", p->url, "state", peer_state_name(p->state), NULL);
      return;
  }
}

/* The request out on p was lost with its connection (nng fails it rather than resending, as we asked). */
static void peer_lost(struct peer *p) {
  struct peers *ps = p->ps;
  log_msg(LOG_WARN, "dispatcher connection lost: waiting for it", "url", p->url, NULL);
  if (p->state == P_LEAVING) ps->acked = true; /* nothing will acknowledge it now */
  pthread_cond_broadcast(&ps->cond);
  /* Its jobs died with the connection, a RESULT's included: offer again; the READY waits for the redial. */
  p->state = P_RESTING;
  offer_resting(ps);
}

/* runs on an nng thread */
static void peer_cb(void *arg) {
  struct peer *p = arg;
  struct peers *ps = p->ps;
  int rv = nng_aio_result(p->aio);
  nng_msg *m = nng_aio_get_msg(p->aio);
  nng_aio_set_msg(p->aio, NULL);
  pthread_mutex_lock(&ps->mu);
  enum peer_io io = p->io;
  p->io = IO_NONE;
  if (p->closing || rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
    if (m != NULL) nng_msg_free(m);
    pthread_mutex_unlock(&ps->mu);
    return;
  }
  if (io == IO_SEND && rv == 0) {
    p->io = IO_RECV;
    nng_recv_aio(p->sock, p->aio);
  } else if (io == IO_RECV && rv == 0) {
    peer_answered(p, nng_msg_body(m), nng_msg_len(m));
    nng_msg_free(m);
  } else {
    if (m != NULL) nng_msg_free(m);
    if (rv == NNG_ECONNRESET) {
      peer_lost(p);
    } else {
      log_msg(LOG_ERROR, io == IO_SEND ? "send failed" : "receive failed", "url", p->url, "error", nng_strerror(rv),
              NULL);
      if (p->state == P_LEAVING) {
        ps->acked = true;
        pthread_cond_broadcast(&ps->cond);
      }
      p->state = P_RESTING; /* offered again at the next idle wake */
    }
  }
  pthread_mutex_unlock(&ps->mu);
}

/* ---- links: opening, closing, resolution ---- */

/* Reads p's count of failed handshakes, logging new ones (rate limited). The loop's thread only. */
static void peer_poll_handshakes(struct peer *p, uint64_t now) {
  uint64_t n;
  if (link_dialer_handshake_failures(p->dialer, &n) == 0) link_handshakes_note(&p->handshakes, n, now, p->url);
}

static void peer_close(struct peer *p) {
  p->handshakes.next_line_ms = 0;
  peer_poll_handshakes(p, util_now_ms());
  link_handshakes_flush(&p->handshakes, p->url);
  nng_close(p->sock); /* fails the operation in flight; the callback sees closing and does nothing */
  nng_aio_stop(p->aio);
  nng_msg *m = nng_aio_get_msg(p->aio);
  if (m != NULL) nng_msg_free(m);
  nng_aio_free(p->aio);
  free(p);
}

/*
 * A connection to a dispatcher is made (its handshake passed): the first one of the process says it is ready, so a
 * fetcher whose handshakes all fail never does. Runs on an nng thread.
 */
static void peer_pipe_cb(nng_pipe pipe, nng_pipe_ev ev, void *arg) {
  (void)pipe;
  (void)ev;
  struct peer *p = arg;
  if (!atomic_exchange(&p->ps->ready, true))
    log_msg(LOG_INFO, "fetcher ready", "jobs_url", p->ps->cfg->jobs_url, "url", p->url, NULL);
}

/* A link to url (an address of name's); dials in the background. Returns NULL with a message in err. */
static struct peer *peer_open(struct peers *ps, const char *url, const char *name, char *err, size_t errlen) {
  struct peer *p = calloc(1, sizeof(*p));
  if (p == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  p->ps = ps;
  snprintf(p->url, sizeof(p->url), "%s", url);
  snprintf(p->name, sizeof(p->name), "%s", name);
  p->state = P_RESTING;
  nng_dialer d;
  int rv = nng_req0_open(&p->sock);
  if (rv != 0) {
    snprintf(err, errlen, "%s", nng_strerror(rv));
    free(p);
    return NULL;
  }
  /*
   * nng resends an unanswered request every 60 s by default: a RESULT or READY would then be delivered twice, and
   * after a dispatcher restart a stale one would be taken for a new request. The dispatcher answers every request
   * exactly once, so never resend.
   */
  rv = nng_socket_set_ms(p->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
  if (rv == 0) rv = nng_socket_set_size(p->sock, NNG_OPT_RECVMAXSZ, VTS_MAX_MESSAGE_BYTES);
  if (rv == 0) rv = nng_aio_alloc(&p->aio, peer_cb, p);
  if (rv == 0) rv = nng_pipe_notify(p->sock, NNG_PIPE_EV_ADD_POST, peer_pipe_cb, p);
  if (rv == 0) rv = nng_dialer_create(&d, p->sock, url);
  /* The limit must be on the dialer too: a pipe takes it from its dialer, and a larger job would close the pipe. */
  if (rv == 0) rv = nng_dialer_set_size(d, NNG_OPT_RECVMAXSZ, VTS_MAX_MESSAGE_BYTES);
  if (rv == 0) rv = nng_dialer_set_ms(d, NNG_OPT_RECONNMINT, 100);
  if (rv == 0) rv = nng_dialer_set_ms(d, NNG_OPT_RECONNMAXT, 2000);
  if (rv == 0 && link_tls_dialer(ps->cfg, d, url, name, err, errlen) != 0) rv = -1;
  /* Non-blocking: a dispatcher that is not up yet is retried in the background instead of failing. */
  if (rv == 0) rv = nng_dialer_start(d, NNG_FLAG_NONBLOCK);
  if (rv == 0) p->dialer = d;
  if (rv != 0) {
    if (rv > 0) snprintf(err, errlen, "%s", nng_strerror(rv));
    nng_close(p->sock);
    if (p->aio != NULL) nng_aio_free(p->aio);
    free(p);
    return NULL;
  }
  return p;
}

/* One address of a resolution: the URL to dial and the name it came from. */
struct address {
  char url[PEERS_URL_MAX];
  char name[PEERS_HOST_MAX];
};

/*
 * Resolves one entry of VTS_JOBS_URL into addrs (from *n on, up to VTS_FETCHER_MAX_DISPATCHERS). Returns 0, or -EAGAIN
 * when the name does not resolve now (its links are then kept as they are).
 */
static int resolve_entry(const char *entry, struct address *addrs, size_t *n) {
  const char *scheme;
  char host[PEERS_HOST_MAX], port[8];
  if (link_url_split(entry, &scheme, host, sizeof(host), port, sizeof(port)) != 0) return -EINVAL;
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  int rv = getaddrinfo(host, port, &hints, &res);
  if (rv != 0) {
    log_msg(LOG_WARN, "cannot resolve a jobs URL: keeping its dispatchers", "url", entry, "error", gai_strerror(rv),
            NULL);
    return -EAGAIN;
  }
  for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
    char numeric[INET6_ADDRSTRLEN];
    if (getnameinfo(ai->ai_addr, ai->ai_addrlen, numeric, sizeof(numeric), NULL, 0, NI_NUMERICHOST) != 0) continue;
    struct address a;
    snprintf(a.name, sizeof(a.name), "%s", host);
    snprintf(a.url, sizeof(a.url), ai->ai_family == AF_INET6 ? "%s://[%s]:%s" : "%s://%s:%s", scheme, numeric, port);
    bool dup = false;
    for (size_t i = 0; i < *n && !dup; i++) dup = strcmp(addrs[i].url, a.url) == 0;
    if (dup) continue;
    if (*n == VTS_FETCHER_MAX_DISPATCHERS) {
      log_msg(LOG_WARN, "too many dispatcher addresses: some are left out", "url", entry, NULL);
      break;
    }
    addrs[(*n)++] = a;
  }
  freeaddrinfo(res);
  return 0;
}

/*
 * Resolves every entry of VTS_JOBS_URL and makes the links match: new addresses are dialed (and offered the process
 * when it is idle), vanished ones closed, except the link whose job is in progress, kept until its result is sent.
 * An entry that does not resolve now keeps its links. Called from the loop's thread without ps->mu held.
 */
static void resolve(struct peers *ps) {
  struct address *addrs = calloc(VTS_FETCHER_MAX_DISPATCHERS, sizeof(*addrs));
  char keep[VTS_JOBS_MAX_URLS][PEERS_HOST_MAX]; /* names whose resolution failed: their links stay */
  size_t n = 0, nkeep = 0;
  const char *p = ps->cfg->jobs_url;
  while (addrs != NULL) {
    size_t len = strcspn(p, ",");
    char entry[CONFIG_STR_MAX];
    memcpy(entry, p, len);
    entry[len] = '\0';
    const char *scheme;
    char port[8];
    if (resolve_entry(entry, addrs, &n) == -EAGAIN && nkeep < VTS_JOBS_MAX_URLS &&
        link_url_split(entry, &scheme, keep[nkeep], sizeof(keep[0]), port, sizeof(port)) == 0)
      nkeep++;
    if (p[len] == '\0') break;
    p += len + 1;
  }

  struct peer *gone[VTS_FETCHER_MAX_DISPATCHERS];
  size_t ngone = 0;
  pthread_mutex_lock(&ps->mu);
  ps->next_resolve_ms = util_now_ms() + (uint64_t)ps->cfg->jobs_resolve_s * 1000;
  if (addrs == NULL) {
    pthread_mutex_unlock(&ps->mu);
    return; /* out of memory: the links stay as they are until the next turn */
  }
  for (size_t i = 0; i < ps->n; i++) {
    struct peer *l = ps->links[i];
    l->seen = false;
    for (size_t k = 0; k < nkeep && !l->seen; k++) l->seen = strcmp(l->name, keep[k]) == 0;
    for (size_t k = 0; k < n && !l->seen; k++) l->seen = strcmp(l->url, addrs[k].url) == 0;
  }
  for (size_t k = 0; k < n; k++) {
    bool have = false;
    for (size_t i = 0; i < ps->n && !have; i++) have = strcmp(ps->links[i]->url, addrs[k].url) == 0;
    if (have || ps->n == VTS_FETCHER_MAX_DISPATCHERS) continue;
    char err[256];
    struct peer *l = peer_open(ps, addrs[k].url, addrs[k].name, err, sizeof(err));
    if (l == NULL) {
      log_msg(LOG_ERROR, "cannot dial a dispatcher", "url", addrs[k].url, "error", err, NULL);
      continue;
    }
    l->seen = true;
    ps->links[ps->n++] = l;
    log_msg(LOG_INFO, "dispatcher added", "url", l->url, NULL);
  }
  size_t kept = 0;
  for (size_t i = 0; i < ps->n; i++) {
    struct peer *l = ps->links[i];
    if (l->seen || l->state == P_RUNNING || l->state == P_LEAVING) {
      ps->links[kept++] = l;
    } else {
      l->closing = true;
      gone[ngone++] = l;
      log_msg(LOG_INFO, "dispatcher removed", "url", l->url, NULL);
    }
  }
  ps->n = kept;
  offer_resting(ps);
  pthread_mutex_unlock(&ps->mu);
  for (size_t i = 0; i < ngone; i++) peer_close(gone[i]);
  free(addrs);
}

/* ---- the loop's side ---- */

/* Waits on the condition until ms (CLOCK_MONOTONIC, as util_now_ms). */
static void wait_until(struct peers *ps, uint64_t ms) {
  struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
  pthread_cond_timedwait(&ps->cond, &ps->mu, &ts);
}

int peers_new(const struct vts_config *cfg, struct peers **out, char *err, size_t errlen) {
  /* A TLS setting that cannot be used is a start error, not a dialer that fails for ever. */
  if (link_list_tls(cfg->jobs_url)) {
    nng_tls_config *tc;
    int rv = link_tls_config(cfg, false, NULL, &tc, err, errlen);
    if (rv != 0) return rv;
    nng_tls_config_free(tc);
  }
  struct peers *ps = calloc(1, sizeof(*ps));
  if (ps == NULL) {
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  ps->cfg = cfg;
  pthread_mutex_init(&ps->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&ps->cond, &ca);
  pthread_condattr_destroy(&ca);
  resolve(ps);
  *out = ps;
  return 0;
}

enum peers_state peers_wait_job(struct peers *ps, struct proto_job *job) {
  pthread_mutex_lock(&ps->mu);
  for (;;) {
    if (ps->have_job) {
      *job = ps->job;
      ps->have_job = false;
      pthread_mutex_unlock(&ps->mu);
      return PEERS_SERVING;
    }
    if (ps->stopping) break;
    if (util_now_ms() >= ps->next_resolve_ms) {
      pthread_mutex_unlock(&ps->mu);
      resolve(ps);
      pthread_mutex_lock(&ps->mu);
      continue;
    }
    uint64_t now = util_now_ms();
    if (now >= ps->next_handshakes_ms) {
      /* The links change only on this thread (resolve): read without the lock, which nng's statistics never wait on. */
      pthread_mutex_unlock(&ps->mu);
      for (size_t i = 0; i < ps->n; i++) peer_poll_handshakes(ps->links[i], now);
      pthread_mutex_lock(&ps->mu);
      ps->next_handshakes_ms = now + VTS_LINK_HANDSHAKE_POLL_MS;
      continue;
    }
    offer_resting(ps);
    wait_until(ps, ps->next_resolve_ms < ps->next_handshakes_ms ? ps->next_resolve_ms : ps->next_handshakes_ms);
  }
  pthread_mutex_unlock(&ps->mu);
  return PEERS_STOPPING;
}

/*
 * Encodes the result (a RESULT_LAST when last), or an internal failure when the result itself cannot travel.
 */
static void encode_result(struct buf *out, struct proto_result *res, bool last) {
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

enum peers_state peers_finish(struct peers *ps, struct proto_result *res) {
  struct buf b = BUF_INIT;
  pthread_mutex_lock(&ps->mu);
  /*
   * Decided as late as possible: a stop that came during the job makes this a RESULT_LAST, which the dispatcher
   * acknowledges instead of answering with a job this process would have to give back.
   */
  bool last = ps->stopping;
  struct peer *p = ps->job_from;
  ps->job_from = NULL;
  ps->acked = false;
  if (p != NULL) {
    encode_result(&b, res, last);
    peer_send(p, &b, last ? P_LEAVING : P_OFFERED);
  }
  if (!last || p == NULL) {
    ps->busy = false;
    offer_resting(ps);
  } else {
    /* nng_close could drop a message still queued: the acknowledgement proves the result arrived. */
    uint64_t until = util_now_ms() + VTS_FETCHER_STOP_LINGER_MS;
    while (!ps->acked && util_now_ms() < until) wait_until(ps, until);
    if (!ps->acked) log_msg(LOG_WARN, "last result not acknowledged", NULL);
  }
  enum peers_state state = ps->stopping ? PEERS_STOPPING : PEERS_SERVING;
  pthread_mutex_unlock(&ps->mu);
  buf_free(&b);
  return state;
}

enum peers_state peers_give_back(struct peers *ps, const struct proto_job *job) {
  struct buf b = BUF_INIT;
  pthread_mutex_lock(&ps->mu);
  struct peer *p = ps->job_from;
  ps->job_from = NULL;
  if (p != NULL && proto_encode_decline(&b, job->job_id, PROTO_DECLINE_BUDGET) == 0) {
    log_msg(LOG_INFO, "job declined: every egress budget spent", "request_id", job->request_id, "url", p->url, NULL);
    /* The acknowledgement (a READY) brings this link back to rest, and the process offers itself again. */
    peer_send(p, &b, P_DECLINING);
  }
  ps->busy = false;
  offer_resting(ps);
  enum peers_state state = ps->stopping ? PEERS_STOPPING : PEERS_SERVING;
  pthread_mutex_unlock(&ps->mu);
  buf_free(&b);
  return state;
}

void peers_stop(struct peers *ps) {
  pthread_mutex_lock(&ps->mu);
  if (!ps->stopping) log_msg(LOG_INFO, ps->busy ? "stop requested: finishing the job" : "stop requested", NULL);
  ps->stopping = true;
  pthread_cond_broadcast(&ps->cond);
  pthread_mutex_unlock(&ps->mu);
}

void peers_free(struct peers *ps) {
  if (ps == NULL) return;
  pthread_mutex_lock(&ps->mu);
  ps->stopping = true;
  ps->busy = true; /* a job arriving from now on is declined */
  /* A declined job goes to another fetcher only once its dispatcher has read the decline: wait for that, briefly. */
  uint64_t until = util_now_ms() + VTS_FETCHER_STOP_LINGER_MS;
  for (;;) {
    bool declining = false;
    for (size_t i = 0; i < ps->n; i++) declining = declining || ps->links[i]->state == P_DECLINING;
    if (!declining || util_now_ms() >= until) break;
    wait_until(ps, until);
  }
  for (size_t i = 0; i < ps->n; i++) ps->links[i]->closing = true;
  pthread_mutex_unlock(&ps->mu);
  for (size_t i = 0; i < ps->n; i++) peer_close(ps->links[i]);
  pthread_cond_destroy(&ps->cond);
  pthread_mutex_destroy(&ps->mu);
  buf_free(&ps->job_player);
  buf_free(&ps->job_browse);
  buf_free(&ps->job_hook);
  free(ps);
}
