#include "gateway/cache/rcache.h"

#include <ctype.h>
#include <errno.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/cache/bodycheck.h"
#include "gateway/redis/redis_session.h"

/*
 * Value layouts. An entry: "VC1" | outcome u8 | source u8 | lang length u8 | lang | body. An alias: "VA1" | the job
 * key of an entry of the same video (a track key, proto_track_key). A transcript is stored once under its track key,
 * and each job key it answers holds an alias of it; a track list and a 404 are stored under their job key; a video
 * that cannot be played under PROTO_GONE_KEY, for all its keys, its body empty or, when its reply said why, the one
 * byte of that reason (proto_reason_gone).
 */
#define RCACHE_MAGIC "VC1"
#define RCACHE_ALIAS "VA1"
#define RCACHE_HEADER 6
#define RCACHE_KEY_BYTES 96
#define RCACHE_OWNER_BYTES 64

/*
 * The answer of a job key in one step: the video's "cannot be played" entry (KEYS[1]) if there is one, else the
 * value of the job key (KEYS[2]), an alias followed to its entry (ARGV[1] is the video's key prefix). nil for none
 * (an alias whose entry is gone included), else {value, ttl left, the key it was read from}; the ttl of an alias
 * and its entry is the shorter. A value of another type is an error reply.
 */
static const char get_script[] =
    "local v = redis.call('GET', KEYS[1])\n"
    "if v then return {v, redis.call('PTTL', KEYS[1]), KEYS[1]} end\n"
    "v = redis.call('GET', KEYS[2])\n"
    "if not v then return nil end\n"
    "local ttl = redis.call('PTTL', KEYS[2])\n"
    "if string.sub(v, 1, 3) ~= 'VA1' then return {v, ttl, KEYS[2]} end\n"
    "local k = ARGV[1] .. string.sub(v, 4)\n"
    "local e = redis.call('GET', k)\n"
    "if not e then return nil end\n"
    "local ettl = redis.call('PTTL', k)\n"
    "if ettl < ttl then ttl = ettl end\n"
    "return {e, ttl, k}\n";
/*
 * Claims KEYS[2] unless the result KEYS[1] (an alias only with its entry: ARGV[3] is the video's key prefix; or the
 * video's "cannot be played" KEYS[3]) is there already, in one step: a
 * claimant that finishes between a waiter's lookup and its claim leaves the result, never a free claim without one. 1
 * won, 0 held, 2 cached now.
 */
static const char claim_script[] =
    "if redis.call('EXISTS', KEYS[3]) == 1 then return 2 end\n"
    "local v = redis.call('GET', KEYS[1])\n"
    "if v and (string.sub(v, 1, 3) ~= 'VA1' or redis.call('EXISTS', ARGV[3] .. string.sub(v, 4)) == 1) then\n"
    "  return 2\n"
    "end\n"
    "if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end\n"
    "return 0\n";
/* Extends a claim that is still the caller's, or takes it again when it lapsed (a Redis pause) and is free. */
static const char renew_script[] =
    "local v = redis.call('GET', KEYS[1])\n"
    "if v == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end\n"
    "if not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end\n"
    "return 0\n";
/* Deletes a claim only when it is still the caller's. */
static const char release_script[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end\n"
    "return 0\n";

enum req_kind { R_GET, R_CLAIM, R_OTHER };

/* One command in flight, in the order Redis answers them. */
struct rreq {
  struct rreq *prev, *next;
  struct rcache *rc;
  enum req_kind kind;
  uint64_t tag;
  uint64_t deadline_ms;
  char video_id[12]; /* R_GET: for the log line and the delete of a bad value */
  uint8_t job_kind;  /* R_GET: what the job key answers (enum proto_kind), for the body check */
  char key[RCACHE_KEY_BYTES];
};

struct rcache {
  uv_loop_t *loop;
  struct redis_session session; /* where Redis is, the wait after a failure, the down and back lines */
  redisAsyncContext *ac;        /* NULL while disconnected */
  bool closing;
  int open_handles;               /* the timers not closed yet: the struct goes with the last */
  uv_timer_t deadline;            /* the oldest command's deadline */
  uv_timer_t soon;                /* answers the commands failed at once, outside the call that made them */
  struct rreq inflight;           /* sentinel of the commands sent, oldest first */
  struct rreq failed;             /* sentinel of the commands to answer -EIO soon */
  char owner[RCACHE_OWNER_BYTES]; /* this gateway's name in its claims */
  rcache_get_cb get_cb;
  rcache_claim_cb claim_cb;
  void *arg;
};

static void ring_init(struct rreq *s) { s->prev = s->next = s; }
static bool ring_empty(const struct rreq *s) { return s->next == s; }
static void ring_append(struct rreq *s, struct rreq *q) {
  q->prev = s->prev;
  q->next = s;
  s->prev->next = q;
  s->prev = q;
}
static void ring_remove(struct rreq *q) {
  q->prev->next = q->next;
  q->next->prev = q->prev;
  q->prev = q->next = q;
}

/* The key of (video, job key); the video id is the hash tag, so a Redis Cluster keeps a video's entries together. */
#define RCACHE_PREFIX "vts:transcript:{%s}:"
static void key_of(const char *video_id, const char *key, char *out, size_t outlen) {
  snprintf(out, outlen, RCACHE_PREFIX "%s", video_id, key[0] != '\0' ? key : "-");
}

static bool lang_chars_valid(const unsigned char *s, size_t len) {
  for (size_t i = 0; i < len; i++) {
    if (!isalnum(s[i]) && s[i] != '-' && s[i] != '_') return false;
  }
  return true;
}

/*
 * Checks a value read for a job of this kind before anything of it is used: Redis may be shared, written by an older
 * version, or tampered with. The shape (magic, outcome, source, language), a "cannot be played" entry (gone) being
 * a 404, and a 200's body passing the very check a fetcher's result passes (bodycheck_result). Fills res (borrowing
 * v) when it passes. Returns 0, or -EPROTO.
 */
static int entry_parse(const unsigned char *v, size_t vlen, uint8_t kind, bool gone, struct proto_result *res) {
  if (vlen < RCACHE_HEADER || memcmp(v, RCACHE_MAGIC, 3) != 0) return -EPROTO;
  unsigned outcome = v[3], source = v[4], langlen = v[5];
  if (outcome != PROTO_OK && outcome != PROTO_NOT_AVAILABLE) return -EPROTO;
  if (gone && outcome != PROTO_NOT_AVAILABLE) return -EPROTO;
  if (source > PROTO_SOURCE_SPEECH) return -EPROTO;
  if (outcome == PROTO_OK && (kind != PROTO_KIND_CAPTIONS) != (source == PROTO_SOURCE_NONE)) return -EPROTO;
  if (langlen > PROTO_MAX_LANG || (size_t)RCACHE_HEADER + langlen > vlen) return -EPROTO;
  if (!lang_chars_valid(v + RCACHE_HEADER, langlen)) return -EPROTO;
  const char *body = (const char *)v + RCACHE_HEADER + langlen;
  size_t body_len = vlen - RCACHE_HEADER - langlen;
  uint8_t reason = gone ? PROTO_REASON_NOT_PLAYABLE : PROTO_REASON_NONE;
  if (outcome == PROTO_OK) {
    if (bodycheck_result(kind, body, body_len, NULL) != 0) return -EPROTO;
  } else if (gone && body_len == 1 && proto_reason_gone((uint8_t)body[0])) {
    reason = (uint8_t)body[0]; /* the case the reply said */
    body_len = 0;
  } else if (body_len != 0) {
    return -EPROTO;
  }
  memset(res, 0, sizeof(*res));
  res->outcome = (uint8_t)outcome;
  res->source = (uint8_t)source;
  res->reason = reason;
  memcpy(res->lang, v + RCACHE_HEADER, langlen);
  res->lang[langlen] = '\0';
  res->body = body;
  res->body_len = (uint32_t)body_len;
  return 0;
}

/* Calls q's caller back with a fault (nothing for a command without one), unless the cache is closing. */
static void req_fail(struct rcache *rc, struct rreq *q) {
  if (rc->closing) return;
  if (q->kind == R_GET) rc->get_cb(rc->arg, q->tag, -EIO, NULL, 0);
  if (q->kind == R_CLAIM) rc->claim_cb(rc->arg, q->tag, -EIO);
}

static void on_deadline(uv_timer_t *t);

static void arm_deadline(struct rcache *rc) {
  if (rc->closing) return;
  if (ring_empty(&rc->inflight)) {
    uv_timer_stop(&rc->deadline);
    return;
  }
  uint64_t now = util_now_ms(), at = rc->inflight.next->deadline_ms;
  uv_update_time(rc->loop); /* the timer counts from the loop's time, which may be older than now */
  uv_timer_start(&rc->deadline, on_deadline, at > now ? at - now : 0, 0);
}

/* Drops the connection: every command in flight is answered with a fault (hiredis calls each back with no reply). */
static void drop(struct rcache *rc, const char *why) {
  if (!rc->closing) redis_session_down(&rc->session, why, util_now_ms());
  redisAsyncContext *ac = rc->ac;
  rc->ac = NULL;
  if (ac != NULL) redisAsyncFree(ac);
}

static void on_deadline(uv_timer_t *t) { drop(t->data, "command timed out"); }

static void on_soon(uv_timer_t *t) {
  struct rcache *rc = t->data;
  while (!ring_empty(&rc->failed)) {
    struct rreq *q = rc->failed.next;
    ring_remove(q);
    req_fail(rc, q);
    free(q);
  }
}

static void on_connect(const redisAsyncContext *ac, int status) {
  struct rcache *rc = ac->data;
  if (status != REDIS_OK && rc->ac == ac) {
    /* hiredis frees the context after this: its commands are answered with faults then. */
    rc->ac = NULL;
    if (!rc->closing) redis_session_down(&rc->session, ac->errstr, util_now_ms());
  }
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
  struct rcache *rc = ac->data;
  if (rc->ac != ac) return;
  rc->ac = NULL;
  /* A clean close is ours (rcache_close); the server's is an outage, and so the next connection waits too. */
  if (!rc->closing)
    redis_session_down(&rc->session, status != REDIS_OK ? ac->errstr : "connection closed", util_now_ms());
}

/* AUTH and SELECT: a refusal (a wrong password, a missing database) ends the connection. */
static void on_setup(redisAsyncContext *ac, void *reply, void *privdata) {
  (void)privdata;
  redisReply *r = reply;
  if (r != NULL && r->type != REDIS_REPLY_ERROR) return;
  struct rcache *rc = ac->data;
  if (rc->ac == ac) {
    rc->ac = NULL;
    if (!rc->closing) redis_session_down(&rc->session, r != NULL ? r->str : "connection closed", util_now_ms());
    redisAsyncDisconnect(ac);
  }
}

/* A connection for a new command, or NULL while Redis is known to be away. */
static redisAsyncContext *conn(struct rcache *rc) {
  if (rc->ac != NULL) return rc->ac;
  if (rc->closing || !redis_session_may_try(&rc->session, util_now_ms())) return NULL;
  char err[256];
  rc->ac =
      redis_session_open_async(&rc->session, rc->loop, rc, on_connect, on_disconnect, on_setup, NULL, err, sizeof(err));
  if (rc->ac == NULL) redis_session_down(&rc->session, err, util_now_ms());
  return rc->ac;
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata);

static struct rreq *req_new(struct rcache *rc, enum req_kind kind, uint64_t tag, const char *video_id,
                            const char *key) {
  struct rreq *q = calloc(1, sizeof(*q));
  if (q == NULL) return NULL;
  ring_init(q);
  q->rc = rc;
  q->kind = kind;
  q->tag = tag;
  snprintf(q->video_id, sizeof(q->video_id), "%s", video_id);
  key_of(video_id, key, q->key, sizeof(q->key));
  return q;
}

/* Sends q's command (argv); a command that cannot be sent is answered with a fault soon. */
static void req_send(struct rcache *rc, struct rreq *q, int argc, const char **argv, const size_t *lens) {
  redisAsyncContext *ac = conn(rc);
  if (ac != NULL && redisAsyncCommandArgv(ac, on_reply, q, argc, argv, lens) == REDIS_OK) {
    q->deadline_ms = util_now_ms() + VTS_RCACHE_COMMAND_TIMEOUT_MS;
    bool first = ring_empty(&rc->inflight);
    ring_append(&rc->inflight, q);
    if (first) arm_deadline(rc);
    return;
  }
  ring_append(&rc->failed, q);
  if (!rc->closing) uv_timer_start(&rc->soon, on_soon, 0, 0);
}

/* A lookup's reply: nil, or {value, ttl, key}; anything else under our keys is deleted. */
static void answer_lookup(struct rcache *rc, struct rreq *q, const redisReply *r) {
  struct proto_result res;
  if (r->type == REDIS_REPLY_NIL) {
    rc->get_cb(rc->arg, q->tag, -ENOENT, NULL, 0);
    return;
  }
  char gone[RCACHE_KEY_BYTES];
  key_of(q->video_id, PROTO_GONE_KEY, gone, sizeof(gone));
  if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[0]->type == REDIS_REPLY_STRING &&
      r->element[1]->type == REDIS_REPLY_INTEGER && r->element[2]->type == REDIS_REPLY_STRING) {
    const redisReply *from = r->element[2];
    bool is_gone = from->len == strlen(gone) && memcmp(from->str, gone, from->len) == 0;
    if (r->element[1]->integer > 0 &&
        entry_parse((const unsigned char *)r->element[0]->str, r->element[0]->len, q->job_kind, is_gone, &res) == 0) {
      rc->get_cb(rc->arg, q->tag, 0, &res, (uint64_t)r->element[1]->integer);
      return;
    }
    /* The bad value is deleted where it was read: the job key, the entry an alias named, or the video's 404. */
    if (from->len < RCACHE_KEY_BYTES) {
      memcpy(q->key, from->str, from->len);
      q->key[from->len] = '\0';
    }
  }
  /* Not ours to trust: gone, so the fetch that follows this miss stores a good entry in its place. */
  log_msg(LOG_WARN, "bad transcript cache entry in Redis deleted", "video_id", q->video_id, NULL);
  struct rreq *del = req_new(rc, R_OTHER, 0, q->video_id, "");
  if (del != NULL) {
    snprintf(del->key, sizeof(del->key), "%s", q->key);
    const char *argv[] = {"DEL", del->key};
    req_send(rc, del, 2, argv, NULL);
  }
  rc->get_cb(rc->arg, q->tag, -ENOENT, NULL, 0);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata) {
  (void)ac;
  struct rreq *q = privdata;
  struct rcache *rc = q->rc;
  redisReply *r = reply;
  bool was_first = rc->inflight.next == q;
  ring_remove(q);
  /* An answer proves the connection serves (its login passed): the session is back. */
  if (r != NULL && r->type != REDIS_REPLY_ERROR && !rc->closing) redis_session_up(&rc->session);
  if (r == NULL) {
    req_fail(rc, q);
  } else if (!rc->closing && q->kind == R_GET && r->type != REDIS_REPLY_ERROR) {
    answer_lookup(rc, q, r);
  } else if (!rc->closing && q->kind == R_GET && strstr(r->str, "WRONGTYPE") != NULL) {
    /* A value of another type under our key is as foreign as a bad string. */
    static const redisReply foreign = {.type = REDIS_REPLY_STATUS};
    answer_lookup(rc, q, &foreign);
  } else if (!rc->closing && q->kind == R_GET) {
    rc->get_cb(rc->arg, q->tag, -EIO, NULL, 0); /* refused (a missing permission, a script error): a miss */
  } else if (!rc->closing && q->kind == R_CLAIM) {
    rc->claim_cb(rc->arg, q->tag, r->type == REDIS_REPLY_INTEGER && r->integer >= 0 ? (int)r->integer : -EIO);
  }
  free(q);
  if (was_first) arm_deadline(rc);
}

struct rcache *rcache_new(uv_loop_t *loop, const struct vts_config *cfg, rcache_get_cb get_cb, rcache_claim_cb claim_cb,
                          void *arg) {
  const char *var = cfg->redis_cache_url[0] != '\0' ? "VTS_REDIS_CACHE_URL" : "VTS_REDIS_URL";
  const char *url = cfg->redis_cache_url[0] != '\0' ? cfg->redis_cache_url : cfg->redis_url;
  if (url[0] == '\0') return NULL;
  struct rcache *rc = calloc(1, sizeof(*rc));
  if (rc == NULL) return NULL;
  char err[256];
  struct redis_addr addr;
  if (redis_conn_resolve_var(var, url, &addr, err, sizeof(err)) != 0) {
    log_msg(LOG_WARN, "transcript cache in Redis disabled", "error", err, NULL);
    free(rc);
    return NULL;
  }
  /* A fixed wait: a cache that is away only costs fetches, and a command tried every second finds it back. */
  redis_session_init(&rc->session, "cache", &addr, VTS_RCACHE_RETRY_MS, VTS_RCACHE_RETRY_MS);
  char id[17];
  if (util_random_hex(id, 8) != 0) snprintf(id, sizeof(id), "%d", (int)getpid());
  snprintf(rc->owner, sizeof(rc->owner), "%s", id);
  rc->loop = loop;
  rc->get_cb = get_cb;
  rc->claim_cb = claim_cb;
  rc->arg = arg;
  ring_init(&rc->inflight);
  ring_init(&rc->failed);
  uv_timer_init(loop, &rc->deadline);
  uv_timer_init(loop, &rc->soon);
  rc->deadline.data = rc->soon.data = rc;
  rc->open_handles = 2;
  return rc;
}

static void timer_closed(uv_handle_t *h) {
  struct rcache *rc = h->data;
  if (--rc->open_handles == 0) free(rc);
}

void rcache_close(struct rcache *rc) {
  if (rc == NULL) return;
  rc->closing = true;
  redisAsyncContext *ac = rc->ac;
  rc->ac = NULL;
  if (ac != NULL) redisAsyncFree(ac); /* answers what is in flight: nothing is called back any more */
  on_soon(&rc->soon);
  uv_close((uv_handle_t *)&rc->deadline, timer_closed);
  uv_close((uv_handle_t *)&rc->soon, timer_closed);
}

void rcache_get(struct rcache *rc, uint64_t tag, const char *video_id, const char *key) {
  struct rreq *q = req_new(rc, R_GET, tag, video_id, key);
  if (q == NULL) return; /* out of memory: the job's own deadline answers it */
  q->job_kind = proto_key_kind(key);
  char gone[RCACHE_KEY_BYTES], prefix[RCACHE_KEY_BYTES];
  key_of(video_id, PROTO_GONE_KEY, gone, sizeof(gone));
  snprintf(prefix, sizeof(prefix), RCACHE_PREFIX, video_id);
  const char *argv[] = {"EVAL", get_script, "2", gone, q->key, prefix};
  req_send(rc, q, 6, argv, NULL);
}

/* Sends SET key value PX ttl_ms, nothing called back. Returns 0 once sent, or -ENOMEM. */
static int set_value(struct rcache *rc, const char *video_id, const char *key, const void *v, size_t vlen,
                     uint64_t ttl_ms) {
  struct rreq *q = req_new(rc, R_OTHER, 0, video_id, key);
  if (q == NULL) return -ENOMEM;
  char px[24];
  snprintf(px, sizeof(px), "%llu", (unsigned long long)ttl_ms);
  const char *argv[] = {"SET", q->key, v, "PX", px};
  const size_t lens[] = {3, strlen(q->key), vlen, 2, strlen(px)};
  req_send(rc, q, 5, argv, lens);
  return 0;
}

int rcache_put(struct rcache *rc, const char *video_id, const char *key, const struct proto_result *res,
               uint64_t ttl_ms) {
  if (res->outcome != PROTO_OK && res->outcome != PROTO_NOT_AVAILABLE) return -EINVAL;
  if (ttl_ms == 0) return 0;
  if (conn(rc) == NULL) return -EIO;
  /* A transcript goes under its track's key, once for all the spellings served it; the job key is an alias of it. */
  char track[PROTO_MAX_JOB_KEY + 1];
  const char *entry_key = key;
  if (res->outcome == PROTO_OK && proto_key_kind(key) == PROTO_KIND_CAPTIONS) {
    proto_track_key(res, track);
    entry_key = track;
  }
  size_t langlen = strlen(res->lang);
  struct buf v = BUF_INIT;
  unsigned char head[RCACHE_HEADER] = {'V', 'C', '1', res->outcome, res->source, (unsigned char)langlen};
  int rv = buf_append(&v, head, sizeof(head));
  if (rv == 0) rv = buf_append(&v, res->lang, langlen);
  if (rv == 0 && res->outcome == PROTO_OK) rv = buf_append(&v, res->body, res->body_len);
  /* A video that cannot be played keeps the case its reply said: one byte, its reason. */
  if (rv == 0 && proto_result_gone(res) && res->reason != PROTO_REASON_NOT_PLAYABLE)
    rv = buf_append(&v, &res->reason, 1);
  if (rv == 0) rv = set_value(rc, video_id, entry_key, v.data, v.len, ttl_ms);
  buf_free(&v); /* hiredis formatted its own copy */
  if (rv == 0 && entry_key != key) {
    char alias[sizeof(RCACHE_ALIAS) + PROTO_MAX_JOB_KEY];
    int n = snprintf(alias, sizeof(alias), RCACHE_ALIAS "%s", entry_key);
    rv = set_value(rc, video_id, key, alias, (size_t)n, ttl_ms);
  }
  return rv;
}

/* The claim key of (video, key), beside the cache entry in the same Cluster slot. */
static void claim_key(struct rreq *q) {
  char entry[RCACHE_KEY_BYTES];
  snprintf(entry, sizeof(entry), "%s", q->key);
  snprintf(q->key, sizeof(q->key), "vts:claim:%s", entry + sizeof("vts:transcript:") - 1);
}

void rcache_claim(struct rcache *rc, uint64_t tag, const char *video_id, const char *key, uint64_t ttl_ms) {
  struct rreq *q = req_new(rc, R_CLAIM, tag, video_id, key);
  if (q == NULL) return; /* out of memory: the job's own deadline answers it */
  char entry[RCACHE_KEY_BYTES];
  snprintf(entry, sizeof(entry), "%s", q->key);
  claim_key(q);
  char value[RCACHE_OWNER_BYTES + 24], px[24];
  snprintf(value, sizeof(value), "%s:%llu", rc->owner, (unsigned long long)tag);
  snprintf(px, sizeof(px), "%llu", (unsigned long long)(ttl_ms > 0 ? ttl_ms : 1));
  char gone[RCACHE_KEY_BYTES], prefix[RCACHE_KEY_BYTES];
  key_of(video_id, PROTO_GONE_KEY, gone, sizeof(gone));
  snprintf(prefix, sizeof(prefix), RCACHE_PREFIX, video_id);
  const char *argv[] = {"EVAL", claim_script, "3", entry, q->key, gone, value, px, prefix};
  req_send(rc, q, 9, argv, NULL);
}

void rcache_release(struct rcache *rc, uint64_t tag, const char *video_id, const char *key) {
  struct rreq *q = req_new(rc, R_OTHER, tag, video_id, key);
  if (q == NULL) return;
  claim_key(q);
  char value[RCACHE_OWNER_BYTES + 24];
  snprintf(value, sizeof(value), "%s:%llu", rc->owner, (unsigned long long)tag);
  const char *argv[] = {"EVAL", release_script, "1", q->key, value};
  req_send(rc, q, 5, argv, NULL);
}

void rcache_renew(struct rcache *rc, uint64_t tag, const char *video_id, const char *key, uint64_t ttl_ms) {
  struct rreq *q = req_new(rc, R_OTHER, tag, video_id, key);
  if (q == NULL) return;
  claim_key(q);
  char value[RCACHE_OWNER_BYTES + 24], px[24];
  snprintf(value, sizeof(value), "%s:%llu", rc->owner, (unsigned long long)tag);
  snprintf(px, sizeof(px), "%llu", (unsigned long long)(ttl_ms > 0 ? ttl_ms : 1));
  const char *argv[] = {"EVAL", renew_script, "1", q->key, value, px};
  req_send(rc, q, 6, argv, NULL);
}
