/* Unit tests of the runner's gone keys (gateway/dispatcher/gone.h): found by name among many, dropped when back. */
#include <setjmp.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/dispatcher/gone.h"

#define MANY 5000

static void name_of(int i, char *out, size_t len) { snprintf(out, len, "key-%05d", i); }

/* back() of gone_drop_if: the names that end in a 7 (every tenth key) are active in the file again. */
static int ends_in_7(const char *name, void *arg) {
  int *calls = arg;
  (*calls)++;
  return name[strlen(name) - 1] == '7';
}

static void test_gone_keys_are_found_by_name_among_many(void **state) {
  (void)state;
  struct gone *g = gone_new();
  assert_non_null(g);
  char name[32];
  for (int i = 0; i < MANY; i++) {
    name_of(i, name, sizeof(name));
    assert_int_equal(gone_add(g, name), 0);
  }
  /* A key counted twice has one record. */
  assert_int_equal(gone_add(g, "key-00042"), 0);
  assert_int_equal(gone_count(g), MANY);
  for (int i = 0; i < MANY; i++) {
    name_of(i, name, sizeof(name));
    struct gone_key *k = gone_find(g, name);
    assert_non_null(k);
    assert_string_equal(k->name, name);
    assert_int_equal(k->state, GONE_RUNNING);
    assert_ptr_equal(gone_at(g, (size_t)i), k); /* in the order they were added */
  }
  assert_null(gone_find(g, "key-05000"));
  assert_null(gone_find(g, "key-0000"));
  assert_null(gone_find(g, "other"));
  assert_null(gone_find(g, ""));
  assert_null(gone_at(g, MANY));
  /* A name longer than a key's is none, found or added. */
  char longer[KEYS_MAX_NAME + 2];
  memset(longer, 'a', sizeof(longer) - 1);
  longer[sizeof(longer) - 1] = '\0';
  assert_null(gone_find(g, longer));
  assert_int_equal(gone_add(g, longer), -EINVAL);
  assert_int_equal(gone_count(g), MANY);
  gone_free(g);
}

static void test_a_key_back_is_dropped_and_the_others_keep_their_state(void **state) {
  (void)state;
  struct gone *g = gone_new();
  assert_non_null(g);
  char name[32];
  for (int i = 0; i < MANY; i++) {
    name_of(i, name, sizeof(name));
    assert_int_equal(gone_add(g, name), 0);
    gone_find(g, name)->state = i % 3 == 0 ? GONE_STOPPED : i % 3 == 1 ? GONE_STOPPING : GONE_RUNNING;
  }
  int calls = 0;
  assert_int_equal(gone_drop_if(g, ends_in_7, &calls), MANY / 10);
  assert_int_equal(calls, MANY);
  assert_int_equal(gone_count(g), MANY - MANY / 10);
  size_t at = 0;
  for (int i = 0; i < MANY; i++) {
    name_of(i, name, sizeof(name));
    struct gone_key *k = gone_find(g, name);
    if (i % 10 == 7) {
      assert_null(k);
      continue;
    }
    assert_non_null(k);
    assert_int_equal(k->state, i % 3 == 0 ? GONE_STOPPED : i % 3 == 1 ? GONE_STOPPING : GONE_RUNNING);
    assert_ptr_equal(gone_at(g, at++), k); /* the others keep their order */
  }
  /* Nothing back: nothing dropped. */
  calls = 0;
  assert_int_equal(gone_drop_if(g, ends_in_7, &calls), 0);
  /* Gone again: a new record, its jobs to be stopped again. */
  assert_int_equal(gone_add(g, "key-00017"), 0);
  assert_int_equal(gone_find(g, "key-00017")->state, GONE_RUNNING);
  assert_ptr_equal(gone_at(g, MANY - MANY / 10), gone_find(g, "key-00017"));
  assert_int_equal(gone_find(g, "key-00018")->state, GONE_STOPPED);
  assert_int_equal(gone_find(g, "key-00016")->state, GONE_STOPPING);
  gone_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gone_keys_are_found_by_name_among_many),
      cmocka_unit_test(test_a_key_back_is_dropped_and_the_others_keep_their_state),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
