/*
 * Unit tests of the browse reader: our own small replies for the exact order, the traps and the refusals, then the
 * real captures of playlists and channel tabs (../shared/fixtures/newpipe/playlist and channel; without them these
 * tests are "not run here (captures)", and fail where VTS_REQUIRE names the captures).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/test_skip.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <yajl/yajl_tree.h>

#include "fetcher/platform/browse.h"
#include "testdata.h"

static int parse(const char *json, struct browse_page *p) { return browse_parse(json, strlen(json), p); }

static void test_a_playlist_page_in_order_with_its_continuation(void **state) {
  (void)state;
  /* The list's continuation is its last element; the one beside the list (another shelf) is not the next page. */
  const char *json =
      "{\"contents\":{\"twoColumnBrowseResultsRenderer\":{\"tabs\":[{\"tabRenderer\":{\"content\":{"
      "\"sectionListRenderer\":{\"contents\":[{\"itemSectionRenderer\":{\"contents\":[{\"playlistVideoListRenderer\":{"
      "\"contents\":["
      "{\"playlistVideoRenderer\":{\"videoId\":\"ourVideo002\",\"navigationEndpoint\":{\"watchEndpoint\":{"
      "\"videoId\":\"notThisOne1\"}}}},"
      "{\"playlistVideoRenderer\":{\"title\":{\"runs\":[{\"text\":\"x\"}]},\"videoId\":\"ourVideo001\"}},"
      "{\"playlistVideoRenderer\":{\"videoId\":\"bad id\"}},"
      "{\"playlistVideoRenderer\":{\"videoId\":\"ourVideo002\"}},"
      "{\"continuationItemRenderer\":{\"continuationEndpoint\":{\"continuationCommand\":{\"token\":\"NEXT%3D\"}}}}"
      "]}}]}},{\"continuationItemRenderer\":{\"continuationEndpoint\":{\"continuationCommand\":{\"token\":"
      "\"SHELF\"}}}}]}}}}]}}}";
  struct browse_page p;
  assert_int_equal(parse(json, &p), 0);
  assert_int_equal(p.nvideos, 2);
  assert_string_equal(p.video_ids[0], "ourVideo002");
  assert_string_equal(p.video_ids[1], "ourVideo001");
  assert_string_equal(p.continuation, "NEXT%3D");
  assert_true(p.has_list);
  assert_string_equal(p.error, "");
  browse_page_free(&p);
}

static void test_the_shelf_beside_the_list_is_not_a_next_page(void **state) {
  (void)state;
  const char *json =
      "{\"contents\":{\"sectionListRenderer\":{\"contents\":[{\"playlistVideoListRenderer\":{"
      "\"contents\":[{\"playlistVideoRenderer\":{\"videoId\":\"ourVideo001\"}}]}},"
      "{\"continuationItemRenderer\":{\"continuationEndpoint\":{\"continuationCommand\":{\"token\":"
      "\"SHELF\"}}}}]}}}";
  struct browse_page p;
  assert_int_equal(parse(json, &p), 0);
  assert_int_equal(p.nvideos, 1);
  assert_string_equal(p.continuation, "");
  browse_page_free(&p);
}

static void test_a_channel_tab_in_both_item_shapes(void **state) {
  (void)state;
  const char *json =
      "{\"contents\":{\"richGridRenderer\":{\"contents\":["
      "{\"richItemRenderer\":{\"content\":{\"videoRenderer\":{\"videoId\":\"ourVideo003\"}}}},"
      "{\"richItemRenderer\":{\"content\":{\"lockupViewModel\":{\"contentId\":\"ourVideo004\","
      "\"contentType\":\"LOCKUP_CONTENT_TYPE_VIDEO\"}}}},"
      "{\"richItemRenderer\":{\"content\":{\"lockupViewModel\":{\"contentType\":"
      "\"LOCKUP_CONTENT_TYPE_VIDEO\",\"contentId\":\"ourVideo005\"}}}},"
      "{\"richItemRenderer\":{\"content\":{\"lockupViewModel\":{\"contentId\":\"PLaPlaylistId\","
      "\"contentType\":\"LOCKUP_CONTENT_TYPE_PLAYLIST\"}}}},"
      "{\"richItemRenderer\":{\"content\":{\"shortsLockupViewModel\":{\"entityId\":\"x\"}}}},"
      "{\"continuationItemRenderer\":{\"continuationEndpoint\":{\"continuationCommand\":{\"token\":"
      "\"T2\"}}}}]}}}";
  struct browse_page p;
  assert_int_equal(parse(json, &p), 0);
  assert_int_equal(p.nvideos, 3);
  assert_string_equal(p.video_ids[0], "ourVideo003");
  assert_string_equal(p.video_ids[1], "ourVideo004");
  assert_string_equal(p.video_ids[2], "ourVideo005");
  assert_string_equal(p.continuation, "T2");
  browse_page_free(&p);
}

static void test_a_continuation_reply_and_the_last_page(void **state) {
  (void)state;
  const char *json =
      "{\"onResponseReceivedActions\":[{\"appendContinuationItemsAction\":{\"continuationItems\":["
      "{\"playlistVideoRenderer\":{\"videoId\":\"ourVideo006\"}}]}}]}";
  struct browse_page p;
  assert_int_equal(parse(json, &p), 0);
  assert_int_equal(p.nvideos, 1);
  assert_string_equal(p.video_ids[0], "ourVideo006");
  assert_string_equal(p.continuation, "");
  assert_true(p.has_list);
  browse_page_free(&p);
}

static void test_an_error_alert_is_the_refusal_and_info_is_not(void **state) {
  (void)state;
  struct browse_page p;
  assert_int_equal(parse("{\"alerts\":[{\"alertWithButtonRenderer\":{\"type\":\"INFO\",\"text\":{\"simpleText\":"
                         "\"Unavailable videos will be hidden\"}}},{\"alertRenderer\":{\"type\":\"ERROR\",\"text\":{"
                         "\"runs\":[{\"text\":\"The playlist \"},{\"text\":\"does not exist.\"}]}}}]}",
                         &p),
                   0);
  assert_string_equal(p.error, "The playlist does not exist.");
  assert_int_equal(p.nvideos, 0);
  assert_false(p.has_list);
  browse_page_free(&p);
  assert_int_equal(
      parse("{\"alerts\":[{\"alertRenderer\":{\"type\":\"INFO\",\"text\":{\"simpleText\":\"fine\"}}}]}", &p), 0);
  assert_string_equal(p.error, "");
  browse_page_free(&p);
}

static void test_what_is_not_a_browse_reply_is_refused(void **state) {
  (void)state;
  struct browse_page p;
  assert_int_equal(parse("[1,2]", &p), -EPROTO);
  browse_page_free(&p);
  assert_int_equal(parse("{\"contents\":", &p), -EPROTO);
  browse_page_free(&p);
  assert_int_equal(parse("", &p), -EPROTO);
  browse_page_free(&p);
  /* A token past the cap. */
  size_t n = BROWSE_MAX_TOKEN + 1;
  char *json = malloc(n + 200);
  assert_non_null(json);
  int at = snprintf(json, 200,
                    "{\"continuationItems\":[{\"continuationItemRenderer\":{\"continuationEndpoint\":{"
                    "\"continuationCommand\":{\"token\":\"");
  memset(json + at, 'A', n);
  strcpy(json + at + n, "\"}}}}]}");
  assert_int_equal(browse_parse(json, strlen(json), &p), -EPROTO);
  browse_page_free(&p);
  /* Exactly the cap is a token. */
  strcpy(json + at + n - 1, "\"}}}}]}");
  assert_int_equal(browse_parse(json, strlen(json), &p), 0);
  assert_int_equal(strlen(p.continuation), BROWSE_MAX_TOKEN);
  browse_page_free(&p);
  free(json);
}

static void test_more_videos_than_a_page_holds_is_refused(void **state) {
  (void)state;
  struct buf b = BUF_INIT;
  assert_int_equal(buf_puts(&b, "{\"continuationItems\":["), 0);
  for (int i = 0; i <= BROWSE_MAX_PAGE_VIDEOS; i++)
    assert_int_equal(buf_printf(&b, "%s{\"playlistVideoRenderer\":{\"videoId\":\"v%010d\"}}", i ? "," : "", i), 0);
  assert_int_equal(buf_puts(&b, "]}"), 0);
  struct browse_page p;
  assert_int_equal(browse_parse(b.data, b.len, &p), -EPROTO);
  assert_int_equal(p.nvideos, 0);
  browse_page_free(&p);
  buf_free(&b);
}

static void test_request_bodies_and_ids(void **state) {
  (void)state;
  struct client_profile c = {.name = "WEB", .client_name = "WEB", .version = "2.20260708.00.00"};
  struct buf b = BUF_INIT;
  assert_int_equal(browse_request_body(&c, "VLPLour", "wgYCCAA%3D", NULL, &b), 0);
  assert_string_equal(b.data,
                      "{\"context\":{\"client\":{\"clientName\":\"WEB\",\"clientVersion\":\"2.20260708.00.00\","
                      "\"hl\":\"en\",\"gl\":\"US\"}},\"browseId\":\"VLPLour\",\"params\":\"wgYCCAA%3D\"}");
  buf_reset(&b);
  assert_int_equal(browse_request_body(&c, "VLPLour", NULL, "to\"ken", &b), 0);
  assert_string_equal(b.data,
                      "{\"context\":{\"client\":{\"clientName\":\"WEB\",\"clientVersion\":\"2.20260708.00.00\","
                      "\"hl\":\"en\",\"gl\":\"US\"}},\"continuation\":\"to\\\"ken\"}");
  buf_free(&b);
  char id[64];
  assert_int_equal(browse_playlist_id("PLabc", id, sizeof(id)), 0);
  assert_string_equal(id, "VLPLabc");
  assert_int_equal(browse_uploads_id("UCabcdef", id, sizeof(id)), 0);
  assert_string_equal(id, "VLUUabcdef");
  assert_int_equal(browse_uploads_id("HCabcdef", id, sizeof(id)), -EINVAL);
  assert_int_equal(browse_uploads_id("UC", id, sizeof(id)), -EINVAL);
  assert_int_equal(browse_playlist_id("PLabc", id, 7), -EINVAL);
}

/*
 * A playlist's first page is asked with the token the web client builds: base64url of its protobuf, the padding
 * percent-encoded (the integration tests hold it byte-equal to the recorded one).
 */
static void test_a_playlists_first_page_token_is_the_web_clients(void **state) {
  (void)state;
  struct buf b = BUF_INIT;
  assert_int_equal(browse_playlist_token("PLours0123456789", &b), 0);
  assert_int_equal(b.len,
                   strlen("4qmFsgI5EhJWTFBMb3VyczAxMjM0NTY3ODkaEENBRENCZ0lJQUElM0QlM0SaAhBQTG91cnMwMTIzNDU2Nzg5"));
  assert_memory_equal(b.data, "4qmFsgI5EhJWTFBMb3VyczAxMjM0NTY3ODkaEENBRENCZ0lJQUElM0QlM0SaAhBQTG91cnMwMTIzNDU2Nzg5",
                      b.len);
  buf_reset(&b);
  assert_int_equal(browse_playlist_token("PLabc", &b), 0);
  assert_int_equal(b.len, strlen("4qmFsgIjEgdWTFBMYWJjGhBDQURDQmdJSUFBJTNEJTNEmgIFUExhYmM%3D"));
  assert_memory_equal(b.data, "4qmFsgIjEgdWTFBMYWJjGhBDQURDQmdJSUFBJTNEJTNEmgIFUExhYmM%3D", b.len);
  buf_reset(&b);
  char longer[VTS_PLAYLIST_ID_MAX + 2];
  memset(longer, 'a', sizeof(longer) - 1);
  longer[sizeof(longer) - 1] = '\0';
  assert_int_equal(browse_playlist_token(longer, &b), -EINVAL);
  assert_int_equal(browse_playlist_token("", &b), -EINVAL);
  buf_free(&b);
}

/* The reply body of a recorded exchange of the captures, parsed; not run here when the captures are absent. */
static int parse_capture(const char *name, struct browse_page *p, long *code) {
  const char *dir = getenv("VTS_SHARED_FIXTURES");
  struct stat st;
  if (!dir || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    TEST_NOT_HERE("captures", "no browse captures: %s", TEST_CAPTURES_HOWTO);
  char path[4096];
  snprintf(path, sizeof(path), "%s/newpipe/%s", dir, name);
  size_t len;
  char *text = testdata_read_path(path, &len);
  if (!text) fail_msg("%s is missing", path);
  char err[128];
  yajl_val root = yajl_tree_parse(text, err, sizeof(err));
  free(text);
  if (!root) fail_msg("%s: %s", path, err);
  const char *body_path[] = {"response", "responseBody", NULL};
  const char *code_path[] = {"response", "responseCode", NULL};
  yajl_val body = yajl_tree_get(root, body_path, yajl_t_string);
  yajl_val c = yajl_tree_get(root, code_path, yajl_t_number);
  if (!body || !c) fail_msg("%s is not a recorded exchange", path);
  *code = YAJL_GET_INTEGER(c);
  const char *s = YAJL_GET_STRING(body);
  int rv = browse_parse(s, strlen(s), p);
  yajl_tree_free(root);
  return rv;
}

struct capture {
  const char *name;
  size_t nvideos;
  int has_continuation;
  const char *error;
};

static const struct capture captures[] = {
    {"playlist/2024-11-10/vl-PLoumn5-page1.browse.json", 100, 1, ""},
    {"playlist/2024-11-10/vl-PLoumn5-page2-last.continuation.json", 50, 0, ""},
    {"playlist/2024-11-10/vl-PLWwAypA-5000videos-page1.browse.json", 102, 1, ""},
    {"playlist/2024-11-10/vl-PLWwAypA-5000videos-page2.continuation.json", 101, 1, ""},
    {"playlist/2024-11-10/vl-PL8dPuua-49videos.browse.json", 49, 0, ""},
    {"playlist/2024-11-10/vl-INVALID_ID.browse.json", 0, 0, "This playlist type is unviewable."},
    {"playlist/2024-11-10/vl-PL1111-nonexistent.browse.json", 0, 0, "The playlist does not exist."},
    {"playlist/2026-01-26/vl-PL1111-nonexistent.browse-fields.json", 0, 0, "The playlist does not exist."},
    {"playlist/2026-01-26/vl-PLoumn5-header.browse-fields.json", 0, 0, ""},
    {"playlist/2026-01-26/vl-PLoumn5-page1.continuation.json", 100, 1, ""},
    {"playlist/2026-01-26/vl-PLoumn5-page2-last.continuation.json", 50, 0, ""},
    {"channel/2026-05-21/UCTwECeG-videos-tab.browse.json", 30, 1, ""},
    {"channel/2026-05-21/UCTwECeG-videos-page2.continuation.json", 30, 1, ""},
    {"channel/2026-01-26/UCsXVk37-videos-tab.browse.json", 30, 1, ""},
    {"channel/2026-01-26/UCsXVk37-videos-page2.continuation.json", 30, 1, ""},
    {"channel/2026-01-26/uploads-VLUULFbfnHqx-page1.continuation.json", 100, 1, ""},
    {"channel/2026-01-26/uploads-VLUULFbfnHqx-page2-last.continuation.json", 50, 0, ""},
    {"channel/2026-01-27/UCoaO4U-removed-channel.browse.json", 0, 0,
     "This channel was removed because it violated our Community Guidelines."},
};

static void test_the_captures_read_as_recorded(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof(captures) / sizeof(captures[0]); i++) {
    const struct capture *c = &captures[i];
    struct browse_page p;
    long code = 0;
    int rv = parse_capture(c->name, &p, &code);
    if (rv != 0) fail_msg("%s: browse_parse %d", c->name, rv);
    if (p.nvideos != c->nvideos) fail_msg("%s: %zu videos, want %zu", c->name, p.nvideos, c->nvideos);
    if ((p.continuation[0] != '\0') != c->has_continuation)
      fail_msg("%s: continuation \"%s\"", c->name, p.continuation);
    if (strcmp(p.error, c->error) != 0) fail_msg("%s: error \"%s\"", c->name, p.error);
    assert_int_equal(code, 200);
    browse_page_free(&p);
  }
}

/* A playlist read page by page: its two pages are 150 distinct videos, as the playlist's header says. */
static void test_a_playlist_read_across_its_pages_is_every_video_once(void **state) {
  (void)state;
  static const char *const pages[][2] = {
      {"playlist/2024-11-10/vl-PLoumn5-page1.browse.json",
       "playlist/2024-11-10/vl-PLoumn5-page2-last.continuation.json"},
      {"playlist/2026-01-26/vl-PLoumn5-page1.continuation.json",
       "playlist/2026-01-26/vl-PLoumn5-page2-last.continuation.json"},
      {"channel/2026-01-26/uploads-VLUULFbfnHqx-page1.continuation.json",
       "channel/2026-01-26/uploads-VLUULFbfnHqx-page2-last.continuation.json"},
  };
  for (size_t k = 0; k < 3; k++) {
    struct browse_page a, b;
    long code;
    assert_int_equal(parse_capture(pages[k][0], &a, &code), 0);
    assert_int_equal(parse_capture(pages[k][1], &b, &code), 0);
    assert_int_equal(a.nvideos + b.nvideos, 150);
    for (size_t i = 0; i < a.nvideos; i++) {
      for (size_t j = 0; j < b.nvideos; j++) {
        if (!strcmp(a.video_ids[i], b.video_ids[j])) fail_msg("%s: %s on both pages", pages[k][0], a.video_ids[i]);
      }
    }
    browse_page_free(&a);
    browse_page_free(&b);
  }
}

/* The HTTP 400 of a browse id that does not exist is not a browse reply: no list, no continuation. */
static void test_an_invalid_argument_reply_holds_no_list(void **state) {
  (void)state;
  struct browse_page p;
  long code = 0;
  assert_int_equal(parse_capture("channel/2026-01-27/DOESNT-EXIST.browse-http400.json", &p, &code), 0);
  assert_int_equal(code, 400);
  assert_int_equal(p.nvideos, 0);
  assert_false(p.has_list);
  assert_string_equal(p.continuation, "");
  browse_page_free(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_playlist_page_in_order_with_its_continuation),
      cmocka_unit_test(test_the_shelf_beside_the_list_is_not_a_next_page),
      cmocka_unit_test(test_a_channel_tab_in_both_item_shapes),
      cmocka_unit_test(test_a_continuation_reply_and_the_last_page),
      cmocka_unit_test(test_an_error_alert_is_the_refusal_and_info_is_not),
      cmocka_unit_test(test_what_is_not_a_browse_reply_is_refused),
      cmocka_unit_test(test_more_videos_than_a_page_holds_is_refused),
      cmocka_unit_test(test_request_bodies_and_ids),
      cmocka_unit_test(test_a_playlists_first_page_token_is_the_web_clients),
      cmocka_unit_test(test_the_captures_read_as_recorded),
      cmocka_unit_test(test_a_playlist_read_across_its_pages_is_every_video_once),
      cmocka_unit_test(test_an_invalid_argument_reply_holds_no_list),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
