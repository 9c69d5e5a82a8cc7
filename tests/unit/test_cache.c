/* Unit tests of the result cache: LRU order, byte bound, TTLs on an injected clock, what is never cached. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <errno.h>

#include "gateway/cache/cache.h"

static uint64_t fake_now;
static uint64_t fake_clock(void) { return fake_now; }

static struct proto_result result(uint8_t outcome, const char *body) {
  struct proto_result r;
  memset(&r, 0, sizeof(r));
  r.outcome = outcome;
  r.source = outcome == PROTO_OK ? PROTO_SOURCE_CAPTIONS : PROTO_SOURCE_NONE;
  memcpy(r.lang, "en", 3);
  r.body = body;
  r.body_len = body ? (uint32_t)strlen(body) : 0;
  return r;
}

static struct cache *make(size_t max_bytes) {
  struct cache_limits lim = {.max_bytes = max_bytes, .ok_ttl_ms = 10000, .negative_ttl_ms = 1000};
  fake_now = 1000000;
  struct cache *c = cache_new(&lim, fake_clock);
  assert_non_null(c);
  return c;
}

static int has(struct cache *c, const char *vid, const char *lang) {
  struct proto_result r;
  return cache_get(c, vid, lang, &r, NULL) == 0;
}

static void test_hit_returns_stored_body_outcome_lang_and_ttl_left(void **state) {
  (void)state;
  struct cache *c = make(1 << 20);
  struct proto_result in = result(PROTO_OK, "{\"text\":\"hi\"}");
  memcpy(in.lang, "pt-BR", 6);
  uint64_t ttl = 0;
  assert_int_equal(cache_put(c, "abcdefghijk", "pt", &in, UINT64_MAX, &ttl), 0);
  assert_int_equal(ttl, 10000);
  fake_now += 2500;
  struct proto_result out;
  uint64_t left = 0;
  assert_int_equal(cache_get(c, "abcdefghijk", "pt", &out, &left), 0);
  assert_int_equal(out.outcome, PROTO_OK);
  assert_int_equal(out.source, PROTO_SOURCE_CAPTIONS);
  assert_string_equal(out.lang, "pt-BR");
  assert_int_equal(out.body_len, strlen("{\"text\":\"hi\"}"));
  assert_memory_equal(out.body, "{\"text\":\"hi\"}", out.body_len);
  assert_int_equal(left, 7500);
  cache_free(c);
}

static void test_key_is_video_and_requested_language(void **state) {
  (void)state;
  struct cache *c = make(1 << 20);
  struct proto_result in = result(PROTO_OK, "x");
  assert_int_equal(cache_put(c, "abcdefghijk", "en", &in, UINT64_MAX, NULL), 0);
  assert_true(has(c, "abcdefghijk", "en"));
  assert_false(has(c, "abcdefghijk", ""));
  assert_false(has(c, "abcdefghijk", "de"));
  assert_false(has(c, "abcdefghijl", "en"));
  cache_free(c);
}

static void test_ok_entry_expires_at_its_ttl(void **state) {
  (void)state;
  struct cache *c = make(1 << 20);
  struct proto_result in = result(PROTO_OK, "x");
  assert_int_equal(cache_put(c, "abcdefghijk", "", &in, UINT64_MAX, NULL), 0);
  fake_now += 9999;
  assert_true(has(c, "abcdefghijk", ""));
  fake_now += 1;
  assert_false(has(c, "abcdefghijk", ""));
  struct cache_stats st;
  cache_get_stats(c, &st);
  assert_int_equal(st.entries, 0);
  assert_int_equal(st.bytes, 0);
  cache_free(c);
}

/* keep_expired (a worker's L1): an expired entry still misses, but stays for cache_lookup_stale until replaced. */
static void test_kept_expired_entry_misses_and_is_found_stale(void **state) {
  (void)state;
  struct cache_limits lim = {.max_bytes = 1 << 20, .ok_ttl_ms = 10000, .negative_ttl_ms = 1000, .keep_expired = 1};
  fake_now = 1000000;
  struct cache *c = cache_new(&lim, fake_clock);
  assert_non_null(c);
  struct proto_result in = result(PROTO_OK, "{\"text\":\"hi\"}");
  assert_int_equal(cache_put(c, "abcdefghijk", "", &in, UINT64_MAX, NULL), 0);
  struct proto_result out;
  struct entity *live = NULL, *stale = NULL;
  uint64_t left = 1;
  assert_int_equal(cache_lookup_stale(c, "abcdefghijk", "", &out, &left, NULL, &live), 0);
  assert_int_equal(left, 10000);
  fake_now += 10000;
  assert_false(has(c, "abcdefghijk", ""));
  fake_now += 7;
  uint64_t ended = 0;
  assert_int_equal(cache_lookup_stale(c, "abcdefghijk", "", &out, &left, &ended, &stale), -ESTALE);
  assert_ptr_equal(stale, live);
  assert_int_equal(left, 0);
  assert_int_equal(ended, 7);
  assert_int_equal(out.outcome, PROTO_OK);
  assert_int_equal(out.body_len, strlen("{\"text\":\"hi\"}"));
  assert_memory_equal(out.body, "{\"text\":\"hi\"}", out.body_len);
  struct cache_stats st;
  cache_get_stats(c, &st);
  assert_int_equal(st.entries, 1);
  /* Put again, the entry is live and found as such. */
  assert_int_equal(cache_put_entity(c, "abcdefghijk", "", &out, stale, UINT64_MAX, NULL), 0);
  assert_true(has(c, "abcdefghijk", ""));
  struct entity *again = NULL;
  assert_int_equal(cache_lookup_stale(c, "abcdefghijk", "", &out, NULL, NULL, &again), 0);
  assert_ptr_equal(again, live);
  assert_int_equal(cache_lookup_stale(c, "bcdefghijkl", "", &out, NULL, NULL, NULL), -ENOENT);
  /* Removed, it is found neither live nor stale; the references handed out stay valid. */
  assert_true(cache_remove(c, "abcdefghijk", ""));
  assert_false(cache_remove(c, "abcdefghijk", ""));
  assert_int_equal(cache_lookup_stale(c, "abcdefghijk", "", &out, NULL, NULL, NULL), -ENOENT);
  assert_int_equal(again->form[ENTITY_IDENTITY].len, strlen("{\"text\":\"hi\"}"));
  entity_unref(again);
  entity_unref(stale);
  entity_unref(live);
  cache_free(c);
}

/* Without keep_expired, cache_lookup_stale is cache_lookup: the expired entry is dropped and missed. */
static void test_expired_entry_is_not_found_stale_unless_kept(void **state) {
  (void)state;
  struct cache *c = make(1 << 20);
  struct proto_result in = result(PROTO_OK, "x");
  assert_int_equal(cache_put(c, "abcdefghijk", "", &in, UINT64_MAX, NULL), 0);
  fake_now += 10000;
  struct proto_result out;
  assert_int_equal(cache_lookup_stale(c, "abcdefghijk", "", &out, NULL, NULL, NULL), -ENOENT);
  struct cache_stats st;
  cache_get_stats(c, &st);
  assert_int_equal(st.entries, 0);
  cache_free(c);
}

static void test_not_available_lives_for_the_negative_ttl(void **state) {
  (void)state;
  struct cache *c = make(1 << 20);
  struct proto_result in = result(PROTO_NOT_AVAILABLE, NULL);
  uint64_t ttl = 0;
  assert_int_equal(cache_put(c, "abcdefghijk", "", &in, UINT64_MAX, &ttl), 0);
  assert_int_equal(ttl, 1000);
  fake_now += 999;
  struct proto_result out;
  assert_int_equal(cache_get(c, "abcdefghijk", "", &out, NULL), 0);
  assert_int_equal(out.outcome, PROTO_NOT_AVAILABLE);
  assert_int_equal(out.body_len, 0);
  fake_now += 1;
  assert_false(has(c, "abcdefghijk", ""));
  cache_free(c);
}

static void test_no_captions_is_stored_as_not_available(void **state) {
  (void)state;
  struct cache *c = make(1 << 20);
  struct proto_result in = result(PROTO_NO_CAPTIONS, NULL);
  assert_int_equal(cache_put(c, "abcdefghijk", "", &in, UINT64_MAX, NULL), 0);
  struct proto_result out;
  assert_int_equal(cache_get(c, "abcdefghijk", "", &out, NULL), 0);
  assert_int_equal(out.outcome, PROTO_NOT_AVAILABLE);
  cache_free(c);
}

static void test_5xx_outcomes_are_never_cached(void **state) {
  (void)state;
  struct cache *c = make(1 << 20);
  struct proto_result up = result(PROTO_UPSTREAM_FAILED, NULL);
  struct proto_result internal = result(PROTO_INTERNAL, NULL);
  assert_int_equal(cache_put(c, "abcdefghijk", "", &up, UINT64_MAX, NULL), -EINVAL);
  assert_int_equal(cache_put(c, "abcdefghijl", "", &internal, UINT64_MAX, NULL), -EINVAL);
  assert_false(has(c, "abcdefghijk", ""));
  assert_false(has(c, "abcdefghijl", ""));
  cache_free(c);
}

static void test_zero_ttl_disables_that_kind(void **state) {
  (void)state;
  struct cache_limits lim = {.max_bytes = 1 << 20, .ok_ttl_ms = 5000, .negative_ttl_ms = 0};
  struct cache *c = cache_new(&lim, fake_clock);
  struct proto_result na = result(PROTO_NOT_AVAILABLE, NULL);
  assert_int_equal(cache_put(c, "abcdefghijk", "", &na, UINT64_MAX, NULL), -EINVAL);
  assert_false(has(c, "abcdefghijk", ""));
  cache_free(c);
}

static void test_max_ttl_shortens_the_entry(void **state) {
  (void)state;
  struct cache *c = make(1 << 20);
  struct proto_result in = result(PROTO_OK, "x");
  uint64_t ttl = 0;
  assert_int_equal(cache_put(c, "abcdefghijk", "", &in, 300, &ttl), 0);
  assert_int_equal(ttl, 300);
  fake_now += 300;
  assert_false(has(c, "abcdefghijk", ""));
  cache_free(c);
}

static void test_least_recently_used_is_evicted_first(void **state) {
  (void)state;
  /* Room for three entries of a 100-byte body, not four. */
  struct cache *probe = make(1 << 20);
  char body[101];
  memset(body, 'b', 100);
  body[100] = '\0';
  struct proto_result in = result(PROTO_OK, body);
  assert_int_equal(cache_put(probe, "aaaaaaaaaaa", "", &in, UINT64_MAX, NULL), 0);
  struct cache_stats st;
  cache_get_stats(probe, &st);
  size_t per_entry = st.bytes;
  cache_free(probe);

  struct cache *c = make(per_entry * 3 + per_entry / 2);
  assert_int_equal(cache_put(c, "aaaaaaaaaaa", "", &in, UINT64_MAX, NULL), 0);
  assert_int_equal(cache_put(c, "bbbbbbbbbbb", "", &in, UINT64_MAX, NULL), 0);
  assert_int_equal(cache_put(c, "ccccccccccc", "", &in, UINT64_MAX, NULL), 0);
  assert_true(has(c, "aaaaaaaaaaa", "")); /* a is now the most recent; b the least */
  assert_int_equal(cache_put(c, "ddddddddddd", "", &in, UINT64_MAX, NULL), 0);
  assert_false(has(c, "bbbbbbbbbbb", ""));
  assert_true(has(c, "aaaaaaaaaaa", ""));
  assert_true(has(c, "ccccccccccc", ""));
  assert_true(has(c, "ddddddddddd", ""));
  cache_get_stats(c, &st);
  assert_int_equal(st.entries, 3);
  assert_int_equal(st.bytes, per_entry * 3);
  assert_int_equal(st.evictions, 1);
  cache_free(c);
}

static void test_bytes_never_exceed_the_bound(void **state) {
  (void)state;
  size_t bound = 64 * 1024;
  struct cache *c = make(bound);
  char body[3000];
  memset(body, 'z', sizeof(body) - 1);
  body[sizeof(body) - 1] = '\0';
  char vid[12];
  for (int i = 0; i < 500; i++) {
    snprintf(vid, sizeof(vid), "v%010d", i);
    struct proto_result in = result(PROTO_OK, body + (i % 7) * 300);
    assert_int_equal(cache_put(c, vid, "", &in, UINT64_MAX, NULL), 0);
    struct cache_stats st;
    cache_get_stats(c, &st);
    assert_true(st.bytes <= bound);
  }
  snprintf(vid, sizeof(vid), "v%010d", 499);
  assert_true(has(c, vid, ""));
  snprintf(vid, sizeof(vid), "v%010d", 0);
  assert_false(has(c, vid, ""));
  cache_free(c);
}

static void test_entry_larger_than_bound_is_refused_and_drops_older(void **state) {
  (void)state;
  struct cache *c = make(1024);
  struct proto_result small = result(PROTO_OK, "s");
  assert_int_equal(cache_put(c, "abcdefghijk", "", &small, UINT64_MAX, NULL), 0);
  char big[2048];
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  struct proto_result large = result(PROTO_OK, big);
  assert_int_equal(cache_put(c, "abcdefghijk", "", &large, UINT64_MAX, NULL), -E2BIG);
  assert_false(has(c, "abcdefghijk", ""));
  cache_free(c);
}

static void test_zero_bound_caches_nothing(void **state) {
  (void)state;
  struct cache *c = make(0);
  struct proto_result in = result(PROTO_OK, "x");
  assert_int_equal(cache_put(c, "abcdefghijk", "", &in, UINT64_MAX, NULL), -E2BIG);
  assert_false(has(c, "abcdefghijk", ""));
  cache_free(c);
}

static void test_put_replaces_the_entry_for_the_key(void **state) {
  (void)state;
  struct cache *c = make(1 << 20);
  struct proto_result a = result(PROTO_OK, "first");
  struct proto_result b = result(PROTO_OK, "second!");
  assert_int_equal(cache_put(c, "abcdefghijk", "", &a, UINT64_MAX, NULL), 0);
  assert_int_equal(cache_put(c, "abcdefghijk", "", &b, UINT64_MAX, NULL), 0);
  struct proto_result out;
  assert_int_equal(cache_get(c, "abcdefghijk", "", &out, NULL), 0);
  assert_int_equal(out.body_len, 7);
  assert_memory_equal(out.body, "second!", 7);
  struct cache_stats st;
  cache_get_stats(c, &st);
  assert_int_equal(st.entries, 1);
  cache_free(c);
}

static void test_many_entries_survive_table_growth(void **state) {
  (void)state;
  struct cache *c = make(64 * 1024 * 1024);
  char vid[12];
  struct proto_result in = result(PROTO_OK, "x");
  for (int i = 0; i < 5000; i++) {
    snprintf(vid, sizeof(vid), "g%010d", i);
    assert_int_equal(cache_put(c, vid, "en", &in, UINT64_MAX, NULL), 0);
  }
  for (int i = 0; i < 5000; i++) {
    snprintf(vid, sizeof(vid), "g%010d", i);
    assert_true(has(c, vid, "en"));
  }
  cache_free(c);
}

/* A hit shares the entry's entity: the reference outlives the entry's replacement, eviction and the cache itself. */
static void test_a_hit_reference_outlives_the_entry(void **state) {
  (void)state;
  struct cache *c = make(1 << 20);
  struct proto_result in = result(PROTO_OK, "{\"text\":\"first\"}");
  assert_int_equal(cache_put(c, "abcdefghijk", "", &in, UINT64_MAX, NULL), 0);
  struct proto_result out;
  struct entity *held = NULL;
  assert_int_equal(cache_lookup(c, "abcdefghijk", "", &out, NULL, &held), 0);
  assert_non_null(held);
  assert_int_equal(held->refs, 2); /* the cache's and ours */
  assert_ptr_equal(out.body, held->body);

  struct entity *again = NULL;
  assert_int_equal(cache_lookup(c, "abcdefghijk", "", &out, NULL, &again), 0);
  assert_ptr_equal(again, held); /* no copy per hit */
  assert_int_equal(held->refs, 3);
  entity_unref(again);

  struct proto_result newer = result(PROTO_OK, "{\"text\":\"second\"}");
  assert_int_equal(cache_put(c, "abcdefghijk", "", &newer, UINT64_MAX, NULL), 0);
  assert_int_equal(held->refs, 1); /* the cache let go of it; ours keeps the bytes */
  assert_memory_equal(held->form[ENTITY_IDENTITY].data, "{\"text\":\"first\"}", strlen("{\"text\":\"first\"}"));
  cache_free(c);
  entity_unref(held); /* the last reference: ASan reports a leak or a double free here */
}

/* cache_put_entity shares the caller's entity and charges its every form against the bound. */
static void test_put_entity_shares_it_and_charges_all_its_forms(void **state) {
  (void)state;
  char body[4096];
  memset(body, 'a', sizeof(body));
  struct entity *e = entity_new(body, sizeof(body), ENTITY_COMPRESS);
  assert_non_null(e);
  assert_true(entity_has(e, ENTITY_GZIP));
  assert_true(entity_has(e, ENTITY_BR));
  assert_int_equal(e->bytes, sizeof(*e) + sizeof(body) + e->form[ENTITY_GZIP].len + e->form[ENTITY_BR].len);
  struct cache *c = make(1 << 20);
  struct proto_result meta = result(PROTO_OK, NULL);
  assert_int_equal(cache_put_entity(c, "abcdefghijk", "", &meta, e, UINT64_MAX, NULL), 0);
  assert_int_equal(e->refs, 2);
  struct cache_stats st;
  cache_get_stats(c, &st);
  assert_true(st.bytes > e->bytes);
  assert_true(st.bytes < e->bytes + 512); /* the entry record alone, beside it */
  struct proto_result out;
  assert_int_equal(cache_get(c, "abcdefghijk", "", &out, NULL), 0);
  assert_int_equal(out.body_len, sizeof(body));
  assert_memory_equal(out.body, body, sizeof(body));
  cache_free(c);
  assert_int_equal(e->refs, 1);
  entity_unref(e);
}

/* The hash a new child process gives (video_id, lang): the child draws its own key on its first hash. */
static uint64_t hash_in_a_child(const char *video_id, const char *lang) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    uint64_t h = cache_key_hash(video_id, lang);
    _exit(write(fds[1], &h, sizeof(h)) == (ssize_t)sizeof(h) ? 0 : 1);
  }
  uint64_t h = 0;
  assert_int_equal(read(fds[0], &h, sizeof(h)), (ssize_t)sizeof(h));
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(fds[0]);
  close(fds[1]);
  return h;
}

/*
 * Video ids and languages are the client's choice: with a hash anyone can compute, a client could pick thousands that
 * share a bucket. Runs first, before this process hashes anything, so that each child draws a key of its own.
 */
static void test_key_hash_is_keyed_per_process_and_stable_within_one(void **state) {
  (void)state;
  uint64_t a = hash_in_a_child("abcdefghijk", "en"), b = hash_in_a_child("abcdefghijk", "en");
  assert_true(a != b);
  uint64_t mine = cache_key_hash("abcdefghijk", "en");
  assert_true(mine == cache_key_hash("abcdefghijk", "en"));
  assert_true(mine != cache_key_hash("abcdefghijk", "e"));
  /* The NUL between the two parts keeps ("ab", "c") apart from ("a", "bc"). */
  assert_true(cache_key_hash("ab", "c") != cache_key_hash("a", "bc"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_key_hash_is_keyed_per_process_and_stable_within_one),
      cmocka_unit_test(test_hit_returns_stored_body_outcome_lang_and_ttl_left),
      cmocka_unit_test(test_key_is_video_and_requested_language),
      cmocka_unit_test(test_ok_entry_expires_at_its_ttl),
      cmocka_unit_test(test_kept_expired_entry_misses_and_is_found_stale),
      cmocka_unit_test(test_expired_entry_is_not_found_stale_unless_kept),
      cmocka_unit_test(test_not_available_lives_for_the_negative_ttl),
      cmocka_unit_test(test_no_captions_is_stored_as_not_available),
      cmocka_unit_test(test_5xx_outcomes_are_never_cached),
      cmocka_unit_test(test_zero_ttl_disables_that_kind),
      cmocka_unit_test(test_max_ttl_shortens_the_entry),
      cmocka_unit_test(test_least_recently_used_is_evicted_first),
      cmocka_unit_test(test_bytes_never_exceed_the_bound),
      cmocka_unit_test(test_entry_larger_than_bound_is_refused_and_drops_older),
      cmocka_unit_test(test_zero_bound_caches_nothing),
      cmocka_unit_test(test_put_replaces_the_entry_for_the_key),
      cmocka_unit_test(test_many_entries_survive_table_growth),
      cmocka_unit_test(test_a_hit_reference_outlives_the_entry),
      cmocka_unit_test(test_put_entity_shares_it_and_charges_all_its_forms),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
