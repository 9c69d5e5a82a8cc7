/* The string helpers of the hot paths: decimal digits and the bounded builder that stops at the first piece too big. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/util.h"

static void test_decimal_digits(void **state) {
  (void)state;
  char d[21];
  assert_int_equal(util_u64_dec(0, d), 1);
  assert_string_equal(d, "0");
  assert_int_equal(util_u64_dec(304, d), 3);
  assert_string_equal(d, "304");
  assert_int_equal(util_u64_dec(UINT64_MAX, d), 20);
  assert_string_equal(d, "18446744073709551615");
}

static void test_builder_appends_and_stops_at_the_first_piece_that_does_not_fit(void **state) {
  (void)state;
  char buf[12];
  struct strb b = strb_init(buf, sizeof(buf));
  strb_puts(&b, "max-age=");
  strb_u64(&b, 600);
  assert_true(b.ok);
  assert_int_equal(b.len, 11);
  assert_string_equal(buf, "max-age=600"); /* 11 characters and the NUL: full */
  strb_puts(&b, "x");
  assert_false(b.ok);
  assert_string_equal(buf, "max-age=600");
  strb_puts(&b, ""); /* nothing more is added once it has stopped */
  assert_false(b.ok);
  assert_int_equal(b.len, 11);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decimal_digits),
      cmocka_unit_test(test_builder_appends_and_stops_at_the_first_piece_that_does_not_fit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
