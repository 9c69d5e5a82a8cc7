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

#include "common/buf.h"
#include "fetcher/captions/captions.h"
#include "fetcher/platform/client.h"
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
    size_t len = 0;
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

/*
 * The platform's pushback in the shape of its replies: a real capture with only the field in question changed, every
 * occurrence of from replaced by to (at least one: a capture that no longer holds from fails the test). Returns a new
 * exact-size copy (freed by the caller) and its length in *len.
 */
static char *with_changed(const char *text, size_t *len, const char *from, const char *to) {
  size_t flen = strlen(from), tlen = strlen(to), n = 0;
  for (const char *p = strstr(text, from); p; p = strstr(p + flen, from)) n++;
  if (n == 0) fail_msg("the capture no longer holds \"%s\"", from);
  size_t out_len = *len - n * flen + n * tlen;
  char *out = malloc(out_len + 1);
  assert_non_null(out);
  size_t w = 0;
  const char *r = text;
  for (const char *p = strstr(r, from); p; p = strstr(r, from)) {
    memcpy(out + w, r, (size_t)(p - r));
    w += (size_t)(p - r);
    memcpy(out + w, to, tlen);
    w += tlen;
    r = p + flen;
  }
  memcpy(out + w, r, *len - (size_t)(r - text));
  w += *len - (size_t)(r - text);
  assert_int_equal(w, out_len);
  out[out_len] = '\0';
  *len = out_len;
  return out;
}

/* Parses a changed capture and checks its playability. */
static void check_changed(const char *name, const char *text, size_t len, const char *from, const char *to,
                          enum playability want) {
  size_t n = len;
  char *changed = with_changed(text, &n, from, to);
  struct player_info pi;
  if (player_parse(changed, n, &pi) != 0) fail_msg("%s with \"%s\": not parsed", name, to);
  if (pi.playability != want) fail_msg("%s with \"%s\": playability %d, want %d", name, to, pi.playability, want);
  player_info_free(&pi);
  free(changed);
}

/* A string member of a capture, by path; the capture's own value, so that no id of it is written here. */
static char *capture_string(const char *text, const char *const *path) {
  char err[256];
  yajl_val root = yajl_tree_parse(text, err, sizeof(err));
  if (!root) fail_msg("capture not JSON: %s", err);
  yajl_val v = yajl_tree_get(root, (const char **)path, yajl_t_string);
  const char *str = v ? YAJL_GET_STRING(v) : NULL;
  char *out = str ? strdup(str) : NULL;
  yajl_tree_free(root);
  if (!out) fail_msg("capture without %s", path[0]);
  return out;
}

/* The reply body of the recorded exchange of the reel folder whose file name ends with suffix. */
static char *reel_reply(const char *root, const char *suffix);

/* The VISIONOS refusal of the reel folder (a recorded exchange): its reply body. */
static char *reel_unplayable_reply(const char *root) { return reel_reply(root, "-player-unplayable.visionos.json"); }

static char *reel_reply(const char *root, const char *suffix) {
  char dir[4096];
  snprintf(dir, sizeof(dir), "%s/newpipe/reel", root);
  DIR *dates = opendir(dir);
  if (!dates) fail_msg("%s is not readable", dir);
  char *body = NULL;
  size_t suffix_len = strlen(suffix);
  for (struct dirent *d = readdir(dates); d && !body; d = readdir(dates)) {
    if (d->d_name[0] == '.') continue;
    char sub[4096 + 256];
    snprintf(sub, sizeof(sub), "%s/%s", dir, d->d_name);
    DIR *files = opendir(sub);
    if (!files) continue;
    for (struct dirent *f = readdir(files); f && !body; f = readdir(files)) {
      size_t n = strlen(f->d_name);
      if (n < suffix_len || strcmp(f->d_name + n - suffix_len, suffix) != 0) continue;
      char path[4096 + 512];
      snprintf(path, sizeof(path), "%s/%s", sub, f->d_name);
      size_t len;
      char *text = testdata_read_path(path, &len);
      if (!text) fail_msg("%s is not readable", path);
      static const char *const body_path[] = {"response", "responseBody", NULL};
      body = capture_string(text, body_path);
      free(text);
    }
    closedir(files);
  }
  closedir(dates);
  if (!body) fail_msg("no *%s under %s", suffix, dir);
  return body;
}

/*
 * The reel call's recorded replies read as the ANDROID_REEL profile reads them (the player reply under
 * playerResponse): tracks without a PO token and no downloadable audio; an unknown id's "{}" is no reply; and the
 * visitor call's recorded reply gives its visitor data whole.
 */
static void test_reel_replies_and_the_visitor_reply_read_as_the_reel_profile_reads_them(void **state) {
  (void)state;
  const char *root = fixtures_dir();
  static const struct {
    const char *suffix;
    int rv;
    enum playability play;
    size_t ntracks, nasr;
  } reels[] = {
      {"-reel_item_watch.android.json", 0, PLAY_OK, 2, 1},
      {"-reel_item_watch-ok.android.json", 0, PLAY_OK, 1, 1},
      {"-private.reel.json", 0, PLAY_LOGIN_REQUIRED, 0, 0},
      {"don-t-exist-empty.reel.json", -ENOENT, PLAY_OK, 0, 0},
  };
  for (size_t i = 0; i < sizeof(reels) / sizeof(reels[0]); i++) {
    char *reel = reel_reply(root, reels[i].suffix);
    struct player_info pi;
    int rv = player_parse_wrapped(reel, strlen(reel), "playerResponse", &pi);
    if (rv != reels[i].rv) fail_msg("%s: parse %d, want %d", reels[i].suffix, rv, reels[i].rv);
    if (rv == 0) {
      size_t nasr = 0, npo = 0;
      for (size_t t = 0; t < pi.ntracks; t++) {
        nasr += pi.tracks[t].is_asr != 0;
        npo += pi.tracks[t].po_token != 0;
      }
      if (pi.playability != reels[i].play || pi.ntracks != reels[i].ntracks || nasr != reels[i].nasr || npo != 0 ||
          pi.naudio != 0)
        fail_msg("%s: playability %d, %zu tracks (%zu asr, %zu PO token), %zu audio", reels[i].suffix, pi.playability,
                 pi.ntracks, nasr, npo, pi.naudio);
    }
    player_info_free(&pi);
    free(reel);
  }
  char *visitor_reply = reel_reply(root, "-visitor_id.android.json");
  char visitor[CLIENT_VISITOR_DATA_MAX];
  assert_int_equal(client_visitor_reply(visitor_reply, strlen(visitor_reply), visitor), 0);
  /* Longer than 512 bytes, its base64 padding percent-encoded: kept whole, as the reel request must send it. */
  assert_true(strlen(visitor) > 512);
  assert_string_equal(visitor + strlen(visitor) - 6, "%3D%3D");
  free(visitor_reply);
}

/* The platform's ration of an address ("try again later", "reload"): its own playability, not an absent video. */
static void test_rationing_reasons_are_a_ration_not_an_absence(void **state) {
  (void)state;
  const char *root = fixtures_dir();
  const char *file = "youtube_video_unavailable.innertube.json.static";
  size_t len;
  char *text = read_fixture(root, "youtube-transcript-api", file, &len);
  if (!text) fail_msg("%s is missing", file);
  /* Its reason and its error screen's both say "This video is unavailable"; each wording of the ration replaces them.
   */
  const char *from = "This video is unavailable";
  check_changed(file, text, len, from, "This content isn\xe2\x80\x99t available, try again later.", PLAY_RATIONED);
  check_changed(file, text, len, from, "This content isn't available, try again later.", PLAY_RATIONED);
  check_changed(file, text, len, from, "THIS CONTENT ISN'T AVAILABLE, TRY AGAIN LATER", PLAY_RATIONED);
  check_changed(file, text, len, from, "The page needs to be reloaded.", PLAY_RATIONED);
  /* Near misses stay what the status says. */
  check_changed(file, text, len, from, "This content isn't available.", PLAY_UNAVAILABLE);
  check_changed(file, text, len, from, "The page needs to be", PLAY_UNAVAILABLE);
  /* Only the error screen's run saying it is enough (the top-level reason absent). */
  size_t n = len;
  char *no_top = with_changed(text, &n, "\"reason\": \"This video is unavailable\",", "");
  check_changed(file, no_top, n, from, "The page needs to be reloaded.", PLAY_RATIONED);
  free(no_top);
  /* The status "UNPLAYABLE" the platform also sends with it. */
  n = len;
  char *unplayable = with_changed(text, &n, "\"status\": \"ERROR\"", "\"status\": \"UNPLAYABLE\"");
  check_changed(file, unplayable, n, from, "The page needs to be reloaded.", PLAY_RATIONED);
  check_changed(file, unplayable, n, from, "Video unavailable", PLAY_UNPLAYABLE);
  free(unplayable);
  free(text);
}

/* A client version the platform retired: its own playability, whatever video was asked. */
static void test_retired_client_reasons_are_client_outdated(void **state) {
  (void)state;
  const char *root = fixtures_dir();
  char *text = reel_unplayable_reply(root);
  size_t len = strlen(text);
  const char *name = "reel VISIONOS refusal";
  const char *from = "This video is not available";
  check_changed(name, text, len, from, "Watch on the latest version of YouTube.", PLAY_CLIENT_OUTDATED);
  check_changed(name, text, len, from, "YouTube is no longer supported on this application or device.",
                PLAY_CLIENT_OUTDATED);
  check_changed(name, text, len, from, "This video is no longer available", PLAY_UNPLAYABLE);
  /* Unchanged, it is the refusal it was, and the reply is for the video it names. */
  struct player_info pi;
  assert_int_equal(player_parse(text, len, &pi), 0);
  assert_int_equal(pi.playability, PLAY_UNPLAYABLE);
  static const char *const id_path[] = {"videoDetails", "videoId", NULL};
  char *id = capture_string(text, id_path);
  assert_int_equal(pi.has_video_id, 1);
  assert_string_equal(pi.video_id, id);
  assert_true(player_is_for(&pi, id));
  player_info_free(&pi);
  free(id);
  free(text);
}

/* The player reply a reel reply wraps, {"playerResponse":REPLY}: REPLY, copied. */
static char *reel_player_response(const char *name, const char *reel) {
  static const char head[] = "{\"playerResponse\":";
  size_t len = strlen(reel), hlen = sizeof(head) - 1;
  if (len < hlen + 2 || strncmp(reel, head, hlen) != 0 || reel[len - 1] != '}')
    fail_msg("%s: not a reel reply wrapping a player reply", name);
  char *out = strndup(reel + hlen, len - hlen - 1);
  assert_non_null(out);
  return out;
}

static void check_why(const char *name, const char *text, size_t len, enum playability play, enum play_why why) {
  struct player_info pi;
  if (player_parse(text, len, &pi) != 0) fail_msg("%s: not parsed", name);
  if (pi.playability != play) fail_msg("%s: playability %d, want %d", name, pi.playability, play);
  if (pi.why != why) fail_msg("%s: why %d, want %d", name, pi.why, why);
  player_info_free(&pi);
}

static void check_changed_why(const char *name, const char *text, size_t len, const char *from, const char *to,
                              enum playability play, enum play_why why) {
  size_t n = len;
  char *changed = with_changed(text, &n, from, to);
  char label[512];
  snprintf(label, sizeof(label), "%s with \"%s\"", name, to);
  check_why(label, changed, n, play, why);
  free(changed);
}

/* A video the clients cannot play: the case its reply says (private, members-only, region, age), else none. */
static void test_refusals_say_which_case_they_are(void **state) {
  (void)state;
  const char *root = fixtures_dir();
  static const struct {
    const char *suffix;
    enum playability play;
    enum play_why why;
  } reels[] = {
      {"-private.reel.json", PLAY_LOGIN_REQUIRED, PLAY_WHY_PRIVATE},
      {"members-only.reel.json", PLAY_UNPLAYABLE, PLAY_WHY_MEMBERS_ONLY},
      {"geo-restricted.reel.json", PLAY_UNPLAYABLE, PLAY_WHY_GEO_RESTRICTED},
  };
  for (size_t i = 0; i < sizeof(reels) / sizeof(reels[0]); i++) {
    char *reel = reel_reply(root, reels[i].suffix);
    char *reply = reel_player_response(reels[i].suffix, reel);
    check_why(reels[i].suffix, reply, strlen(reply), reels[i].play, reels[i].why);
    free(reply);
    free(reel);
  }
  static const struct {
    const char *file;
    enum playability play;
    enum play_why why;
  } files[] = {
      {"youtube_age_restricted.innertube.json.static", PLAY_LOGIN_REQUIRED, PLAY_WHY_AGE_RESTRICTED},
      {"youtube_video_unavailable.innertube.json.static", PLAY_UNAVAILABLE, PLAY_WHY_UNSAID},
      {"youtube_unplayable.innertube.json.static", PLAY_OTHER, PLAY_WHY_UNSAID},
      {"youtube_request_blocked.innertube.json.static", PLAY_BOT_CHECK, PLAY_WHY_UNSAID},
      {"youtube.innertube.json.static", PLAY_OK, PLAY_WHY_UNSAID},
  };
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    size_t len;
    char *text = read_fixture(root, "youtube-transcript-api", files[i].file, &len);
    if (!text) fail_msg("%s is missing", files[i].file);
    check_why(files[i].file, text, len, files[i].play, files[i].why);
    free(text);
  }
  /* The VISIONOS refusal says nothing of the video: no case. */
  char *text = reel_unplayable_reply(root);
  check_why("reel VISIONOS refusal", text, strlen(text), PLAY_UNPLAYABLE, PLAY_WHY_UNSAID);
  free(text);
  /* Wordings of the other cases in a real reply: removed, a live stream not archived, and the status of one. */
  const char *file = "youtube_video_unavailable.innertube.json.static";
  size_t len;
  text = read_fixture(root, "youtube-transcript-api", file, &len);
  if (!text) fail_msg("%s is missing", file);
  const char *from = "This video is unavailable";
  check_changed_why(file, text, len, from, "This video has been removed by the uploader", PLAY_UNAVAILABLE,
                    PLAY_WHY_REMOVED);
  check_changed_why(file, text, len, from,
                    "This video is no longer available because the YouTube account associated with this video has "
                    "been terminated.",
                    PLAY_UNAVAILABLE, PLAY_WHY_REMOVED);
  check_changed_why(file, text, len, from, "This live stream recording is not available.", PLAY_UNAVAILABLE,
                    PLAY_WHY_LIVE_NOT_ARCHIVED);
  check_changed_why(file, text, len, from, "This video is private", PLAY_UNAVAILABLE, PLAY_WHY_PRIVATE);
  check_changed_why(file, text, len, "\"status\": \"ERROR\"", "\"status\": \"LIVE_STREAM_OFFLINE\"", PLAY_LIVE_OFFLINE,
                    PLAY_WHY_LIVE_NOT_ARCHIVED);
  /* A phrase about us decides first: a ration is no case of the video. */
  check_changed_why(file, text, len, from, "This content isn't available, try again later. This video is private",
                    PLAY_RATIONED, PLAY_WHY_UNSAID);
  free(text);
}

/* A reply names the video it is for; the reply of another video is never taken for the one asked. */
static void test_a_reply_for_another_video_is_not_for_the_one_asked(void **state) {
  (void)state;
  const char *root = fixtures_dir();
  size_t len = 0;
  char *text = read_fixture(root, "youtube-transcript-api", "youtube.innertube.json.static", &len);
  assert_non_null(text);
  static const char *const id_path[] = {"videoDetails", "videoId", NULL};
  char *id = capture_string(text, id_path);
  struct player_info pi;
  assert_int_equal(player_parse(text, len, &pi), 0);
  assert_int_equal(pi.playability, PLAY_OK);
  assert_string_equal(pi.video_id, id);
  assert_true(player_is_for(&pi, id));
  assert_false(player_is_for(&pi, "zzOtherVid1"));
  player_info_free(&pi);
  /* An id that is not a plain one matches nothing, not even itself. */
  char changed_id[64];
  snprintf(changed_id, sizeof(changed_id), "\"videoId\": \"%s\\u0000\"", id);
  char from[64];
  snprintf(from, sizeof(from), "\"videoId\": \"%s\"", id);
  size_t n = len;
  char *bad = with_changed(text, &n, from, changed_id);
  assert_int_equal(player_parse(bad, n, &pi), 0);
  assert_int_equal(pi.has_video_id, 1);
  assert_false(player_is_for(&pi, id));
  player_info_free(&pi);
  free(bad);
  free(id);
  free(text);
  /* A refusal without videoDetails names no video: it is not another's. */
  text = read_fixture(root, "youtube-transcript-api", "youtube_video_unavailable.innertube.json.static", &len);
  assert_non_null(text);
  assert_int_equal(player_parse(text, len, &pi), 0);
  assert_int_equal(pi.has_video_id, 0);
  assert_true(player_is_for(&pi, "zzOtherVid1"));
  player_info_free(&pi);
  free(text);
}

/* Counts the tracks that want a PO token in a capture whose one exp=xpe is replaced by exp. */
static size_t po_tracks_with(const char *text, size_t len, const char *exp) {
  size_t n = len;
  char *changed = with_changed(text, &n, "&exp=xpe&", exp);
  struct player_info pi;
  assert_int_equal(player_parse(changed, n, &pi), 0);
  size_t npo = 0;
  for (size_t i = 0; i < pi.ntracks; i++) npo += pi.tracks[i].po_token != 0;
  assert_int_equal(pi.ntracks, 9);
  player_info_free(&pi);
  free(changed);
  return npo;
}

static void test_exp_lists_naming_xpe_mark_po_token_tracks(void **state) {
  (void)state;
  const char *root = fixtures_dir();
  size_t len = 0;
  char *text = read_fixture(root, "youtube-transcript-api", "youtube_po_token_required.innertube.json.static", &len);
  assert_non_null(text);
  assert_int_equal(po_tracks_with(text, len, "&exp=xpe&"), 1);
  assert_int_equal(po_tracks_with(text, len, "&exp=xpo%2Cxwmhp%2Cxpe&"), 1);
  assert_int_equal(po_tracks_with(text, len, "&exp=xpo%2cxpv&"), 1);
  assert_int_equal(po_tracks_with(text, len, "&exp=xpo,xpe&"), 1);
  assert_int_equal(po_tracks_with(text, len, "&exp=xpe,xpo&"), 1);
  /* A list without xpe or xpv, or a longer name that merely starts so, asks for no token. */
  assert_int_equal(po_tracks_with(text, len, "&exp=xpo%2Cxwmhp&"), 0);
  assert_int_equal(po_tracks_with(text, len, "&exp=xpex,xpvv&"), 0);
  assert_int_equal(po_tracks_with(text, len, "&fexp=xpe&"), 0);
  free(text);
}

/* The summary of a player reply reads back as the same reply, for every playable capture. */
static void test_a_player_summary_reads_back_as_its_reply(void **state) {
  (void)state;
  const char *root = fixtures_dir();
  for (size_t i = 0; i < sizeof(players) / sizeof(players[0]); i++) {
    const struct expect *e = &players[i];
    if (e->play != PLAY_OK) continue;
    size_t len = 0;
    char *body = read_fixture(root, e->dir, e->file, &len);
    if (!body) fail_msg("%s is missing", e->file);
    struct player_info a, b;
    assert_int_equal(player_parse(body, len, &a), 0);
    struct buf sum = BUF_INIT;
    if (player_summary_json(&a, "zzSummary01", &sum) != 0) fail_msg("%s: no summary", e->file);
    char *copy = testdata_exact(sum.data, sum.len);
    if (player_parse(copy, sum.len, &b) != 0) fail_msg("%s: summary not a player reply", e->file);
    assert_int_equal(b.playability, PLAY_OK);
    assert_true(player_is_for(&b, "zzSummary01"));
    if (b.ntracks != a.ntracks || b.default_track != a.default_track || b.ntranslations != a.ntranslations)
      fail_msg("%s: summary has %zu tracks (default %d), %zu translations", e->file, b.ntracks, b.default_track,
               b.ntranslations);
    for (size_t t = 0; t < a.ntracks; t++) {
      assert_string_equal(b.tracks[t].base_url, a.tracks[t].base_url);
      assert_string_equal(b.tracks[t].lang, a.tracks[t].lang);
      assert_string_equal(b.tracks[t].name, a.tracks[t].name);
      assert_int_equal(b.tracks[t].is_asr, a.tracks[t].is_asr);
      assert_int_equal(b.tracks[t].translatable, a.tracks[t].translatable);
      assert_int_equal(b.tracks[t].po_token, a.tracks[t].po_token);
    }
    for (size_t t = 0; t < a.ntranslations; t++) {
      assert_string_equal(b.translations[t].lang, a.translations[t].lang);
      assert_string_equal(b.translations[t].name, a.translations[t].name);
    }
    assert_int_equal(player_choose_track(&b, "en"), e->choice_en);
    assert_int_equal(player_choose_track(&b, ""), e->choice_any);
    assert_int_equal(b.naudio, 0); /* no audio: a speech job asks the platform */
    /* The captured caption URLs expire (a unix time of the capture's day); without tracks nothing says when. */
    int64_t expire = player_tracks_expire_s(&a);
    if (a.ntracks > 0 && (expire < 1500000000 || expire > 2500000000))
      fail_msg("%s: expire %lld", e->file, (long long)expire);
    if (a.ntracks == 0) assert_int_equal(expire, 0);
    assert_int_equal(player_tracks_expire_s(&b), expire);
    player_info_free(&a);
    player_info_free(&b);
    buf_free(&sum);
    free(copy);
    free(body);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_player_replies_parse_to_their_outcomes),
      cmocka_unit_test(test_pages_are_not_player_replies_nor_captions),
      cmocka_unit_test(test_srv1_capture_parses),
      cmocka_unit_test(test_every_capture_has_an_expectation),
      cmocka_unit_test(test_rationing_reasons_are_a_ration_not_an_absence),
      cmocka_unit_test(test_retired_client_reasons_are_client_outdated),
      cmocka_unit_test(test_refusals_say_which_case_they_are),
      cmocka_unit_test(test_reel_replies_and_the_visitor_reply_read_as_the_reel_profile_reads_them),
      cmocka_unit_test(test_a_reply_for_another_video_is_not_for_the_one_asked),
      cmocka_unit_test(test_exp_lists_naming_xpe_mark_po_token_tracks),
      cmocka_unit_test(test_a_player_summary_reads_back_as_its_reply),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
