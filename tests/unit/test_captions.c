/* Unit tests of the caption parsers: json3, srv3 and srv1 shapes, text cleaning, and hostile bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/limits.h"
#include "common/buf.h"
#include "fetcher/captions/captions.h"
#include "testdata.h"

static void assert_segment(const struct segment_list *sl, size_t i, const char *text, double start, double dur) {
  assert_true(i < sl->len);
  assert_string_equal(sl->items[i].text, text);
  assert_float_equal(sl->items[i].start, start, 1e-9);
  assert_float_equal(sl->items[i].duration, dur, 1e-9);
}

/* Parses a literal body through an exact-size copy. */
static int parse_str(const char *s, size_t len, struct segment_list *sl) {
  char *copy = testdata_exact(s, len);
  int rv = captions_parse(copy, len, sl);
  free(copy);
  return rv;
}

#define PARSE_LIT(lit, sl) parse_str(lit, sizeof(lit) - 1, sl)

/* Parses a one-cue srv1 body and returns the cue's text (or "" when dropped) in out. */
static void srv1_text(const char *inner, char *out, size_t cap) {
  char body[512];
  int n = snprintf(body, sizeof(body), "<transcript><text start=\"1\" dur=\"2\">%s</text></transcript>", inner);
  assert_true(n > 0 && (size_t)n < sizeof(body));
  struct segment_list sl;
  assert_int_equal(parse_str(body, (size_t)n, &sl), 0);
  snprintf(out, cap, "%s", sl.len ? sl.items[0].text : "");
  segment_list_free(&sl);
}

struct cue {
  const char *text;
  double start;
  double duration;
};

/* Parses one of our fixtures and compares every segment with want. */
static void check_fixture(const char *name, const struct cue *want, size_t n) {
  size_t len;
  char *body = testdata_read(name, &len);
  if (!body) fail_msg("fixture %s not readable (VTS_TEST_DATA)", name);
  struct segment_list sl;
  assert_int_equal(captions_parse(body, len, &sl), 0);
  if (sl.len != n) fail_msg("%s: %zu segments, want %zu", name, sl.len, n);
  for (size_t i = 0; i < n; i++) assert_segment(&sl, i, want[i].text, want[i].start, want[i].duration);
  segment_list_free(&sl);
  free(body);
}

static void test_json3_skips_window_and_append_events(void **state) {
  (void)state;
  static const struct cue want[] = {
      {"hello world it's", 0.12, 4.68},
      {"a test of json3", 2.8, 3.999},
      {"no duration", 6.799, 0},
      {"caf\xC3\xA9 \xE2\x80\x94 na\xC3\xAFve", 8, 1},
  };
  check_fixture("json3_rollup.json", want, 4);
}

static void test_srv3_joins_word_spans(void **state) {
  (void)state;
  static const struct cue want[] = {
      {"hello world it's", 0.12, 4.68},
      {"tom & jerry", 2.8, 3.999},
      {"plain bold line two", 6.799, 0},
  };
  check_fixture("srv3_spans.xml", want, 3);
}

static void test_srv1_decodes_double_escaped_asr_text(void **state) {
  (void)state;
  static const struct cue want[] = {
      {"I'm here & there", 0.08, 2.5},
      {"this is not the original", 1.54, 4.16},
      {"\"quoted\" \xE2\x80\x94 \xC3\xA9t\xC3\xA9", 5.7, 3.239},
      {"no duration", 10, 0},
  };
  check_fixture("srv1_asr.xml", want, 4);
}

static void test_json3_without_events_has_no_segments(void **state) {
  (void)state;
  struct segment_list sl;
  assert_int_equal(PARSE_LIT("{\"wireMagic\":\"pb3\",\"pens\":[{}]}", &sl), 0);
  assert_int_equal(sl.len, 0);
  segment_list_free(&sl);
  assert_int_equal(PARSE_LIT("\xEF\xBB\xBF  <transcript/>\n", &sl), 0);
  assert_int_equal(sl.len, 0);
  segment_list_free(&sl);
}

static void test_empty_cues_are_dropped_in_every_shape(void **state) {
  (void)state;
  /* An empty cue text reaches the cleaner as zero bytes (a NULL scratch buffer, maybe a NULL pointer). */
  struct segment_list sl;
  assert_int_equal(PARSE_LIT("<transcript><text start=\"0\" dur=\"1\"></text><text start=\"1\" dur=\"1\">a</text>"
                             "</transcript>",
                             &sl),
                   0);
  assert_int_equal(sl.len, 1);
  assert_segment(&sl, 0, "a", 1, 1);
  segment_list_free(&sl);
  assert_int_equal(PARSE_LIT("{\"events\":[{\"tStartMs\":0,\"dDurationMs\":100,\"segs\":[{\"utf8\":\"\"}]}]}", &sl), 0);
  assert_int_equal(sl.len, 0);
  segment_list_free(&sl);
}

static void test_entities_decode_at_most_twice(void **state) {
  (void)state;
  char t[256];
  srv1_text("a &amp;amp;amp; b", t, sizeof(t));
  assert_string_equal(t, "a &amp; b"); /* two passes, never three */
  srv1_text("&#65;&#x42;&#X43;&apos;&quot;", t, sizeof(t));
  assert_string_equal(t, "ABC'\"");
  srv1_text("fish &amp; chips &copy; AT&amp;T &#; &#x; &#12345678;", t, sizeof(t));
  assert_string_equal(t, "fish & chips &copy; AT&T &#; &#x; &#12345678;");
}

static void test_references_to_invalid_code_points_become_replacement(void **state) {
  (void)state;
  char t[256];
  srv1_text("a&#0;b&#xD800;c&#1114112;d", t, sizeof(t));
  assert_string_equal(t,
                      "a\xEF\xBF\xBD"
                      "b\xEF\xBF\xBD"
                      "c\xEF\xBF\xBD"
                      "d");
  srv1_text("&#x1F600;", t, sizeof(t));
  assert_string_equal(t, "\xF0\x9F\x98\x80");
}

static void test_invalid_utf8_becomes_replacement(void **state) {
  (void)state;
  char t[256];
  /* A stray continuation byte, an overlong '/', an encoded surrogate, a truncated sequence at the end. */
  srv1_text(
      "a\x80"
      "b\xC0\xAF"
      "c\xED\xA0\x80"
      "d\xE2\x82",
      t, sizeof(t));
  assert_string_equal(t,
                      "a\xEF\xBF\xBD"
                      "b\xEF\xBF\xBD\xEF\xBF\xBD"
                      "c\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
                      "d\xEF\xBF\xBD\xEF\xBF\xBD");
  struct segment_list sl;
  assert_int_equal(PARSE_LIT("{\"events\":[{\"tStartMs\":1,\"segs\":[{\"utf8\":\"x\xFFy\"}]}]}", &sl), 0);
  assert_int_equal(sl.len, 1);
  assert_string_equal(sl.items[0].text, "x\xEF\xBF\xBDy");
  segment_list_free(&sl);
}

static void test_whitespace_and_controls_collapse(void **state) {
  (void)state;
  char t[256];
  srv1_text(
      " \t a\r\n\n b \x01 c\xC2\xA0"
      "d\xE2\x80\xA8"
      "e &#10; f ",
      t, sizeof(t));
  assert_string_equal(t, "a b c d e f");
  struct segment_list sl;
  assert_int_equal(
      PARSE_LIT("{\"events\":[{\"tStartMs\":1,\"segs\":[{\"utf8\":\" a\\u0000b\\tc \"},{\"utf8\":\"\\n\"}]}]}", &sl),
      0);
  assert_int_equal(sl.len, 1);
  assert_string_equal(sl.items[0].text, "a b c");
  segment_list_free(&sl);
}

static void test_tags_are_stripped_but_comparisons_kept(void **state) {
  (void)state;
  char t[256];
  srv1_text("&lt;font color=&quot;#E5E5E5&quot;&gt;so&lt;/font&gt; a &lt; b and c &gt; d", t, sizeof(t));
  assert_string_equal(t, "so a < b and c > d");
  srv1_text("one&lt;br&gt;two&lt;BR/&gt;three", t, sizeof(t));
  assert_string_equal(t, "one two three");
  srv1_text("&lt;i&gt;", t, sizeof(t));
  assert_string_equal(t, ""); /* nothing left: the cue is dropped */
}

static void test_json3_text_is_not_entity_decoded(void **state) {
  (void)state;
  struct segment_list sl;
  assert_int_equal(PARSE_LIT("{\"events\":[{\"tStartMs\":5,\"segs\":[{\"utf8\":\"AT&amp;T <i>x</i>\"}]}]}", &sl), 0);
  assert_int_equal(sl.len, 1);
  assert_string_equal(sl.items[0].text, "AT&amp;T <i>x</i>");
  segment_list_free(&sl);
}

/* Every proper prefix of a body is refused without a crash; complete prefixes (up to trailing space) parse. */
static void check_truncations(const char *name) {
  size_t len;
  char *body = testdata_read(name, &len);
  assert_non_null(body);
  size_t end = len;
  while (end > 0 && (body[end - 1] == '\n' || body[end - 1] == ' ')) end--;
  for (size_t n = 0; n <= len; n++) {
    struct segment_list sl;
    int rv = parse_str(body, n, &sl);
    if (rv != (n >= end ? 0 : -EPROTO)) fail_msg("%s truncated to %zu of %zu bytes: got %d", name, n, len, rv);
    segment_list_free(&sl);
  }
  free(body);
}

static void test_truncated_bodies_are_refused_at_every_byte(void **state) {
  (void)state;
  check_truncations("json3_rollup.json");
  check_truncations("srv3_spans.xml");
  check_truncations("srv1_asr.xml");
}

static void test_malformed_xml_is_refused(void **state) {
  (void)state;
  static const char *bad[] = {
      "<transcript><text start=\"1\">a</txt></transcript>",
      "<transcript><text start=\"1\">a</text>",
      "<transcript><text start=1>a</text></transcript>",
      "<transcript><text start=\"1\"dur=\"2\">a</text></transcript>",
      "<transcript><text start=\"1\" dur=\"2>a</text></transcript>",
      "<!DOCTYPE transcript [<!ENTITY x \"y\">]><transcript/>",
      "<transcript><text start=\"1\"><![CDATA[a]]></text></transcript>",
      "<transcript/><transcript/>",
      "x<transcript/>",
      "<transcript/>x",
      "<html><body>Sorry</body></html>",
      "<transcript><text start=\"-1\">a</text></transcript>",
      "<transcript><text start=\"1e3\">a</text></transcript>",
      "<transcript><text start=\"\">a</text></transcript>",
      "<transcript><text start=\"1\" dur=\"abc\">a</text></transcript>",
      "<timedtext><body><p t=\"1.5.2\">a</p></body></timedtext>",
      "<timedtext><body><p t=\"99999999999999\">a</p></body></timedtext>",
      "<transcript><!-- unterminated </transcript>",
      "<transcript><text start=\"1\">a</text></transcript",
      "< transcript/>",
      "hello",
      "",
      "   ",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct segment_list sl;
    int rv = parse_str(bad[i], strlen(bad[i]), &sl);
    if (rv != -EPROTO) fail_msg("body %zu (%s): expected -EPROTO, got %d", i, bad[i], rv);
    assert_int_equal(sl.len, 0);
    assert_null(sl.items);
  }
}

static void test_xml_deeper_than_limit_is_refused(void **state) {
  (void)state;
  struct buf b = BUF_INIT;
  for (int depth = VTS_MAX_XML_DEPTH; depth <= VTS_MAX_XML_DEPTH + 1; depth++) {
    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "<transcript>"), 0);
    for (int i = 1; i < depth; i++) assert_int_equal(buf_puts(&b, "<x>"), 0);
    for (int i = 1; i < depth; i++) assert_int_equal(buf_puts(&b, "</x>"), 0);
    assert_int_equal(buf_puts(&b, "</transcript>"), 0);
    struct segment_list sl;
    assert_int_equal(parse_str(b.data, b.len, &sl), depth > VTS_MAX_XML_DEPTH ? -EPROTO : 0);
    segment_list_free(&sl);
  }
  buf_free(&b);
}

static void test_malformed_json3_is_refused(void **state) {
  (void)state;
  static const char *bad[] = {
      "{\"events\":[{\"tStartMs\":1e400,\"segs\":[{\"utf8\":\"a\"}]}]}",
      "{\"events\":[{\"tStartMs\":99999999999999999999,\"segs\":[{\"utf8\":\"a\"}]}]}",
      "{\"events\":[{\"tStartMs\":-5,\"segs\":[{\"utf8\":\"a\"}]}]}",
      "{\"events\":[{\"tStartMs\":\"5\",\"segs\":[{\"utf8\":\"a\"}]}]}",
      "{\"events\":[{\"tStartMs\":5,\"segs\":{\"utf8\":\"a\"}}]}",
      "{\"events\":{}}",
      "{/* c */\"events\":[]}",
      "{\"events\":[]} // c",
      "{\"events\":[]}{\"events\":[]}",
      "[{\"events\":[]}]",
      "{\"events\":[],}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct segment_list sl;
    int rv = parse_str(bad[i], strlen(bad[i]), &sl);
    if (rv != -EPROTO) fail_msg("body %zu (%s): expected -EPROTO, got %d", i, bad[i], rv);
  }
  static const char nul[] = "{\"events\":[{\"tStartMs\":1,\"segs\":[{\"utf8\":\"a\0b\"}]}]}";
  struct segment_list sl;
  assert_int_equal(parse_str(nul, sizeof(nul) - 1, &sl), -EPROTO);
  static const char nul_after[] = "{\"events\":[]}\0{\"x\":1}";
  assert_int_equal(parse_str(nul_after, sizeof(nul_after) - 1, &sl), -EPROTO);
}

static void test_json3_nested_ten_thousand_deep_is_refused(void **state) {
  (void)state;
  struct buf b = BUF_INIT;
  assert_int_equal(buf_puts(&b, "{\"events\":"), 0);
  for (int i = 0; i < 10000; i++) assert_int_equal(buf_puts(&b, "[{\"a\":"), 0);
  assert_int_equal(buf_puts(&b, "1"), 0);
  for (int i = 0; i < 10000; i++) assert_int_equal(buf_puts(&b, "}]"), 0);
  assert_int_equal(buf_puts(&b, "}"), 0);
  struct segment_list sl;
  assert_int_equal(parse_str(b.data, b.len, &sl), -EPROTO);
  buf_free(&b);
}

static void test_more_cues_than_limit_are_refused(void **state) {
  (void)state;
  struct buf b = BUF_INIT;
  for (size_t count = VTS_MAX_SEGMENTS; count <= VTS_MAX_SEGMENTS + 1; count++) {
    buf_reset(&b);
    assert_int_equal(buf_puts(&b, "<transcript>"), 0);
    for (size_t i = 0; i < count; i++) assert_int_equal(buf_puts(&b, "<text start=\"1\">a</text>"), 0);
    assert_int_equal(buf_puts(&b, "</transcript>"), 0);
    struct segment_list sl;
    int rv = captions_parse(b.data, b.len, &sl);
    assert_int_equal(rv, count > VTS_MAX_SEGMENTS ? -EPROTO : 0);
    assert_int_equal(sl.len, count > VTS_MAX_SEGMENTS ? 0 : count);
    segment_list_free(&sl);
  }
  buf_free(&b);
}

static void test_body_larger_than_limit_is_refused(void **state) {
  (void)state;
  size_t len = VTS_MAX_UPSTREAM_BODY_BYTES + 1;
  char *body = malloc(len);
  assert_non_null(body);
  static const char doc[] = "{\"events\":[]}";
  memset(body, ' ', len);
  memcpy(body, doc, sizeof(doc) - 1);
  struct segment_list sl;
  assert_int_equal(captions_parse(body, len, &sl), -EPROTO);
  assert_int_equal(captions_parse(body, len - 1, &sl), 0);
  segment_list_free(&sl);
  free(body);
}

/* The one segment list of captions and speech: one cap, one error, text trimmed and owned. */
static void test_segment_list_has_one_cap_and_one_error(void **state) {
  (void)state;
  struct segment_list sl = {0};
  assert_int_equal(segment_list_append(&sl, " \t hello  \n", 11, 1.5, -2), 0);
  assert_int_equal(segment_list_append(&sl, " \r\n ", 4, 3, 1), 0); /* blank: nothing appended */
  assert_int_equal(sl.len, 1);
  assert_string_equal(sl.items[0].text, "hello");
  assert_true(sl.items[0].start == 1.5 && sl.items[0].duration == 0); /* a negative duration is stored as 0 */
  while (sl.len < VTS_MAX_SEGMENTS) assert_int_equal(segment_list_append(&sl, "x", 1, 0, 1), 0);
  assert_int_equal(segment_list_append(&sl, "y", 1, 0, 1), -E2BIG);
  char *owned = strdup("z");
  assert_non_null(owned);
  assert_int_equal(segment_list_push(&sl, owned, 0, 1), -E2BIG); /* freed by the list: the sanitizer build checks */
  assert_int_equal(sl.len, VTS_MAX_SEGMENTS);
  segment_list_free(&sl);
  assert_true(sl.len == 0 && sl.items == NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_json3_skips_window_and_append_events),
      cmocka_unit_test(test_srv3_joins_word_spans),
      cmocka_unit_test(test_srv1_decodes_double_escaped_asr_text),
      cmocka_unit_test(test_json3_without_events_has_no_segments),
      cmocka_unit_test(test_empty_cues_are_dropped_in_every_shape),
      cmocka_unit_test(test_entities_decode_at_most_twice),
      cmocka_unit_test(test_references_to_invalid_code_points_become_replacement),
      cmocka_unit_test(test_invalid_utf8_becomes_replacement),
      cmocka_unit_test(test_whitespace_and_controls_collapse),
      cmocka_unit_test(test_tags_are_stripped_but_comparisons_kept),
      cmocka_unit_test(test_json3_text_is_not_entity_decoded),
      cmocka_unit_test(test_truncated_bodies_are_refused_at_every_byte),
      cmocka_unit_test(test_malformed_xml_is_refused),
      cmocka_unit_test(test_xml_deeper_than_limit_is_refused),
      cmocka_unit_test(test_malformed_json3_is_refused),
      cmocka_unit_test(test_json3_nested_ten_thousand_deep_is_refused),
      cmocka_unit_test(test_more_cues_than_limit_are_refused),
      cmocka_unit_test(test_body_larger_than_limit_is_refused),
      cmocka_unit_test(test_segment_list_has_one_cap_and_one_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
