/* Unit tests of the route and status tables of the gateway's HTTP side. */
#include <errno.h>
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

#define FIND(s) route_find(s, sizeof(s) - 1)

static void test_an_id_segment_matches_one_segment_of_id_characters(void **state) {
  (void)state;
  assert_int_equal(FIND("/v1/jobs"), ROUTE_JOBS);
  assert_int_equal(FIND("/v1/jobs/j01a2"), ROUTE_JOB);
  assert_int_equal(FIND("/v1/jobs/j01a2/items"), ROUTE_JOB_ITEMS);
  assert_int_equal(FIND("/v1/jobs/"), ROUTE_OTHER);
  assert_int_equal(FIND("/v1/jobs//items"), ROUTE_OTHER);
  assert_int_equal(FIND("/v1/jobs/a/b"), ROUTE_OTHER);
  assert_int_equal(FIND("/v1/jobs/a/b/items"), ROUTE_OTHER);
  assert_int_equal(FIND("/v1/jobs/a.b"), ROUTE_OTHER);
  assert_int_equal(FIND("/v1/jobs/a%2Fb"), ROUTE_OTHER);
  assert_int_equal(FIND("/v1/jobs/a/items/"), ROUTE_OTHER);
  char longest[9 + ROUTE_ID_MAX + 2];
  memcpy(longest, "/v1/jobs/", 9);
  memset(longest + 9, 'a', ROUTE_ID_MAX + 1);
  assert_int_equal(route_find(longest, 9 + ROUTE_ID_MAX), ROUTE_JOB);
  assert_int_equal(route_find(longest, 9 + ROUTE_ID_MAX + 1), ROUTE_OTHER);
  const char *id = NULL;
  size_t n = 0;
  static const char items[] = "/v1/jobs/j_-9/items";
  assert_int_equal(route_id(ROUTE_JOB_ITEMS, items, sizeof(items) - 1, &id, &n), 0);
  assert_int_equal(n, 4);
  assert_memory_equal(id, "j_-9", 4);
  assert_int_equal(route_id(ROUTE_HEALTH, "/health", 7, &id, &n), -ENOENT);
  assert_int_equal(route_id(ROUTE_JOB, items, sizeof(items) - 1, &id, &n), -ENOENT);
  assert_string_equal(route_label(ROUTE_JOB), "/v1/jobs/{id}");
}

static void test_only_a_post_the_row_allows_reads_a_body(void **state) {
  (void)state;
  assert_true(route_reads_body(ROUTE_JOBS, HTTP_POST));
  assert_false(route_reads_body(ROUTE_JOBS, HTTP_GET));
  assert_false(route_reads_body(ROUTE_JOB, HTTP_DELETE));
  assert_false(route_reads_body(ROUTE_JOB, HTTP_POST));
  assert_false(route_reads_body(ROUTE_TRANSCRIPT, HTTP_POST));
  assert_false(route_reads_body(ROUTE_OTHER, HTTP_POST));
  char allow[ROUTE_ALLOW_BYTES];
  assert_string_equal(route_allow_header(ROUTE_JOBS, allow, sizeof(allow)), "Allow: POST\r\n");
  assert_string_equal(route_allow_header(ROUTE_JOB, allow, sizeof(allow)), "Allow: DELETE, GET, HEAD\r\n");
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
      cmocka_unit_test(test_an_id_segment_matches_one_segment_of_id_characters),
      cmocka_unit_test(test_only_a_post_the_row_allows_reads_a_body),
      cmocka_unit_test(test_metrics_is_served_on_the_metrics_listener_only),
      cmocka_unit_test(test_methods_and_allow_header_come_from_the_row),
      cmocka_unit_test(test_statuses_have_their_reason_phrases),
      cmocka_unit_test(test_every_error_status_has_a_row),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
