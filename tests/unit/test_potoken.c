/*
 * Unit tests of the PO-token provider client's pure parts: the request URL and the origin logs name, a provider's
 * reply, how long a token is kept, and the RFC 3339 dates its expiry is written in.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "common/config.h"
#include "common/limits.h"
#include "common/util.h"
#include "fetcher/platform/potoken.h"

static void assert_request_url(const char *base, int want_rv, const char *want_url, const char *want_origin) {
  struct buf out = BUF_INIT;
  char origin[128] = "";
  int rv = potoken_request_url(base, &out, origin, sizeof(origin));
  if (rv != want_rv) fail_msg("%s: returned %d, expected %d", base, rv, want_rv);
  if (want_url != NULL) assert_string_equal(out.data, want_url);
  if (want_origin != NULL) assert_string_equal(origin, want_origin);
  buf_free(&out);
}

/* /get_pot goes after the base's path; credentials and query stay in the URL, never in the origin. */
static void test_request_url_keeps_credentials_out_of_the_origin(void **state) {
  (void)state;
  assert_request_url("http://127.0.0.1:4416", 0, "http://127.0.0.1:4416/get_pot", "http://127.0.0.1:4416");
  assert_request_url("http://127.0.0.1:4416/", 0, "http://127.0.0.1:4416/get_pot", "http://127.0.0.1:4416");
  assert_request_url("https://user:s3cret@pot.example.com/base//?key=q5ecret", 0,
                     "https://user:s3cret@pot.example.com/base/get_pot?key=q5ecret", "https://pot.example.com");
  assert_request_url("http://bgutil:4416/v2", 0, "http://bgutil:4416/v2/get_pot", "http://bgutil:4416");
  assert_request_url("ftp://127.0.0.1:4416", -EINVAL, NULL, NULL);
  assert_request_url("http://127.0.0.1:4416/#frag", -EINVAL, NULL, NULL);
  assert_request_url("127.0.0.1:4416", -EINVAL, NULL, NULL);
  assert_request_url("", -EINVAL, NULL, NULL);
}

/* A bad URL is refused at start with a message that does not repeat it (it may hold credentials). */
static void test_a_bad_provider_url_is_refused_without_its_secret(void **state) {
  (void)state;
  struct potoken *p = NULL;
  char err[256] = "";
  assert_int_equal(potoken_new("gopher://user:hunter2@host", 1000, &p, err, sizeof(err)), -EINVAL);
  assert_null(p);
  assert_non_null(strstr(err, "VTS_POT_PROVIDER_URL: invalid value"));
  assert_null(strstr(err, "hunter2"));
  assert_int_equal(potoken_new("http://user:hunter2@127.0.0.1:1", 1000, &p, err, sizeof(err)), 0);
  assert_non_null(p);
  potoken_free(p);
}

/* A provider URL too long for its setting is refused at start without repeating it: its start is the credentials. */
static void test_a_provider_url_too_long_is_refused_without_its_secret(void **state) {
  (void)state;
  char url[CONFIG_STR_MAX + 64];
  int n = snprintf(url, sizeof(url), "http://user:hunter2@");
  memset(url + n, 'a', CONFIG_STR_MAX);
  snprintf(url + n + CONFIG_STR_MAX, sizeof(url) - (size_t)n - CONFIG_STR_MAX, ".example/");
  assert_int_equal(setenv("VTS_POT_PROVIDER_URL", url, 1), 0);
  struct vts_config *cfg = malloc(sizeof(*cfg));
  assert_non_null(cfg);
  char err[512] = "";
  int rv = config_load(cfg, err, sizeof(err));
  unsetenv("VTS_POT_PROVIDER_URL");
  free(cfg);
  assert_int_equal(rv, -EINVAL);
  assert_string_equal(err,
                      "VTS_POT_PROVIDER_URL: invalid value: expected a shorter string (the value is not repeated: "
                      "it may hold credentials)");
}

static int parse(const char *body, char *token, int64_t *expires) {
  return potoken_parse_reply(body, strlen(body), "vid00000001", token, VTS_POT_MAX_TOKEN_BYTES + 1, expires);
}

/* The reply of the bgutil server: poToken, contentBinding as sent, expiresAt as a JavaScript Date writes it. */
static void test_a_provider_reply_gives_its_token_and_expiry(void **state) {
  (void)state;
  char token[VTS_POT_MAX_TOKEN_BYTES + 1];
  int64_t expires = 0;
  assert_int_equal(parse("{\"poToken\":\"MnQ-_xyz=\",\"contentBinding\":\"vid00000001\","
                         "\"expiresAt\":\"2026-11-26T23:55:47.123Z\"}",
                         token, &expires),
                   0);
  assert_string_equal(token, "MnQ-_xyz=");
  assert_int_equal(expires, 1795737347123LL);
  /* The plug-in only needs poToken: without an expiry the token is used, never kept. */
  assert_int_equal(parse("{\"poToken\":\"abc\",\"extra\":{\"a\":[1]}}", token, &expires), 0);
  assert_string_equal(token, "abc");
  assert_int_equal(expires, -1);
}

static void test_a_refusal_or_a_reply_out_of_shape_gives_no_token(void **state) {
  (void)state;
  char token[VTS_POT_MAX_TOKEN_BYTES + 1];
  int64_t expires = 0;
  assert_int_equal(parse("{\"error\":\"Failed to mint\"}", token, &expires), -EACCES);
  assert_int_equal(parse("{\"poToken\":\"abc\",\"error\":{\"why\":1}}", token, &expires), -EACCES);
  assert_int_equal(parse("{\"poToken\":\"abc\",\"contentBinding\":\"other000001\"}", token, &expires), -EPROTO);
  assert_int_equal(parse("{\"poToken\":\"ab c\"}", token, &expires), -EPROTO);
  assert_int_equal(parse("{\"poToken\":\"ab&c=d\"}", token, &expires), -EPROTO);
  assert_int_equal(parse("{\"poToken\":\"\"}", token, &expires), -EPROTO);
  assert_int_equal(parse("{\"poToken\":7}", token, &expires), -EPROTO);
  assert_int_equal(parse("{\"poToken\":\"abc\",\"expiresAt\":\"tomorrow\"}", token, &expires), -EPROTO);
  /* An expiry before 1970 is long past: not "no expiry" (-1, what 1969-12-31T23:59:59.999Z came to), not usable. */
  assert_int_equal(parse("{\"poToken\":\"abc\",\"expiresAt\":\"1969-12-31T23:59:59.999Z\"}", token, &expires), -EPROTO);
  assert_int_equal(parse("{\"poToken\":\"abc\",\"expiresAt\":\"0001-01-01T00:00:00Z\"}", token, &expires), -EPROTO);
  assert_int_equal(parse("{\"contentBinding\":\"vid00000001\"}", token, &expires), -EPROTO);
  assert_int_equal(parse("[\"abc\"]", token, &expires), -EPROTO);
  assert_int_equal(parse("{\"poToken\":\"abc\"", token, &expires), -EPROTO);
  assert_string_equal(token, "");
  char big[VTS_POT_MAX_TOKEN_BYTES + 32];
  int n = snprintf(big, sizeof(big), "{\"poToken\":\"");
  memset(big + n, 'A', VTS_POT_MAX_TOKEN_BYTES + 1);
  snprintf(big + n + VTS_POT_MAX_TOKEN_BYTES + 1, sizeof(big) - (size_t)n - VTS_POT_MAX_TOKEN_BYTES - 1, "\"}");
  assert_int_equal(parse(big, token, &expires), -EPROTO);
}

/* Kept until the margin before the expiry, at most the longest lifetime; nothing kept when none is said or left. */
static void test_a_token_is_kept_until_shortly_before_its_expiry(void **state) {
  (void)state;
  int64_t now = 1795737347000LL;
  assert_int_equal(potoken_keep_ms(now + 3600 * 1000, now), 3600 * 1000 - VTS_POT_EXPIRY_MARGIN_MS);
  assert_int_equal(potoken_keep_ms(now + VTS_POT_EXPIRY_MARGIN_MS + 1, now), 1);
  assert_int_equal(potoken_keep_ms(now + VTS_POT_EXPIRY_MARGIN_MS, now), 0);
  assert_int_equal(potoken_keep_ms(now - 1, now), 0);
  assert_int_equal(potoken_keep_ms(-1, now), 0);
  assert_int_equal(potoken_keep_ms(now + 100LL * 24 * 3600 * 1000, now), (uint64_t)VTS_POT_MAX_LIFETIME_S * 1000);
}

static void assert_date(const char *s, int want_rv, int64_t want_ms) {
  int64_t ms = -7;
  int rv = util_parse_rfc3339(s, strlen(s), &ms);
  if (rv != want_rv) fail_msg("%s: returned %d, expected %d", s, rv, want_rv);
  if (rv == 0 && ms != want_ms) fail_msg("%s: %lld ms, expected %lld", s, (long long)ms, (long long)want_ms);
}

static void test_rfc3339_dates_are_read_to_the_millisecond(void **state) {
  (void)state;
  assert_date("1970-01-01T00:00:00Z", 0, 0);
  assert_date("2026-11-26T23:55:47.123Z", 0, 1795737347123LL);
  assert_date("2026-11-26T23:55:47.1234567Z", 0, 1795737347123LL);
  assert_date("2026-11-26T23:55:47.5z", 0, 1795737347500LL);
  assert_date("2026-11-27T00:55:47+01:00", 0, 1795737347000LL);
  assert_date("2026-11-26T22:55:47-01:00", 0, 1795737347000LL);
  assert_date("2024-02-29T00:00:00Z", 0, 1709164800000LL);
  assert_date("2026-02-29T00:00:00Z", -EINVAL, 0);
  assert_date("2026-11-31T00:00:00Z", -EINVAL, 0);
  assert_date("2026-11-26T24:00:00Z", -EINVAL, 0);
  assert_date("2026-11-26T23:55:47", -EINVAL, 0);
  assert_date("2026-11-26T23:55:47.Z", -EINVAL, 0);
  assert_date("2026-11-26T23:55:47Zx", -EINVAL, 0);
  assert_date("2026-11-26 23:55:47+0100", -EINVAL, 0);
  assert_date("26-11-26T23:55:47Z", -EINVAL, 0);
  assert_date("", -EINVAL, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_request_url_keeps_credentials_out_of_the_origin),
      cmocka_unit_test(test_a_bad_provider_url_is_refused_without_its_secret),
      cmocka_unit_test(test_a_provider_url_too_long_is_refused_without_its_secret),
      cmocka_unit_test(test_a_provider_reply_gives_its_token_and_expiry),
      cmocka_unit_test(test_a_refusal_or_a_reply_out_of_shape_gives_no_token),
      cmocka_unit_test(test_a_token_is_kept_until_shortly_before_its_expiry),
      cmocka_unit_test(test_rfc3339_dates_are_read_to_the_millisecond),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
