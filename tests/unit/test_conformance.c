/*
 * Conformance with real captures of the platform (read from $VTS_SHARED_FIXTURES, never copied into the project):
 * every player reply parses to the outcome the capture shows, and every other file is refused as a player reply.
 * Skipped, with a message, where the captures are not installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/test_skip.h"
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <yajl/yajl_tree.h>

#include "fetcher/captions/captions.h"
#include "fetcher/platform/player.h"
#include "testdata.h"

struct expect {
  const char *dir;
  const char *file;
  enum playability play;
  size_t ntracks;
  size_t nasr;
  size_t npo;
  int default_track;
  size_t naudio;
  size_t naudio_default;
  int choice_en;        /* player_choose_track(pi, "en") */
  int choice_any;       /* player_choose_track(pi, "") */
  size_t ntranslations; /* translationLanguages */
};

/* Counts observed in the captures themselves. */
static const struct expect players[] = {
    {"newpipe", "audiotracklanguage.player.json", PLAY_OK, 19, 1, 0, 3, 125, 5, 3, 3, 156},
    {"newpipe", "cclicensed.player.json", PLAY_OK, 2, 1, 0, 0, 3, 3, 0, 0, 156},
    {"newpipe", "descriptionunboxing.player.json", PLAY_OK, 1, 1, 0, -1, 65, 5, 0, 0, 156},
    {"newpipe", "licenseddoctor.player.json", PLAY_OK, 13, 1, 0, 1, 60, 5, 1, 1, 156},
    {"newpipe", "streamsegmentsmailab.player.json", PLAY_OK, 1, 0, 0, -1, 10, 10, 0, 0, 156},
    {"newpipe", "streamsegmentstagesschau.player.json", PLAY_OK, 1, 1, 0, -1, 3, 3, 0, 0, 156},
    {"newpipe", "unlisted.player.json", PLAY_OK, 1, 1, 0, -1, 5, 5, 0, 0, 156},
    {"youtube-transcript-api", "youtube.innertube.json.static", PLAY_OK, 9, 1, 0, 2, 10, 10, 2, 2, 18},
    {"youtube-transcript-api", "youtube_altered_user_agent.innertube.json.static", PLAY_OK, 9, 1, 0, 2, 10, 10, 2, 2,
     18},
    /* The manual English track needs a PO token: English falls to the asr track, no language to the first manual. */
    {"youtube-transcript-api", "youtube_po_token_required.innertube.json.static", PLAY_OK, 9, 1, 1, 2, 10, 10, 3, 0,
     18},
    {"youtube-transcript-api", "youtube_ww1_nl_en.innertube.json.static", PLAY_OK, 2, 1, 0, 0, 10, 10, 0, 0, 17},
    {"youtube-transcript-api", "youtube_transcripts_disabled.innertube.json.static", PLAY_OK, 0, 0, 0, -1, 5, 5, -1, -1,
     0},
    {"youtube-transcript-api", "youtube_transcripts_disabled2.innertube.json.static", PLAY_OK, 0, 0, 0, -1, 3, 3, -1,
     -1, 0},
    {"youtube-transcript-api", "youtube_age_restricted.innertube.json.static", PLAY_LOGIN_REQUIRED, 0, 0, 0, -1, 0, 0,
     -1, -1, 0},
    {"youtube-transcript-api", "youtube_request_blocked.innertube.json.static", PLAY_BOT_CHECK, 0, 0, 0, -1, 0, 0, -1,
     -1, 0},
    {"youtube-transcript-api", "youtube_unplayable.innertube.json.static", PLAY_OTHER, 0, 0, 0, -1, 0, 0, -1, -1, 0},
    {"youtube-transcript-api", "youtube_video_unavailable.innertube.json.static", PLAY_UNAVAILABLE, 0, 0, 0, -1, 0, 0,
     -1, -1, 0},
};

/* Pages that are not player replies: both parsers must refuse them. */
static const char *const pages[] = {
    "youtube.html.static",
    "youtube_consent_page.html.static",
    "youtube_consent_page_invalid.html.static",
    "youtube_too_many_requests.html.static",
};

/* The captures' directory; skips the calling test (cmocka's skip() leaves it) when they are not installed. */
static const char *fixtures_dir(void) {
  const char *dir = getenv("VTS_SHARED_FIXTURES");
  struct stat st;
  if (!dir || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    TEST_NOT_HERE("captures", "no conformance with real captures: %s", TEST_CAPTURES_HOWTO);
  }
  return dir;
}

static char *read_fixture(const char *root, const char *dir, const char *file, size_t *len) {
  char path[4096];
  int n = snprintf(path, sizeof(path), "%s/%s/%s", root, dir, file);
  if (n < 0 || (size_t)n >= sizeof(path)) return NULL;
  return testdata_read_path(path, len);
}

/* The host of an https URL ends with .googlevideo.com (compared as a suffix of the host, not of the URL). */
static int on_googlevideo(const char *url) {
  static const char scheme[] = "https://", suffix[] = ".googlevideo.com";
  if (strncmp(url, scheme, sizeof(scheme) - 1) != 0) return 0;
  const char *host = url + sizeof(scheme) - 1;
  size_t hlen = strcspn(host, "/?#:");
  size_t slen = sizeof(suffix) - 1;
  return hlen > slen && memcmp(host + hlen - slen, suffix, slen) == 0;
}

static void check_player(const char *root, const struct expect *e) {
  size_t len;
  char *body = read_fixture(root, e->dir, e->file, &len);
  if (!body) fail_msg("%s/%s is missing from %s", e->dir, e->file, root);
  struct player_info pi;
  int rv = player_parse(body, len, &pi);
  if (rv != 0) fail_msg("%s: parse %d", e->file, rv);
  if (pi.playability != e->play) fail_msg("%s: playability %d, want %d", e->file, pi.playability, e->play);
  size_t nasr = 0, npo = 0, ndefault = 0;
  for (size_t i = 0; i < pi.ntracks; i++) {
    nasr += pi.tracks[i].is_asr != 0;
    npo += pi.tracks[i].po_token != 0;
    if (strncmp(pi.tracks[i].base_url, "https://www.youtube.com/api/timedtext?", 38) != 0)
      fail_msg("%s: track %zu url is not a timedtext url", e->file, i);
  }
  if (pi.ntracks != e->ntracks || nasr != e->nasr || npo != e->npo)
    fail_msg("%s: %zu tracks (%zu asr, %zu PO token), want %zu (%zu, %zu)", e->file, pi.ntracks, nasr, npo, e->ntracks,
             e->nasr, e->npo);
  if (pi.default_track != e->default_track)
    fail_msg("%s: default track %d, want %d", e->file, pi.default_track, e->default_track);
  for (size_t i = 0; i < pi.naudio; i++) {
    const struct audio_format *a = &pi.audio[i];
    if (!on_googlevideo(a->url)) fail_msg("%s: audio %zu is not on googlevideo.com", e->file, i);
    if (strncmp(a->mime, "audio/", 6) != 0) fail_msg("%s: audio %zu mime %s", e->file, i, a->mime);
    if (a->itag != 139 && a->itag != 140 && a->itag != 249 && a->itag != 250 && a->itag != 251)
      fail_msg("%s: audio %zu itag %d", e->file, i, a->itag);
    if (a->content_length <= 0 || a->bitrate <= 0 || a->duration_ms <= 0)
      fail_msg("%s: audio %zu sizes missing", e->file, i);
    ndefault += a->is_default != 0;
  }
  if (pi.naudio != e->naudio || ndefault != e->naudio_default)
    fail_msg("%s: %zu audio formats (%zu default), want %zu (%zu)", e->file, pi.naudio, ndefault, e->naudio,
             e->naudio_default);
  /* Every captured track is translatable and named, and so is every translation language. */
  for (size_t i = 0; i < pi.ntracks; i++) {
    if (!pi.tracks[i].translatable || !pi.tracks[i].name[0])
      fail_msg("%s: track %zu translatable %d name \"%s\"", e->file, i, pi.tracks[i].translatable, pi.tracks[i].name);
  }
  if (pi.ntranslations != e->ntranslations)
    fail_msg("%s: %zu translation languages, want %zu", e->file, pi.ntranslations, e->ntranslations);
  for (size_t i = 0; i < pi.ntranslations; i++) {
    if (!pi.translations[i].lang[0] || !pi.translations[i].name[0])
      fail_msg("%s: translation language %zu is empty", e->file, i);
  }
  int en = player_choose_track(&pi, "en"), any = player_choose_track(&pi, "");
  if (en != e->choice_en || any != e->choice_any)
    fail_msg("%s: choice en=%d any=%d, want %d %d", e->file, en, any, e->choice_en, e->choice_any);
  if (e->play != PLAY_OK && !pi.reason[0]) fail_msg("%s: no reason kept for the logs", e->file);
  player_info_free(&pi);
  free(body);
}

static void test_player_replies_parse_to_their_outcomes(void **state) {
  (void)state;
  const char *root = fixtures_dir();
  for (size_t i = 0; i < sizeof(players) / sizeof(players[0]); i++) check_player(root, &players[i]);
}

static void test_pages_are_not_player_replies_nor_captions(void **state) {
  (void)state;
  const char *root = fixtures_dir();
  for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
    size_t len;
    char *body = read_fixture(root, "youtube-transcript-api", pages[i], &len);
    if (!body) fail_msg("%s is missing", pages[i]);
    struct player_info pi;
    struct segment_list sl;
    int rv = player_parse(body, len, &pi);
    if (rv != -EPROTO) fail_msg("%s: player_parse %d, want -EPROTO", pages[i], rv);
    rv = captions_parse(body, len, &sl);
    if (rv != -EPROTO) fail_msg("%s: captions_parse %d, want -EPROTO", pages[i], rv);
    player_info_free(&pi);
    free(body);
  }
}

static void test_srv1_capture_parses(void **state) {
  (void)state;
  const char *root = fixtures_dir();
  size_t len;
  char *body = read_fixture(root, "youtube-transcript-api", "transcript.xml.static", &len);
  assert_non_null(body);
  struct segment_list sl;
  assert_int_equal(captions_parse(body, len, &sl), 0);
  /* The escaped <i> tag is stripped and the empty line dropped. */
  assert_int_equal(sl.len, 3);
  assert_string_equal(sl.items[0].text, "Hey, this is just a test");
  assert_float_equal(sl.items[0].start, 0, 1e-9);
  assert_float_equal(sl.items[0].duration, 1.54, 1e-9);
  assert_string_equal(sl.items[1].text, "this is not the original transcript");
  assert_float_equal(sl.items[1].start, 1.54, 1e-9);
  assert_float_equal(sl.items[1].duration, 4.16, 1e-9);
  assert_string_equal(sl.items[2].text, "just something shorter, I made up for testing");
  assert_float_equal(sl.items[2].start, 5.7, 1e-9);
  assert_float_equal(sl.items[2].duration, 3.239, 1e-9);
  segment_list_free(&sl);
  free(body);
}

/* Whether a file of the captures has an expectation above. */
static int known(const char *dir, const char *file) {
  for (size_t i = 0; i < sizeof(players) / sizeof(players[0]); i++) {
    if (!strcmp(players[i].dir, dir) && !strcmp(players[i].file, file)) return 1;
  }
  for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
    if (!strcmp(dir, "youtube-transcript-api") && !strcmp(pages[i], file)) return 1;
  }
  return !strcmp(dir, "youtube-transcript-api") && !strcmp(file, "transcript.xml.static");
}

/*
 * Folders of recorded exchanges (browse pages with continuations, the reel call, /next): each file is one request
 * and the platform's reply, {"request":{"httpMethod","url",...},"response":{"responseCode","responseBody",...}}, as
 * the captures' README describes. The fake platform serves them; here every file must have that shape.
 */
static const char *const recorded[] = {"channel", "next", "playlist", "reel"};

static int is_recorded(const char *dir, const char *name) {
  if (strcmp(dir, "newpipe") != 0) return 0;
  for (size_t i = 0; i < sizeof(recorded) / sizeof(recorded[0]); i++) {
    if (!strcmp(recorded[i], name)) return 1;
  }
  return 0;
}

static void check_exchange(const char *path) {
  size_t len;
  char *text = testdata_read_path(path, &len);
  if (!text) fail_msg("%s is not readable", path);
  char err[256];
  yajl_val root = yajl_tree_parse(text, err, sizeof(err));
  free(text);
  if (!root) fail_msg("%s: not JSON: %s", path, err);
  const char *url_path[] = {"request", "url", NULL};
  const char *method_path[] = {"request", "httpMethod", NULL};
  const char *code_path[] = {"response", "responseCode", NULL};
  const char *body_path[] = {"response", "responseBody", NULL};
  int ok = YAJL_IS_STRING(yajl_tree_get(root, url_path, yajl_t_any)) &&
           YAJL_IS_STRING(yajl_tree_get(root, method_path, yajl_t_any)) &&
           YAJL_IS_INTEGER(yajl_tree_get(root, code_path, yajl_t_any)) &&
           YAJL_IS_STRING(yajl_tree_get(root, body_path, yajl_t_any));
  yajl_tree_free(root);
  if (!ok) fail_msg("%s is not a recorded exchange (request.url, request.httpMethod, response.*)", path);
}

/* Checks every file under path (folders of dates) as a recorded exchange; returns how many there were. */
static size_t check_exchanges(const char *path) {
  DIR *dh = opendir(path);
  if (!dh) fail_msg("%s is not readable", path);
  size_t n = 0;
  for (struct dirent *ent = readdir(dh); ent; ent = readdir(dh)) {
    if (ent->d_name[0] == '.') continue;
    char sub[4096];
    snprintf(sub, sizeof(sub), "%s/%s", path, ent->d_name);
    struct stat st;
    if (stat(sub, &st) != 0) fail_msg("%s: stat failed", sub);
    if (S_ISDIR(st.st_mode)) {
      n += check_exchanges(sub);
    } else {
      check_exchange(sub);
      n++;
    }
  }
  closedir(dh);
  return n;
}

/*
 * Every file of the captures has an expectation here: a capture added later fails this test until someone decides
 * what it should parse to.
 */
static void test_every_capture_has_an_expectation(void **state) {
  (void)state;
  const char *root = fixtures_dir();
  static const char *const dirs[] = {"newpipe", "youtube-transcript-api"};
  size_t seen = 0;
  for (size_t d = 0; d < 2; d++) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", root, dirs[d]);
    DIR *dh = opendir(path);
    if (!dh) fail_msg("%s is not readable", path);
    struct dirent *ent;
    for (ent = readdir(dh); ent; ent = readdir(dh)) {
      if (ent->d_name[0] == '.' || !strcmp(ent->d_name, "README.md")) continue;
      if (is_recorded(dirs[d], ent->d_name)) {
        char sub[4096 + 256];
        snprintf(sub, sizeof(sub), "%s/%s", path, ent->d_name);
        if (check_exchanges(sub) == 0) fail_msg("%s holds no recorded exchange", sub);
        continue;
      }
      if (!known(dirs[d], ent->d_name))
        fail_msg("%s/%s has no expectation in test_conformance.c", dirs[d], ent->d_name);
      seen++;
    }
    closedir(dh);
  }
  assert_int_equal(seen, sizeof(players) / sizeof(players[0]) + sizeof(pages) / sizeof(pages[0]) + 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_player_replies_parse_to_their_outcomes),
      cmocka_unit_test(test_pages_are_not_player_replies_nor_captions),
      cmocka_unit_test(test_srv1_capture_parses),
      cmocka_unit_test(test_every_capture_has_an_expectation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
