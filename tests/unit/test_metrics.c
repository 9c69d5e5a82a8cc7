/* Unit tests of the shared metrics region and its Prometheus text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "gateway/metrics/metrics.h"
#include "proto/proto.h"

static int setup(void **state) {
  (void)state;
  return metrics_init();
}

static void test_requests_from_two_worker_processes_are_summed(void **state) {
  (void)state;
  for (int w = 0; w < 2; w++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      metrics_set_worker(w);
      metrics_request(MR_HEALTH, 200, 300);
      metrics_request(MR_TRANSCRIPT, 401, 1500);
      _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
  }
  struct buf b = BUF_INIT;
  assert_int_equal(metrics_render(&b), 0);
  assert_non_null(strstr(b.data, "vts_http_requests_total{route=\"/health\",status=\"200\"} 2\n"));
  assert_non_null(strstr(b.data, "vts_http_requests_total{route=\"/v1/video/transcript\",status=\"401\"} 2\n"));
  /* 300 us lands in the first bucket (0.5 ms); 1.5 ms in the 2.5 ms bucket. */
  assert_non_null(strstr(b.data, "vts_http_request_duration_seconds_bucket{route=\"/health\",le=\"0.0005\"} 2\n"));
  assert_non_null(
      strstr(b.data, "vts_http_request_duration_seconds_bucket{route=\"/v1/video/transcript\",le=\"0.001\"} 0\n"));
  assert_non_null(
      strstr(b.data, "vts_http_request_duration_seconds_bucket{route=\"/v1/video/transcript\",le=\"0.0025\"} 2\n"));
  assert_non_null(strstr(b.data, "vts_http_request_duration_seconds_count{route=\"/health\"} 2\n"));
  buf_free(&b);
}

static void test_unlisted_status_counts_as_other(void **state) {
  (void)state;
  metrics_set_worker(5);
  metrics_request(MR_OTHER, 418, 10);
  struct buf b = BUF_INIT;
  assert_int_equal(metrics_render(&b), 0);
  assert_non_null(strstr(b.data, "vts_http_requests_total{route=\"other\",status=\"other\"} 1\n"));
  buf_free(&b);
}

static void test_upstream_outcomes_map_to_fixed_kinds(void **state) {
  (void)state;
  assert_int_equal(metrics_upstream_kind(PROTO_OK, PROTO_REASON_NONE), MU_OK);
  assert_int_equal(metrics_upstream_kind(PROTO_NO_CAPTIONS, PROTO_REASON_NO_CAPTIONS), MU_NO_CAPTIONS);
  assert_int_equal(metrics_upstream_kind(PROTO_NOT_AVAILABLE, PROTO_REASON_NOT_PLAYABLE), MU_NOT_AVAILABLE);
  assert_int_equal(metrics_upstream_kind(PROTO_INTERNAL, PROTO_REASON_INTERNAL), MU_INTERNAL);
  assert_int_equal(metrics_upstream_kind(PROTO_UPSTREAM_FAILED, PROTO_REASON_HTTP_5XX), MU_HTTP_5XX);
  assert_int_equal(metrics_upstream_kind(PROTO_UPSTREAM_FAILED, PROTO_REASON_RECAPTCHA), MU_RECAPTCHA);
  assert_int_equal(metrics_upstream_kind(PROTO_UPSTREAM_FAILED, PROTO_REASON_TIMEOUT), MU_TIMEOUT);
  assert_int_equal(metrics_upstream_kind(PROTO_UPSTREAM_FAILED, PROTO_REASON_MALFORMED), MU_MALFORMED);
  assert_int_equal(metrics_upstream_kind(PROTO_UPSTREAM_FAILED, PROTO_REASON_PO_TOKEN), MU_PO_TOKEN);
  assert_int_equal(metrics_upstream_kind(PROTO_UPSTREAM_FAILED, PROTO_REASON_NETWORK), MU_NETWORK);
  assert_int_equal(metrics_upstream_kind(PROTO_UPSTREAM_FAILED, PROTO_REASON_RATIONED), MU_RATIONED);
  assert_int_equal(metrics_upstream_kind(PROTO_UPSTREAM_FAILED, PROTO_REASON_CLIENT_OUTDATED), MU_CLIENT_OUTDATED);
  assert_int_equal(metrics_upstream_kind(PROTO_UPSTREAM_FAILED, PROTO_REASON_WRONG_VIDEO), MU_WRONG_VIDEO);
  assert_int_equal(metrics_upstream_kind(PROTO_UPSTREAM_FAILED, PROTO_REASON_TRANSLATION_THROTTLED),
                   MU_TRANSLATION_THROTTLED);
  assert_int_equal(metrics_upstream_kind(PROTO_UPSTREAM_FAILED, PROTO_REASON_SPEECH), MU_OTHER);
  struct proto_result r = {.outcome = PROTO_UPSTREAM_FAILED, .reason = PROTO_REASON_HTTP_429};
  metrics_upstream(&r);
  metrics_upstream(&r);
  r.reason = PROTO_REASON_NETWORK;
  r.nattempts = 3;
  r.attempts[0] = (struct proto_attempt){.proxy = 1, .result = PROTO_ATTEMPT_BLOCKED, .client = "VISIONOS"};
  r.attempts[1] = (struct proto_attempt){.proxy = 2, .result = PROTO_ATTEMPT_OK, .client = "ANDROID"};
  r.attempts[2] = (struct proto_attempt){.proxy = 2, .result = PROTO_ATTEMPT_FAILED, .client = "bad\"name"};
  metrics_upstream(&r);
  struct buf b = BUF_INIT;
  assert_int_equal(metrics_render(&b), 0);
  assert_non_null(strstr(b.data, "vts_upstream_outcomes_total{kind=\"http_429\"} 2\n"));
  assert_non_null(strstr(b.data, "vts_upstream_outcomes_total{kind=\"network\"} 1\n"));
  assert_non_null(strstr(b.data, "vts_upstream_proxy_attempts_total{proxy=\"2\"} 2\n"));
  assert_non_null(strstr(b.data, "vts_upstream_proxy_blocks_total{proxy=\"1\"} 1\n"));
  assert_non_null(strstr(b.data, "vts_upstream_proxy_successes_total{proxy=\"2\"} 1\n"));
  assert_non_null(strstr(b.data, "vts_upstream_client_blocks_total{client=\"VISIONOS\"} 1\n"));
  assert_non_null(strstr(b.data, "vts_upstream_client_successes_total{client=\"ANDROID\"} 1\n"));
  assert_non_null(strstr(b.data, "vts_upstream_client_attempts_total{client=\"other\"} 1\n"));
  assert_null(strstr(b.data, "bad\"name"));
  buf_free(&b);
}

static void test_every_family_has_help_and_type(void **state) {
  (void)state;
  struct buf b = BUF_INIT;
  assert_int_equal(metrics_render(&b), 0);
  const char *names[] = {"vts_http_requests_total",
                         "vts_http_request_duration_seconds",
                         "vts_cache_hits_total",
                         "vts_cache_misses_total",
                         "vts_coalesced_requests_total",
                         "vts_jobs_queued",
                         "vts_jobs_in_flight",
                         "vts_speech_jobs_in_flight",
                         "vts_dispatch_jobs_declined_total",
                         "vts_dispatch_results_refused_total",
                         "vts_dispatch_fetchers_refused_total",
                         "vts_dispatch_rejected_full_total",
                         "vts_dispatch_protocol_errors_total",
                         "vts_dispatch_claims_won_total",
                         "vts_dispatch_claims_waited_total",
                         "vts_dispatch_claim_takeovers_total",
                         "vts_dispatch_redis_hits_total",
                         "vts_jobs_waiting",
                         "vts_fetchers_connected",
                         "vts_fetchers_idle",
                         "vts_upstream_outcomes_total",
                         "vts_ratelimit_store_errors_total",
                         "vts_ratelimit_fallbacks_total",
                         "vts_worker_restarts_total",
                         "vts_jobs_total"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    char help[128], type[128];
    snprintf(help, sizeof(help), "# HELP %s ", names[i]);
    snprintf(type, sizeof(type), "# TYPE %s ", names[i]);
    if (strstr(b.data, help) == NULL || strstr(b.data, type) == NULL) fail_msg("no HELP/TYPE for %s", names[i]);
  }
  buf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_requests_from_two_worker_processes_are_summed),
      cmocka_unit_test(test_unlisted_status_counts_as_other),
      cmocka_unit_test(test_upstream_outcomes_map_to_fixed_kinds),
      cmocka_unit_test(test_every_family_has_help_and_type),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
