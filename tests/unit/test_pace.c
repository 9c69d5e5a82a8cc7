/* Unit tests of an egress's budget (fetcher/egress/pace.h): the bucket's arithmetic, with the clock set by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>

#include "fetcher/egress/pace.h"

#define SEC 1000000ull /* microseconds */

/* Takes units at now until one is refused; returns how many were given. */
static unsigned take_all(struct pace_bucket *b, const struct pace_rule *r, uint64_t now) {
  unsigned n = 0;
  uint64_t wait;
  while (pace_take(b, r, now, &wait) == 0) {
    n++;
    if (n > 1000000) fail_msg("the bucket never refused");
  }
  return n;
}

static void test_full_bucket_gives_its_burst_then_refuses(void **state) {
  (void)state;
  struct pace_rule r;
  assert_int_equal(pace_rule_make(3600, 5, &r), 0); /* one a second, five at once */
  struct pace_bucket b = {0};
  uint64_t now = 1000 * SEC;
  assert_int_equal(pace_left(&b, &r, now), 5);
  assert_int_equal(take_all(&b, &r, now), 5);
  assert_int_equal(pace_left(&b, &r, now), 0);
  uint64_t wait = 0;
  assert_int_equal(pace_take(&b, &r, now, &wait), -EAGAIN);
  assert_int_equal(wait, 1 * SEC);
  assert_int_equal(pace_wait_us(&b, &r, now), 1 * SEC);
}

static void test_a_refusal_changes_nothing(void **state) {
  (void)state;
  struct pace_rule r;
  assert_int_equal(pace_rule_make(3600, 2, &r), 0);
  struct pace_bucket b = {0};
  uint64_t now = 50 * SEC, wait;
  assert_int_equal(take_all(&b, &r, now), 2);
  for (int i = 0; i < 100; i++) assert_int_equal(pace_take(&b, &r, now + 500000, &wait), -EAGAIN);
  assert_int_equal(wait, 500000);
  /* Refusals took nothing: the unit is due exactly one interval after the burst. */
  assert_int_equal(pace_take(&b, &r, now + SEC, &wait), 0);
  assert_int_equal(pace_take(&b, &r, now + SEC, &wait), -EAGAIN);
}

static void test_units_come_back_one_an_interval(void **state) {
  (void)state;
  struct pace_rule r;
  assert_int_equal(pace_rule_make(60, 3, &r), 0); /* one a minute */
  assert_int_equal(r.interval_us, 60 * SEC);
  struct pace_bucket b = {0};
  uint64_t t0 = 7 * SEC, wait;
  assert_int_equal(take_all(&b, &r, t0), 3);
  assert_int_equal(pace_left(&b, &r, t0 + 59 * SEC), 0);
  assert_int_equal(pace_take(&b, &r, t0 + 59 * SEC, &wait), -EAGAIN);
  assert_int_equal(wait, 1 * SEC);
  assert_int_equal(pace_left(&b, &r, t0 + 60 * SEC), 1);
  assert_int_equal(pace_left(&b, &r, t0 + 150 * SEC), 2);
  assert_int_equal(pace_left(&b, &r, t0 + 180 * SEC), 3);
  /* A bucket idle for a day is full, never fuller. */
  assert_int_equal(pace_left(&b, &r, t0 + 86400 * SEC), 3);
  assert_int_equal(take_all(&b, &r, t0 + 86400 * SEC), 3);
}

/* Over any span, what was admitted never passes burst + span / interval: taken greedily every 10 ms for an hour. */
static void test_greedy_taker_never_passes_the_budget(void **state) {
  (void)state;
  struct pace_rule r;
  assert_int_equal(pace_rule_make(900, 30, &r), 0); /* the defaults */
  struct pace_bucket b = {0};
  uint64_t t0 = 3 * SEC, wait;
  unsigned admitted = 0;
  for (uint64_t t = t0; t <= t0 + 3600 * SEC; t += 10000)
    while (pace_take(&b, &r, t, &wait) == 0) admitted++;
  /* 30 at once, then one every four seconds for an hour: 900 more. */
  assert_int_equal(admitted, 30 + 900);
}

static void test_unpaced_rule_admits_everything(void **state) {
  (void)state;
  struct pace_rule r;
  assert_int_equal(pace_rule_make(0, 30, &r), 0);
  assert_true(pace_unpaced(&r));
  struct pace_bucket b = {0};
  uint64_t wait = 9;
  for (int i = 0; i < 10000; i++) assert_int_equal(pace_take(&b, &r, 5, &wait), 0);
  assert_int_equal(wait, 0);
  assert_int_equal(pace_left(&b, &r, 5), 30);
  assert_int_equal(pace_wait_us(&b, &r, 5), 0);
}

static void test_rule_limits_are_refused(void **state) {
  (void)state;
  struct pace_rule r;
  assert_int_equal(pace_rule_make(-1, 30, &r), -EINVAL);
  assert_int_equal(pace_rule_make(PACE_MAX_PER_HOUR + 1, 30, &r), -EINVAL);
  assert_int_equal(pace_rule_make(900, 0, &r), -EINVAL);
  assert_int_equal(pace_rule_make(900, PACE_MAX_BURST + 1, &r), -EINVAL);
  assert_int_equal(pace_rule_make(PACE_MAX_PER_HOUR, PACE_MAX_BURST, &r), 0);
  assert_int_equal(r.interval_us, 1000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_full_bucket_gives_its_burst_then_refuses),
      cmocka_unit_test(test_a_refusal_changes_nothing),
      cmocka_unit_test(test_units_come_back_one_an_interval),
      cmocka_unit_test(test_greedy_taker_never_passes_the_budget),
      cmocka_unit_test(test_unpaced_rule_admits_everything),
      cmocka_unit_test(test_rule_limits_are_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
