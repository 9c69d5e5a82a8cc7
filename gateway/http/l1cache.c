#include "gateway/http/l1cache.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "common/limits.h"
#include "common/util.h"
#include "gateway/cache/cache.h"
#include "gateway/http/etagstore.h"

static struct cache *l1;

int l1cache_init(void) {
  struct cache_limits lim = {VTS_L1_CACHE_BYTES, VTS_L1_CACHE_TTL_MS, VTS_L1_CACHE_TTL_MS};
  l1 = cache_new(&lim, NULL);
  if (l1 == NULL || etagstore_init() != 0) {
    l1cache_free();
    return -ENOMEM;
  }
  return 0;
}

void l1cache_free(void) {
  cache_free(l1);
  l1 = NULL;
  etagstore_free();
}

int l1cache_lookup(const char *video_id, const char *key, struct proto_result *hit, struct entity **ent) {
  return cache_lookup(l1, video_id, key, hit, NULL, ent) == 0 ? 0 : -ENOENT;
}

/* The entity L1 already holds for the key when it has exactly res's answer, as a new reference; else NULL. */
static struct entity *same_answer(const char *video_id, const char *key, const struct proto_result *res) {
  struct proto_result held;
  struct entity *ent = NULL;
  if (cache_lookup(l1, video_id, key, &held, NULL, &ent) != 0) return NULL;
  const struct entity_form *f = &ent->form[ENTITY_IDENTITY];
  if (held.outcome == res->outcome && f->len == res->body_len &&
      (f->len == 0 || memcmp(f->data, res->body, f->len) == 0))
    return ent;
  entity_unref(ent);
  return NULL;
}

struct entity *l1cache_answer(const char *video_id, const char *key, const struct proto_result *res) {
  struct entity *ent = same_answer(video_id, key, res);
  if (ent != NULL) return ent;
  uint32_t ttl = res->cache_ms;
  ent = entity_new(res->body, res->body_len, res->outcome == PROTO_OK ? ENTITY_COMPRESS | ENTITY_FILE : 0);
  if (ent == NULL) return NULL;
  ent->expires_ms = util_now_ms() + ttl;
  if (ttl > 0) {
    cache_put_entity(l1, video_id, key, res, ent, ttl, NULL);
    if (res->outcome == PROTO_OK) etagstore_keep(video_id, key, res, ent, ttl);
  }
  return ent;
}

struct entity *l1cache_known(const char *video_id, const char *key) {
  struct proto_result res;
  struct entity *ent = NULL;
  if (cache_lookup(l1, video_id, key, &res, NULL, &ent) == 0) {
    if (res.outcome == PROTO_OK) return ent;
    entity_unref(ent);
    return NULL;
  }
  return etagstore_lookup(video_id, key);
}
