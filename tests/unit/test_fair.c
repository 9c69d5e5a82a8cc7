/* Unit tests of the fair shares of batch work between keys (gateway/dispatcher/fair.h), with the time set by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/dispatcher/fair.h"
#include "gateway/dispatcher/runner.h"

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

/*
 * The runner's take against a store holding work of every key at all times: the first pass passes over what fair_skip
 * names with ahead set, a second (when the first found nothing) only those at their share; the store hands out the
 * first key of its own order not passed over. Returns the key started, or -1 when both passes pass over all.
 */
static int take(struct fair *f, uint64_t now, uint64_t cap, const char *const *order, const uint32_t *weight,
                size_t n) {
  for (size_t i = 0; i < n; i++) fair_seen(f, now, order[i], weight[i]);
  for (int ahead = 1; ahead >= 0; ahead--) {
    for (size_t i = 0; i < n; i++) {
      if (!skipped(f, now, cap, ahead, order[i])) {
        assert_int_equal(fair_started(f, now, order[i], weight[i]), 0);
        return (int)i;
      }
    }
  }
  return -1;
}

/*
 * Weights 2 and 1, both keys always with work waiting: turns go 2:1 exactly, whichever key the store would hand out
 * first, and never more than one turn of the lighter key apart on the way.
 */
static void test_weights_2_to_1_give_starts_2_to_1(void **state) {
  (void)state;
  struct fair_limits lim = {0, 0};
  for (int first = 0; first < 2; first++) {
    const char *order[2] = {first ? "light" : "heavy", first ? "heavy" : "light"};
    uint32_t weight[2] = {first ? 1 : 2, first ? 2 : 1};
    struct fair *f = fair_new(&lim);
    uint64_t starts[2] = {0, 0};
    for (int i = 0; i < 300; i++) {
      int k = take(f, 1000, 1000, order, weight, 2);
      assert_true(k >= 0);
      starts[k]++;
      fair_ended(f, 1000, order[k], 1);
      uint64_t heavy = starts[first ? 1 : 0], light = starts[first ? 0 : 1];
      assert_true(heavy <= 2 * light + 2 && 2 * light <= heavy + 2);
    }
    assert_int_equal(starts[first ? 1 : 0], 200);
    assert_int_equal(starts[first ? 0 : 1], 100);
    fair_free(f);
  }
}

/*
 * The same with 3 batch slots and each piece of work held until 3 more started (the oldest ends first): the heavier
 * key holds at most 2, the lighter 1, and the starts are still 2:1 exactly.
 */
static void test_weights_2_to_1_share_the_slots_2_to_1(void **state) {
  (void)state;
  struct fair_limits lim = {0, 0};
  struct fair *f = fair_new(&lim);
  const char *order[2] = {"light", "heavy"};
  uint32_t weight[2] = {1, 2};
  uint64_t starts[2] = {0, 0};
  int held[3], nheld = 0;
  for (int i = 0; i < 300; i++) {
    int k = take(f, 1000, 3, order, weight, 2);
    if (k < 0) {
      assert_int_equal(nheld, 3);
      fair_ended(f, 1000, order[held[0]], 1);
      memmove(held, held + 1, sizeof(held[0]) * 2);
      nheld--;
      k = take(f, 1000, 3, order, weight, 2);
    }
    assert_true(k >= 0);
    starts[k]++;
    held[nheld++] = k;
    assert_true(fair_held(f, "heavy") <= 2);
    assert_true(fair_held(f, "light") <= 1);
  }
  assert_int_equal(starts[1], 200);
  assert_int_equal(starts[0], 100);
  fair_free(f);
}

/*
 * 3 batch slots, two keys of weight 1 always with work waiting, one's pieces holding a slot 50 times longer than the
 * other's (500 ms, a webhook try, against 10 ms): every slot stays busy, and over 100 s each key's slot time is
 * within one long piece of half, whichever key the store would hand out first. Counted in turns, the long key would
 * hold two of the three slots.
 */
static void test_slots_are_shared_by_the_time_they_are_held(void **state) {
  (void)state;
  struct fair_limits lim = {0, 0};
  for (int first = 0; first < 2; first++) {
    const char *order[2] = {first ? "long" : "short", first ? "short" : "long"};
    const uint32_t weight[2] = {1, 1};
    const uint64_t lasts[2] = {first ? 500 : 10, first ? 10 : 500};
    struct fair *f = fair_new(&lim);
    uint64_t ends[3] = {0, 0, 0}, slot_ms[2] = {0, 0};
    int key[3] = {-1, -1, -1};
    for (uint64_t t = 1000; t < 1000 + 100000; t++) {
      for (int s = 0; s < 3; s++) {
        if (key[s] >= 0 && ends[s] == t) {
          fair_ended(f, t, order[key[s]], 0);
          key[s] = -1;
        }
      }
      for (int s = 0; s < 3; s++) {
        if (key[s] >= 0) continue;
        key[s] = take(f, t, 3, order, weight, 2);
        assert_true(key[s] >= 0);
        ends[s] = t + lasts[key[s]];
      }
      assert_int_equal(take(f, t, 3, order, weight, 2), -1);
      for (int s = 0; s < 3; s++) slot_ms[key[s]]++;
    }
    assert_int_equal(slot_ms[0] + slot_ms[1], 3 * 100000);
    for (int k = 0; k < 2; k++) assert_true(slot_ms[k] + 500 >= 150000 && slot_ms[k] <= 150000 + 500);
    fair_free(f);
  }
}

/*
 * Weights 2 and 1 with the batch egress budget the limit (36,000 requests an hour: 10 a second, 6 at once; a piece of
 * work makes one request and ends at once): the heavier key's bucket refills one request every 150 ms and holds 4, the
 * lighter's every 300 ms and holds 2, so over a minute (both ends included) they start 400 + 4 and 200 + 2: 2:1.
 */
static void test_weights_2_to_1_share_the_egress_budget_2_to_1(void **state) {
  (void)state;
  struct fair_limits lim = {36000, 6};
  struct fair *f = fair_new(&lim);
  const char *order[2] = {"light", "heavy"};
  uint32_t weight[2] = {1, 2};
  uint64_t starts[2] = {0, 0};
  for (uint64_t t = 100000; t <= 100000 + 60000; t++) {
    for (int k = take(f, t, 1000, order, weight, 2); k >= 0; k = take(f, t, 1000, order, weight, 2)) {
      starts[k]++;
      fair_ended(f, t, order[k], 1);
    }
  }
  assert_int_equal(starts[1], 400 + 4);
  assert_int_equal(starts[0], 200 + 2);
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

/*
 * 300 keys with work waiting, each piece ending at once: the runner's take passes over the keys it may (the skip list
 * of RUNNER_SKIP_MAX names) and the store hands out the first key of its order not passed over. Every key takes one
 * turn before any key takes a second, even once more keys have been served than a list of 256 names holds.
 */
static void test_every_key_ahead_is_passed_over_however_many(void **state) {
  (void)state;
  enum { KEYS = 300 };
  struct fair_limits lim = {0, 0};
  struct fair *f = fair_new(&lim);
  static char names[KEYS][16];
  static const char *out[RUNNER_SKIP_MAX];
  for (int i = 0; i < KEYS; i++) snprintf(names[i], sizeof(names[i]), "k%03d", i);
  int starts[KEYS] = {0};
  for (int turn = 0; turn < KEYS; turn++) {
    for (int i = 0; i < KEYS; i++) fair_seen(f, 1000, names[i], 1);
    size_t n = fair_skip(f, 1000, 4, 1, out, RUNNER_SKIP_MAX);
    assert_int_equal(n, turn); /* every key served once already, and only those */
    int k = -1;
    for (int i = 0; i < KEYS && k < 0; i++) {
      int passed = 0;
      for (size_t j = 0; j < n && !passed; j++) passed = strcmp(out[j], names[i]) == 0;
      if (!passed) k = i;
    }
    assert_int_equal(k, turn);
    assert_int_equal(fair_started(f, 1000, names[k], 1), 0);
    fair_ended(f, 1000, names[k], 1);
    starts[k]++;
  }
  for (int i = 0; i < KEYS; i++) assert_int_equal(starts[i], 1);
  fair_free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slots_are_shared_by_the_keys_with_work),
      cmocka_unit_test(test_keys_take_turns_and_a_pause_earns_no_credit),
      cmocka_unit_test(test_a_key_shares_while_it_has_work),
      cmocka_unit_test(test_a_key_spends_at_most_its_share_of_the_egress_budget),
      cmocka_unit_test(test_weights_2_to_1_give_starts_2_to_1),
      cmocka_unit_test(test_weights_2_to_1_share_the_slots_2_to_1),
      cmocka_unit_test(test_weights_2_to_1_share_the_egress_budget_2_to_1),
      cmocka_unit_test(test_slots_are_shared_by_the_time_they_are_held),
      cmocka_unit_test(test_idle_keys_are_forgotten),
      cmocka_unit_test(test_every_key_ahead_is_passed_over_however_many),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
