/* Unit tests of the player reply parser and of track choice, on our own replies in the platform's shapes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/buf.h"
#include "common/limits.h"
#include "fetcher/platform/player.h"
#include "proto/tracks.h"
#include "testdata.h"

static int parse_str(const char *s, size_t len, struct player_info *pi) {
  char *copy = testdata_exact(s, len);
  int rv = player_parse(copy, len, pi);
  free(copy);
  return rv;
}

#define PARSE_LIT(lit, pi) parse_str(lit, sizeof(lit) - 1, pi)

static void parse_file(const char *name, struct player_info *pi) {
  size_t len;
  char *body = testdata_read(name, &len);
  if (!body) fail_msg("fixture %s not readable (VTS_TEST_DATA)", name);
  int rv = player_parse(body, len, pi);
  if (rv != 0) fail_msg("%s: expected 0, got %d", name, rv);
  free(body);
}

static void test_ok_reply_lists_tracks_manual_and_asr(void **state) {
  (void)state;
  struct player_info pi;
  parse_file("player_ok_tracks.json", &pi);
  assert_int_equal(pi.playability, PLAY_OK);
  assert_string_equal(pi.reason, "");
  /* The track without a baseUrl is left out; the others keep upstream order. */
  assert_int_equal(pi.ntracks, 6);
  static const struct {
    const char *lang;
    int asr, po;
  } want[] = {{"de", 0, 0}, {"en", 1, 0}, {"en", 0, 0}, {"fr", 0, 1}, {"pt-BR", 0, 0}, {"ja", 0, 0}};
  for (size_t i = 0; i < 6; i++) {
    assert_string_equal(pi.tracks[i].lang, want[i].lang);
    assert_int_equal(pi.tracks[i].is_asr, want[i].asr);
    assert_int_equal(pi.tracks[i].po_token, want[i].po);
  }
  assert_string_equal(
      pi.tracks[1].base_url,
      "https://www.youtube.com/api/timedtext?v=vtsTestVid1&ei=abc&caps=asr&opi=1&xoaf=5&hl=en&kind=asr&lang=en");
  /* defaultAudioTrackIndex 1 names upstream caption track 6, which is ours 5 after the dropped one. */
  assert_int_equal(pi.default_track, 5);
  player_info_free(&pi);
}

static void test_ok_reply_lists_audio_formats_with_urls(void **state) {
  (void)state;
  struct player_info pi;
  parse_file("player_ok_tracks.json", &pi);
  /* The video format and the ciphered format without a direct url are left out. */
  assert_int_equal(pi.naudio, 2);
  assert_int_equal(pi.audio[0].itag, 140);
  assert_string_equal(pi.audio[0].url, "https://rr3---sn-vtstest.googlevideo.com/videoplayback?expire=1&itag=140");
  assert_string_equal(pi.audio[0].mime, "audio/mp4; codecs=\"mp4a.40.2\"");
  assert_true(pi.audio[0].content_length == 3436118);
  assert_true(pi.audio[0].bitrate == 130612);
  assert_true(pi.audio[0].duration_ms == 212091);
  assert_int_equal(pi.audio[0].is_default, 1);
  assert_int_equal(pi.audio[1].itag, 251);
  assert_string_equal(pi.audio[1].mime, "audio/webm; codecs=\"opus\"");
  assert_true(pi.audio[1].content_length == 3381202);
  assert_int_equal(pi.audio[1].is_default, 0);
  player_info_free(&pi);
}

static void test_reply_without_captions_has_no_tracks(void **state) {
  (void)state;
  struct player_info pi;
  parse_file("player_no_captions.json", &pi);
  assert_int_equal(pi.playability, PLAY_OK);
  assert_int_equal(pi.ntracks, 0);
  assert_null(pi.tracks);
  assert_int_equal(pi.default_track, -1);
  assert_int_equal(player_choose_track(&pi, "en"), -1);
  assert_int_equal(player_choose_track(&pi, ""), -1);
  assert_int_equal(pi.naudio, 1);
  assert_int_equal(pi.audio[0].itag, 139);
  assert_int_equal(pi.audio[0].is_default, 1); /* no audioTrack: the only audio there is */
  player_info_free(&pi);
}

static void test_playability_statuses_map_to_outcomes(void **state) {
  (void)state;
  static const struct {
    const char *file;
    enum playability play;
    const char *reason;
    const char *subreason;
  } cases[] = {
      {"player_bot_check.json", PLAY_BOT_CHECK, "Sign in to confirm you\xE2\x80\x99re not a bot",
       "This helps protect our community. Learn more"},
      {"player_age_restricted.json", PLAY_LOGIN_REQUIRED, "This video may be inappropriate for some users.", ""},
      {"player_unavailable.json", PLAY_UNAVAILABLE, "This video is unavailable", ""},
      {"player_unplayable.json", PLAY_UNPLAYABLE, "Video unavailable",
       "The uploader has not made this video available in your country"},
      {"player_live_offline.json", PLAY_LIVE_OFFLINE, "This live event will begin in a few moments.", ""},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct player_info pi;
    parse_file(cases[i].file, &pi);
    if (pi.playability != cases[i].play)
      fail_msg("%s: playability %d, want %d", cases[i].file, pi.playability, cases[i].play);
    assert_string_equal(pi.reason, cases[i].reason);
    assert_string_equal(pi.subreason, cases[i].subreason);
    assert_int_equal(pi.ntracks, 0);
    assert_int_equal(pi.naudio, 0);
    player_info_free(&pi);
  }
}

static void test_unknown_status_is_other(void **state) {
  (void)state;
  struct player_info pi;
  assert_int_equal(PARSE_LIT("{\"playabilityStatus\":{\"status\":\"CONTENT_CHECK_REQUIRED\",\"reason\":\"x\"}}", &pi),
                   0);
  assert_int_equal(pi.playability, PLAY_OTHER);
  player_info_free(&pi);
  /* A bot reason on another status is that status: only LOGIN_REQUIRED asks for a sign-in. */
  assert_int_equal(PARSE_LIT("{\"playabilityStatus\":{\"status\":\"CUSTOM\",\"reason\":\"not a bot\"}}", &pi), 0);
  assert_int_equal(pi.playability, PLAY_OTHER);
  player_info_free(&pi);
}

static void test_bot_check_is_recognised_from_reason_words(void **state) {
  (void)state;
  static const struct {
    const char *json;
    enum playability play;
  } cases[] = {
      {"{\"playabilityStatus\":{\"status\":\"LOGIN_REQUIRED\",\"reason\":\"Sign in to confirm you're not a bot\"}}",
       PLAY_BOT_CHECK},
      {"{\"playabilityStatus\":{\"status\":\"LOGIN_REQUIRED\",\"reason\":\"Are you a ROBOT?\"}}", PLAY_BOT_CHECK},
      /* Only the errorScreen says it. */
      {"{\"playabilityStatus\":{\"status\":\"LOGIN_REQUIRED\",\"errorScreen\":{\"playerErrorMessageRenderer\":"
       "{\"reason\":{\"runs\":[{\"text\":\"Confirm you\xE2\x80\x99re not a bot\"}]}}}}}",
       PLAY_BOT_CHECK},
      {"{\"playabilityStatus\":{\"status\":\"LOGIN_REQUIRED\",\"reason\":\"This video is private\"}}",
       PLAY_LOGIN_REQUIRED},
      {"{\"playabilityStatus\":{\"status\":\"LOGIN_REQUIRED\",\"reason\":\"Both bottles\"}}", PLAY_LOGIN_REQUIRED},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct player_info pi;
    assert_int_equal(parse_str(cases[i].json, strlen(cases[i].json), &pi), 0);
    if (pi.playability != cases[i].play)
      fail_msg("case %zu: playability %d, want %d", i, pi.playability, cases[i].play);
    player_info_free(&pi);
  }
  struct player_info pi;
  assert_int_equal(parse_str(cases[2].json, strlen(cases[2].json), &pi), 0);
  assert_string_equal(pi.reason, "Confirm you\xE2\x80\x99re not a bot"); /* the errorScreen text stands in */
  player_info_free(&pi);
}

static void test_default_caption_track_comes_from_audio_tracks(void **state) {
  (void)state;
  static const char head[] =
      "{\"playabilityStatus\":{\"status\":\"OK\"},\"captions\":{\"playerCaptionsTracklistRenderer\":{"
      "\"captionTracks\":[{\"baseUrl\":\"https://u/a?lang=a\",\"languageCode\":\"a\"},"
      "{\"baseUrl\":\"https://u/b?lang=b\",\"languageCode\":\"b\"},{\"baseUrl\":\"https://u/"
      "c?lang=c\",\"languageCode\":\"c\"}],";
  static const struct {
    const char *tail;
    int want;
  } cases[] = {
      {"\"audioTracks\":[{\"captionTrackIndices\":[0,1,2]},{\"defaultCaptionTrackIndex\":1}]}}}", 1},
      {"\"audioTracks\":[{\"defaultCaptionTrackIndex\":2},{\"defaultCaptionTrackIndex\":1}],\"defaultAudioTrackIndex\":"
       "1}}}",
       1},
      {"\"defaultAudioTrackIndex\":0,\"audioTracks\":[{},{\"defaultCaptionTrackIndex\":2}]}}}", 2},
      {"\"audioTracks\":[{\"defaultCaptionTrackIndex\":3}]}}}", -1},
      {"\"audioTracks\":[{\"defaultCaptionTrackIndex\":\"x\"}]}}}", -1},
      {"\"audioTracks\":[]}}}", -1},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char json[1024];
    int n = snprintf(json, sizeof(json), "%s%s", head, cases[i].tail);
    assert_true(n > 0 && (size_t)n < sizeof(json));
    struct player_info pi;
    int rv = parse_str(json, (size_t)n, &pi);
    if (rv != 0) fail_msg("case %zu: parse %d", i, rv);
    if (pi.default_track != cases[i].want)
      fail_msg("case %zu: default %d, want %d", i, pi.default_track, cases[i].want);
    player_info_free(&pi);
  }
}

static void test_unusable_tracks_and_formats_are_left_out(void **state) {
  (void)state;
  static const char json[] =
      "{\"playabilityStatus\":{\"status\":\"OK\"},\"captions\":{\"playerCaptionsTracklistRenderer\":{\"captionTracks\":"
      "["
      "{\"baseUrl\":\"https://u/a\\u0000x\",\"languageCode\":\"en\"},"
      "{\"baseUrl\":\"https://u/b c\",\"languageCode\":\"en\"},"
      "{\"baseUrl\":\"https://u/c\",\"languageCode\":\"a-very-long-language-code\"},"
      "{\"baseUrl\":\"https://u/d\",\"languageCode\":\"\"},"
      "{\"baseUrl\":\"https://u/e\",\"languageCode\":\"de\",\"kind\":\"asr\"}],"
      "\"audioTracks\":[{\"defaultCaptionTrackIndex\":4}]}},"
      "\"streamingData\":{\"adaptiveFormats\":[{\"itag\":140,\"mimeType\":\"audio/mp4\"},"
      "{\"itag\":141,\"url\":\"https://x.googlevideo.com/v\",\"mimeType\":\"video/mp4\"},"
      "{\"itag\":142,\"url\":\"https://x.googlevideo.com/a\",\"mimeType\":\"audio/webm; codecs=\\\"opus\\\"; "
      "a-mime-type-far-too-long-to-be-true=1\"}]}}";
  struct player_info pi;
  assert_int_equal(PARSE_LIT(json, &pi), 0);
  assert_int_equal(pi.ntracks, 1);
  assert_string_equal(pi.tracks[0].base_url, "https://u/e");
  assert_int_equal(pi.tracks[0].is_asr, 1);
  assert_int_equal(pi.default_track, 0);
  assert_int_equal(pi.naudio, 0);
  player_info_free(&pi);
}

static void test_huge_numbers_do_not_fail_the_reply(void **state) {
  (void)state;
  static const char json[] =
      "{\"n\":1e999999,\"m\":-123456789012345678901234567890,\"playabilityStatus\":{\"status\":\"OK\"},"
      "\"streamingData\":{\"adaptiveFormats\":[{\"itag\":99999999999999999999999,\"url\":\"https://x.googlevideo.com/"
      "a\","
      "\"mimeType\":\"audio/mp4\",\"contentLength\":\"99999999999999999999999\",\"bitrate\":1e308,"
      "\"approxDurationMs\":\"-5\"}]}}";
  struct player_info pi;
  assert_int_equal(PARSE_LIT(json, &pi), 0);
  assert_int_equal(pi.naudio, 1);
  assert_int_equal(pi.audio[0].itag, 0);
  assert_true(pi.audio[0].content_length == -1);
  assert_true(pi.audio[0].bitrate == -1);
  assert_true(pi.audio[0].duration_ms == -1);
  player_info_free(&pi);
}

static void test_hostile_replies_are_refused(void **state) {
  (void)state;
  static const struct {
    const char *s;
    size_t len;
  } bad[] = {
#define CASE(lit) {lit, sizeof(lit) - 1}
      CASE(""),
      CASE("   "),
      CASE("[]"),
      CASE("\"OK\""),
      CASE("42"),
      CASE("null"),
      CASE("<!DOCTYPE html><html></html>"),
      CASE("{/* c */\"playabilityStatus\":{\"status\":\"OK\"}}"),
      CASE("{\"playabilityStatus\":{\"status\":\"OK\"}} // c"),
      CASE("{\"playabilityStatus\":{\"status\":\"O\0K\"}}"),
      CASE("{\"playabilityStatus\":{\"status\":\"OK\"}}\0{\"x\":1}"),
      CASE("{\"playabilityStatus\":{\"status\":\"OK\"}}{}"),
      CASE("{\"playabilityStatus\":{\"status\":\"OK\",\"reason\":\"\xFF\xFE\"}}"),
      CASE("{\"playabilityStatus\":{\"status\":\"OK\"},}"),
      CASE("{\"playabilityStatus\":{\"reason\":\"no status\"}}"),
      CASE("{\"playabilityStatus\":{\"status\":42}}"),
      CASE("{}"),
#undef CASE
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct player_info pi;
    int rv = parse_str(bad[i].s, bad[i].len, &pi);
    if (rv != -EPROTO) fail_msg("case %zu: expected -EPROTO, got %d", i, rv);
    assert_int_equal(pi.playability, PLAY_OTHER);
    assert_int_equal(pi.default_track, -1);
    assert_int_equal(pi.ntracks, 0);
    assert_int_equal(pi.naudio, 0);
    player_info_free(&pi);
  }
}

static void test_truncated_reply_is_refused_at_every_byte(void **state) {
  (void)state;
  size_t len = 0;
  char *body = testdata_read("player_ok_tracks.json", &len);
  assert_non_null(body);
  size_t end = len;
  while (end > 0 && (body[end - 1] == '\n' || body[end - 1] == ' ')) end--;
  for (size_t n = 0; n <= len; n++) {
    struct player_info pi;
    int rv = parse_str(body, n, &pi);
    if (rv != (n >= end ? 0 : -EPROTO)) fail_msg("truncated to %zu of %zu bytes: got %d", n, len, rv);
    player_info_free(&pi);
  }
  free(body);
}

/* {"playabilityStatus":{"status":"OK"},"x":[[...]]} with depth containers in all (the root counts). */
static int parse_nested(int depth, const char *open, const char *close) {
  struct buf b = BUF_INIT;
  assert_int_equal(buf_puts(&b, "{\"playabilityStatus\":{\"status\":\"OK\"},\"x\":"), 0);
  for (int i = 1; i < depth; i++) assert_int_equal(buf_puts(&b, open), 0);
  assert_int_equal(buf_puts(&b, "1"), 0);
  for (int i = 1; i < depth; i++) assert_int_equal(buf_puts(&b, close), 0);
  assert_int_equal(buf_puts(&b, "}"), 0);
  struct player_info pi;
  int rv = parse_str(b.data, b.len, &pi);
  player_info_free(&pi);
  buf_free(&b);
  return rv;
}

static void test_nesting_is_capped(void **state) {
  (void)state;
  assert_int_equal(parse_nested(VTS_MAX_JSON_DEPTH, "[", "]"), 0);
  assert_int_equal(parse_nested(VTS_MAX_JSON_DEPTH + 1, "[", "]"), -EPROTO);
  assert_int_equal(parse_nested(10000, "[", "]"), -EPROTO);
  assert_int_equal(parse_nested(10000, "{\"a\":", "}"), -EPROTO);
}

static void test_reply_larger_than_limit_is_refused(void **state) {
  (void)state;
  static const char doc[] = "{\"playabilityStatus\":{\"status\":\"OK\"}}";
  size_t len = VTS_MAX_UPSTREAM_BODY_BYTES + 1;
  char *body = malloc(len);
  assert_non_null(body);
  memset(body, ' ', len);
  memcpy(body, doc, sizeof(doc) - 1);
  struct player_info pi;
  assert_int_equal(player_parse(body, len, &pi), -EPROTO);
  player_info_free(&pi);
  assert_int_equal(player_parse(body, len - 1, &pi), 0);
  player_info_free(&pi);
  free(body);
}

/* Track choice ------------------------------------------------------------------------------------------------- */

struct spec {
  const char *lang;
  int asr, po;
};

static struct player_info make_info(const struct spec *specs, size_t n, int default_track) {
  struct player_info pi;
  memset(&pi, 0, sizeof(pi));
  pi.tracks = calloc(n ? n : 1, sizeof(*pi.tracks));
  assert_non_null(pi.tracks);
  for (size_t i = 0; i < n; i++) {
    snprintf(pi.tracks[i].lang, sizeof(pi.tracks[i].lang), "%s", specs[i].lang);
    pi.tracks[i].is_asr = specs[i].asr;
    pi.tracks[i].po_token = specs[i].po;
  }
  pi.ntracks = n;
  pi.default_track = default_track;
  return pi;
}

static void test_choice_prefers_exact_manual_over_asr(void **state) {
  (void)state;
  struct player_info pi;
  parse_file("player_ok_tracks.json", &pi);
  assert_int_equal(player_choose_track(&pi, "en"), 2); /* the asr "en" comes first upstream */
  assert_int_equal(player_choose_track(&pi, "EN"), 2);
  assert_int_equal(player_choose_track(&pi, "de"), 0);
  assert_int_equal(player_choose_track(&pi, "pt"), 4); /* pt -> pt-BR */
  assert_int_equal(player_choose_track(&pi, "fr"), 5); /* needs a PO token: the default instead */
  assert_int_equal(player_choose_track(&pi, "ko"), 5);
  assert_int_equal(player_choose_track(&pi, ""), 5);
  player_info_free(&pi);
}

static void test_choice_exact_asr_beats_base_language_manual(void **state) {
  (void)state;
  const struct spec s[] = {{"en-GB", 0, 0}, {"en", 1, 0}};
  struct player_info pi = make_info(s, 2, -1);
  assert_int_equal(player_choose_track(&pi, "en"), 1);
  assert_int_equal(player_choose_track(&pi, "en-US"), 0); /* base "en": manual en-GB before asr en */
  free(pi.tracks);
}

static void test_choice_falls_back_to_base_language(void **state) {
  (void)state;
  const struct spec s[] = {{"en", 0, 0}, {"pt-PT", 0, 0}, {"pt", 0, 0}, {"zh-Hans", 1, 0}};
  struct player_info pi = make_info(s, 4, 0);
  assert_int_equal(player_choose_track(&pi, "pt-BR"), 2); /* the bare base before a sibling */
  assert_int_equal(player_choose_track(&pi, "pt"), 2);
  assert_int_equal(player_choose_track(&pi, "pt-pt"), 1);
  assert_int_equal(player_choose_track(&pi, "zh"), 3);
  assert_int_equal(player_choose_track(&pi, "zh-Hant"), 3);
  free(pi.tracks);
  const struct spec only_br[] = {{"en", 0, 0}, {"pt-BR", 1, 0}};
  pi = make_info(only_br, 2, 0);
  assert_int_equal(player_choose_track(&pi, "pt"), 1);
  free(pi.tracks);
}

static void test_choice_without_match_uses_default_then_manual_then_first(void **state) {
  (void)state;
  const struct spec s[] = {{"de", 1, 0}, {"fr", 0, 0}, {"es", 1, 0}};
  struct player_info pi = make_info(s, 3, 2);
  assert_int_equal(player_choose_track(&pi, "ja"), 2);
  assert_int_equal(player_choose_track(&pi, ""), 2);
  pi.default_track = -1;
  assert_int_equal(player_choose_track(&pi, "ja"), 1);
  assert_int_equal(player_choose_track(&pi, ""), 1);
  pi.tracks[1].is_asr = 1;
  assert_int_equal(player_choose_track(&pi, ""), 0);
  pi.default_track = 7; /* out of range: ignored */
  assert_int_equal(player_choose_track(&pi, ""), 0);
  free(pi.tracks);
}

/* The exp list of a track URL's query marks it; a fragment is no part of what the platform reads. */
static void test_only_the_query_says_a_track_wants_a_token(void **state) {
  (void)state;
  assert_int_equal(tracks_url_wants_po_token("https://www.youtube.com/api/timedtext?v=vtsTestVid1&exp=xpe"), 1);
  assert_int_equal(tracks_url_wants_po_token("https://www.youtube.com/api/timedtext?exp=xpo%2Cxpv&lang=en#f"), 1);
  assert_int_equal(tracks_url_wants_po_token("https://www.youtube.com/api/timedtext?exp=xpo&lang=en"), 0);
  assert_int_equal(tracks_url_wants_po_token("https://www.youtube.com/api/timedtext?lang=en#&exp=xpe"), 0);
  assert_int_equal(tracks_url_wants_po_token("https://www.youtube.com/api/timedtext?lang=en#x&exp=xpv"), 0);
  assert_int_equal(tracks_url_wants_po_token("https://www.youtube.com/api/timedtext#?exp=xpe"), 0);
}

static void test_choice_skips_po_token_tracks(void **state) {
  (void)state;
  const struct spec s[] = {{"en", 0, 1}, {"en", 1, 0}, {"de", 0, 1}};
  struct player_info pi = make_info(s, 3, 0);
  assert_int_equal(player_choose_track(&pi, "en"), 1);
  assert_int_equal(player_choose_track(&pi, ""), 1); /* the default needs a token */
  assert_int_equal(player_choose_track(&pi, "de"), 1);
  pi.tracks[1].po_token = 1;
  assert_int_equal(player_choose_track(&pi, "en"), -1);
  assert_int_equal(player_choose_track(&pi, ""), -1);
  free(pi.tracks);
}

/* With a token to be had, a track that needs one is chosen as any other would be. */
static void test_choice_with_tokens_takes_po_token_tracks_as_any(void **state) {
  (void)state;
  const struct spec s[] = {{"en", 0, 1}, {"en", 1, 0}, {"de", 0, 1}};
  struct player_info pi = make_info(s, 3, 0);
  assert_int_equal(player_choose_track_any(&pi, "en"), 0);
  assert_int_equal(player_choose_track_any(&pi, ""), 0);
  assert_int_equal(player_choose_track_any(&pi, "de"), 2);
  assert_int_equal(player_choose_track_any(&pi, "fr"), 0);
  pi.tracks[1].po_token = 1;
  assert_int_equal(player_choose_track_any(&pi, "en"), 0);
  pi.tracks[0].po_token = 0;
  assert_int_equal(player_choose_track(&pi, "en"), 0);
  free(pi.tracks);
}

static void test_choice_without_tracks_is_none(void **state) {
  (void)state;
  struct player_info pi = make_info(NULL, 0, -1);
  assert_int_equal(player_choose_track(&pi, "en"), -1);
  assert_int_equal(player_choose_track(&pi, ""), -1);
  free(pi.tracks);
}

static void test_tracks_carry_name_and_translatable_and_the_reply_its_translations(void **state) {
  (void)state;
  struct player_info pi;
  parse_file("player_ok_tracks.json", &pi);
  static const char *const names[] = {"German", "English (auto-generated)", "English",
                                      "French", "Portuguese (Brazil)",      "Japanese"};
  for (size_t i = 0; i < 6; i++) {
    assert_string_equal(pi.tracks[i].name, names[i]);
    assert_int_equal(pi.tracks[i].translatable, 1);
  }
  assert_int_equal(pi.ntranslations, 1);
  assert_string_equal(pi.translations[0].lang, "af");
  assert_string_equal(pi.translations[0].name, "Afrikaans");
  assert_ptr_equal(player_translation_code(&pi, "af"), pi.translations[0].lang);
  assert_ptr_equal(player_translation_code(&pi, "AF"), pi.translations[0].lang); /* the platform's spelling */
  assert_null(player_translation_code(&pi, "fr"));
  assert_null(player_translation_code(&pi, "a"));
  player_info_free(&pi);
}

static void test_names_from_simple_text_runs_and_nothing(void **state) {
  (void)state;
  static const char json[] =
      "{\"playabilityStatus\":{\"status\":\"OK\"},\"captions\":{\"playerCaptionsTracklistRenderer\":{"
      "\"captionTracks\":["
      "{\"baseUrl\":\"https://www.youtube.com/api/timedtext?lang=a\",\"languageCode\":\"en\","
      "\"name\":{\"simpleText\":\"Simple \\\"quoted\\\"\"},\"isTranslatable\":\"true\"},"
      "{\"baseUrl\":\"https://www.youtube.com/api/timedtext?lang=b\",\"languageCode\":\"de\","
      "\"name\":{\"runs\":[{\"text\":\"Deutsch \"},{\"text\":\"(auto)\"}]},\"kind\":\"asr\",\"isTranslatable\":true},"
      "{\"baseUrl\":\"https://www.youtube.com/api/timedtext?lang=c\",\"languageCode\":\"fr\"}],"
      "\"translationLanguages\":[{\"languageCode\":\"es\",\"languageName\":{\"simpleText\":\"Spanish\"}},"
      "{\"languageName\":{\"runs\":[{\"text\":\"No code\"}]}},{\"languageCode\":\"bad code\"},"
      "{\"languageCode\":\"zh-Hant\"}]}}}";
  struct player_info pi;
  assert_int_equal(PARSE_LIT(json, &pi), 0);
  assert_int_equal(pi.ntracks, 3);
  assert_string_equal(pi.tracks[0].name, "Simple \"quoted\"");
  assert_int_equal(pi.tracks[0].translatable, 0); /* a string is not the boolean true */
  assert_string_equal(pi.tracks[1].name, "Deutsch (auto)");
  assert_int_equal(pi.tracks[1].translatable, 1);
  assert_string_equal(pi.tracks[2].name, "");
  assert_int_equal(pi.tracks[2].translatable, 0);
  /* A translation language without a usable code is left out; one without a name keeps an empty one. */
  assert_int_equal(pi.ntranslations, 2);
  assert_string_equal(pi.translations[0].lang, "es");
  assert_string_equal(pi.translations[0].name, "Spanish");
  assert_string_equal(pi.translations[1].lang, "zh-Hant");
  assert_string_equal(pi.translations[1].name, "");

  struct buf b = BUF_INIT;
  assert_int_equal(buf_puts(&b, "<"), 0);
  assert_int_equal(player_tracks_json(&pi, &b), 0);
  assert_string_equal(b.data,
                      "<{\"tracks\":[{\"language\":\"en\",\"name\":\"Simple \\\"quoted\\\"\",\"kind\":\"manual\","
                      "\"translatable\":false},{\"language\":\"de\",\"name\":\"Deutsch (auto)\",\"kind\":\"asr\","
                      "\"translatable\":true},{\"language\":\"fr\",\"name\":\"\",\"kind\":\"manual\","
                      "\"translatable\":false}],\"translationLanguages\":[{\"language\":\"es\",\"name\":\"Spanish\"},"
                      "{\"language\":\"zh-Hant\",\"name\":\"\"}]}");
  buf_free(&b);
  player_info_free(&pi);
}

static void test_tracks_json_of_a_reply_without_captions_is_two_empty_lists(void **state) {
  (void)state;
  struct player_info pi;
  parse_file("player_no_captions.json", &pi);
  struct buf b = BUF_INIT;
  assert_int_equal(player_tracks_json(&pi, &b), 0);
  assert_string_equal(b.data, "{\"tracks\":[],\"translationLanguages\":[]}");
  buf_free(&b);
  player_info_free(&pi);
}

/* The video details of a hostile reply: bounded, NUL bytes out, cut at a character, wrong types ignored. */
static void test_video_details_are_bounded_and_typed(void **state) {
  (void)state;
  struct buf json = BUF_INIT;
  assert_int_equal(buf_puts(&json,
                            "{\"playabilityStatus\":{\"status\":\"OK\"},\"videoDetails\":{\"videoId\":\"vtsTestVid1\","
                            "\"title\":\"a\\u0000b\",\"author\":7,\"lengthSeconds\":\"-3\",\"viewCount\":99,"
                            "\"isLive\":\"true\",\"isLiveContent\":true,\"shortDescription\":\"x"),
                   0);
  /* A description past its bound (16 KiB) made of two-byte characters: cut before a character, never in one. */
  for (int i = 0; i < 9000; i++) assert_int_equal(buf_puts(&json, "\xc3\xa9"), 0);
  assert_int_equal(buf_puts(&json, "\",\"keywords\":["), 0);
  for (int i = 0; i < 70; i++) assert_int_equal(buf_printf(&json, "%s\"k%d\"", i ? "," : "", i), 0);
  assert_int_equal(buf_puts(&json,
                            ",1,null],\"thumbnail\":{\"thumbnails\":[{\"url\":\"https://i.example/a.jpg\","
                            "\"width\":120,\"height\":90},{\"url\":\"has space\",\"width\":1,\"height\":1},"
                            "{\"url\":\"https://i.example/b.jpg\",\"width\":2}]}},"
                            "\"microformat\":{\"playerMicroformatRenderer\":{\"publishDate\":\"2020-01-02\"}}}"),
                   0);
  struct player_info pi;
  assert_int_equal(parse_str(json.data, json.len, &pi), 0);
  const struct video_details *d = &pi.details;
  assert_string_equal(d->title, "ab");
  assert_null(d->channel_name);
  assert_null(d->channel_id);
  assert_int_equal(d->length_s, -1);
  assert_int_equal(d->view_count, 99);
  assert_int_equal(d->is_live, 0);
  assert_int_equal(d->is_live_content, 1);
  /* "x" then two-byte characters: byte 16384 continues one, so the cut comes before it. */
  assert_int_equal(strlen(d->description), 16 * 1024 - 1);
  assert_int_equal(d->nkeywords, 64);
  assert_string_equal(d->keywords[63], "k63");
  assert_int_equal(d->nthumbs, 1);
  assert_string_equal(d->thumbs[0].url, "https://i.example/a.jpg");
  assert_string_equal(d->publish_date, "2020-01-02");
  struct buf out = BUF_INIT;
  assert_int_equal(player_metadata_json(&pi, "vtsTestVid1", &out), 0);
  assert_non_null(strstr(out.data,
                         "\"title\":\"ab\",\"channelId\":null,\"channelName\":null,\"lengthSeconds\":null,"
                         "\"isLive\":false,\"isLiveContent\":true,\"viewCount\":99,\"publishDate\":\"2020-01-02\""));
  assert_non_null(strstr(out.data,
                         "\"thumbnails\":[{\"url\":\"https://i.example/a.jpg\",\"width\":120,\"height\":90}],"
                         "\"captionLanguages\":[]}"));
  buf_free(&out);
  player_info_free(&pi);
  assert_null(pi.details.title);
  buf_free(&json);
}

static void test_wrapped_reply_is_read_under_its_member(void **state) {
  (void)state;
  struct player_info pi;
  static const char reel[] =
      "{\"playabilityStatus\":{\"status\":\"ERROR\"},\"playerResponse\":{\"playabilityStatus\":{\"status\":\"OK\"},"
      "\"videoDetails\":{\"videoId\":\"abcdefghijk\",\"title\":\"T\"},\"captions\":{"
      "\"playerCaptionsTracklistRenderer\":"
      "{\"captionTracks\":[{\"baseUrl\":\"https://www.youtube.com/api/timedtext?v=abcdefghijk&lang=en\","
      "\"languageCode\":\"en\"}]}}},\"playerResponse\":{\"playabilityStatus\":{\"status\":\"ERROR\"}}}";
  /* Only the wrapper's member counts, and only its first occurrence: the top level's own status is not read. */
  assert_int_equal(player_parse_wrapped(reel, strlen(reel), "playerResponse", &pi), 0);
  assert_int_equal(pi.playability, PLAY_OK);
  assert_string_equal(pi.video_id, "abcdefghijk");
  assert_int_equal(pi.ntracks, 1);
  assert_string_equal(pi.tracks[0].lang, "en");
  player_info_free(&pi);
  /* Unwrapped, the same body is read at its top level. */
  assert_int_equal(player_parse(reel, strlen(reel), &pi), 0);
  assert_int_equal(pi.playability, PLAY_UNAVAILABLE);
  assert_int_equal(pi.ntracks, 0);
  player_info_free(&pi);
  /* The reel call's answer for an id it does not know, and a member that is not an object. */
  assert_int_equal(player_parse_wrapped("{}", 2, "playerResponse", &pi), -ENOENT);
  player_info_free(&pi);
  static const char scalar[] = "{\"playerResponse\":7}";
  assert_int_equal(player_parse_wrapped(scalar, strlen(scalar), "playerResponse", &pi), -ENOENT);
  player_info_free(&pi);
  static const char empty[] = "{\"playerResponse\":{}}";
  assert_int_equal(player_parse_wrapped(empty, strlen(empty), "playerResponse", &pi), -EPROTO);
  player_info_free(&pi);
  assert_int_equal(player_parse_wrapped("[]", 2, "playerResponse", &pi), -EPROTO);
  player_info_free(&pi);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ok_reply_lists_tracks_manual_and_asr),
      cmocka_unit_test(test_ok_reply_lists_audio_formats_with_urls),
      cmocka_unit_test(test_reply_without_captions_has_no_tracks),
      cmocka_unit_test(test_playability_statuses_map_to_outcomes),
      cmocka_unit_test(test_unknown_status_is_other),
      cmocka_unit_test(test_bot_check_is_recognised_from_reason_words),
      cmocka_unit_test(test_default_caption_track_comes_from_audio_tracks),
      cmocka_unit_test(test_unusable_tracks_and_formats_are_left_out),
      cmocka_unit_test(test_huge_numbers_do_not_fail_the_reply),
      cmocka_unit_test(test_hostile_replies_are_refused),
      cmocka_unit_test(test_truncated_reply_is_refused_at_every_byte),
      cmocka_unit_test(test_nesting_is_capped),
      cmocka_unit_test(test_reply_larger_than_limit_is_refused),
      cmocka_unit_test(test_choice_prefers_exact_manual_over_asr),
      cmocka_unit_test(test_choice_exact_asr_beats_base_language_manual),
      cmocka_unit_test(test_choice_falls_back_to_base_language),
      cmocka_unit_test(test_choice_without_match_uses_default_then_manual_then_first),
      cmocka_unit_test(test_only_the_query_says_a_track_wants_a_token),
      cmocka_unit_test(test_choice_skips_po_token_tracks),
      cmocka_unit_test(test_choice_with_tokens_takes_po_token_tracks_as_any),
      cmocka_unit_test(test_tracks_carry_name_and_translatable_and_the_reply_its_translations),
      cmocka_unit_test(test_names_from_simple_text_runs_and_nothing),
      cmocka_unit_test(test_tracks_json_of_a_reply_without_captions_is_two_empty_lists),
      cmocka_unit_test(test_choice_without_tracks_is_none),
      cmocka_unit_test(test_video_details_are_bounded_and_typed),
      cmocka_unit_test(test_wrapped_reply_is_read_under_its_member),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
