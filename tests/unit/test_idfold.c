/* Folding repeated video ids (gateway/http/idfold.c): the first of equal ids stays, none is lost, "" is never one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/http/idfold.h"

static void test_only_later_equal_ids_are_duplicates(void **state) {
  (void)state;
  static const char ids[][VTS_VIDEO_ID_LEN + 1] = {"bbbbbbbbbbb", "aaaaaaaaaaa", "bbbbbbbbbbb", "", "",
                                                   "aaaaaaaaaaa", "ccccccccccc", "bbbbbbbbbbb"};
  static const unsigned char want[] = {0, 0, 1, 0, 0, 1, 0, 1};
  size_t n = sizeof(ids) / sizeof(ids[0]);
  unsigned char dup[sizeof(want)];
  assert_int_equal(idfold_mark(ids, n, dup), 0);
  assert_memory_equal(dup, want, n);
  assert_int_equal(idfold_mark(ids, 0, dup), 0);
}

/* Many ids, each given three times in scattered places: exactly the first of each stays. */
static void test_a_large_list_keeps_each_first_place(void **state) {
  (void)state;
  enum { DISTINCT = 20000, N = 3 * DISTINCT };
  char(*ids)[VTS_VIDEO_ID_LEN + 1] = calloc(N, sizeof(*ids));
  unsigned char *dup = malloc(N);
  assert_non_null(ids);
  assert_non_null(dup);
  for (size_t i = 0; i < N; i++) {
    size_t v = (i * 7919) % DISTINCT; /* 7919 is prime to DISTINCT: every value comes back every DISTINCT places */
    snprintf(ids[i], sizeof(ids[i]), "v%010zu", v);
  }
  assert_int_equal(idfold_mark((const char(*)[VTS_VIDEO_ID_LEN + 1]) ids, N, dup), 0);
  for (size_t i = 0; i < N; i++)
    if (dup[i] != (i >= DISTINCT)) fail_msg("id %zu (%s): dup %d", i, ids[i], dup[i]);
  free(ids);
  free(dup);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_only_later_equal_ids_are_duplicates),
      cmocka_unit_test(test_a_large_list_keeps_each_first_place),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
