/*
 * Unit tests of the chapters reader (fetcher/platform/chapters.c): our own watch-next replies (tests/data) for the
 * exact list, the traps (another panel's markers, the player bar's copy, items out of order or without a start) and
 * the public JSON; then the real captures with chapters (../shared/fixtures/newpipe/next). Without the captures those
 * tests are skipped with what to do, and fail under CI=true, where a skip is a failure.
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

#include "fetcher/platform/chapters.h"
#include "gateway/http/chunks.h"
#include "testdata.h"

static void read_own(const char *name, struct chapter_list *l) {
  size_t len;
  char *text = testdata_read(name, &len);
  if (text == NULL) fail_msg("tests/data/%s is missing", name);
  char *exact = testdata_exact(text, len);
  free(text);
  assert_int_equal(chapters_parse(exact, len, l), 0);
  free(exact);
}

static void test_our_reply_gives_the_chapters_panel_only_in_order(void **state) {
  (void)state;
  struct chapter_list l;
  read_own("next_chapters.json", &l);
  assert_int_equal(l.n, 3);
  assert_string_equal(l.items[0].title, "Intro");
  assert_int_equal(l.items[0].start_s, 0);
  /* Runs joined; a start written as a string is read too. */
  assert_string_equal(l.items[1].title, "Two runs, \"quoted\"");
  assert_int_equal(l.items[1].start_s, 90);
  /* "Out of order" (60 after 90) and "No start" are left out. */
  assert_string_equal(l.items[2].title, "Caf\xc3\xa9 \xe2\x80\x93 the end");
  assert_int_equal(l.items[2].start_s, 3723);
  struct buf b = BUF_INIT;
  assert_int_equal(chapters_json(&l, 4000, &b), 0);
  assert_string_equal(b.data,
                      "[{\"title\":\"Intro\",\"start\":0,\"end\":90},"
                      "{\"title\":\"Two runs, \\\"quoted\\\"\",\"start\":90,\"end\":3723},"
                      "{\"title\":\"Caf\xc3\xa9 \xe2\x80\x93 the end\",\"start\":3723,\"end\":4000}]");
  /* An unknown length, or one before the last start: the last chapter ends where it starts. */
  buf_reset(&b);
  assert_int_equal(chapters_json(&l, -1, &b), 0);
  assert_non_null(strstr(b.data, "\"start\":3723,\"end\":3723}]"));
  buf_free(&b);
  chapters_free(&l);
}

static void test_a_reply_without_the_panel_has_no_chapters(void **state) {
  (void)state;
  struct chapter_list l;
  read_own("next_no_chapters.json", &l);
  assert_int_equal(l.n, 0);
  struct buf b = BUF_INIT;
  assert_int_equal(chapters_json(&l, 12, &b), 0);
  assert_string_equal(b.data, "[]");
  buf_free(&b);
  chapters_free(&l);
  assert_int_equal(chapters_parse("{}", 2, &l), 0);
  assert_int_equal(l.n, 0);
}

static void test_what_is_not_a_reply_is_refused(void **state) {
  (void)state;
  struct chapter_list l;
  static const char *const bad[] = {"[]", "{\"engagementPanels\":[", "not json", "{\"a\":1} {}"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(chapters_parse(bad[i], strlen(bad[i]), &l), -EPROTO);
    assert_null(l.items);
    assert_int_equal(l.n, 0);
  }
}

/* A title longer than the bound is cut on a character's start, never inside one. */
static void test_a_long_title_is_cut_between_characters(void **state) {
  (void)state;
  struct buf j = BUF_INIT;
  assert_int_equal(buf_puts(&j,
                            "{\"engagementPanels\":[{\"engagementPanelSectionListRenderer\":{\"panelIdentifier\":"
                            "\"engagement-panel-macro-markers-description-chapters\",\"content\":{"
                            "\"macroMarkersListRenderer\":{\"contents\":[{\"macroMarkersListItemRenderer\":{"
                            "\"title\":{\"simpleText\":\"a"),
                   0);
  for (int i = 0; i < CHAPTERS_TITLE_MAX; i++) assert_int_equal(buf_puts(&j, "\xc3\xa9"), 0);
  assert_int_equal(buf_puts(&j, "\"},\"onTap\":{\"watchEndpoint\":{\"startTimeSeconds\":5}}}}]}}}}]}"), 0);
  struct chapter_list l;
  assert_int_equal(chapters_parse(j.data, j.len, &l), 0);
  assert_int_equal(l.n, 1);
  /* "a" and 149 two-byte characters: 299 bytes, the 300th would split one. */
  assert_int_equal(strlen(l.items[0].title), 1 + 2 * ((CHAPTERS_TITLE_MAX - 1) / 2));
  chapters_free(&l);
  buf_free(&j);
}

static void test_the_next_request_names_the_video(void **state) {
  (void)state;
  struct client_profile c = {.name = "WEB", .client_name = "WEB", .version = "2.20260708.00.00"};
  struct buf b = BUF_INIT;
  assert_int_equal(chapters_next_body(&c, "ud9d5cMDP_0", &b), 0);
  assert_string_equal(b.data,
                      "{\"context\":{\"client\":{\"clientName\":\"WEB\",\"clientVersion\":\"2.20260708.00.00\","
                      "\"hl\":\"en\",\"gl\":\"US\"}},\"videoId\":\"ud9d5cMDP_0\",\"contentCheckOk\":true,"
                      "\"racyCheckOk\":true}");
  buf_free(&b);
}

/* The reply body of a recorded exchange of the captures, parsed into l. */
static void parse_capture(const char *name, struct chapter_list *l) {
  const char *dir = getenv("VTS_SHARED_FIXTURES");
  struct stat st;
  char path[4096];
  snprintf(path, sizeof(path), "%s/newpipe/next/%s", dir != NULL ? dir : "", name);
  if (dir == NULL || stat(path, &st) != 0) TEST_SKIP("no newpipe/next captures: %s", TEST_CAPTURES_HOWTO);
  size_t len;
  char *text = testdata_read_path(path, &len);
  if (!text) fail_msg("%s is unreadable", path);
  char err[128];
  yajl_val root = yajl_tree_parse(text, err, sizeof(err));
  free(text);
  if (!root) fail_msg("%s: %s", path, err);
  const char *body_path[] = {"response", "responseBody", NULL};
  yajl_val body = yajl_tree_get(root, body_path, yajl_t_string);
  if (!body) fail_msg("%s is not a recorded exchange", path);
  const char *s = YAJL_GET_STRING(body);
  char *exact = testdata_exact(s, strlen(s));
  int rv = chapters_parse(exact, strlen(s), l);
  free(exact);
  yajl_tree_free(root);
  assert_int_equal(rv, 0);
}

static void test_the_captures_give_their_chapters(void **state) {
  (void)state;
  static const int64_t mailab[] = {0, 164, 364, 498, 615, 803, 981};
  static const int64_t tagesschau[] = {0, 18, 196, 224, 254, 402, 435, 464, 598, 725, 827, 852, 870};
  struct chapter_list l;
  parse_capture("2026-06-07/ud9d5cMDP_0-chapters.next.json", &l);
  assert_int_equal(l.n, 7);
  for (size_t i = 0; i < l.n; i++) assert_int_equal(l.items[i].start_s, mailab[i]);
  assert_string_equal(l.items[0].title, "Ein erstaunlich kontroverses Thema");
  assert_string_equal(l.items[6].title, "Keksempfehlungen");
  chapters_free(&l);
  parse_capture("2026-06-07/KI7fMGRg0Wk-chapters.next.json", &l);
  assert_int_equal(l.n, 13);
  for (size_t i = 0; i < l.n; i++) assert_int_equal(l.items[i].start_s, tagesschau[i]);
  assert_string_equal(l.items[0].title, "Guten Abend");
  assert_string_equal(l.items[2].title,
                      "Laut WHO \xc3\xbc"
                      "berwiegen beim AstraZeneca-Impfstoff die Vorteile");
  assert_string_equal(l.items[12].title, "Das Wetter");
  chapters_free(&l);
}

/* The chapter that a time (ms) falls in, of starts (ms, ascending). */
static size_t chapter_at(const int64_t *starts, size_t n, int64_t ms) {
  size_t k = 0;
  while (k + 1 < n && starts[k + 1] <= ms) k++;
  return k;
}

/*
 * The chunks of a transcript of a captured video, a segment every 2 or 3 s to two minutes past its last chapter's
 * start, cut at the capture's chapters: no chunk holds segments of two chapters, each chapter's first segment starts a
 * chunk, and the chunks without their overlaps are the transcript's segments, each once.
 */
static void test_chunks_never_cross_a_captured_chapter(void **state) {
  (void)state;
  static const char *const names[] = {"2026-06-07/ud9d5cMDP_0-chapters.next.json",
                                      "2026-06-07/KI7fMGRg0Wk-chapters.next.json"};
  for (size_t c = 0; c < sizeof(names) / sizeof(names[0]); c++) {
    struct chapter_list l;
    parse_capture(names[c], &l);
    assert_true(l.n > 1);
    int64_t starts[CHAPTERS_MAX];
    for (size_t i = 0; i < l.n; i++) starts[i] = l.items[i].start_s * 1000;
    size_t nseg = (size_t)((starts[l.n - 1] + 120000) / 2500);
    struct buf body = BUF_INIT;
    assert_int_equal(buf_puts(&body, "{\"language\":\"de\",\"source\":\"captions\",\"text\":\"\",\"segments\":["), 0);
    for (size_t i = 0; i < nseg; i++)
      assert_int_equal(
          buf_printf(&body, "%s{\"text\":\"satz %zu\",\"start\":%zu.5,\"duration\":2.4}", i ? "," : "", i, i * 5 / 2),
          0);
    assert_int_equal(buf_puts(&body, "]}"), 0);
    struct buf out = BUF_INIT;
    assert_int_equal(chunks_render(body.data, body.len, 500, 100, starts, l.n, &out), 0);
    char err[128];
    yajl_val root = yajl_tree_parse(out.data, err, sizeof(err));
    assert_non_null(root);
    const char *chunks_path[] = {"chunks", NULL};
    yajl_val chunks = yajl_tree_get(root, chunks_path, yajl_t_array);
    assert_non_null(chunks);
    const char *first_path[] = {"first_segment", NULL}, *end_path[] = {"end_segment", NULL};
    size_t prev_end = 0, firsts = 0;
    for (size_t i = 0; i < chunks->u.array.len; i++) {
      yajl_val ch = chunks->u.array.values[i];
      size_t first = (size_t)YAJL_GET_INTEGER(yajl_tree_get(ch, first_path, yajl_t_number));
      size_t end = (size_t)YAJL_GET_INTEGER(yajl_tree_get(ch, end_path, yajl_t_number));
      /* Segment i starts at i * 5 / 2 whole seconds and a half, as written. */
      int64_t first_ms = (int64_t)(first * 5 / 2) * 1000 + 500, last_ms = (int64_t)((end - 1) * 5 / 2) * 1000 + 500;
      assert_int_equal(chapter_at(starts, l.n, first_ms), chapter_at(starts, l.n, last_ms));
      assert_true(first <= prev_end && prev_end < end);
      if (first == prev_end && (first == 0 || chapter_at(starts, l.n, first_ms) !=
                                                  chapter_at(starts, l.n, (int64_t)((first - 1) * 5 / 2) * 1000 + 500)))
        firsts++;
      prev_end = end;
    }
    assert_int_equal(prev_end, nseg);
    /* Every chapter (each holds segments: they start at most 3 s apart) begins a chunk of its own. */
    assert_int_equal(firsts, l.n);
    yajl_tree_free(root);
    buf_free(&out);
    buf_free(&body);
    chapters_free(&l);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_our_reply_gives_the_chapters_panel_only_in_order),
      cmocka_unit_test(test_a_reply_without_the_panel_has_no_chapters),
      cmocka_unit_test(test_what_is_not_a_reply_is_refused),
      cmocka_unit_test(test_a_long_title_is_cut_between_characters),
      cmocka_unit_test(test_the_next_request_names_the_video),
      cmocka_unit_test(test_the_captures_give_their_chapters),
      cmocka_unit_test(test_chunks_never_cross_a_captured_chapter),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
