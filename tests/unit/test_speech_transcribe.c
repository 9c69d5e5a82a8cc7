/*
 * speech_transcribe_via end to end: audio chosen from a hand-built player_info, downloaded from the fake media host on
 * 127.0.0.1, decoded and recognised, and every failure mapped to its proto outcome.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/config.h"
#include "common/limits.h"
#include "common/util.h"
#include "fetcher/speech/engine.h"
#include "fetcher/speech/speech.h"
#include "proto/proto.h"
#include "test_speech_util.h"

#define GOFORWARD_MS 2786

static char dir[64];
static struct th_server server;
static int ready;
static int64_t speech_m4a_len;

static int setup(void **state) {
  (void)state;
  if (!th_have_audio_tools() || th_tmpdir(dir, sizeof(dir)) != 0) return 0;
  char m4a[128], webm[128], silence_raw[128], silence[128], corrupt[128];
  snprintf(m4a, sizeof(m4a), "%s/speech.m4a", dir);
  snprintf(webm, sizeof(webm), "%s/speech.webm", dir);
  snprintf(silence_raw, sizeof(silence_raw), "%s/silence.raw", dir);
  snprintf(silence, sizeof(silence), "%s/silence.m4a", dir);
  snprintf(corrupt, sizeof(corrupt), "%s/corrupt.m4a", dir);
  /* Fragmented mp4, as the platform serves its DASH audio. */
  int rv = th_encode(TH_GOFORWARD, m4a, TH_AAC, "-movflags", "+frag_keyframe+empty_moov+default_base_moof", NULL);
  rv |= th_encode(TH_GOFORWARD, webm, TH_OPUS, NULL);
  struct buf b = BUF_INIT;
  if (rv == 0) rv = th_raw_silence(&b, 3.0);
  if (rv == 0) rv = th_write_file(silence_raw, b.data, b.len);
  if (rv == 0) rv = th_encode(silence_raw, silence, TH_AAC, NULL);
  if (rv == 0) rv = th_read_file(m4a, &b);
  speech_m4a_len = (int64_t)b.len;
  for (size_t i = 2048; rv == 0 && i < b.len; i++) b.data[i] = (char)(b.data[i] ^ 0x5a);
  if (rv == 0) rv = th_write_file(corrupt, b.data, b.len);
  buf_free(&b);
  if (rv != 0) {
    fprintf(stderr, "SKIP: could not make the test audio\n");
    return 0;
  }
  if (th_server_start(&server, dir) == 0) ready = 1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  th_server_stop(&server);
  if (dir[0] != '\0') th_tmpdir_remove(dir);
  return 0;
}

static void make_cfg(struct vts_config *cfg, const char *engine, const char *scenario) {
  memset(cfg, 0, sizeof(*cfg));
  snprintf(cfg->upstream_url, sizeof(cfg->upstream_url), "http://127.0.0.1:%d", server.port);
  snprintf(cfg->speech_engine, sizeof(cfg->speech_engine), "%s", engine);
  snprintf(cfg->speech_url, sizeof(cfg->speech_url), "http://127.0.0.1:%d%s%s", server.port, scenario[0] ? "/" : "",
           scenario);
  snprintf(cfg->speech_api_key, sizeof(cfg->speech_api_key), "%s", TH_FAKE_SERVER_KEY);
  cfg->speech_max_seconds = 600;
}

struct outcome {
  int outcome;
  uint8_t reason;
  struct segment_list segs;
  char lang[16];
  char detail[64];
};

/* speech_transcribe_via of pi into o; the outcome it returns is the one it set. */
static void via(const struct vts_config *cfg, const struct player_info *pi, uint64_t deadline_ms_abs,
                struct outcome *o) {
  struct fetch_outcome res;
  o->outcome = speech_transcribe_via(cfg, pi, NULL, deadline_ms_abs, &o->segs, o->lang, &res);
  assert_int_equal(res.outcome, o->outcome);
  o->reason = res.reason;
  snprintf(o->detail, sizeof(o->detail), "%s", res.detail);
}

/* Transcribes one audio format: url_path on the fake host (or a full URL), with its declared size and duration. */
static void transcribe(const struct vts_config *cfg, const char *url_path, int64_t len, int64_t dur_ms,
                       struct outcome *o) {
  char url[512];
  if (strncmp(url_path, "/", 1) == 0)
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", server.port, url_path);
  else
    snprintf(url, sizeof(url), "%s", url_path);
  struct audio_format af = {
      .url = url, .itag = 140, .content_length = len, .bitrate = 96000, .duration_ms = dur_ms, .is_default = 1};
  snprintf(af.mime, sizeof(af.mime), "audio/mp4; codecs=\"mp4a.40.2\"");
  if (strstr(url_path, ".webm") != NULL) snprintf(af.mime, sizeof(af.mime), "audio/webm; codecs=\"opus\"");
  struct player_info pi = {.playability = PLAY_OK, .default_track = -1, .audio = &af, .naudio = 1};
  memset(o, 0, sizeof(*o));
  via(cfg, &pi, util_now_ms() + 60000, o);
}

/* A failed transcription: its outcome, the reason that goes with it in the speech pipeline, and its detail. */
static void assert_failed(const struct outcome *o, int outcome, const char *detail) {
  if (o->outcome != outcome || strcmp(o->detail, detail) != 0)
    fail_msg("expected outcome %d (%s), got %d (%s)", outcome, detail, o->outcome, o->detail);
  assert_int_equal(o->reason, outcome == PROTO_NOT_AVAILABLE ? PROTO_REASON_NOT_PLAYABLE
                              : outcome == PROTO_INTERNAL    ? PROTO_REASON_INTERNAL
                                                             : PROTO_REASON_SPEECH);
  assert_int_equal(o->segs.len, 0);
  assert_null(o->segs.items);
  assert_string_equal(o->lang, "");
}

static void test_pocketsphinx_transcribes_the_chosen_audio(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  struct vts_config cfg;
  make_cfg(&cfg, "pocketsphinx", "");
  struct outcome o;
  transcribe(&cfg, "/audio/file/speech.m4a", speech_m4a_len, GOFORWARD_MS, &o);
  assert_int_equal(o.outcome, PROTO_OK);
  assert_string_equal(o.lang, "en");
  struct buf text = BUF_INIT;
  th_join_segments(&o.segs, &text);
  double wer = th_wer(TH_GOFORWARD_TEXT, text.data);
  if (wer > 0.40) fail_msg("WER %.2f: \"%s\"", wer, text.data);
  buf_free(&text);
  th_free_segments(&o.segs);
}

static void test_webm_audio_is_transcribed_too(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  struct vts_config cfg;
  make_cfg(&cfg, "pocketsphinx", "");
  struct outcome o;
  transcribe(&cfg, "/audio/file/speech.webm", -1, GOFORWARD_MS, &o);
  assert_int_equal(o.outcome, PROTO_OK);
  assert_true(o.segs.len >= 1);
  th_free_segments(&o.segs);
}

static void test_openai_engine_receives_the_downloaded_file(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  struct vts_config cfg;
  make_cfg(&cfg, "openai", "");
  struct outcome o;
  transcribe(&cfg, "/audio/file/speech.m4a", speech_m4a_len, GOFORWARD_MS, &o);
  assert_int_equal(o.outcome, PROTO_OK);
  assert_string_equal(o.lang, "en");
  /* The fake server answers "hello world" for a non-WAV file: the original bytes were sent. */
  assert_int_equal(o.segs.len, 2);
  assert_string_equal(o.segs.items[0].text, "hello");
  assert_string_equal(o.segs.items[1].text, "world");
  th_free_segments(&o.segs);
}

static void test_no_audio_format_is_not_available(void **state) {
  (void)state;
  struct vts_config cfg;
  make_cfg(&cfg, "pocketsphinx", "");
  struct player_info pi = {.playability = PLAY_OK, .default_track = -1};
  struct outcome o;
  memset(&o, 0, sizeof(o));
  via(&cfg, &pi, util_now_ms() + 1000, &o);
  assert_failed(&o, PROTO_NOT_AVAILABLE, "no_audio_format");
}

static void test_declared_duration_over_the_cap_is_not_available_before_download(void **state) {
  (void)state;
  struct vts_config cfg;
  make_cfg(&cfg, "pocketsphinx", "");
  cfg.speech_max_seconds = 60;
  struct outcome o;
  /* Nothing listens on port 1: a download attempt would fail as UPSTREAM_FAILED instead. */
  transcribe(&cfg, "http://127.0.0.1:1/audio.m4a", 1000000, 61000, &o);
  assert_failed(&o, PROTO_NOT_AVAILABLE, "audio_too_long");
}

static void test_declared_size_over_the_cap_is_not_available(void **state) {
  (void)state;
  struct vts_config cfg;
  make_cfg(&cfg, "pocketsphinx", "");
  struct outcome o;
  transcribe(&cfg, "http://127.0.0.1:1/audio.m4a", VTS_MAX_AUDIO_BYTES + 1, 1000, &o);
  assert_failed(&o, PROTO_NOT_AVAILABLE, "audio_too_big");
}

static void test_decoded_duration_over_the_cap_is_not_available(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  struct vts_config cfg;
  make_cfg(&cfg, "pocketsphinx", "");
  cfg.speech_max_seconds = 2;
  struct outcome o;
  /* The player reply understates the duration; the decoded stream is 2.8 s. */
  transcribe(&cfg, "/audio/file/speech.m4a", speech_m4a_len, 1000, &o);
  assert_failed(&o, PROTO_NOT_AVAILABLE, "audio_too_long");
}

/*
 * Audio too long for us, whether the download finds it (more than VTS_MAX_AUDIO_BYTES) or the decoder does (more
 * than VTS_SPEECH_MAX_SECONDS): the same outcome and reason, each with its own detail.
 */
static void test_audio_too_long_is_one_outcome_from_download_or_decode(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  struct vts_config cfg;
  make_cfg(&cfg, "pocketsphinx", "");
  cfg.speech_max_seconds = 2;
  char huge[64];
  snprintf(huge, sizeof(huge), "/audio/huge/%ld", VTS_MAX_AUDIO_BYTES + 1);
  struct outcome downloaded, decoded;
  /* The player reply declares neither size: only the download's Content-Range tells it. */
  transcribe(&cfg, huge, -1, 1000, &downloaded);
  transcribe(&cfg, "/audio/file/speech.m4a", speech_m4a_len, 1000, &decoded);
  assert_failed(&downloaded, PROTO_NOT_AVAILABLE, "audio_too_big");
  assert_failed(&decoded, PROTO_NOT_AVAILABLE, "audio_too_long");
  assert_int_equal(downloaded.outcome, decoded.outcome);
  assert_int_equal(downloaded.reason, PROTO_REASON_NOT_PLAYABLE);
  assert_int_equal(decoded.reason, PROTO_REASON_NOT_PLAYABLE);
}

static void test_audio_http_error_is_upstream_failed(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  struct vts_config cfg;
  make_cfg(&cfg, "pocketsphinx", "");
  struct outcome o;
  transcribe(&cfg, "/audio/status/403", 1000, 1000, &o);
  assert_failed(&o, PROTO_UPSTREAM_FAILED, "audio_http_403");
}

static void test_audio_on_a_foreign_host_is_upstream_failed(void **state) {
  (void)state;
  struct vts_config cfg;
  make_cfg(&cfg, "pocketsphinx", "");
  struct outcome o;
  transcribe(&cfg, "https://googlevideo.com.evil.example/videoplayback", 1000, 1000, &o);
  assert_failed(&o, PROTO_UPSTREAM_FAILED, "audio_url_refused");
}

static void test_corrupt_audio_is_internal(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  struct vts_config cfg;
  make_cfg(&cfg, "pocketsphinx", "");
  struct outcome o;
  transcribe(&cfg, "/audio/file/corrupt.m4a", speech_m4a_len, GOFORWARD_MS, &o);
  assert_failed(&o, PROTO_INTERNAL, "audio_corrupt");
}

static void test_silent_audio_is_not_available(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  struct vts_config cfg;
  make_cfg(&cfg, "pocketsphinx", "");
  struct outcome o;
  transcribe(&cfg, "/audio/file/silence.m4a", -1, 3000, &o);
  assert_failed(&o, PROTO_NOT_AVAILABLE, "no_speech");
}

static void test_failing_speech_server_is_upstream_failed(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  struct vts_config cfg;
  make_cfg(&cfg, "openai", "500");
  struct outcome o;
  transcribe(&cfg, "/audio/file/speech.m4a", speech_m4a_len, GOFORWARD_MS, &o);
  assert_failed(&o, PROTO_UPSTREAM_FAILED, "speech_http_500");
}

static void test_malformed_speech_reply_is_upstream_failed(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  struct vts_config cfg;
  make_cfg(&cfg, "openai", "malformed");
  struct outcome o;
  transcribe(&cfg, "/audio/file/speech.m4a", speech_m4a_len, GOFORWARD_MS, &o);
  assert_failed(&o, PROTO_UPSTREAM_FAILED, "speech_bad_reply");
}

static void test_missing_model_is_internal(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  struct vts_config cfg;
  make_cfg(&cfg, "pocketsphinx", "");
  struct outcome o;
  snprintf(cfg.pocketsphinx_model_dir, sizeof(cfg.pocketsphinx_model_dir), "/nonexistent/model");
  transcribe(&cfg, "/audio/file/speech.m4a", speech_m4a_len, GOFORWARD_MS, &o);
  assert_failed(&o, PROTO_INTERNAL, "speech_model_missing");
}

static void test_engines_are_chosen_by_their_name(void **state) {
  (void)state;
  assert_ptr_equal(speech_engine_find("pocketsphinx"), &speech_engine_pocketsphinx);
  assert_ptr_equal(speech_engine_find("openai"), &speech_engine_openai);
  /* Every row of the table is found by the name it carries, and fills its operation. */
#define CHECK_ROW(row)                                              \
  assert_string_equal(speech_engine_##row.name, #row);              \
  assert_ptr_equal(speech_engine_find(#row), &speech_engine_##row); \
  assert_non_null(speech_engine_##row.recognise);
  SPEECH_ENGINES(CHECK_ROW)
#undef CHECK_ROW
  assert_null(speech_engine_find("whisper"));
  assert_null(speech_engine_find("OpenAI"));
  assert_null(speech_engine_find("openai "));
  assert_null(speech_engine_find(""));
  assert_null(speech_engine_find(NULL));
}

static void test_an_engine_not_in_the_table_is_internal_before_any_download(void **state) {
  (void)state;
  struct vts_config cfg;
  make_cfg(&cfg, "whisper", "");
  struct player_info pi = {.playability = PLAY_OK, .default_track = -1};
  struct outcome o;
  memset(&o, 0, sizeof(o));
  via(&cfg, &pi, util_now_ms() + 1000, &o);
  assert_failed(&o, PROTO_INTERNAL, "speech_not_configured");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pocketsphinx_transcribes_the_chosen_audio),
      cmocka_unit_test(test_webm_audio_is_transcribed_too),
      cmocka_unit_test(test_openai_engine_receives_the_downloaded_file),
      cmocka_unit_test(test_no_audio_format_is_not_available),
      cmocka_unit_test(test_declared_duration_over_the_cap_is_not_available_before_download),
      cmocka_unit_test(test_declared_size_over_the_cap_is_not_available),
      cmocka_unit_test(test_decoded_duration_over_the_cap_is_not_available),
      cmocka_unit_test(test_audio_too_long_is_one_outcome_from_download_or_decode),
      cmocka_unit_test(test_audio_http_error_is_upstream_failed),
      cmocka_unit_test(test_audio_on_a_foreign_host_is_upstream_failed),
      cmocka_unit_test(test_corrupt_audio_is_internal),
      cmocka_unit_test(test_silent_audio_is_not_available),
      cmocka_unit_test(test_failing_speech_server_is_upstream_failed),
      cmocka_unit_test(test_malformed_speech_reply_is_upstream_failed),
      cmocka_unit_test(test_missing_model_is_internal),
      cmocka_unit_test(test_engines_are_chosen_by_their_name),
      cmocka_unit_test(test_an_engine_not_in_the_table_is_internal_before_any_download),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
