/* Unit tests of the route and status tables of the gateway's HTTP side. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <llhttp.h>

#include "gateway/http/errors.h"
#include "gateway/http/routes.h"
#include "gateway/http/status.h"

static void test_a_route_is_found_by_its_exact_path_only(void **state) {
  (void)state;
  assert_int_equal(route_find("/health", 7), ROUTE_HEALTH);
  assert_int_equal(route_find("/v1/video/tracks", 16), ROUTE_TRACKS);
  assert_int_equal(route_find("/ready", 6), ROUTE_READY);
  assert_string_equal(route_label(ROUTE_READY), "/ready");
  assert_int_equal(route_find("/health/", 8), ROUTE_OTHER);
  assert_int_equal(route_find("/healt", 6), ROUTE_OTHER);
  assert_int_equal(route_find("", 0), ROUTE_OTHER);
  assert_string_equal(route_label(ROUTE_TRANSCRIPT), "/v1/video/transcript");
  assert_string_equal(route_label(ROUTE_OTHER), "other");
}

static void test_metrics_is_served_on_the_metrics_listener_only(void **state) {
  (void)state;
  assert_true(route_served_by(ROUTE_METRICS, ROUTE_SERVER_METRICS));
  assert_false(route_served_by(ROUTE_METRICS, ROUTE_SERVER_PUBLIC));
  assert_true(route_served_by(ROUTE_HEALTH, ROUTE_SERVER_PUBLIC));
  assert_false(route_served_by(ROUTE_HEALTH, ROUTE_SERVER_METRICS));
  assert_true(route_served_by(ROUTE_READY, ROUTE_SERVER_PUBLIC));
  assert_false(route_served_by(ROUTE_READY, ROUTE_SERVER_METRICS));
  assert_false(route_served_by(ROUTE_OTHER, ROUTE_SERVER_PUBLIC));
}

static void test_methods_and_allow_header_come_from_the_row(void **state) {
  (void)state;
  assert_true(route_allows(ROUTE_TRANSCRIPT, HTTP_GET));
  assert_true(route_allows(ROUTE_TRANSCRIPT, HTTP_HEAD));
  assert_false(route_allows(ROUTE_TRANSCRIPT, HTTP_POST));
  assert_false(route_allows(ROUTE_TRANSCRIPT, -1));
  assert_false(route_allows(ROUTE_OTHER, HTTP_GET));
  char allow[ROUTE_ALLOW_BYTES];
  assert_string_equal(route_allow_header(ROUTE_HEALTH, allow, sizeof(allow)), "Allow: GET, HEAD\r\n");
}

static void test_statuses_have_their_reason_phrases(void **state) {
  (void)state;
  assert_string_equal(http_status_reason(304), "Not Modified");
  assert_string_equal(http_status_reason(413), "Content Too Large");
  assert_string_equal(http_status_reason(418), "Unknown");
  assert_int_equal(http_status_index(418), HTTP_NSTATUS);
  for (int i = 0; i < HTTP_NSTATUS; i++) assert_int_equal(http_status_index(http_status_code(i)), i);
}

/* An error answer whose status had no row would go out as "Unknown" and be counted as "other". */
static void test_every_error_status_has_a_row(void **state) {
  (void)state;
  for (int e = API_OK + 1; e < API_ERR__COUNT; e++) {
    const struct api_error_info *info = api_error_get((enum api_error)e);
    if (http_status_index(info->status) == HTTP_NSTATUS)
      fail_msg("error %s: status %d has no row", info->code, info->status);
  }
  const struct api_error_info *nf = api_error_get(API_ERR_NOT_FOUND);
  assert_int_equal(nf->status, 404);
  assert_string_equal(nf->body, "{\"error\":{\"code\":\"not_found\",\"message\":\"No such resource.\"}}");
  assert_int_equal(nf->body_len, strlen(nf->body));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_route_is_found_by_its_exact_path_only),
      cmocka_unit_test(test_metrics_is_served_on_the_metrics_listener_only),
      cmocka_unit_test(test_methods_and_allow_header_come_from_the_row),
      cmocka_unit_test(test_statuses_have_their_reason_phrases),
      cmocka_unit_test(test_every_error_status_has_a_row),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
