/*
 * Short-window rate limit and monthly quota per key: fixed windows aligned to multiples of the window length.
 * Providers: memory (a shared-memory table created by the master before fork, atomics only) and redis.
 */
#ifndef VTS_RATELIMIT_H
#define VTS_RATELIMIT_H

#include <stdint.h>
#include <uv.h>

#include "common/config.h"
#include "gateway/keys.h"

enum rl_outcome {
  RL_ALLOW = 0,
  RL_LIMITED,    /* 429 rate_limited + Retry-After */
  RL_QUOTA,      /* 429 quota_exceeded */
  RL_UNAVAILABLE /* 503 rate_limit_unavailable + Retry-After (redis down, fail-closed) */
};

struct rl_decision {
  enum rl_outcome outcome;
  int64_t limit;       /* X-RateLimit-Limit */
  int64_t remaining;   /* X-RateLimit-Remaining */
  int64_t reset;       /* X-RateLimit-Reset, unix seconds */
  int64_t retry_after; /* Retry-After seconds (>= 1) for RL_LIMITED and RL_UNAVAILABLE */
};

/* Called exactly once per ratelimit_check, on the worker's loop thread, maybe before ratelimit_check returns. */
typedef void (*rl_cb)(void *arg, const struct rl_decision *d);

struct ratelimit;

/* Master, before fork: creates the shared-memory table (memory provider, also redis fallback). Returns 0 or -errno. */
int ratelimit_shm_init(const struct vts_config *cfg);
/* Worker, after fork: the limiter of this worker on its loop. Returns NULL on failure. */
struct ratelimit *ratelimit_new(uv_loop_t *loop, const struct vts_config *cfg);
/* Closes connections and timers; call before the loop ends. */
void ratelimit_free(struct ratelimit *rl);
/* Decides one request of key. */
void ratelimit_check(struct ratelimit *rl, const struct key_entry *key, rl_cb cb, void *arg);
/* "memory" or "redis", for /health. */
const char *ratelimit_provider(const struct vts_config *cfg);

#endif
