/*
 * The dispatcher's decisions, with no I/O and no clock: events and the time go in, actions come out.
 *
 * The core owns every piece of the dispatcher's state: the shared memory cache, the coalescing table, the captions
 * and speech queues, the jobs fetchers hold, the fetchers' states (by the shell's connection id), the requests each
 * job answers, and each job's standing with the other gateways (its Redis lookup and claim). The shell
 * (dispatcher.c) turns nng messages and Redis replies into the calls below, each with the time it read, and carries
 * out the actions the core asks for through struct core_ops, synchronously, from inside those calls. An action never
 * calls back into the core: what it starts (a send, a Redis command) answers later, as another event.
 *
 * Its only output besides the actions is its log lines. Tests drive it in-process, setting the time by hand.
 *
 * Claims (with Redis, ops->redis_get set): a request that misses the memory cache makes a job that first asks Redis
 * (another gateway may have fetched it); on a miss it claims the video's job key there. The winner queues the job
 * for a fetcher, renews its claim every CORE_CLAIM_RENEW_MS while the job lives, writes the result to Redis when it
 * ends and releases its claim; the others wait, asking Redis again
 * every CORE_CLAIM_POLL_MS until the result is there (answered from it), the claim is gone without one (they claim in
 * turn: the claimant died or failed) or their own deadline passes. A Redis that fails to answer is a miss, and a
 * failed claim is a claim won: the job runs here, never waits on Redis.
 */
#ifndef VTS_DISPATCH_CORE_H
#define VTS_DISPATCH_CORE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/config.h"
#include "gateway/dispatcher/counters.h"
#include "proto/proto.h"

#define CORE_CLAIM_POLL_MS 50 /* a job waiting on another gateway's claim asks Redis again this often */
/*
 * A claim lives this long unless renewed, and its holder renews it this often while its job is queued or runs: a
 * claimant that dies (killed, its host gone) delays the others by CORE_CLAIM_TTL_MS at most, never a job's deadline.
 */
#define CORE_CLAIM_TTL_MS 3000
#define CORE_CLAIM_RENEW_MS 1000

/*
 * Shedding by expected wait (core_tick): the time a job takes is the moving average of the time fetchers held the
 * recent ones, each new one weighing 1/CORE_RUN_EWMA_WEIGHT, so a platform that slows down is seen within a few
 * jobs. A request the queue cannot serve before its deadline is answered 503 with a Retry-After of its lateness, from
 * CORE_SHED_MIN_RETRY_S to CORE_SHED_MAX_RETRY_S seconds.
 */
#define CORE_RUN_EWMA_WEIGHT 4
#define CORE_SHED_MIN_RETRY_S 1
#define CORE_SHED_MAX_RETRY_S 3600

/* The counters of counters.h, one member each; gauges are values of the moment, the rest count since the start. */
#define DISPATCHER_STATS_FIELD_(field, type, metric, labels, help) uint64_t field;
struct dispatcher_stats {
  DISPATCHER_COUNTERS(DISPATCHER_STATS_FIELD_)
};
#undef DISPATCHER_STATS_FIELD_

/* The shell's handle of one worker request, embedded in its own record; the core links it into a job's waiters. */
struct core_waiter {
  struct core_waiter *next;
  int internal; /* the shell's own request (a batch job's item, runner.h), not a worker's */
};

/* What the core asks the shell to do. ctx is passed back. The redis_* members are NULL without Redis. */
struct core_ops {
  void *ctx;
  /*
   * Answers every worker request of the list (linked by next; a request is answered once, and its record is the
   * shell's again) with res (its body borrowed for the call) and the cache lifetime left for it.
   */
  void (*answer)(void *ctx, struct core_waiter *waiters, const struct proto_result *res, uint64_t cache_ms);
  /* Hands job to a fetcher as the answer to its request token. Returns 0, or nonzero when it could not be sent. */
  int (*send_job)(void *ctx, uint64_t fetcher, void *token, const struct proto_job *job);
  /* Answers a fetcher's request token with READY: the acknowledgement of a decline or of a last result. */
  void (*send_ready)(void *ctx, uint64_t fetcher, void *token);
  /* A request token that will never be answered (its fetcher asked again, or is gone). */
  void (*drop_token)(void *ctx, void *token);
  /* Closes a fetcher's connection; its later messages are refused by the core. */
  void (*close_fetcher)(void *ctx, uint64_t fetcher);
  /* Redis: each answers later with the core_redis_* event of the same job_id. */
  void (*redis_get)(void *ctx, uint64_t job_id, const char *video_id, const char *key);
  void (*redis_claim)(void *ctx, uint64_t job_id, const char *video_id, const char *key, uint64_t ttl_ms);
  void (*redis_put)(void *ctx, const char *video_id, const char *key, const struct proto_result *res, uint64_t ttl_ms);
  void (*redis_release)(void *ctx, uint64_t job_id, const char *video_id, const char *key);
  /* Extends the job's claim to ttl_ms from now while it is still this gateway's (no answer). */
  void (*redis_renew)(void *ctx, uint64_t job_id, const char *video_id, const char *key, uint64_t ttl_ms);
};

struct core;

/* A core deciding by cfg's limits (job and speech timeouts, speech fallback and concurrency, cache, max fetchers). */
struct core *core_new(const struct vts_config *cfg, const struct core_ops *ops);
/* Frees everything: the tokens it holds go to ops->drop_token; the waiters are the shell's records to free. */
void core_free(struct core *c);

/* ---- events ---- */

/* A worker's decoded request (job_id 0), or NULL for one that did not decode: answered 500 at once. */
void core_request(struct core *c, uint64_t now, struct core_waiter *w, const struct proto_job *req);

/* A fetcher connected (its first sight: a connection beyond VTS_JOBS_MAX_FETCHERS is closed and refused). */
void core_fetcher_added(struct core *c, uint64_t now, uint64_t fetcher);
/* Its connection closed: its job fails (fetcher_lost). */
void core_fetcher_gone(struct core *c, uint64_t now, uint64_t fetcher);
/* A request from a fetcher: READY, DECLINE(job_id), RESULT or RESULT_LAST (res), or NULL for a malformed one. */
enum core_fetcher_msg {
  CORE_READY,
  CORE_DECLINE,        /* given back: the fetcher is busy */
  CORE_DECLINE_BUDGET, /* given back: every egress of the fetcher spent its budget (counted in the job's declines) */
  CORE_RESULT,
  CORE_RESULT_LAST,
  CORE_MALFORMED
};
void core_fetcher_msg(struct core *c, uint64_t now, uint64_t fetcher, void *token, enum core_fetcher_msg type,
                      uint64_t declined_job, const struct proto_result *res);

/* A Redis lookup's answer: 0 with hit (body borrowed) and its lifetime left, -ENOENT on a miss, -EIO on a fault. */
void core_redis_got(struct core *c, uint64_t now, uint64_t job_id, int status, const struct proto_result *hit,
                    uint64_t ttl_left_ms);
/* A claim's answer: 1 won, 0 held by another gateway, 2 the result is in Redis now, negative for a fault. */
void core_redis_claimed(struct core *c, uint64_t now, uint64_t job_id, int status);

/*
 * Sheds what passed its deadline or cannot be served before it (503, PROTO_OVERLOADED, with Retry-After: a queued job
 * whose expected end, from its place in line, the fetchers and the recent time a job takes, is past its deadline; the
 * jobs only batch items wait on yield first, behind every worker's request), asks Redis again for jobs waiting on a
 * claim, and hands queued jobs to idle fetchers. A cached answer or a request joining a job that runs is never shed.
 * Returns the time of the next deadline or poll (now + idle_ms at the latest). Call after every batch of events.
 */
uint64_t core_tick(struct core *c, uint64_t now, uint64_t idle_ms);

/* The counters, gauges brought up to date. */
void core_stats(struct core *c, struct dispatcher_stats *out);

#endif
