/*
 * The string helpers of the hot paths: decimal digits, the bounded builder that stops at the first piece too big, the
 * bounded copy, hex, SHA-256 and random bytes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    else if (c >= 0x80)
      snprintf(want, sizeof(want), "a\\ufffdz"); /* a lone byte >= 0x80 is never UTF-8 */
    else if (c < 0x20 || c == 0x7f)
      snprintf(want, sizeof(want), "a\\u%04xz", c);
    else if (c >= 0x80)
      snprintf(want, sizeof(want), "a\\ufffdz"); /* a lone byte >= 0x80 is never UTF-8 */
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

static void json_escape_is(const char *in, const char *want) {
  struct buf b = BUF_INIT;
  assert_int_equal(buf_json_escape(&b, in, strlen(in)), 0);
  if (strcmp(b.data, want) != 0) fail_msg("escape of \"%s\": got \"%s\", want \"%s\"", in, b.data, want);
  buf_free(&b);
}

static void test_json_escape_keeps_utf8_and_replaces_every_invalid_byte(void **state) {
  (void)state;
  /* Valid characters of two, three and four bytes, at the ends of their ranges, go as they are. */
  json_escape_is("caf\xc3\xa9 \xc2\x80\xdf\xbf", "caf\xc3\xa9 \xc2\x80\xdf\xbf");
  json_escape_is("\xe0\xa0\x80\xed\x9f\xbf\xef\xbf\xbf", "\xe0\xa0\x80\xed\x9f\xbf\xef\xbf\xbf");
  json_escape_is("\xf0\x90\x80\x80\xf4\x8f\xbf\xbf", "\xf0\x90\x80\x80\xf4\x8f\xbf\xbf");
  /* Overlong forms, surrogates, code points over U+10FFFF, a lone continuation, a cut character. */
  json_escape_is("\xc0\xaf", "\\ufffd\\ufffd");
  json_escape_is("\xe0\x80\xaf", "\\ufffd\\ufffd\\ufffd");
  json_escape_is("\xed\xa0\x80", "\\ufffd\\ufffd\\ufffd");
  json_escape_is("\xf4\x90\x80\x80", "\\ufffd\\ufffd\\ufffd\\ufffd");
  json_escape_is("\xf5\x80", "\\ufffd\\ufffd");
  json_escape_is(
      "a\x80"
      "b",
      "a\\ufffdb");
  json_escape_is("\xe2\x82", "\\ufffd\\ufffd");
  json_escape_is("\xe2\x82\"", "\\ufffd\\ufffd\\\"");
}

static uint64_t siphash_of(const unsigned char *msg, size_t len, size_t piece) {
  unsigned char key[16];
  for (int i = 0; i < 16; i++) key[i] = (unsigned char)i;
  struct util_siphash h;
  util_siphash_init(&h, key);
  for (size_t at = 0; at < len; at += piece) util_siphash_update(&h, msg + at, len - at < piece ? len - at : piece);
  return util_siphash_final(&h);
}

static void test_siphash_matches_the_reference_vectors_however_fed(void **state) {
  (void)state;
  /* The SipHash-2-4 paper's vectors: key 00..0f, messages 00, 01, .. of length 0, 8 and 15. */
  unsigned char msg[15];
  for (int i = 0; i < 15; i++) msg[i] = (unsigned char)i;
  assert_true(siphash_of(msg, 0, 1) == UINT64_C(0x726fdb47dd0e0e31));
  assert_true(siphash_of(msg, 8, 8) == UINT64_C(0x93f5f5799a932462));
  for (size_t piece = 1; piece <= 15; piece++) assert_true(siphash_of(msg, 15, piece) == UINT64_C(0xa129ca6149be45e5));
}

/* mkdir -p: several levels at once, 0700 each, a directory already there is fine, a file in the way is refused. */
static void test_make_dirs_makes_every_level_and_refuses_a_file(void **state) {
  (void)state;
  const char *tmp = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
  char top[512], deep[600], file[600], under[700];
  snprintf(top, sizeof(top), "%s/vts-test-dirs.XXXXXX", tmp);
  assert_non_null(mkdtemp(top));
  snprintf(deep, sizeof(deep), "%s/a/b/c", top);
  assert_int_equal(util_make_dirs(deep), 0);
  struct stat st;
  assert_int_equal(stat(deep, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(st.st_mode & 0077, 0); /* 0700 or less */
  assert_int_equal(util_make_dirs(deep), 0);
  snprintf(file, sizeof(file), "%s/a/file", top);
  FILE *fp = fopen(file, "w");
  assert_non_null(fp);
  fclose(fp);
  assert_int_equal(util_make_dirs(file), -ENOTDIR);
  snprintf(under, sizeof(under), "%s/x", file);
  assert_int_equal(util_make_dirs(under), -ENOTDIR);
  assert_int_equal(util_make_dirs(""), -ENAMETOOLONG);
  assert_int_equal(unlink(file), 0);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(rmdir(deep), 0);
    *strrchr(deep, '/') = '\0';
  }
  assert_int_equal(rmdir(top), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_json_escape_keeps_utf8_and_replaces_every_invalid_byte),
      cmocka_unit_test(test_siphash_matches_the_reference_vectors_however_fed),
      cmocka_unit_test(test_decimal_digits),
      cmocka_unit_test(test_json_escape_of_every_byte),
      cmocka_unit_test(test_builder_appends_and_stops_at_the_first_piece_that_does_not_fit),
      cmocka_unit_test(test_copy_cuts_to_fit_and_terminates),
      cmocka_unit_test(test_hex_and_sha256),
      cmocka_unit_test(test_random_bytes_differ_between_draws),
      cmocka_unit_test(test_make_dirs_makes_every_level_and_refuses_a_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
