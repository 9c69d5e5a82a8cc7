/* Unit tests of the fair shares of batch work between keys (gateway/dispatcher/fair.h), with the time set by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/dispatcher/fair.h"

static int skipped(struct fair *f, uint64_t now, uint64_t cap, int ahead, const char *key) {
  const char *out[16];
  size_t n = fair_skip(f, now, cap, ahead, out, 16);
  for (size_t i = 0; i < n; i++)
    if (strcmp(out[i], key) == 0) return 1;
  return 0;
}

/* Alone, a key may hold every slot; once another key has work, each holds at most its half. */
static void test_slots_are_shared_by_the_keys_with_work(void **state) {
  (void)state;
  struct fair_limits lim = {0, 0};
  struct fair *f = fair_new(&lim);
  assert_non_null(f);
  uint64_t t = 1000;
  assert_int_equal(fair_seen(f, t, "A", 1), 0);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(fair_may_start(f, t, "A", 4), 1);
    assert_int_equal(fair_started(f, t, "A", 1), 0);
  }
  assert_int_equal(fair_may_start(f, t, "A", 4), 0); /* its own share is the whole cap: 4 */
  assert_int_equal(fair_held(f, "A"), 4);
  assert_int_equal(fair_sharing(f, t), 1);
  /* B has work: A holds more than its half, so A starts nothing until it holds less than 2; B may take 2. */
  assert_int_equal(fair_seen(f, t, "B", 1), 0);
  assert_int_equal(fair_sharing(f, t), 2);
  assert_true(skipped(f, t, 4, 0, "A"));
  assert_false(skipped(f, t, 4, 0, "B"));
  fair_ended(f, t, "A", 0);
  fair_ended(f, t, "A", 0);
  assert_int_equal(fair_may_start(f, t, "A", 4), 0);
  fair_ended(f, t, "A", 0);
  assert_int_equal(fair_may_start(f, t, "A", 4), 1);
  assert_int_equal(fair_started(f, t, "B", 1), 0);
  assert_int_equal(fair_started(f, t, "B", 1), 0);
  assert_int_equal(fair_may_start(f, t, "B", 4), 0);
  assert_int_equal(fair_held_all(f), 3);
  /* One slot in all: each key may hold one, never none. */
  assert_int_equal(fair_may_start(f, t, "C", 1), 1);
  fair_free(f);
}

/* Keys under their shares take turns: the one served least goes first; a key back from a pause gets no credit. */
static void test_keys_take_turns_and_a_pause_earns_no_credit(void **state) {
  (void)state;
  struct fair_limits lim = {0, 0};
  struct fair *f = fair_new(&lim);
  uint64_t t = 1000;
  fair_seen(f, t, "A", 1);
  fair_seen(f, t, "B", 1);
  assert_false(skipped(f, t, 100, 1, "A"));
  assert_false(skipped(f, t, 100, 1, "B"));
  fair_started(f, t, "A", 1);
  assert_true(skipped(f, t, 100, 1, "A"));  /* a turn ahead of B */
  assert_false(skipped(f, t, 100, 0, "A")); /* but within its share */
  fair_started(f, t, "B", 1);
  assert_false(skipped(f, t, 100, 1, "A"));
  assert_false(skipped(f, t, 100, 1, "B"));
  /* B has nothing waiting: A runs on alone, its turns not counted against it by an idle B. */
  const char *passed[] = {"A"};
  fair_idle_but(f, passed, 0);
  fair_ended(f, t, "B", 0);
  for (int i = 0; i < 10; i++) {
    fair_seen(f, t, "A", 1);
    fair_started(f, t, "A", 1);
    assert_false(skipped(f, t, 100, 1, "A"));
  }
  /* B comes back level with A: one turn, then A's. */
  fair_seen(f, t, "B", 1);
  assert_false(skipped(f, t, 100, 1, "B"));
  assert_false(skipped(f, t, 100, 1, "A"));
  fair_started(f, t, "B", 1);
  assert_true(skipped(f, t, 100, 1, "B"));
  /* A weight of 2 gets two turns to the others' one: it joins level with the least served (A). */
  fair_seen(f, t, "C", 2);
  fair_started(f, t, "C", 2);
  assert_true(skipped(f, t, 100, 1, "C"));
  fair_started(f, t, "A", 1);
  assert_false(skipped(f, t, 100, 1, "C"));
  fair_started(f, t, "C", 2);
  assert_false(skipped(f, t, 100, 1, "C"));
  assert_false(skipped(f, t, 100, 1, "A"));
  assert_false(skipped(f, t, 100, 1, "B"));
  fair_free(f);
}

/* A key stops sharing FAIR_LINGER_MS after its work was last seen, unless it holds some. */
static void test_a_key_shares_while_it_has_work(void **state) {
  (void)state;
  struct fair_limits lim = {0, 0};
  struct fair *f = fair_new(&lim);
  fair_seen(f, 1000, "A", 1);
  fair_seen(f, 1000, "B", 1);
  assert_int_equal(fair_sharing(f, 1000 + FAIR_LINGER_MS - 1), 2);
  fair_started(f, 1000, "B", 1);
  assert_int_equal(fair_sharing(f, 1000 + FAIR_LINGER_MS), 1);
  fair_ended(f, 1000 + FAIR_LINGER_MS, "B", 0);
  assert_int_equal(fair_sharing(f, 1000 + FAIR_LINGER_MS), 0);
  /* A take that found nothing of A: it stops sharing at once. */
  fair_seen(f, 5000, "A", 1);
  const char *passed[] = {"B"};
  fair_idle_but(f, passed, 1);
  assert_int_equal(fair_sharing(f, 5000), 0);
  fair_free(f);
}

/*
 * The batch egress budget: 3600 requests an hour (one a second), 10 at once. Alone, a key spends it all; with another
 * key waiting, it starts nothing while its bucket is more than its half of the burst in debt.
 */
static void test_a_key_spends_at_most_its_share_of_the_egress_budget(void **state) {
  (void)state;
  struct fair_limits lim = {3600, 10};
  struct fair *f = fair_new(&lim);
  uint64_t t0 = 100000;
  fair_seen(f, t0, "A", 1);
  fair_started(f, t0, "A", 1);
  fair_ended(f, t0, "A", 9); /* 9 requests at one a second: 1 left of its 10 */
  assert_int_equal(fair_may_start(f, t0, "A", 4), 1);
  fair_ended(f, t0, "A", 1);
  assert_int_equal(fair_may_start(f, t0, "A", 4), 0);
  assert_int_equal(fair_may_start(f, t0 + 999, "A", 4), 0);
  assert_int_equal(fair_may_start(f, t0 + 1000, "A", 4), 1);
  uint64_t t1 = t0 + 1000;
  fair_ended(f, t1, "A", 90); /* 100 in all: the bucket is full again at t0 + 100 s, t1 + 99 s */
  fair_seen(f, t1, "A", 1);
  fair_seen(f, t1, "B", 1);
  /* Its half: one request every 2 s, 5 at once: room for one more once full_at + 2 s <= now + 10 s. */
  assert_int_equal(fair_may_start(f, t1, "A", 4), 0);
  assert_true(skipped(f, t1, 4, 0, "A"));
  assert_false(skipped(f, t1, 4, 0, "B"));
  fair_seen(f, t1 + 90999, "B", 1);
  fair_seen(f, t1 + 90999, "A", 1);
  assert_int_equal(fair_may_start(f, t1 + 90999, "A", 4), 0);
  assert_int_equal(fair_may_start(f, t1 + 91000, "A", 4), 1);
  /* B spends at its half: 5 requests fill its 5 of burst, the next waits 2 s. */
  uint64_t t = t1 + 91000;
  fair_seen(f, t, "A", 1);
  fair_started(f, t, "B", 1);
  fair_ended(f, t, "B", 4);
  assert_int_equal(fair_may_start(f, t, "B", 4), 1);
  fair_started(f, t, "B", 1);
  fair_ended(f, t, "B", 1);
  assert_int_equal(fair_may_start(f, t, "B", 4), 0);
  fair_seen(f, t + 1999, "A", 1);
  assert_int_equal(fair_may_start(f, t + 1999, "B", 4), 0);
  assert_int_equal(fair_may_start(f, t + 2000, "B", 4), 1);
  /* Work that ends with no request (a webhook try, a cache hit) spends nothing. */
  fair_started(f, t + 2000, "B", 1);
  fair_ended(f, t + 2000, "B", 0);
  assert_int_equal(fair_may_start(f, t + 2000, "B", 4), 1);
  fair_free(f);
}

/* Keys holding nothing and long unseen are forgotten, so the ledger stays small. */
static void test_idle_keys_are_forgotten(void **state) {
  (void)state;
  struct fair_limits lim = {0, 0};
  struct fair *f = fair_new(&lim);
  char name[16];
  for (int i = 0; i < 100; i++) {
    snprintf(name, sizeof(name), "k%d", i);
    fair_seen(f, 1000, name, 1);
  }
  fair_started(f, 1000, "k7", 1);
  assert_int_equal(fair_sharing(f, 1000), 100);
  const char *out[4];
  assert_int_equal(fair_skip(f, 1000 + 60000 + FAIR_LINGER_MS, 4, 1, out, 4), 0);
  assert_int_equal(fair_sharing(f, 1000 + 60000 + FAIR_LINGER_MS), 1);
  assert_int_equal(fair_held(f, "k7"), 1);
  assert_int_equal(fair_held(f, "k8"), 0);
  fair_free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slots_are_shared_by_the_keys_with_work),
      cmocka_unit_test(test_keys_take_turns_and_a_pause_earns_no_credit),
      cmocka_unit_test(test_a_key_shares_while_it_has_work),
      cmocka_unit_test(test_a_key_spends_at_most_its_share_of_the_egress_budget),
      cmocka_unit_test(test_idle_keys_are_forgotten),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
