#include "gateway/http/etagstore.h"

#include <errno.h>
#include <stddef.h>

#include "common/limits.h"
#include "gateway/cache/cache.h"

static struct cache *validators;

int etagstore_init(void) {
  struct cache_limits lim = {VTS_L1_VALIDATOR_BYTES, UINT64_MAX, 0, 0};
  validators = cache_new(&lim, NULL);
  return validators != NULL ? 0 : -ENOMEM;
}

void etagstore_free(void) {
  cache_free(validators);
  validators = NULL;
}

void etagstore_keep(const char *video_id, const char *key, const struct proto_result *res, const struct entity *ent,
                    uint64_t ttl_ms) {
  struct entity *v = entity_validator(ent);
  if (v == NULL) return;
  cache_put_entity(validators, video_id, key, res, v, ttl_ms, NULL);
  entity_unref(v);
}

struct entity *etagstore_lookup(const char *video_id, const char *key) {
  struct proto_result res;
  struct entity *ent = NULL;
  if (cache_lookup(validators, video_id, key, &res, NULL, &ent) == 0) return ent;
  return NULL;
}
