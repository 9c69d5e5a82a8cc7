/* Unit tests of the shared metrics region and its Prometheus text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "gateway/dispatcher/counters.h"
#include "gateway/http/routes.h"
#include "gateway/metrics/metrics.h"
#include "proto/proto.h"

static int setup(void **state) {
  (void)state;
  routes_metrics_register();
  counters_metrics_register();
  return metrics_init();
}

static void test_requests_from_two_worker_processes_are_summed(void **state) {
  (void)state;
  for (int w = 0; w < 2; w++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      metrics_set_worker(w);
      metrics_request(ROUTE_HEALTH, 200, 300);
      metrics_request(ROUTE_TRANSCRIPT, 401, 1500);
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

/* Loop turns of two workers, summed: each in its bucket (cumulative), their sum and count. */
static void test_loop_turns_of_two_workers_are_summed(void **state) {
  (void)state;
  for (int w = 10; w < 12; w++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      metrics_set_worker(w);
      metrics_loop_turn(40);
      metrics_loop_turn(3000);
      metrics_loop_turn(200000);
      _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
  }
  struct buf b = BUF_INIT;
  assert_int_equal(metrics_render(&b), 0);
  assert_non_null(strstr(b.data, "# TYPE vts_worker_loop_turn_seconds histogram\n"));
  assert_non_null(strstr(b.data, "vts_worker_loop_turn_seconds_bucket{le=\"0.0001\"} 2\n"));
  assert_non_null(strstr(b.data, "vts_worker_loop_turn_seconds_bucket{le=\"0.002\"} 2\n"));
  assert_non_null(strstr(b.data, "vts_worker_loop_turn_seconds_bucket{le=\"0.005\"} 4\n"));
  assert_non_null(strstr(b.data, "vts_worker_loop_turn_seconds_bucket{le=\"0.1\"} 4\n"));
  assert_non_null(strstr(b.data, "vts_worker_loop_turn_seconds_bucket{le=\"+Inf\"} 6\n"));
  assert_non_null(strstr(b.data, "vts_worker_loop_turn_seconds_sum 0.406080\n"));
  assert_non_null(strstr(b.data, "vts_worker_loop_turn_seconds_count 6\n"));
  buf_free(&b);
}

/* The dispatcher's turns: by length and less their waits for a core, each at the bounds of 2, 10 and 20 ms. */
static void test_dispatcher_loop_turns_by_length_and_own_time(void **state) {
  (void)state;
  metrics_dispatcher_loop_turn(2000, 150);
  metrics_dispatcher_loop_turn(10001, 9000);
  metrics_dispatcher_loop_turn(60000, 20000);
  struct buf b = BUF_INIT;
  assert_int_equal(metrics_render(&b), 0);
  assert_non_null(strstr(b.data, "# TYPE vts_dispatcher_loop_turn_seconds histogram\n"));
  assert_non_null(strstr(b.data, "vts_dispatcher_loop_turn_seconds_bucket{le=\"0.001\"} 0\n"));
  assert_non_null(strstr(b.data, "vts_dispatcher_loop_turn_seconds_bucket{le=\"0.002\"} 1\n"));
  assert_non_null(strstr(b.data, "vts_dispatcher_loop_turn_seconds_bucket{le=\"0.01\"} 1\n"));
  assert_non_null(strstr(b.data, "vts_dispatcher_loop_turn_seconds_bucket{le=\"0.02\"} 2\n"));
  assert_non_null(strstr(b.data, "vts_dispatcher_loop_turn_seconds_bucket{le=\"0.05\"} 2\n"));
  assert_non_null(strstr(b.data, "vts_dispatcher_loop_turn_seconds_bucket{le=\"0.1\"} 3\n"));
  assert_non_null(strstr(b.data, "vts_dispatcher_loop_turn_seconds_sum 0.072001\n"));
  assert_non_null(strstr(b.data, "vts_dispatcher_loop_turn_seconds_count 3\n"));
  assert_non_null(strstr(b.data, "# TYPE vts_dispatcher_loop_turn_own_seconds histogram\n"));
  assert_non_null(strstr(b.data, "vts_dispatcher_loop_turn_own_seconds_bucket{le=\"0.00025\"} 1\n"));
  assert_non_null(strstr(b.data, "vts_dispatcher_loop_turn_own_seconds_bucket{le=\"0.005\"} 1\n"));
  assert_non_null(strstr(b.data, "vts_dispatcher_loop_turn_own_seconds_bucket{le=\"0.01\"} 2\n"));
  assert_non_null(strstr(b.data, "vts_dispatcher_loop_turn_own_seconds_bucket{le=\"0.02\"} 3\n"));
  assert_non_null(strstr(b.data, "vts_dispatcher_loop_turn_own_seconds_bucket{le=\"+Inf\"} 3\n"));
  assert_non_null(strstr(b.data, "vts_dispatcher_loop_turn_own_seconds_sum 0.029150\n"));
  buf_free(&b);
}

static void test_unlisted_status_counts_as_other(void **state) {
  (void)state;
  metrics_set_worker(5);
  metrics_request(ROUTE_OTHER, 418, 10);
  struct buf b = BUF_INIT;
  assert_int_equal(metrics_render(&b), 0);
  assert_non_null(strstr(b.data, "vts_http_requests_total{route=\"other\",status=\"other\"} 1\n"));
  buf_free(&b);
}

/* The sample of vts_upstream_outcomes_total for kind in the page rendered now. */
static unsigned long long outcomes_of(const char *kind) {
  struct buf b = BUF_INIT;
  assert_int_equal(metrics_render(&b), 0);
  char line[96];
  snprintf(line, sizeof(line), "\nvts_upstream_outcomes_total{kind=\"%s\"} ", kind);
  const char *at = strstr(b.data, line);
  if (at == NULL) fail_msg("no sample for kind %s", kind);
  unsigned long long n = strtoull(at + strlen(line), NULL, 10);
  buf_free(&b);
  return n;
}

/* One finished job counted: the kind named gains one. */
static void assert_counted_as(uint8_t outcome, uint8_t reason, const char *kind) {
  unsigned long long before = outcomes_of(kind);
  struct proto_result r = {.outcome = outcome, .reason = reason};
  metrics_upstream(&r);
  unsigned long long after = outcomes_of(kind);
  if (after != before + 1)
    fail_msg("outcome %d, reason %s: kind %s went from %llu to %llu, expected one more", outcome,
             proto_reason_name(reason), kind, before, after);
}

static void test_upstream_outcomes_map_to_fixed_kinds(void **state) {
  (void)state;
  assert_counted_as(PROTO_OK, PROTO_REASON_NONE, "ok");
  assert_counted_as(PROTO_NO_CAPTIONS, PROTO_REASON_NO_CAPTIONS, "no_captions");
  assert_counted_as(PROTO_NOT_AVAILABLE, PROTO_REASON_NOT_PLAYABLE, "not_available");
  /* A video that cannot be played, counted apart by the case its reply said. */
  assert_counted_as(PROTO_NOT_AVAILABLE, PROTO_REASON_AGE_RESTRICTED, "age_restricted");
  assert_counted_as(PROTO_NOT_AVAILABLE, PROTO_REASON_MEMBERS_ONLY, "members_only");
  assert_counted_as(PROTO_NOT_AVAILABLE, PROTO_REASON_PRIVATE, "private");
  assert_counted_as(PROTO_NOT_AVAILABLE, PROTO_REASON_REMOVED, "removed");
  assert_counted_as(PROTO_NOT_AVAILABLE, PROTO_REASON_LIVE_NOT_ARCHIVED, "live_not_archived");
  assert_counted_as(PROTO_NOT_AVAILABLE, PROTO_REASON_GEO_RESTRICTED, "geo_restricted");
  /* A 404 of another reason (a language not offered) stays not_available. */
  assert_counted_as(PROTO_NOT_AVAILABLE, PROTO_REASON_NO_CAPTIONS, "not_available");
  assert_counted_as(PROTO_INTERNAL, PROTO_REASON_INTERNAL, "internal");
  assert_counted_as(PROTO_UPSTREAM_FAILED, PROTO_REASON_HTTP_5XX, "http_5xx");
  assert_counted_as(PROTO_UPSTREAM_FAILED, PROTO_REASON_RECAPTCHA, "recaptcha");
  assert_counted_as(PROTO_UPSTREAM_FAILED, PROTO_REASON_TIMEOUT, "timeout");
  assert_counted_as(PROTO_UPSTREAM_FAILED, PROTO_REASON_MALFORMED, "malformed");
  assert_counted_as(PROTO_UPSTREAM_FAILED, PROTO_REASON_PO_TOKEN, "po_token");
  assert_counted_as(PROTO_UPSTREAM_FAILED, PROTO_REASON_NETWORK, "network");
  assert_counted_as(PROTO_UPSTREAM_FAILED, PROTO_REASON_RATIONED, "rationed");
  assert_counted_as(PROTO_UPSTREAM_FAILED, PROTO_REASON_CLIENT_OUTDATED, "client_outdated");
  assert_counted_as(PROTO_UPSTREAM_FAILED, PROTO_REASON_WRONG_VIDEO, "wrong_video");
  assert_counted_as(PROTO_UPSTREAM_FAILED, PROTO_REASON_TRANSLATION_THROTTLED, "translation_throttled");
  assert_counted_as(PROTO_UPSTREAM_FAILED, PROTO_REASON_SPEECH, "other");
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
  /* The second network failure: the first was counted above. */
  assert_non_null(strstr(b.data, "vts_upstream_outcomes_total{kind=\"network\"} 2\n"));
  assert_non_null(strstr(b.data, "vts_upstream_proxy_attempts_total{proxy=\"2\"} 2\n"));
  assert_non_null(strstr(b.data, "vts_upstream_proxy_blocks_total{proxy=\"1\"} 1\n"));
  assert_non_null(strstr(b.data, "vts_upstream_proxy_successes_total{proxy=\"2\"} 1\n"));
  assert_non_null(strstr(b.data, "vts_upstream_client_blocks_total{client=\"VISIONOS\"} 1\n"));
  assert_non_null(strstr(b.data, "vts_upstream_client_successes_total{client=\"ANDROID\"} 1\n"));
  assert_non_null(strstr(b.data, "vts_upstream_client_attempts_total{client=\"other\"} 1\n"));
  assert_null(strstr(b.data, "bad\"name"));
  buf_free(&b);
}

static void test_not_modified_is_counted_as_304(void **state) {
  (void)state;
  metrics_set_worker(6);
  metrics_request(ROUTE_TRANSCRIPT, 304, 10);
  struct buf b = BUF_INIT;
  assert_int_equal(metrics_render(&b), 0);
  assert_non_null(strstr(b.data, "vts_http_requests_total{route=\"/v1/video/transcript\",status=\"304\"} 1\n"));
  assert_null(strstr(b.data, "vts_http_requests_total{route=\"/v1/video/transcript\",status=\"other\"}"));
  buf_free(&b);
}

/* A reason whose name is also a kind's label is counted under that kind, never under "other". */
static void test_a_reason_named_as_a_kind_is_counted_under_it(void **state) {
  (void)state;
  assert_counted_as(PROTO_UPSTREAM_FAILED, PROTO_REASON_INTERNAL, "internal");
  assert_counted_as(PROTO_UPSTREAM_FAILED, PROTO_REASON_NO_CAPTIONS, "no_captions");
  static const char *const labels[MU__COUNT] = {
#define LABEL_(id, label) [MU_##id] = label,
      METRICS_UPSTREAM_KINDS(LABEL_)
#undef LABEL_
  };
  for (int r = 0; r < PROTO_REASON__COUNT; r++) {
    for (int k = 0; k < MU__COUNT; k++)
      if (strcmp(proto_reason_name((uint8_t)r), labels[k]) == 0)
        assert_counted_as(PROTO_UPSTREAM_FAILED, (uint8_t)r, labels[k]);
  }
}

/* The dispatcher's rows as it publishes them: a labelled family has one HELP and one line per row. */
static void test_dispatcher_counters_render_one_line_per_row(void **state) {
  (void)state;
  struct metrics_dispatcher *d = &metrics_shared()->dispatcher;
  atomic_store(&d->counters[DC_jobs_created], 7);
  atomic_store(&d->counters[DC_speech_jobs], 2);
  atomic_store(&d->counters[DC_deadline_expired], 3);
  atomic_store(&d->counters[DC_jobs_waiting], 4);
  atomic_store(&d->counters[DC_late_results], 99);
  struct buf b = BUF_INIT;
  assert_int_equal(metrics_render(&b), 0);
  assert_non_null(strstr(b.data,
                         "# HELP vts_jobs_total Jobs started, by kind.\n# TYPE vts_jobs_total counter\n"
                         "vts_jobs_total{kind=\"captions\"} 7\nvts_jobs_total{kind=\"speech\"} 2\n"));
  const char *help = strstr(b.data, "# HELP vts_jobs_total ");
  assert_null(strstr(help + 1, "# HELP vts_jobs_total "));
  assert_non_null(strstr(b.data, "\nvts_job_deadline_expired_total 3\n"));
  assert_non_null(strstr(b.data, "# TYPE vts_jobs_waiting gauge\nvts_jobs_waiting 4\n"));
  /* A row with no metric name is the core's own: it never shows. */
  assert_null(strstr(b.data, " 99\n"));
  buf_free(&b);
}

/* Renders the page and finds every line of want in it, and absent nowhere (NULL: no check). */
static void assert_rendered(const char *const *want, size_t n, const char *absent) {
  struct buf b = BUF_INIT;
  assert_int_equal(metrics_render(&b), 0);
  for (size_t i = 0; i < n; i++)
    if (strstr(b.data, want[i]) == NULL) fail_msg("not on the page: %s", want[i]);
  if (absent != NULL && strstr(b.data, absent) != NULL) fail_msg("on the page: %s", absent);
  buf_free(&b);
}

/* Budgets by egress position: the latest units left, waits and declines summed; only reported egresses listed. */
static void test_egress_budgets_are_listed_by_position(void **state) {
  (void)state;
  unsigned long long budget_before = outcomes_of("egress_budget");
  struct proto_result r = {.outcome = PROTO_UPSTREAM_FAILED, .reason = PROTO_REASON_BUDGET, .negress = 2};
  r.egress[0] = (struct proto_egress){.egress = 1, .left = 7, .waits = 2, .declines = 1};
  r.egress[1] = (struct proto_egress){.egress = 16, .left = 30, .waits = 0, .declines = 0};
  metrics_upstream(&r);
  r.negress = 1;
  r.egress[0] = (struct proto_egress){.egress = 1, .left = 3, .waits = 5, .declines = 4};
  metrics_upstream(&r);
  static const char *const want[] = {
      "vts_egress_budget_left{egress=\"1\"} 3\n",
      "vts_egress_budget_waits_total{egress=\"1\"} 7\n",
      "vts_egress_budget_declines_total{egress=\"1\"} 5\n",
      "vts_egress_budget_left{egress=\"16\"} 30\n",
  };
  assert_rendered(want, sizeof(want) / sizeof(want[0]), "vts_egress_budget_left{egress=\"0\"}");
  /* Both jobs are counted under the budget's own kind. */
  assert_int_equal(outcomes_of("egress_budget"), budget_before + 2);
}

/* The PO-token provider failures fetchers report in their results are summed into one counter. */
static void test_pot_provider_failures_are_summed(void **state) {
  (void)state;
  struct buf b = BUF_INIT;
  assert_int_equal(metrics_render(&b), 0);
  const char *line = strstr(b.data, "\nvts_pot_provider_failures_total ");
  assert_non_null(line);
  unsigned long long before = strtoull(line + strlen("\nvts_pot_provider_failures_total "), NULL, 10);
  buf_free(&b);
  struct proto_result r = {.outcome = PROTO_UPSTREAM_FAILED, .reason = PROTO_REASON_PO_TOKEN, .pot_failures = 1};
  metrics_upstream(&r);
  r.pot_failures = 3;
  metrics_upstream(&r);
  r = (struct proto_result){.outcome = PROTO_OK};
  metrics_upstream(&r);
  char want[96];
  snprintf(want, sizeof(want), "# TYPE vts_pot_provider_failures_total counter\nvts_pot_provider_failures_total %llu\n",
           before + 4);
  const char *const wants[] = {want};
  assert_rendered(wants, 1, NULL);
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
                         "vts_cache_l1_waits_total",
                         "vts_jobs_queued",
                         "vts_jobs_in_flight",
                         "vts_speech_jobs_in_flight",
                         "vts_dispatch_jobs_declined_total",
                         "vts_dispatch_results_refused_total",
                         "vts_dispatch_fetchers_refused_total",
                         "vts_link_handshake_failures_total",
                         "vts_dispatch_rejected_full_total",
                         "vts_dispatch_protocol_errors_total",
                         "vts_dispatch_claims_won_total",
                         "vts_dispatch_claims_waited_total",
                         "vts_dispatch_claim_takeovers_total",
                         "vts_dispatch_redis_hits_total",
                         "vts_jobs_waiting",
                         "vts_jobs_store_calls",
                         "vts_fetchers_connected",
                         "vts_fetchers_idle",
                         "vts_upstream_outcomes_total",
                         "vts_ratelimit_store_errors_total",
                         "vts_ratelimit_fallbacks_total",
                         "vts_worker_restarts_total",
                         "vts_jobs_total",
                         "vts_egress_budget_left",
                         "vts_egress_budget_waits_total",
                         "vts_egress_budget_declines_total",
                         "vts_pot_provider_failures_total"};
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
      cmocka_unit_test(test_not_modified_is_counted_as_304),
      cmocka_unit_test(test_a_reason_named_as_a_kind_is_counted_under_it),
      cmocka_unit_test(test_dispatcher_counters_render_one_line_per_row),
      cmocka_unit_test(test_egress_budgets_are_listed_by_position),
      cmocka_unit_test(test_pot_provider_failures_are_summed),
      cmocka_unit_test(test_every_family_has_help_and_type),
      cmocka_unit_test(test_loop_turns_of_two_workers_are_summed),
      cmocka_unit_test(test_dispatcher_loop_turns_by_length_and_own_time),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
