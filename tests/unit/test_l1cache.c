/* Unit tests of a worker's L1: an answer's entity (its compressed forms and ETag) is made once, not at each expiry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

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

static int in_l1(struct l1cache *l1, const char *video_id) {
  struct proto_result hit;
  struct entity *ent = NULL;
  if (l1cache_lookup(l1, video_id, "", &hit, &ent) != 0) return 0;
  entity_unref(ent);
  return 1;
}

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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_answer_after_expiry_reuses_the_entity),
      cmocka_unit_test(test_expired_entry_of_another_outcome_is_not_reused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
