/* Unit tests of the gateway<->fetcher messages: round trips and every malformed shape rejected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "common/limits.h"
#include "proto/proto.h"

static struct proto_job sample_job(void) {
  struct proto_job j;
  memset(&j, 0, sizeof(j));
  j.job_id = 0x0102030405060708ULL;
  j.kind = PROTO_KIND_CAPTIONS;
  j.deadline_ms = 30000;
  memcpy(j.video_id, "abcDEF12_-x", 12);
  memcpy(j.lang, "pt-BR", 6);
  memcpy(j.translate, "fr", 3);
  memcpy(j.request_id, "req-1", 6);
  j.declines = 2;
  return j;
}

static void test_job_round_trips_every_field(void **state) {
  (void)state;
  struct proto_job in = sample_job(), out;
  struct buf b = BUF_INIT;
  assert_int_equal(proto_encode_job(&b, &in), 0);
  assert_int_equal(proto_peek_type(b.data, b.len), PROTO_JOB);
  assert_int_equal(proto_decode_job(b.data, b.len, &out), 0);
  assert_true(out.job_id == in.job_id);
  assert_int_equal(out.kind, PROTO_KIND_CAPTIONS);
  assert_int_equal(out.deadline_ms, 30000);
  assert_string_equal(out.video_id, "abcDEF12_-x");
  assert_string_equal(out.lang, "pt-BR");
  assert_string_equal(out.translate, "fr");
  assert_string_equal(out.request_id, "req-1");
  assert_int_equal(out.declines, 2);
  buf_free(&b);
}

static void test_every_kind_round_trips_and_no_other(void **state) {
  (void)state;
  struct proto_job in = sample_job(), out;
  struct buf b = BUF_INIT;
  for (uint8_t kind = PROTO_KIND_CAPTIONS; kind <= PROTO_KIND_METADATA; kind++) {
    in.kind = kind;
    buf_reset(&b);
    assert_int_equal(proto_encode_job(&b, &in), 0);
    assert_int_equal(proto_decode_job(b.data, b.len, &out), 0);
    assert_int_equal(out.kind, kind);
  }
  /* The kind byte sits after magic(2) version(1) type(1) id(8). */
  b.data[12] = 0;
  assert_int_equal(proto_decode_job(b.data, b.len, &out), -EPROTO);
  b.data[12] = PROTO_KIND_LAST + 1;
  assert_int_equal(proto_decode_job(b.data, b.len, &out), -EPROTO);
  /* A video's job read as a webhook's: it names a video and no URL. */
  b.data[12] = PROTO_KIND_WEBHOOK;
  assert_int_equal(proto_decode_job(b.data, b.len, &out), -EPROTO);
  /* Nor as a browse job's: it names a video and no target. */
  b.data[12] = PROTO_KIND_BROWSE;
  assert_int_equal(proto_decode_job(b.data, b.len, &out), -EPROTO);
  in.kind = PROTO_KIND_LAST + 1;
  assert_int_equal(proto_encode_job(&b, &in), -EINVAL);
  buf_free(&b);
}

/* A webhook delivery names no video: its URL, id, time, signature and body cross whole. */
static void test_webhook_job_round_trips_its_delivery(void **state) {
  (void)state;
  static const char url[] = "https://hooks.example/in?x=1";
  static const char body[] = "{\"type\":\"job.done\",\"id\":\"j1\"}";
  struct proto_job in = {.job_id = 9, .kind = PROTO_KIND_WEBHOOK, .deadline_ms = 10000, .hook_timestamp = 1700000000};
  in.hook_url = url;
  in.hook_url_len = sizeof(url) - 1;
  in.hook_body = body;
  in.hook_body_len = sizeof(body) - 1;
  snprintf(in.hook_id, sizeof(in.hook_id), "msg_j1");
  snprintf(in.hook_signature, sizeof(in.hook_signature), "v1,abc=");
  struct proto_job out;
  struct buf b = BUF_INIT;
  assert_int_equal(proto_encode_job(&b, &in), 0);
  assert_int_equal(proto_decode_job(b.data, b.len, &out), 0);
  assert_int_equal(out.kind, PROTO_KIND_WEBHOOK);
  assert_string_equal(out.video_id, "");
  assert_int_equal(out.hook_url_len, sizeof(url) - 1);
  assert_memory_equal(out.hook_url, url, sizeof(url) - 1);
  assert_string_equal(out.hook_id, "msg_j1");
  assert_int_equal(out.hook_timestamp, 1700000000);
  assert_string_equal(out.hook_signature, "v1,abc=");
  assert_int_equal(out.hook_body_len, sizeof(body) - 1);
  assert_memory_equal(out.hook_body, body, sizeof(body) - 1);
  /* No URL, or a video named too: refused at both ends. */
  buf_reset(&b);
  in.hook_url_len = 0;
  assert_int_equal(proto_encode_job(&b, &in), -EINVAL);
  in.hook_url_len = sizeof(url) - 1;
  snprintf(in.video_id, sizeof(in.video_id), "abcDEF12_-x");
  assert_int_equal(proto_encode_job(&b, &in), -EINVAL);
  /* A video's job without its video. */
  in.kind = PROTO_KIND_CAPTIONS;
  in.video_id[0] = '\0';
  assert_int_equal(proto_encode_job(&b, &in), -EINVAL);
  buf_free(&b);
}

/* A browse job carries what it reads and its target, and no video; any other kind carries no target. */
static void test_a_browse_job_carries_its_target_and_no_video(void **state) {
  (void)state;
  struct proto_job in = sample_job(), out;
  struct buf b = BUF_INIT;
  in.kind = PROTO_KIND_BROWSE;
  in.video_id[0] = '\0';
  in.browse_what = PROTO_BROWSE_CONTINUATION;
  in.browse = "4qmFsgtoken%3D";
  in.browse_len = (uint32_t)strlen(in.browse);
  assert_int_equal(proto_encode_job(&b, &in), 0);
  assert_int_equal(proto_decode_job(b.data, b.len, &out), 0);
  assert_int_equal(out.kind, PROTO_KIND_BROWSE);
  assert_string_equal(out.video_id, "");
  assert_int_equal(out.browse_what, PROTO_BROWSE_CONTINUATION);
  assert_int_equal(out.browse_len, in.browse_len);
  assert_memory_equal(out.browse, in.browse, in.browse_len);
  char key[PROTO_MAX_JOB_KEY + 1];
  proto_job_key(&out, key);
  assert_string_equal(key, PROTO_BROWSE_KEY);
  assert_int_equal(proto_key_kind(key), PROTO_KIND_BROWSE);
  /* what says nothing, or too much: refused on both sides. */
  /* After it: the target's length and bytes, the If-None-Match's length (none) and the refresh byte. */
  b.data[b.len - in.browse_len - 6] = PROTO_BROWSE_CONTINUATION + 1;
  assert_int_equal(proto_decode_job(b.data, b.len, &out), -EPROTO);
  in.browse_what = PROTO_BROWSE_NONE;
  buf_reset(&b);
  assert_int_equal(proto_encode_job(&b, &in), -EINVAL);
  /* No target, a target with a NUL, a video besides: refused. */
  in.browse_what = PROTO_BROWSE_PLAYLIST;
  in.browse_len = 0;
  assert_int_equal(proto_encode_job(&b, &in), -EINVAL);
  in.browse = "PL\0x";
  in.browse_len = 4;
  assert_int_equal(proto_encode_job(&b, &in), -EINVAL);
  in.browse = "PLabc";
  in.browse_len = 5;
  memcpy(in.video_id, "abcDEF12_-x", 12);
  assert_int_equal(proto_encode_job(&b, &in), -EINVAL);
  /* A captions job with a target is refused too. */
  in.kind = PROTO_KIND_CAPTIONS;
  assert_int_equal(proto_encode_job(&b, &in), -EINVAL);
  buf_free(&b);
}

/* A browse body: the token line, then one id a line; anything else is refused whole. */
static void test_a_browse_body_round_trips_and_refuses_other_shapes(void **state) {
  (void)state;
  static const char ids[][VTS_VIDEO_ID_LEN + 1] = {"abcDEF12_-x", "zyx98765432"};
  struct buf b = BUF_INIT;
  assert_int_equal(proto_browse_body(&b, "tok%3D", ids, 2), 0);
  assert_int_equal(b.len, strlen("tok%3D\nabcDEF12_-x\nzyx98765432\n"));
  assert_memory_equal(b.data, "tok%3D\nabcDEF12_-x\nzyx98765432\n", b.len);
  struct proto_browse_page p;
  assert_int_equal(proto_browse_read(b.data, b.len, &p), 0);
  assert_int_equal(p.token_len, 6);
  assert_memory_equal(p.token, "tok%3D", 6);
  assert_int_equal(p.n, 2);
  assert_memory_equal(p.ids + 12, "zyx98765432", 11);
  assert_int_equal(proto_browse_read("\n", 1, &p), 0); /* the last page of an empty list */
  assert_int_equal(p.n + p.token_len, 0);
  assert_int_equal(proto_browse_read(b.data, b.len - 1, &p), -EPROTO);
  assert_int_equal(proto_browse_read("tok", 3, &p), -EPROTO);
  assert_int_equal(proto_browse_read("\nabc!EF12_-x\n", 13, &p), -EPROTO);
  assert_int_equal(proto_browse_read("\nabcDEF12_-xy", 13, &p), -EPROTO);
  buf_reset(&b);
  assert_int_equal(proto_browse_body(&b, "a\nb", ids, 1), -EINVAL);
  static const char bad[][VTS_VIDEO_ID_LEN + 1] = {"short"};
  assert_int_equal(proto_browse_body(&b, "", bad, 1), -EINVAL);
  buf_free(&b);
}

/*
 * A metadata job that includes its chapters round-trips the bit and has a key of its own (the caches keep the two
 * answers apart); the bit on another kind, or an unknown bit, is refused at both ends.
 */
static void test_a_metadata_job_carries_its_chapters_bit_and_its_own_key(void **state) {
  (void)state;
  struct proto_job in = {.kind = PROTO_KIND_METADATA, .video_id = "capJson3xx1", .include = PROTO_INCLUDE_CHAPTERS};
  struct proto_job out;
  struct buf b = BUF_INIT;
  assert_int_equal(proto_encode_job(&b, &in), 0);
  assert_int_equal(proto_decode_job(b.data, b.len, &out), 0);
  assert_int_equal(out.include, PROTO_INCLUDE_CHAPTERS);
  char key[PROTO_MAX_JOB_KEY + 1];
  proto_job_key(&out, key);
  assert_string_equal(key, "*metadata+chapters");
  assert_int_equal(proto_key_kind(key), PROTO_KIND_METADATA);
  out.include = 0;
  proto_job_key(&out, key);
  assert_string_equal(key, "*metadata");
  /* The include byte follows declines: magic(2) version(1) type(1) id(8) kind(1) deadline(4), then the strings. */
  size_t at = 4 + 8 + 1 + 4 + (2 + 11) + 2 + 2 + 2 + 1;
  assert_int_equal(b.data[at], PROTO_INCLUDE_CHAPTERS);
  b.data[at] = 2;
  assert_int_equal(proto_decode_job(b.data, b.len, &out), -EPROTO);
  b.data[4 + 8] = PROTO_KIND_TRACKS; /* the kind byte */
  b.data[at] = PROTO_INCLUDE_CHAPTERS;
  assert_int_equal(proto_decode_job(b.data, b.len, &out), -EPROTO);
  buf_reset(&b);
  in.kind = PROTO_KIND_CAPTIONS;
  assert_int_equal(proto_encode_job(&b, &in), -EINVAL);
  in.kind = PROTO_KIND_METADATA;
  in.include = 4;
  assert_int_equal(proto_encode_job(&b, &in), -EINVAL);
  buf_free(&b);
}

static void test_job_key_keeps_kinds_and_translations_apart(void **state) {
  (void)state;
  struct proto_job j = sample_job();
  char key[PROTO_MAX_JOB_KEY + 1];
  proto_job_key(&j, key);
  assert_string_equal(key, "pt-BR>fr");
  j.translate[0] = '\0';
  proto_job_key(&j, key);
  assert_string_equal(key, "pt-BR"); /* the key an untranslated transcript always had */
  j.lang[0] = '\0';
  proto_job_key(&j, key);
  assert_string_equal(key, "");
  memcpy(j.translate, "de", 3);
  proto_job_key(&j, key);
  assert_string_equal(key, ">de");
  j.kind = PROTO_KIND_TRACKS;
  proto_job_key(&j, key);
  assert_string_equal(key, "*tracks");
  assert_int_equal(proto_key_kind(key), PROTO_KIND_TRACKS);
  j.kind = PROTO_KIND_METADATA;
  proto_job_key(&j, key);
  assert_string_equal(key, "*metadata");
  assert_int_equal(proto_key_kind(key), PROTO_KIND_METADATA);
  assert_int_equal(proto_key_kind("en"), PROTO_KIND_CAPTIONS);
  /* BCP 47 casing: every spelling of one language is one key. */
  j.kind = PROTO_KIND_CAPTIONS;
  static const char *const spellings[][2] = {
      {"en-aA", "en-AA"},   {"en-Us", "en-US"},           {"zh-hant", "zh-Hant"},        {"sr-LATN", "sr-Latn"},
      {"es-419", "es-419"}, {"de-CH-1996", "de-CH-1996"}, {"ca-VALENCIA", "ca-valencia"}};
  for (size_t i = 0; i < sizeof(spellings) / sizeof(spellings[0]); i++) {
    snprintf(j.lang, sizeof(j.lang), "%s", spellings[i][0]);
    snprintf(j.translate, sizeof(j.translate), "%s", spellings[i][0]);
    proto_job_key(&j, key);
    char want[PROTO_MAX_JOB_KEY + 1];
    snprintf(want, sizeof(want), "%s>%s", spellings[i][1], spellings[i][1]);
    assert_string_equal(key, want);
  }
  /* A transcript's track key: its served language, canonical, and its body's digest. */
  struct proto_result r;
  memset(&r, 0, sizeof(r));
  memcpy(r.lang, "pt-br", 6);
  r.body = "{}";
  r.body_len = 2;
  proto_track_key(&r, key);
  assert_string_equal(key, "=pt-BR#44136fa355b3"); /* SHA-256 of "{}" begins 44136fa355b3 */
  memcpy(r.lang, "abc-abcdefghijk", 16);
  proto_track_key(&r, key);
  assert_int_equal(strlen(key), 1 + 15 + 1 + 12);
  j.kind = PROTO_KIND_TRACKS;
  /* The longest fields fit whole. */
  j.kind = PROTO_KIND_CAPTIONS;
  memcpy(j.lang, "abc-abcdefghijk", 16);
  memcpy(j.translate, "xyz-abcdefghijk", 16);
  proto_job_key(&j, key);
  assert_string_equal(key, "abc-abcdefghijk>xyz-abcdefghijk");
}

static void test_result_round_trips_body_bytes(void **state) {
  (void)state;
  struct proto_result in, out;
  memset(&in, 0, sizeof(in));
  in.job_id = 7;
  in.outcome = PROTO_OK;
  in.source = PROTO_SOURCE_CAPTIONS;
  in.fetch_ms = 12;
  in.cache_ms = 86400000;
  in.retry_after_s = 1800;
  memcpy(in.lang, "en", 3);
  memcpy(in.detail, "ok", 3);
  in.body = "{\"a\":\"\0b\"}";
  in.body_len = 10;
  struct buf b = BUF_INIT;
  assert_int_equal(proto_encode_result(&b, &in), 0);
  assert_int_equal(proto_decode_result(b.data, b.len, &out), 0);
  assert_int_equal(out.outcome, PROTO_OK);
  assert_int_equal(out.source, PROTO_SOURCE_CAPTIONS);
  assert_int_equal(out.body_len, 10);
  assert_memory_equal(out.body, in.body, 10);
  assert_string_equal(out.lang, "en");
  assert_int_equal(out.cache_ms, 86400000);
  assert_int_equal(out.retry_after_s, 1800);
  buf_free(&b);
}

static void test_result_last_has_the_result_encoding_under_its_own_type(void **state) {
  (void)state;
  struct proto_result in, out;
  memset(&in, 0, sizeof(in));
  in.job_id = 9;
  in.outcome = PROTO_UPSTREAM_FAILED;
  in.fetch_ms = 1500;
  memcpy(in.detail, "timeout", 8);
  struct buf plain = BUF_INIT, last = BUF_INIT;
  assert_int_equal(proto_encode_result(&plain, &in), 0);
  assert_int_equal(proto_encode_result_last(&last, &in), 0);
  assert_int_equal(proto_peek_type(plain.data, plain.len), PROTO_RESULT);
  assert_int_equal(proto_peek_type(last.data, last.len), PROTO_RESULT_LAST);
  assert_int_equal(PROTO_RESULT_LAST, 4);
  /* Same bytes but the type. */
  assert_int_equal(last.len, plain.len);
  assert_int_equal((unsigned char)last.data[3], PROTO_RESULT_LAST);
  assert_memory_equal(last.data, plain.data, 3);
  assert_memory_equal(last.data + 4, plain.data + 4, plain.len - 4);
  assert_int_equal(proto_decode_result(last.data, last.len, &out), 0);
  assert_true(out.job_id == 9);
  assert_int_equal(out.outcome, PROTO_UPSTREAM_FAILED);
  assert_int_equal(out.fetch_ms, 1500);
  assert_string_equal(out.detail, "timeout");
  assert_int_equal(out.body_len, 0);
  /* It is not a job, and a type past it is nothing. */
  struct proto_job job;
  assert_int_equal(proto_decode_job(last.data, last.len, &job), -EPROTO);
  last.data[3] = PROTO_DECLINE + 1;
  assert_int_equal(proto_peek_type(last.data, last.len), -EPROTO);
  assert_int_equal(proto_decode_result(last.data, last.len, &out), -EPROTO);
  for (size_t n = 0; n < plain.len; n++) {
    plain.data[3] = PROTO_RESULT_LAST;
    assert_int_equal(proto_decode_result(plain.data, n, &out), -EPROTO);
  }
  buf_free(&plain);
  buf_free(&last);
}

static void test_decline_carries_its_job_id_and_why_and_nothing_else(void **state) {
  (void)state;
  struct buf b = BUF_INIT;
  assert_int_equal(proto_encode_decline(&b, 0x0102030405060708ULL, PROTO_DECLINE_BUDGET), 0);
  static const unsigned char want[] = {'V', 'T', PROTO_VERSION, 5, 1, 2, 3, 4, 5, 6, 7, 8, PROTO_DECLINE_BUDGET};
  assert_int_equal(b.len, sizeof(want));
  assert_memory_equal(b.data, want, sizeof(want));
  assert_int_equal(proto_peek_type(b.data, b.len), PROTO_DECLINE);
  uint64_t id = 0;
  uint8_t why = 9;
  assert_int_equal(proto_decode_decline(b.data, b.len, &id, &why), 0);
  assert_true(id == 0x0102030405060708ULL);
  assert_int_equal(why, PROTO_DECLINE_BUDGET);
  /* Shorter, longer, an unknown why, or another type: rejected whole. */
  for (size_t n = 0; n < b.len; n++) assert_int_equal(proto_decode_decline(b.data, n, &id, &why), -EPROTO);
  b.data[b.len - 1] = PROTO_DECLINE_BUDGET + 1;
  assert_int_equal(proto_decode_decline(b.data, b.len, &id, &why), -EPROTO);
  b.data[b.len - 1] = PROTO_DECLINE_BUSY;
  assert_int_equal(proto_decode_decline(b.data, b.len, &id, &why), 0);
  assert_int_equal(why, PROTO_DECLINE_BUSY);
  struct buf bad = BUF_INIT;
  assert_int_equal(proto_encode_decline(&bad, 1, PROTO_DECLINE_BUDGET + 1), -EINVAL);
  buf_free(&bad);
  assert_int_equal(buf_append(&b, "", 1), 0);
  assert_int_equal(proto_decode_decline(b.data, b.len, &id, &why), -EPROTO);
  struct proto_result res;
  assert_int_equal(proto_decode_result(b.data, b.len - 1, &res), -EPROTO);
  struct buf ready = BUF_INIT;
  assert_int_equal(proto_encode_ready(&ready), 0);
  assert_int_equal(proto_decode_decline(ready.data, ready.len, &id, &why), -EPROTO);
  buf_free(&ready);
  buf_free(&b);
}

static void test_result_carries_its_reason_and_attempts(void **state) {
  (void)state;
  struct proto_result r = {.job_id = 5, .outcome = PROTO_UPSTREAM_FAILED, .reason = PROTO_REASON_NETWORK};
  r.nattempts = 2;
  r.attempts[0] = (struct proto_attempt){.proxy = 1, .result = PROTO_ATTEMPT_BLOCKED, .client = "VISIONOS"};
  r.attempts[1] = (struct proto_attempt){.proxy = 16, .result = PROTO_ATTEMPT_FAILED, .client = "ANDROID_VR"};
  r.negress = 1;
  r.egress[0] = (struct proto_egress){.egress = 16, .left = 29, .waits = 3, .declines = 70000};
  r.pot_failures = 2;
  r.sandbox = (1u << PROTO_SANDBOX_SECCOMP) | (1u << PROTO_SANDBOX_LANDLOCK_NET);
  struct buf b = BUF_INIT;
  assert_int_equal(proto_encode_result(&b, &r), 0);
  struct proto_result d;
  assert_int_equal(proto_decode_result(b.data, b.len, &d), 0);
  assert_int_equal(d.pot_failures, 2);
  assert_int_equal(d.sandbox, (1u << PROTO_SANDBOX_SECCOMP) | (1u << PROTO_SANDBOX_LANDLOCK_NET));
  assert_int_equal(d.reason, PROTO_REASON_NETWORK);
  assert_string_equal(proto_reason_name(d.reason), "network");
  assert_int_equal(d.nattempts, 2);
  assert_int_equal(d.attempts[1].proxy, 16);
  assert_int_equal(d.attempts[0].result, PROTO_ATTEMPT_BLOCKED);
  assert_string_equal(d.attempts[1].client, "ANDROID_VR");
  assert_int_equal(d.negress, 1);
  assert_int_equal(d.egress[0].egress, 16);
  assert_int_equal(d.egress[0].left, 29);
  assert_int_equal(d.egress[0].waits, 3);
  assert_int_equal(d.egress[0].declines, 70000);
  /* Every truncation is refused, and so are a reason or a proxy index out of range. */
  for (size_t n = 0; n < b.len; n++) assert_int_equal(proto_decode_result(b.data, n, &d), -EPROTO);
  /*
   * Back over the body length, the 304's flag and ETag (none), the player summary's length (none) and lifetime, the
   * sandbox layers, the PO-token provider failures, retry_after_s, cache_ms, one egress, two attempts, the reason and
   * the attempt count.
   */
  size_t sandbox_at = b.len - 4 - 3 - 4 - 4 - 1;
  assert_int_equal(b.data[sandbox_at - 1], 2);
  /* A layer bit past the known ones is refused. */
  b.data[sandbox_at] = (char)(1u << PROTO_SANDBOX__COUNT);
  assert_int_equal(proto_decode_result(b.data, b.len, &d), -EPROTO);
  b.data[sandbox_at] = (char)((1u << PROTO_SANDBOX_SECCOMP) | (1u << PROTO_SANDBOX_LANDLOCK_NET));
  size_t egress_at = sandbox_at - 1 - 4 - 4 - 13;
  size_t reason_at = egress_at - 1 - (2 + 2 + 8) - (2 + 2 + 10) - 2;
  assert_int_equal(b.data[reason_at], PROTO_REASON_NETWORK);
  b.data[reason_at] = PROTO_REASON__COUNT;
  assert_int_equal(proto_decode_result(b.data, b.len, &d), -EPROTO);
  b.data[reason_at] = PROTO_REASON_NETWORK;
  b.data[reason_at + 2 + 2 + 2 + 8] = 17;
  assert_int_equal(proto_decode_result(b.data, b.len, &d), -EPROTO);
  b.data[reason_at + 2 + 2 + 2 + 8] = 16;
  assert_int_equal(b.data[egress_at], 16);
  b.data[egress_at] = PROTO_MAX_EGRESS;
  assert_int_equal(proto_decode_result(b.data, b.len, &d), -EPROTO);
  b.data[egress_at] = 16;
  assert_int_equal(proto_decode_result(b.data, b.len, &d), 0);
  r.reason = PROTO_REASON__COUNT;
  buf_reset(&b);
  assert_int_equal(proto_encode_result(&b, &r), -EINVAL);
  buf_free(&b);
}

/* A player summary travels with a result (fetcher -> dispatcher) and a job (dispatcher -> fetcher), bounded. */
static void test_player_summary_round_trips_in_a_job_and_a_result(void **state) {
  (void)state;
  static const char summary[] = "{\"playabilityStatus\":{\"status\":\"OK\"}}";
  struct proto_job job = sample_job(), jout;
  job.player = summary;
  job.player_len = sizeof(summary) - 1;
  struct buf b = BUF_INIT;
  assert_int_equal(proto_encode_job(&b, &job), 0);
  assert_int_equal(proto_decode_job(b.data, b.len, &jout), 0);
  assert_int_equal(jout.player_len, sizeof(summary) - 1);
  assert_memory_equal(jout.player, summary, sizeof(summary) - 1);
  assert_string_equal(jout.request_id, job.request_id);
  assert_int_equal(jout.declines, job.declines);
  for (size_t n = 0; n < b.len; n++) assert_int_equal(proto_decode_job(b.data, n, &jout), -EPROTO);

  struct proto_result res, rout;
  memset(&res, 0, sizeof(res));
  res.outcome = PROTO_OK;
  res.body = "{}";
  res.body_len = 2;
  res.player = summary;
  res.player_len = sizeof(summary) - 1;
  res.player_ttl_ms = 1800000;
  buf_reset(&b);
  assert_int_equal(proto_encode_result(&b, &res), 0);
  assert_int_equal(proto_decode_result(b.data, b.len, &rout), 0);
  assert_int_equal(rout.player_ttl_ms, 1800000);
  assert_int_equal(rout.player_len, sizeof(summary) - 1);
  assert_memory_equal(rout.player, summary, sizeof(summary) - 1);
  assert_int_equal(rout.body_len, 2);
  assert_memory_equal(rout.body, "{}", 2);

  /* Past the bound, neither is encoded. */
  char *big = calloc(1, VTS_MAX_PLAYER_SUMMARY_BYTES + 1);
  assert_non_null(big);
  res.player = big;
  res.player_len = VTS_MAX_PLAYER_SUMMARY_BYTES + 1;
  buf_reset(&b);
  assert_int_equal(proto_encode_result(&b, &res), -EINVAL);
  job.player = big;
  job.player_len = VTS_MAX_PLAYER_SUMMARY_BYTES + 1;
  buf_reset(&b);
  assert_int_equal(proto_encode_job(&b, &job), -EINVAL);
  free(big);
  buf_free(&b);
}

static void test_every_truncation_of_a_job_is_rejected(void **state) {
  (void)state;
  struct proto_job in = sample_job(), out;
  struct buf b = BUF_INIT;
  assert_int_equal(proto_encode_job(&b, &in), 0);
  for (size_t n = 0; n < b.len; n++) assert_int_equal(proto_decode_job(b.data, n, &out), -EPROTO);
  buf_free(&b);
}

static void test_wrong_magic_version_and_trailing_bytes_are_rejected(void **state) {
  (void)state;
  struct proto_job in = sample_job(), out;
  struct buf b = BUF_INIT;
  assert_int_equal(proto_encode_job(&b, &in), 0);
  b.data[2] = PROTO_VERSION + 1;
  assert_int_equal(proto_decode_job(b.data, b.len, &out), -EPROTO);
  b.data[2] = PROTO_VERSION;
  b.data[0] = 'X';
  assert_int_equal(proto_decode_job(b.data, b.len, &out), -EPROTO);
  b.data[0] = 'V';
  buf_append(&b, "!", 1);
  assert_int_equal(proto_decode_job(b.data, b.len, &out), -EPROTO);
  buf_free(&b);
}

static void test_invalid_video_id_is_refused_on_both_sides(void **state) {
  (void)state;
  struct proto_job in = sample_job(), out;
  struct buf b = BUF_INIT;
  memcpy(in.video_id, "short", 6);
  assert_int_equal(proto_encode_job(&b, &in), -EINVAL);
  in = sample_job();
  assert_int_equal(proto_encode_job(&b, &in), 0);
  /* The id's bytes sit after magic(2) version(1) type(1) id(8) kind(1) deadline(4) length(2). */
  b.data[19] = '/';
  assert_int_equal(proto_decode_job(b.data, b.len, &out), -EPROTO);
  buf_free(&b);
}

static void test_ok_result_without_body_is_rejected(void **state) {
  (void)state;
  struct proto_result in, out;
  memset(&in, 0, sizeof(in));
  in.outcome = PROTO_OK;
  struct buf b = BUF_INIT;
  assert_int_equal(proto_encode_result(&b, &in), 0);
  assert_int_equal(proto_decode_result(b.data, b.len, &out), -EPROTO);
  buf_free(&b);
}

/* Every outcome of the table crosses the wire; 0 and the value after the last row do not, either way. */
static void test_every_outcome_round_trips_and_no_other(void **state) {
  (void)state;
  struct proto_result in, out;
  memset(&in, 0, sizeof(in));
  in.job_id = 9;
  in.body = "{}";
  in.body_len = 2;
  struct buf b = BUF_INIT;
  for (int o = 1; o <= PROTO_NOUTCOMES; o++) {
    in.outcome = (uint8_t)o;
    buf_reset(&b);
    assert_int_equal(proto_encode_result(&b, &in), 0);
    assert_int_equal(proto_decode_result(b.data, b.len, &out), 0);
    assert_int_equal(out.outcome, o);
  }
  size_t outcome_at = 4 + 8; /* header, job_id */
  b.data[outcome_at] = 0;
  assert_int_equal(proto_decode_result(b.data, b.len, &out), -EPROTO);
  b.data[outcome_at] = PROTO_NOUTCOMES + 1;
  assert_int_equal(proto_decode_result(b.data, b.len, &out), -EPROTO);
  in.outcome = 0;
  assert_int_equal(proto_encode_result(&b, &in), -EINVAL);
  in.outcome = PROTO_NOUTCOMES + 1;
  assert_int_equal(proto_encode_result(&b, &in), -EINVAL);
  buf_free(&b);
}

/* A reason's number is on the wire: the rows keep their places, and the later ones follow the budget's. */
static void test_reasons_keep_their_wire_numbers(void **state) {
  (void)state;
  assert_int_equal(PROTO_REASON_INTERNAL, 15);
  assert_int_equal(PROTO_REASON_BUDGET, 16);
  assert_int_equal(PROTO_REASON_RATIONED, 17);
  assert_int_equal(PROTO_REASON_CLIENT_OUTDATED, 18);
  assert_int_equal(PROTO_REASON_WRONG_VIDEO, 19);
  assert_int_equal(PROTO_REASON_TRANSLATION_THROTTLED, 20);
  assert_int_equal(PROTO_REASON_AGE_RESTRICTED, 21);
  assert_int_equal(PROTO_REASON_MEMBERS_ONLY, 22);
  assert_int_equal(PROTO_REASON_PRIVATE, 23);
  assert_int_equal(PROTO_REASON_REMOVED, 24);
  assert_int_equal(PROTO_REASON_LIVE_NOT_ARCHIVED, 25);
  assert_int_equal(PROTO_REASON_GEO_RESTRICTED, 26);
  assert_int_equal(PROTO_REASON_PLAYLIST_MISSING, 27);
  assert_int_equal(PROTO_REASON_PLAYLIST_PRIVATE, 28);
  assert_int_equal(PROTO_REASON_PLAYLIST_UNVIEWABLE, 29);
  assert_int_equal(PROTO_REASON_CHANNEL_MISSING, 30);
  assert_int_equal(PROTO_REASON_CHANNEL_REMOVED, 31);
  assert_int_equal(PROTO_REASON__COUNT, 32);
  assert_string_equal(proto_reason_name(PROTO_REASON_CHANNEL_REMOVED), "channel_removed");
  assert_string_equal(proto_reason_name(PROTO_REASON_BUDGET), "egress_budget");
  assert_string_equal(proto_reason_name(PROTO_REASON_RATIONED), "rationed");
  assert_string_equal(proto_reason_name(PROTO_REASON_CLIENT_OUTDATED), "client_outdated");
  assert_string_equal(proto_reason_name(PROTO_REASON_WRONG_VIDEO), "wrong_video");
  assert_string_equal(proto_reason_name(PROTO_REASON_TRANSLATION_THROTTLED), "translation_throttled");
  assert_string_equal(proto_reason_name(PROTO_REASON_AGE_RESTRICTED), "age_restricted");
  assert_string_equal(proto_reason_name(PROTO_REASON_LIVE_NOT_ARCHIVED), "live_not_archived");
  assert_string_equal(proto_reason_name(PROTO_REASON__COUNT), "unknown");
  /* Every reason that says the video cannot be played, and no other (a list that cannot be read is no video). */
  for (uint8_t r = 0; r < PROTO_REASON__COUNT; r++) {
    int gone = r == PROTO_REASON_NOT_PLAYABLE || (r >= PROTO_REASON_AGE_RESTRICTED && r <= PROTO_REASON_GEO_RESTRICTED);
    assert_int_equal(proto_reason_gone(r), gone);
  }
}

static void test_outcomes_map_to_the_architecture_statuses(void **state) {
  (void)state;
  assert_int_equal(proto_outcome_status(PROTO_OK), 200);
  assert_int_equal(proto_outcome_status(PROTO_NOT_AVAILABLE), 404);
  assert_int_equal(proto_outcome_status(PROTO_NO_CAPTIONS), 404);
  assert_int_equal(proto_outcome_status(PROTO_UPSTREAM_FAILED), 502);
  assert_int_equal(proto_outcome_status(PROTO_INTERNAL), 500);
  assert_int_equal(proto_outcome_status(99), 500);
}

/* A 304 the dispatcher decided carries its ETag and no body; a 304 with a body, without its ETag or failed is refused.
 */
static void test_a_not_modified_result_carries_its_etag_and_no_body(void **state) {
  (void)state;
  struct proto_result r = {
      .job_id = 0, .outcome = PROTO_OK, .notmod = 1, .etag = "\"0123456789abcdef0123456789abcdef-gz\""};
  struct buf b = BUF_INIT;
  assert_int_equal(proto_encode_result(&b, &r), 0);
  struct proto_result d;
  assert_int_equal(proto_decode_result(b.data, b.len, &d), 0);
  assert_int_equal(d.notmod, 1);
  assert_string_equal(d.etag, r.etag);
  assert_int_equal(d.body_len, 0);
  buf_free(&b);
  r.body = "{}";
  r.body_len = 2;
  assert_int_equal(proto_encode_result(&b, &r), 0);
  assert_int_equal(proto_decode_result(b.data, b.len, &d), -EPROTO);
  buf_free(&b);
  r.body_len = 0;
  r.etag[0] = '\0';
  assert_int_equal(proto_encode_result(&b, &r), 0);
  assert_int_equal(proto_decode_result(b.data, b.len, &d), -EPROTO);
  buf_free(&b);
  /* A job hands on the request's If-None-Match. */
  struct proto_job j = {.kind = PROTO_KIND_CAPTIONS, .video_id = "capJson3xx1", .inm = "\"x\", \"y\"", .inm_len = 8};
  assert_int_equal(proto_encode_job(&b, &j), 0);
  struct proto_job dj;
  assert_int_equal(proto_decode_job(b.data, b.len, &dj), 0);
  assert_int_equal(dj.inm_len, 8);
  assert_memory_equal(dj.inm, "\"x\", \"y\"", 8);
  assert_int_equal(dj.refresh, 0);
  buf_free(&b);
}

/* A worker's refresh of a transcript it holds: a CAPTIONS job with the ETag it holds; no other, on either side. */
static void test_a_refresh_is_a_captions_job_with_its_etag(void **state) {
  (void)state;
  struct buf b = BUF_INIT;
  struct proto_job j = {
      .kind = PROTO_KIND_CAPTIONS, .video_id = "capJson3xx1", .inm = "\"x\"", .inm_len = 3, .refresh = 1};
  assert_int_equal(proto_encode_job(&b, &j), 0);
  struct proto_job dj;
  assert_int_equal(proto_decode_job(b.data, b.len, &dj), 0);
  assert_int_equal(dj.refresh, 1);
  assert_int_equal(dj.inm_len, 3);
  b.data[b.len - 1] = 2; /* the last byte: the refresh flag */
  assert_int_equal(proto_decode_job(b.data, b.len, &dj), -EPROTO);
  buf_free(&b);
  j.refresh = 2;
  assert_int_equal(proto_encode_job(&b, &j), -EINVAL);
  buf_free(&b);
  j.refresh = 1;
  j.inm_len = 0;
  j.inm = NULL;
  assert_int_equal(proto_encode_job(&b, &j), -EINVAL);
  buf_free(&b);
  j.inm = "\"x\"";
  j.inm_len = 3;
  j.kind = PROTO_KIND_TRACKS;
  assert_int_equal(proto_encode_job(&b, &j), -EINVAL);
  buf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_job_round_trips_every_field),
      cmocka_unit_test(test_every_kind_round_trips_and_no_other),
      cmocka_unit_test(test_webhook_job_round_trips_its_delivery),
      cmocka_unit_test(test_job_key_keeps_kinds_and_translations_apart),
      cmocka_unit_test(test_a_metadata_job_carries_its_chapters_bit_and_its_own_key),
      cmocka_unit_test(test_result_round_trips_body_bytes),
      cmocka_unit_test(test_result_last_has_the_result_encoding_under_its_own_type),
      cmocka_unit_test(test_decline_carries_its_job_id_and_why_and_nothing_else),
      cmocka_unit_test(test_result_carries_its_reason_and_attempts),
      cmocka_unit_test(test_a_not_modified_result_carries_its_etag_and_no_body),
      cmocka_unit_test(test_a_refresh_is_a_captions_job_with_its_etag),
      cmocka_unit_test(test_every_truncation_of_a_job_is_rejected),
      cmocka_unit_test(test_player_summary_round_trips_in_a_job_and_a_result),
      cmocka_unit_test(test_wrong_magic_version_and_trailing_bytes_are_rejected),
      cmocka_unit_test(test_invalid_video_id_is_refused_on_both_sides),
      cmocka_unit_test(test_ok_result_without_body_is_rejected),
      cmocka_unit_test(test_every_outcome_round_trips_and_no_other),
      cmocka_unit_test(test_reasons_keep_their_wire_numbers),
      cmocka_unit_test(test_a_browse_job_carries_its_target_and_no_video),
      cmocka_unit_test(test_a_browse_body_round_trips_and_refuses_other_shapes),
      cmocka_unit_test(test_outcomes_map_to_the_architecture_statuses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
