/* Rate limit and quota: window and month arithmetic, the shared-memory table, snapshots, the public API. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/limits.h"
#include "common/util.h"
#include "gateway/limits/ratelimit.h"
#include "gateway/limits/ratelimit_calc.h"
#include "gateway/limits/ratelimit_memory.h"
#include "gateway/limits/ratelimit_redis.h"
#include "tests/unit/test_ratelimit_util.h"

#define T_2025_12_31_235959 INT64_C(1767225599)
#define T_2026_01_01 INT64_C(1767225600)
#define T_2024_02_01 INT64_C(1706745600)
#define T_2024_02_29_1200 INT64_C(1709208000)
#define T_2024_03_01 INT64_C(1709251200)
#define T_2100_02_28_235959 INT64_C(4107542399)
#define T_2100_03_01 INT64_C(4107542400)
#define T_2026_01_31_235959 INT64_C(1769903999)
#define T_2026_02_01 INT64_C(1769904000)
#define T_2026_03_01 INT64_C(1772323200)

static const char digest_a[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
static const char digest_b[] = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

static struct rl_limits limits(int64_t rate, int64_t window_s, int64_t quota) {
  struct rl_limits l = {rate, window_s, quota};
  return l;
}

/* A fresh 64-slot table for one test. */
static int table_setup(void **state) {
  *state = rlmem_create(64);
  return *state != NULL ? 0 : -1;
}

static int table_teardown(void **state) {
  rlmem_destroy(*state);
  return 0;
}

/* A fresh directory under /tmp for one test. */
static void make_tmpdir(char *out, size_t len) {
  snprintf(out, len, "/tmp/vts-rl-test-XXXXXX");
  assert_non_null(mkdtemp(out));
}

static void remove_tree(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/*
 * The key's admitted count of the month of second now as the table keeps it: what a snapshot taken at now writes for
 * it (a line "tag month used", the tag the digest's first 16 hex digits), 0 when it writes none.
 */
static int64_t quota_used(struct rlmem_table *t, const char *digest, int64_t now) {
  char dir[64], path[128], line[128];
  make_tmpdir(dir, sizeof(dir));
  assert_int_equal(rlmem_snapshot_write(t, dir, now), 0);
  snprintf(path, sizeof(path), "%s/%s", dir, RLMEM_SNAPSHOT_FILE);
  FILE *fp = fopen(path, "r");
  assert_non_null(fp);
  long long used = 0;
  while (fgets(line, sizeof(line), fp) != NULL) {
    char tag[17];
    long long month, n;
    if (sscanf(line, "%16s %lld %lld", tag, &month, &n) == 3 && strncmp(tag, digest, 16) == 0 &&
        month == rlcalc_month_index(now))
      used = n;
  }
  fclose(fp);
  remove_tree(dir);
  return used;
}

static void test_window_is_aligned_to_multiples_of_its_length(void **state) {
  (void)state;
  assert_int_equal(rlcalc_window_index(1000, 60), 16);
  assert_int_equal(rlcalc_window_reset(1000, 60), 1020);
  assert_int_equal(rlcalc_window_reset(1019, 60), 1020);
  assert_int_equal(rlcalc_window_reset(1020, 60), 1080);
  assert_int_equal(rlcalc_window_reset(960, 60), 1020);
  assert_int_equal(rlcalc_window_reset(T_2026_01_01 + 1, 1), T_2026_01_01 + 2);
  assert_int_equal(rlcalc_window_reset(T_2026_01_01, 86400), T_2026_01_01 + 86400);
}

/* A refusal's Retry-After: the whole seconds to the end of its window, at least 1; only a refusal has one. */
static void test_retry_after_is_whole_seconds_to_reset_at_least_one(void **state) {
  (void)state;
  const struct rl_limits lim = {.rate = 5, .window_s = 60, .quota = 100};
  struct rl_decision d;
  rlcalc_decision(&d, RL_LIMITED, &lim, 960, 5, 10);
  assert_int_equal(d.reset, 1020);
  assert_int_equal(d.retry_after, 60);
  rlcalc_decision(&d, RL_LIMITED, &lim, 1019, 5, 10);
  assert_int_equal(d.retry_after, 1);
  rlcalc_decision(&d, RL_LIMITED, &lim, 1020, 5, 10);
  assert_int_equal(d.reset, 1080);
  assert_int_equal(d.retry_after, 60);
  rlcalc_decision(&d, RL_ALLOW, &lim, 1019, 3, 10);
  assert_int_equal(d.retry_after, 0);
}

static void test_month_rolls_from_december_to_january(void **state) {
  (void)state;
  int64_t dec = rlcalc_month_index(T_2025_12_31_235959);
  assert_int_equal(dec, (2025 - 1970) * 12 + 11);
  assert_int_equal(rlcalc_month_index(T_2026_01_01), dec + 1);
  assert_int_equal(rlcalc_month_start(dec + 1), T_2026_01_01);
  assert_int_equal(rlcalc_month_yyyymm(dec), 202512);
  assert_int_equal(rlcalc_month_yyyymm(dec + 1), 202601);
}

static void test_february_of_a_leap_year_has_29_days(void **state) {
  (void)state;
  int64_t feb = rlcalc_month_index(T_2024_02_29_1200);
  assert_int_equal(feb, (2024 - 1970) * 12 + 1);
  assert_int_equal(rlcalc_month_start(feb), T_2024_02_01);
  assert_int_equal(rlcalc_month_start(feb + 1), T_2024_03_01);
  assert_int_equal(rlcalc_month_index(T_2024_03_01 - 1), feb);
  /* 2100 is not a leap year (divisible by 100, not by 400). */
  assert_int_equal(rlcalc_month_index(T_2100_02_28_235959) + 1, rlcalc_month_index(T_2100_03_01));
  assert_int_equal(rlcalc_month_start(rlcalc_month_index(T_2100_03_01)), T_2100_03_01);
}

/* Every day from 1970 to 2199 against the C library's calendar. */
static void test_month_index_matches_the_utc_calendar_every_day(void **state) {
  (void)state;
  for (int64_t t = 0; t < INT64_C(7258118400); t += 86400) {
    time_t tt = (time_t)(t + 43200);
    struct tm tm;
    assert_non_null(gmtime_r(&tt, &tm));
    int64_t want = (int64_t)(tm.tm_year - 70) * 12 + tm.tm_mon;
    int64_t got = rlcalc_month_index(t + 43200);
    if (got != want)
      fail_msg("day %lld: month index %lld, calendar says %lld", (long long)t, (long long)got, (long long)want);
    if (tm.tm_mday == 1 && rlcalc_month_start(want) != t)
      fail_msg("month %lld starts at %lld", (long long)want, (long long)t);
  }
  /* The month asked last is remembered: its edges, asked right after a second inside it, and a step back. */
  for (int64_t m = (2024 - 1970) * 12; m < (2027 - 1970) * 12; m++) {
    int64_t start = rlcalc_month_start(m), end = rlcalc_month_start(m + 1);
    assert_int_equal(rlcalc_month_index(start + 1000), m);
    assert_int_equal(rlcalc_month_index(start - 1), m - 1);
    assert_int_equal(rlcalc_month_index(start), m);
    assert_int_equal(rlcalc_month_index(end - 1), m);
    assert_int_equal(rlcalc_month_index(end), m + 1);
    assert_int_equal(rlcalc_month_index(end - 1), m);
  }
}

static void test_key_overrides_replace_defaults_and_zero_means_default(void **state) {
  (void)state;
  struct vts_config cfg = {.rate_limit = 60, .rate_window_s = 60, .monthly_quota = 10000};
  struct key_entry key = {.rate = 5, .window_s = 0, .quota = 7};
  struct rl_limits l;
  rlcalc_limits(&key, &cfg, &l);
  assert_int_equal(l.rate, 5);
  assert_int_equal(l.window_s, 60);
  assert_int_equal(l.quota, 7);
  struct key_entry plain = {0};
  rlcalc_limits(&plain, &cfg, &l);
  assert_int_equal(l.rate, 60);
  assert_int_equal(l.window_s, 60);
  assert_int_equal(l.quota, 10000);
}

static void test_memory_admits_exactly_limit_then_limits_until_reset(void **state) {
  struct rlmem_table *t = *state;
  struct rl_limits l = limits(5, 60, 1000);
  struct rl_decision d;
  int64_t now = 1000; /* window [960, 1020) */
  for (int i = 0; i < 5; i++) {
    assert_int_equal(rlmem_check(t, digest_a, &l, now, &d), 0);
    assert_int_equal(d.outcome, RL_ALLOW);
    assert_int_equal(d.limit, 5);
    assert_int_equal(d.remaining, 4 - i);
    assert_int_equal(d.reset, 1020);
    assert_int_equal(d.retry_after, 0);
  }
  assert_int_equal(rlmem_check(t, digest_a, &l, 1019, &d), 0);
  assert_int_equal(d.outcome, RL_LIMITED);
  assert_int_equal(d.remaining, 0);
  assert_int_equal(d.reset, 1020);
  assert_int_equal(d.retry_after, 1);
  assert_int_equal(rlmem_check(t, digest_a, &l, 990, &d), 0);
  assert_int_equal(d.retry_after, 30);
  /* Another key has its own window. */
  assert_int_equal(rlmem_check(t, digest_b, &l, now, &d), 0);
  assert_int_equal(d.outcome, RL_ALLOW);
  /* The next window starts exactly at the reset. */
  assert_int_equal(rlmem_check(t, digest_a, &l, 1020, &d), 0);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(d.remaining, 4);
  assert_int_equal(d.reset, 1080);
  assert_int_equal(quota_used(t, digest_a, now), 6);
}

static void test_quota_exhaustion_answers_quota_and_remaining_stays_the_windows(void **state) {
  struct rlmem_table *t = *state;
  struct rl_limits l = limits(10, 60, 3);
  struct rl_decision d;
  int64_t now = T_2026_01_01 + 100;
  for (int i = 0; i < 3; i++) {
    rlmem_check(t, digest_a, &l, now, &d);
    assert_int_equal(d.outcome, RL_ALLOW);
    assert_int_equal(d.quota_remaining, 2 - i);
    assert_int_equal(d.remaining, 9 - i); /* the window's remainder, never the month's (SPEC.md 4.2) */
    assert_int_equal(d.reserved_month, rlcalc_month_index(now));
  }
  rlmem_check(t, digest_a, &l, now, &d);
  assert_int_equal(d.outcome, RL_QUOTA);
  assert_int_equal(d.limit, 10);
  assert_int_equal(d.remaining, 6); /* the refused request counted in the window too */
  assert_int_equal(d.reset, rlcalc_window_reset(now, 60));
  assert_int_equal(d.retry_after, 0);
  assert_int_equal(d.quota_limit, 3);
  assert_int_equal(d.quota_remaining, 0);
  assert_int_equal(d.quota_reset, T_2026_02_01);
  assert_int_equal(d.reserved_in, RL_STORE_NONE);
  assert_int_equal(quota_used(t, digest_a, now), 3);
}

static void test_window_counts_every_request_and_refusals_reserve_no_quota(void **state) {
  struct rlmem_table *t = *state;
  struct rl_limits l = limits(2, 60, 10);
  struct rl_decision d;
  int limited = 0;
  for (int i = 0; i < 5; i++) {
    rlmem_check(t, digest_a, &l, 1000, &d);
    if (d.outcome == RL_LIMITED) limited++;
  }
  assert_int_equal(limited, 3);
  assert_int_equal(d.remaining, 0);
  assert_int_equal(quota_used(t, digest_a, 1000), 2);
  /* A larger window shows all five requests were counted in it. */
  struct rl_limits wider = limits(7, 60, 10);
  rlmem_check(t, digest_a, &wider, 1000, &d);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(d.remaining, 1);
}

static void test_refund_gives_the_months_unit_back_once(void **state) {
  struct rlmem_table *t = *state;
  struct rl_limits l = limits(100, 60, 2);
  struct rl_decision d;
  int64_t now = T_2026_01_01 + 100;
  rlmem_check(t, digest_a, &l, now, &d);
  rlmem_check(t, digest_a, &l, now, &d);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(quota_used(t, digest_a, now), 2);
  rlmem_refund(t, digest_a, d.reserved_month);
  assert_int_equal(quota_used(t, digest_a, now), 1);
  rlmem_check(t, digest_a, &l, now, &d);
  assert_int_equal(d.outcome, RL_ALLOW);
  rlmem_check(t, digest_a, &l, now, &d);
  assert_int_equal(d.outcome, RL_QUOTA);
  /* A unit of a month that is over is not taken from the new month; an unknown key is nothing to refund. */
  rlmem_check(t, digest_a, &l, T_2026_02_01, &d);
  assert_int_equal(d.outcome, RL_ALLOW);
  rlmem_refund(t, digest_a, rlcalc_month_index(now));
  assert_int_equal(quota_used(t, digest_a, T_2026_02_01), 1);
  rlmem_refund(t, digest_b, rlcalc_month_index(now));
  assert_int_equal(quota_used(t, digest_b, now), 0);
}

/* A request that spends nothing of the month (a 304) counts in the window and is refused as any other would be. */
static void test_unspent_check_counts_the_window_reserves_no_unit_and_refuses_alike(void **state) {
  struct rlmem_table *t = *state;
  struct rl_limits l = limits(4, 60, 2);
  struct rl_decision d;
  int64_t now = T_2026_01_01 + 100;
  assert_int_equal(rlmem_check_unspent(t, digest_a, &l, now, &d), 0);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(d.remaining, 3);
  assert_int_equal(d.quota_remaining, 2);
  assert_int_equal(d.reserved_month, 0);
  assert_int_equal(quota_used(t, digest_a, now), 0);
  /* No usage changed: no snapshot becomes due (at exit, when one is due whatever the interval). */
  uint64_t gen;
  assert_false(rlmem_snapshot_begin(t, 0, true, &gen));
  rlmem_check(t, digest_a, &l, now, &d);
  rlmem_check(t, digest_a, &l, now, &d);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(d.remaining, 1);
  /* The month used up refuses it for the month; then the window, spent, for the window. */
  assert_int_equal(rlmem_check_unspent(t, digest_a, &l, now, &d), 0);
  assert_int_equal(d.outcome, RL_QUOTA);
  assert_int_equal(d.quota_remaining, 0);
  struct rl_limits wide_month = limits(4, 60, 100);
  assert_int_equal(rlmem_check_unspent(t, digest_a, &wide_month, now, &d), 0);
  assert_int_equal(d.outcome, RL_LIMITED);
  assert_int_equal(d.remaining, 0);
  assert_int_equal(quota_used(t, digest_a, now), 2);
}

static void test_quota_checked_before_window_when_both_are_spent(void **state) {
  struct rlmem_table *t = *state;
  struct rl_limits l = limits(2, 60, 2);
  struct rl_decision d;
  rlmem_check(t, digest_a, &l, 1000, &d);
  rlmem_check(t, digest_a, &l, 1000, &d);
  rlmem_check(t, digest_a, &l, 1000, &d);
  assert_int_equal(d.outcome, RL_QUOTA);
}

static void test_quota_resets_at_midnight_utc_on_the_first(void **state) {
  struct rlmem_table *t = *state;
  struct rl_limits l = limits(100, 60, 2);
  struct rl_decision d;
  rlmem_check(t, digest_a, &l, T_2026_01_31_235959 - 5, &d);
  rlmem_check(t, digest_a, &l, T_2026_01_31_235959 - 5, &d);
  rlmem_check(t, digest_a, &l, T_2026_01_31_235959, &d);
  assert_int_equal(d.outcome, RL_QUOTA);
  assert_int_equal(d.quota_reset, T_2026_02_01);
  rlmem_check(t, digest_a, &l, T_2026_02_01, &d);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(d.quota_remaining, 1);
  assert_int_equal(d.quota_reset, T_2026_03_01);
}

/* A digest made from a number: distinct numbers give distinct slot tags. */
static void numbered_digest(char out[65], uint64_t n) { snprintf(out, 65, "%016llx%048d", (unsigned long long)n, 0); }

/* What the redis provider's fallback counted is owed to Redis for the window and month it counted in, once. */
static void test_fallback_counts_are_owed_per_window_and_month(void **state) {
  struct rlmem_table *t = *state;
  struct rl_limits l = limits(2, 60, 10);
  struct rl_decision d;
  struct rl_owed owed;
  int64_t now = T_2026_01_01 + 100, month = rlcalc_month_index(now), end = rlcalc_window_reset(now, 60);
  rlmem_mirror(t, digest_a, &l, now, 0, 4); /* Redis had counted four this month */
  rlmem_owed_read(t, digest_a, end, month, now, &owed);
  assert_int_equal(owed.window, -1);
  assert_int_equal(owed.quota, -1);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(rlmem_check(t, digest_a, &l, now, &d), 0);
    rlmem_owed_add(t, digest_a, &d, true);
  }
  assert_int_equal(d.outcome, RL_LIMITED);
  rlmem_owed_read(t, digest_a, end, month, now, &owed);
  assert_int_equal(owed.window, 3); /* every request, the refused one too */
  assert_int_equal(owed.quota, 2);  /* only what was admitted, not what Redis counted itself */
  uint64_t seq = owed.seq;
  assert_true(seq > 0);
  rlmem_owed_refund(t, digest_a, month);
  rlmem_owed_read(t, digest_a, end, month, now, &owed);
  assert_int_equal(owed.quota, 1);
  assert_true(owed.seq > seq); /* every change gets a higher number */
  assert_int_equal(quota_used(t, digest_a, now), 5);
  /* Once Redis answered a call carrying them, they are not said again; an older number's answer changes nothing. */
  rlmem_owed_acked(t, digest_a, owed.seq);
  rlmem_owed_acked(t, digest_a, seq);
  struct rl_owed told;
  rlmem_owed_read(t, digest_a, end, month, now, &told);
  assert_int_equal(told.window, -1);
  assert_int_equal(told.quota, -1);
  assert_int_equal(told.seq, 0);
  /* A new count is owed again, all of it. */
  assert_int_equal(rlmem_check(t, digest_a, &l, now, &d), 0);
  rlmem_owed_add(t, digest_a, &d, true);
  rlmem_owed_read(t, digest_a, end, month, now, &told);
  assert_int_equal(told.window, 4);
  assert_int_equal(told.quota, 1);
  assert_true(told.seq > owed.seq);
  /* The next window and month owe nothing yet. */
  rlmem_owed_read(t, digest_a, end + 60, month + 1, now, &owed);
  assert_int_equal(owed.window, -1);
  assert_int_equal(owed.quota, -1);
}

static void test_full_table_gives_a_new_key_the_least_recently_used_slot(void **state) {
  (void)state;
  struct rlmem_table *t = rlmem_create(4);
  struct rl_limits l = limits(5, 60, 100);
  struct rl_decision d;
  char digest[65];
  int64_t now = T_2026_01_31_235959 - 100;
  for (int i = 0; i < 4; i++) {
    numbered_digest(digest, (uint64_t)i + 1);
    assert_int_equal(rlmem_check(t, digest, &l, now + i, &d), 0);
  }
  /* Key 1 comes back last: key 2 is now the one decided least recently. */
  numbered_digest(digest, 1);
  assert_int_equal(rlmem_check(t, digest, &l, now + 10, &d), 0);
  assert_int_equal(d.remaining, 3);
  /* A new key in a full table in the same month: admitted, from zero, in key 2's slot. */
  assert_int_equal(rlmem_check(t, digest_a, &l, now + 11, &d), 0);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(d.remaining, 4);
  assert_int_equal(d.quota_remaining, 99);
  assert_int_equal(quota_used(t, digest_a, now + 11), 1);
  /* Keys 1, 3 and 4 keep their counts; key 2 was forgotten and counts from zero again. */
  numbered_digest(digest, 1);
  assert_int_equal(quota_used(t, digest, now + 11), 2);
  numbered_digest(digest, 3);
  assert_int_equal(quota_used(t, digest, now + 11), 1);
  numbered_digest(digest, 4);
  assert_int_equal(quota_used(t, digest, now + 11), 1);
  numbered_digest(digest, 2);
  assert_int_equal(quota_used(t, digest, now + 11), 0);
  /* A stale slot (window and month over) is still taken before any live one: in February, key b takes one. */
  assert_int_equal(rlmem_check(t, digest_b, &l, T_2026_02_01 + 1, &d), 0);
  assert_int_equal(d.quota_remaining, 99);
  assert_int_equal(quota_used(t, digest_a, T_2026_02_01 + 1), 0);
  rlmem_destroy(t);
}

/*
 * The promise of limits.h: ten million distinct keys in one month (forty times the table) are each decided, none
 * refused for want of a slot. Bounded in time: each new key scans at most its probe window.
 */
#define TEN_MILLION_KEYS 10000000u
static void test_ten_million_distinct_keys_in_one_month_never_lack_a_slot(void **state) {
  (void)state;
  struct rlmem_table *t = rlmem_create(VTS_RATELIMIT_SLOTS);
  assert_non_null(t);
  struct rl_limits l = limits(5, 60, 100);
  struct rl_decision d;
  char digest[65];
  int64_t now = T_2026_01_01 + 100;
  uint64_t refused = 0, other = 0;
  uint64_t started = util_now_ms();
  for (uint64_t i = 0; i < TEN_MILLION_KEYS; i++) {
    numbered_digest(digest, (i + 1) * UINT64_C(0x9E3779B97F4A7C15));
    /* The month goes on: a second passes every 4 keys (about 29 days in all). */
    if (rlmem_check(t, digest, &l, now + (int64_t)(i / 4), &d) != 0)
      refused++;
    else if (d.outcome != RL_ALLOW || d.quota_remaining != 99)
      other++;
  }
  uint64_t took = util_now_ms() - started;
  if (refused != 0 || other != 0)
    fail_msg("%llu keys refused, %llu not admitted as new", (unsigned long long)refused, (unsigned long long)other);
  assert_int_equal(rlcalc_month_index(now), rlcalc_month_index(now + TEN_MILLION_KEYS / 4));
  /* The last key is remembered: its next request counts on from one. */
  assert_int_equal(rlmem_check(t, digest, &l, now + TEN_MILLION_KEYS / 4, &d), 0);
  assert_int_equal(d.quota_remaining, 98);
  print_message("10000000 distinct keys in one month: 0 refused, %llu ms\n", (unsigned long long)took);
  rlmem_destroy(t);
}

/* A full-size table: month after month, one more distinct key than the key file holds, never -ENOSPC. */
static void test_each_month_takes_more_new_keys_than_the_key_file_holds(void **state) {
  (void)state;
  struct rlmem_table *t = rlmem_create(VTS_RATELIMIT_SLOTS);
  assert_non_null(t);
  struct rl_limits l = limits(5, 60, 100);
  struct rl_decision d;
  char digest[65];
  static const int64_t months[] = {T_2026_01_01 + 100, T_2026_02_01 + 100, T_2026_03_01 + 100};
  for (uint64_t month = 0; month < 3; month++) {
    int64_t now = months[month];
    uint64_t refused = 0, other = 0;
    for (uint64_t i = 0; i < VTS_MAX_KEYS + 1; i++) {
      /* Spread like real digests: the number's hash, not the number, is the slot tag. */
      numbered_digest(digest, ((month * (VTS_MAX_KEYS + 1) + i + 1) * UINT64_C(0x9E3779B97F4A7C15)));
      if (rlmem_check(t, digest, &l, now, &d) != 0)
        refused++;
      else if (d.outcome != RL_ALLOW || d.quota_remaining != 99)
        other++;
    }
    if (refused != 0 || other != 0)
      fail_msg("month %llu: %llu keys refused, %llu not admitted as new", (unsigned long long)month,
               (unsigned long long)refused, (unsigned long long)other);
  }
  rlmem_destroy(t);
}

/*
 * Three gateways fall back at once against a key Redis counted 50 units short of its quota: each admits its third,
 * rounded down, so together they admit at most the 50; when Redis answers again, a later outage shares afresh.
 */
static void test_a_shared_fallback_admits_each_gateway_its_share_of_what_was_left(void **state) {
  (void)state;
  struct rl_limits l = limits(1000, 3600, 100);
  int64_t now = T_2026_01_01 + 100;
  struct rlmem_table *gw[3];
  int64_t admitted = 0;
  for (int g = 0; g < 3; g++) {
    gw[g] = rlmem_create(64);
    assert_non_null(gw[g]);
    rlmem_mirror(gw[g], digest_a, &l, now, 50, 50); /* what Redis last said */
    struct rl_decision d;
    for (int i = 0; i < 40; i++) {
      assert_int_equal(rlmem_check_share(gw[g], digest_a, &l, now, 3, &d), 0);
      if (d.outcome == RL_ALLOW) {
        admitted++;
        assert_int_equal(d.quota_limit, 100);
        assert_int_equal(d.limit, 1000);
      } else {
        assert_int_equal(d.outcome, RL_QUOTA);
        assert_int_equal(d.quota_remaining, 0);
      }
    }
    assert_int_equal(quota_used(gw[g], digest_a, now), 50 + 16);
  }
  assert_int_equal(admitted, 48);
  /* The window is shared the same way: 9 left of 10, three gateways, three each. */
  struct rl_limits w = limits(10, 60, 1000);
  struct rl_decision d;
  rlmem_mirror(gw[0], digest_b, &w, now, 1, 1);
  int allowed = 0;
  for (int i = 0; i < 6; i++) {
    assert_int_equal(rlmem_check_share(gw[0], digest_b, &w, now, 3, &d), 0);
    allowed += d.outcome == RL_ALLOW;
  }
  assert_int_equal(allowed, 3);
  assert_int_equal(d.outcome, RL_LIMITED);
  /* Redis answered again (the mirror), then a second outage: what is left now is shared, from the count now. */
  rlmem_mirror(gw[0], digest_a, &l, now, 90, 90);
  for (int i = 0; i < 10; i++) assert_int_equal(rlmem_check_share(gw[0], digest_a, &l, now, 3, &d), 0);
  assert_int_equal(quota_used(gw[0], digest_a, now), 90 + 3);
  /* One gateway alone keeps the whole of what is left. */
  rlmem_mirror(gw[1], digest_a, &l, now, 97, 97);
  for (int i = 0; i < 10; i++) assert_int_equal(rlmem_check_share(gw[1], digest_a, &l, now, 1, &d), 0);
  assert_int_equal(quota_used(gw[1], digest_a, now), 100);
  for (int g = 0; g < 3; g++) rlmem_destroy(gw[g]);
}

static void test_mirror_raises_counts_so_a_fallback_continues(void **state) {
  struct rlmem_table *t = *state;
  struct rl_limits l = limits(5, 60, 100);
  struct rl_decision d;
  rlmem_mirror(t, digest_a, &l, 1000, 4, 50);
  rlmem_mirror(t, digest_a, &l, 1000, 2, 10); /* lower counts never lower the table */
  rlmem_check(t, digest_a, &l, 1000, &d);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(d.remaining, 0);
  assert_int_equal(d.quota_remaining, 49);
  rlmem_check(t, digest_a, &l, 1000, &d);
  assert_int_equal(d.outcome, RL_LIMITED);
}

#define HAMMER_PROCS 4
#define HAMMER_TRIES 600

/* Forks HAMMER_PROCS processes that each try HAMMER_TRIES requests of one key at once; returns how many passed. */
static int64_t hammer(struct rlmem_table *t, const struct rl_limits *l, int64_t now) {
  _Atomic int64_t *admitted = mmap(NULL, sizeof(*admitted), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(admitted != MAP_FAILED);
  atomic_store(admitted, 0);
  pid_t pids[HAMMER_PROCS];
  for (int p = 0; p < HAMMER_PROCS; p++) {
    pids[p] = fork();
    assert_true(pids[p] >= 0);
    if (pids[p] == 0) {
      struct rl_decision d;
      for (int i = 0; i < HAMMER_TRIES; i++) {
        if (rlmem_check(t, digest_a, l, now, &d) == 0 && d.outcome == RL_ALLOW) atomic_fetch_add(admitted, 1);
      }
      _exit(0);
    }
  }
  for (int p = 0; p < HAMMER_PROCS; p++) {
    int status;
    assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  int64_t n = atomic_load(admitted);
  munmap((void *)admitted, sizeof(*admitted));
  return n;
}

static void test_forked_processes_admit_exactly_limit(void **state) {
  struct rlmem_table *t = *state;
  struct rl_limits l = limits(777, 60, 1000000);
  assert_int_equal(hammer(t, &l, 1000), 777);
  assert_int_equal(quota_used(t, digest_a, 1000), 777);
}

static void test_forked_processes_admit_exactly_quota(void **state) {
  struct rlmem_table *t = *state;
  struct rl_limits l = limits(100000, 60, 301);
  assert_int_equal(hammer(t, &l, 1000), 301);
  assert_int_equal(quota_used(t, digest_a, 1000), 301);
  /* Every try counted in the window, refused or not. */
  struct rl_limits more = limits(100000, 60, 1000000);
  struct rl_decision d;
  rlmem_check(t, digest_a, &more, 1000, &d);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(d.remaining, 100000 - HAMMER_PROCS * HAMMER_TRIES - 1);
}

static void test_snapshot_restores_this_months_usage(void **state) {
  (void)state;
  char dir[64];
  make_tmpdir(dir, sizeof(dir));
  struct rlmem_table *t = rlmem_create(64);
  struct rl_limits l = limits(100, 60, 100);
  struct rl_decision d;
  int64_t now = T_2026_01_01 + 3600;
  for (int i = 0; i < 7; i++) rlmem_check(t, digest_a, &l, now, &d);
  rlmem_check(t, digest_b, &l, now, &d);
  assert_int_equal(rlmem_snapshot_write(t, dir, now), 0);
  rlmem_destroy(t);

  struct rlmem_table *u = rlmem_create(64);
  char err[256] = "";
  assert_int_equal(rlmem_snapshot_restore(u, dir, now + 86400, err, sizeof(err)), 0);
  assert_int_equal(quota_used(u, digest_a, now), 7);
  assert_int_equal(quota_used(u, digest_b, now), 1);
  /* A restored table goes on counting from there. */
  struct rl_limits small = limits(100, 60, 8);
  rlmem_check(u, digest_a, &small, now + 86400, &d);
  assert_int_equal(d.outcome, RL_ALLOW);
  rlmem_check(u, digest_a, &small, now + 86400, &d);
  assert_int_equal(d.outcome, RL_QUOTA);
  rlmem_destroy(u);
  remove_tree(dir);
}

static void test_snapshot_of_a_past_month_is_ignored(void **state) {
  (void)state;
  char dir[64];
  make_tmpdir(dir, sizeof(dir));
  struct rlmem_table *t = rlmem_create(64);
  struct rl_limits l = limits(100, 60, 100);
  struct rl_decision d;
  rlmem_check(t, digest_a, &l, T_2025_12_31_235959, &d);
  assert_int_equal(rlmem_snapshot_write(t, dir, T_2025_12_31_235959), 0);
  rlmem_destroy(t);
  struct rlmem_table *u = rlmem_create(64);
  char err[256] = "";
  assert_int_equal(rlmem_snapshot_restore(u, dir, T_2026_01_01, err, sizeof(err)), 0);
  assert_int_equal(quota_used(u, digest_a, T_2026_01_01), 0);
  rlmem_destroy(u);
  remove_tree(dir);
}

static void test_missing_snapshot_is_no_usage(void **state) {
  (void)state;
  char dir[64], err[256] = "";
  make_tmpdir(dir, sizeof(dir));
  struct rlmem_table *t = rlmem_create(64);
  assert_int_equal(rlmem_snapshot_restore(t, dir, 1000, err, sizeof(err)), 0);
  assert_int_equal(quota_used(t, digest_a, 1000), 0);
  rlmem_destroy(t);
  remove_tree(dir);
}

static void test_malformed_snapshot_is_an_error_naming_state_dir(void **state) {
  (void)state;
  char dir[64], path[128], err[256] = "";
  make_tmpdir(dir, sizeof(dir));
  snprintf(path, sizeof(path), "%s/%s", dir, RLMEM_SNAPSHOT_FILE);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("vts-quota-snapshot 1\n0123456789abcdef 672 12x\n", f);
  fclose(f);
  struct rlmem_table *t = rlmem_create(64);
  assert_int_equal(rlmem_snapshot_restore(t, dir, T_2026_01_01, err, sizeof(err)), -EINVAL);
  assert_non_null(strstr(err, "VTS_STATE_DIR"));
  assert_non_null(strstr(err, "line 2"));
  rlmem_destroy(t);
  remove_tree(dir);
}

static void test_snapshot_is_due_only_when_usage_changed_and_interval_passed(void **state) {
  struct rlmem_table *t = *state;
  struct rl_limits l = limits(100, 60, 100);
  struct rl_decision d;
  uint64_t gen;
  uint64_t now_ms = 100000;
  assert_false(rlmem_snapshot_begin(t, now_ms, false, &gen)); /* nothing changed */
  rlmem_check(t, digest_a, &l, 1000, &d);
  assert_true(rlmem_snapshot_begin(t, now_ms, false, &gen));
  assert_false(rlmem_snapshot_begin(t, now_ms + 5000, false, &gen)); /* one writer at a time */
  rlmem_snapshot_end(t, gen, true);
  rlmem_check(t, digest_a, &l, 1000, &d);
  assert_false(rlmem_snapshot_begin(t, now_ms + VTS_RATELIMIT_SNAPSHOT_INTERVAL_MS - 1, false, &gen));
  assert_true(rlmem_snapshot_begin(t, now_ms + VTS_RATELIMIT_SNAPSHOT_INTERVAL_MS, false, &gen));
  rlmem_snapshot_end(t, gen, true);
  assert_false(rlmem_snapshot_begin(t, now_ms + 10 * VTS_RATELIMIT_SNAPSHOT_INTERVAL_MS, false, &gen));
  /* At exit the interval does not matter, a change still does. */
  rlmem_check(t, digest_a, &l, 1000, &d);
  assert_false(rlmem_snapshot_begin(t, now_ms + VTS_RATELIMIT_SNAPSHOT_INTERVAL_MS + 1, false, &gen));
  assert_true(rlmem_snapshot_begin(t, now_ms + VTS_RATELIMIT_SNAPSHOT_INTERVAL_MS + 1, true, &gen));
  rlmem_snapshot_end(t, gen, true);
  assert_false(rlmem_snapshot_begin(t, now_ms + VTS_RATELIMIT_SNAPSHOT_INTERVAL_MS + 2, true, &gen));
}

static void test_unwritable_state_dir_fails_naming_the_variable(void **state) {
  (void)state;
  char dir[64], file[128], err[512] = "";
  make_tmpdir(dir, sizeof(dir));
  snprintf(file, sizeof(file), "%s/plainfile", dir);
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fclose(f);
  struct vts_config cfg = {.rate_limit = 60, .rate_window_s = 60, .monthly_quota = 100};
  snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s/sub", file);
  struct ratelimit_shared *shared = NULL;
  assert_true(ratelimit_shared_new(&cfg, &shared, err, sizeof(err)) < 0);
  assert_null(shared);
  assert_non_null(strstr(err, "VTS_STATE_DIR"));
  remove_tree(dir);
}

static void test_missing_state_dir_is_created(void **state) {
  (void)state;
  char dir[64], err[512] = "";
  make_tmpdir(dir, sizeof(dir));
  struct vts_config cfg = {.rate_limit = 60, .rate_window_s = 60, .monthly_quota = 100};
  snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s/a/b", dir);
  struct ratelimit_shared *shared = NULL;
  assert_int_equal(ratelimit_shared_new(&cfg, &shared, err, sizeof(err)), 0);
  assert_non_null(shared);
  struct stat st;
  assert_int_equal(stat(cfg.state_dir, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  ratelimit_shared_free(shared);
  remove_tree(dir);
}

static void test_redis_url_is_parsed_and_resolved(void **state) {
  (void)state;
  struct redis_addr a;
  char err[256];
  assert_int_equal(redis_conn_resolve("redis://127.0.0.1:6390/2", &a, err, sizeof(err)), 0);
  assert_string_equal(a.ip, "127.0.0.1");
  assert_int_equal(a.port, 6390);
  assert_int_equal(a.db, 2);
  assert_int_equal(redis_conn_resolve("redis://127.0.0.1", &a, err, sizeof(err)), 0);
  assert_int_equal(a.port, 6379);
  assert_int_equal(a.db, 0);
  assert_int_equal(redis_conn_resolve("redis://[::1]:7000/", &a, err, sizeof(err)), 0);
  assert_string_equal(a.ip, "::1");
  assert_int_equal(a.port, 7000);
  assert_int_equal(redis_conn_resolve("redis://localhost:7001", &a, err, sizeof(err)), 0);
  assert_int_equal(a.port, 7001);
  assert_true(strcmp(a.ip, "127.0.0.1") == 0 || strcmp(a.ip, "::1") == 0);
  assert_string_equal(a.user, "");
  assert_string_equal(a.password, "");
}

static void test_redis_url_credentials_are_an_acl_user_or_a_password_alone(void **state) {
  (void)state;
  struct redis_addr a;
  char err[256];
  assert_int_equal(redis_conn_resolve("redis://vts:s3cret@127.0.0.1:6390/2", &a, err, sizeof(err)), 0);
  assert_string_equal(a.user, "vts");
  assert_string_equal(a.password, "s3cret");
  assert_string_equal(a.ip, "127.0.0.1");
  assert_int_equal(a.port, 6390);
  assert_int_equal(a.db, 2);
  assert_int_equal(redis_conn_resolve("redis://:only-pass@127.0.0.1", &a, err, sizeof(err)), 0);
  assert_string_equal(a.user, "");
  assert_string_equal(a.password, "only-pass");
  /* Escapes are decoded; the last '@' ends the credentials. */
  assert_int_equal(redis_conn_resolve("redis://u%40x:p%3A%2F@w@[::1]:7000", &a, err, sizeof(err)), 0);
  assert_string_equal(a.user, "u@x");
  assert_string_equal(a.password, "p:/@w");
  assert_string_equal(a.ip, "::1");
}

static void test_rediss_is_refused_naming_a_tls_sidecar(void **state) {
  (void)state;
  struct redis_addr a;
  char err[512] = "";
  assert_int_equal(redis_conn_resolve("rediss://vts:s3cret@127.0.0.1:6380", &a, err, sizeof(err)), -EINVAL);
  assert_non_null(strstr(err, "VTS_REDIS_URL"));
  assert_non_null(strstr(err, "stunnel"));
  assert_null(strstr(err, "s3cret"));
}

static void test_bad_redis_url_names_the_variable(void **state) {
  (void)state;
  static const char *const bad[] = {"http://127.0.0.1:6379",
                                    "redis://",
                                    "redis://127.0.0.1:0",
                                    "redis://127.0.0.1:99999",
                                    "redis://user@127.0.0.1:6379",
                                    "redis://user:@127.0.0.1:6379",
                                    "redis://:@127.0.0.1:6379",
                                    "redis://user:pw%zz@127.0.0.1:6379",
                                    "redis://user:pw%00@127.0.0.1:6379",
                                    "redis://127.0.0.1:6379/x",
                                    "redis://127.0.0.1:6379/1/2",
                                    "redis://[::1"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct redis_addr a;
    char err[256] = "";
    if (redis_conn_resolve(bad[i], &a, err, sizeof(err)) != -EINVAL) fail_msg("accepted %s", bad[i]);
    assert_non_null(strstr(err, "VTS_REDIS_URL"));
    assert_null(strstr(err, "pw"));
    /* The cache's own URL is refused alike, naming its own variable. */
    if (redis_conn_resolve_var("VTS_REDIS_CACHE_URL", bad[i], &a, err, sizeof(err)) != -EINVAL)
      fail_msg("accepted %s", bad[i]);
    if (strncmp(err, "VTS_REDIS_CACHE_URL: ", 21) != 0) fail_msg("%s: %s", bad[i], err);
    assert_null(strstr(err, "pw"));
  }
}

/*
 * The memory provider as a worker sees it: what the master makes (state in dir, a directory of the test's own) and a
 * worker's limiter over it on loop. One fixture for every test of the public API.
 */
struct memory_fx {
  char dir[64];
  struct vts_config cfg;
  struct ratelimit_shared *shared;
  uv_loop_t loop;
  struct ratelimit *rl;
};

/* What the master makes from f->cfg, then a worker's limiter over it on f->loop. */
static void memory_start(struct memory_fx *f) {
  char err[512] = "";
  if (ratelimit_shared_new(&f->cfg, &f->shared, err, sizeof(err)) != 0) fail_msg("%s", err);
  assert_int_equal(uv_loop_init(&f->loop), 0);
  f->rl = ratelimit_new(&f->loop, &f->cfg, f->shared);
  assert_non_null(f->rl);
}

/* Closes the worker's limiter (running its loop until its handles are closed), as a worker leaving does. */
static void memory_close_limiter(struct memory_fx *f) {
  if (f->rl == NULL) return;
  ratelimit_free(f->rl);
  f->rl = NULL;
  assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&f->loop), 0);
}

/* The limiter closed, then what the master made freed, as a master leaving does. */
static void memory_stop(struct memory_fx *f) {
  memory_close_limiter(f);
  ratelimit_shared_free(f->shared);
  f->shared = NULL;
}

static int memory_setup(void **state) {
  struct memory_fx *f = calloc(1, sizeof(*f));
  if (f == NULL) return -1;
  make_tmpdir(f->dir, sizeof(f->dir));
  f->cfg.rate_limit = 60;
  f->cfg.rate_window_s = 3600;
  f->cfg.monthly_quota = 10000;
  snprintf(f->cfg.state_dir, sizeof(f->cfg.state_dir), "%s", f->dir);
  memory_start(f);
  *state = f;
  return 0;
}

static int memory_teardown(void **state) {
  struct memory_fx *f = *state;
  memory_stop(f);
  remove_tree(f->dir);
  free(f);
  return 0;
}

/* Through the limiter: more distinct keys than the key file may hold are all admitted, none refused for room. */
static void test_more_distinct_keys_than_the_key_file_holds_never_get_503(void **state) {
  struct memory_fx *f = *state;
  struct key_entry key = {.name = "k", .active = 1};
  struct answers a = {0};
  for (uint64_t i = 0; i < VTS_MAX_KEYS + 1; i++) {
    assert_int_equal(util_random_hex(key.digest, 32), 0);
    ratelimit_check(f->rl, &key, on_decision, &a);
  }
  assert_int_equal(a.n, VTS_MAX_KEYS + 1);
  assert_int_equal(a.outcomes[RL_ALLOW], VTS_MAX_KEYS + 1);
  struct ratelimit_stats st;
  ratelimit_stats(f->rl, &st);
  assert_int_equal(st.table_full, 0);
}

/* Public API, memory provider, on a real loop. */
static void test_memory_provider_limits_and_snapshots_through_the_api(void **state) {
  struct memory_fx *f = *state;
  assert_string_equal(ratelimit_provider(&f->cfg), "memory");
  /* Keep clear of a window boundary, so the 3 admitted requests share one window. */
  while (util_wall_s() % 3600 > 3590) sleep(1); /* the wait is the test: the window is wall-clock time */
  struct key_entry key = {.name = "k", .active = 1, .rate = 3, .quota = 0};
  snprintf(key.digest, sizeof(key.digest), "%s", digest_a);
  struct answers a = {0};
  for (int i = 0; i < 4; i++) ratelimit_check(f->rl, &key, on_decision, &a);
  assert_int_equal(a.n, 4); /* the memory provider answers at once */
  assert_int_equal(a.outcomes[RL_ALLOW], 3);
  assert_int_equal(a.outcomes[RL_LIMITED], 1);
  assert_int_equal(a.last.limit, 3);
  assert_int_equal(a.last.remaining, 0);
  assert_int_equal(a.last.reset, rlcalc_window_reset(util_wall_s(), 3600));
  assert_true(a.last.retry_after >= 1 && a.last.retry_after <= 3600);
  struct ratelimit_stats st;
  ratelimit_stats(f->rl, &st);
  assert_int_equal(st.checks, 4);
  assert_int_equal(st.allowed, 3);
  assert_int_equal(st.limited, 1);

  /* A worker's timer writes the snapshot within a second or so. */
  char path[128];
  snprintf(path, sizeof(path), "%s/%s", f->dir, RLMEM_SNAPSHOT_FILE);
  struct stat sb;
  uint64_t deadline = util_now_ms() + 3000;
  while (stat(path, &sb) != 0 && util_now_ms() < deadline) run_for_ms(&f->loop, 50);
  assert_int_equal(stat(path, &sb), 0);
  memory_close_limiter(f);

  /* A restart (new table, restored from the snapshot) keeps the month's usage. */
  assert_int_equal(ratelimit_snapshot_now(f->shared, &f->cfg), 0);
  memory_stop(f);
  memory_start(f);
  key.quota = 4;
  key.rate = 100;
  struct answers b = {0};
  ratelimit_check(f->rl, &key, on_decision, &b);
  ratelimit_check(f->rl, &key, on_decision, &b);
  assert_int_equal(b.outcomes[RL_ALLOW], 1);
  assert_int_equal(b.outcomes[RL_QUOTA], 1);
}

static void test_worker_exit_writes_the_snapshot_at_once(void **state) {
  struct memory_fx *f = *state;
  char err[512] = "";
  struct key_entry key = {.name = "k", .active = 1};
  snprintf(key.digest, sizeof(key.digest), "%s", digest_b);
  struct answers a = {0};
  for (int i = 0; i < 3; i++) ratelimit_check(f->rl, &key, on_decision, &a);
  memory_close_limiter(f); /* well before the first timer tick */
  struct rlmem_table *t = rlmem_create(64);
  assert_int_equal(rlmem_snapshot_restore(t, f->dir, util_wall_s(), err, sizeof(err)), 0);
  assert_int_equal(quota_used(t, digest_b, util_wall_s()), 3);
  rlmem_destroy(t);
}

/*
 * A batch item's unit of the month, taken outside any check by the runner's limiter, goes back through the one refund,
 * ratelimit_refund, as a request's does: once, to the shared table, with no worker's counters moved.
 */
static void test_a_batch_units_charge_goes_back_through_the_one_refund(void **state) {
  struct memory_fx *f = *state;
  struct key_entry key = {.name = "k", .active = 1, .rate = 100, .quota = 2};
  snprintf(key.digest, sizeof(key.digest), "%s", digest_a);
  struct rl_decision first, second, third;
  enum rl_charge charged = RL_CHARGE_QUOTA_USED_UP;
  /* No limiter, no table: nothing can be taken. */
  assert_int_equal(ratelimit_charge_month(NULL, &key, &first, &charged), -ENODEV);
  struct ratelimit *months = ratelimit_new_months(&f->cfg, f->shared);
  assert_non_null(months);
  /* It has no window: a check made on it by mistake is refused, never admitted. */
  struct answers refused = {0};
  ratelimit_check(months, &key, on_decision, &refused);
  ratelimit_check_unspent(months, &key, on_decision, &refused);
  assert_int_equal(refused.n, 2);
  assert_int_equal(refused.outcomes[RL_UNAVAILABLE], 2);
  assert_int_equal(refused.last.reserved_in, RL_STORE_NONE);
  assert_int_equal(ratelimit_charge_month(months, &key, &first, &charged), 0);
  assert_int_equal(charged, RL_CHARGE_TAKEN);
  assert_int_equal(first.reserved_in, RL_STORE_TABLE);
  assert_int_equal(first.reserved_month, rlcalc_month_index(util_wall_s()));
  assert_string_equal(first.digest, digest_a);
  assert_int_equal(ratelimit_charge_month(months, &key, &second, &charged), 0);
  assert_int_equal(charged, RL_CHARGE_TAKEN);
  assert_int_equal(ratelimit_charge_month(months, &key, &third, &charged), 0);
  assert_int_equal(charged, RL_CHARGE_QUOTA_USED_UP);
  assert_int_equal(third.reserved_in, RL_STORE_NONE);
  ratelimit_refund(months, &first);
  assert_int_equal(first.reserved_in, RL_STORE_NONE);
  ratelimit_refund(months, &first); /* once: the unit is no longer recorded */
  /* A unit of a worker's store handed to it by mistake: it reserved none there, so it gives nothing back. */
  struct rl_decision stray = second;
  stray.reserved_in = RL_STORE_REDIS;
  ratelimit_refund(months, &stray);
  assert_int_equal(stray.reserved_in, RL_STORE_NONE);
  struct ratelimit_stats mst;
  ratelimit_stats(months, &mst);
  assert_int_equal(mst.refunds, 0);
  assert_int_equal(ratelimit_charge_month(months, &key, &third, &charged), 0);
  assert_int_equal(charged, RL_CHARGE_TAKEN);
  assert_int_equal(ratelimit_charge_month(months, &key, &third, &charged), 0);
  assert_int_equal(charged, RL_CHARGE_QUOTA_USED_UP);
  /* The worker's checks see the same month, and its counters saw no refund of a unit it never reserved. */
  struct answers a = {0};
  ratelimit_check(f->rl, &key, on_decision, &a);
  assert_int_equal(a.outcomes[RL_QUOTA], 1);
  struct ratelimit_stats st;
  ratelimit_stats(f->rl, &st);
  assert_int_equal(st.refunds, 0);
  ratelimit_free(months);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_window_is_aligned_to_multiples_of_its_length),
      cmocka_unit_test(test_retry_after_is_whole_seconds_to_reset_at_least_one),
      cmocka_unit_test(test_month_rolls_from_december_to_january),
      cmocka_unit_test(test_february_of_a_leap_year_has_29_days),
      cmocka_unit_test(test_month_index_matches_the_utc_calendar_every_day),
      cmocka_unit_test(test_key_overrides_replace_defaults_and_zero_means_default),
      cmocka_unit_test_setup_teardown(test_memory_admits_exactly_limit_then_limits_until_reset, table_setup,
                                      table_teardown),
      cmocka_unit_test_setup_teardown(test_quota_exhaustion_answers_quota_and_remaining_stays_the_windows, table_setup,
                                      table_teardown),
      cmocka_unit_test_setup_teardown(test_window_counts_every_request_and_refusals_reserve_no_quota, table_setup,
                                      table_teardown),
      cmocka_unit_test_setup_teardown(test_refund_gives_the_months_unit_back_once, table_setup, table_teardown),
      cmocka_unit_test_setup_teardown(test_unspent_check_counts_the_window_reserves_no_unit_and_refuses_alike,
                                      table_setup, table_teardown),
      cmocka_unit_test_setup_teardown(test_quota_checked_before_window_when_both_are_spent, table_setup,
                                      table_teardown),
      cmocka_unit_test_setup_teardown(test_quota_resets_at_midnight_utc_on_the_first, table_setup, table_teardown),
      cmocka_unit_test_setup_teardown(test_fallback_counts_are_owed_per_window_and_month, table_setup, table_teardown),
      cmocka_unit_test(test_full_table_gives_a_new_key_the_least_recently_used_slot),
      cmocka_unit_test(test_ten_million_distinct_keys_in_one_month_never_lack_a_slot),
      cmocka_unit_test(test_each_month_takes_more_new_keys_than_the_key_file_holds),
      cmocka_unit_test_setup_teardown(test_mirror_raises_counts_so_a_fallback_continues, table_setup, table_teardown),
      cmocka_unit_test(test_a_shared_fallback_admits_each_gateway_its_share_of_what_was_left),
      cmocka_unit_test_setup_teardown(test_forked_processes_admit_exactly_limit, table_setup, table_teardown),
      cmocka_unit_test_setup_teardown(test_forked_processes_admit_exactly_quota, table_setup, table_teardown),
      cmocka_unit_test(test_snapshot_restores_this_months_usage),
      cmocka_unit_test(test_snapshot_of_a_past_month_is_ignored),
      cmocka_unit_test(test_missing_snapshot_is_no_usage),
      cmocka_unit_test(test_malformed_snapshot_is_an_error_naming_state_dir),
      cmocka_unit_test_setup_teardown(test_snapshot_is_due_only_when_usage_changed_and_interval_passed, table_setup,
                                      table_teardown),
      cmocka_unit_test(test_unwritable_state_dir_fails_naming_the_variable),
      cmocka_unit_test(test_missing_state_dir_is_created),
      cmocka_unit_test(test_redis_url_is_parsed_and_resolved),
      cmocka_unit_test(test_bad_redis_url_names_the_variable),
      cmocka_unit_test(test_redis_url_credentials_are_an_acl_user_or_a_password_alone),
      cmocka_unit_test(test_rediss_is_refused_naming_a_tls_sidecar),
      cmocka_unit_test_setup_teardown(test_more_distinct_keys_than_the_key_file_holds_never_get_503, memory_setup,
                                      memory_teardown),
      cmocka_unit_test_setup_teardown(test_memory_provider_limits_and_snapshots_through_the_api, memory_setup,
                                      memory_teardown),
      cmocka_unit_test_setup_teardown(test_worker_exit_writes_the_snapshot_at_once, memory_setup, memory_teardown),
      cmocka_unit_test_setup_teardown(test_a_batch_units_charge_goes_back_through_the_one_refund, memory_setup,
                                      memory_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
