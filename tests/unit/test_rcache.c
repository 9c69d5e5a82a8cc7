/*
 * The transcript cache in Redis against a real redis-server: round trips of 200 and 404 entries with their TTL,
 * 5xx refused, foreign values ignored, and a stopped or frozen Redis answered within the command deadline and skipped
 * afterwards. Skipped, with a message, when redis-server is not installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/unit/test_skip.h"

#include "common/config.h"
#include "common/limits.h"
#include "gateway/cache/rcache.h"
#include "tests/unit/test_redis_server.h"

struct fx {
  int port;
  pid_t redis;
  struct vts_config cfg;
  struct rcache *rc;
};

static int setup(void **state) {
  static struct fx f;
  memset(&f, 0, sizeof(f));
  *state = &f;
  if (!test_redis_available()) return 0;
  f.port = test_free_port();
  f.redis = test_redis_start(f.port);
  snprintf(f.cfg.redis_url, sizeof(f.cfg.redis_url), "redis://127.0.0.1:%d/0", f.port);
  f.rc = rcache_new(&f.cfg);
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;
  rcache_free(f->rc);
  test_redis_stop(f->redis);
  return 0;
}

#define NEED_REDIS(f)                             \
  do {                                            \
    if ((f)->redis <= 0) {                        \
      TEST_SKIP("redis-server is not installed"); \
    }                                             \
  } while (0)

static struct proto_result ok_result(const char *body) {
  struct proto_result r;
  memset(&r, 0, sizeof(r));
  r.outcome = PROTO_OK;
  r.source = PROTO_SOURCE_CAPTIONS;
  memcpy(r.lang, "pt-BR", 6);
  r.body = body;
  r.body_len = (uint32_t)strlen(body);
  return r;
}

static void test_no_redis_url_means_no_cache(void **state) {
  (void)state;
  struct vts_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  assert_null(rcache_new(&cfg));
}

static void test_ok_entry_round_trips_with_its_ttl(void **state) {
  struct fx *f = *state;
  NEED_REDIS(f);
  struct proto_result in = ok_result("{\"language\":\"pt-BR\"}"), out;
  assert_int_equal(rcache_put(f->rc, "abcdefghijk", "pt", &in, 60000), 0);
  uint64_t ttl = 0;
  assert_int_equal(rcache_get(f->rc, "abcdefghijk", "pt", &out, &ttl), 0);
  assert_int_equal(out.outcome, PROTO_OK);
  assert_int_equal(out.source, PROTO_SOURCE_CAPTIONS);
  assert_string_equal(out.lang, "pt-BR");
  assert_int_equal(out.body_len, in.body_len);
  assert_memory_equal(out.body, in.body, in.body_len);
  assert_true(ttl > 59000 && ttl <= 60000);
  assert_int_equal(rcache_get(f->rc, "abcdefghijk", "de", &out, &ttl), -ENOENT);
  assert_int_equal(rcache_get(f->rc, "abcdefghijk", "", &out, &ttl), -ENOENT);
}

static void test_not_available_is_stored_and_5xx_is_refused(void **state) {
  struct fx *f = *state;
  NEED_REDIS(f);
  struct proto_result r = ok_result("");
  r.outcome = PROTO_NOT_AVAILABLE;
  assert_int_equal(rcache_put(f->rc, "notavail001", "", &r, 5000), 0);
  struct proto_result out;
  uint64_t ttl;
  assert_int_equal(rcache_get(f->rc, "notavail001", "", &out, &ttl), 0);
  assert_int_equal(out.outcome, PROTO_NOT_AVAILABLE);
  r.outcome = PROTO_UPSTREAM_FAILED;
  assert_int_equal(rcache_put(f->rc, "upstream001", "", &r, 5000), -EINVAL);
  r.outcome = PROTO_INTERNAL;
  assert_int_equal(rcache_put(f->rc, "upstream001", "", &r, 5000), -EINVAL);
  assert_int_equal(rcache_get(f->rc, "upstream001", "", &out, &ttl), -ENOENT);
}

static void test_foreign_values_under_our_key_are_misses(void **state) {
  struct fx *f = *state;
  NEED_REDIS(f);
  test_redis_command(f->port, "SET vts:transcript:{foreign0001}:- hello PX 60000");
  test_redis_command(f->port, "SET vts:transcript:{foreign0002}:- VC1\x01\x01\x09x PX 60000");
  struct proto_result out;
  uint64_t ttl;
  assert_int_equal(rcache_get(f->rc, "foreign0001", "", &out, &ttl), -ENOENT);
  assert_int_equal(rcache_get(f->rc, "foreign0002", "", &out, &ttl), -ENOENT);
}

static void test_frozen_redis_costs_one_deadline_then_is_skipped(void **state) {
  struct fx *f = *state;
  NEED_REDIS(f);
  struct proto_result in = ok_result("{}"), out;
  uint64_t ttl;
  assert_int_equal(rcache_put(f->rc, "frozen00001", "", &in, 60000), 0);
  kill(f->redis, SIGSTOP);
  uint64_t t0 = util_now_ms();
  assert_int_equal(rcache_get(f->rc, "frozen00001", "", &out, &ttl), -EIO);
  uint64_t first = util_now_ms() - t0;
  t0 = util_now_ms();
  assert_int_equal(rcache_get(f->rc, "frozen00001", "", &out, &ttl), -EIO);
  assert_int_equal(rcache_put(f->rc, "frozen00001", "", &in, 60000), -EIO);
  uint64_t skipped = util_now_ms() - t0;
  kill(f->redis, SIGCONT);
  if (first > VTS_REDIS_COMMAND_TIMEOUT_MS + 150) fail_msg("the first command took %llu ms", (unsigned long long)first);
  if (skipped > 10) fail_msg("commands during the pause took %llu ms", (unsigned long long)skipped);
  /* After the retry pause it reconnects and the entry is there. */
  usleep((VTS_RCACHE_RETRY_MS + 50) * 1000);
  assert_int_equal(rcache_get(f->rc, "frozen00001", "", &out, &ttl), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_redis_url_means_no_cache),
      cmocka_unit_test(test_ok_entry_round_trips_with_its_ttl),
      cmocka_unit_test(test_not_available_is_stored_and_5xx_is_refused),
      cmocka_unit_test(test_foreign_values_under_our_key_are_misses),
      cmocka_unit_test(test_frozen_redis_costs_one_deadline_then_is_skipped),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
