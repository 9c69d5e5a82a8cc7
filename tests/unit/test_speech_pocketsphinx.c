/*
 * The embedded engine on real read speech (pocketsphinx-testdata's LibriVox sentences) encoded at test time the
 * way the platform serves audio (AAC in mp4, Opus in webm), decoded by fetcher/speech/decode.c, then recognised.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/limits.h"

#include "common/util.h"
#include "fetcher/speech/decode.h"
#include "fetcher/speech/engine.h"
#include "proto/proto.h"
#include "test_speech_util.h"

#define LIBRIVOX TH_TESTDATA "/librivox"
#define NSENTENCES 5
#define LEAD_SILENCE_S 0.5
#define GAP_SILENCE_S 1.2
#define MAX_WER 0.40

struct run {
  struct segment_list segs;
  char lang[16];
  int rv;
  double seconds;
};

static char dir[64];
static int ready;
static char reference[4096];
static double gap_mid[NSENTENCES]; /* middle of the silence after each sentence, seconds */
static struct run m4a_run, webm_run, goforward_run;

/* Reads the reference text of one LibriVox sentence from the test data's transcription file. */
static int reference_of(const char *id, struct buf *out) {
  struct buf t = BUF_INIT;
  int rv = th_read_file(LIBRIVOX "/transcription", &t);
  if (rv != 0) return rv;
  char key[128];
  snprintf(key, sizeof(key), "(%s)", id);
  char *at = strstr(t.data, key);
  rv = -ENOENT;
  if (at != NULL) {
    char *line = at;
    while (line > t.data && line[-1] != '\n') line--;
    const char *s = strstr(line, "<s>"), *e = strstr(line, "</s>");
    if (s != NULL && e != NULL && s < e && e < at) {
      buf_append(out, s + 3, (size_t)(e - s - 3));
      buf_puts(out, " ");
      rv = 0;
    }
  }
  buf_free(&t);
  return rv;
}

/*
 * Runs the embedded engine from the table, with its acoustic model in model_dir ("" for the default). Returns its
 * outcome; the detail goes to detail. Every failure of the embedded engine is ours: reason internal.
 */
static int recognise(const char *model_dir, const struct speech_audio *audio, uint64_t deadline_ms_abs,
                     struct segment_list *out, char lang[16], char *detail, size_t detaillen) {
  static struct vts_config cfg;
  const struct speech_engine *engine = speech_engine_find("pocketsphinx");
  assert_non_null(engine);
  memset(&cfg, 0, sizeof(cfg));
  snprintf(cfg.pocketsphinx_model_dir, sizeof(cfg.pocketsphinx_model_dir), "%s", model_dir);
  struct speech_request req = {.cfg = &cfg, .audio = audio, .deadline_ms_abs = deadline_ms_abs};
  struct fetch_outcome res;
  int outcome = engine->recognise(&req, out, lang, &res);
  assert_int_equal(res.outcome, outcome);
  assert_int_equal(res.reason, outcome == PROTO_OK ? PROTO_REASON_NONE : PROTO_REASON_INTERNAL);
  snprintf(detail, detaillen, "%s", res.detail);
  return outcome;
}

static void recognise_file(const char *path, struct run *r) {
  struct buf file = BUF_INIT;
  struct decode_pcm pcm = {0};
  r->rv = th_read_file(path, &file);
  struct fetch_outcome decoded;
  if (r->rv == 0 && decode_audio(file.data, file.len, 16000 * 600, &pcm, &decoded) != PROTO_OK) r->rv = decoded.outcome;
  if (r->rv == 0) {
    struct speech_audio audio = {.pcm = pcm.samples, .nsamples = pcm.len};
    char detail[64] = "";
    r->seconds = (double)pcm.len / DECODE_SAMPLE_RATE;
    int outcome = recognise("", &audio, util_now_ms() + 600000, &r->segs, r->lang, detail, sizeof(detail));
    r->rv = outcome == PROTO_OK ? 0 : outcome;
  }
  decode_pcm_free(&pcm);
  buf_free(&file);
}

static int setup(void **state) {
  (void)state;
  if (!th_have_audio_tools() || th_tmpdir(dir, sizeof(dir)) != 0) return 0;
  static const char *ids[NSENTENCES] = {
      "sense_and_sensibility_01_austen_64kb-0870", "sense_and_sensibility_01_austen_64kb-0880",
      "sense_and_sensibility_01_austen_64kb-0890", "sense_and_sensibility_01_austen_64kb-0920",
      "sense_and_sensibility_01_austen_64kb-0930"};
  struct buf raw = BUF_INIT, ref = BUF_INIT;
  int rv = th_raw_silence(&raw, LEAD_SILENCE_S);
  for (int i = 0; rv == 0 && i < NSENTENCES; i++) {
    char wav[256];
    snprintf(wav, sizeof(wav), LIBRIVOX "/%s.wav", ids[i]);
    rv = th_raw_append_wav(&raw, wav);
    if (rv == 0) rv = reference_of(ids[i], &ref);
    gap_mid[i] = (double)raw.len / 2 / 16000 + GAP_SILENCE_S / 2;
    if (rv == 0) rv = th_raw_silence(&raw, GAP_SILENCE_S);
  }
  char raw_path[128], m4a[128], webm[128];
  snprintf(raw_path, sizeof(raw_path), "%s/speech.raw", dir);
  snprintf(m4a, sizeof(m4a), "%s/speech.m4a", dir);
  snprintf(webm, sizeof(webm), "%s/speech.webm", dir);
  if (rv == 0) rv = th_write_file(raw_path, raw.data, raw.len);
  if (rv == 0) rv = th_encode(raw_path, m4a, TH_AAC, NULL);
  if (rv == 0) rv = th_encode(raw_path, webm, TH_OPUS, NULL);
  if (rv == 0 && ref.len < sizeof(reference)) snprintf(reference, sizeof(reference), "%s", ref.data);
  buf_free(&raw);
  buf_free(&ref);
  if (rv != 0) {
    fprintf(stderr, "SKIP: could not build the test audio from %s (%d)\n", LIBRIVOX, rv);
    return 0;
  }
  recognise_file(m4a, &m4a_run);
  recognise_file(webm, &webm_run);
  char gf[128];
  snprintf(gf, sizeof(gf), "%s/goforward.webm", dir);
  if (th_encode(TH_GOFORWARD, gf, TH_OPUS, NULL) == 0)
    recognise_file(gf, &goforward_run);
  else
    goforward_run.rv = -EIO;
  ready = 1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  th_free_segments(&m4a_run.segs);
  th_free_segments(&webm_run.segs);
  th_free_segments(&goforward_run.segs);
  if (dir[0] != '\0') th_tmpdir_remove(dir);
  return 0;
}

static void assert_recognised(const struct run *r, const char *ref, const char *what) {
  assert_int_equal(r->rv, 0);
  assert_string_equal(r->lang, "en");
  struct buf hyp = BUF_INIT;
  th_join_segments(&r->segs, &hyp);
  double wer = th_wer(ref, hyp.data);
  printf("%s: WER %.1f%% over %zu segments\n  ref: %s\n  hyp: %s\n", what, wer * 100, r->segs.len, ref, hyp.data);
  if (wer > MAX_WER) fail_msg("%s: word error rate %.2f above %.2f", what, wer, MAX_WER);
  buf_free(&hyp);
}

/* The yardstick itself: edit distance over words, normalised by the reference's length. */
static void test_word_error_rate_counts_edits_per_reference_word(void **state) {
  (void)state;
  assert_true(th_wer("go forward ten meters", "Go forward, ten meters.") == 0.0);
  assert_true(th_wer("go forward ten meters", "go backward ten meters") == 0.25);
  assert_true(th_wer("go forward ten meters", "go ten meters") == 0.25);
  assert_true(th_wer("go forward ten meters", "so go forward ten meters now") == 0.5);
  assert_true(th_wer("go forward", "") == 1.0);
}

static void test_read_speech_in_m4a_is_recognised_within_40_percent_wer(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  assert_recognised(&m4a_run, reference, "m4a/aac");
}

static void test_read_speech_in_webm_is_recognised_within_40_percent_wer(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  assert_recognised(&webm_run, reference, "webm/opus");
}

static void test_short_command_is_recognised(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  assert_recognised(&goforward_run, TH_GOFORWARD_TEXT, "goforward");
}

static void assert_well_formed(const struct run *r) {
  assert_int_equal(r->rv, 0);
  assert_true(r->segs.len > 0);
  double prev_end = 0;
  for (size_t i = 0; i < r->segs.len; i++) {
    const struct segment *s = &r->segs.items[i];
    if (s->start < prev_end - 1e-9)
      fail_msg("segment %zu starts at %.2f before the previous end %.2f", i, s->start, prev_end);
    if (s->duration <= 0) fail_msg("segment %zu has duration %.2f", i, s->duration);
    if (s->duration > VTS_MAX_SPEECH_SEGMENT_S)
      fail_msg("segment %zu lasts %.2f s, past the %.0f s a reader can follow", i, s->duration,
               VTS_MAX_SPEECH_SEGMENT_S);
    if (s->start + s->duration > r->seconds + 0.01)
      fail_msg("segment %zu ends at %.2f after the audio's %.2f s", i, s->start + s->duration, r->seconds);
    assert_true(s->text[0] != '\0' && s->text[0] != ' ' && s->text[strlen(s->text) - 1] != ' ');
    assert_null(strchr(s->text, '<'));
    assert_null(strchr(s->text, '('));
    prev_end = s->start + s->duration;
  }
}

static void test_segments_are_ordered_non_overlapping_and_within_audio(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  assert_well_formed(&m4a_run);
  assert_well_formed(&webm_run);
}

/* Frame times count from the stream start: each sentence's segment must sit between the silences around it. */
static void test_segments_are_cut_at_the_silences_between_sentences(void **state) {
  (void)state;
  TH_SKIP_UNLESS(ready);
  const struct segment_list *sl = &m4a_run.segs;
  assert_true(sl->len >= NSENTENCES);
  for (size_t i = 0; i < sl->len; i++) {
    double a = sl->items[i].start, b = a + sl->items[i].duration;
    for (int g = 0; g < NSENTENCES; g++) {
      if (a < gap_mid[g] && gap_mid[g] < b)
        fail_msg("segment %zu [%.2f, %.2f] \"%s\" spans the silence at %.2f", i, a, b, sl->items[i].text, gap_mid[g]);
    }
  }
  /* The first words start after the leading silence, not at 0. */
  assert_true(sl->items[0].start >= LEAD_SILENCE_S - 0.2);
}

static void test_silence_gives_no_segments(void **state) {
  (void)state;
  static int16_t silence[16000 * 3];
  struct speech_audio audio = {.pcm = silence, .nsamples = sizeof(silence) / sizeof(silence[0])};
  struct segment_list segs = {0};
  char lang[16] = "", detail[64] = "";
  assert_int_equal(recognise("", &audio, util_now_ms() + 60000, &segs, lang, detail, sizeof(detail)), PROTO_OK);
  assert_int_equal(segs.len, 0);
  assert_string_equal(lang, "en");
  th_free_segments(&segs);
}

static void test_passed_deadline_is_internal(void **state) {
  (void)state;
  static int16_t silence[16000];
  struct speech_audio audio = {.pcm = silence, .nsamples = 16000};
  struct segment_list segs = {0};
  char lang[16] = "", detail[64] = "";
  assert_int_equal(recognise("", &audio, util_now_ms() - 1, &segs, lang, detail, sizeof(detail)), PROTO_INTERNAL);
  assert_string_equal(detail, "speech_timeout");
  assert_int_equal(segs.len, 0);
  th_free_segments(&segs);
}

static void test_missing_model_dir_is_internal(void **state) {
  (void)state;
  static int16_t silence[1600];
  struct speech_audio audio = {.pcm = silence, .nsamples = 1600};
  struct segment_list segs = {0};
  char lang[16] = "", detail[64] = "";
  int rv = recognise("/nonexistent/model", &audio, util_now_ms() + 60000, &segs, lang, detail, sizeof(detail));
  assert_int_equal(rv, PROTO_INTERNAL);
  assert_string_equal(detail, "speech_model_missing");
  th_free_segments(&segs);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_word_error_rate_counts_edits_per_reference_word),
      cmocka_unit_test(test_read_speech_in_m4a_is_recognised_within_40_percent_wer),
      cmocka_unit_test(test_read_speech_in_webm_is_recognised_within_40_percent_wer),
      cmocka_unit_test(test_short_command_is_recognised),
      cmocka_unit_test(test_segments_are_ordered_non_overlapping_and_within_audio),
      cmocka_unit_test(test_segments_are_cut_at_the_silences_between_sentences),
      cmocka_unit_test(test_silence_gives_no_segments),
      cmocka_unit_test(test_passed_deadline_is_internal),
      cmocka_unit_test(test_missing_model_dir_is_internal),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
