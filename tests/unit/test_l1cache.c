/* Unit tests of a worker's L1: an answer's entity (its compressed forms and ETag) is made once, not at each expiry. */
#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/limits.h"
#include "common/util.h"
#include "gateway/http/l1cache.h"

static char body[4096]; /* past VTS_COMPRESS_MIN_BYTES: the entity has compressed forms */

static struct proto_result answer(const char *text, uint32_t cache_ms) {
  struct proto_result r;
  memset(&r, 0, sizeof(r));
  r.outcome = PROTO_OK;
  r.source = PROTO_SOURCE_CAPTIONS;
  memcpy(r.lang, "en", 3);
  memset(body, ' ', sizeof(body));
  memcpy(body, text, strlen(text));
  r.body = body;
  r.body_len = sizeof(body);
  r.cache_ms = cache_ms;
  return r;
}

/* Until the monotonic clock has passed ms: L1's lifetimes are on it. Bounded by the clock itself. */
static void pass(uint64_t ms) {
  uint64_t until = util_now_ms() + ms + 1;
  while (util_now_ms() < until) {
  }
}

/* Whether L1 holds an answer for video_id (its *refresh, when not NULL: whether it asks for a refresh). */
static int in_l1_refresh(struct l1cache *l1, const char *video_id, bool *refresh) {
  struct proto_result hit;
  struct entity *ent = NULL;
  bool r = false;
  int rv = l1cache_lookup(l1, video_id, "", &hit, &ent, &r);
  if (refresh != NULL) *refresh = r;
  if (rv != 0) return 0;
  entity_unref(ent);
  return 1;
}

static int in_l1(struct l1cache *l1, const char *video_id) { return in_l1_refresh(l1, video_id, NULL); }

/* A new L1 that held the answer "one" for abcdefghijk until its 2 ms lifetime passed; *first is that answer's entity.
 */
static struct l1cache *l1_with_expired(struct proto_result *res, struct entity **first) {
  struct l1cache *l1 = l1cache_new();
  assert_non_null(l1);
  *res = answer("{\"text\":\"one\"}", 2);
  *first = l1cache_answer(l1, "abcdefghijk", "", res);
  assert_non_null(*first);
  assert_true(entity_has(*first, ENTITY_GZIP));
  assert_true(in_l1(l1, "abcdefghijk"));
  pass(2);
  assert_false(in_l1(l1, "abcdefghijk"));
  return l1;
}

/*
 * The same answer back from the dispatcher after the entry expired: the entity made for it before is used again
 * (same forms, same ETag, no gzip or brotli run on the loop), kept for the new lifetime; a different body is a new one.
 */
static void test_same_answer_after_expiry_reuses_the_entity(void **state) {
  (void)state;
  struct proto_result res;
  struct entity *first = NULL;
  struct l1cache *l1 = l1_with_expired(&res, &first);

  res = answer("{\"text\":\"one\"}", 60000);
  uint64_t before = util_now_ms();
  struct entity *again = l1cache_answer(l1, "abcdefghijk", "", &res);
  assert_ptr_equal(again, first);
  assert_true(again->expires_ms >= before + 60000);
  assert_true(in_l1(l1, "abcdefghijk"));
  struct entity *known = l1cache_known(l1, "abcdefghijk", "");
  assert_ptr_equal(known, first);
  entity_unref(known);

  res = answer("{\"text\":\"two\"}", 60000);
  struct entity *other = l1cache_answer(l1, "abcdefghijk", "", &res);
  assert_non_null(other);
  assert_ptr_not_equal(other, first);
  char a[ENTITY_ETAG_BYTES], b[ENTITY_ETAG_BYTES];
  entity_etag(first, ENTITY_IDENTITY, a);
  entity_etag(other, ENTITY_IDENTITY, b);
  assert_string_not_equal(a, b);
  entity_unref(other);
  entity_unref(again);
  entity_unref(first);
  l1cache_free(l1);
}

/* A different outcome for the key is never served from the expired entry's entity. */
static void test_expired_entry_of_another_outcome_is_not_reused(void **state) {
  (void)state;
  struct proto_result res;
  struct entity *first = NULL;
  struct l1cache *l1 = l1_with_expired(&res, &first);
  res.outcome = PROTO_NOT_AVAILABLE;
  struct entity *gone = l1cache_answer(l1, "abcdefghijk", "", &res);
  assert_non_null(gone);
  assert_ptr_not_equal(gone, first);
  assert_false(entity_has(gone, ENTITY_GZIP));
  entity_unref(gone);
  entity_unref(first);
  l1cache_free(l1);
}

/*
 * A transcript whose shared entry outlives its L1 entry asks for a refresh only in the entry's last
 * VTS_L1_REFRESH_AHEAD_MS; a 304 naming its ETag keeps it for the new time left, a 304 naming another ETag does not.
 */
static void test_a_hit_near_the_entrys_end_asks_for_a_refresh_that_a_304_renews(void **state) {
  (void)state;
  struct l1cache *l1 = l1cache_new();
  assert_non_null(l1);
  struct proto_result res = answer("{\"text\":\"one\"}", 60000);
  struct entity *ent = l1cache_answer(l1, "abcdefghijk", "", &res);
  assert_non_null(ent);
  bool refresh = true;
  assert_true(in_l1_refresh(l1, "abcdefghijk", &refresh));
  assert_false(refresh);                                               /* VTS_L1_CACHE_TTL_MS left */
  usleep((VTS_L1_CACHE_TTL_MS - VTS_L1_REFRESH_AHEAD_MS + 50) * 1000); /* the wait is the test: into the last part */
  assert_true(in_l1_refresh(l1, "abcdefghijk", &refresh));
  assert_true(refresh);

  struct proto_result nm = {.outcome = PROTO_OK, .notmod = 1, .cache_ms = 50000};
  snprintf(nm.etag, sizeof(nm.etag), "\"another\"");
  assert_int_equal(l1cache_renew(l1, "abcdefghijk", "", &nm), -ENOENT);
  assert_int_equal(l1cache_renew(l1, "zzzzzzzzzzz", "", &nm), -ENOENT);
  assert_true(in_l1_refresh(l1, "abcdefghijk", &refresh));
  assert_true(refresh);
  char etag[ENTITY_ETAG_BYTES];
  entity_etag(ent, ENTITY_IDENTITY, etag);
  snprintf(nm.etag, sizeof(nm.etag), "%s", etag);
  assert_int_equal(l1cache_renew(l1, "abcdefghijk", "", &nm), 0);
  assert_true(in_l1_refresh(l1, "abcdefghijk", &refresh));
  assert_false(refresh);
  struct entity *known = l1cache_known(l1, "abcdefghijk", "");
  assert_ptr_equal(known, ent); /* the same entity, kept again: nothing made anew */
  assert_true(known->expires_ms + 100 >= util_now_ms() + 50000);
  entity_unref(known);
  entity_unref(ent);
  l1cache_free(l1);
}

/*
 * A shared entry that ends with the L1 entry (in its last VTS_L1_REFRESH_AHEAD_MS, nothing to renew it for), an
 * error, or an answer of another kind than a transcript (a track list), never asks for a refresh.
 */
static void test_no_refresh_when_the_shared_entry_ends_with_it_or_for_an_error(void **state) {
  (void)state;
  struct l1cache *l1 = l1cache_new();
  assert_non_null(l1);
  struct proto_result res = answer("{\"text\":\"one\"}", VTS_L1_REFRESH_AHEAD_MS + 300);
  entity_unref(l1cache_answer(l1, "abcdefghijk", "", &res));
  res = answer("{\"error\":1}", 60000);
  res.outcome = PROTO_NOT_AVAILABLE;
  entity_unref(l1cache_answer(l1, "bbbbbbbbbbb", "", &res));
  res = answer("{\"tracks\":[]}", 60000);
  entity_unref(l1cache_answer(l1, "ddddddddddd", PROTO_TRACKS_KEY, &res)); /* a track list, not a transcript */
  usleep(400 * 1000); /* the wait is the test: into the short entry's last part */
  bool refresh = true;
  assert_true(in_l1_refresh(l1, "abcdefghijk", &refresh));
  assert_false(refresh);
  usleep((VTS_L1_CACHE_TTL_MS - VTS_L1_REFRESH_AHEAD_MS) * 1000); /* the wait is the test: into the last part */
  assert_true(in_l1_refresh(l1, "bbbbbbbbbbb", &refresh));
  assert_false(refresh);
  struct proto_result hit;
  struct entity *ent = NULL;
  assert_int_equal(l1cache_lookup(l1, "ddddddddddd", PROTO_TRACKS_KEY, &hit, &ent, &refresh), 0);
  assert_false(refresh);
  entity_unref(ent);
  l1cache_free(l1);
}

/* The lookup of video_id: its status, *refresh, and whether it handed out an entity (then released). */
static int lookup(struct l1cache *l1, const char *video_id, bool *refresh, bool *with_entity) {
  struct proto_result hit;
  struct entity *ent = NULL;
  int rv = l1cache_lookup(l1, video_id, "", &hit, &ent, refresh);
  *with_entity = ent != NULL;
  entity_unref(ent);
  return rv;
}

/*
 * A transcript entry that ended less than VTS_L1_CACHE_TTL_MS ago, its shared entry alive, is found stale with a
 * refresh to send (it answers while the refresh is out); one that ended longer ago, or that a refresh dropped, is a
 * miss.
 */
static void test_an_entry_just_ended_answers_stale_with_a_refresh_and_not_later(void **state) {
  (void)state;
  struct l1cache *l1 = l1cache_new();
  assert_non_null(l1);
  struct proto_result res = answer("{\"text\":\"one\"}", 60000);
  entity_unref(l1cache_answer(l1, "abcdefghijk", "", &res));
  entity_unref(l1cache_answer(l1, "ccccccccccc", "", &res));
  usleep((VTS_L1_CACHE_TTL_MS + 200) * 1000); /* the wait is the test: both entries just ended */
  bool refresh = false, with_entity = false;
  assert_int_equal(lookup(l1, "abcdefghijk", &refresh, &with_entity), -ESTALE);
  assert_true(refresh);
  assert_true(with_entity);
  assert_true(l1cache_forget(l1, "abcdefghijk", ""));
  assert_false(l1cache_forget(l1, "abcdefghijk", ""));
  assert_int_equal(lookup(l1, "abcdefghijk", &refresh, &with_entity), -ENOENT);
  assert_false(with_entity);
  usleep(VTS_L1_CACHE_TTL_MS * 1000); /* the wait is the test: ended too long ago */
  assert_int_equal(lookup(l1, "ccccccccccc", &refresh, &with_entity), -ENOENT);
  assert_false(refresh);
  assert_false(with_entity);
  l1cache_free(l1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_answer_after_expiry_reuses_the_entity),
      cmocka_unit_test(test_expired_entry_of_another_outcome_is_not_reused),
      cmocka_unit_test(test_a_hit_near_the_entrys_end_asks_for_a_refresh_that_a_304_renews),
      cmocka_unit_test(test_no_refresh_when_the_shared_entry_ends_with_it_or_for_an_error),
      cmocka_unit_test(test_an_entry_just_ended_answers_stale_with_a_refresh_and_not_later),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
