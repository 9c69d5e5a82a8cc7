/* Unit tests of the transcript body: exact bytes, number format, caps, and a 1,500-segment round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <yajl/yajl_tree.h>

#include "common/buf.h"
#include "common/limits.h"
#include "fetcher/captions/captions.h"
#include "fetcher/captions/transcript.h"

/* A list over caller-owned texts (segment_list_free is not for these). */
static struct segment_list make_list(struct segment *items, size_t n) {
  struct segment_list sl = {items, n, n};
  return sl;
}

static void test_body_has_exact_bytes(void **state) {
  (void)state;
  struct segment items[] = {
      {"a/b \"q\" \\ \xC3\xA9 \x01", 1.2, 3.4},
      {"second", 0, 5},
      {"third", 1200 / 1000.0, 0.0005},
  };
  struct segment_list sl = make_list(items, 3);
  struct buf out = BUF_INIT;
  assert_int_equal(transcript_serialize(&sl, "pt-BR", "captions", &out), 0);
  assert_string_equal(out.data,
                      "{\"language\":\"pt-BR\",\"source\":\"captions\","
                      "\"text\":\"a/b \\\"q\\\" \\\\ \xC3\xA9 \\u0001 second third\","
                      "\"segments\":[{\"text\":\"a/b \\\"q\\\" \\\\ \xC3\xA9 \\u0001\",\"start\":1.2,\"duration\":3.4},"
                      "{\"text\":\"second\",\"start\":0,\"duration\":5},"
                      "{\"text\":\"third\",\"start\":1.2,\"duration\":0.001}]}");
  assert_int_equal(out.len, strlen(out.data));
  buf_free(&out);
}

static void test_empty_transcript_is_an_empty_list(void **state) {
  (void)state;
  struct segment_list sl = make_list(NULL, 0);
  struct buf out = BUF_INIT;
  assert_int_equal(transcript_serialize(&sl, "en", "speech", &out), 0);
  assert_string_equal(out.data, "{\"language\":\"en\",\"source\":\"speech\",\"text\":\"\",\"segments\":[]}");
  buf_free(&out);
}

static void test_times_print_as_short_decimals(void **state) {
  (void)state;
  static const struct {
    double in;
    const char *out;
  } cases[] = {
      {0.1 + 0.2, "0.3"}, {2.8, "2.8"},          {3.999, "3.999"},         {10, "10"},
      {0.0004, "0"},      {123.4565, "123.457"}, {86399.999, "86399.999"}, {7.07, "7.07"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct segment item = {"x", cases[i].in, cases[i].in};
    struct segment_list sl = make_list(&item, 1);
    struct buf out = BUF_INIT;
    assert_int_equal(transcript_serialize(&sl, "en", "captions", &out), 0);
    char want[256];
    snprintf(want, sizeof(want), "\"start\":%s,\"duration\":%s}", cases[i].out, cases[i].out);
    if (!strstr(out.data, want)) fail_msg("%.17g: want %s in %s", cases[i].in, want, out.data);
    buf_free(&out);
  }
}

static void test_appends_after_existing_bytes_and_restores_them_on_error(void **state) {
  (void)state;
  struct segment good = {"ok", 1, 1};
  struct segment_list sl = make_list(&good, 1);
  struct buf out = BUF_INIT;
  assert_int_equal(buf_puts(&out, "HEAD"), 0);
  assert_int_equal(transcript_serialize(&sl, "en", "captions", &out), 0);
  assert_memory_equal(out.data, "HEAD{\"language\":\"en\"", 20);
  buf_reset(&out);
  assert_int_equal(buf_puts(&out, "HEAD"), 0);
  struct segment bad[] = {{"fine", 1, 1}, {"bad \xFF byte", 2, 1}};
  sl = make_list(bad, 2);
  assert_int_equal(transcript_serialize(&sl, "en", "captions", &out), -EILSEQ);
  assert_int_equal(out.len, 4);
  assert_string_equal(out.data, "HEAD");
  buf_free(&out);
}

static void test_invalid_utf8_in_language_is_refused(void **state) {
  (void)state;
  struct segment_list sl = make_list(NULL, 0);
  struct buf out = BUF_INIT;
  assert_int_equal(transcript_serialize(&sl, "e\xC3", "captions", &out), -EILSEQ);
  assert_int_equal(out.len, 0);
  buf_free(&out);
}

static void test_non_finite_or_negative_times_are_refused(void **state) {
  (void)state;
  const double bad[] = {NAN, INFINITY, -1, 1e300};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct segment item = {"x", 0, bad[i]};
    struct segment_list sl = make_list(&item, 1);
    struct buf out = BUF_INIT;
    assert_int_equal(transcript_serialize(&sl, "en", "captions", &out), -EINVAL);
    assert_int_equal(out.len, 0);
    buf_free(&out);
  }
}

/* n segments of size bytes each. */
static int serialize_big(size_t n, size_t size) {
  char *text = malloc(size + 1);
  assert_non_null(text);
  memset(text, 'w', size);
  text[size] = '\0';
  struct segment *items = calloc(n, sizeof(*items));
  assert_non_null(items);
  for (size_t i = 0; i < n; i++) items[i] = (struct segment){text, (double)i, 1};
  struct segment_list sl = make_list(items, n);
  struct buf out = BUF_INIT;
  int rv = transcript_serialize(&sl, "en", "captions", &out);
  if (rv < 0 && out.len != 0) fail_msg("a failed body left %zu bytes", out.len);
  if (rv == 0 && out.len > VTS_MAX_TRANSCRIPT_BYTES) fail_msg("%zu bytes past the cap", out.len);
  buf_free(&out);
  free(items);
  free(text);
  return rv;
}

static void test_body_past_cap_is_refused(void **state) {
  (void)state;
  size_t mb = 1024 * 1024;
  assert_int_equal(serialize_big(2, mb), 0);                                /* 4 MiB: fits */
  assert_int_equal(serialize_big(4, mb), -E2BIG);                           /* text fits, text + segments do not */
  assert_int_equal(serialize_big(1, VTS_MAX_TRANSCRIPT_BYTES + 1), -E2BIG); /* the text alone does not */
}

/* Round trip ---------------------------------------------------------------------------------------------------- */

#define ROUND_TRIP_SEGMENTS 1500

static const char *const words[] = {"hello",
                                    "w\xC3\xB6rld",
                                    "\"quoted\"",
                                    "back\\\\slash",
                                    "tab\\there",
                                    "\xE6\x97\xA5\xE6\x9C\xAC",
                                    "emoji \xF0\x9F\x98\x80",
                                    "a/b",
                                    "it's",
                                    "x"};

/* The text event i carries, after cleaning: what the parser must produce. */
static void expected_text(size_t i, char *out, size_t cap) {
  const char *w = words[i % 10];
  /* The JSON escapes in words decode to one character: \\ -> \, \t -> tab -> space after cleaning. */
  char plain[64];
  size_t o = 0;
  for (size_t k = 0; w[k] && o + 1 < sizeof(plain); k++) {
    if (w[k] == '\\' && w[k + 1] == '\\') {
      plain[o++] = '\\';
      k++;
    } else if (w[k] == '\\' && w[k + 1] == 't') {
      plain[o++] = ' ';
      k++;
    } else {
      plain[o++] = w[k];
    }
  }
  plain[o] = '\0';
  snprintf(out, cap, "%zu %s", i, plain);
}

static char *json3_body(size_t n, size_t *len) {
  struct buf b = BUF_INIT;
  assert_int_equal(buf_puts(&b, "{\"wireMagic\":\"pb3\",\"events\":[{\"tStartMs\":0,\"dDurationMs\":999999,\"id\":1}"),
                   0);
  for (size_t i = 0; i < n; i++) {
    const char *w = words[i % 10];
    /* The word is escaped JSON inside the body; quotes need escaping too. */
    struct buf esc = BUF_INIT;
    for (const char *p = w; *p; p++) {
      if (*p == '"')
        assert_int_equal(buf_puts(&esc, "\\\""), 0);
      else
        assert_int_equal(buf_append(&esc, p, 1), 0);
    }
    assert_int_equal(buf_printf(&b,
                                ",{\"tStartMs\":%zu,\"dDurationMs\":%zu,\"wWinId\":1,\"segs\":[{\"utf8\":\"%zu\"},"
                                "{\"utf8\":\" %s\",\"tOffsetMs\":100}]}"
                                ",{\"tStartMs\":%zu,\"wWinId\":1,\"aAppend\":1,\"segs\":[{\"utf8\":\"\\n\"}]}",
                                i * 1234 + 7, 1000 + i, i, esc.data, i * 1234 + 8),
                     0);
    buf_free(&esc);
  }
  assert_int_equal(buf_puts(&b, "]}"), 0);
  return buf_steal(&b, len);
}

static void test_1500_segments_round_trip(void **state) {
  (void)state;
  size_t len;
  char *body = json3_body(ROUND_TRIP_SEGMENTS, &len);
  struct segment_list sl;
  assert_int_equal(captions_parse(body, len, &sl), 0);
  assert_int_equal(sl.len, ROUND_TRIP_SEGMENTS);
  struct buf out = BUF_INIT;
  assert_int_equal(transcript_serialize(&sl, "de", "captions", &out), 0);

  char err[256];
  yajl_val root = yajl_tree_parse(out.data, err, sizeof(err));
  if (!root) fail_msg("our own output does not parse: %s", err);
  const char *p_lang[] = {"language", NULL}, *p_source[] = {"source", NULL}, *p_text[] = {"text", NULL};
  const char *p_segments[] = {"segments", NULL}, *p_seg_text[] = {"text", NULL};
  const char *p_start[] = {"start", NULL}, *p_dur[] = {"duration", NULL};
  assert_string_equal(YAJL_GET_STRING(yajl_tree_get(root, p_lang, yajl_t_string)), "de");
  assert_string_equal(YAJL_GET_STRING(yajl_tree_get(root, p_source, yajl_t_string)), "captions");
  yajl_val segs = yajl_tree_get(root, p_segments, yajl_t_array);
  assert_non_null(segs);
  assert_int_equal(YAJL_GET_ARRAY(segs)->len, ROUND_TRIP_SEGMENTS);
  struct buf joined = BUF_INIT;
  for (size_t i = 0; i < ROUND_TRIP_SEGMENTS; i++) {
    yajl_val seg = YAJL_GET_ARRAY(segs)->values[i];
    char want[128];
    expected_text(i, want, sizeof(want));
    const char *text = YAJL_GET_STRING(yajl_tree_get(seg, p_seg_text, yajl_t_string));
    if (!text || strcmp(text, want) != 0) fail_msg("segment %zu: text %s, want %s", i, text ? text : "(none)", want);
    assert_string_equal(sl.items[i].text, want);
    yajl_val start = yajl_tree_get(seg, p_start, yajl_t_number);
    yajl_val dur = yajl_tree_get(seg, p_dur, yajl_t_number);
    assert_non_null(start);
    assert_non_null(dur);
    assert_float_equal(YAJL_GET_DOUBLE(start), (double)(i * 1234 + 7) / 1000.0, 1e-9);
    assert_float_equal(YAJL_GET_DOUBLE(dur), (double)(1000 + i) / 1000.0, 1e-9);
    assert_int_equal(YAJL_GET_OBJECT(seg)->len, 3);
    if (joined.len) assert_int_equal(buf_puts(&joined, " "), 0);
    assert_int_equal(buf_puts(&joined, want), 0);
  }
  assert_string_equal(YAJL_GET_STRING(yajl_tree_get(root, p_text, yajl_t_string)), joined.data);
  assert_int_equal(YAJL_GET_OBJECT(root)->len, 4);
  buf_free(&joined);
  yajl_tree_free(root);
  buf_free(&out);
  segment_list_free(&sl);
  free(body);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_body_has_exact_bytes),
      cmocka_unit_test(test_empty_transcript_is_an_empty_list),
      cmocka_unit_test(test_times_print_as_short_decimals),
      cmocka_unit_test(test_appends_after_existing_bytes_and_restores_them_on_error),
      cmocka_unit_test(test_invalid_utf8_in_language_is_refused),
      cmocka_unit_test(test_non_finite_or_negative_times_are_refused),
      cmocka_unit_test(test_body_past_cap_is_refused),
      cmocka_unit_test(test_1500_segments_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
