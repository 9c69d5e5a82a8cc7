/*
 * Short-window rate limit and monthly quota per key: fixed windows aligned to multiples of the window length.
 * Providers (the backends of ratelimit_backend.h, chosen by name from its table): memory (a shared-memory table
 * created by the master before fork, atomics only) and redis. What the master makes before fork is a handle, struct
 * ratelimit_shared, which it lends to every child it forks and frees at its end. A worker's limiter is a handle, struct
 * ratelimit, made from it, whose calls go to its backend's table of operations; rl_cb, the callback of every check, is
 * in ratelimit_calc.h.
 *
 * Semantics, the same for both providers:
 * - Window: index = now / window_s, reset = (index + 1) * window_s (unix seconds, exact). Exactly `limit` requests
 *   of a key are admitted per window, across all workers (and, with redis, across all gateways).
 * - Month: the quota counts the units reserved from 00:00 UTC on the 1st to the next 1st.
 * - What counts. The window protects the service: it counts every request that passed the key check, whatever
 *   its answer (a 429 included). The month is what the customer receives: a unit is reserved when a request is
 *   admitted and given back (ratelimit_refund) when its answer is not a 200 (400, 404, 5xx, a client gone before
 *   the answer) or is an answer that carries no transcript (304 Not Modified).
 * - Order: the quota is checked first (an exhausted month answers RL_QUOTA even when the window is also full, so a
 *   client is told the lasting reason), then the window. A request refused by either reserves no quota unit.
 * - Headers, on every outcome: X-RateLimit-Limit is the short-window limit, X-RateLimit-Reset the end of the current
 *   short window, and X-RateLimit-Remaining what is left of that window (SPEC.md 4.2), never the month. The month's
 *   own figures are in quota_* below (not sent as headers), and no Retry-After is sent for quota_exceeded (the wait
 *   is until the 1st of the next month, quota_reset).
 * - Store faults (redis provider): never RL_LIMITED. Fail-closed: RL_UNAVAILABLE with retry_after
 *   VTS_RATELIMIT_UNAVAILABLE_RETRY_S, remaining 0. Fail-open: the shared-memory limiter decides, seeded with the
 *   counts Redis last reported for the key, so the headers stay truthful. What it counts is owed to Redis: later
 *   checks of the key carry the fallback's counts of the current window and month, numbered, until Redis has
 *   answered one of them; Redis keeps them under this gateway's id and adds them to its own, so a freeze, a stop or a
 *   restart of Redis (with its data) never gives a key more than its quota. A check that timed out may still run when a
 * frozen Redis thaws: then that request is counted twice (billed one unit too many, never served one too many).
 */
#ifndef VTS_RATELIMIT_H
#define VTS_RATELIMIT_H

#include <stdint.h>
#include <uv.h>

#include "common/config.h"
#include "gateway/keys/keys.h"
#include "gateway/limits/ratelimit_calc.h"

struct ratelimit;

struct ratelimit_shared;

/*
 * Master, before fork: makes into *out what every child it forks shares, the handle each of them is lent: the
 * shared-memory table (memory provider, also redis fallback) and the backend the configuration selects. It also:
 * creates VTS_STATE_DIR when missing and checks it is writable, reloads this month's usage from its snapshot (memory
 * provider); resolves the Redis host once, so workers never block on a name lookup (redis provider: a new address of
 * the host needs a restart). Returns 0, or -errno with the reason as one line naming the variable (VTS_STATE_DIR or
 * VTS_REDIS_URL) in err.
 */
int ratelimit_shared_new(const struct vts_config *cfg, struct ratelimit_shared **out, char *err, size_t errlen);
/* Master, at exit, after ratelimit_snapshot_now: unmaps the table and frees s (NULL: nothing). */
void ratelimit_shared_free(struct ratelimit_shared *s);
/*
 * Writes the monthly usage snapshot of s now (memory provider; a no-op returning 0 for redis). The master calls it
 * after its workers have exited, so a shutdown loses no quota; workers also write it at most once a second by
 * themselves. Returns 0 or -errno.
 */
int ratelimit_snapshot_now(const struct ratelimit_shared *s, const struct vts_config *cfg);
/* Worker, after fork: the limiter of this worker on its loop, over what the master made (s). NULL on failure. */
struct ratelimit *ratelimit_new(uv_loop_t *loop, const struct vts_config *cfg, const struct ratelimit_shared *s);
/*
 * The dispatcher's runner, after fork: a limiter on no loop, over the table of s, for a batch item's units of the month
 * taken outside any request (ratelimit_charge_month) and given back (ratelimit_refund). It decides no check: a check on
 * it is answered RL_UNAVAILABLE at once, so a wrong call refuses rather than admits. It holds no connection or timer.
 * Freed by ratelimit_free. NULL without memory.
 */
struct ratelimit *ratelimit_new_months(const struct vts_config *cfg, const struct ratelimit_shared *s);
/*
 * Closes connections and timers; call before the loop ends, then run the loop so the handles close. Checks still
 * waiting for Redis are decided (as for a store fault) before it returns.
 */
void ratelimit_free(struct ratelimit *rl);
/* Decides one request of key. Copies what it needs from key: the entry may be freed before the callback runs. */
void ratelimit_check(struct ratelimit *rl, const struct key_entry *key, rl_cb cb, void *arg);
/*
 * The same for a request known to spend no unit of the month (a revalidation answered 304, every jobs request):
 * decided alike (a month used up still refuses it), but no provider reserves a unit, so there is none to give back
 * and a reader of the month never sees one pass through it.
 */
void ratelimit_check_unspent(struct ratelimit *rl, const struct key_entry *key, rl_cb cb, void *arg);
/*
 * Gives back the month's unit that decision d reserved, once (it clears d->reserved_in): the answer to the request
 * is not a 200 with a transcript; or the unit of a batch item that ratelimit_charge_month took from rl
 * (RL_STORE_TABLE: given back to the shared table), whose answer could not be kept. The one way a unit goes back. Does
 * nothing when d reserved nothing, or rl is NULL (a worker already closing its limiter, a runner that has none). A unit
 * reserved in Redis is given back in Redis; when Redis cannot take it the unit stays counted (a customer may be billed
 * one unit too many, never served one too many).
 */
void ratelimit_refund(struct ratelimit *rl, struct rl_decision *d);
/*
 * Takes one unit of the month of key, outside any request: a batch job's item answered with a transcript (the
 * dispatcher's runner, with its ratelimit_new_months; the job's request was counted in the window). From the shared
 * table of rl, which the master made. Returns 0 with what happened in *outcome (RL_CHARGE_TAKEN: unit records the
 * unit, reserved_in RL_STORE_TABLE, for ratelimit_refund on rl), -ENOSPC, or -ENODEV (rl NULL: no table). The table is
 * the month of the memory provider; with VTS_REDIS_URL the month is in Redis: see ratelimit_month_counter.
 */
int ratelimit_charge_month(struct ratelimit *rl, const struct key_entry *key, struct rl_decision *unit,
                           enum rl_charge *outcome);
/*
 * With VTS_REDIS_URL: where key's units of the month are counted in Redis at second now (the counter every check of
 * the key counts in, name written to name), its quota and the lifetime a counter it starts gets; the job store counts
 * a batch item's unit there atomically with its answer. Returns 0, -ENODEV (no Redis: ratelimit_charge_month), or
 * -ENOSPC (cap too small).
 */
int ratelimit_month_counter(const struct vts_config *cfg, const struct key_entry *key, int64_t now, char *name,
                            size_t cap, int64_t *quota, int64_t *ttl_s);
/* "memory" or "redis", for /health. */
const char *ratelimit_provider(const struct vts_config *cfg);
/* Copies this worker's counters into out. */
void ratelimit_stats(const struct ratelimit *rl, struct ratelimit_stats *out);

#endif
