/*
 * Unit tests of the transcript query string: decoding, empty and repeated parameters, the order of the 400 rules,
 * and the language and video id patterns at their edges.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/ident.h"
#include "common/limits.h"
#include "common/percent.h"
#include "gateway/http/query.h"

#define ID "aB3_-9zZ0xY"

static enum api_error parse(const char *qs, struct transcript_query *q) {
  return query_parse_transcript(qs, strlen(qs), q);
}

/* Asserts that qs yields err, naming the query string and both codes when it does not. */
static void expect_error(const char *qs, enum api_error err) {
  struct transcript_query q;
  enum api_error got = parse(qs, &q);
  if (got != err) {
    print_error("query \"%s\": expected %s, got %s\n", qs, api_error_get(err)->code,
                got == API_OK ? "ok" : api_error_get(got)->code);
  }
  assert_int_equal(got, err);
  assert_string_equal(q.video_id, "");
}

/* Parses qs, asserting that it is accepted. */
static struct transcript_query parse_ok(const char *qs) {
  struct transcript_query q;
  enum api_error got = parse(qs, &q);
  if (got != API_OK) print_error("query \"%s\": expected ok, got %s\n", qs, api_error_get(got)->code);
  assert_int_equal(got, API_OK);
  return q;
}

static void expect_ok(const char *qs, const char *id, const char *lang) {
  struct transcript_query q = parse_ok(qs);
  assert_string_equal(q.video_id, id);
  assert_string_equal(q.lang, lang);
}

static void test_video_id_alone_is_accepted(void **state) {
  (void)state;
  expect_ok("video_id=" ID, ID, "");
  expect_ok("video_id=" ID "&language=en", ID, "en");
  expect_ok("lang=pt-BR&video_id=" ID, ID, "pt-BR");
  expect_ok("utm_source=x&video_id=" ID "&foo&bar=%zz", ID, "");
}

static void test_video_url_is_decoded_once_and_resolved(void **state) {
  (void)state;
  expect_ok("video_url=https%3A%2F%2Fwww.youtube.com%2Fwatch%3Fv%3D" ID "%26t%3D42s", ID, "");
  expect_ok("video_url=https://youtu.be/" ID "&lang=de", ID, "de");
  /* An unencoded '&' ends the parameter: the rest of the client's URL becomes other, ignored parameters. */
  expect_ok("video_url=https://www.youtube.com/watch?v=" ID "&t=42s", ID, "");
  expect_error("video_url=https://www.youtube.com/watch?list=PLx&v=" ID, API_ERR_INVALID_VIDEO_URL);
  /* A raw '+' is a space after decoding, which is not a URL character. */
  expect_error("video_url=https%3A%2F%2Fwww.youtube.com%2Fwatch%3Fv%3D" ID "%26q%3Da+b", API_ERR_INVALID_VIDEO_URL);
  expect_ok("video_url=https%3A%2F%2Fwww.youtube.com%2Fwatch%3Fv%3D" ID "%26q%3Da%2Bb", ID, "");
  /* Not decoded twice: a double-encoded host or id never matches. */
  expect_error("video_url=https%3A%2F%2Fwww.youtube%252Ecom%2Fwatch%3Fv%3D" ID, API_ERR_INVALID_VIDEO_URL);
  expect_error("video_url=https://youtu.be/aB3_-9zZ0x%2559", API_ERR_INVALID_VIDEO_URL);
}

static void test_names_are_decoded_too(void **state) {
  (void)state;
  expect_ok("video%5Fid=" ID "&l%61ng=en", ID, "en");
  expect_error("video%5Fid=" ID "&video_id=" ID, API_ERR_AMBIGUOUS_REQUEST);
}

static void test_percent_decoded_value_is_validated(void **state) {
  (void)state;
  expect_ok("video_id=aB3%5F-9zZ0xY", ID, "");
  expect_ok("video_id=" ID "&language=pt%2dbr", ID, "pt-br");
  expect_error("video_id=aB3%5-9zZ0xY", API_ERR_INVALID_VIDEO_ID);
  expect_error("video_id=aB3_-9zZ0x%", API_ERR_INVALID_VIDEO_ID);
  expect_error("video_id=aB3_-9zZ0x%5", API_ERR_INVALID_VIDEO_ID);
  expect_error("video_id=aB3_-9zZ0x%G1", API_ERR_INVALID_VIDEO_ID);
  expect_error("video_id=aB3_-9zZ0x%00", API_ERR_INVALID_VIDEO_ID);
  expect_error("video_id=aB3_-9zZ0x+", API_ERR_INVALID_VIDEO_ID);
  expect_error("video_url=https://youtu.be/" ID "%", API_ERR_INVALID_VIDEO_URL);
  expect_error("video_id=" ID "&language=e%6", API_ERR_INVALID_LANGUAGE);
}

static void test_missing_both_or_both_given_is_ambiguous_request(void **state) {
  (void)state;
  expect_error("", API_ERR_AMBIGUOUS_REQUEST);
  expect_error("language=en", API_ERR_AMBIGUOUS_REQUEST);
  expect_error("videoid=" ID, API_ERR_AMBIGUOUS_REQUEST);
  expect_error("VIDEO_ID=" ID, API_ERR_AMBIGUOUS_REQUEST);
  expect_error("&&&", API_ERR_AMBIGUOUS_REQUEST);
  expect_error("video_id=" ID "&video_url=https://youtu.be/" ID, API_ERR_AMBIGUOUS_REQUEST);
  expect_error("video_id=&video_url=x", API_ERR_AMBIGUOUS_REQUEST);
  expect_error("video_id&video_url", API_ERR_AMBIGUOUS_REQUEST);
}

static void test_repeated_parameter_is_ambiguous(void **state) {
  (void)state;
  expect_error("video_id=" ID "&video_id=" ID, API_ERR_AMBIGUOUS_REQUEST);
  expect_error("video_url=https://youtu.be/" ID "&video_url=https://youtu.be/" ID, API_ERR_AMBIGUOUS_REQUEST);
  expect_error("video_id=" ID "&language=en&language=en", API_ERR_AMBIGUOUS_LANGUAGE);
  expect_error("video_id=" ID "&lang=en&lang=de", API_ERR_AMBIGUOUS_LANGUAGE);
  expect_error("video_id=" ID "&language=en&lang=en", API_ERR_AMBIGUOUS_LANGUAGE);
  expect_error("video_id=" ID "&language=&lang=", API_ERR_AMBIGUOUS_LANGUAGE);
}

static void test_empty_values_are_given_but_invalid(void **state) {
  (void)state;
  expect_error("video_id=", API_ERR_INVALID_VIDEO_ID);
  expect_error("video_id", API_ERR_INVALID_VIDEO_ID);
  expect_error("video_url=", API_ERR_INVALID_VIDEO_URL);
  expect_error("video_id=" ID "&language=", API_ERR_INVALID_LANGUAGE);
  expect_error("video_id=" ID "&lang", API_ERR_INVALID_LANGUAGE);
}

static void test_bad_values_get_their_own_code(void **state) {
  (void)state;
  expect_error("video_id=short", API_ERR_INVALID_VIDEO_ID);
  expect_error("video_id=" ID "x", API_ERR_INVALID_VIDEO_ID);
  expect_error("video_id=aB3_-9zZ0x!", API_ERR_INVALID_VIDEO_ID);
  expect_error("video_url=https://youtube.com.evil.com/watch?v=" ID, API_ERR_INVALID_VIDEO_URL);
  expect_error("video_url=https://www.youtube.com/playlist?list=PLx", API_ERR_INVALID_VIDEO_URL);
  expect_error("video_id=" ID "&language=EN", API_ERR_INVALID_LANGUAGE);
  expect_error("video_id=" ID "&lang=en_US", API_ERR_INVALID_LANGUAGE);
}

/* ARCHITECTURE.md order: ambiguous_request, ambiguous_language, invalid_video_id, invalid_video_url, invalid_language.
 */
static void test_rules_apply_in_the_documented_order(void **state) {
  (void)state;
  expect_error("video_id=bad&video_id=bad&language=x&lang=y", API_ERR_AMBIGUOUS_REQUEST);
  expect_error("language=x&lang=y", API_ERR_AMBIGUOUS_REQUEST);
  expect_error("video_id=bad&language=x&lang=y", API_ERR_AMBIGUOUS_LANGUAGE);
  expect_error("video_url=bad&language=en&language=en", API_ERR_AMBIGUOUS_LANGUAGE);
  expect_error("video_id=bad&language=X", API_ERR_INVALID_VIDEO_ID);
  expect_error("video_url=bad&language=X", API_ERR_INVALID_VIDEO_URL);
  expect_error("language=X&video_url=https://youtu.be/" ID, API_ERR_INVALID_LANGUAGE);
}

static void test_long_values_are_invalid_not_truncated(void **state) {
  (void)state;
  static char qs[16 + VTS_MAX_VIDEO_URL_BYTES + 64];
  /* A 2048-byte URL is accepted, one byte more is invalid_video_url. */
  const char *prefix = "video_url=https://youtu.be/" ID "?pad=";
  size_t plen = strlen(prefix);
  size_t url_prefix = plen - strlen("video_url=");
  memcpy(qs, prefix, plen);
  memset(qs + plen, 'a', VTS_MAX_VIDEO_URL_BYTES - url_prefix);
  size_t len = plen + VTS_MAX_VIDEO_URL_BYTES - url_prefix;
  struct transcript_query q;
  assert_int_equal(query_parse_transcript(qs, len, &q), API_OK);
  assert_string_equal(q.video_id, ID);
  qs[len] = 'a';
  assert_int_equal(query_parse_transcript(qs, len + 1, &q), API_ERR_INVALID_VIDEO_URL);

  expect_error("video_id=" ID "&language=abc-abcdefghi", API_ERR_INVALID_LANGUAGE);
  expect_error("video_id=" ID "&language=abc-abcdefghijklmnopqrstuvwxyz", API_ERR_INVALID_LANGUAGE);
  expect_ok("video_id=" ID "&language=abc-abcdefgh", ID, "abc-abcdefgh");
  expect_error("video_id=aB3_-9zZ0xYaB3_-9zZ0xYaB3_-9zZ0xY", API_ERR_INVALID_VIDEO_ID);
}

static void test_query_is_read_only_up_to_len(void **state) {
  (void)state;
  struct transcript_query q;
  const char *qs = "video_id=" ID "&video_id=" ID;
  assert_int_equal(query_parse_transcript(qs, strlen("video_id=" ID), &q), API_OK);
  assert_string_equal(q.video_id, ID);
  assert_int_equal(query_parse_transcript(NULL, 0, &q), API_ERR_AMBIGUOUS_REQUEST);
}

struct lang_case {
  const char *s;
  int valid;
};

static void test_language_pattern_edges(void **state) {
  (void)state;
  static const struct lang_case cases[] = {
      {"en", 1},      {"haw", 1},           {"pt-BR", 1},   {"zh-Hans", 1}, {"sr-latn", 1}, {"abc-abcdefgh", 1},
      {"en-US", 1},   {"en-us", 1},         {"e", 0},       {"engl", 0},    {"", 0},        {"EN", 0},
      {"En", 0},      {"eN-US", 0},         {"en_US", 0},   {"en-", 0},     {"en-U", 0},    {"en-abcdefghi", 0},
      {"en-US-x", 0}, {"en--US", 0},        {"-en", 0},     {"en-U1", 0},   {"e1", 0},      {"en ", 0},
      {"en-US ", 0},  {"abc-abcdefghi", 0}, {"abcd-ab", 0},
  };
  int failures = 0;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (ident_language_valid(cases[i].s, strlen(cases[i].s)) != cases[i].valid) {
      print_error("language \"%s\": expected %s\n", cases[i].s, cases[i].valid ? "valid" : "invalid");
      failures++;
    }
  }
  assert_int_equal(failures, 0);
  /* The length given is what counts, not a NUL. */
  assert_true(ident_language_valid("en-USxx", 5));
  assert_false(ident_language_valid("en\0", 3));
}

static void test_video_id_pattern_edges(void **state) {
  (void)state;
  assert_true(ident_video_id_valid(ID, 11));
  assert_true(ident_video_id_valid("___________", 11));
  assert_true(ident_video_id_valid("-----------", 11));
  assert_true(ident_video_id_valid("09azAZ09azA", 11));
  assert_false(ident_video_id_valid(ID, 10));
  assert_false(ident_video_id_valid(ID "x", 12));
  assert_false(ident_video_id_valid("aB3_-9zZ0x.", 11));
  assert_false(ident_video_id_valid("aB3_-9zZ0x/", 11));
  assert_false(ident_video_id_valid("aB3_-9zZ0x\0", 11));
  assert_false(ident_video_id_valid("aB3_-9zZ0x\xc3", 11));
  assert_false(ident_video_id_valid("", 0));
}

/* The one percent-decoder, shared with the fetcher: a '%' needs two hex digits, '+' is a space only in forms. */
static void test_percent_decoder_is_strict(void **state) {
  (void)state;
  char out[16];
  assert_int_equal(percent_decode("a%3Db+c", 7, out, sizeof(out), PERCENT_PLUS_IS_SPACE), 5);
  assert_memory_equal(out, "a=b c", 5);
  assert_int_equal(percent_decode("a%3db+c", 7, out, sizeof(out), 0), 5);
  assert_memory_equal(out, "a=b+c", 5);
  assert_int_equal(percent_decode("%1z", 3, out, sizeof(out), 0), -1);
  assert_int_equal(percent_decode("%z1", 3, out, sizeof(out), 0), -1);
  assert_int_equal(percent_decode("ab%4", 4, out, sizeof(out), 0), -1);
  assert_int_equal(percent_decode("ab%", 3, out, sizeof(out), 0), -1);
  assert_int_equal(percent_decode("abcd", 4, out, 3, 0), -2);
  assert_int_equal(percent_decode("", 0, out, sizeof(out), 0), 0);
}

static void expect_format(const char *qs, int given, enum render_format f) {
  struct transcript_query q = parse_ok(qs);
  assert_int_equal(q.format_given, given);
  assert_int_equal(q.format, f);
}

static void test_format_names_the_four_formats(void **state) {
  (void)state;
  expect_format("video_id=" ID, 0, RENDER_JSON);
  expect_format("video_id=" ID "&format=json", 1, RENDER_JSON);
  expect_format("video_id=" ID "&format=text", 1, RENDER_TEXT);
  expect_format("format=srt&video_id=" ID, 1, RENDER_SRT);
  expect_format("video_id=" ID "&form%61t=vtt", 1, RENDER_VTT);
}

static void test_bad_or_repeated_format_is_bad_request_after_the_other_rules(void **state) {
  (void)state;
  expect_error("video_id=" ID "&format=xml", API_ERR_INVALID_FORMAT);
  expect_error("video_id=" ID "&format=", API_ERR_INVALID_FORMAT);
  expect_error("video_id=" ID "&format=JSON", API_ERR_INVALID_FORMAT);
  expect_error("video_id=" ID "&format=jsonx", API_ERR_INVALID_FORMAT);
  expect_error("video_id=" ID "&format=%zz", API_ERR_INVALID_FORMAT);
  expect_error("video_id=" ID "&format=srt&format=srt", API_ERR_INVALID_FORMAT);
  /* The documented rules come first. */
  expect_error("format=xml", API_ERR_AMBIGUOUS_REQUEST);
  expect_error("video_id=bad&format=xml", API_ERR_INVALID_VIDEO_ID);
  expect_error("video_id=" ID "&lang=EN&format=xml", API_ERR_INVALID_LANGUAGE);
  const struct api_error_info *e = api_error_get(API_ERR_INVALID_FORMAT);
  assert_int_equal(e->status, 400);
  assert_string_equal(e->code, "bad_request");
  assert_string_equal(e->message, "format must be one of " RENDER_FORMAT_NAMES ".");
}

static void test_tracks_take_the_video_rules_and_ignore_the_rest(void **state) {
  (void)state;
  struct transcript_query q;
  static const char ok[] = "video_id=" ID "&language=EN&lang=x&format=xml&format=srt&translate=!";
  assert_int_equal(query_parse_tracks(ok, strlen(ok), &q), API_OK);
  assert_string_equal(q.video_id, ID);
  assert_string_equal(q.lang, "");
  assert_int_equal(q.format_given, 0);
  static const struct {
    const char *qs;
    enum api_error err;
  } bad[] = {{"", API_ERR_AMBIGUOUS_REQUEST},
             {"video_id=" ID "&video_id=" ID, API_ERR_AMBIGUOUS_REQUEST},
             {"video_id=" ID "&video_url=https://youtu.be/" ID, API_ERR_AMBIGUOUS_REQUEST},
             {"video_id=abc", API_ERR_INVALID_VIDEO_ID},
             {"video_url=https://example.com/" ID, API_ERR_INVALID_VIDEO_URL}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(query_parse_tracks(bad[i].qs, strlen(bad[i].qs), &q), bad[i].err);
    assert_string_equal(q.video_id, "");
  }
  static const char url[] = "video_url=https%3A%2F%2Fyoutu.be%2F" ID;
  assert_int_equal(query_parse_tracks(url, strlen(url), &q), API_OK);
  assert_string_equal(q.video_id, ID);
}

static void test_translate_is_a_language_given_at_most_once(void **state) {
  (void)state;
  struct transcript_query q = parse_ok("video_id=" ID "&translate=fr");
  assert_string_equal(q.translate, "fr");
  assert_string_equal(q.lang, "");
  q = parse_ok("translate=pt-BR&lang=en&video_id=" ID);
  assert_string_equal(q.translate, "pt-BR");
  assert_string_equal(q.lang, "en");
  q = parse_ok("video_id=" ID);
  assert_string_equal(q.translate, "");
  expect_error("video_id=" ID "&translate=fr&translate=fr", API_ERR_AMBIGUOUS_TRANSLATE);
  expect_error("video_id=" ID "&translate=FR", API_ERR_INVALID_TRANSLATE);
  expect_error("video_id=" ID "&translate=", API_ERR_INVALID_TRANSLATE);
  expect_error("video_id=" ID "&translate=abc-abcdefghi", API_ERR_INVALID_TRANSLATE);
  expect_error("video_id=" ID "&translate=f%zz", API_ERR_INVALID_TRANSLATE);
  /* Its place in the order: after the language rules of each kind, before format. */
  expect_error("video_id=" ID "&lang=en&language=en&translate=fr&translate=fr", API_ERR_AMBIGUOUS_LANGUAGE);
  expect_error("video_id=bad&translate=fr&translate=fr", API_ERR_AMBIGUOUS_TRANSLATE);
  expect_error("video_id=bad&translate=FR", API_ERR_INVALID_VIDEO_ID);
  expect_error("video_id=" ID "&lang=EN&translate=FR", API_ERR_INVALID_LANGUAGE);
  expect_error("video_id=" ID "&translate=FR&format=xml", API_ERR_INVALID_TRANSLATE);
  assert_string_equal(api_error_get(API_ERR_AMBIGUOUS_TRANSLATE)->code, "ambiguous_language");
  assert_string_equal(api_error_get(API_ERR_INVALID_TRANSLATE)->code, "invalid_language");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_video_id_alone_is_accepted),
      cmocka_unit_test(test_video_url_is_decoded_once_and_resolved),
      cmocka_unit_test(test_names_are_decoded_too),
      cmocka_unit_test(test_percent_decoded_value_is_validated),
      cmocka_unit_test(test_missing_both_or_both_given_is_ambiguous_request),
      cmocka_unit_test(test_repeated_parameter_is_ambiguous),
      cmocka_unit_test(test_empty_values_are_given_but_invalid),
      cmocka_unit_test(test_bad_values_get_their_own_code),
      cmocka_unit_test(test_rules_apply_in_the_documented_order),
      cmocka_unit_test(test_long_values_are_invalid_not_truncated),
      cmocka_unit_test(test_query_is_read_only_up_to_len),
      cmocka_unit_test(test_language_pattern_edges),
      cmocka_unit_test(test_video_id_pattern_edges),
      cmocka_unit_test(test_percent_decoder_is_strict),
      cmocka_unit_test(test_format_names_the_four_formats),
      cmocka_unit_test(test_tracks_take_the_video_rules_and_ignore_the_rest),
      cmocka_unit_test(test_translate_is_a_language_given_at_most_once),
      cmocka_unit_test(test_bad_or_repeated_format_is_bad_request_after_the_other_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
