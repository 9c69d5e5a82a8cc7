/*
 * Prometheus metrics of the gateway: one shared-memory region created by the master before fork, in which every
 * process (each worker, the dispatcher, the master) owns one slot and is its only writer. /metrics sums the slots,
 * so any worker can answer it and the numbers are those of the whole gateway.
 */
#ifndef VTS_METRICS_H
#define VTS_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/buf.h"

#define METRICS_MAX_WORKERS 256

enum metrics_route { MR_HEALTH = 0, MR_OPENAPI, MR_TRANSCRIPT, MR_METRICS, MR_TRACKS, MR_OTHER, MR__COUNT };

/* Statuses the gateway answers; anything else is counted as "other". */
#define METRICS_STATUSES \
  { 200, 400, 401, 404, 405, 408, 413, 414, 429, 431, 500, 502, 503 }
#define METRICS_NSTATUS 14  /* the list above plus "other" */
#define METRICS_NBUCKETS 14 /* latency buckets, the last is +Inf */

/* Upstream outcomes reported by fetchers, by kind (the result's outcome and typed reason, mapped to a fixed set). */
enum metrics_upstream {
  MU_OK = 0,
  MU_NO_CAPTIONS,
  MU_NOT_AVAILABLE,
  MU_HTTP_429,
  MU_RECAPTCHA,
  MU_BOT_CHECK,
  MU_HTTP_5XX,
  MU_TIMEOUT,
  MU_CONSENT,
  MU_PO_TOKEN,
  MU_MALFORMED,
  MU_INTERNAL,
  MU_OTHER,
  MU_NETWORK,
  MU_RATIONED,
  MU_CLIENT_OUTDATED,
  MU_WRONG_VIDEO,
  MU_TRANSLATION_THROTTLED,
  MU__COUNT
};

/* Player attempts reported by fetchers in their results, per proxy (by index) and per client profile name. */
#define METRICS_MAX_PROXIES 17 /* index 0 is "no proxy", then VTS_UPSTREAM_PROXY entries 1..16 */
#define METRICS_MAX_CLIENTS 16 /* distinct client names counted; later ones go under "other" */
enum metrics_attempt { MA_ATTEMPTS = 0, MA_BLOCKS, MA_SUCCESSES, MA__COUNT };

struct metrics_attempts {
  _Atomic uint64_t proxy[METRICS_MAX_PROXIES][MA__COUNT];
  _Atomic uint64_t client[METRICS_MAX_CLIENTS + 1][MA__COUNT]; /* the last row is "other" */
  char client_names[METRICS_MAX_CLIENTS][32];                  /* written once by the dispatcher, then read */
  _Atomic int nclients;                                        /* names published (release after the name) */
};

struct metrics_worker {
  _Atomic uint64_t requests[MR__COUNT][METRICS_NSTATUS];
  _Atomic uint64_t latency_bucket[MR__COUNT][METRICS_NBUCKETS];
  _Atomic uint64_t latency_sum_us[MR__COUNT];
  _Atomic uint64_t l1_cache_hits;
  _Atomic uint64_t ratelimit_store_errors;
  _Atomic uint64_t ratelimit_fallbacks;
  _Atomic uint64_t quota_refunds;
  _Atomic int64_t keys_loaded_s; /* unix second of this worker's last successful key file load, 0 before one */
  _Atomic int64_t connections_open;
};

struct metrics_dispatcher {
  _Atomic uint64_t cache_hits;
  _Atomic uint64_t cache_misses;
  _Atomic uint64_t coalesced;
  _Atomic uint64_t jobs_total[3]; /* by kind: 1 captions, 2 speech */
  _Atomic int64_t jobs_queued;
  _Atomic int64_t jobs_in_flight;
  _Atomic int64_t speech_in_flight;
  _Atomic int64_t fetchers_connected;
  _Atomic int64_t fetchers_idle;
  _Atomic uint64_t fetchers_lost_with_job;
  _Atomic uint64_t job_deadline_expired;
  _Atomic uint64_t jobs_declined;    /* given back unrun by a busy fetcher */
  _Atomic uint64_t results_refused;  /* OK results whose body was not what the job asked for */
  _Atomic uint64_t fetchers_refused; /* connections closed at once: VTS_JOBS_MAX_FETCHERS reached */
  _Atomic uint64_t rejected_full;    /* requests refused: VTS_DISPATCH_MAX_JOBS jobs pending */
  _Atomic uint64_t protocol_errors;  /* malformed or out-of-order link messages */
  _Atomic uint64_t redis_hits;       /* jobs answered from the Redis cache */
  _Atomic uint64_t claims_won;       /* jobs fetched here for every gateway */
  _Atomic uint64_t claims_waited;    /* jobs that waited on another gateway's claim */
  _Atomic uint64_t claim_takeovers;  /* of those, fetched here because the claimant went away */
  _Atomic int64_t jobs_waiting;      /* gauge: jobs asking Redis or waiting on a claim */
  _Atomic uint64_t upstream[MU__COUNT];
  struct metrics_attempts attempts;
  _Atomic int64_t cache_bytes;
  _Atomic int64_t cache_entries;
};

struct metrics_master {
  _Atomic uint64_t worker_restarts;
  _Atomic uint64_t dispatcher_restarts;
  _Atomic uint64_t keys_reload_failures; /* by any process: the master and every worker load on their own */
};

struct metrics_shm {
  struct metrics_master master;
  struct metrics_dispatcher dispatcher;
  struct metrics_worker workers[METRICS_MAX_WORKERS];
};

/* Master, before fork: maps the shared region. Returns 0 or -errno. */
int metrics_init(void);
/* The shared region (NULL before metrics_init: every recording function is then a no-op). */
struct metrics_shm *metrics_shared(void);
/* Selects the slot of this worker process (0-based), after fork. */
void metrics_set_worker(int index);

/* The route of a request path (len bytes, no query). */
enum metrics_route metrics_route_of(const char *path, size_t len);
/* Worker: one answered request of route with status, taking dur_us. */
void metrics_request(enum metrics_route route, int status, uint64_t dur_us);
/* Worker: connection opened (+1) or closed (-1). */
void metrics_connections(int delta);
/* Worker: rate-limit store error, and whether the memory limiter took over. */
void metrics_ratelimit_store_error(int fell_back);
/* Worker: a reserved unit of a key's monthly quota was given back (the answer was not a 200 with a transcript). */
void metrics_quota_refund(void);
/* Worker: the key file was loaded at unix second now_s (vts_keys_loaded_timestamp_seconds is the oldest load). */
void metrics_keys_loaded(int64_t now_s);
/* Any process: a key file load failed and the keys in service stayed as they were. */
void metrics_keys_reload_failed(void);
/* Worker: a transcript served from the worker's own cache. */
void metrics_l1_hit(void);

struct proto_result;
/*
 * Dispatcher: a finished job by its outcome and typed reason (vts_upstream_outcomes_total), and the player attempts
 * its result lists (vts_upstream_proxy_*_total, vts_upstream_client_*_total).
 */
void metrics_upstream(const struct proto_result *res);
/* The kind a job's outcome (enum proto_outcome) and reason (enum proto_reason) are counted under. */
int metrics_upstream_kind(int outcome, int reason);

/* Renders every metric in the Prometheus text format (version 0.0.4) into out. Returns 0 or -ENOMEM. */
int metrics_render(struct buf *out);

#endif
