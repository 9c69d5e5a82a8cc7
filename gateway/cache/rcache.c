#include "gateway/cache/rcache.h"

#include <errno.h>
#include <hiredis/hiredis.h>
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
  const unsigned char *v =
      value != NULL && value->type == REDIS_REPLY_STRING ? (const unsigned char *)value->str : NULL;
  size_t vlen = v != NULL ? value->len : 0;
  if (v != NULL && ttl != NULL && ttl->type == REDIS_REPLY_INTEGER && ttl->integer > 0 && vlen >= RCACHE_HEADER &&
      memcmp(v, RCACHE_MAGIC, 3) == 0 && (size_t)RCACHE_HEADER + v[5] <= vlen && v[5] <= PROTO_MAX_LANG &&
      (v[3] == PROTO_OK || v[3] == PROTO_NOT_AVAILABLE)) {
    memset(res, 0, sizeof(*res));
    res->outcome = v[3];
    res->source = v[4];
    memcpy(res->lang, v + RCACHE_HEADER, v[5]);
    res->lang[v[5]] = '\0';
    res->body = (const char *)v + RCACHE_HEADER + v[5];
    res->body_len = (uint32_t)(vlen - RCACHE_HEADER - v[5]);
    /* An OK entry must carry a body; anything else under our key is not ours to trust. */
    if (res->outcome != PROTO_OK || res->body_len > 0) {
      *ttl_left_ms = (uint64_t)ttl->integer;
      rv = 0;
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
