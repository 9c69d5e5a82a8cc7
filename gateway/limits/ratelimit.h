/*
 * Short-window rate limit and monthly quota per key: fixed windows aligned to multiples of the window length.
 * Providers: memory (a shared-memory table created by the master before fork, atomics only) and redis.
 *
 * Semantics, the same for both providers:
 * - Window: index = now / window_s, reset = (index + 1) * window_s (unix seconds, exact). Exactly `limit` requests
 *   of a key are admitted per window, across all workers (and, with redis, across all gateways).
 * - Month: the quota counts admitted requests from 00:00 UTC on the 1st to the next 1st.
 * - Order: the quota is checked first (an exhausted month answers RL_QUOTA even when the window is also full, so a
 *   client is told the lasting reason), then the window. A request consumes one window slot and one quota unit only
 *   when it is admitted: a request refused by the window consumes no quota, one refused by the quota consumes no
 *   window slot.
 * - Headers, on every outcome: X-RateLimit-Limit is the short-window limit, X-RateLimit-Reset the end of the current
 *   short window, and X-RateLimit-Remaining the requests the key can still make before that reset, that is
 *   min(window remaining, quota remaining). So on a quota_exceeded answer Limit and Reset describe the window and
 *   Remaining is 0; the month's own figures are in quota_* below (not sent as headers), and no Retry-After is sent
 *   for quota_exceeded (the wait is until the 1st of the next month, quota_reset).
 * - Store faults (redis provider): never RL_LIMITED. Fail-closed: RL_UNAVAILABLE with retry_after
 *   VTS_RATELIMIT_UNAVAILABLE_RETRY_S, remaining 0. Fail-open: the shared-memory limiter decides, seeded with the
 *   counts Redis last reported for the key, so the headers stay truthful.
 */
#ifndef VTS_RATELIMIT_H
#define VTS_RATELIMIT_H

#include <stdint.h>
#include <uv.h>

#include "common/config.h"
#include "gateway/keys/keys.h"

enum rl_outcome {
  RL_ALLOW = 0,
  RL_LIMITED,    /* 429 rate_limited + Retry-After */
  RL_QUOTA,      /* 429 quota_exceeded */
  RL_UNAVAILABLE /* 503 rate_limit_unavailable + Retry-After (redis down, fail-closed) */
};

struct rl_decision {
  enum rl_outcome outcome;
  int64_t limit;           /* X-RateLimit-Limit */
  int64_t remaining;       /* X-RateLimit-Remaining */
  int64_t reset;           /* X-RateLimit-Reset, unix seconds */
  int64_t retry_after;     /* Retry-After seconds (>= 1) for RL_LIMITED and RL_UNAVAILABLE, else 0 */
  int64_t quota_limit;     /* monthly quota of the key */
  int64_t quota_remaining; /* admitted requests left this month (0 when unknown: RL_UNAVAILABLE) */
  int64_t quota_reset;     /* unix seconds of 00:00 UTC on the 1st of the next month */
};

/* Called exactly once per ratelimit_check, on the worker's loop thread, maybe before ratelimit_check returns. */
typedef void (*rl_cb)(void *arg, const struct rl_decision *d);

struct ratelimit;

/* Counters of one worker's limiter, for metrics. */
struct ratelimit_stats {
  uint64_t checks;         /* ratelimit_check calls */
  uint64_t allowed;        /* RL_ALLOW */
  uint64_t limited;        /* RL_LIMITED */
  uint64_t quota_exceeded; /* RL_QUOTA */
  uint64_t unavailable;    /* RL_UNAVAILABLE */
  uint64_t fallbacks;      /* decided by the memory limiter because Redis could not answer (fail-open) */
  uint64_t table_full;     /* refused because the shared table had no slot left for a new key */
  uint64_t redis_timeouts; /* commands unanswered within VTS_REDIS_COMMAND_TIMEOUT_MS */
  uint64_t redis_errors;   /* error or malformed replies, lost connections under a command */
  uint64_t redis_noscript; /* EVALSHA answered NOSCRIPT and was retried with EVAL */
  uint64_t redis_connects; /* connections set up (first one included) */
};

/* Master, before fork: creates the shared-memory table (memory provider, also redis fallback). Returns 0 or -errno. */
int ratelimit_shm_init(const struct vts_config *cfg);
/*
 * As ratelimit_shm_init, but instead of logging the reason of a failure, writes it as one line naming the variable
 * (VTS_STATE_DIR or VTS_REDIS_URL) into err. It also: creates VTS_STATE_DIR when missing and checks it is writable,
 * reloads this month's usage from its snapshot (memory provider); resolves the Redis host once, so workers never
 * block on a name lookup (redis provider: a new address of the host needs a restart). Calling it again replaces
 * the table.
 */
int ratelimit_shm_init_err(const struct vts_config *cfg, char *err, size_t errlen);
/* Master, at exit, after ratelimit_snapshot_now: unmaps the table. */
void ratelimit_shm_free(void);
/*
 * Writes the monthly usage snapshot now (memory provider; a no-op returning 0 for redis). The master calls it after
 * its workers have exited, so a shutdown loses no quota; workers also write it at most once a second by themselves.
 * Returns 0 or -errno.
 */
int ratelimit_snapshot_now(const struct vts_config *cfg);
/* Worker, after fork: the limiter of this worker on its loop. Returns NULL on failure. */
struct ratelimit *ratelimit_new(uv_loop_t *loop, const struct vts_config *cfg);
/*
 * Closes connections and timers; call before the loop ends, then run the loop so the handles close. Checks still
 * waiting for Redis are decided (as for a store fault) before it returns.
 */
void ratelimit_free(struct ratelimit *rl);
/* Decides one request of key. Copies what it needs from key: the entry may be freed before the callback runs. */
void ratelimit_check(struct ratelimit *rl, const struct key_entry *key, rl_cb cb, void *arg);
/*
 * ratelimit_check flags. RL_CHECK_WINDOW_ONLY: the request is admitted and counted by the short window as any other,
 * and the monthly quota neither refuses it nor counts it (X-RateLimit-Remaining still reports the month's remainder
 * when smaller). A revalidation answered 304 is such a request.
 */
#define RL_CHECK_WINDOW_ONLY 1u
/* As ratelimit_check, with flags. */
void ratelimit_check_flags(struct ratelimit *rl, const struct key_entry *key, unsigned flags, rl_cb cb, void *arg);
/* "memory" or "redis", for /health. */
const char *ratelimit_provider(const struct vts_config *cfg);
/* Copies this worker's counters into out. */
void ratelimit_stats(const struct ratelimit *rl, struct ratelimit_stats *out);

#endif
