/*
 * Unit tests of the transcript formats: SubRip and WebVTT cues to the millisecond from the digits of the JSON, text,
 * the Accept header's choice, and bodies that are not transcripts.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/http/render.h"

#define BODY                                                                                          \
  "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"Hello and welcome to the fake platform\"," \
  "\"segments\":[{\"text\":\"Hello and welcome\",\"start\":0.12,\"duration\":2.4},"                   \
  "{\"text\":\"to the fake platform\",\"start\":2.52,\"duration\":3}]}"

static void expect_render(enum render_format f, const char *json, const char *want) {
  struct buf b = BUF_INIT;
  int rv = render_transcript(f, json, strlen(json), &b);
  if (rv != 0) print_error("render of %s: error %d\n", json, rv);
  assert_int_equal(rv, 0);
  assert_string_equal(b.data != NULL ? b.data : "", want);
  buf_free(&b);
}

static void expect_refused(enum render_format f, const char *json, int err) {
  struct buf b = BUF_INIT;
  assert_int_equal(buf_puts(&b, "kept"), 0);
  int rv = render_transcript(f, json, strlen(json), &b);
  if (rv != err) print_error("render of %s: expected %d, got %d\n", json, err, rv);
  assert_int_equal(rv, err);
  assert_string_equal(b.data, "kept"); /* nothing half-written is left */
  buf_free(&b);
}

static void test_srt_numbers_cues_with_comma_milliseconds(void **state) {
  (void)state;
  expect_render(RENDER_SRT, BODY,
                "1\n00:00:00,120 --> 00:00:02,520\nHello and welcome\n\n"
                "2\n00:00:02,520 --> 00:00:05,520\nto the fake platform\n\n");
}

static void test_vtt_has_its_header_and_dot_milliseconds(void **state) {
  (void)state;
  expect_render(RENDER_VTT, BODY,
                "WEBVTT\n\n00:00:00.120 --> 00:00:02.520\nHello and welcome\n\n"
                "00:00:02.520 --> 00:00:05.520\nto the fake platform\n\n");
}

static void test_text_is_the_transcript_text(void **state) {
  (void)state;
  expect_render(RENDER_TEXT, BODY, "Hello and welcome to the fake platform");
  expect_render(RENDER_TEXT, "{\"language\":\"en\",\"source\":\"speech\",\"text\":\"\",\"segments\":[]}", "");
  expect_render(RENDER_TEXT, "{\"text\":\"a \\\"quoted\\\" \\u00e9\",\"segments\":[]}", "a \"quoted\" \xc3\xa9");
}

static void test_times_are_exact_past_an_hour_and_a_hundred_hours(void **state) {
  (void)state;
  /* 2.675 is 2.67499... as a double: the digits decide, not the double. */
  expect_render(RENDER_SRT, "{\"text\":\"x\",\"segments\":[{\"text\":\"a\",\"start\":2.675,\"duration\":0.001}]}",
                "1\n00:00:02,675 --> 00:00:02,676\na\n\n");
  expect_render(RENDER_VTT,
                "{\"text\":\"x\",\"segments\":[{\"start\":3723.004,\"duration\":360000,\"text\":\"late\"}]}",
                "WEBVTT\n\n01:02:03.004 --> 101:02:03.004\nlate\n\n");
  /* A fourth decimal rounds half up (the fetcher never writes one). */
  expect_render(RENDER_SRT, "{\"text\":\"x\",\"segments\":[{\"text\":\"a\",\"start\":1.0005,\"duration\":0.0004}]}",
                "1\n00:00:01,001 --> 00:00:01,001\na\n\n");
}

static void test_cue_text_never_holds_an_empty_line(void **state) {
  (void)state;
  expect_render(RENDER_SRT,
                "{\"text\":\"x\",\"segments\":[{\"text\":\"one\\n\\n\\r\\ntwo\\n\",\"start\":0,\"duration\":1},"
                "{\"text\":\" \\n \",\"start\":1,\"duration\":1},{\"text\":\"three\",\"start\":2,\"duration\":1}]}",
                "1\n00:00:00,000 --> 00:00:01,000\none\ntwo\n\n2\n00:00:02,000 --> 00:00:03,000\nthree\n\n");
}

static void test_vtt_escapes_what_cue_text_reserves(void **state) {
  (void)state;
  expect_render(RENDER_VTT,
                "{\"text\":\"x\",\"segments\":[{\"text\":\"fish & chips <b> --> x\",\"start\":0,\"duration\":1}]}",
                "WEBVTT\n\n00:00:00.000 --> 00:00:01.000\nfish &amp; chips &lt;b&gt; --&gt; x\n\n");
  expect_render(RENDER_SRT, "{\"text\":\"x\",\"segments\":[{\"text\":\"fish & chips\",\"start\":0,\"duration\":1}]}",
                "1\n00:00:00,000 --> 00:00:01,000\nfish & chips\n\n");
}

static void test_bodies_that_are_not_transcripts_are_refused(void **state) {
  (void)state;
  expect_refused(RENDER_SRT, "", -EPROTO);
  expect_refused(RENDER_SRT, "{\"text\":\"x\"}", -EPROTO);
  expect_refused(RENDER_SRT, "{\"text\":\"x\",\"segments\":[{\"text\":\"a\",\"start\":-1,\"duration\":1}]}", -EPROTO);
  expect_refused(RENDER_SRT, "{\"text\":\"x\",\"segments\":[{\"text\":\"a\",\"start\":1e3,\"duration\":1}]}", -EPROTO);
  expect_refused(RENDER_SRT, "{\"text\":\"x\",\"segments\":[{\"text\":\"a\",\"duration\":1}]}", -EPROTO);
  expect_refused(RENDER_VTT, "{\"text\":\"x\",\"segments\":[1]}", -EPROTO);
  expect_refused(RENDER_VTT, "{\"text\":\"x\",\"segments\":[{\"text\":\"a\",\"start\":0,\"duration\":1}]", -EPROTO);
  expect_refused(RENDER_TEXT, "{\"text\":\"x\",\"segments\":[]} {}", -EPROTO);
  expect_refused(RENDER_JSON, BODY, -EINVAL);
}

static void test_format_names(void **state) {
  (void)state;
  enum render_format f = RENDER_JSON;
  assert_int_equal(render_format_from_name("vtt", 3, &f), 0);
  assert_int_equal(f, RENDER_VTT);
  assert_int_equal(render_format_from_name("srt", 3, &f), 0);
  assert_int_equal(f, RENDER_SRT);
  assert_int_equal(render_format_from_name("sr", 2, &f), -EINVAL);
  assert_int_equal(render_format_from_name("txt", 3, &f), -EINVAL);
  assert_string_equal(render_content_type(RENDER_JSON), "application/json");
  assert_string_equal(render_content_type(RENDER_TEXT), "text/plain; charset=utf-8");
  assert_string_equal(render_content_type(RENDER_SRT), "application/x-subrip; charset=utf-8");
  assert_string_equal(render_content_type(RENDER_VTT), "text/vtt; charset=utf-8");
}

static enum render_format accept(const char *s) { return render_format_from_accept(s, strlen(s)); }

static void test_accept_picks_the_preferred_known_type(void **state) {
  (void)state;
  assert_int_equal(render_format_from_accept(NULL, 0), RENDER_JSON);
  assert_int_equal(accept("text/plain"), RENDER_TEXT);
  assert_int_equal(accept("application/x-subrip"), RENDER_SRT);
  assert_int_equal(accept("TEXT/VTT; charset=utf-8"), RENDER_VTT);
  assert_int_equal(accept("text/html"), RENDER_JSON);
  assert_int_equal(accept("*/*"), RENDER_JSON);
  assert_int_equal(accept("text/plain, */*;q=0.8"), RENDER_TEXT);
  assert_int_equal(accept("text/vtt;q=0.5, */*"), RENDER_JSON);
  assert_int_equal(accept("text/vtt;q=0.5, application/x-subrip;q=0.9"), RENDER_SRT);
  assert_int_equal(accept("text/vtt , text/plain"), RENDER_VTT);
  assert_int_equal(accept("text/plain;q=0, application/json;q=0.1"), RENDER_JSON);
  assert_int_equal(accept("text/plain;q=2"), RENDER_JSON);
  assert_int_equal(accept("text/plain;q=abc"), RENDER_JSON);
  assert_int_equal(accept("text/html;level=1;q=1.0,text/plain;q=0.999"), RENDER_TEXT);
  assert_int_equal(accept(",,;,text/vtt"), RENDER_VTT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_srt_numbers_cues_with_comma_milliseconds),
      cmocka_unit_test(test_vtt_has_its_header_and_dot_milliseconds),
      cmocka_unit_test(test_text_is_the_transcript_text),
      cmocka_unit_test(test_times_are_exact_past_an_hour_and_a_hundred_hours),
      cmocka_unit_test(test_cue_text_never_holds_an_empty_line),
      cmocka_unit_test(test_vtt_escapes_what_cue_text_reserves),
      cmocka_unit_test(test_bodies_that_are_not_transcripts_are_refused),
      cmocka_unit_test(test_format_names),
      cmocka_unit_test(test_accept_picks_the_preferred_known_type),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
