#include "gateway/http/l1cache.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/util.h"
#include "gateway/cache/cache.h"
#include "gateway/http/etagstore.h"

struct l1cache {
  struct cache *answers;
  struct etagstore *validators;
};

struct l1cache *l1cache_new(void) {
  struct l1cache *l1 = calloc(1, sizeof(*l1));
  if (l1 == NULL) return NULL;
  /* Expired entries are kept for same_answer: a hot transcript's forms are made once, not at every expiry. */
  struct cache_limits lim = {VTS_L1_CACHE_BYTES, VTS_L1_CACHE_TTL_MS, VTS_L1_CACHE_TTL_MS, 1};
  l1->answers = cache_new(&lim, NULL);
  l1->validators = etagstore_new();
  if (l1->answers == NULL || l1->validators == NULL) {
    l1cache_free(l1);
    return NULL;
  }
  return l1;
}

void l1cache_free(struct l1cache *l1) {
  if (l1 == NULL) return;
  cache_free(l1->answers);
  etagstore_free(l1->validators);
  free(l1);
}

int l1cache_lookup(struct l1cache *l1, const char *video_id, const char *key, struct proto_result *hit,
                   struct entity **ent, bool *refresh) {
  uint64_t left = 0, ended = 0, now = util_now_ms();
  *refresh = false;
  int rv = cache_lookup_stale(l1->answers, video_id, key, hit, &left, &ended, ent);
  /* Only a transcript is refreshed (proto_job.refresh): a captions job that the dispatcher answered with one. */
  bool transcript = rv != -ENOENT && hit->outcome == PROTO_OK && proto_key_kind(key) == PROTO_KIND_CAPTIONS;
  if (rv == 0) {
    /* entity->expires_ms is the shared entry's end (keep): past it, the dispatcher holds nothing to confirm. */
    *refresh =
        transcript && left <= VTS_L1_REFRESH_AHEAD_MS && (*ent)->expires_ms > now + left + VTS_L1_REFRESH_AHEAD_MS;
    return 0;
  }
  if (rv == -ESTALE && transcript && ended < VTS_L1_CACHE_TTL_MS &&
      (*ent)->expires_ms > now + VTS_L1_REFRESH_AHEAD_MS) {
    *refresh = true;
    return -ESTALE;
  }
  if (rv == -ESTALE) entity_unref(*ent);
  *ent = NULL;
  return -ENOENT;
}

bool l1cache_forget(struct l1cache *l1, const char *video_id, const char *key) {
  return cache_remove(l1->answers, video_id, key);
}

/*
 * The entity L1 holds for the key, live or expired, when it is exactly res's answer, as a new reference (*expired says
 * which); else NULL. An expired one is the same answer come back after L1's short lifetime: its compressed forms and
 * ETag are still right, and making them again costs milliseconds of the loop (gzip and brotli of a long transcript)
 * at every expiry of a hot entry.
 */
static struct entity *same_answer(struct l1cache *l1, const char *video_id, const char *key,
                                  const struct proto_result *res, int *expired) {
  struct proto_result held;
  struct entity *ent = NULL;
  int rv = cache_lookup_stale(l1->answers, video_id, key, &held, NULL, NULL, &ent);
  if (rv != 0 && rv != -ESTALE) return NULL;
  *expired = rv == -ESTALE;
  const struct entity_form *f = &ent->form[ENTITY_IDENTITY];
  if (held.outcome == res->outcome && f->len == res->body_len &&
      (f->len == 0 || memcmp(f->data, res->body, f->len) == 0))
    return ent;
  entity_unref(ent);
  return NULL;
}

/* Keeps ent, res's entity, in L1 for res->cache_ms, and its validator in the ETag store. */
static void keep(struct l1cache *l1, const char *video_id, const char *key, const struct proto_result *res,
                 struct entity *ent) {
  uint32_t ttl = res->cache_ms;
  ent->expires_ms = util_now_ms() + ttl;
  if (ttl > 0) {
    cache_put_entity(l1->answers, video_id, key, res, ent, ttl, NULL);
    if (res->outcome == PROTO_OK) etagstore_keep(l1->validators, video_id, key, res, ent, ttl);
  }
}

struct entity *l1cache_answer(struct l1cache *l1, const char *video_id, const char *key,
                              const struct proto_result *res) {
  int expired = 0;
  struct entity *ent = same_answer(l1, video_id, key, res, &expired);
  if (ent != NULL) {
    if (expired) keep(l1, video_id, key, res, ent);
    return ent;
  }
  ent = entity_new(res->body, res->body_len, res->outcome == PROTO_OK ? ENTITY_COMPRESS | ENTITY_FILE : 0);
  if (ent == NULL) return NULL;
  keep(l1, video_id, key, res, ent);
  return ent;
}

int l1cache_renew(struct l1cache *l1, const char *video_id, const char *key, const struct proto_result *res) {
  struct proto_result held;
  struct entity *ent = NULL;
  int rv = cache_lookup_stale(l1->answers, video_id, key, &held, NULL, NULL, &ent);
  if (rv != 0 && rv != -ESTALE) return -ENOENT;
  char etag[ENTITY_ETAG_BYTES];
  entity_etag(ent, ENTITY_IDENTITY, etag);
  if (held.outcome != PROTO_OK || !res->notmod || strcmp(etag, res->etag) != 0) {
    entity_unref(ent);
    return -ENOENT;
  }
  held.cache_ms = res->cache_ms;
  keep(l1, video_id, key, &held, ent);
  entity_unref(ent);
  return 0;
}

struct entity *l1cache_known(struct l1cache *l1, const char *video_id, const char *key) {
  struct proto_result res;
  struct entity *ent = NULL;
  if (cache_lookup(l1->answers, video_id, key, &res, NULL, &ent) == 0) {
    if (res.outcome == PROTO_OK) return ent;
    entity_unref(ent);
    return NULL;
  }
  return etagstore_lookup(l1->validators, video_id, key);
}
