/*
 * What a rate-limit check decides and what a limiter counts, and the window and month arithmetic shared by the
 * providers: pure functions of the wall-clock second, so tests can move the clock. Months are counted without gmtime,
 * from the proleptic Gregorian calendar in UTC. The providers (ratelimit_memory, ratelimit_redis) build on this header,
 * never on ratelimit.h, which builds on them.
 */
#ifndef VTS_RATELIMIT_CALC_H
#define VTS_RATELIMIT_CALC_H

#include <stdint.h>

#include "common/config.h"
#include "gateway/keys/keys.h"

/* What a check decides, whichever provider decides it (the headers and the answer ratelimit.h describes). */
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
  /* Where the month's unit of an RL_ALLOW was reserved, for ratelimit_refund; RL_STORE_NONE on other outcomes. */
  enum rl_store {
    RL_STORE_NONE = 0,
    RL_STORE_MEMORY,   /* the memory backend's check */
    RL_STORE_REDIS,    /* the Redis backend's check, answered by Redis */
    RL_STORE_FALLBACK, /* the Redis backend's check, decided by its fail-open fallback */
    RL_STORE_TABLE     /* a batch item's unit, taken from the shared table outside any check (ratelimit_charge_month) */
  } reserved_in;
  int64_t reserved_month; /* month index (rlcalc_month_index) of the reserved unit */
  char digest[65];        /* the key's digest, set with reserved_in */
};

/* What taking one unit of a key's month outside any check did (ratelimit_charge_month, rlmem_charge_month). */
enum rl_charge {
  RL_CHARGE_TAKEN,        /* the unit is taken */
  RL_CHARGE_QUOTA_USED_UP /* the key's month is used up: nothing taken */
};

/* Called exactly once per check, on the worker's loop thread, maybe before the check returns. */
typedef void (*rl_cb)(void *arg, const struct rl_decision *d);

/* Records where an admitted request's month unit was reserved (in, month, the key's digest), for its refund. */
void rlcalc_reserved(struct rl_decision *d, enum rl_store in, const char *digest, int64_t month);

/* Room for the header lines rlcalc_headers writes. */
#define RLCALC_HEADERS_BYTES 192

/*
 * Writes the header lines a decision sends with every answer of its request ("X-RateLimit-Limit: N\r\n" ... and
 * Retry-After for RL_LIMITED and RL_UNAVAILABLE) into out, NUL-terminated; cap RLCALC_HEADERS_BYTES always fits.
 */
void rlcalc_headers(const struct rl_decision *d, char *out, size_t cap);

/* Counters of one worker's limiter, for metrics. */
struct ratelimit_stats {
  uint64_t checks;         /* ratelimit_check calls */
  uint64_t allowed;        /* RL_ALLOW */
  uint64_t limited;        /* RL_LIMITED */
  uint64_t quota_exceeded; /* RL_QUOTA */
  uint64_t unavailable;    /* RL_UNAVAILABLE */
  uint64_t fallbacks;      /* decided by the memory limiter because Redis could not answer (fail-open) */
  uint64_t table_full;     /* refused because the shared table had no slot left for a new key */
  uint64_t refunds;        /* quota units given back (ratelimit_refund) */
  uint64_t redis_timeouts; /* commands unanswered within VTS_REDIS_COMMAND_TIMEOUT_MS */
  uint64_t redis_errors;   /* error or malformed replies, lost connections under a command */
  uint64_t redis_noscript; /* EVALSHA answered NOSCRIPT and was retried with EVAL */
  uint64_t redis_connects; /* connections set up (first one included) */
  uint64_t redis_leased;   /* admitted from a lease of units Redis reserved earlier, without a round trip */
};

/* Counts decision d in its outcome's counter of s. */
void rlcalc_count(struct ratelimit_stats *s, const struct rl_decision *d);

/* The limits that apply to one key: its own where set, else the service defaults. */
struct rl_limits {
  int64_t rate;     /* requests per window */
  int64_t window_s; /* window length */
  int64_t quota;    /* admitted requests per calendar month */
};

/*
 * What this gateway's fail-open fallback counted for a key while Redis could not, in the current window and month,
 * for Redis to add when it answers again; -1 where there is nothing to say (no fallback in that period, or Redis
 * already holds these counts). seq numbers the counts: it grows with every change of them, so Redis can tell an
 * older statement arriving late from a newer one (0 with nothing to say).
 */
struct rl_owed {
  int64_t window;
  int64_t quota;
  uint64_t seq;
};

/* Fills out from key's overrides and cfg's defaults (a 0 in the key entry means the default). */
void rlcalc_limits(const struct key_entry *key, const struct vts_config *cfg, struct rl_limits *out);
/* Index of the window holding second now: now / window_s. */
int64_t rlcalc_window_index(int64_t now, int64_t window_s);
/* End of the window holding second now: (index + 1) * window_s. */
int64_t rlcalc_window_reset(int64_t now, int64_t window_s);
/* Months since January 1970 of the UTC calendar date of second now (January 1970 is 0). */
int64_t rlcalc_month_index(int64_t now);
/* Unix second of 00:00 UTC on the 1st of month (as counted by rlcalc_month_index). */
int64_t rlcalc_month_start(int64_t month);
/* The month as the number YYYYMM (202601 for January 2026), for names an operator reads. */
int64_t rlcalc_month_yyyymm(int64_t month);
/*
 * Fills d for outcome at second now, from the window's admitted count and the month's used count after the
 * decision (see ratelimit.h for what each field means on each outcome).
 */
void rlcalc_decision(struct rl_decision *d, enum rl_outcome outcome, const struct rl_limits *lim, int64_t now,
                     int64_t window_used, int64_t quota_used);

#endif
