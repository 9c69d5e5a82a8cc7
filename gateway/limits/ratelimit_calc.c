#include "gateway/limits/ratelimit_calc.h"

#include "common/limits.h"
#include "common/util.h"

#define SECONDS_PER_DAY 86400
#define DAYS_PER_ERA 146097 /* 400 Gregorian years */

void rlcalc_limits(const struct key_entry *key, const struct vts_config *cfg, struct rl_limits *out) {
  out->rate = key->rate > 0 ? key->rate : cfg->rate_limit;
  out->window_s = key->window_s > 0 ? key->window_s : cfg->rate_window_s;
  out->quota = key->quota > 0 ? key->quota : cfg->monthly_quota;
}

/* Floor division: a clock before 1970 must not round toward zero into the wrong window or month. */
static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}

int64_t rlcalc_window_index(int64_t now, int64_t window_s) { return floor_div(now, window_s); }

int64_t rlcalc_window_reset(int64_t now, int64_t window_s) {
  return (rlcalc_window_index(now, window_s) + 1) * window_s;
}

/* Whole seconds from now to reset, at least 1. */
static int64_t retry_after(int64_t now, int64_t reset) { return reset - now >= 1 ? reset - now : 1; }

/*
 * Days since 1970-01-01 of a civil date. The calendar repeats every 400 years (an era); counting years from March
 * puts the leap day at the end of the year, so the day of the year follows from the month by one linear formula.
 */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  if (m <= 2) y--;
  int64_t era = floor_div(y, 400);
  int64_t yoe = y - era * 400;                                   /* [0, 399] */
  int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* [0, 365] from March 1st */
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           /* [0, 146096] */
  return era * DAYS_PER_ERA + doe - 719468;                      /* 719468: days from 0000-03-01 to 1970-01-01 */
}

/* The inverse of days_from_civil, for year and month only. */
static void civil_from_days(int64_t z, int64_t *y, int64_t *m) {
  z += 719468;
  int64_t era = floor_div(z, DAYS_PER_ERA);
  int64_t doe = z - era * DAYS_PER_ERA;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153; /* month from March, [0, 11] */
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = yoe + era * 400 + (*m <= 2 ? 1 : 0);
}

int64_t rlcalc_month_start(int64_t month) {
  int64_t y = 1970 + floor_div(month, 12);
  int64_t m = month - floor_div(month, 12) * 12 + 1;
  return days_from_civil(y, m, 1) * SECONDS_PER_DAY;
}

int64_t rlcalc_month_index(int64_t now) {
  /* A check asks several times a request, and nearly always within the month asked last: that month's seconds are
   * kept (per thread) and the calendar is worked out again only outside them. */
  static _Thread_local int64_t first = 1, end = 0, index = 0;
  if (now >= first && now < end) return index;
  int64_t y, m;
  civil_from_days(floor_div(now, SECONDS_PER_DAY), &y, &m);
  int64_t month = (y - 1970) * 12 + (m - 1);
  first = rlcalc_month_start(month);
  end = rlcalc_month_start(month + 1);
  index = month;
  return month;
}

int64_t rlcalc_month_yyyymm(int64_t month) {
  return (1970 + floor_div(month, 12)) * 100 + (month - floor_div(month, 12) * 12 + 1);
}

static int64_t min_nonneg(int64_t a, int64_t b) {
  int64_t v = a < b ? a : b;
  return v > 0 ? v : 0;
}

void rlcalc_decision(struct rl_decision *d, enum rl_outcome outcome, const struct rl_limits *lim, int64_t now,
                     int64_t window_used, int64_t quota_used) {
  d->outcome = outcome;
  d->reserved_in = RL_STORE_NONE;
  d->reserved_month = 0;
  d->digest[0] = '\0';
  d->limit = lim->rate;
  d->reset = rlcalc_window_reset(now, lim->window_s);
  d->quota_limit = lim->quota;
  d->quota_reset = rlcalc_month_start(rlcalc_month_index(now) + 1);
  if (outcome == RL_UNAVAILABLE) {
    /* Nothing is known about the counts: promise nothing. */
    d->remaining = 0;
    d->quota_remaining = 0;
    d->retry_after = VTS_RATELIMIT_UNAVAILABLE_RETRY_S;
    return;
  }
  d->quota_remaining = min_nonneg(lim->quota - quota_used, lim->quota);
  d->remaining = min_nonneg(lim->rate - window_used, lim->rate);
  d->retry_after = outcome == RL_LIMITED ? retry_after(now, d->reset) : 0;
}

void rlcalc_headers(const struct rl_decision *d, char *out, size_t cap) {
  struct strb b = strb_init(out, cap);
  strb_puts(&b, "X-RateLimit-Limit: ");
  strb_u64(&b, d->limit > 0 ? (uint64_t)d->limit : 0);
  strb_puts(&b, "\r\nX-RateLimit-Remaining: ");
  strb_u64(&b, d->remaining > 0 ? (uint64_t)d->remaining : 0);
  strb_puts(&b, "\r\nX-RateLimit-Reset: ");
  strb_u64(&b, d->reset > 0 ? (uint64_t)d->reset : 0);
  strb_puts(&b, "\r\n");
  if (d->outcome == RL_LIMITED || d->outcome == RL_UNAVAILABLE) {
    strb_puts(&b, "Retry-After: ");
    strb_u64(&b, d->retry_after >= 1 ? (uint64_t)d->retry_after : 1);
    strb_puts(&b, "\r\n");
  }
}

void rlcalc_reserved(struct rl_decision *d, enum rl_store in, const char *digest, int64_t month) {
  d->reserved_in = in;
  d->reserved_month = month;
  util_copy_str(d->digest, sizeof(d->digest), digest);
}

void rlcalc_count(struct ratelimit_stats *s, const struct rl_decision *d) {
  switch (d->outcome) {
    case RL_ALLOW:
      s->allowed++;
      break;
    case RL_LIMITED:
      s->limited++;
      break;
    case RL_QUOTA:
      s->quota_exceeded++;
      break;
    case RL_UNAVAILABLE:
      s->unavailable++;
      break;
  }
}
