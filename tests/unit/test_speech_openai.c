/* The /v1/audio/transcriptions engine against tests/fake_speech/fake_transcribe.py on 127.0.0.1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/config.h"
#include "common/util.h"
#include "fetcher/speech/engine.h"
#include "proto/proto.h"
#include "test_speech_util.h"

#define EPS 1e-6
#define WAV_HEADER 44

static int16_t pcm[16000 * 13 / 10]; /* 1.3 s; the fake server does not listen, it measures */

/* A configuration pointing at the fake server; scenario is its path prefix ("" for ok). */
static void make_cfg(struct vts_config *cfg, const char *scenario) {
  memset(cfg, 0, sizeof(*cfg));
  snprintf(cfg->speech_url, sizeof(cfg->speech_url), "http://127.0.0.1:%d%s%s/", th_shared_server.port,
           scenario[0] ? "/" : "", scenario);
  snprintf(cfg->speech_api_key, sizeof(cfg->speech_api_key), "%s", TH_FAKE_SERVER_KEY);
  snprintf(cfg->speech_engine, sizeof(cfg->speech_engine), "openai");
}

struct result {
  int rv; /* the outcome */
  uint8_t reason;
  struct segment_list segs;
  char lang[16];
  char detail[64];
};

static void run(const struct vts_config *cfg, const struct speech_audio *audio, size_t max_upload, uint64_t deadline,
                struct result *r) {
  memset(r, 0, sizeof(*r));
  const struct speech_engine *engine = speech_engine_find("openai");
  assert_non_null(engine);
  struct speech_request req = {.cfg = cfg, .audio = audio, .deadline_ms_abs = deadline, .max_upload_bytes = max_upload};
  struct fetch_outcome res;
  r->rv = engine->recognise(&req, &r->segs, r->lang, &res);
  assert_int_equal(res.outcome, r->rv);
  r->reason = res.reason;
  snprintf(r->detail, sizeof(r->detail), "%s", res.detail);
}

static void run_model(const char *scenario, const char *model, struct result *r) {
  struct vts_config cfg;
  make_cfg(&cfg, scenario);
  snprintf(cfg.speech_model, sizeof(cfg.speech_model), "%s", model);
  struct speech_audio audio = {.pcm = pcm, .nsamples = 16000};
  run(&cfg, &audio, 1024 * 1024, util_now_ms() + 10000, r);
}

static void run_scenario(const char *scenario, struct result *r) { run_model(scenario, "", r); }

static void assert_segment(const struct segment_list *sl, size_t i, const char *text, double start, double duration) {
  assert_true(i < sl->len);
  assert_string_equal(sl->items[i].text, text);
  if (sl->items[i].start < start - EPS || sl->items[i].start > start + EPS || sl->items[i].duration < duration - EPS ||
      sl->items[i].duration > duration + EPS)
    fail_msg("segment %zu: expected %.3f+%.3f, got %.3f+%.3f", i, start, duration, sl->items[i].start,
             sl->items[i].duration);
}

static void test_wav_parts_carry_their_offsets(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  struct vts_config cfg;
  make_cfg(&cfg, "");
  struct speech_audio audio = {.pcm = pcm, .nsamples = sizeof(pcm) / sizeof(pcm[0])};
  struct result r;
  /* 8000 samples (0.5 s) per part: parts of 0.5, 0.5 and 0.3 s, each answered as two halves. */
  run(&cfg, &audio, WAV_HEADER + 8000 * 2, util_now_ms() + 10000, &r);
  assert_int_equal(r.rv, PROTO_OK);
  assert_string_equal(r.lang, "en");
  assert_int_equal(r.segs.len, 6);
  assert_segment(&r.segs, 0, "alpha", 0.0, 0.25);
  assert_segment(&r.segs, 1, "beta", 0.25, 0.25);
  assert_segment(&r.segs, 2, "alpha", 0.5, 0.25);
  assert_segment(&r.segs, 3, "beta", 0.75, 0.25);
  assert_segment(&r.segs, 4, "alpha", 1.0, 0.15);
  assert_segment(&r.segs, 5, "beta", 1.15, 0.15);
  th_free_segments(&r.segs);
}

static void test_small_original_file_is_sent_as_is(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  struct vts_config cfg;
  make_cfg(&cfg, "");
  static const char original[] = "not really webm, the fake server only looks at the name";
  struct speech_audio audio = {.pcm = pcm,
                               .nsamples = 16000,
                               .original = original,
                               .original_len = sizeof(original),
                               .original_name = "audio.webm"};
  struct result r;
  run(&cfg, &audio, 1024 * 1024, util_now_ms() + 10000, &r);
  assert_int_equal(r.rv, PROTO_OK);
  assert_int_equal(r.segs.len, 2);
  assert_segment(&r.segs, 0, "hello", 0.0, 1.25);
  assert_segment(&r.segs, 1, "world", 1.25, 1.25);
  th_free_segments(&r.segs);
}

static void test_large_original_file_is_sent_as_wav_parts(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  struct vts_config cfg;
  make_cfg(&cfg, "");
  static char original[40000];
  struct speech_audio audio = {.pcm = pcm,
                               .nsamples = 16000,
                               .original = original,
                               .original_len = sizeof(original),
                               .original_name = "audio.m4a"};
  struct result r;
  run(&cfg, &audio, WAV_HEADER + 16000 * 2, util_now_ms() + 10000, &r);
  assert_int_equal(r.rv, PROTO_OK);
  assert_int_equal(r.segs.len, 2);
  assert_segment(&r.segs, 0, "alpha", 0.0, 0.5);
  assert_segment(&r.segs, 1, "beta", 0.5, 0.5);
  th_free_segments(&r.segs);
}

static void test_server_error_is_an_upstream_failure(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  struct result r;
  run_scenario("500", &r);
  assert_int_equal(r.rv, PROTO_UPSTREAM_FAILED);
  assert_int_equal(r.reason, PROTO_REASON_SPEECH);
  assert_string_equal(r.detail, "speech_http_500");
  th_free_segments(&r.segs);
}

static void test_malformed_reply_is_an_upstream_failure(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  struct result r;
  run_scenario("malformed", &r);
  assert_int_equal(r.rv, PROTO_UPSTREAM_FAILED);
  assert_int_equal(r.reason, PROTO_REASON_SPEECH);
  assert_string_equal(r.detail, "speech_bad_reply");
  th_free_segments(&r.segs);
}

static void test_deeply_nested_reply_is_an_upstream_failure(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  struct result r;
  run_scenario("deep", &r);
  assert_int_equal(r.rv, PROTO_UPSTREAM_FAILED);
  assert_int_equal(r.reason, PROTO_REASON_SPEECH);
  th_free_segments(&r.segs);
}

static void test_slow_server_times_out_at_the_deadline(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  struct vts_config cfg;
  make_cfg(&cfg, "slow");
  struct speech_audio audio = {.pcm = pcm, .nsamples = 16000};
  struct result r;
  uint64_t t0 = util_now_ms();
  run(&cfg, &audio, 1024 * 1024, t0 + 500, &r);
  uint64_t took = util_now_ms() - t0;
  assert_int_equal(r.rv, PROTO_UPSTREAM_FAILED);
  assert_int_equal(r.reason, PROTO_REASON_SPEECH);
  assert_string_equal(r.detail, "speech_timeout");
  if (took > 2000) fail_msg("gave up after %llu ms, deadline was 500 ms", (unsigned long long)took);
  th_free_segments(&r.segs);
}

static void test_wrong_api_key_is_an_upstream_failure(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  struct vts_config cfg;
  make_cfg(&cfg, "");
  snprintf(cfg.speech_api_key, sizeof(cfg.speech_api_key), "wrong-key");
  struct speech_audio audio = {.pcm = pcm, .nsamples = 16000};
  struct result r;
  run(&cfg, &audio, 1024 * 1024, util_now_ms() + 10000, &r);
  assert_int_equal(r.rv, PROTO_UPSTREAM_FAILED);
  assert_int_equal(r.reason, PROTO_REASON_SPEECH);
  assert_string_equal(r.detail, "speech_http_401");
  th_free_segments(&r.segs);
}

static void test_model_comes_from_vts_speech_model(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  struct result r;
  /* The fake server accepts only whisper-1, the default. */
  run_model("", "large-v3", &r);
  assert_int_equal(r.rv, PROTO_UPSTREAM_FAILED);
  assert_int_equal(r.reason, PROTO_REASON_SPEECH);
  assert_string_equal(r.detail, "speech_http_400");
  th_free_segments(&r.segs);
  run_scenario("", &r);
  assert_int_equal(r.rv, PROTO_OK);
  th_free_segments(&r.segs);
}

static void test_text_only_reply_becomes_one_segment(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  struct result r;
  run_scenario("textonly", &r);
  assert_int_equal(r.rv, PROTO_OK);
  assert_string_equal(r.lang, "en");
  assert_int_equal(r.segs.len, 1);
  assert_segment(&r.segs, 0, "just text", 0.0, 1.0);
  th_free_segments(&r.segs);
}

static void test_language_name_is_mapped_to_its_code(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  struct result r;
  run_scenario("french", &r);
  assert_int_equal(r.rv, PROTO_OK);
  assert_string_equal(r.lang, "fr");
  th_free_segments(&r.segs);
}

static void test_unset_url_is_not_configured(void **state) {
  (void)state;
  struct vts_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  struct speech_audio audio = {.pcm = pcm, .nsamples = 16000};
  struct result r;
  run(&cfg, &audio, 1024 * 1024, util_now_ms() + 10000, &r);
  assert_int_equal(r.rv, PROTO_INTERNAL);
  assert_int_equal(r.reason, PROTO_REASON_INTERNAL);
  assert_string_equal(r.detail, "speech_not_configured");
}

static void test_unreachable_server_is_an_upstream_failure(void **state) {
  (void)state;
  struct vts_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  /* Port 1 on loopback: nothing listens there. */
  snprintf(cfg.speech_url, sizeof(cfg.speech_url), "http://127.0.0.1:1");
  struct speech_audio audio = {.pcm = pcm, .nsamples = 16000};
  struct result r;
  run(&cfg, &audio, 1024 * 1024, util_now_ms() + 10000, &r);
  assert_int_equal(r.rv, PROTO_UPSTREAM_FAILED);
  assert_int_equal(r.reason, PROTO_REASON_SPEECH);
  assert_string_equal(r.detail, "speech_unreachable");
}

static int16_t long_pcm[16000 * 26]; /* 26 s: the long scenarios' times are inside it */

static void run_long(const char *scenario, struct result *r) {
  struct vts_config cfg;
  make_cfg(&cfg, scenario);
  struct speech_audio audio = {.pcm = long_pcm, .nsamples = sizeof(long_pcm) / sizeof(long_pcm[0])};
  run(&cfg, &audio, 1024 * 1024, util_now_ms() + 10000, r);
}

struct want_segment {
  const char *text;
  double start, duration;
};

static void expect_long(const char *scenario, const struct want_segment *want, size_t n) {
  struct result r;
  run_long(scenario, &r);
  assert_int_equal(r.rv, PROTO_OK);
  assert_int_equal(r.segs.len, n);
  for (size_t i = 0; i < n; i++) assert_segment(&r.segs, i, want[i].text, want[i].start, want[i].duration);
  th_free_segments(&r.segs);
}

static void test_long_segment_is_cut_at_the_longest_pause_between_its_words(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  static const struct want_segment want[] = {{"w0 w1 w2 w3 w4 w5", 0.0, 7.0},
                                             {"w6 w7 w8 w9 w10 w11 w12", 7.45, 8.2},
                                             {"w13 w14 w15 w16 w17 w18 w19", 15.85, 8.2},
                                             {"end.", 24.5, 1.0}};
  expect_long("long", want, 4);
}

static void test_long_segment_without_word_times_is_cut_evenly(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  static const struct want_segment want[] = {
      {"a b c", 0.0, 6.0}, {"d e f", 6.0, 6.0}, {"g h i", 12.0, 6.0}, {"j k l", 18.0, 6.0}};
  expect_long("longnowords", want, 4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_long_segment_is_cut_at_the_longest_pause_between_its_words),
      cmocka_unit_test(test_long_segment_without_word_times_is_cut_evenly),
      cmocka_unit_test(test_wav_parts_carry_their_offsets),
      cmocka_unit_test(test_small_original_file_is_sent_as_is),
      cmocka_unit_test(test_large_original_file_is_sent_as_wav_parts),
      cmocka_unit_test(test_server_error_is_an_upstream_failure),
      cmocka_unit_test(test_malformed_reply_is_an_upstream_failure),
      cmocka_unit_test(test_deeply_nested_reply_is_an_upstream_failure),
      cmocka_unit_test(test_slow_server_times_out_at_the_deadline),
      cmocka_unit_test(test_wrong_api_key_is_an_upstream_failure),
      cmocka_unit_test(test_model_comes_from_vts_speech_model),
      cmocka_unit_test(test_text_only_reply_becomes_one_segment),
      cmocka_unit_test(test_language_name_is_mapped_to_its_code),
      cmocka_unit_test(test_unset_url_is_not_configured),
      cmocka_unit_test(test_unreachable_server_is_an_upstream_failure),
  };
  return cmocka_run_group_tests(tests, th_shared_server_setup, th_shared_server_teardown);
}
