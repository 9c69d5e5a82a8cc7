/*
 * Over 800 lines: the decision core is one state machine over one job table (cache, coalescing, queues, deadlines,
 * fetchers, claims) whose invariants hold across all of it; it is tested whole, without a clock.
 */
#include "gateway/dispatcher/core.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/limits.h"
#include "common/log.h"
#include "gateway/cache/cache.h"
#include "gateway/cache/bodycheck.h"
#include "gateway/cache/entity.h"
#include "gateway/dispatcher/summary.h"
#include "proto/tracks.h"

_Static_assert(ENTITY_ETAG_BYTES <= PROTO_MAX_ETAG + 1, "a result holds any ETag of an entity");

#define JOB_TABLE_BUCKETS 4096 /* coalescing table; VTS_DISPATCH_MAX_JOBS bounds the chains */

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
static void list_append(struct list *l, struct link *k) {
  k->prev = l->head.prev;
  k->next = &l->head;
  l->head.prev->next = k;
  l->head.prev = k;
  l->n++;
}
/* list_append at the other end of the ring: alike in shape, folded only behind a direction flag on a hot path. */
static void list_prepend(struct list *l, struct link *k) {
  k->next = l->head.next;
  k->prev = &l->head;
  l->head.next->prev = k;
  l->head.next = k;
  l->n++;
}
static void list_remove(struct list *l, struct link *k) {
  k->prev->next = k->next;
  k->next->prev = k->prev;
  k->prev = k->next = NULL;
  l->n--;
}
static struct link *list_first(const struct list *l) { return l->n ? l->head.next : NULL; }
/* Puts k before at, a member of l (or its head: at the end). */
static void list_insert_before(struct list *l, struct link *at, struct link *k) {
  k->next = at;
  k->prev = at->prev;
  at->prev->next = k;
  at->prev = k;
  l->n++;
}

enum fetcher_state {
  F_CONNECTED, /* connected, has asked for nothing yet */
  F_IDLE,      /* holds a request: may be given a job */
  F_BUSY,      /* was given job_id; job is NULL once that job failed without it */
  F_DEAD,      /* connection closed; kept a while so messages still queued from it are refused */
};
struct fetcher {
  struct link all;  /* core.fetchers */
  struct link idle; /* core.idle, FIFO: the longest idle fetcher gets the next job */
  uint64_t id;
  enum fetcher_state state;
  void *token; /* F_IDLE: the request to answer with a job */
  struct job *job;
  uint64_t job_id;
  uint64_t dead_since_ms;
};

/*
 * Where a job stands. With Redis it first looks there (J_LOOKUP), then claims (J_CLAIM), and either runs here or
 * waits on the claimant (J_WAIT, looking again at poll_ms); then, or at once without Redis, it is queued and run.
 */
enum job_state { J_LOOKUP, J_CLAIM, J_WAIT, J_QUEUED, J_RUNNING };

struct job {
  struct job *hnext; /* coalescing table chain */
  struct link q;     /* the list of its state: core.remote, a queue, or core.running */
  struct list *in;   /* which of them, NULL for none */
  enum job_state state;
  uint64_t id;
  uint64_t hash;
  struct proto_job pj;             /* video, language, kind, first requester's request id */
  char key[PROTO_MAX_JOB_KEY + 1]; /* proto_job_key of the request: the cache and coalescing key with the video */
  uint64_t created_ms;
  uint64_t deadline_ms; /* waiting or queued: fail when not taken by then; running: fail at deadline + grace */
  uint64_t assigned_ms;
  uint64_t poll_ms;  /* J_WAIT: when to ask Redis again */
  bool claimed;      /* this gateway holds the claim: renewed while the job lives, released when it ends */
  uint64_t renew_ms; /* claimed: when to renew the claim next */
  bool waited;       /* it waited on another gateway's claim */
  bool sync;         /* a worker's request waits on it (not only batch items): it goes ahead of those that yield */
  bool judged;       /* queued and judged once by the expected wait (shed_queue): a later shed is not at arrival */
  struct fetcher *fetcher;
  struct core_waiter *waiters, **waiters_tail;
  size_t nwaiters;
  char *browse; /* a browse job's target, the job's own copy (pj.browse points at it) */
};

struct core {
  const struct vts_config *cfg;
  struct core_ops ops;
  struct cache *cache;
  struct job *table[JOB_TABLE_BUCKETS];
  size_t njobs;
  struct list remote, q_captions, q_speech, running;
  uint64_t speech_running;
  struct list fetchers, idle;
  uint64_t fetchers_live; /* fetchers not F_DEAD: at most VTS_JOBS_MAX_FETCHERS */
  uint64_t next_job_id;
  uint64_t run_ms;   /* the recent time a fetcher holds a job (not speech), CORE_RUN_EWMA_WEIGHT; 0 until one ended */
  uint64_t run_dev;  /* and the recent deviation from it, averaged the same way */
  uint64_t *free_at; /* scratch of shed_queue: when each fetcher is expected to be free */
  size_t free_cap;
  struct dispatcher_stats st;
};

/* The memory cache reads the event's time: the core has no clock of its own (one core decides per thread). */
static _Thread_local uint64_t event_now;
static uint64_t core_clock(void) { return event_now; }

static const char *u64s(char *buf, size_t len, uint64_t v) {
  snprintf(buf, len, "%" PRIu64, v);
  return buf;
}
#define NUM(v) u64s((char[24]){0}, 24, (uint64_t)(v))

static const char *kind_name(uint8_t kind) {
  return kind == PROTO_KIND_SPEECH     ? "speech"
         : kind == PROTO_KIND_TRACKS   ? "tracks"
         : kind == PROTO_KIND_METADATA ? "metadata"
         : kind == PROTO_KIND_WEBHOOK  ? "webhook"
         : kind == PROTO_KIND_BROWSE   ? "browse"
                                       : "captions";
}

struct core *core_new(const struct vts_config *cfg, const struct core_ops *ops) {
  struct core *c = calloc(1, sizeof(*c));
  if (c == NULL) return NULL;
  c->cfg = cfg;
  c->ops = *ops;
  struct cache_limits lim = {
      .max_bytes = (size_t)cfg->cache_max_mb * 1024 * 1024,
      .ok_ttl_ms = (uint64_t)cfg->cache_ttl_s * 1000,
      .negative_ttl_ms = (uint64_t)cfg->negative_ttl_s * 1000,
  };
  c->cache = cache_new(&lim, core_clock);
  if (c->cache == NULL) {
    free(c);
    return NULL;
  }
  list_init(&c->remote);
  list_init(&c->q_captions);
  list_init(&c->q_speech);
  list_init(&c->running);
  list_init(&c->fetchers);
  list_init(&c->idle);
  return c;
}

void core_free(struct core *c) {
  if (c == NULL) return;
  struct link *k;
  for (k = list_first(&c->fetchers); k != NULL; k = list_first(&c->fetchers)) {
    struct fetcher *f = CONTAINER_OF(k, struct fetcher, all);
    if (f->token != NULL) c->ops.drop_token(c->ops.ctx, f->token);
    list_remove(&c->fetchers, k);
    free(f);
  }
  for (size_t i = 0; i < JOB_TABLE_BUCKETS; i++) {
    while (c->table[i] != NULL) {
      struct job *j = c->table[i];
      c->table[i] = j->hnext;
      free(j->browse);
      free(j);
    }
  }
  cache_free(c->cache);
  free(c->free_at);
  free(c);
}

/* ---- answers ---- */

static void answer_one(struct core *c, struct core_waiter *w, const struct proto_result *res, uint64_t ttl) {
  w->next = NULL;
  c->ops.answer(c->ops.ctx, w, res, ttl);
}

static void answer_internal(struct core *c, struct core_waiter *w, const char *detail) {
  struct proto_result r = {.outcome = PROTO_INTERNAL};
  snprintf(r.detail, sizeof(r.detail), "%s", detail);
  answer_one(c, w, &r, 0);
}

/* ---- jobs ---- */

static struct job **job_bucket(struct core *c, uint64_t hash) { return &c->table[hash % JOB_TABLE_BUCKETS]; }

static struct job *job_find(struct core *c, const char *video_id, const char *key) {
  uint64_t h = cache_key_hash(video_id, key);
  for (struct job *j = *job_bucket(c, h); j != NULL; j = j->hnext) {
    if (j->hash == h && strcmp(j->pj.video_id, video_id) == 0 && strcmp(j->key, key) == 0) return j;
  }
  return NULL;
}

/* A job still waiting on Redis, by id (a reply for a job that ended since is for none). */
static struct job *remote_job(struct core *c, uint64_t id) {
  for (struct link *k = c->remote.head.next; k != &c->remote.head; k = k->next) {
    struct job *j = CONTAINER_OF(k, struct job, q);
    if (j->id == id) return j;
  }
  return NULL;
}

static struct job *job_new(struct core *c, const struct proto_job *req, uint64_t now) {
  struct job *j = calloc(1, sizeof(*j));
  if (j == NULL) return NULL;
  j->id = ++c->next_job_id;
  j->pj = *req;
  /* A worker's request names no player summary; one the cache holds is attached when the job is sent. */
  j->pj.player = NULL;
  j->pj.player_len = 0;
  /* A browse target is borrowed from the request's message: the job keeps its own copy. */
  j->pj.browse = NULL;
  j->pj.browse_len = 0;
  if (req->kind == PROTO_KIND_BROWSE) {
    if (req->browse_len == 0 || (j->browse = malloc(req->browse_len)) == NULL) {
      free(j);
      return NULL;
    }
    memcpy(j->browse, req->browse, req->browse_len);
    j->pj.browse = j->browse;
    j->pj.browse_len = req->browse_len;
  }
  /*
   * A worker asks for a transcript, for tracks, for metadata or for a browse page; only the dispatcher turns a
   * transcript job into a speech job.
   */
  j->pj.kind = req->kind == PROTO_KIND_TRACKS || req->kind == PROTO_KIND_METADATA || req->kind == PROTO_KIND_WEBHOOK ||
                       req->kind == PROTO_KIND_BROWSE
                   ? req->kind
                   : PROTO_KIND_CAPTIONS;
  proto_job_key(&j->pj, j->key);
  j->hash = cache_key_hash(req->video_id, j->key);
  j->created_ms = now;
  j->deadline_ms = now + (uint64_t)c->cfg->job_timeout_ms;
  j->waiters_tail = &j->waiters;
  struct job **b = job_bucket(c, j->hash);
  j->hnext = *b;
  *b = j;
  c->njobs++;
  if (j->pj.kind != PROTO_KIND_WEBHOOK) c->st.jobs_created++;
  return j;
}

static void job_wait_on(struct job *j, struct core_waiter *w) {
  if (!w->internal) j->sync = true;
  w->next = NULL;
  *j->waiters_tail = w;
  j->waiters_tail = &w->next;
  j->nwaiters++;
}

/* Moves the job into list l (NULL for none) in state s; speech jobs running are counted against their limit. */
static void job_move(struct core *c, struct job *j, struct list *l, enum job_state s, bool first) {
  if (j->in == &c->running && j->pj.kind == PROTO_KIND_SPEECH) c->speech_running--;
  if (j->in != NULL) list_remove(j->in, &j->q);
  j->in = l;
  j->state = s;
  if (l == NULL) return;
  if (first)
    list_prepend(l, &j->q);
  else
    list_append(l, &j->q);
  if (l == &c->running && j->pj.kind == PROTO_KIND_SPEECH) c->speech_running++;
}

/*
 * Queues the job, first in line (a job given back unrun) or last. The captions queue holds the jobs a worker's request
 * waits on ahead of those only batch items wait on, which yield to them (their runner holds nobody's connection): a
 * job of either part goes first or last of its own part.
 */
static void job_enqueue(struct core *c, struct job *j, bool first) {
  if (j->pj.kind == PROTO_KIND_SPEECH) {
    job_move(c, j, &c->q_speech, J_QUEUED, first);
    return;
  }
  struct list *q = &c->q_captions;
  job_move(c, j, NULL, J_QUEUED, false);
  /* Where the batch part starts, found from the end: it is short (the runner adds items only to idle fetchers). */
  struct link *at = &q->head;
  while (at->prev != &q->head && !CONTAINER_OF(at->prev, struct job, q)->sync) at = at->prev;
  if (j->sync)
    list_insert_before(q, first ? q->head.next : at, &j->q);
  else
    list_insert_before(q, first ? at : &q->head, &j->q);
  j->in = q;
}

/* Takes the job out of its list and away from its fetcher. */
static void job_detach(struct core *c, struct job *j) {
  job_move(c, j, NULL, j->state, false);
  if (j->fetcher != NULL) {
    j->fetcher->job = NULL;
    j->fetcher = NULL;
  }
}

static void job_destroy(struct core *c, struct job *j) {
  job_detach(c, j);
  struct job **pp = job_bucket(c, j->hash);
  while (*pp != j) pp = &(*pp)->hnext;
  *pp = j->hnext;
  c->njobs--;
  free(j->browse);
  free(j);
}

/* A switch onto the counters, as each counter table has: alike in shape only, each on counters of its own. */
static void count_outcome(struct core *c, uint8_t outcome) {
  switch (outcome) {
    case PROTO_OK:
      c->st.outcome_ok++;
      break;
    case PROTO_NOT_AVAILABLE:
      c->st.outcome_not_available++;
      break;
    case PROTO_UPSTREAM_FAILED:
      c->st.outcome_upstream_failed++;
      break;
    case PROTO_OVERLOADED:
      break; /* counted by cause, request by request (job_shed) */
    default:
      c->st.outcome_internal++;
      break;
  }
}

/*
 * Keeps res in the memory cache as the answer of (video_id, key) for at most max_ttl_ms, into *ttl (0 when not kept).
 * A video that cannot be played is kept once, under PROTO_GONE_KEY, as the answer of all its keys. A transcript is
 * kept once per served track (proto_track_key): every key it answers shares that entry's body.
 */
static void cache_result(struct core *c, const char *video_id, const char *key, const struct proto_result *res,
                         uint64_t max_ttl_ms, uint64_t *ttl) {
  *ttl = 0;
  if (proto_result_gone(res)) key = PROTO_GONE_KEY;
  if (res->outcome != PROTO_OK || proto_key_kind(key) != PROTO_KIND_CAPTIONS) {
    if (cache_put(c->cache, video_id, key, res, max_ttl_ms, ttl) != 0) *ttl = 0;
    return;
  }
  char track[PROTO_MAX_JOB_KEY + 1];
  proto_track_key(res, track);
  struct proto_result held;
  struct entity *ent = NULL;
  if (cache_lookup(c->cache, video_id, track, &held, NULL, &ent) != 0 || held.body_len != res->body_len ||
      memcmp(held.body, res->body, res->body_len) != 0) {
    entity_unref(ent);
    ent = NULL;
    if (cache_put(c->cache, video_id, track, res, max_ttl_ms, NULL) != 0 ||
        cache_lookup(c->cache, video_id, track, &held, NULL, &ent) != 0)
      return;
  }
  if (cache_put_entity(c->cache, video_id, key, res, ent, max_ttl_ms, ttl) != 0) *ttl = 0;
  entity_unref(ent);
}

/* Answers every waiter with res and the cache lifetime, then ends the job. */
static void job_answer(struct core *c, struct job *j, const struct proto_result *res, uint64_t ttl) {
  struct core_waiter *w = j->waiters;
  job_destroy(c, j);
  if (w != NULL) c->ops.answer(c->ops.ctx, w, res, ttl);
}

/*
 * The dispatcher's cache also keeps, for a while, what a fetcher learnt of a video's player reply (its summary), under
 * a key no job or track has (PROTO_TRACKS_KEY and PROTO_GONE_KEY are others; a language holds no '*'). The video's
 * next jobs, of any kind but speech and whatever their language or translation, are handed it, so that one player
 * request serves them all.
 */
#define CORE_PLAYER_KEY "*player"

static void keep_player(struct core *c, const struct job *j, const struct proto_result *res) {
  if (res->player_len == 0 || res->player_ttl_ms == 0) return;
  /* Checked as every result is: what goes to other fetchers must be a summary. */
  const char *why = NULL;
  if (bodycheck_player(res->player, res->player_len, &why) != 0) {
    log_msg(LOG_WARN, "fetcher player summary refused: not a summary", "request_id", j->pj.request_id, "=job_id",
            NUM(j->id), "video_id", j->pj.video_id, "why", why, "=bytes", NUM(res->player_len), NULL);
    return;
  }
  const char *video_id = j->pj.video_id;
  struct proto_result p = {.outcome = PROTO_OK, .body = res->player, .body_len = res->player_len};
  uint64_t ttl = 0;
  (void)cache_put(c->cache, video_id, CORE_PLAYER_KEY, &p, res->player_ttl_ms, &ttl);
}

/*
 * A revalidation the cache answers: when req's If-None-Match names the ETag of a form of ent (the body's tag, as a
 * worker spells it for each coding), hit becomes a 304 of that ETag, without its body. A request for a transcript the
 * cache holds made the platform do nothing, so it spends no unit (the worker gives the unit back); "*" is left to
 * the worker. Returns whether it did.
 */
static bool not_modified(struct core *c, const struct proto_job *req, const struct entity *ent,
                         struct proto_result *hit) {
  if (req->inm_len == 0 || ent == NULL || hit->outcome != PROTO_OK || memchr(req->inm, '"', req->inm_len) == NULL)
    return false;
  for (int k = 0; k < ENTITY_CODINGS; k++) {
    char etag[ENTITY_ETAG_BYTES];
    entity_etag(ent, (enum entity_coding)k, etag);
    if (!entity_etag_match(req->inm, req->inm_len, etag)) continue;
    hit->notmod = 1;
    memcpy(hit->etag, etag, sizeof(etag));
    hit->body = NULL;
    hit->body_len = 0;
    c->st.not_modified++;
    return true;
  }
  return false;
}

/* Answers w from the cache when it holds key of req's video (or the video is gone). Returns whether it did. */
static bool answer_cached(struct core *c, struct core_waiter *w, const struct proto_job *req, const char *key) {
  struct proto_result hit;
  uint64_t ttl_left;
  struct entity *ent = NULL;
  if (cache_get(c->cache, req->video_id, PROTO_GONE_KEY, &hit, &ttl_left) != 0 &&
      cache_lookup(c->cache, req->video_id, key, &hit, &ttl_left, &ent) != 0)
    return false;
  not_modified(c, req, ent, &hit);
  entity_unref(ent); /* the body stays the cache's until the next call that changes it */
  c->st.cache_hits++;
  log_msg(LOG_DEBUG, "cache hit", "request_id", req->request_id, "video_id", req->video_id, "lang", req->lang,
          "=status", NUM(proto_outcome_status(hit.outcome)), NULL);
  answer_one(c, w, &hit, ttl_left);
  return true;
}

/*
 * A transcript of a language the video lacks, or spelt otherwise than its track ("xx", "de-AT" for "de", "pt" for
 * "pt-BR"), is the transcript of the track it would be served: with the video's player summary at hand, the request
 * is asked in that track's language (into *out), so that it shares that language's cache entry, job and fetch instead
 * of costing a caption download and an entry of its own. Returns whether *out is such a request.
 */
static bool served_language(struct core *c, const struct proto_job *req, struct proto_job *out) {
  if (req->kind != PROTO_KIND_CAPTIONS) return false;
  struct proto_result player;
  if (cache_get(c->cache, req->video_id, CORE_PLAYER_KEY, &player, NULL) != 0) return false;
  char lang[PROTO_MAX_LANG + 1];
  if (summary_served_language(player.body, player.body_len, req->lang, lang) != 0 || strcmp(lang, req->lang) == 0)
    return false;
  *out = *req;
  memcpy(out->lang, lang, sizeof(lang));
  log_msg(LOG_DEBUG, "language served as the video's track", "request_id", req->request_id, "video_id", req->video_id,
          "lang", req->lang, "served", lang, NULL);
  return true;
}

/* Whether a served spelling (summary_served_language) names a track of language lang: lang itself, or its asr twin. */
static bool served_as(const char *spelling, const char *lang) {
  size_t n = strlen(lang);
  return strncasecmp(spelling, lang, n) == 0 &&
         (spelling[n] == '\0' || strcasecmp(spelling + n, TRACKS_ASR_SUFFIX) == 0);
}

/*
 * The job's final result: kept in the cache when it may be kept, written to Redis for the other gateways (before the
 * claim is released, so a waiter that sees the claim gone finds the result), answered to every waiter.
 */
static void job_finish(struct core *c, struct job *j, const struct proto_result *in) {
  struct proto_result res = *in;
  res.job_id = j->id;
  keep_player(c, j, &res);
  /* Workers are not told of it, nor of what the metrics counted. */
  res.player = NULL;
  res.player_len = 0;
  res.player_ttl_ms = 0;
  res.pot_failures = 0;
  if (res.outcome == PROTO_NO_CAPTIONS) res.outcome = PROTO_NOT_AVAILABLE;
  uint64_t ttl = 0;
  /* A webhook's answer is its own, and a browse page is read for one job at one moment: never kept, never another's. */
  if (j->pj.kind != PROTO_KIND_WEBHOOK && j->pj.kind != PROTO_KIND_BROWSE)
    cache_result(c, j->pj.video_id, j->key, &res, UINT64_MAX, &ttl);
  if (ttl > 0 && c->ops.redis_put != NULL)
    c->ops.redis_put(c->ops.ctx, j->pj.video_id, proto_result_gone(&res) ? PROTO_GONE_KEY : j->key, &res, ttl);
  if (j->claimed && c->ops.redis_release != NULL) c->ops.redis_release(c->ops.ctx, j->id, j->pj.video_id, j->key);
  /*
   * A spelling asked before the video's tracks were known ("xx", "de-AT"): the language of the track it was served
   * holds the answer too, in this gateway's memory, so that asking that language next is no second download of the
   * same track. Not in Redis, which keeps one alias per job that fetched (what the other gateways ask it for).
   */
  struct proto_job served;
  if (res.outcome == PROTO_OK && ttl > 0 && j->pj.translate[0] == '\0' && served_language(c, &j->pj, &served) &&
      served_as(served.lang, res.lang)) {
    char key[PROTO_MAX_JOB_KEY + 1];
    proto_job_key(&served, key);
    uint64_t served_ttl = 0;
    cache_result(c, j->pj.video_id, key, &res, UINT64_MAX, &served_ttl);
  }

  count_outcome(c, res.outcome);
  uint64_t now = event_now;
  uint64_t queue_ms = (j->assigned_ms ? j->assigned_ms : now) - j->created_ms;
  log_msg(res.outcome == PROTO_INTERNAL ? LOG_WARN : LOG_INFO, "job finished", "request_id", j->pj.request_id,
          "=job_id", NUM(j->id), "video_id", j->pj.video_id, "lang", j->pj.lang, "kind", kind_name(j->pj.kind),
          "=status", NUM(proto_outcome_status(res.outcome)), "detail", res.detail, "reason",
          proto_reason_name(res.reason), "=waiters", NUM(j->nwaiters), "=queue_ms", NUM(queue_ms), "=fetch_ms",
          NUM(res.fetch_ms), "=dur_ms", NUM(now - j->created_ms), NULL);
  job_answer(c, j, &res, ttl);
}

static void job_fail(struct core *c, struct job *j, const char *detail) {
  struct proto_result r = {.outcome = PROTO_INTERNAL};
  snprintf(r.detail, sizeof(r.detail), "%s", detail);
  job_finish(c, j, &r);
}

/* ---- shedding by expected wait ---- */

/* Why a job was answered 503 instead of waiting: each request it answers is counted under one of them. */
enum shed_cause {
  SHED_ARRIVAL,  /* judged when first queued: it could not be served before its deadline */
  SHED_QUEUED,   /* judged later, as the time a job takes or the fetchers changed */
  SHED_DEADLINE, /* it waited to its deadline: the estimate was wrong, or there was none */
};

/*
 * Answers the job's requests 503 service_unavailable with Retry-After (late_ms, at least CORE_SHED_MIN_RETRY_S) and
 * ends the job. Batch items waiting on it are counted apart: their runner puts them back for that time.
 */
static void job_shed(struct core *c, struct job *j, enum shed_cause cause, uint64_t late_ms) {
  for (struct core_waiter *w = j->waiters; w != NULL; w = w->next) {
    if (w->internal)
      c->st.shed_batch++;
    else if (cause == SHED_ARRIVAL)
      c->st.shed_arrival++;
    else if (cause == SHED_QUEUED)
      c->st.shed_queued++;
    else
      c->st.shed_deadline++;
  }
  uint64_t s = (late_ms + 999) / 1000;
  if (s < CORE_SHED_MIN_RETRY_S) s = CORE_SHED_MIN_RETRY_S;
  if (s > CORE_SHED_MAX_RETRY_S) s = CORE_SHED_MAX_RETRY_S;
  struct proto_result r = {.outcome = PROTO_OVERLOADED, .retry_after_s = (uint32_t)s};
  snprintf(r.detail, sizeof(r.detail), "%s", cause == SHED_DEADLINE ? "queue_timeout" : "expected_wait");
  job_finish(c, j, &r);
}

/*
 * When each live fetcher is expected to be free for a next job, earliest first, into c->free_at; returns how many. An
 * idle fetcher is free now; a busy one when its job has run the recent time a job takes (a speech job: at its
 * deadline, the worst case).
 */
static size_t fetchers_free_at(struct core *c, uint64_t now) {
  if (c->free_cap < c->fetchers_live) {
    uint64_t *p = realloc(c->free_at, c->fetchers_live * sizeof(*p));
    if (p == NULL) return 0;
    c->free_at = p;
    c->free_cap = c->fetchers_live;
  }
  size_t n = 0;
  for (struct link *k = c->fetchers.head.next; k != &c->fetchers.head && n < c->free_cap; k = k->next) {
    struct fetcher *f = CONTAINER_OF(k, struct fetcher, all);
    if (f->state == F_DEAD) continue;
    uint64_t t = now;
    if (f->state == F_BUSY && f->job != NULL)
      t = f->job->pj.kind == PROTO_KIND_SPEECH ? f->job->deadline_ms : f->job->assigned_ms + c->run_ms;
    if (t < now) t = now;
    size_t i = n++;
    for (; i > 0 && c->free_at[i - 1] > t; i--) c->free_at[i] = c->free_at[i - 1];
    c->free_at[i] = t;
  }
  return n;
}

/*
 * When the job p places behind the first in line is expected to end, with nfree fetchers of c->free_at serving, and
 * a margin for a job slower than the average (twice the deviation, at least an eighth of the average): a job handed
 * to a fetcher with less time left than it takes fails in the fetcher, a 502 where the queue owed a 503.
 */
static uint64_t expected_end(const struct core *c, size_t nfree, size_t p) {
  uint64_t margin = 2 * c->run_dev > c->run_ms / 8 ? 2 * c->run_dev : c->run_ms / 8;
  return c->free_at[p % nfree] + (uint64_t)(p / nfree) * c->run_ms + c->run_ms + margin;
}

/*
 * Whether the job p places behind the first in line can start now, on a fetcher free now. Such a job is never shed,
 * whatever the recent time a job takes: that time is learnt only from jobs that ran, so after a spell of slow platform
 * answers (jobs cut at their deadline) shedding the jobs an idle fetcher could take would shed every later request
 * too, and the estimate would never learn that the platform is fast again.
 */
static bool starts_now(const struct core *c, size_t nfree, size_t p, uint64_t now) {
  return p / nfree == 0 && c->free_at[p % nfree] <= now;
}

/*
 * How long after now a request made now could be served within its deadline, as the queue tells: its lateness if it
 * came now (0 when on time, or when there is no estimate: no job ended yet, or no fetcher).
 */
static uint64_t room_in_ms(struct core *c, uint64_t now) {
  size_t nfree = c->run_ms > 0 ? fetchers_free_at(c, now) : 0;
  if (nfree == 0) return 0;
  size_t p = c->q_captions.n;
  for (struct link *k = c->q_captions.head.prev; k != &c->q_captions.head; k = k->prev) {
    if (CONTAINER_OF(k, struct job, q)->sync) break;
    p--;
  }
  if (starts_now(c, nfree, p, now)) return 0;
  uint64_t end = expected_end(c, nfree, p), limit = now + (uint64_t)c->cfg->job_timeout_ms;
  return end > limit ? end - limit : 0;
}

/*
 * Sheds what the captions queue cannot serve in time. Walking it in order, a job's expected end is when the fetcher
 * it would get is free (fetchers_free_at, each one taking a job every c->run_ms) plus the time a job takes; a job that
 * would end after its deadline is answered now, 503 with Retry-After its lateness (by then the queue ahead has
 * drained that much), instead of holding its clients to the deadline for a 500. The jobs behind it move up. Once a
 * worker's request is shed, the jobs only batch items wait on (the end of the queue) all yield.
 */
static void shed_queue(struct core *c, uint64_t now) {
  if (c->run_ms == 0 || c->q_captions.n == 0) return;
  size_t nfree = fetchers_free_at(c, now);
  if (nfree == 0) return;
  size_t p = 0;
  bool sync_shed = false;
  struct link *k = c->q_captions.head.next;
  while (k != &c->q_captions.head) {
    struct job *j = CONTAINER_OF(k, struct job, q);
    k = k->next;
    bool fresh = !j->judged;
    j->judged = true;
    uint64_t end = expected_end(c, nfree, p);
    if ((end <= j->deadline_ms || starts_now(c, nfree, p, now)) && !(sync_shed && !j->sync)) {
      p++;
      continue;
    }
    if (j->sync) sync_shed = true;
    if (j->sync && fresh)
      log_msg(LOG_INFO, "job shed: it cannot be served before its deadline", "request_id", j->pj.request_id, "=job_id",
              NUM(j->id), "=expected_end_ms", NUM(end - now), NULL);
    job_shed(c, j, fresh ? SHED_ARRIVAL : SHED_QUEUED, end > j->deadline_ms ? end - j->deadline_ms : 0);
  }
}

/* The time a fetcher held the job: the recent time a job takes, for the expected wait (not speech, nor a webhook). */
static void learn_run_time(struct core *c, const struct job *j) {
  if (j->assigned_ms == 0 || j->pj.kind == PROTO_KIND_SPEECH || j->pj.kind == PROTO_KIND_WEBHOOK) return;
  uint64_t took = event_now > j->assigned_ms ? event_now - j->assigned_ms : 1;
  if (c->run_ms == 0) {
    c->run_ms = took;
    return;
  }
  uint64_t dev = took > c->run_ms ? took - c->run_ms : c->run_ms - took;
  c->run_dev = (c->run_dev * (CORE_RUN_EWMA_WEIGHT - 1) + dev) / CORE_RUN_EWMA_WEIGHT;
  c->run_ms = (c->run_ms * (CORE_RUN_EWMA_WEIGHT - 1) + took) / CORE_RUN_EWMA_WEIGHT;
  if (c->run_ms == 0) c->run_ms = 1;
}

/* A fetcher's result for a job it holds: the end of the job, or its second life as a speech job. */
static void job_result(struct core *c, struct job *j, const struct proto_result *res) {
  uint64_t fetcher = j->fetcher != NULL ? j->fetcher->id : 0;
  learn_run_time(c, j);
  job_detach(c, j);
  const char *why = NULL;
  if (res->outcome == PROTO_OVERLOADED || res->notmod) why = "an answer only the dispatcher gives";
  if (why != NULL || (res->outcome == PROTO_OK && bodycheck_result(j->pj.kind, res->body, res->body_len, &why) != 0)) {
    /* Neither cached nor served: the waiters get a 500, and the next request for the video asks a fetcher again. */
    c->st.results_refused++;
    log_msg(LOG_WARN, "fetcher result refused: not what its job asked for", "request_id", j->pj.request_id, "=job_id",
            NUM(j->id), "video_id", j->pj.video_id, "why", why, "=bytes", NUM(res->body_len), "=fetcher", NUM(fetcher),
            NULL);
    job_fail(c, j, "bad_result");
    return;
  }
  /* A translation is of a caption track: a video without one has none to offer, speech or not. */
  if (res->outcome == PROTO_NO_CAPTIONS && c->cfg->speech_fallback && j->pj.kind == PROTO_KIND_CAPTIONS &&
      j->pj.translate[0] == '\0') {
    j->pj.kind = PROTO_KIND_SPEECH;
    j->deadline_ms = event_now + (uint64_t)c->cfg->speech_timeout_ms;
    j->assigned_ms = 0;
    job_enqueue(c, j, false);
    c->st.speech_jobs++;
    log_msg(LOG_INFO, "job queued for speech", "request_id", j->pj.request_id, "=job_id", NUM(j->id), "video_id",
            j->pj.video_id, "=fetch_ms", NUM(res->fetch_ms), NULL);
    return;
  }
  job_finish(c, j, res);
}

/* The job runs here: queued for a fetcher. */
static void job_run_here(struct core *c, struct job *j) {
  job_enqueue(c, j, false);
  log_msg(LOG_INFO, "job queued", "request_id", j->pj.request_id, "=job_id", NUM(j->id), "video_id", j->pj.video_id,
          "lang", j->pj.lang, NULL);
}

/* Asks Redis whether another gateway has the result. */
static void job_lookup(struct core *c, struct job *j) {
  job_move(c, j, &c->remote, J_LOOKUP, false);
  c->ops.redis_get(c->ops.ctx, j->id, j->pj.video_id, j->key);
}

void core_request(struct core *c, uint64_t now, struct core_waiter *w, const struct proto_job *req) {
  event_now = now;
  c->st.requests++;
  if (req == NULL || req->job_id != 0) {
    c->st.protocol_errors++;
    log_msg(LOG_WARN, "malformed worker request", NULL);
    answer_internal(c, w, "bad_request");
    return;
  }
  /*
   * A webhook delivery (the shell's own, runner.h) is one POST, answered by no cache and shared with no other request:
   * it goes straight to the queue. Its URL and body stay the shell's until it is answered. A browse page goes there
   * too, as it is asked: no cache, no coalescing, no claim (its answer is read once, by the one request or batch job
   * that asked; a playlist changes under its continuations); the job keeps its own copy of the target.
   */
  if (req->kind == PROTO_KIND_WEBHOOK || req->kind == PROTO_KIND_BROWSE) {
    if (req->kind == PROTO_KIND_WEBHOOK && !w->internal) {
      /* A worker never asks for one: what would be a POST to any URL from a worker's request is refused. */
      c->st.protocol_errors++;
      answer_internal(c, w, "bad_request");
      return;
    }
    if (c->njobs >= VTS_DISPATCH_MAX_JOBS) {
      c->st.rejected_full++;
      answer_internal(c, w, "queue_full");
      return;
    }
    struct job *hj = job_new(c, req, now);
    if (hj == NULL) {
      answer_internal(c, w, "no_memory");
      return;
    }
    job_wait_on(hj, w);
    job_run_here(c, hj);
    return;
  }
  char key[PROTO_MAX_JOB_KEY + 1];
  proto_job_key(req, key);
  if (answer_cached(c, w, req, key)) return;
  struct proto_job served;
  if (served_language(c, req, &served)) {
    req = &served;
    proto_job_key(req, key);
    if (answer_cached(c, w, req, key)) return;
  }
  if (req->refresh) {
    /* A worker's refresh of what it holds: the memory cache's to answer, never a job's (nothing asked to fetch). */
    answer_internal(c, w, "not_cached");
    return;
  }
  c->st.cache_misses++;
  struct job *j = job_find(c, req->video_id, key);
  if (j != NULL) {
    c->st.coalesced++;
    bool was_batch = !j->sync;
    job_wait_on(j, w);
    /* A worker's request on a job only batch items waited on: it goes ahead of those now. */
    if (was_batch && j->sync && j->in == &c->q_captions) job_enqueue(c, j, false);
    log_msg(LOG_DEBUG, "job coalesced", "request_id", req->request_id, "=job_id", NUM(j->id), "video_id", req->video_id,
            NULL);
    return;
  }
  if (c->njobs >= VTS_DISPATCH_MAX_JOBS) {
    c->st.rejected_full++;
    log_msg(LOG_WARN, "job refused: queue full", "request_id", req->request_id, "video_id", req->video_id, NULL);
    answer_internal(c, w, "queue_full");
    return;
  }
  j = job_new(c, req, now);
  if (j == NULL) {
    answer_internal(c, w, "no_memory");
    return;
  }
  job_wait_on(j, w);
  if (c->ops.redis_get != NULL)
    job_lookup(c, j);
  else
    job_run_here(c, j);
}

/* ---- Redis ---- */

void core_redis_got(struct core *c, uint64_t now, uint64_t job_id, int status, const struct proto_result *hit,
                    uint64_t ttl_left_ms) {
  event_now = now;
  struct job *j = remote_job(c, job_id);
  if (j == NULL || j->state != J_LOOKUP) return;
  if (status == 0) {
    /* Another gateway fetched it: kept here too for what is left of its lifetime. */
    c->st.redis_hits++;
    uint64_t ttl = 0;
    cache_result(c, j->pj.video_id, j->key, hit, ttl_left_ms, &ttl);
    log_msg(LOG_DEBUG, "redis cache hit", "request_id", j->pj.request_id, "video_id", j->pj.video_id, "lang",
            j->pj.lang, "=waiters", NUM(j->nwaiters), NULL);
    struct proto_result res = *hit;
    res.job_id = j->id;
    job_answer(c, j, &res, ttl);
    return;
  }
  if (status == -ENOENT && c->ops.redis_claim != NULL) {
    job_move(c, j, &c->remote, J_CLAIM, false);
    c->ops.redis_claim(c->ops.ctx, j->id, j->pj.video_id, j->key, CORE_CLAIM_TTL_MS);
    return;
  }
  job_run_here(c, j); /* Redis did not answer: fetched here, as without Redis */
}

void core_redis_claimed(struct core *c, uint64_t now, uint64_t job_id, int status) {
  event_now = now;
  struct job *j = remote_job(c, job_id);
  if (j == NULL || j->state != J_CLAIM) return;
  if (status == 2) {
    /* The claimant finished between our lookup and our claim: its result is there to read. */
    job_lookup(c, j);
    return;
  }
  if (status == 0) {
    /* Another gateway fetches it: look again soon. */
    if (!j->waited) c->st.claims_waited++;
    j->waited = true;
    j->poll_ms = now + CORE_CLAIM_POLL_MS;
    job_move(c, j, &c->remote, J_WAIT, false);
    log_msg(LOG_DEBUG, "job waits on another gateway's claim", "request_id", j->pj.request_id, "=job_id", NUM(j->id),
            "video_id", j->pj.video_id, NULL);
    return;
  }
  if (status > 0) {
    j->claimed = true;
    j->renew_ms = now + CORE_CLAIM_RENEW_MS;
    c->st.claims_won++;
    if (j->waited) {
      c->st.claim_takeovers++;
      log_msg(LOG_INFO, "claim taken over: its holder went away without a result", "request_id", j->pj.request_id,
              "=job_id", NUM(j->id), "video_id", j->pj.video_id, NULL);
    }
  }
  job_run_here(c, j);
}

/* ---- fetchers ---- */

static struct fetcher *fetcher_find(struct core *c, uint64_t id) {
  for (struct link *k = c->fetchers.head.next; k != &c->fetchers.head; k = k->next) {
    struct fetcher *f = CONTAINER_OF(k, struct fetcher, all);
    if (f->id == id) return f;
  }
  return NULL;
}

/* From here on the fetcher is dead: it no longer counts against VTS_JOBS_MAX_FETCHERS. */
static void fetcher_set_dead(struct core *c, struct fetcher *f) {
  if (f->state != F_DEAD) c->fetchers_live--;
  f->state = F_DEAD;
  f->dead_since_ms = event_now;
}

/*
 * The fetcher of a connection, made on its first event. A connection beyond VTS_JOBS_MAX_FETCHERS live ones is
 * closed at once and remembered as dead, so its messages are refused: a peer cannot grow the core's state by
 * opening connections.
 */
static struct fetcher *fetcher_get(struct core *c, uint64_t id) {
  struct fetcher *f = fetcher_find(c, id);
  if (f != NULL) return f;
  f = calloc(1, sizeof(*f));
  if (f == NULL) return NULL;
  f->id = id;
  f->state = F_CONNECTED;
  list_append(&c->fetchers, &f->all);
  if (++c->fetchers_live > (uint64_t)c->cfg->jobs_max_fetchers) {
    c->st.fetchers_refused++;
    log_msg(LOG_WARN, "fetcher connection refused: VTS_JOBS_MAX_FETCHERS reached", "=fetcher", NUM(id), "=max",
            NUM(c->cfg->jobs_max_fetchers), NULL);
    fetcher_set_dead(c, f);
    c->ops.close_fetcher(c->ops.ctx, id);
  }
  return f;
}

static void fetcher_unidle(struct core *c, struct fetcher *f) {
  if (f->state != F_IDLE) return;
  list_remove(&c->idle, &f->idle);
  if (f->token != NULL) c->ops.drop_token(c->ops.ctx, f->token);
  f->token = NULL;
}

/* The fetcher asked for work: keep its request (the way back) and put it at the end of the line. */
static void fetcher_set_idle(struct core *c, struct fetcher *f, void *token) {
  bool was_idle = f->state == F_IDLE;
  if (was_idle && f->token != NULL) c->ops.drop_token(c->ops.ctx, f->token);
  f->token = token;
  f->state = F_IDLE;
  if (!was_idle) list_append(&c->idle, &f->idle);
}

/* Ends a fetcher: its job fails with detail, its connection is closed, later messages from it are refused. */
static void fetcher_kill(struct core *c, struct fetcher *f, const char *detail, bool close) {
  if (f->job != NULL) job_fail(c, f->job, detail);
  fetcher_unidle(c, f);
  fetcher_set_dead(c, f);
  if (close) c->ops.close_fetcher(c->ops.ctx, f->id);
}

/*
 * A stopping fetcher delivered its last result: it is not idle, so it gets no job; the READY answer tells it the
 * result arrived and it may close. It is forgotten now (its later messages are refused), so its connection dropping
 * afterwards fails nothing.
 */
static void fetcher_leaving(struct core *c, struct fetcher *f, void *token) {
  c->ops.send_ready(c->ops.ctx, f->id, token);
  log_msg(LOG_INFO, "fetcher leaving", "=fetcher", NUM(f->id), NULL);
  fetcher_unidle(c, f);
  fetcher_set_dead(c, f);
}

/*
 * The fetcher gave job_id back unrun: it is busy with another dispatcher's job, or (budget) every egress it has spent
 * its budget. The job goes first in line for another idle fetcher, with its deadline unchanged (no failure, never run
 * twice); a job given back for want of budget carries the count, so that fetchers stop giving it back and answer it.
 * This fetcher stays connected but is given nothing until it asks again. The READY answer is the acknowledgement.
 */
static void fetcher_declined(struct core *c, struct fetcher *f, uint64_t job_id, void *token, bool budget) {
  if (f->state == F_BUSY && f->job_id == job_id && f->job != NULL) {
    struct job *j = f->job;
    job_detach(c, j);
    j->assigned_ms = 0;
    if (budget && j->pj.declines < UINT8_MAX) j->pj.declines++;
    job_enqueue(c, j, true);
    c->st.jobs_declined++;
    log_msg(LOG_INFO, "job declined by a busy fetcher: queued again", "request_id", j->pj.request_id, "=job_id",
            NUM(j->id), "=fetcher", NUM(f->id), NULL);
  }
  fetcher_unidle(c, f);
  f->state = F_CONNECTED;
  c->ops.send_ready(c->ops.ctx, f->id, token);
}

void core_fetcher_added(struct core *c, uint64_t now, uint64_t fetcher) {
  event_now = now;
  fetcher_get(c, fetcher);
}

void core_fetcher_gone(struct core *c, uint64_t now, uint64_t fetcher) {
  event_now = now;
  struct fetcher *f = fetcher_get(c, fetcher);
  if (f == NULL || f->state == F_DEAD) return;
  if (f->job != NULL) {
    c->st.fetcher_lost++;
    log_msg(LOG_WARN, "fetcher lost while holding a job", "=job_id", NUM(f->job->id), "=fetcher", NUM(fetcher), NULL);
  }
  fetcher_kill(c, f, "fetcher_lost", false);
}

/* A RESULT or RESULT_LAST: for the job the fetcher holds, late, or out of order. */
static void fetcher_result(struct core *c, struct fetcher *f, void *token, const struct proto_result *res, bool last) {
  if (f->state == F_BUSY && res->job_id == f->job_id) {
    if (f->job != NULL) {
      job_result(c, f->job, res);
    } else {
      c->st.late_results++;
      log_msg(LOG_INFO, "late result dropped", "=job_id", NUM(res->job_id), "=fetcher", NUM(f->id), "=fetch_ms",
              NUM(res->fetch_ms), NULL);
    }
  } else {
    /*
     * A result for no job of ours: a fetcher's REQ socket re-sends its last request when its connection is
     * replaced, so a dispatcher restart delivers results of the previous one here. It still means "idle" (or,
     * for a RESULT_LAST, "leaving").
     */
    c->st.late_results++;
    log_msg(LOG_INFO, "stale result dropped", "=job_id", NUM(res->job_id), "=fetcher", NUM(f->id), NULL);
  }
  if (last)
    fetcher_leaving(c, f, token);
  else
    fetcher_set_idle(c, f, token);
}

void core_fetcher_msg(struct core *c, uint64_t now, uint64_t fetcher, void *token, enum core_fetcher_msg type,
                      uint64_t declined_job, const struct proto_result *res) {
  event_now = now;
  struct fetcher *f = fetcher_get(c, fetcher);
  if (f == NULL || f->state == F_DEAD) {
    c->ops.drop_token(c->ops.ctx, token);
    return;
  }
  switch (type) {
    case CORE_READY:
      if (f->state == F_BUSY && f->job != NULL) {
        /* It gave up on its job without a word: that job is lost, not re-run elsewhere. */
        log_msg(LOG_WARN, "fetcher asked for work while holding a job", "=fetcher", NUM(fetcher), NULL);
        job_fail(c, f->job, "fetcher_abandoned");
      }
      fetcher_set_idle(c, f, token);
      return;
    case CORE_DECLINE:
    case CORE_DECLINE_BUDGET:
      fetcher_declined(c, f, declined_job, token, type == CORE_DECLINE_BUDGET);
      return;
    case CORE_RESULT:
    case CORE_RESULT_LAST:
      if (res != NULL && !(f->state == F_BUSY && res->job_id != f->job_id)) {
        fetcher_result(c, f, token, res, type == CORE_RESULT_LAST);
        return;
      }
      break;
    case CORE_MALFORMED:
      break;
  }
  c->st.protocol_errors++;
  log_msg(LOG_WARN, "fetcher protocol error: connection closed", "=fetcher", NUM(fetcher), NULL);
  c->ops.drop_token(c->ops.ctx, token);
  fetcher_kill(c, f, "protocol_error", true);
}

/* ---- time ---- */

/* Hands queued jobs to idle fetchers: captions first, speech only below its concurrency limit. */
static void assign_jobs(struct core *c, uint64_t now) {
  while (c->idle.n > 0) {
    struct list *q = NULL;
    if (c->q_captions.n > 0)
      q = &c->q_captions;
    else if (c->q_speech.n > 0 && c->speech_running < (uint64_t)c->cfg->speech_max_concurrent)
      q = &c->q_speech;
    if (q == NULL) return;
    struct job *j = CONTAINER_OF(list_first(q), struct job, q);
    if (j->deadline_ms <= now) {
      c->st.queue_timeouts++;
      job_shed(c, j, SHED_DEADLINE, room_in_ms(c, now));
      continue;
    }
    struct fetcher *f = CONTAINER_OF(list_first(&c->idle), struct fetcher, idle);
    uint64_t left = j->deadline_ms - now;
    j->pj.job_id = j->id;
    j->pj.deadline_ms = left > UINT32_MAX ? UINT32_MAX : (uint32_t)left;
    void *token = f->token;
    list_remove(&c->idle, &f->idle);
    f->token = NULL;
    f->state = F_BUSY;
    f->job_id = j->id;
    /* The video's player summary, borrowed from the cache for the send (which copies it). */
    struct proto_result player;
    if (j->pj.kind != PROTO_KIND_SPEECH && j->pj.kind != PROTO_KIND_WEBHOOK && j->pj.kind != PROTO_KIND_BROWSE &&
        cache_get(c->cache, j->pj.video_id, CORE_PLAYER_KEY, &player, NULL) == 0) {
      j->pj.player = player.body;
      j->pj.player_len = player.body_len;
    }
    int sent = c->ops.send_job(c->ops.ctx, f->id, token, &j->pj);
    j->pj.player = NULL;
    j->pj.player_len = 0;
    if (sent != 0) {
      /* Never handed over, so the fetcher never saw it: the job stays first in line; the fetcher is dropped. */
      log_msg(LOG_WARN, "cannot send job to fetcher", "=fetcher", NUM(f->id), NULL);
      fetcher_kill(c, f, "send_failed", true);
      continue;
    }
    job_move(c, j, &c->running, J_RUNNING, false);
    j->fetcher = f;
    j->assigned_ms = now;
    f->job = j;
    log_msg(LOG_INFO, "job assigned", "request_id", j->pj.request_id, "=job_id", NUM(j->id), "video_id", j->pj.video_id,
            "kind", kind_name(j->pj.kind), "=fetcher", NUM(f->id), "=wait_ms", NUM(now - j->created_ms), "=deadline_ms",
            NUM(left), NULL);
  }
}

static void wake_at(uint64_t *wake, uint64_t t) {
  if (t < *wake) *wake = t;
}

/* Jobs waiting on Redis: their deadline, and the next look of those waiting on a claim. */
static void expire_remote(struct core *c, uint64_t now, uint64_t *wake) {
  struct link *k = c->remote.head.next;
  while (k != &c->remote.head) {
    struct job *j = CONTAINER_OF(k, struct job, q);
    k = k->next;
    if (j->deadline_ms <= now) {
      c->st.queue_timeouts++;
      job_shed(c, j, SHED_DEADLINE, room_in_ms(c, now));
      continue;
    }
    wake_at(wake, j->deadline_ms);
    if (j->state != J_WAIT) continue;
    if (j->poll_ms <= now) {
      job_lookup(c, j);
      continue;
    }
    wake_at(wake, j->poll_ms);
  }
}

/* Renews the claims of the jobs of list l that this gateway holds, as they come due. */
static void renew_claims(struct core *c, struct list *l, uint64_t now, uint64_t *wake) {
  if (c->ops.redis_renew == NULL) return;
  for (struct link *k = l->head.next; k != &l->head; k = k->next) {
    struct job *j = CONTAINER_OF(k, struct job, q);
    if (!j->claimed) continue;
    if (j->renew_ms <= now) {
      c->ops.redis_renew(c->ops.ctx, j->id, j->pj.video_id, j->key, CORE_CLAIM_TTL_MS);
      j->renew_ms = now + CORE_CLAIM_RENEW_MS;
    }
    wake_at(wake, j->renew_ms);
  }
}

uint64_t core_tick(struct core *c, uint64_t now, uint64_t idle_ms) {
  event_now = now;
  uint64_t wake = now + idle_ms;
  expire_remote(c, now, &wake);
  renew_claims(c, &c->q_captions, now, &wake);
  renew_claims(c, &c->q_speech, now, &wake);
  renew_claims(c, &c->running, now, &wake);
  struct list *queues[2] = {&c->q_captions, &c->q_speech};
  for (int i = 0; i < 2; i++) {
    /*
     * Every job, not only the head: the captions queue puts a worker's request ahead of batch items queued before
     * it, so its deadlines do not only grow along it.
     */
    struct link *k = queues[i]->head.next;
    while (k != &queues[i]->head) {
      struct job *j = CONTAINER_OF(k, struct job, q);
      k = k->next;
      if (j->deadline_ms > now) {
        wake_at(&wake, j->deadline_ms);
        continue;
      }
      c->st.queue_timeouts++;
      job_shed(c, j, SHED_DEADLINE, room_in_ms(c, now));
    }
  }
  struct link *k = c->running.head.next;
  while (k != &c->running.head) {
    struct job *j = CONTAINER_OF(k, struct job, q);
    k = k->next;
    uint64_t until = j->deadline_ms + VTS_DISPATCH_RESULT_GRACE_MS;
    if (until <= now) {
      /* Its fetcher stays busy: its own watchdog ends it, or its late result makes it idle again. */
      c->st.run_timeouts++;
      job_fail(c, j, "job_timeout");
    } else {
      wake_at(&wake, until);
    }
  }
  k = c->fetchers.head.next;
  while (k != &c->fetchers.head) {
    struct fetcher *f = CONTAINER_OF(k, struct fetcher, all);
    k = k->next;
    if (f->state != F_DEAD) continue;
    uint64_t until = f->dead_since_ms + VTS_DISPATCH_PIPE_TOMBSTONE_MS;
    if (until <= now) {
      list_remove(&c->fetchers, &f->all);
      free(f);
    } else {
      wake_at(&wake, until);
    }
  }
  shed_queue(c, now);
  assign_jobs(c, now);
  return wake;
}

void core_stats(struct core *c, struct dispatcher_stats *out) {
  struct cache_stats cs;
  cache_get_stats(c->cache, &cs);
  c->st.jobs_queued = c->q_captions.n + c->q_speech.n;
  c->st.jobs_in_flight = c->running.n;
  c->st.speech_in_flight = c->speech_running;
  c->st.jobs_waiting = c->remote.n;
  c->st.fetchers_idle = c->idle.n;
  c->st.fetchers_connected = c->fetchers_live;
  c->st.cache_entries = cs.entries;
  c->st.cache_bytes = cs.bytes;
  c->st.cache_evictions = cs.evictions;
  c->st.deadline_expired = c->st.queue_timeouts + c->st.run_timeouts;
  *out = c->st;
}
