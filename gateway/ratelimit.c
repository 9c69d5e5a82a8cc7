/* Stand-in until the rate-limit module lands: allows everything. */
#include "gateway/ratelimit.h"

#include <stdlib.h>
#include <string.h>

struct ratelimit { int unused; };
int ratelimit_shm_init(const struct vts_config *cfg) { (void)cfg; return 0; }
struct ratelimit *ratelimit_new(uv_loop_t *loop, const struct vts_config *cfg) { (void)loop; (void)cfg; return calloc(1, sizeof(struct ratelimit)); }
void ratelimit_free(struct ratelimit *rl) { free(rl); }
void ratelimit_check(struct ratelimit *rl, const struct key_entry *key, rl_cb cb, void *arg) {
  (void)rl; (void)key;
  struct rl_decision d = {RL_ALLOW, 60, 59, 0, 0};
  cb(arg, &d);
}
const char *ratelimit_provider(const struct vts_config *cfg) { return cfg->redis_url[0] ? "redis" : "memory"; }
