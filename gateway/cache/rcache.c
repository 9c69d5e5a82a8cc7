#include "gateway/cache/rcache.h"

#include <ctype.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/redis/redis_conn.h"

/* Value layout: "VC1" | outcome u8 | source u8 | lang length u8 | lang | body. */
#define RCACHE_MAGIC "VC1"
#define RCACHE_HEADER 6

struct rcache {
  struct redis_addr addr;
  redisContext *c;
  uint64_t retry_at_ms; /* after a failure: no command before this */
  redisReply *last;     /* the reply res->body borrows from */
};

struct rcache *rcache_new(const struct vts_config *cfg) {
  if (cfg->redis_url[0] == '\0') return NULL;
  struct rcache *rc = calloc(1, sizeof(*rc));
  if (rc == NULL) return NULL;
  char err[256];
  if (redis_conn_resolve(cfg->redis_url, &rc->addr, err, sizeof(err)) != 0) {
    log_msg(LOG_WARN, "transcript cache in Redis disabled", "error", err, NULL);
    free(rc);
    return NULL;
  }
  return rc;
}

static void drop(struct rcache *rc, const char *why) {
  if (rc->c != NULL) {
    log_msg(LOG_WARN, "transcript cache in Redis unavailable", "error", why, NULL);
    redisFree(rc->c);
    rc->c = NULL;
  }
  rc->retry_at_ms = util_now_ms() + VTS_RCACHE_RETRY_MS;
}

void rcache_free(struct rcache *rc) {
  if (rc == NULL) return;
  freeReplyObject(rc->last);
  if (rc->c != NULL) redisFree(rc->c);
  free(rc);
}

/* A connection ready for commands, or NULL while Redis is known to be away. */
static redisContext *conn(struct rcache *rc) {
  if (rc->c != NULL) return rc->c;
  if (util_now_ms() < rc->retry_at_ms) return NULL;
  char err[256];
  rc->c = redis_conn_open_sync(&rc->addr, VTS_REDIS_COMMAND_TIMEOUT_MS, err, sizeof(err));
  if (rc->c == NULL) rc->retry_at_ms = util_now_ms() + VTS_RCACHE_RETRY_MS;
  return rc->c;
}

/* The key of (video, lang); the video id is the hash tag, so a Redis Cluster keeps a video's entries together. */
static void key_of(const char *video_id, const char *lang, char *out, size_t outlen) {
  snprintf(out, outlen, "vts:transcript:{%s}:%s", video_id, lang[0] != '\0' ? lang : "-");
}

/* The lead of every transcript body the fetcher serialises (fetcher/captions/transcript.c). */
#define RCACHE_BODY_LEAD "{\"language\":"

static bool lang_chars_valid(const unsigned char *s, size_t len) {
  for (size_t i = 0; i < len; i++) {
    if (!isalnum(s[i]) && s[i] != '-' && s[i] != '_') return false;
  }
  return true;
}

/*
 * Checks a value read under our key before anything of it is used: Redis may be shared, written by an older
 * version, or tampered with. The shape (magic, outcome, source, language), the size (a body within what a fetcher
 * may produce, present exactly for a 200) and the body's JSON object lead. Fills res (borrowing v) when it passes.
 * Returns 0, or -EPROTO.
 */
static int entry_parse(const unsigned char *v, size_t vlen, struct proto_result *res) {
  if (vlen < RCACHE_HEADER || memcmp(v, RCACHE_MAGIC, 3) != 0) return -EPROTO;
  unsigned outcome = v[3], source = v[4], langlen = v[5];
  if (outcome != PROTO_OK && outcome != PROTO_NOT_AVAILABLE) return -EPROTO;
  if (source > PROTO_SOURCE_SPEECH || (outcome == PROTO_OK && source == PROTO_SOURCE_NONE)) return -EPROTO;
  if (langlen > PROTO_MAX_LANG || (size_t)RCACHE_HEADER + langlen > vlen) return -EPROTO;
  if (!lang_chars_valid(v + RCACHE_HEADER, langlen)) return -EPROTO;
  const char *body = (const char *)v + RCACHE_HEADER + langlen;
  size_t body_len = vlen - RCACHE_HEADER - langlen;
  if (outcome == PROTO_OK) {
    size_t lead = sizeof(RCACHE_BODY_LEAD) - 1;
    if (body_len > VTS_MAX_TRANSCRIPT_BYTES || body_len < lead + 1 || memcmp(body, RCACHE_BODY_LEAD, lead) != 0 ||
        body[body_len - 1] != '}')
      return -EPROTO;
  } else if (body_len != 0) {
    return -EPROTO;
  }
  memset(res, 0, sizeof(*res));
  res->outcome = (uint8_t)outcome;
  res->source = (uint8_t)source;
  memcpy(res->lang, v + RCACHE_HEADER, langlen);
  res->lang[langlen] = '\0';
  res->body = body;
  res->body_len = (uint32_t)body_len;
  return 0;
}

int rcache_get(struct rcache *rc, const char *video_id, const char *lang, struct proto_result *res,
               uint64_t *ttl_left_ms) {
  redisContext *c = conn(rc);
  if (c == NULL) return -EIO;
  char key[96];
  key_of(video_id, lang, key, sizeof(key));
  /* GET and PTTL in one round trip. */
  redisAppendCommand(c, "GET %s", key);
  redisAppendCommand(c, "PTTL %s", key);
  redisReply *value = NULL, *ttl = NULL;
  if (redisGetReply(c, (void **)&value) != REDIS_OK || redisGetReply(c, (void **)&ttl) != REDIS_OK) {
    freeReplyObject(value);
    drop(rc, c->errstr);
    return -EIO;
  }
  int rv = -ENOENT;
  if (value != NULL && value->type != REDIS_REPLY_NIL) {
    /* Anything but a string (another type answers GET with WRONGTYPE) is as foreign as a bad string. */
    if (value->type == REDIS_REPLY_STRING && ttl != NULL && ttl->type == REDIS_REPLY_INTEGER && ttl->integer > 0 &&
        entry_parse((const unsigned char *)value->str, value->len, res) == 0) {
      *ttl_left_ms = (uint64_t)ttl->integer;
      rv = 0;
    } else {
      /* Not ours to trust: gone, so the fetch that follows this miss stores a good entry in its place. */
      log_msg(LOG_WARN, "bad transcript cache entry in Redis deleted", "video_id", video_id, NULL);
      redisReply *del = redisCommand(c, "DEL %s", key);
      if (del == NULL) drop(rc, c->errstr);
      freeReplyObject(del);
    }
  }
  freeReplyObject(ttl);
  freeReplyObject(rc->last);
  rc->last = value;
  return rv;
}

int rcache_put(struct rcache *rc, const char *video_id, const char *lang, const struct proto_result *res,
               uint64_t ttl_ms) {
  if (res->outcome != PROTO_OK && res->outcome != PROTO_NOT_AVAILABLE) return -EINVAL;
  if (ttl_ms == 0) return 0;
  redisContext *c = conn(rc);
  if (c == NULL) return -EIO;
  char key[96];
  key_of(video_id, lang, key, sizeof(key));
  size_t langlen = strlen(res->lang);
  struct buf v = BUF_INIT;
  unsigned char head[RCACHE_HEADER] = {'V', 'C', '1', res->outcome, res->source, (unsigned char)langlen};
  int rv = buf_append(&v, head, sizeof(head));
  if (rv == 0) rv = buf_append(&v, res->lang, langlen);
  if (rv == 0 && res->outcome == PROTO_OK) rv = buf_append(&v, res->body, res->body_len);
  if (rv != 0) {
    buf_free(&v);
    return rv;
  }
  redisReply *r = redisCommand(c, "SET %s %b PX %llu", key, v.data, v.len, (unsigned long long)ttl_ms);
  buf_free(&v);
  if (r == NULL) {
    drop(rc, c->errstr);
    return -EIO;
  }
  rv = r->type == REDIS_REPLY_STATUS ? 0 : -EIO;
  freeReplyObject(r);
  return rv;
}
