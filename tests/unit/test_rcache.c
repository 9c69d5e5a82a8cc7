/*
 * The transcript cache and claims in Redis against a real redis-server, driven on a libuv loop: round trips of 200 and
 * 404 entries with their TTL, 5xx refused, foreign values ignored and deleted, claims won by one gateway only and
 * released by their holder only, answers never given inside the call that asked, and a stopped or frozen Redis
 * answered within the command deadline and skipped afterwards. Skipped, with a message, when redis-server is not
 * installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/unit/test_skip.h"

#include "common/config.h"
#include "common/limits.h"
#include "common/util.h"
#include "gateway/cache/rcache.h"
#include "tests/unit/test_redis_server.h"

/* The last answer a cache gave, copied out of the callback. */
struct answer {
  bool got;
  uint64_t tag;
  int status;
  struct proto_result res;
  char body[256];
  uint64_t ttl;
};

struct fx {
  int port;
  pid_t redis;
  struct vts_config cfg;
  uv_loop_t loop;
  struct rcache *rc, *other; /* two gateways */
  struct answer a;
};

static void on_get(void *arg, uint64_t tag, int status, const struct proto_result *res, uint64_t ttl) {
  struct answer *a = arg;
  memset(a, 0, sizeof(*a));
  a->got = true;
  a->tag = tag;
  a->status = status;
  a->ttl = ttl;
  if (res != NULL) {
    a->res = *res;
    assert_true(res->body_len < sizeof(a->body));
    memcpy(a->body, res->body, res->body_len);
    a->res.body = a->body;
  }
}

static void on_claim(void *arg, uint64_t tag, int status) {
  struct answer *a = arg;
  memset(a, 0, sizeof(*a));
  a->got = true;
  a->tag = tag;
  a->status = status;
}

static int setup(void **state) {
  static struct fx f;
  memset(&f, 0, sizeof(f));
  *state = &f;
  if (!test_redis_available()) return 0;
  f.port = test_free_port();
  f.redis = test_redis_start(f.port);
  snprintf(f.cfg.redis_url, sizeof(f.cfg.redis_url), "redis://127.0.0.1:%d/0", f.port);
  uv_loop_init(&f.loop);
  f.rc = rcache_new(&f.loop, &f.cfg, on_get, on_claim, &f.a);
  f.other = rcache_new(&f.loop, &f.cfg, on_get, on_claim, &f.a);
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;
  if (f->rc != NULL) {
    rcache_close(f->rc);
    rcache_close(f->other);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    uv_loop_close(&f->loop);
  }
  test_redis_stop(f->redis);
  return 0;
}

#define NEED_REDIS(f)                             \
  do {                                            \
    if ((f)->redis <= 0) {                        \
      TEST_SKIP("redis-server is not installed"); \
    }                                             \
  } while (0)

static void on_tick(uv_timer_t *t) { (void)t; }

/*
 * Runs the loop until the answer asked for has come; it never comes inside the call that asked. A ticking timer keeps
 * each turn short: a turn that ran the answer's callback would otherwise go on to wait on the other connection.
 */
static void await(struct fx *f) {
  assert_false(f->a.got);
  uv_timer_t tick;
  uv_timer_init(&f->loop, &tick);
  uv_timer_start(&tick, on_tick, 10, 10);
  uint64_t until = util_now_ms() + 5000;
  while (!f->a.got && util_now_ms() < until) uv_run(&f->loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&tick, NULL);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_true(f->a.got);
}

static int get(struct fx *f, struct rcache *rc, const char *video, const char *key, struct proto_result *out,
               uint64_t *ttl) {
  f->a.got = false;
  rcache_get(rc, 42, video, key);
  await(f);
  assert_int_equal(f->a.tag, 42);
  *out = f->a.res;
  *ttl = f->a.ttl;
  return f->a.status;
}

static int claim(struct fx *f, struct rcache *rc, uint64_t tag, const char *video, uint64_t ttl_ms) {
  f->a.got = false;
  rcache_claim(rc, tag, video, "en", ttl_ms);
  await(f);
  assert_int_equal(f->a.tag, tag);
  return f->a.status;
}

/* A transcript as a fetcher serialises it: Redis entries pass the same check as a fetcher's result. */
#define TRANSCRIPT(lang)                                                                 \
  "{\"language\":\"" lang                                                                \
  "\",\"source\":\"captions\",\"text\":\"a\",\"segments\":[{\"text\":\"a\",\"start\":1," \
  "\"duration\":2}]}"

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
  assert_null(rcache_new(uv_default_loop(), &cfg, on_get, on_claim, NULL));
}

static void test_ok_entry_round_trips_with_its_ttl(void **state) {
  struct fx *f = *state;
  NEED_REDIS(f);
  struct proto_result in = ok_result(TRANSCRIPT("pt-BR")), out;
  assert_int_equal(rcache_put(f->rc, "abcdefghijk", "pt", &in, 60000), 0);
  uint64_t ttl = 0;
  assert_int_equal(get(f, f->rc, "abcdefghijk", "pt", &out, &ttl), 0);
  assert_int_equal(out.outcome, PROTO_OK);
  assert_int_equal(out.source, PROTO_SOURCE_CAPTIONS);
  assert_string_equal(out.lang, "pt-BR");
  assert_int_equal(out.body_len, in.body_len);
  assert_memory_equal(out.body, in.body, in.body_len);
  assert_true(ttl > 59000 && ttl <= 60000);
  assert_int_equal(get(f, f->rc, "abcdefghijk", "de", &out, &ttl), -ENOENT);
  assert_int_equal(get(f, f->rc, "abcdefghijk", "", &out, &ttl), -ENOENT);
}

static void test_not_available_is_stored_and_5xx_is_refused(void **state) {
  struct fx *f = *state;
  NEED_REDIS(f);
  struct proto_result r = ok_result("");
  r.outcome = PROTO_NOT_AVAILABLE;
  assert_int_equal(rcache_put(f->rc, "notavail001", "", &r, 5000), 0);
  struct proto_result out;
  uint64_t ttl;
  assert_int_equal(get(f, f->rc, "notavail001", "", &out, &ttl), 0);
  assert_int_equal(out.outcome, PROTO_NOT_AVAILABLE);
  r.outcome = PROTO_UPSTREAM_FAILED;
  assert_int_equal(rcache_put(f->rc, "upstream001", "", &r, 5000), -EINVAL);
  r.outcome = PROTO_INTERNAL;
  assert_int_equal(rcache_put(f->rc, "upstream001", "", &r, 5000), -EINVAL);
  assert_int_equal(get(f, f->rc, "upstream001", "", &out, &ttl), -ENOENT);
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
      {"foreign0011",
       "VC1\x01\x01\x02"
       "en{\"language\":\"en\",\"planted\":<b>not json</b>}"}, /* our lead, then anything */
      {"foreign0012",
       "VC1\x01\x01\x02"
       "en{\"language\":\"en\",\"source\":\"captions\",\"text\":\"a\",\"segments\":[{\"text\":\"a\","
       "\"start\":1e2,\"duration\":2}]}"}, /* a time the renderers refuse */
      {"foreign0013",
       "VC1\x01\x00\x02"
       "en{\"tracks\":[],\"translationLanguages\":[]}"}, /* a track list where a transcript belongs */
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
    if (get(f, f->rc, bad[i].id, "", &out, &ttl) != -ENOENT) fail_msg("value %zu was used", i);
    /* The delete is sent behind the lookup: a second lookup's answer means it has run. */
    assert_int_equal(get(f, f->rc, "nothing0000", "", &out, &ttl), -ENOENT);
    if (key_exists(f, key)) fail_msg("value %zu was not deleted", i);
  }
  struct proto_result out;
  uint64_t ttl;
  /* A value of another type under our key is a miss, and deleted too. */
  test_redis_command(f->port, "RPUSH vts:transcript:{foreign0010}:- a");
  assert_int_equal(get(f, f->rc, "foreign0010", "", &out, &ttl), -ENOENT);
  assert_int_equal(get(f, f->rc, "nothing0000", "", &out, &ttl), -ENOENT);
  assert_int_equal(key_exists(f, "vts:transcript:{foreign0010}:-"), 0);
}

static void test_frozen_redis_costs_one_deadline_then_is_skipped(void **state) {
  struct fx *f = *state;
  NEED_REDIS(f);
  struct proto_result in = ok_result(TRANSCRIPT("en")), out;
  uint64_t ttl;
  assert_int_equal(rcache_put(f->rc, "frozen00001", "", &in, 60000), 0);
  assert_int_equal(get(f, f->rc, "frozen00001", "", &out, &ttl), 0);
  kill(f->redis, SIGSTOP);
  uint64_t t0 = util_now_ms();
  assert_int_equal(get(f, f->rc, "frozen00001", "", &out, &ttl), -EIO);
  uint64_t first = util_now_ms() - t0;
  t0 = util_now_ms();
  assert_int_equal(get(f, f->rc, "frozen00001", "", &out, &ttl), -EIO);
  assert_int_equal(claim(f, f->rc, 7, "frozen00001", 1000), -EIO);
  assert_int_equal(rcache_put(f->rc, "frozen00001", "", &in, 60000), -EIO);
  uint64_t skipped = util_now_ms() - t0;
  kill(f->redis, SIGCONT);
  if (first < VTS_RCACHE_COMMAND_TIMEOUT_MS || first > VTS_RCACHE_COMMAND_TIMEOUT_MS + 150)
    fail_msg("the first command failed after %llu ms", (unsigned long long)first);
  /* Three answers, none of them waiting on Redis (a waited one costs the whole deadline). */
  if (skipped >= VTS_RCACHE_COMMAND_TIMEOUT_MS / 2)
    fail_msg("commands during the pause took %llu ms", (unsigned long long)skipped);
  /* After the retry pause it reconnects and the entry is there. */
  usleep((VTS_RCACHE_RETRY_MS + 50) * 1000); /* the wait is the test: the retry pause */
  assert_int_equal(get(f, f->rc, "frozen00001", "", &out, &ttl), 0);
}

static void test_a_claim_is_won_once_and_released_by_its_holder_only(void **state) {
  struct fx *f = *state;
  NEED_REDIS(f);
  assert_int_equal(claim(f, f->rc, 1, "claimed0001", 60000), 1);
  assert_int_equal(claim(f, f->other, 9, "claimed0001", 60000), 0);
  assert_int_equal(claim(f, f->rc, 2, "claimed0001", 60000), 0); /* another job of the same gateway waits too */
  /* Not the holder's: the claim stays. */
  rcache_release(f->other, 9, "claimed0001", "en");
  rcache_release(f->rc, 2, "claimed0001", "en");
  assert_int_equal(claim(f, f->rc, 2, "claimed0001", 60000), 0); /* behind both releases on the connections */
  assert_int_equal(claim(f, f->other, 9, "claimed0001", 60000), 0);
  rcache_release(f->rc, 1, "claimed0001", "en");
  assert_int_equal(claim(f, f->rc, 5, "released001", 60000), 1); /* behind the release on its connection */
  assert_int_equal(claim(f, f->other, 9, "claimed0001", 60000), 1);
  /* The claim lives beside the video's cache entry, and expires with the job's deadline. */
  redisContext *c = test_redis_sync(f->port);
  assert_non_null(c);
  redisReply *r = redisCommand(c, "PTTL vts:claim:{claimed0001}:en");
  assert_non_null(r);
  assert_int_equal(r->type, REDIS_REPLY_INTEGER);
  assert_true(r->integer > 59000 && r->integer <= 60000);
  freeReplyObject(r);
  redisFree(c);
  /* A video whose result is cached is not claimed: the claimant is told to read it. */
  struct proto_result in = ok_result(TRANSCRIPT("en"));
  assert_int_equal(rcache_put(f->rc, "alreadyIn01", "en", &in, 60000), 0);
  assert_int_equal(claim(f, f->rc, 6, "alreadyIn01", 60000), 2);
  assert_int_equal(key_exists(f, "vts:claim:{alreadyIn01}:en"), 0);
  assert_int_equal(claim(f, f->rc, 3, "expiring001", 100), 1);
  assert_int_equal(claim(f, f->other, 4, "expiring001", 100), 0);
  usleep(200 * 1000); /* the wait is the test: the claim's 100 ms lifetime ends */
  assert_int_equal(claim(f, f->other, 4, "expiring001", 60000), 1);
}

/* Keys of the video in the test's Redis, by pattern, and the bytes their values hold. */
static int count_keys(struct fx *f, const char *pattern, long long *bytes) {
  redisContext *c = test_redis_sync(f->port);
  assert_non_null(c);
  redisReply *r = redisCommand(c, "KEYS %s", pattern);
  assert_non_null(r);
  assert_int_equal(r->type, REDIS_REPLY_ARRAY);
  int n = (int)r->elements;
  *bytes = 0;
  for (size_t i = 0; i < r->elements; i++) {
    redisReply *l = redisCommand(c, "STRLEN %s", r->element[i]->str);
    assert_non_null(l);
    *bytes += l->integer;
    freeReplyObject(l);
  }
  freeReplyObject(r);
  redisFree(c);
  return n;
}

static void test_spellings_served_one_track_share_one_entry(void **state) {
  struct fx *f = *state;
  NEED_REDIS(f);
  struct proto_result in = ok_result(TRANSCRIPT("pt-BR")), out;
  uint64_t ttl;
  static const char *const keys[] = {"pt-BR", "pt", "xx", "yyy"};
  for (size_t i = 0; i < 4; i++) assert_int_equal(rcache_put(f->rc, "spellings01", keys[i], &in, 60000), 0);
  for (size_t i = 0; i < 4; i++) {
    assert_int_equal(get(f, f->other, "spellings01", keys[i], &out, &ttl), 0);
    assert_string_equal(out.lang, "pt-BR");
    assert_int_equal(out.body_len, in.body_len);
    assert_memory_equal(out.body, in.body, in.body_len);
  }
  /* One entry holds the body; each spelling is an alias of a few bytes. */
  long long bytes = 0;
  assert_int_equal(count_keys(f, "vts:transcript:{spellings01}:=*", &bytes), 1);
  assert_int_equal(bytes, 6 + 5 + (long long)in.body_len);
  assert_int_equal(count_keys(f, "vts:transcript:{spellings01}:*", &bytes), 5);
  assert_int_equal(bytes, 6 + 5 + (long long)in.body_len + 4 * (3 + 1 + 5 + 1 + 12));
  /* Another track of the same language is another entry. */
  struct proto_result asr = ok_result(TRANSCRIPT("pt-BR") "\n");
  assert_int_equal(rcache_put(f->rc, "spellings01", "pt-PT", &asr, 60000), 0);
  assert_int_equal(get(f, f->rc, "spellings01", "pt-PT", &out, &ttl), 0);
  assert_int_equal(out.body_len, asr.body_len);
  assert_int_equal(count_keys(f, "vts:transcript:{spellings01}:=*", &bytes), 2);
  /* An alias whose entry is gone (evicted first, say) is a miss, and leaves the video's key free to claim. */
  char entry[96];
  struct proto_result probe = ok_result(TRANSCRIPT("pt-BR"));
  proto_track_key(&probe, entry);
  redisContext *c = test_redis_sync(f->port);
  redisReply *r = redisCommand(c, "DEL vts:transcript:{spellings01}:%s", entry);
  assert_int_equal(r->integer, 1);
  freeReplyObject(r);
  redisFree(c);
  assert_int_equal(get(f, f->rc, "spellings01", "xx", &out, &ttl), -ENOENT);
  f->a.got = false;
  rcache_claim(f->rc, 12, "spellings01", "xx", 60000);
  await(f);
  assert_int_equal(f->a.status, 1);
  /* While the entry is there, its alias is the result: nothing to claim. */
  f->a.got = false;
  rcache_claim(f->rc, 13, "spellings01", "pt-PT", 60000);
  await(f);
  assert_int_equal(f->a.status, 2);
}

static void test_a_track_list_round_trips(void **state) {
  struct fx *f = *state;
  NEED_REDIS(f);
  static const char body[] =
      "{\"tracks\":[{\"language\":\"en\",\"name\":\"English\",\"kind\":\"asr\",\"translatable\":"
      "true}],\"translationLanguages\":[]}";
  struct proto_result in = ok_result(body), out;
  in.source = PROTO_SOURCE_NONE;
  in.lang[0] = '\0';
  assert_int_equal(rcache_put(f->rc, "tracklist01", PROTO_TRACKS_KEY, &in, 60000), 0);
  uint64_t ttl;
  /* Read by the other gateway: kept, not deleted as bad. */
  assert_int_equal(get(f, f->other, "tracklist01", PROTO_TRACKS_KEY, &out, &ttl), 0);
  assert_int_equal(out.outcome, PROTO_OK);
  assert_int_equal(out.body_len, strlen(body));
  assert_memory_equal(out.body, body, strlen(body));
  assert_int_equal(get(f, f->other, "tracklist01", PROTO_TRACKS_KEY, &out, &ttl), 0);
  assert_int_equal(key_exists(f, "vts:transcript:{tracklist01}:*tracks"), 1);
  /* A track list is no transcript: asked as one, it is refused. */
  redisContext *c = test_redis_sync(f->port);
  assert_non_null(c);
  redisReply *r = redisCommand(c, "GET vts:transcript:{tracklist01}:*tracks");
  assert_int_equal(r->type, REDIS_REPLY_STRING);
  redisReply *w = redisCommand(c, "SET vts:transcript:{tracklist01}:en %b PX 60000", r->str, r->len);
  freeReplyObject(w);
  freeReplyObject(r);
  redisFree(c);
  assert_int_equal(get(f, f->rc, "tracklist01", "en", &out, &ttl), -ENOENT);
}

static void test_a_video_that_cannot_be_played_is_one_entry_for_every_key(void **state) {
  struct fx *f = *state;
  NEED_REDIS(f);
  struct proto_result gone;
  memset(&gone, 0, sizeof(gone));
  gone.outcome = PROTO_NOT_AVAILABLE;
  gone.reason = PROTO_REASON_NOT_PLAYABLE;
  assert_int_equal(rcache_put(f->rc, "privatevid1", PROTO_GONE_KEY, &gone, 60000), 0);
  static const char *const keys[] = {"en", "fr-CA", "", "en>de", PROTO_TRACKS_KEY};
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
    struct proto_result out;
    uint64_t ttl;
    assert_int_equal(get(f, f->other, "privatevid1", keys[i], &out, &ttl), 0);
    assert_int_equal(out.outcome, PROTO_NOT_AVAILABLE);
    assert_int_equal(out.reason, PROTO_REASON_NOT_PLAYABLE);
    assert_true(ttl > 59000 && ttl <= 60000);
  }
  long long bytes = 0;
  assert_int_equal(count_keys(f, "vts:transcript:{privatevid1}:*", &bytes), 1);
  assert_int_equal(bytes, 6);
  /* Nothing to claim either: the answer is there. */
  assert_int_equal(claim(f, f->rc, 11, "privatevid1", 60000), 2);
}

/* The case a reply said (age-restricted, members-only...) is kept with the entry and read back; a byte that is no
 * such case is not ours to trust. */
static void test_a_video_that_cannot_be_played_keeps_its_case(void **state) {
  struct fx *f = *state;
  NEED_REDIS(f);
  struct proto_result gone;
  memset(&gone, 0, sizeof(gone));
  gone.outcome = PROTO_NOT_AVAILABLE;
  gone.reason = PROTO_REASON_MEMBERS_ONLY;
  assert_int_equal(rcache_put(f->rc, "membersvid1", PROTO_GONE_KEY, &gone, 60000), 0);
  struct proto_result out;
  uint64_t ttl;
  assert_int_equal(get(f, f->other, "membersvid1", "en", &out, &ttl), 0);
  assert_int_equal(out.outcome, PROTO_NOT_AVAILABLE);
  assert_int_equal(out.reason, PROTO_REASON_MEMBERS_ONLY);
  assert_int_equal(out.body_len, 0);
  long long bytes = 0;
  assert_int_equal(count_keys(f, "vts:transcript:{membersvid1}:*", &bytes), 1);
  assert_int_equal(bytes, 7);
  redisContext *c = test_redis_sync(f->port);
  assert_non_null(c);
  char bad[7] = {'V', 'C', '1', PROTO_NOT_AVAILABLE, 0, 0, PROTO_REASON_HTTP_429};
  redisReply *w = redisCommand(c, "SET vts:transcript:{membersvid1}:*gone %b PX 60000", bad, sizeof(bad));
  freeReplyObject(w);
  redisFree(c);
  assert_int_equal(get(f, f->other, "membersvid1", "en", &out, &ttl), -ENOENT);
}

static void test_a_claim_is_renewed_by_its_holder_only(void **state) {
  struct fx *f = *state;
  NEED_REDIS(f);
  assert_int_equal(claim(f, f->rc, 1, "renewed0001", 300), 1);
  rcache_renew(f->rc, 1, "renewed0001", "en", 60000);
  rcache_renew(f->other, 1, "renewed0001", "en", 1); /* another gateway's renewal changes nothing */
  /* A round trip on each connection: the renewals ahead of it have run. */
  assert_int_equal(claim(f, f->rc, 2, "renewed0001", 60000), 0);
  assert_int_equal(claim(f, f->other, 9, "renewed0001", 60000), 0);
  usleep(400 * 1000); /* the wait is the test: past the claim's first lifetime (300 ms) */
  /* Past the first lifetime: still held, behind the renewals on the connections. */
  assert_int_equal(claim(f, f->other, 9, "renewed0001", 60000), 0);
  redisContext *c = test_redis_sync(f->port);
  assert_non_null(c);
  redisReply *r = redisCommand(c, "PTTL vts:claim:{renewed0001}:en");
  assert_true(r->integer > 59000 && r->integer <= 60000);
  freeReplyObject(r);
  /* Lapsed (a Redis pause) and free: the holder's renewal takes it again. */
  r = redisCommand(c, "DEL vts:claim:{renewed0001}:en");
  freeReplyObject(r);
  rcache_renew(f->rc, 1, "renewed0001", "en", 60000);
  assert_int_equal(claim(f, f->rc, 2, "renewed0001", 60000), 0);
  r = redisCommand(c, "GET vts:claim:{renewed0001}:en");
  assert_int_equal(r->type, REDIS_REPLY_STRING);
  assert_true(r->len > 2 && memcmp(r->str + r->len - 2, ":1", 2) == 0);
  freeReplyObject(r);
  redisFree(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_redis_url_means_no_cache),
      cmocka_unit_test(test_ok_entry_round_trips_with_its_ttl),
      cmocka_unit_test(test_not_available_is_stored_and_5xx_is_refused),
      cmocka_unit_test(test_bad_values_under_our_key_are_misses_and_deleted),
      cmocka_unit_test(test_a_claim_is_won_once_and_released_by_its_holder_only),
      cmocka_unit_test(test_a_claim_is_renewed_by_its_holder_only),
      cmocka_unit_test(test_frozen_redis_costs_one_deadline_then_is_skipped),
      cmocka_unit_test(test_spellings_served_one_track_share_one_entry),
      cmocka_unit_test(test_a_track_list_round_trips),
      cmocka_unit_test(test_a_video_that_cannot_be_played_is_one_entry_for_every_key),
      cmocka_unit_test(test_a_video_that_cannot_be_played_keeps_its_case),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
