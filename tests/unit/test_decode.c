/* Audio decoding: the platform's two containers to 16 kHz mono, and every kind of bad input refused, never a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fetcher/speech/decode.h"
#include "proto/proto.h"
#include "test_speech_util.h"

/* AAC and Opus add priming and padding; the decoded length matches the source within 50 ms. */
#define LENGTH_TOLERANCE_SAMPLES 800
#define BIG_CAP (16000 * 600)

static char dir[64];
static int ready;

static void file_path(char *out, size_t len, const char *name) { snprintf(out, len, "%s/%s", dir, name); }

static int setup(void **state) {
  (void)state;
  if (!th_have_audio_tools() || th_tmpdir(dir, sizeof(dir)) != 0) return 0;
  char p[7][128];
  const char *names[] = {"speech.m4a", "speech_index_at_end.m4a", "speech.webm",          "speech.mp3",
                         "speech.wav", "mp3_in_mp4.m4a",          "speech_fragmented.m4a"};
  for (int i = 0; i < 7; i++) file_path(p[i], sizeof(p[i]), names[i]);
  int rv = th_encode(TH_GOFORWARD, p[0], TH_AAC, "-movflags", "+faststart", NULL);
  rv |= th_encode(TH_GOFORWARD, p[1], TH_AAC, NULL);
  rv |= th_encode(TH_GOFORWARD, p[2], TH_OPUS, NULL);
  rv |= th_encode(TH_GOFORWARD, p[3], "-c:a", "libmp3lame", NULL);
  rv |= th_encode(TH_GOFORWARD, p[4], "-c:a", "pcm_s16le", NULL);
  rv |= th_encode(TH_GOFORWARD, p[5], "-c:a", "libmp3lame", "-f", "mp4", NULL);
  /* The platform's DASH audio: fragmented mp4 with the index in every fragment. */
  rv |= th_encode(TH_GOFORWARD, p[6], TH_AAC, "-movflags", "+frag_keyframe+empty_moov+default_base_moof", NULL);
  if (rv != 0) {
    fprintf(stderr, "ffmpeg could not make the test audio\n");
    return -1;
  }
  ready = 1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  if (dir[0] != '\0') th_tmpdir_remove(dir);
  return 0;
}

static void load(const char *name, struct buf *out) {
  char p[128];
  file_path(p, sizeof(p), name);
  assert_int_equal(th_read_file(p, out), 0);
}

static int16_t peak(const struct decode_pcm *pcm) {
  int16_t m = 0;
  for (size_t i = 0; i < pcm->len; i++) {
    int16_t v = pcm->samples[i] < 0 ? (int16_t) - (pcm->samples[i] + 1) : pcm->samples[i];
    if (v > m) m = v;
  }
  return m;
}

/* What the latest decode() said. */
static struct fetch_outcome last;

/* decode_audio, whose outcome is also what it set in last. */
static int decode(const void *data, size_t len, size_t max_samples, struct decode_pcm *pcm) {
  int outcome = decode_audio(data, len, max_samples, pcm, &last);
  assert_int_equal(last.outcome, outcome);
  return outcome;
}

/* A failure of ours: 500 with reason internal and its detail. */
static void assert_internal(int outcome, const char *detail) {
  assert_int_equal(outcome, PROTO_INTERNAL);
  assert_int_equal(last.reason, PROTO_REASON_INTERNAL);
  assert_string_equal(last.detail, detail);
}

static void assert_decodes_to_source_length(const char *name) {
  TH_SKIP_UNLESS(ready);
  struct buf file = BUF_INIT;
  struct decode_pcm pcm = {0};
  load(name, &file);
  assert_int_equal(decode(file.data, file.len, BIG_CAP, &pcm), PROTO_OK);
  if (pcm.len + LENGTH_TOLERANCE_SAMPLES < TH_GOFORWARD_SAMPLES ||
      pcm.len > TH_GOFORWARD_SAMPLES + LENGTH_TOLERANCE_SAMPLES)
    fail_msg("%s: expected %d +- %d samples, got %zu", name, TH_GOFORWARD_SAMPLES, LENGTH_TOLERANCE_SAMPLES, pcm.len);
  /* Speech, not silence: the recording peaks well above the noise floor. */
  assert_true(peak(&pcm) > 2000);
  decode_pcm_free(&pcm);
  buf_free(&file);
}

static void test_m4a_aac_decodes_to_16k_mono(void **state) {
  (void)state;
  assert_decodes_to_source_length("speech.m4a");
}

static void test_m4a_with_index_at_end_decodes(void **state) {
  (void)state;
  assert_decodes_to_source_length("speech_index_at_end.m4a");
}

static void test_fragmented_m4a_decodes(void **state) {
  (void)state;
  assert_decodes_to_source_length("speech_fragmented.m4a");
}

static void test_webm_opus_decodes_to_16k_mono(void **state) {
  (void)state;
  assert_decodes_to_source_length("speech.webm");
}

static void test_output_buffer_is_reused_and_replaced(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  struct buf file = BUF_INIT;
  struct decode_pcm pcm = {0};
  load("speech.webm", &file);
  assert_int_equal(decode(file.data, file.len, BIG_CAP, &pcm), PROTO_OK);
  size_t first = pcm.len;
  assert_int_equal(decode(file.data, file.len, BIG_CAP, &pcm), PROTO_OK);
  assert_int_equal(pcm.len, first);
  decode_pcm_free(&pcm);
  buf_free(&file);
}

static void assert_prefix_fails(const char *name, double keep) {
  TH_SKIP_UNLESS(ready);
  struct buf file = BUF_INIT;
  struct decode_pcm pcm = {0};
  load(name, &file);
  size_t len = (size_t)((double)file.len * keep);
  int rv = decode(file.data, len, BIG_CAP, &pcm);
  if (rv != PROTO_INTERNAL || strcmp(last.detail, "audio_corrupt") != 0)
    fail_msg("%s cut to %zu of %zu bytes: expected audio_corrupt, got %d %s", name, len, file.len, rv, last.detail);
  assert_int_equal(last.reason, PROTO_REASON_INTERNAL);
  assert_int_equal(pcm.len, 0);
  decode_pcm_free(&pcm);
  buf_free(&file);
}

static void test_truncated_m4a_is_corrupt(void **state) {
  (void)state;
  assert_prefix_fails("speech.m4a", 0.95);
}

static void test_truncated_m4a_without_index_is_corrupt(void **state) {
  (void)state;
  assert_prefix_fails("speech_index_at_end.m4a", 0.9);
}

static void test_truncated_webm_is_corrupt(void **state) {
  (void)state;
  assert_prefix_fails("speech.webm", 0.8);
}

static void test_empty_input_is_corrupt(void **state) {
  (void)state;
  struct decode_pcm pcm = {0};
  assert_internal(decode("", 0, BIG_CAP, &pcm), "audio_corrupt");
  decode_pcm_free(&pcm);
}

static void test_garbage_header_is_corrupt(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  struct buf file = BUF_INIT;
  struct decode_pcm pcm = {0};
  load("speech.m4a", &file);
  memset(file.data, 0xa5, 64);
  assert_internal(decode(file.data, file.len, BIG_CAP, &pcm), "audio_corrupt");
  decode_pcm_free(&pcm);
  buf_free(&file);
}

static void test_random_bytes_are_refused(void **state) {
  (void)state;
  static uint8_t noise[64 * 1024];
  uint32_t x = 12345;
  for (size_t i = 0; i < sizeof(noise); i++) {
    x = x * 1103515245u + 12345u;
    noise[i] = (uint8_t)(x >> 16);
  }
  struct decode_pcm pcm = {0};
  assert_internal(decode(noise, sizeof(noise), BIG_CAP, &pcm), "audio_corrupt");
  decode_pcm_free(&pcm);
}

/* Every byte of the payload after the index flipped: the decoder reports it, the process survives. */
static void assert_corrupt_payload_fails(const char *name, size_t from) {
  TH_SKIP_UNLESS(ready);
  struct buf file = BUF_INIT;
  struct decode_pcm pcm = {0};
  load(name, &file);
  for (size_t i = from; i < file.len; i++) file.data[i] = (char)(file.data[i] ^ 0x5a);
  int rv = decode(file.data, file.len, BIG_CAP, &pcm);
  if (rv != PROTO_INTERNAL || strcmp(last.detail, "audio_corrupt") != 0)
    fail_msg("%s corrupted from byte %zu: expected audio_corrupt, got %d %s", name, from, rv, last.detail);
  assert_int_equal(last.reason, PROTO_REASON_INTERNAL);
  decode_pcm_free(&pcm);
  buf_free(&file);
}

static void test_corrupt_aac_payload_is_corrupt(void **state) {
  (void)state;
  assert_corrupt_payload_fails("speech.m4a", 4096);
}

static void test_corrupt_opus_payload_is_corrupt(void **state) {
  (void)state;
  assert_corrupt_payload_fails("speech.webm", 1024);
}

static void assert_refused(const char *name) {
  TH_SKIP_UNLESS(ready);
  struct buf file = BUF_INIT;
  struct decode_pcm pcm = {0};
  load(name, &file);
  int rv = decode(file.data, file.len, BIG_CAP, &pcm);
  if (rv != PROTO_INTERNAL || strcmp(last.detail, "audio_format_refused") != 0)
    fail_msg("%s: expected audio_format_refused, got %d %s", name, rv, last.detail);
  assert_int_equal(last.reason, PROTO_REASON_INTERNAL);
  decode_pcm_free(&pcm);
  buf_free(&file);
}

static void test_wav_container_is_refused(void **state) {
  (void)state;
  assert_refused("speech.wav");
}

static void test_mp3_file_is_refused(void **state) {
  (void)state;
  assert_refused("speech.mp3");
}

static void test_mp3_codec_inside_mp4_is_refused(void **state) {
  (void)state;
  assert_refused("mp3_in_mp4.m4a");
}

static void test_audio_longer_than_cap_is_not_available(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  struct buf file = BUF_INIT;
  struct decode_pcm pcm = {0};
  load("speech.webm", &file);
  assert_int_equal(decode(file.data, file.len, 16000, &pcm), PROTO_NOT_AVAILABLE);
  assert_int_equal(last.reason, PROTO_REASON_NOT_PLAYABLE);
  assert_string_equal(last.detail, "audio_too_long");
  assert_int_equal(pcm.len, 0);
  /* A cap just above the length passes. */
  assert_int_equal(decode(file.data, file.len, TH_GOFORWARD_SAMPLES + 2 * LENGTH_TOLERANCE_SAMPLES, &pcm), PROTO_OK);
  decode_pcm_free(&pcm);
  buf_free(&file);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_m4a_aac_decodes_to_16k_mono),
      cmocka_unit_test(test_m4a_with_index_at_end_decodes),
      cmocka_unit_test(test_fragmented_m4a_decodes),
      cmocka_unit_test(test_webm_opus_decodes_to_16k_mono),
      cmocka_unit_test(test_output_buffer_is_reused_and_replaced),
      cmocka_unit_test(test_truncated_m4a_is_corrupt),
      cmocka_unit_test(test_truncated_m4a_without_index_is_corrupt),
      cmocka_unit_test(test_truncated_webm_is_corrupt),
      cmocka_unit_test(test_empty_input_is_corrupt),
      cmocka_unit_test(test_garbage_header_is_corrupt),
      cmocka_unit_test(test_random_bytes_are_refused),
      cmocka_unit_test(test_corrupt_aac_payload_is_corrupt),
      cmocka_unit_test(test_corrupt_opus_payload_is_corrupt),
      cmocka_unit_test(test_wav_container_is_refused),
      cmocka_unit_test(test_mp3_file_is_refused),
      cmocka_unit_test(test_mp3_codec_inside_mp4_is_refused),
      cmocka_unit_test(test_audio_longer_than_cap_is_not_available),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
