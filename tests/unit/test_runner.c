/* Unit tests of the batch jobs' runner's decisions: how many items may start, and what an item's answer makes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/dispatcher/hooks.h"
#include "gateway/dispatcher/runner.h"
#include "gateway/http/errors.h"

/* Cases one a line, as a table's rows: alike in shape, each its own counts and share. */
static void test_items_use_only_the_share_of_idle_fetchers(void **state) {
  (void)state;
  /* 8 fetchers, half for jobs: 4 items at most, and only into idle fetchers no queued request waits for. */
  assert_int_equal(runner_room(8, 8, 0, 0, 50), 4);
  assert_int_equal(runner_room(8, 8, 0, 3, 50), 1);
  assert_int_equal(runner_room(8, 8, 0, 4, 50), 0);
  assert_int_equal(runner_room(8, 2, 0, 0, 50), 2);
  assert_int_equal(runner_room(8, 2, 1, 0, 50), 1);
  assert_int_equal(runner_room(8, 2, 2, 0, 50), 0);
  assert_int_equal(runner_room(8, 2, 5, 0, 50), 0);
  /* One fetcher: one item when it is idle and nothing waits; none with the share at 0 or no fetcher. */
  assert_int_equal(runner_room(1, 1, 0, 0, 50), 1);
  assert_int_equal(runner_room(1, 1, 0, 1, 50), 0);
  assert_int_equal(runner_room(1, 1, 0, 0, 0), 0);
  assert_int_equal(runner_room(0, 0, 0, 0, 100), 0);
  assert_int_equal(runner_room(4, 4, 0, 0, 100), 4);
}

static struct proto_result result(uint8_t outcome, uint8_t reason) {
  struct proto_result r;
  memset(&r, 0, sizeof(r));
  r.outcome = outcome;
  r.reason = reason;
  return r;
}

/* Asserts that o fails with the code and message the synchronous endpoint answers as e. */
static void assert_fails_as(const struct runner_outcome *o, enum api_error e) {
  assert_int_equal(o->verdict, RUNNER_FAIL);
  assert_string_equal(o->code, api_error_get(e)->code);
  assert_string_equal(o->message, api_error_get(e)->message);
}

static void test_an_answer_makes_the_item_done_failed_or_retried(void **state) {
  (void)state;
  struct runner_outcome o;
  const int64_t day = 86400000;
  struct proto_result r = result(PROTO_OK, 0);
  runner_judge(&r, 1000, 0, day, &o);
  assert_int_equal(o.verdict, RUNNER_DONE);
  r = result(PROTO_NOT_AVAILABLE, 0);
  runner_judge(&r, 1000, 0, day, &o);
  assert_fails_as(&o, API_ERR_NOT_AVAILABLE);
  r = result(PROTO_UPSTREAM_FAILED, PROTO_REASON_HTTP_429);
  runner_judge(&r, 1000, 0, day, &o);
  assert_fails_as(&o, API_ERR_UPSTREAM_FAILED);
  runner_judge(NULL, 1000, 0, day, &o);
  assert_fails_as(&o, API_ERR_FETCH_FAILED);
  /* A ration: back to the queue for later, until the job's age would pass the most an item may wait. */
  r = result(PROTO_UPSTREAM_FAILED, PROTO_REASON_BUDGET);
  runner_judge(&r, 1000, 0, day, &o);
  assert_int_equal(o.verdict, RUNNER_RETRY);
  assert_int_equal(o.not_before_ms, 1000 + RUNNER_RATION_RETRY_MS);
  runner_judge(&r, day - RUNNER_RATION_RETRY_MS, 0, day, &o);
  assert_int_equal(o.verdict, RUNNER_RETRY);
  runner_judge(&r, day - RUNNER_RATION_RETRY_MS + 1, 0, day, &o);
  assert_fails_as(&o, API_ERR_UPSTREAM_FAILED);
  /* The platform's own ration, and a 502 that carries Retry-After: its time, whatever the reason. */
  r = result(PROTO_UPSTREAM_FAILED, PROTO_REASON_RATIONED);
  runner_judge(&r, 1000, 0, day, &o);
  assert_int_equal(o.verdict, RUNNER_RETRY);
  assert_int_equal(o.not_before_ms, 1000 + RUNNER_RATION_RETRY_MS);
  r = result(PROTO_UPSTREAM_FAILED, PROTO_REASON_HTTP_429);
  r.retry_after_s = 120;
  runner_judge(&r, 1000, 0, day, &o);
  assert_int_equal(o.verdict, RUNNER_RETRY);
  assert_int_equal(o.not_before_ms, 1000 + 120000);
  runner_judge(&r, day - 119999, 0, day, &o);
  assert_fails_as(&o, API_ERR_UPSTREAM_FAILED);
  /* Shed (it yielded to synchronous requests): back for the dispatcher's Retry-After, within the same age. */
  r = result(PROTO_OVERLOADED, 0);
  r.retry_after_s = 7;
  runner_judge(&r, 1000, 0, day, &o);
  assert_int_equal(o.verdict, RUNNER_RETRY);
  assert_int_equal(o.not_before_ms, 1000 + 7000);
  r.retry_after_s = 0;
  runner_judge(&r, 1000, 0, day, &o);
  assert_int_equal(o.not_before_ms, 1000 + 1000);
  runner_judge(&r, day - 999, 0, day, &o);
  assert_fails_as(&o, API_ERR_SERVICE_UNAVAILABLE);
}

/* The webhook's backoff: the first delay, doubling after each failed try, while within a day of the message. */
static void test_webhook_tries_double_their_delay_for_a_day(void **state) {
  (void)state;
  int64_t next = 0;
  assert_int_equal(hooks_next_try(1, 10000, 0, 5000, &next), 1);
  assert_int_equal(next, 15000);
  assert_int_equal(hooks_next_try(2, 10000, 0, 5000, &next), 1);
  assert_int_equal(next, 25000);
  assert_int_equal(hooks_next_try(4, 10000, 0, 100000, &next), 1);
  assert_int_equal(next, 180000);
  /* 10 s doubling: the 13th delay (about 11.4 h) still ends within the day, the 14th (22.8 h) after it. */
  int64_t made = 1000, at = made, tries = 0;
  while (hooks_next_try((int)tries + 1, 10000, made, at, &next)) {
    at = next;
    tries++;
  }
  assert_int_equal(tries, 13);
  assert_true(at - made <= VTS_WEBHOOK_RETRY_WINDOW_MS);
  assert_true(next - made > VTS_WEBHOOK_RETRY_WINDOW_MS);
  /* A try whose next would pass the day is the last, however early the delay is small. */
  assert_int_equal(hooks_next_try(1, 10000, 0, VTS_WEBHOOK_RETRY_WINDOW_MS - 9999, &next), 0);
  assert_int_equal(hooks_next_try(1, 10000, 0, VTS_WEBHOOK_RETRY_WINDOW_MS - 10000, &next), 1);
  /* A huge attempt count does not overflow the delay. */
  assert_int_equal(hooks_next_try(1000, 3600000, 0, 0, &next), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_items_use_only_the_share_of_idle_fetchers),
      cmocka_unit_test(test_an_answer_makes_the_item_done_failed_or_retried),
      cmocka_unit_test(test_webhook_tries_double_their_delay_for_a_day),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
