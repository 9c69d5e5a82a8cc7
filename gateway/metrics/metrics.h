/*
 * Prometheus metrics of the gateway: one shared-memory region created by the master before fork, in which every
 * process (each worker, the dispatcher, the master) owns one slot and is its only writer. /metrics sums the slots,
 * so any worker can answer it and the numbers are those of the whole gateway.
 */
#ifndef VTS_METRICS_H
#define VTS_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "common/buf.h"

#define METRICS_MAX_WORKERS 256
#define METRICS_NBUCKETS 14      /* latency buckets, the last is +Inf */
#define METRICS_TURN_NBUCKETS 11 /* loop-turn buckets, the last is +Inf */

/*
 * The families whose rows belong to a floor above (the HTTP floor's routes and statuses, the dispatcher's counters)
 * are registered by their owners, as nng's statistics are, so the metrics include no table of a module that records
 * into them. The master registers both before fork and every process inherits them; before a registration the
 * family has no rows. The shared region keeps room for as many rows as these limits (each owner asserts it fits).
 */
#define METRICS_MAX_ROUTES 16
#define METRICS_MAX_STATUSES 32 /* statuses counted apart; one more column counts any other status */
#define METRICS_MAX_COUNTERS 64

/* vts_http_requests_total and the latency histogram: the routes (by index) and the statuses counted apart. */
struct metrics_http_family {
  int nroutes;
  const char *(*route_label)(int route); /* the route label of a route */
  int nstatus;
  int (*status_index)(int status); /* the column of status, nstatus for a status not counted apart */
  int (*status_code)(int i);       /* the status of column i < nstatus */
};

/* One counter of the dispatcher: its metric name (NULL: kept for the dispatcher's own logs), TYPE, labels, HELP. */
struct metrics_counter {
  const char *metric, *type, *labels, *help;
};

/* The dispatcher's counters, one slot each in the order of rows, and the slot of the fetchers connected (/ready). */
struct metrics_counter_family {
  int ncounters;
  const struct metrics_counter *rows;
  int fetchers_connected;
};

/* Registers the HTTP floor's family (f stays valid for the life of the process). */
void metrics_register_http(const struct metrics_http_family *f);
/* Registers the dispatcher's counters (f stays valid for the life of the process). */
void metrics_register_counters(const struct metrics_counter_family *f);

/*
 * The kinds vts_upstream_outcomes_total counts a finished job under, X(id, label): MU_<id>. A job's outcome row in
 * proto.h names its kind, or lets its reason's row name it (BY_REASON).
 */
#define METRICS_UPSTREAM_KINDS(X)                   \
  X(OK, "ok")                                       \
  X(NO_CAPTIONS, "no_captions")                     \
  X(NOT_AVAILABLE, "not_available")                 \
  X(HTTP_429, "http_429")                           \
  X(RECAPTCHA, "recaptcha")                         \
  X(BOT_CHECK, "bot_check")                         \
  X(HTTP_5XX, "http_5xx")                           \
  X(TIMEOUT, "timeout")                             \
  X(CONSENT, "consent")                             \
  X(PO_TOKEN, "po_token")                           \
  X(MALFORMED, "malformed")                         \
  X(INTERNAL, "internal")                           \
  X(OTHER, "other")                                 \
  X(NETWORK, "network")                             \
  X(EGRESS_BUDGET, "egress_budget")                 \
  X(RATIONED, "rationed")                           \
  X(CLIENT_OUTDATED, "client_outdated")             \
  X(WRONG_VIDEO, "wrong_video")                     \
  X(TRANSLATION_THROTTLED, "translation_throttled") \
  X(AGE_RESTRICTED, "age_restricted")               \
  X(MEMBERS_ONLY, "members_only")                   \
  X(PRIVATE, "private")                             \
  X(REMOVED, "removed")                             \
  X(LIVE_NOT_ARCHIVED, "live_not_archived")         \
  X(GEO_RESTRICTED, "geo_restricted")

#define METRICS_UPSTREAM_ENUM_(id, label) MU_##id,
enum metrics_upstream { METRICS_UPSTREAM_KINDS(METRICS_UPSTREAM_ENUM_) MU__COUNT };
#undef METRICS_UPSTREAM_ENUM_

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

/*
 * The budgets of the fetchers' egresses (VTS_EGRESS_RATE), by position (0 the direct route, n proxy n), as fetchers
 * report them in their results: the units left (the latest report of any fetcher), and waits and declines summed.
 */
struct metrics_egress {
  _Atomic int reported[METRICS_MAX_PROXIES]; /* a fetcher reported this egress: it is listed */
  _Atomic int64_t left[METRICS_MAX_PROXIES];
  _Atomic uint64_t waits[METRICS_MAX_PROXIES];
  _Atomic uint64_t declines[METRICS_MAX_PROXIES];
};

struct metrics_worker {
  _Atomic uint64_t requests[METRICS_MAX_ROUTES][METRICS_MAX_STATUSES + 1];
  _Atomic uint64_t latency_bucket[METRICS_MAX_ROUTES][METRICS_NBUCKETS];
  _Atomic uint64_t latency_sum_us[METRICS_MAX_ROUTES];
  _Atomic uint64_t loop_turn_bucket[METRICS_TURN_NBUCKETS];
  _Atomic uint64_t loop_turn_sum_us;
  _Atomic uint64_t l1_cache_hits;
  _Atomic uint64_t l1_cache_waits;
  _Atomic uint64_t l1_cache_refreshes;
  _Atomic uint64_t l1_cache_drops;
  _Atomic uint64_t ratelimit_store_errors;
  _Atomic uint64_t ratelimit_fallbacks;
  _Atomic uint64_t quota_refunds;
  _Atomic int64_t keys_loaded_s; /* unix second of this worker's last successful key file load, 0 before one */
  _Atomic int64_t connections_open;
};

/* Written by the dispatcher alone: its registered counters as it last published them, and what fetchers report. */
struct metrics_dispatcher {
  _Atomic uint64_t counters[METRICS_MAX_COUNTERS];
  _Atomic uint64_t upstream[MU__COUNT];
  struct metrics_attempts attempts;
  struct metrics_egress egress;
  _Atomic uint64_t pot_failures; /* PO-token provider requests that gave no token, as fetchers report them */
  _Atomic uint32_t sandbox;      /* the latest result's sandbox layers, with METRICS_SANDBOX_REPORTED once one came */
  _Atomic uint64_t loop_turn_bucket[METRICS_TURN_NBUCKETS]; /* its loop's turns by length, as the workers' */
  _Atomic uint64_t loop_turn_sum_us;
  _Atomic uint64_t loop_turn_own_bucket[METRICS_TURN_NBUCKETS]; /* the same less their waits for a core */
  _Atomic uint64_t loop_turn_own_sum_us;
};
#define METRICS_SANDBOX_REPORTED (1u << 31)

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

/* Worker: one answered request of route (a registered route's index) with status, taking dur_us. */
void metrics_request(int route, int status, uint64_t dur_us);
/* Worker: connection opened (+1) or closed (-1). */
void metrics_connections(int delta);
/* Master: the worker of slot index is gone; its gauges (connections open, keys loaded) read as nothing now. */
void metrics_worker_gone(int index);
/* Worker: rate-limit store error, and whether the memory limiter took over. */
void metrics_ratelimit_store_error(int fell_back);
/* Worker: a reserved unit of a key's monthly quota was given back (the answer was not a 200 with a transcript). */
void metrics_quota_refund(void);
/* Worker: the key file was loaded at unix second now_s (vts_keys_loaded_timestamp_seconds is the oldest load). */
void metrics_keys_loaded(int64_t now_s);
/* Any process: a key file load failed and the keys in service stayed as they were. */
void metrics_keys_reload_failed(void);
/* Fetchers connected to the gateway's dispatcher, as it last published them (0 before it did; -1 without the region).
 */
int64_t metrics_fetchers_connected(void);
/* Worker: a transcript served from the worker's own cache. */
void metrics_l1_hit(void);
/* Worker: a transcript request that waited for the same answer it had already asked the dispatcher for. */
void metrics_l1_wait(void);
/* A worker sent the dispatcher a refresh of a hot transcript in its L1 (vts_cache_l1_refreshes_total). */
void metrics_l1_refresh(void);
/* A refresh neither renewed nor replaced its copy, which the worker dropped (vts_cache_l1_drops_total). */
void metrics_l1_drop(void);
/* A loop's previous turn end, for metrics_turn_end; zeroed before the first. */
struct metrics_turn {
  uint64_t end_ns;  /* the clock then (uv_hrtime) */
  uint64_t idle_ns; /* the loop's idle time then (UV_METRICS_IDLE_TIME, which the loop must be configured with) */
};
/*
 * The end of a turn of loop, called before the loop waits (a prepare handle's callback): sets *busy_ns to the turn's
 * length, from the previous end less the time the loop waited for events in between, which is the stall a request
 * arriving meanwhile sees. Returns false at the first end, which has no turn before it.
 */
bool metrics_turn_end(struct metrics_turn *t, uv_loop_t *loop, uint64_t *busy_ns);
/*
 * Whether a turn of busy_us falls in the loop-turn histograms' first bucket, where no shorter own time could move it:
 * such a turn needs no measure of its waits for a core.
 */
bool metrics_turn_unresolved(uint64_t busy_us);
/* This worker's loop turn took busy_us of work (or of being kept off the CPU) between two waits for events. */
void metrics_loop_turn(uint64_t busy_us);
/*
 * Dispatcher: its loop's turn took busy_us between two waits for events (as a worker's, any time it was kept off the
 * CPU included), own_us of it not counting the time its thread waited for a core (its work and the calls it blocked
 * in).
 */
void metrics_dispatcher_loop_turn(uint64_t busy_us, uint64_t own_us);

struct proto_result;
/*
 * Dispatcher: a finished job by its outcome and typed reason (vts_upstream_outcomes_total), and the player attempts
 * its result lists (vts_upstream_proxy_*_total, vts_upstream_client_*_total).
 */
void metrics_upstream(const struct proto_result *res);

/* Renders every metric in the Prometheus text format (version 0.0.4) into out. Returns 0 or -ENOMEM. */
int metrics_render(struct buf *out);

#endif
