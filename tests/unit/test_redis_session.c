/*
 * The one Redis session (gateway/redis/redis_session.c): its backoff policy and its down/back bookkeeping, with the
 * time given by hand, so no case waits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/limits.h"
#include "gateway/redis/redis_session.h"

static void test_the_wait_doubles_from_min_to_max_and_stays_there(void **state) {
  (void)state;
  struct redis_backoff b;
  redis_backoff_init(&b, 100, 500);
  static const uint64_t want[] = {100, 200, 400, 500, 500, 500};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) assert_int_equal(redis_backoff_next(&b), want[i]);
}

static void test_a_ready_connection_starts_the_wait_again(void **state) {
  (void)state;
  struct redis_backoff b;
  redis_backoff_init(&b, 1000, 8000);
  assert_int_equal(redis_backoff_next(&b), 1000);
  assert_int_equal(redis_backoff_next(&b), 2000);
  assert_int_equal(redis_backoff_next(&b), 4000);
  redis_backoff_reset(&b);
  assert_int_equal(redis_backoff_next(&b), 1000);
}

static void test_min_equal_to_max_is_a_fixed_wait(void **state) {
  (void)state;
  struct redis_backoff b;
  redis_backoff_init(&b, 1000, 1000);
  for (int i = 0; i < 5; i++) assert_int_equal(redis_backoff_next(&b), 1000);
  /* A max below the min is the min: never a shorter wait than asked. */
  redis_backoff_init(&b, 300, 10);
  assert_int_equal(redis_backoff_next(&b), 300);
  assert_int_equal(redis_backoff_next(&b), 300);
}

static void test_a_max_near_the_top_of_the_range_does_not_wrap(void **state) {
  (void)state;
  struct redis_backoff b;
  redis_backoff_init(&b, UINT64_MAX / 2 + 1, UINT64_MAX);
  assert_int_equal(redis_backoff_next(&b), UINT64_MAX / 2 + 1);
  assert_int_equal(redis_backoff_next(&b), UINT64_MAX);
  assert_int_equal(redis_backoff_next(&b), UINT64_MAX);
}

/* The users' policies, as the limits name them: each is the one policy with its own bounds. */
static void test_each_user_waits_as_its_limits_say(void **state) {
  (void)state;
  static const struct {
    const char *user;
    uint64_t min_ms, max_ms, third;
  } users[] = {
      {"limiter", VTS_REDIS_RECONNECT_MIN_MS, VTS_REDIS_RECONNECT_MAX_MS, 400},
      {"cache", VTS_RCACHE_RETRY_MS, VTS_RCACHE_RETRY_MS, 1000},
      {"jobs", VTS_JOBS_REDIS_RETRY_MS, VTS_JOBS_REDIS_RETRY_MAX_MS, 4000},
  };
  struct redis_addr addr = {.ip = "127.0.0.1", .port = 6379};
  for (size_t i = 0; i < sizeof(users) / sizeof(users[0]); i++) {
    struct redis_session s;
    redis_session_init(&s, users[i].user, &addr, users[i].min_ms, users[i].max_ms);
    assert_int_equal(redis_session_down(&s, "Connection refused", 0), users[i].min_ms);
    redis_session_down(&s, "Connection refused", 0);
    assert_int_equal(redis_session_down(&s, "Connection refused", 0), users[i].third);
  }
}

static void test_a_failure_holds_new_connections_until_its_wait_is_over(void **state) {
  (void)state;
  struct redis_addr addr = {.ip = "127.0.0.1", .port = 6379};
  struct redis_session s;
  redis_session_init(&s, "jobs", &addr, 1000, 8000);
  assert_true(redis_session_may_try(&s, 0));
  assert_int_equal(redis_session_down(&s, "Connection refused", 5000), 1000);
  assert_false(redis_session_may_try(&s, 5999));
  assert_true(redis_session_may_try(&s, 6000));
  assert_int_equal(redis_session_down(&s, "Connection refused", 6000), 2000);
  assert_false(redis_session_may_try(&s, 7999));
  assert_true(redis_session_may_try(&s, 8000));
  redis_session_up(&s);
  assert_true(redis_session_may_try(&s, 0));
  assert_int_equal(redis_session_down(&s, "Connection refused", 9000), 1000);
}

/* One down line per outage and reason: the flag and the reason it keeps say what the next failure logs. */
static void test_the_down_line_is_said_once_per_outage_and_reason(void **state) {
  (void)state;
  struct redis_addr addr = {.ip = "127.0.0.1", .port = 6379};
  struct redis_session s;
  redis_session_init(&s, "limiter", &addr, 100, 500);
  assert_string_equal(s.user, "limiter");
  assert_false(s.down_logged);
  redis_session_down(&s, "connection not ready in time", 0);
  assert_true(s.down_logged);
  assert_string_equal(s.down_why, "connection not ready in time");
  redis_session_down(&s, "WRONGPASS invalid username-password pair", 0);
  assert_string_equal(s.down_why, "WRONGPASS invalid username-password pair");
  redis_session_up(&s);
  assert_false(s.down_logged);
  /* A reason longer than the room kept is compared by its start, and is never cut short in the line itself. */
  char longer[REDIS_SESSION_WHY_BYTES * 2];
  memset(longer, 'x', sizeof(longer) - 1);
  longer[sizeof(longer) - 1] = '\0';
  redis_session_down(&s, longer, 0);
  assert_int_equal(strlen(s.down_why), REDIS_SESSION_WHY_BYTES - 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_the_wait_doubles_from_min_to_max_and_stays_there),
      cmocka_unit_test(test_a_ready_connection_starts_the_wait_again),
      cmocka_unit_test(test_min_equal_to_max_is_a_fixed_wait),
      cmocka_unit_test(test_a_max_near_the_top_of_the_range_does_not_wrap),
      cmocka_unit_test(test_each_user_waits_as_its_limits_say),
      cmocka_unit_test(test_a_failure_holds_new_connections_until_its_wait_is_over),
      cmocka_unit_test(test_the_down_line_is_said_once_per_outage_and_reason),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
