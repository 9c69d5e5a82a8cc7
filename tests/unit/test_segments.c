/*
 * Unit tests of speech segments from timed words: runs end at pauses, a run longer than the cap is cut at its
 * longest pause until every piece fits, and segments stay in order and inside the audio.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/limits.h"
#include "fetcher/captions/segments.h"

static void add_word(struct segment_list *words, const char *text, double start, double duration) {
  assert_int_equal(segment_list_append(words, text, strlen(text), start, duration), 0);
}

/* Every segment at most the cap, in order, not overlapping, inside [0, audio_s]. */
static void assert_readable(const struct segment_list *sl, double audio_s) {
  double prev_end = 0;
  for (size_t i = 0; i < sl->len; i++) {
    const struct segment *s = &sl->items[i];
    if (s->duration > VTS_MAX_SPEECH_SEGMENT_S + 1e-9) fail_msg("segment %zu lasts %.3f s", i, s->duration);
    if (s->start < prev_end - 1e-9) fail_msg("segment %zu starts at %.3f, before %.3f", i, s->start, prev_end);
    if (s->start < 0 || (audio_s > 0 && s->start + s->duration > audio_s + 1e-9))
      fail_msg("segment %zu (%.3f + %.3f) is outside the audio", i, s->start, s->duration);
    prev_end = s->start + s->duration;
  }
}

static void assert_segment(const struct segment_list *sl, size_t i, const char *text, double start, double end) {
  assert_true(i < sl->len);
  assert_string_equal(sl->items[i].text, text);
  if (sl->items[i].start < start - 1e-9 || sl->items[i].start > start + 1e-9 ||
      sl->items[i].start + sl->items[i].duration < end - 1e-9 ||
      sl->items[i].start + sl->items[i].duration > end + 1e-9)
    fail_msg("segment %zu: %.4f-%.4f, want %.4f-%.4f", i, sl->items[i].start,
             sl->items[i].start + sl->items[i].duration, start, end);
}

static void test_pauses_end_segments_and_short_runs_stay_whole(void **state) {
  (void)state;
  struct segment_list words = {0}, out = {0};
  add_word(&words, "hello", 0.5, 0.4);
  add_word(&words, "there", 1.0, 0.5);
  add_word(&words, "general", 2.2, 0.6); /* 0.7 s after "there": a pause */
  add_word(&words, "kenobi", 2.9, 0.5);
  assert_int_equal(segment_list_group_words(&out, &words, 0.5, 60), 0);
  assert_int_equal(out.len, 2);
  assert_segment(&out, 0, "hello there", 0.5, 1.5);
  assert_segment(&out, 1, "general kenobi", 2.2, 3.4);
  segment_list_free(&words);
  segment_list_free(&out);
}

static void test_a_long_run_is_cut_at_its_longest_pause(void **state) {
  (void)state;
  /* 20 words of 1 s, 0.2 s apart, but 0.45 s after the sixth: one run of 24.25 s (no pause reaches 0.5 s). */
  struct segment_list words = {0}, out = {0};
  double t = 0;
  for (int i = 0; i < 20; i++) {
    char w[8];
    snprintf(w, sizeof(w), "w%d", i);
    add_word(&words, w, t, 1.0);
    t += 1.0 + (i == 5 ? 0.45 : 0.2);
  }
  assert_int_equal(segment_list_group_words(&out, &words, 0.5, 30), 0);
  assert_readable(&out, 30);
  /* First cut after w5 (the 0.45 s pause); the 14 words after it (16.6 s) are cut in the middle of equal pauses. */
  assert_int_equal(out.len, 3);
  assert_segment(&out, 0, "w0 w1 w2 w3 w4 w5", 0, 7.0);
  assert_segment(&out, 1, "w6 w7 w8 w9 w10 w11 w12", 7.45, 15.65);
  assert_segment(&out, 2, "w13 w14 w15 w16 w17 w18 w19", 15.85, 24.05);
  segment_list_free(&words);
  segment_list_free(&out);
}

static void test_a_word_longer_than_the_cap_is_shortened_and_times_stay_in_the_audio(void **state) {
  (void)state;
  struct segment_list words = {0}, out = {0};
  add_word(&words, "early", -0.2, 0.5);
  add_word(&words, "aaaah", 2, 14);
  add_word(&words, "late", 17, 2);
  assert_int_equal(segment_list_group_words(&out, &words, 0.5, 18), 0);
  assert_readable(&out, 18);
  assert_int_equal(out.len, 3);
  assert_segment(&out, 0, "early", 0, 0.3);
  assert_segment(&out, 1, "aaaah", 2, 12);
  assert_segment(&out, 2, "late", 17, 18);
  segment_list_free(&words);
  segment_list_free(&out);
}

static void test_cuts_at_the_edge_every_time_do_not_nest(void **state) {
  (void)state;
  /* 5,000 words whose pauses grow: the longest pause of every piece is its last, so each cut peels one word. */
  struct segment_list words = {0}, out = {0};
  double t = 0;
  for (int i = 0; i < 5000; i++) {
    add_word(&words, "x", t, 0.05);
    t += 0.05 + 0.01 * (double)i / 5000;
  }
  assert_int_equal(segment_list_group_words(&out, &words, 1.0, 0), 0);
  assert_readable(&out, 0);
  size_t nwords = 0;
  for (size_t i = 0; i < out.len; i++) nwords += (strlen(out.items[i].text) + 1) / 2;
  assert_int_equal(nwords, 5000);
  segment_list_free(&words);
  segment_list_free(&out);
}

static void test_no_words_no_segments(void **state) {
  (void)state;
  struct segment_list words = {0}, out = {0};
  assert_int_equal(segment_list_group_words(&out, &words, 0.5, 10), 0);
  assert_int_equal(out.len, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pauses_end_segments_and_short_runs_stay_whole),
      cmocka_unit_test(test_a_long_run_is_cut_at_its_longest_pause),
      cmocka_unit_test(test_a_word_longer_than_the_cap_is_shortened_and_times_stay_in_the_audio),
      cmocka_unit_test(test_cuts_at_the_edge_every_time_do_not_nest),
      cmocka_unit_test(test_no_words_no_segments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
