/*
 * Window and month arithmetic shared by the rate-limit providers: pure functions of the wall-clock second, so tests
 * can move the clock. Months are counted without gmtime, from the proleptic Gregorian calendar in UTC.
 */
#ifndef VTS_RATELIMIT_CALC_H
#define VTS_RATELIMIT_CALC_H

#include <stdint.h>

#include "common/config.h"
#include "gateway/keys/keys.h"
#include "gateway/limits/ratelimit.h"

/* The limits that apply to one key: its own where set, else the service defaults. */
struct rl_limits {
  int64_t rate;     /* requests per window */
  int64_t window_s; /* window length */
  int64_t quota;    /* admitted requests per calendar month */
  int window_only;  /* 1: this request takes a window slot but no quota unit (RL_CHECK_WINDOW_ONLY) */
};

/* Fills out from key's overrides and cfg's defaults (a 0 in the key entry means the default). */
void rlcalc_limits(const struct key_entry *key, const struct vts_config *cfg, struct rl_limits *out);
/* Index of the window holding second now: now / window_s. */
int64_t rlcalc_window_index(int64_t now, int64_t window_s);
/* End of the window holding second now: (index + 1) * window_s. */
int64_t rlcalc_window_reset(int64_t now, int64_t window_s);
/* Whole seconds from now to reset, at least 1. */
int64_t rlcalc_retry_after(int64_t now, int64_t reset);
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
