/* Unit tests of content negotiation: Accept-Encoding with q-values, identity and "*"; If-None-Match against an ETag. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/http/negotiate.h"

#define ALL (NEGOTIATE_BIT(ENTITY_IDENTITY) | NEGOTIATE_BIT(ENTITY_GZIP) | NEGOTIATE_BIT(ENTITY_BR))
#define GZ_ONLY (NEGOTIATE_BIT(ENTITY_IDENTITY) | NEGOTIATE_BIT(ENTITY_GZIP))
#define IDENTITY_ONLY NEGOTIATE_BIT(ENTITY_IDENTITY)

static enum entity_coding pick(const char *ae, unsigned available) {
  return negotiate_coding(ae, ae != NULL ? strlen(ae) : 0, available);
}

static void test_no_header_or_empty_value_is_identity(void **state) {
  (void)state;
  assert_int_equal(pick(NULL, ALL), ENTITY_IDENTITY);
  assert_int_equal(pick("", ALL), ENTITY_IDENTITY);
  assert_int_equal(pick("  ", ALL), ENTITY_IDENTITY);
  assert_int_equal(pick("identity", ALL), ENTITY_IDENTITY);
}

static void test_named_codings_pick_the_smallest_held_form(void **state) {
  (void)state;
  assert_int_equal(pick("gzip", ALL), ENTITY_GZIP);
  assert_int_equal(pick("br", ALL), ENTITY_BR);
  assert_int_equal(pick("gzip, br", ALL), ENTITY_BR);
  assert_int_equal(pick("gzip, deflate, br, zstd", ALL), ENTITY_BR);
  assert_int_equal(pick("GZIP", ALL), ENTITY_GZIP);
  assert_int_equal(pick("x-gzip", ALL), ENTITY_GZIP);
  assert_int_equal(pick("deflate, zstd", ALL), ENTITY_IDENTITY);
  /* A form the entity does not hold (a small body) is never sent. */
  assert_int_equal(pick("gzip, br", GZ_ONLY), ENTITY_GZIP);
  assert_int_equal(pick("gzip, br", IDENTITY_ONLY), ENTITY_IDENTITY);
}

static void test_q_values_rank_and_q0_refuses(void **state) {
  (void)state;
  assert_int_equal(pick("br;q=0.5, gzip", ALL), ENTITY_GZIP);
  assert_int_equal(pick("br;q=0.5, gzip;q=0.8", ALL), ENTITY_GZIP);
  assert_int_equal(pick("br;q=1.0, gzip;q=0.999", ALL), ENTITY_BR);
  assert_int_equal(pick("gzip;q=0, br;q=0", ALL), ENTITY_IDENTITY);
  assert_int_equal(pick("gzip ; Q=0.7 , identity;q=0.5", ALL), ENTITY_GZIP);
  assert_int_equal(pick("gzip;q=0.4, identity;q=0.5", ALL), ENTITY_IDENTITY);
  assert_int_equal(pick("br;level=5;q=0.9, gzip;q=0.1", ALL), ENTITY_BR);
  assert_int_equal(pick("gzip;foo=\"a,b\";q=0.2, identity;q=0.1", ALL), ENTITY_GZIP);
  /* The highest q of a coding named twice counts. */
  assert_int_equal(pick("gzip;q=0.1, gzip;q=0.9, br;q=0.5", ALL), ENTITY_GZIP);
}

static void test_malformed_q_values_drop_their_element(void **state) {
  (void)state;
  assert_int_equal(pick("gzip;q=2", ALL), ENTITY_IDENTITY);
  assert_int_equal(pick("gzip;q=1.5", ALL), ENTITY_IDENTITY);
  assert_int_equal(pick("gzip;q=0.0001", ALL), ENTITY_IDENTITY);
  assert_int_equal(pick("gzip;q=", ALL), ENTITY_IDENTITY);
  assert_int_equal(pick("gzip;q=abc, br;q=0.3", ALL), ENTITY_BR);
  assert_int_equal(pick("gzip junk, br", ALL), ENTITY_BR);
  assert_int_equal(pick(";;;,,,", ALL), ENTITY_IDENTITY);
}

static void test_star_and_identity_rules(void **state) {
  (void)state;
  assert_int_equal(pick("*", ALL), ENTITY_BR);
  assert_int_equal(pick("*", IDENTITY_ONLY), ENTITY_IDENTITY);
  assert_int_equal(pick("br;q=0, *", ALL), ENTITY_GZIP);
  assert_int_equal(pick("*;q=0.5, gzip", ALL), ENTITY_GZIP);
  /* Identity refused and nothing else acceptable held: identity all the same, never a 406. */
  assert_int_equal(pick("identity;q=0", IDENTITY_ONLY), ENTITY_IDENTITY);
  assert_int_equal(pick("*;q=0", ALL), ENTITY_IDENTITY);
  assert_int_equal(pick("identity;q=0, gzip;q=0.1", ALL), ENTITY_GZIP);
  assert_int_equal(pick("*;q=0, identity", ALL), ENTITY_IDENTITY);
}

static int match(const char *inm, const char *etag) {
  return entity_etag_match(inm, inm != NULL ? strlen(inm) : 0, etag);
}

static void test_if_none_match_lists_and_weak_comparison(void **state) {
  (void)state;
  const char *etag = "\"0123abcd-gz\"";
  assert_int_equal(match(NULL, etag), 0);
  assert_int_equal(match("", etag), 0);
  assert_int_equal(match("\"0123abcd-gz\"", etag), 1);
  assert_int_equal(match("W/\"0123abcd-gz\"", etag), 1);
  assert_int_equal(match("\"0123abcd\"", etag), 0); /* another form's tag */
  assert_int_equal(match("\"0123abcd-br\"", etag), 0);
  assert_int_equal(match("\"x\", \"0123abcd-gz\"", etag), 1);
  assert_int_equal(match("\"x\",W/\"y\" ,  \"0123abcd-gz\"  ", etag), 1);
  assert_int_equal(match("*", etag), 1);
  assert_int_equal(match("  *  ", etag), 1);
}

static void test_malformed_if_none_match_matches_nothing(void **state) {
  (void)state;
  const char *etag = "\"0123abcd\"";
  assert_int_equal(match("0123abcd", etag), 0);
  assert_int_equal(match("\"0123abcd", etag), 0);
  assert_int_equal(match("*, \"0123abcd\"", etag), 0);
  assert_int_equal(match("junk, \"0123abcd\"", etag), 0);
  assert_int_equal(match("w/\"0123abcd\"", etag), 0); /* W is upper case */
  assert_int_equal(match("\"0123abcd\"", "\"0123abc\""), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_header_or_empty_value_is_identity),
      cmocka_unit_test(test_named_codings_pick_the_smallest_held_form),
      cmocka_unit_test(test_q_values_rank_and_q0_refuses),
      cmocka_unit_test(test_malformed_q_values_drop_their_element),
      cmocka_unit_test(test_star_and_identity_rules),
      cmocka_unit_test(test_if_none_match_lists_and_weak_comparison),
      cmocka_unit_test(test_malformed_if_none_match_matches_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
