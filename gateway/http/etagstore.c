#include "gateway/http/etagstore.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "common/limits.h"
#include "gateway/cache/cache.h"

struct etagstore {
  struct cache *validators;
};

struct etagstore *etagstore_new(void) {
  struct etagstore *s = calloc(1, sizeof(*s));
  if (s == NULL) return NULL;
  struct cache_limits lim = {VTS_L1_VALIDATOR_BYTES, UINT64_MAX, 0, 0};
  s->validators = cache_new(&lim, NULL);
  if (s->validators == NULL) {
    free(s);
    return NULL;
  }
  return s;
}

void etagstore_free(struct etagstore *s) {
  if (s == NULL) return;
  cache_free(s->validators);
  free(s);
}

void etagstore_keep(struct etagstore *s, const char *video_id, const char *key, const struct proto_result *res,
                    const struct entity *ent, uint64_t ttl_ms) {
  struct entity *v = entity_validator(ent);
  if (v == NULL) return;
  cache_put_entity(s->validators, video_id, key, res, v, ttl_ms, NULL);
  entity_unref(v);
}

struct entity *etagstore_lookup(struct etagstore *s, const char *video_id, const char *key) {
  struct proto_result res;
  struct entity *ent = NULL;
  if (cache_lookup(s->validators, video_id, key, &res, NULL, &ent) == 0) return ent;
  return NULL;
}
