/*
 * The string helpers of the hot paths: decimal digits, the bounded builder that stops at the first piece too big, the
 * bounded copy, hex, SHA-256 and random bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
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
  /* Every length, at its edges (9, 10, 99, 100, ...), and a spread of values, as printf writes them. */
  char want[32];
  for (uint64_t p = 1, i = 0; i < 20; i++, p *= 10) {
    uint64_t around[] = {p - 1, p, p + 1, p * 3 + 7};
    for (size_t k = 0; k < 4; k++) {
      snprintf(want, sizeof(want), "%llu", (unsigned long long)around[k]);
      assert_int_equal(util_u64_dec(around[k], d), strlen(want));
      assert_string_equal(d, want);
    }
  }
  for (uint64_t v = 0; v < 100000; v += 7) {
    snprintf(want, sizeof(want), "%llu", (unsigned long long)v);
    assert_int_equal(util_u64_dec(v, d), strlen(want));
    assert_string_equal(d, want);
  }
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

static void test_json_escape_of_every_byte(void **state) {
  (void)state;
  struct buf b = BUF_INIT;
  for (int c = 0; c < 256; c++) {
    char in[3] = {'a', (char)c, 'z'}, want[16];
    if (c == '"' || c == '\\')
      snprintf(want, sizeof(want), "a\\%cz", c);
    else if (c == '\n')
      snprintf(want, sizeof(want), "a\\nz");
    else if (c == '\r')
      snprintf(want, sizeof(want), "a\\rz");
    else if (c == '\t')
      snprintf(want, sizeof(want), "a\\tz");
    else if (c < 0x20 || c == 0x7f)
      snprintf(want, sizeof(want), "a\\u%04xz", c);
    else
      snprintf(want, sizeof(want), "a%cz", c);
    buf_reset(&b);
    assert_int_equal(buf_json_escape(&b, in, sizeof(in)), 0);
    assert_int_equal(b.len, strlen(want));
    assert_memory_equal(b.data, want, b.len);
  }
  /* A plain string goes in whole. */
  buf_reset(&b);
  assert_int_equal(buf_json_escape(&b, "/v1/video/transcript", 20), 0);
  assert_string_equal(b.data, "/v1/video/transcript");
  buf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decimal_digits),
      cmocka_unit_test(test_json_escape_of_every_byte),
      cmocka_unit_test(test_builder_appends_and_stops_at_the_first_piece_that_does_not_fit),
      cmocka_unit_test(test_copy_cuts_to_fit_and_terminates),
      cmocka_unit_test(test_hex_and_sha256),
      cmocka_unit_test(test_random_bytes_differ_between_draws),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
