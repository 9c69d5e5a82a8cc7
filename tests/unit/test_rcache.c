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

/* Whether key exists in the test's Redis. */
static int key_exists(struct fx *f, const char *key) {
  redisContext *c = test_redis_sync(f->port);
  assert_non_null(c);
  redisReply *r = redisCommand(c, "EXISTS %s", key);
  assert_non_null(r);
  assert_int_equal(r->type, REDIS_REPLY_INTEGER);
  int n = (int)r->integer;
  freeReplyObject(r);
  redisFree(c);
  return n;
}

static void test_bad_values_under_our_key_are_misses_and_deleted(void **state) {
  struct fx *f = *state;
  NEED_REDIS(f);
  static const struct {
    const char *id, *value;
  } bad[] = {
      {"foreign0001", "hello"}, /* not our magic */
      {"foreign0002",
       "VC1\x01\x01\x09"
       "x"}, /* language longer than the value */
      {"foreign0003",
       "VC1\x03\x01\x02"
       "en{\"language\":\"en\"}"}, /* an outcome never cached (502) */
      {"foreign0004",
       "VC1\x01\x07\x02"
       "en{\"language\":\"en\"}"}, /* no such source */
      {"foreign0005",
       "VC1\x01\x01\x02"
       "e<{\"language\":\"en\"}"}, /* not a language */
      {"foreign0006",
       "VC1\x01\x01\x02"
       "en"}, /* a 200 without a body */
      {"foreign0007",
       "VC1\x01\x01\x02"
       "en<html>"}, /* not our JSON */
      {"foreign0008",
       "VC1\x01\x01\x02"
       "en{\"language\":\"en\""}, /* cut short */
      {"foreign0009",
       "VC1\x02\x00\x00"
       "oops"}, /* a 404 with a body */
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char key[96];
    snprintf(key, sizeof(key), "vts:transcript:{%s}:-", bad[i].id);
    redisContext *c = test_redis_sync(f->port);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "SET %s %b PX 60000", key, bad[i].value, strlen(bad[i].value));
    assert_non_null(r);
    freeReplyObject(r);
    redisFree(c);
    struct proto_result out;
    uint64_t ttl;
    if (rcache_get(f->rc, bad[i].id, "", &out, &ttl) != -ENOENT) fail_msg("value %zu was used", i);
    if (key_exists(f, key)) fail_msg("value %zu was not deleted", i);
  }
  struct proto_result out;
  uint64_t ttl;
  /* A value of another type under our key is a miss, and deleted too. */
  test_redis_command(f->port, "RPUSH vts:transcript:{foreign0010}:- a");
  assert_int_equal(rcache_get(f->rc, "foreign0010", "", &out, &ttl), -ENOENT);
  assert_int_equal(key_exists(f, "vts:transcript:{foreign0010}:-"), 0);
}

static void test_frozen_redis_costs_one_deadline_then_is_skipped(void **state) {
  struct fx *f = *state;
  NEED_REDIS(f);
  struct proto_result in = ok_result("{\"language\":\"en\"}"), out;
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
      cmocka_unit_test(test_bad_values_under_our_key_are_misses_and_deleted),
      cmocka_unit_test(test_frozen_redis_costs_one_deadline_then_is_skipped),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
