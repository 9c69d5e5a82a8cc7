/*
 * The string helpers of the hot paths: decimal digits, the bounded builder that stops at the first piece too big, the
 * bounded copy, hex, SHA-256 and random bytes.
 */
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

static void test_copy_cuts_to_fit_and_terminates(void **state) {
  (void)state;
  char d[6];
  assert_int_equal(util_copy_str(d, sizeof(d), "abc"), 3);
  assert_string_equal(d, "abc");
  assert_int_equal(util_copy_str(d, sizeof(d), "abcdefgh"), 5);
  assert_string_equal(d, "abcde");
  assert_int_equal(util_copy_str(d, sizeof(d), ""), 0);
  assert_string_equal(d, "");
}

static void test_hex_and_sha256(void **state) {
  (void)state;
  const unsigned char raw[] = {0x00, 0x0f, 0xa5, 0xff};
  char hex[9];
  util_hex(raw, sizeof(raw), hex);
  assert_string_equal(hex, "000fa5ff");
  /* SHA-256("abc"), FIPS 180-2 appendix B.1. */
  char digest[65];
  util_sha256_hex("abc", 3, digest);
  assert_string_equal(digest, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  unsigned char md[32];
  util_sha256("abc", 3, md);
  assert_int_equal(md[0], 0xba);
  assert_int_equal(md[31], 0xad);
}

static void test_random_bytes_differ_between_draws(void **state) {
  (void)state;
  unsigned char a[32], b[32];
  assert_int_equal(util_random_bytes(a, sizeof(a)), 0);
  assert_int_equal(util_random_bytes(b, sizeof(b)), 0);
  assert_memory_not_equal(a, b, sizeof(a));
  char id[33];
  assert_int_equal(util_random_hex(id, 16), 0);
  assert_int_equal(strlen(id), 32);
  assert_int_equal(strspn(id, "0123456789abcdef"), 32);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decimal_digits),
      cmocka_unit_test(test_builder_appends_and_stops_at_the_first_piece_that_does_not_fit),
      cmocka_unit_test(test_copy_cuts_to_fit_and_terminates),
      cmocka_unit_test(test_hex_and_sha256),
      cmocka_unit_test(test_random_bytes_differ_between_draws),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
