/*
 * Unit tests of a transcript body read into its segments (gateway/http/segments.c) and of what is cut from it: the
 * pages of get_transcript (whole segments within max_chars, at least one) and the chunks of format=chunks.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/http/chunks.h"
#include "gateway/http/segments.h"

#define BODY                                                                                           \
  "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"Hello and welcome to the caf\xc3\xa9 ok\"," \
  "\"segments\":[{\"text\":\"Hello and welcome\",\"start\":0.12,\"duration\":2.4},"                    \
  "{\"text\":\"to the caf\xc3\xa9\",\"start\":2.52,\"duration\":3},{\"text\":\"\",\"start\":5.52,"     \
  "\"duration\":1},{\"text\":\"ok\",\"start\":3725,\"duration\":0.5}]}"

static void test_a_body_is_read_with_its_times_as_written(void **state) {
  (void)state;
  struct segments_doc doc;
  assert_int_equal(segments_read(BODY, strlen(BODY), &doc), 0);
  assert_string_equal(doc.language, "en");
  assert_string_equal(doc.source, "captions");
  assert_int_equal(doc.n, 4);
  assert_string_equal(doc.seg[0].start, "0.12");
  assert_string_equal(doc.seg[1].duration, "3");
  assert_int_equal(doc.seg[1].start_ms, 2520);
  assert_int_equal(doc.seg[1].end_ms, 5520);
  assert_memory_equal(segments_text(&doc, 1), "to the caf\xc3\xa9", doc.seg[1].text_len);
  /* Characters, not bytes: the accented letter is one. */
  assert_int_equal(segments_chars(segments_text(&doc, 1), doc.seg[1].text_len), 11);
  segments_free(&doc);
}

static void test_what_is_not_a_transcript_is_refused(void **state) {
  (void)state;
  struct segments_doc doc;
  static const char *const bad[] = {"[]",
                                    "{\"language\":\"en\"}",
                                    "{\"segments\":[1]}",
                                    "{\"segments\":[{\"text\":\"a\",\"start\":1}]}",
                                    "{\"segments\":[{\"text\":\"a\",\"start\":-1,\"duration\":1}]}",
                                    "{\"segments\":[{\"a\":{\"b\":{}}}]}",
                                    "{\"segments\":[",
                                    "not json"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (segments_read(bad[i], strlen(bad[i]), &doc) != -EPROTO) print_error("accepted: %s\n", bad[i]);
    assert_int_equal(segments_read(bad[i], strlen(bad[i]), &doc), -EPROTO);
    assert_null(doc.seg);
  }
}

/* What a sink of the one reader saw: the body's members and its segments, in order. */
struct seen_log {
  char members[64];
  int segments;
  int stop_after; /* the segment whose call answers -ECANCELED, or 0 */
  int64_t last_start_ms, last_duration_ms;
  int last_has_text;
  char last_start[SEGMENTS_TIME_BYTES];
};

static int log_member(void *ctx, enum segments_member m, const char *s, size_t len) {
  struct seen_log *l = ctx;
  size_t at = strlen(l->members);
  assert_true(at + len + 2 < sizeof(l->members));
  l->members[at] = m == SEGMENTS_LANGUAGE ? 'L' : m == SEGMENTS_SOURCE ? 'S' : 'T';
  memcpy(l->members + at + 1, s, len);
  l->members[at + 1 + len] = ';';
  return 0;
}

static int log_segment(void *ctx, const struct segments_seen *seg) {
  struct seen_log *l = ctx;
  l->segments++;
  l->last_start_ms = seg->start_ms;
  l->last_duration_ms = seg->duration_ms;
  l->last_has_text = seg->has_text;
  memcpy(l->last_start, seg->start, sizeof(l->last_start));
  return l->segments == l->stop_after ? -ECANCELED : 0;
}

static void test_the_reader_hands_each_segment_to_its_sink_as_met(void **state) {
  (void)state;
  const struct segments_sink with_digits = {log_member, log_segment, 1}, without = {NULL, log_segment, 0};
  struct seen_log l = {0};
  assert_int_equal(segments_scan(BODY, strlen(BODY), &with_digits, &l), 0);
  assert_string_equal(l.members, "Len;Scaptions;THello and welcome to the caf\xc3\xa9 ok;");
  assert_int_equal(l.segments, 4);
  assert_int_equal(l.last_start_ms, 3725000);
  assert_string_equal(l.last_start, "3725");
  /* What a segment lacks is marked, for the sink to judge: a rendering needs times, a page needs all three. */
  static const char lacking[] = "{\"segments\":[{\"duration\":1.5}]}";
  memset(&l, 0, sizeof(l));
  assert_int_equal(segments_scan(lacking, strlen(lacking), &without, &l), 0);
  assert_int_equal(l.segments, 1);
  assert_int_equal(l.last_has_text, 0);
  assert_int_equal(l.last_start_ms, -1);
  assert_int_equal(l.last_duration_ms, 1500);
  /* A sink's error stops the reading there and is its answer. */
  memset(&l, 0, sizeof(l));
  l.stop_after = 2;
  assert_int_equal(segments_scan(BODY, strlen(BODY), &without, &l), -ECANCELED);
  assert_int_equal(l.segments, 2);
  assert_string_equal(l.last_start, ""); /* digits only when asked */
}

static void test_stamps_name_minutes_or_hours(void **state) {
  (void)state;
  char s[24];
  assert_int_equal(segments_stamp(0, s), 7);
  assert_string_equal(s, "[0:00] ");
  segments_stamp(65999, s);
  assert_string_equal(s, "[1:05] ");
  segments_stamp(3725000, s);
  assert_string_equal(s, "[1:02:05] ");
}

static void test_a_page_is_whole_segments_within_max_chars_and_never_empty(void **state) {
  (void)state;
  struct segments_doc doc;
  assert_int_equal(segments_read(BODY, strlen(BODY), &doc), 0);
  /* "[0:00] Hello and welcome\n" is 7 + 17 + 1 = 25 characters, "[0:02] to the café\n" 7 + 11 + 1 = 19. */
  assert_int_equal(segments_cost(&doc, 0, 1), 25);
  assert_int_equal(segments_cost(&doc, 1, 1), 19);
  assert_int_equal(segments_page_end(&doc, 0, 44, 1), 2);
  assert_int_equal(segments_page_end(&doc, 0, 43, 1), 1);
  /* A segment larger than the bound is a page of its own. */
  assert_int_equal(segments_page_end(&doc, 0, 1, 1), 1);
  assert_int_equal(segments_page_end(&doc, 3, 100000, 0), 4);
  /* {"text":"Hello and welcome","start":0.12,"duration":2.4}, */
  assert_int_equal(segments_cost(&doc, 0, 0),
                   strlen("{\"text\":\"Hello and welcome\",\"start\":0.12,\"duration\":2.4},"));
  segments_free(&doc);
}

static void test_chunks_join_to_the_text_without_their_overlaps(void **state) {
  (void)state;
  struct buf b = BUF_INIT;
  /* 200 characters hold every segment: one chunk, the transcript's text. */
  assert_int_equal(chunks_render(BODY, strlen(BODY), 200, 0, NULL, 0, &b), 0);
  assert_string_equal(
      b.data,
      "{\"language\":\"en\",\"source\":\"captions\",\"chunk_chars\":200,\"chunk_overlap\":0,\"chunks\":[{"
      "\"index\":0,\"start\":0.12,\"end\":3725.500,\"first_segment\":0,\"end_segment\":4,\"text\":"
      "\"Hello and welcome to the caf\xc3\xa9 ok\"}]}");
  buf_free(&b);
}

static void test_chunks_overlap_by_whole_segments(void **state) {
  (void)state;
  /* "Hello and welcome to the café" is 29 characters (the empty segment after it adds none); the next chunk starts
   * with the last segments that fit in 14 ("to the café" and the empty one, 12), and ends the transcript. */
  struct buf b = BUF_INIT;
  assert_int_equal(chunks_render(BODY, strlen(BODY), 29, 14, NULL, 0, &b), 0);
  assert_non_null(
      strstr(b.data, "\"first_segment\":0,\"end_segment\":3,\"text\":\"Hello and welcome to the caf\xc3\xa9\""));
  assert_non_null(strstr(b.data,
                         "\"index\":1,\"start\":2.52,\"end\":3725.500,\"first_segment\":1,\"end_segment\":4,"
                         "\"text\":\"to the caf\xc3\xa9 ok\""));
  assert_null(strstr(b.data, "\"index\":2"));
  buf_free(&b);
}

/*
 * Chapters at 2.5 s and 3700 s: segment 0 is the first chapter's, segments 1 and 2 (starting 2.52 and 5.52) the
 * second's, segment 3 the third's. A bound that holds everything still cuts there, and no chunk overlaps into the
 * chapter before it.
 */
static void test_chunks_are_cut_at_chapters_and_overlap_none(void **state) {
  (void)state;
  static const int64_t cuts[] = {0, 2500, 3700000};
  struct buf b = BUF_INIT;
  assert_int_equal(chunks_render(BODY, strlen(BODY), 200, 100, cuts, 3, &b), 0);
  assert_string_equal(
      b.data,
      "{\"language\":\"en\",\"source\":\"captions\",\"chunk_chars\":200,\"chunk_overlap\":100,\"chunks\":["
      "{\"index\":0,\"start\":0.12,\"end\":2.520,\"first_segment\":0,\"end_segment\":1,\"text\":\"Hello and welcome\"},"
      "{\"index\":1,\"start\":2.52,\"end\":6.520,\"first_segment\":1,\"end_segment\":3,\"text\":\"to the "
      "caf\xc3\xa9\"},"
      "{\"index\":2,\"start\":3725,\"end\":3725.500,\"first_segment\":3,\"end_segment\":4,\"text\":\"ok\"}]}");
  /* A chapter that starts before the first segment, or one no segment starts in, cuts nothing more. */
  static const int64_t early[] = {0, 10, 6000, 7000};
  buf_reset(&b);
  assert_int_equal(chunks_render(BODY, strlen(BODY), 200, 0, early, 4, &b), 0);
  assert_non_null(strstr(b.data, "\"first_segment\":0,\"end_segment\":3,"));
  assert_non_null(strstr(b.data, "\"index\":1,\"start\":3725,"));
  assert_null(strstr(b.data, "\"index\":2"));
  buf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_body_is_read_with_its_times_as_written),
      cmocka_unit_test(test_what_is_not_a_transcript_is_refused),
      cmocka_unit_test(test_the_reader_hands_each_segment_to_its_sink_as_met),
      cmocka_unit_test(test_stamps_name_minutes_or_hours),
      cmocka_unit_test(test_a_page_is_whole_segments_within_max_chars_and_never_empty),
      cmocka_unit_test(test_chunks_join_to_the_text_without_their_overlaps),
      cmocka_unit_test(test_chunks_overlap_by_whole_segments),
      cmocka_unit_test(test_chunks_are_cut_at_chapters_and_overlap_none),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
