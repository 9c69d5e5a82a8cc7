/* Unit tests of the dispatcher's check of a fetcher's result body: the transcript's or the track list's shape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <stdlib.h>

#include "common/limits.h"
#include "fetcher/captions/segments.h"
#include "fetcher/captions/transcript.h"
#include "fetcher/platform/player.h"
#include "gateway/cache/bodycheck.h"
#include "testdata.h"
#include "gateway/http/render.h"
#include "proto/proto.h"

static int check(const char *body, const char **why) { return bodycheck_transcript(body, strlen(body), why); }

static void expect_refused(const char *body, const char *want_why) {
  const char *why = NULL;
  int rv = check(body, &why);
  if (rv != -EINVAL || strcmp(why, want_why) != 0)
    fail_msg("expected -EINVAL (%s) for %s, got %d (%s)", want_why, body, rv, why ? why : "(null)");
}

/* Each of the n bodies is refused by chk: -EINVAL, with want_why as the reason. */
static void expect_all_refused(int (*chk)(const char *, size_t, const char **), const char *const *bodies, size_t n,
                               const char *want_why) {
  for (size_t i = 0; i < n; i++) {
    const char *why = NULL;
    int rv = chk(bodies[i], strlen(bodies[i]), &why);
    if (rv != -EINVAL || why == NULL || strcmp(why, want_why) != 0)
      fail_msg("body %zu: expected -EINVAL (%s), got %d (%s)", i, want_why, rv, why ? why : "(null)");
  }
}

static void test_what_the_fetcher_serialises_passes(void **state) {
  (void)state;
  struct segment_list sl;
  memset(&sl, 0, sizeof(sl));
  static const char first[] = "Hello \"world\" \xc3\xa9";
  assert_int_equal(segment_list_append(&sl, first, strlen(first), 0.0, 1.25), 0);
  assert_int_equal(segment_list_append(&sl, "second", 6, 1.25, 2.0), 0);
  struct buf out = BUF_INIT;
  assert_int_equal(transcript_serialize(&sl, "pt-BR", "captions", &out), 0);
  const char *why = NULL;
  assert_int_equal(bodycheck_transcript(out.data, out.len, &why), 0);
  assert_string_equal(why, "");
  buf_reset(&out);
  assert_int_equal(transcript_serialize(&sl, "en", "speech", &out), 0);
  assert_int_equal(bodycheck_transcript(out.data, out.len, NULL), 0);
  buf_free(&out);
  segment_list_free(&sl);
}

static void test_keys_in_any_order_and_no_segments_pass(void **state) {
  (void)state;
  assert_int_equal(check("{\"segments\":[],\"text\":\"\",\"source\":\"speech\",\"language\":\"en\"}", NULL), 0);
  assert_int_equal(check(" {\"language\":\"en\",\"segments\":[{\"duration\":2,\"start\":1.5,\"text\":\"a\"}],"
                         "\"text\":\"a\",\"source\":\"captions\"} ",
                         NULL),
                   0);
}

static void test_other_shapes_are_refused(void **state) {
  (void)state;
  static const char *const bad[] = {
      /* the shape a misbehaving fetcher might send */
      "{\"videoId\":\"test\",\"text\":\"hello\"}",
      "[]",
      "\"text\"",
      "{}",
      /* a key missing, extra, repeated */
      "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"a\"}",
      "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"a\",\"segments\":[],\"cached\":true}",
      "{\"language\":\"en\",\"language\":\"en\",\"source\":\"captions\",\"text\":\"a\",\"segments\":[]}",
      /* wrong types and values */
      "{\"language\":1,\"source\":\"captions\",\"text\":\"a\",\"segments\":[]}",
      "{\"language\":\"en\",\"source\":\"upstream\",\"text\":\"a\",\"segments\":[]}",
      "{\"language\":\"en\",\"source\":\"captions\",\"text\":null,\"segments\":[]}",
      "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"a\",\"segments\":{}}",
      "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"a\",\"segments\":[\"a\"]}",
      "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"a\",\"segments\":[[]]}",
      /* segments: a key missing, extra, repeated, a number as a string */
      "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"a\",\"segments\":[{\"text\":\"a\",\"start\":0}]}",
      "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"a\",\"segments\":[{\"text\":\"a\",\"start\":0,"
      "\"duration\":1,\"url\":\"x\"}]}",
      "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"a\",\"segments\":[{\"text\":\"a\",\"start\":0,"
      "\"start\":0,\"duration\":1}]}",
      "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"a\",\"segments\":[{\"text\":\"a\",\"start\":\"0\","
      "\"duration\":1}]}",
      "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"a\",\"segments\":[{\"text\":true,\"start\":0,"
      "\"duration\":1}]}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) expect_refused(bad[i], "not_a_transcript");
}

static void test_what_is_not_json_is_refused(void **state) {
  (void)state;
  static const char *const bad[] = {
      "",
      "<html>",
      "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"a\",\"segments\":[]",
      "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"a\",\"segments\":[]} {}",
      "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"\xff\",\"segments\":[]}",
      "{\"language\":\"en\",/* */\"source\":\"captions\",\"text\":\"a\",\"segments\":[]}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    const char *why = NULL;
    int rv = check(bad[i], &why);
    if (rv != -EINVAL || (strcmp(why, "not_json") != 0 && strcmp(why, "not_a_transcript") != 0))
      fail_msg("expected a refusal of %s, got %d (%s)", bad[i], rv, why ? why : "(null)");
  }
  const char *why = NULL;
  assert_int_equal(check("<html>", &why), -EINVAL);
  assert_string_equal(why, "not_json");
}

static void test_a_body_over_the_size_limit_is_refused_unread(void **state) {
  (void)state;
  static const char body[] = "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"a\",\"segments\":[]}";
  const char *why = NULL;
  /* The length alone decides: the bytes past the short body are never read. */
  assert_int_equal(bodycheck_transcript(body, (size_t)VTS_MAX_TRANSCRIPT_BYTES + 1, &why), -E2BIG);
  assert_string_equal(why, "too_large");
  assert_int_equal(bodycheck_transcript(body, sizeof(body) - 1, &why), 0);
}

static void tracks_expect(const char *body, int want, const char *want_why) {
  const char *why = NULL;
  int rv = bodycheck_tracks(body, strlen(body), &why);
  if (rv != want || strcmp(why, want_why) != 0)
    fail_msg("expected %d (%s) for %s, got %d (%s)", want, want_why, body, rv, why ? why : "(null)");
}

static void test_a_track_list_passes_and_other_shapes_are_refused(void **state) {
  (void)state;
  tracks_expect(
      "{\"tracks\":[{\"language\":\"en\",\"name\":\"English\",\"kind\":\"manual\",\"translatable\":true},"
      "{\"translatable\":false,\"kind\":\"asr\",\"name\":\"English (auto-generated)\",\"language\":\"en\"}],"
      "\"translationLanguages\":[{\"language\":\"fr\",\"name\":\"French\"}]}",
      0, "");
  tracks_expect("{\"translationLanguages\":[],\"tracks\":[]}", 0, "");
  static const char *const bad[] = {
      /* a transcript is not a track list, nor the other way round */
      "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"a\",\"segments\":[]}",
      "{\"tracks\":[]}",
      "{\"tracks\":[],\"translationLanguages\":[],\"videoId\":\"x\"}",
      "{\"tracks\":[{\"language\":\"en\",\"name\":\"English\",\"kind\":\"forced\",\"translatable\":true}],"
      "\"translationLanguages\":[]}",
      "{\"tracks\":[{\"language\":\"en\",\"name\":\"English\",\"kind\":\"asr\",\"translatable\":\"yes\"}],"
      "\"translationLanguages\":[]}",
      "{\"tracks\":[{\"language\":\"en\",\"name\":\"English\",\"kind\":\"asr\"}],\"translationLanguages\":[]}",
      "{\"tracks\":[],\"translationLanguages\":[{\"language\":\"fr\",\"name\":\"French\",\"kind\":\"asr\"}]}",
      "{\"tracks\":[[]],\"translationLanguages\":[]}",
      "{\"tracks\":[{\"tracks\":[]}],\"translationLanguages\":[]}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) tracks_expect(bad[i], -EINVAL, "not_a_track_list");
  tracks_expect("{\"tracks\":", -EINVAL, "not_json");
  /* and a track list is no transcript */
  expect_refused("{\"translationLanguages\":[],\"tracks\":[]}", "not_a_transcript");
}

/* What a fetcher writes of a player reply passes; other shapes, and a summary that is not playable, do not. */
static void test_a_player_summary_passes_and_other_shapes_are_refused(void **state) {
  (void)state;
  size_t len = 0;
  char *reply = testdata_read("player_ok_tracks.json", &len);
  assert_non_null(reply);
  struct player_info pi;
  assert_int_equal(player_parse(reply, len, &pi), 0);
  assert_true(pi.ntracks > 0 && pi.default_track >= 0);
  struct buf out = BUF_INIT;
  assert_int_equal(player_summary_json(&pi, "vtsTestVid1", &out), 0);
  const char *why = NULL;
  assert_int_equal(bodycheck_player(out.data, out.len, &why), 0);
  assert_string_equal(why, "");
  /* A reply without captions and without a default track is a summary too. */
  struct player_info none;
  memset(&none, 0, sizeof(none));
  none.default_track = -1;
  buf_reset(&out);
  assert_int_equal(player_summary_json(&none, "vtsTestVid1", &out), 0);
  assert_int_equal(bodycheck_player(out.data, out.len, NULL), 0);
  static const char *const refused[] = {
      "{}",
      "{\"playabilityStatus\":{\"status\":\"ERROR\"},\"videoDetails\":{\"videoId\":\"a\"},\"captions\":{"
      "\"playerCaptionsTracklistRenderer\":{\"captionTracks\":[],\"audioTracks\":[],\"defaultAudioTrackIndex\":0,"
      "\"translationLanguages\":[]}}}",
      "{\"playabilityStatus\":{\"status\":\"OK\"},\"videoDetails\":{\"videoId\":\"a\"},\"captions\":{"
      "\"playerCaptionsTracklistRenderer\":{\"captionTracks\":[{\"baseUrl\":1}],\"audioTracks\":[],"
      "\"defaultAudioTrackIndex\":0,\"translationLanguages\":[]}}}",
      "{\"playabilityStatus\":{\"status\":\"OK\"},\"videoDetails\":{\"videoId\":\"a\",\"rating\":\"x\"},"
      "\"captions\":{\"playerCaptionsTracklistRenderer\":{\"captionTracks\":[],\"audioTracks\":[],"
      "\"defaultAudioTrackIndex\":0,\"translationLanguages\":[]}}}",
      "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"\",\"segments\":[]}",
      /* a detail of the wrong type: a title number, a keyword object, a thumbnail without its height, a null */
      "{\"playabilityStatus\":{\"status\":\"OK\"},\"videoDetails\":{\"videoId\":\"a\",\"title\":1},\"captions\":{"
      "\"playerCaptionsTracklistRenderer\":{\"captionTracks\":[],\"audioTracks\":[],\"defaultAudioTrackIndex\":0,"
      "\"translationLanguages\":[]}}}",
      "{\"playabilityStatus\":{\"status\":\"OK\"},\"videoDetails\":{\"videoId\":\"a\",\"keywords\":[{}]},\"captions\":{"
      "\"playerCaptionsTracklistRenderer\":{\"captionTracks\":[],\"audioTracks\":[],\"defaultAudioTrackIndex\":0,"
      "\"translationLanguages\":[]}}}",
      "{\"playabilityStatus\":{\"status\":\"OK\"},\"videoDetails\":{\"videoId\":\"a\",\"thumbnail\":{\"thumbnails\":"
      "[{\"url\":\"u\",\"width\":1}]}},\"captions\":{\"playerCaptionsTracklistRenderer\":{\"captionTracks\":[],"
      "\"audioTracks\":[],\"defaultAudioTrackIndex\":0,\"translationLanguages\":[]}}}",
      "{\"playabilityStatus\":{\"status\":\"OK\"},\"videoDetails\":{\"videoId\":\"a\",\"title\":null},\"captions\":{"
      "\"playerCaptionsTracklistRenderer\":{\"captionTracks\":[],\"audioTracks\":[],\"defaultAudioTrackIndex\":0,"
      "\"translationLanguages\":[]}}}",
      /* an index is a whole number */
      "{\"playabilityStatus\":{\"status\":\"OK\"},\"videoDetails\":{\"videoId\":\"a\"},\"captions\":{"
      "\"playerCaptionsTracklistRenderer\":{\"captionTracks\":[],\"audioTracks\":[],\"defaultAudioTrackIndex\":0.5,"
      "\"translationLanguages\":[]}}}",
  };
  expect_all_refused(bodycheck_player, refused, sizeof(refused) / sizeof(refused[0]), "not_a_player_summary");
  /* The transcript check refuses a summary. */
  assert_int_equal(bodycheck_transcript(out.data, out.len, NULL), -EINVAL);
  buf_free(&out);
  player_info_free(&pi);
  free(reply);
}

/*
 * A body served as JSON can always be rendered as SubRip or WebVTT: a time the renderers refuse (an exponent, a sign,
 * past BODYCHECK_MAX_SECONDS) makes the check refuse the body, and a time they read passes it.
 */
static void test_a_time_the_renderers_refuse_is_refused(void **state) {
  (void)state;
  static const struct {
    const char *start;
    int ok;
  } times[] = {{"0", 1},     {"1.5", 1}, {"2.6755", 1}, {"1000000000", 1}, {"1e2", 0},  {"1E2", 0},
               {"1.0e1", 0}, {"-1", 0},  {"-0.5", 0},   {"1000000001", 0}, {"1e-3", 0}, {"12345678901234567890", 0}};
  for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++) {
    char body[256];
    snprintf(body, sizeof(body),
             "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"a\",\"segments\":"
             "[{\"text\":\"a\",\"start\":%s,\"duration\":1}]}",
             times[i].start);
    const char *why = NULL;
    int checked = bodycheck_transcript(body, strlen(body), &why);
    struct buf out = BUF_INIT;
    int rendered = render_transcript(RENDER_SRT, body, strlen(body), &out);
    buf_free(&out);
    if ((checked == 0) != times[i].ok || (rendered == 0) != times[i].ok)
      fail_msg("start %s: check %d (%s), render %d, expected both to %s", times[i].start, checked, why, rendered,
               times[i].ok ? "pass" : "refuse");
    if (!times[i].ok) assert_string_equal(why, "not_a_transcript");
  }
}

/* One function answers for both kinds of job, whoever produced the body. */
static void test_the_result_check_follows_the_kind_of_job(void **state) {
  (void)state;
  static const char transcript[] = "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"\",\"segments\":[]}";
  static const char tracks[] = "{\"tracks\":[],\"translationLanguages\":[]}";
  const char *why = NULL;
  assert_int_equal(bodycheck_result(PROTO_KIND_CAPTIONS, transcript, strlen(transcript), &why), 0);
  assert_int_equal(bodycheck_result(PROTO_KIND_SPEECH, transcript, strlen(transcript), &why), 0);
  assert_int_equal(bodycheck_result(PROTO_KIND_TRACKS, tracks, strlen(tracks), &why), 0);
  assert_int_equal(bodycheck_result(PROTO_KIND_TRACKS, transcript, strlen(transcript), &why), -EINVAL);
  assert_string_equal(why, "not_a_track_list");
  assert_int_equal(bodycheck_result(PROTO_KIND_CAPTIONS, tracks, strlen(tracks), &why), -EINVAL);
  assert_string_equal(why, "not_a_transcript");
  static const char metadata[] =
      "{\"videoId\":\"a\",\"title\":null,\"channelId\":null,\"channelName\":null,\"lengthSeconds\":null,"
      "\"isLive\":false,\"isLiveContent\":false,\"viewCount\":null,\"publishDate\":null,\"description\":null,"
      "\"keywords\":[],\"thumbnails\":[],\"captionLanguages\":[]}";
  assert_int_equal(bodycheck_result(PROTO_KIND_METADATA, metadata, strlen(metadata), &why), 0);
  assert_int_equal(bodycheck_result(PROTO_KIND_METADATA, tracks, strlen(tracks), &why), -EINVAL);
  assert_string_equal(why, "not_metadata");
  assert_int_equal(bodycheck_result(PROTO_KIND_TRACKS, metadata, strlen(metadata), &why), -EINVAL);
  /* With the chapters a job included: objects of exactly a title and two whole seconds. */
  static const char with_chapters[] =
      "{\"videoId\":\"a\",\"title\":null,\"channelId\":null,\"channelName\":null,\"lengthSeconds\":9,"
      "\"isLive\":false,\"isLiveContent\":false,\"viewCount\":null,\"publishDate\":null,\"description\":null,"
      "\"keywords\":[],\"thumbnails\":[],\"captionLanguages\":[],\"chapters\":[{\"title\":\"A\",\"start\":0,"
      "\"end\":9}]}";
  assert_int_equal(bodycheck_result(PROTO_KIND_METADATA, with_chapters, strlen(with_chapters), &why), 0);
  static const char bad_chapter[] =
      "{\"videoId\":\"a\",\"title\":null,\"channelId\":null,\"channelName\":null,\"lengthSeconds\":9,"
      "\"isLive\":false,\"isLiveContent\":false,\"viewCount\":null,\"publishDate\":null,\"description\":null,"
      "\"keywords\":[],\"thumbnails\":[],\"captionLanguages\":[],\"chapters\":[{\"title\":\"A\",\"start\":0.5,"
      "\"end\":9}]}";
  assert_int_equal(bodycheck_result(PROTO_KIND_METADATA, bad_chapter, strlen(bad_chapter), &why), -EINVAL);
}

/* The metadata written from a real reply passes; every member is needed, of its type, null only where allowed. */
static void test_metadata_passes_and_other_shapes_are_refused(void **state) {
  (void)state;
  size_t len = 0;
  char *reply = testdata_read("player_ok_tracks.json", &len);
  assert_non_null(reply);
  struct player_info pi;
  assert_int_equal(player_parse(reply, len, &pi), 0);
  struct buf out = BUF_INIT;
  assert_int_equal(player_metadata_json(&pi, "vtsTestVid1", &out), 0);
  const char *why = NULL;
  if (bodycheck_metadata(out.data, out.len, &why) != 0) fail_msg("metadata refused (%s): %s", why, out.data);
  /* The summary of the same reply carries the details, and reads back into the same metadata. */
  struct buf summary = BUF_INIT;
  assert_int_equal(player_summary_json(&pi, "vtsTestVid1", &summary), 0);
  assert_int_equal(bodycheck_player(summary.data, summary.len, NULL), 0);
  struct player_info back;
  assert_int_equal(player_parse(summary.data, summary.len, &back), 0);
  struct buf again = BUF_INIT;
  assert_int_equal(player_metadata_json(&back, "vtsTestVid1", &again), 0);
  assert_string_equal(again.data, out.data);
  player_info_free(&back);
  player_info_free(&pi);
  buf_free(&again);
  buf_free(&summary);
  buf_free(&out);
  free(reply);
  static const char *const refused[] = {
      "{}",
      /* videoId null; a member missing (captionLanguages); a count as a string; a keyword number; an extra member */
      "{\"videoId\":null,\"title\":null,\"channelId\":null,\"channelName\":null,\"lengthSeconds\":null,\"isLive\":"
      "false,"
      "\"isLiveContent\":false,\"viewCount\":null,\"publishDate\":null,\"description\":null,\"keywords\":[],"
      "\"thumbnails\":[],\"captionLanguages\":[]}",
      "{\"videoId\":\"a\",\"title\":null,\"channelId\":null,\"channelName\":null,\"lengthSeconds\":null,\"isLive\":"
      "false,"
      "\"isLiveContent\":false,\"viewCount\":null,\"publishDate\":null,\"description\":null,\"keywords\":[],"
      "\"thumbnails\":[]}",
      "{\"videoId\":\"a\",\"title\":null,\"channelId\":null,\"channelName\":null,\"lengthSeconds\":\"1\",\"isLive\":"
      "false,"
      "\"isLiveContent\":false,\"viewCount\":null,\"publishDate\":null,\"description\":null,\"keywords\":[],"
      "\"thumbnails\":[],\"captionLanguages\":[]}",
      "{\"videoId\":\"a\",\"title\":null,\"channelId\":null,\"channelName\":null,\"lengthSeconds\":1,\"isLive\":false,"
      "\"isLiveContent\":false,\"viewCount\":null,\"publishDate\":null,\"description\":null,\"keywords\":[1],"
      "\"thumbnails\":[],\"captionLanguages\":[]}",
      "{\"videoId\":\"a\",\"title\":null,\"channelId\":null,\"channelName\":null,\"lengthSeconds\":1,\"isLive\":false,"
      "\"isLiveContent\":false,\"viewCount\":-1,\"publishDate\":null,\"description\":null,\"keywords\":[],"
      "\"thumbnails\":[],\"captionLanguages\":[]}",
      "{\"videoId\":\"a\",\"title\":null,\"channelId\":null,\"channelName\":null,\"lengthSeconds\":1,\"isLive\":null,"
      "\"isLiveContent\":false,\"viewCount\":2,\"publishDate\":null,\"description\":null,\"keywords\":[],"
      "\"thumbnails\":[],\"captionLanguages\":[]}",
      "{\"videoId\":\"a\",\"title\":null,\"channelId\":null,\"channelName\":null,\"lengthSeconds\":1,\"isLive\":false,"
      "\"isLiveContent\":false,\"viewCount\":2,\"publishDate\":null,\"description\":null,\"keywords\":[],"
      "\"thumbnails\":[],\"captionLanguages\":[],\"rating\":5}",
  };
  expect_all_refused(bodycheck_metadata, refused, sizeof(refused) / sizeof(refused[0]), "not_metadata");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_what_the_fetcher_serialises_passes),
      cmocka_unit_test(test_keys_in_any_order_and_no_segments_pass),
      cmocka_unit_test(test_other_shapes_are_refused),
      cmocka_unit_test(test_what_is_not_json_is_refused),
      cmocka_unit_test(test_a_body_over_the_size_limit_is_refused_unread),
      cmocka_unit_test(test_a_track_list_passes_and_other_shapes_are_refused),
      cmocka_unit_test(test_a_player_summary_passes_and_other_shapes_are_refused),
      cmocka_unit_test(test_a_time_the_renderers_refuse_is_refused),
      cmocka_unit_test(test_the_result_check_follows_the_kind_of_job),
      cmocka_unit_test(test_metadata_passes_and_other_shapes_are_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
