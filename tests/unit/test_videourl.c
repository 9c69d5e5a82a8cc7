/*
 * Unit tests of video_url resolution: every accepted form, every rejected shape (lookalike hosts, userinfo, other
 * schemes, playlists, channels, clips, bad ids), and what arrives after the query string was decoded once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "common/limits.h"
#include "gateway/http/videourl.h"

#define ID "aB3_-9zZ0xY"

struct url_case {
  const char *url;
  const char *id; /* NULL: must be rejected */
};

/* Checks every case and names the failing URL in the message, so one table covers many shapes. */
static void check_cases(const struct url_case *cases, size_t n) {
  int failures = 0;
  for (size_t i = 0; i < n; i++) {
    char id[12];
    memset(id, 'Q', sizeof(id));
    int rc = videourl_parse(cases[i].url, strlen(cases[i].url), id);
    if (cases[i].id != NULL) {
      if (rc != 0 || strcmp(id, cases[i].id) != 0) {
        print_error("expected %s -> %s, got rc=%d id=%.11s\n", cases[i].url, cases[i].id, rc, rc == 0 ? id : "");
        failures++;
      }
    } else if (rc != -EINVAL || id[0] != '\0') {
      print_error("expected %s to be rejected with -EINVAL and an empty id, got rc=%d\n", cases[i].url, rc);
      failures++;
    }
  }
  assert_int_equal(failures, 0);
}

static void test_watch_urls_are_accepted_on_every_platform_host(void **state) {
  (void)state;
  static const struct url_case cases[] = {
      {"https://www.youtube.com/watch?v=" ID, ID}, {"https://youtube.com/watch?v=" ID, ID},
      {"https://m.youtube.com/watch?v=" ID, ID},   {"https://music.youtube.com/watch?v=" ID, ID},
      {"http://www.youtube.com/watch?v=" ID, ID},  {"HTTPS://WWW.YOUTUBE.COM/watch?v=" ID, ID},
      {"HtTp://YouTube.Com/watch?v=" ID, ID},
  };
  check_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_watch_v_is_found_at_any_position_among_other_parameters(void **state) {
  (void)state;
  static const struct url_case cases[] = {
      {"https://www.youtube.com/watch?v=" ID "&t=42s", ID},
      {"https://www.youtube.com/watch?v=" ID "&t=42s&list=PLabcdefghijkl&index=3", ID},
      {"https://www.youtube.com/watch?feature=share&v=" ID, ID},
      {"https://www.youtube.com/watch?list=PLabcdefghijkl&v=" ID "&t=1", ID},
      {"https://www.youtube.com/watch?&&v=" ID "&", ID},
      {"https://www.youtube.com/watch?vv=zzzzzzzzzzzz&v=" ID, ID},
      {"https://www.youtube.com/watch?v=" ID "#t=30", ID},
  };
  check_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_path_forms_are_accepted_with_trailing_slash_query_or_fragment(void **state) {
  (void)state;
  static const struct url_case cases[] = {
      {"https://youtu.be/" ID, ID},
      {"https://youtu.be/" ID "?t=42", ID},
      {"https://youtu.be/" ID "?si=abcdef&t=42", ID},
      {"https://youtu.be/" ID "/", ID},
      {"https://youtu.be/" ID "#frag", ID},
      {"https://www.youtube.com/shorts/" ID, ID},
      {"https://youtube.com/shorts/" ID "?feature=share", ID},
      {"https://www.youtube.com/live/" ID, ID},
      {"https://www.youtube.com/live/" ID "?si=x", ID},
      {"https://www.youtube.com/embed/" ID, ID},
      {"https://www.youtube.com/embed/" ID "?start=10&autoplay=1", ID},
      {"https://www.youtube.com/v/" ID, ID},
      {"https://www.youtube.com/e/" ID "/", ID},
      {"https://m.youtube.com/shorts/" ID "/", ID},
      {"https://www.youtube-nocookie.com/embed/" ID, ID},
      {"https://youtube-nocookie.com/embed/" ID "?rel=0", ID},
  };
  check_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_default_ports_and_one_trailing_host_dot_are_accepted(void **state) {
  (void)state;
  static const struct url_case cases[] = {
      {"https://www.youtube.com:443/watch?v=" ID, ID},    {"http://www.youtube.com:80/watch?v=" ID, ID},
      {"https://youtube.com./watch?v=" ID, ID},           {"https://youtu.be./" ID, ID},
      {"https://www.youtube.com:80/watch?v=" ID, NULL},   {"http://www.youtube.com:443/watch?v=" ID, NULL},
      {"https://www.youtube.com:8443/watch?v=" ID, NULL}, {"https://www.youtube.com:/watch?v=" ID, NULL},
      {"https://www.youtube.com:0443/watch?v=" ID, NULL}, {"https://youtube.com../watch?v=" ID, NULL},
      {"https://.youtube.com/watch?v=" ID, NULL},
  };
  check_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_lookalike_hosts_and_userinfo_are_rejected(void **state) {
  (void)state;
  static const struct url_case cases[] = {
      {"https://youtube.com@evil.com/watch?v=" ID, NULL},
      {"https://evil.com@youtube.com/watch?v=" ID, NULL},
      {"https://user:pass@www.youtube.com/watch?v=" ID, NULL},
      {"https://youtube.com.evil.com/watch?v=" ID, NULL},
      {"https://evilyoutube.com/watch?v=" ID, NULL},
      {"https://youtu.be.evil/" ID, NULL},
      {"https://notyoutu.be/" ID, NULL},
      {"https://www.youtube.co/watch?v=" ID, NULL},
      {"https://gaming.youtube.com/watch?v=" ID, NULL},
      {"https://www.m.youtube.com/watch?v=" ID, NULL},
      {"https://youtube.com%2eevil.com/watch?v=" ID, NULL},
      {"https://youtube%2Ecom/watch?v=" ID, NULL},
      {"https://evil.com\\@youtube.com/watch?v=" ID, NULL},
      {"https://evil.com/watch?v=" ID "&host=youtube.com", NULL},
      {"https://evil.com/https://www.youtube.com/watch?v=" ID, NULL},
      {"https://[::1]/watch?v=" ID, NULL},
      {"https://127.0.0.1/watch?v=" ID, NULL},
      {"https:///watch?v=" ID, NULL},
  };
  check_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_other_schemes_and_relative_urls_are_rejected(void **state) {
  (void)state;
  static const struct url_case cases[] = {
      {"ftp://www.youtube.com/watch?v=" ID, NULL},
      {"javascript://www.youtube.com/watch?v=" ID, NULL},
      {"file:///watch?v=" ID, NULL},
      {"//www.youtube.com/watch?v=" ID, NULL},
      {"www.youtube.com/watch?v=" ID, NULL},
      {"youtu.be/" ID, NULL},
      {"https:/www.youtube.com/watch?v=" ID, NULL},
      {"https:www.youtube.com/watch?v=" ID, NULL},
      {"httpss://www.youtube.com/watch?v=" ID, NULL},
      {ID, NULL},
      {"", NULL},
  };
  check_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_playlists_channels_and_clips_are_rejected(void **state) {
  (void)state;
  static const struct url_case cases[] = {
      {"https://www.youtube.com/playlist?list=PLabcdefghijkl", NULL},
      {"https://www.youtube.com/watch?list=PLabcdefghijkl", NULL},
      {"https://www.youtube.com/embed/videoseries?list=PLabcdefghijkl", NULL},
      {"https://www.youtube.com/@somechannel", NULL},
      {"https://www.youtube.com/@abcdefghijk", NULL},
      {"https://www.youtube.com/channel/" ID, NULL},
      {"https://www.youtube.com/c/" ID, NULL},
      {"https://www.youtube.com/user/" ID, NULL},
      {"https://www.youtube.com/clip/" ID, NULL},
      {"https://www.youtube.com/", NULL},
      {"https://www.youtube.com", NULL},
      {"https://www.youtube.com?v=" ID, NULL},
      {"https://www.youtube.com/results?search_query=" ID, NULL},
      {"https://www.youtube.com/" ID, NULL},
      {"https://youtu.be/", NULL},
      {"https://youtu.be", NULL},
      {"https://youtu.be.", NULL},
      {"https://youtu.be?v=" ID, NULL},
      {"https://youtu.be#" ID, NULL},
      {"https://youtube-nocookie.com", NULL},
      {"https://youtube-nocookie.com/embed", NULL},
      {"https://youtu.be/watch?v=" ID, NULL},
      {"https://www.youtube-nocookie.com/watch?v=" ID, NULL},
      {"https://www.youtube-nocookie.com/shorts/" ID, NULL},
  };
  check_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_empty_long_short_and_odd_ids_are_rejected(void **state) {
  (void)state;
  static const struct url_case cases[] = {
      {"https://www.youtube.com/watch?v=", NULL},
      {"https://www.youtube.com/watch?v", NULL},
      {"https://www.youtube.com/watch?v=abc", NULL},
      {"https://www.youtube.com/watch?v=" ID "x", NULL},
      {"https://www.youtube.com/watch?v=aB3_-9zZ0x", NULL},
      {"https://www.youtube.com/watch?v=aB3_-9zZ0x!", NULL},
      {"https://www.youtube.com/watch?v=aB3_-9zZ0x%59", NULL},
      {"https://www.youtube.com/watch?v=" ID "&v=" ID, NULL},
      {"https://www.youtube.com/watch?v=" ID "&v=zzzzzzzzzzz", NULL},
      {"https://www.youtube.com/watch?V=" ID, NULL},
      {"https://www.youtube.com/Watch?v=" ID, NULL},
      {"https://www.youtube.com/watch/?v=" ID, NULL},
      {"https://www.youtube.com/watch;v=" ID, NULL},
      {"https://youtu.be/" ID "x", NULL},
      {"https://youtu.be/" ID "/x", NULL},
      {"https://youtu.be/" ID "//", NULL},
      {"https://www.youtube.com/shorts/" ID "/extra", NULL},
      {"https://www.youtube.com/shorts/", NULL},
      {"https://www.youtube.com/embed/" ID "x", NULL},
      {"https://www.youtube.com/shorts/aB3_-9zZ0x%59", NULL},
      {"https://www.youtube.com/Shorts/" ID, NULL},
  };
  check_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

/*
 * query.c decodes the parameter once: what arrives here is the client's URL as typed. A raw '+' from an unencoded
 * URL arrives as a space, and bytes outside printable ASCII never belong to a URL.
 */
static void test_spaces_controls_and_non_ascii_are_rejected(void **state) {
  (void)state;
  static const struct url_case cases[] = {
      {"https://www.youtube.com/watch?v=" ID "&q=a b", NULL},
      {" https://www.youtube.com/watch?v=" ID, NULL},
      {"https://www.youtube.com/watch?v=" ID " ", NULL},
      {"https://www.youtube.com/watch?v=" ID "\t", NULL},
      {"https://www.youtube.com/watch?v=" ID "\r\n", NULL},
      {"https://www.youtube.com/watch?v=" ID "&q=\xc3\xa9", NULL},
      {"https://www.yout\xc3\xbc"
       "be.com/watch?v=" ID,
       NULL},
  };
  check_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

static void test_embedded_nul_is_rejected(void **state) {
  (void)state;
  static const char url[] = "https://youtu.be/" ID "\0evil";
  char id[12];
  assert_int_equal(videourl_parse(url, sizeof(url) - 1, id), -EINVAL);
  static const char url2[] = "https://youtu.be\0.evil.com/" ID;
  assert_int_equal(videourl_parse(url2, sizeof(url2) - 1, id), -EINVAL);
}

static void test_length_is_bounded_by_the_limit(void **state) {
  (void)state;
  static char url[VTS_MAX_VIDEO_URL_BYTES + 2];
  const char *prefix = "https://www.youtube.com/watch?v=" ID "&pad=";
  size_t plen = strlen(prefix);
  memcpy(url, prefix, plen);
  memset(url + plen, 'a', sizeof(url) - plen);
  char id[12];
  assert_int_equal(videourl_parse(url, VTS_MAX_VIDEO_URL_BYTES, id), 0);
  assert_string_equal(id, ID);
  assert_int_equal(videourl_parse(url, VTS_MAX_VIDEO_URL_BYTES + 1, id), -EINVAL);
  assert_string_equal(id, "");
}

static void test_only_the_given_length_is_read(void **state) {
  (void)state;
  /* The caller's buffer is not NUL-terminated: the id ends at len even when more id characters follow. */
  static const char url[] = "https://youtu.be/" ID "ZZZZ";
  char id[12];
  assert_int_equal(videourl_parse(url, sizeof(url) - 1 - 4, id), 0);
  assert_string_equal(id, ID);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_watch_urls_are_accepted_on_every_platform_host),
      cmocka_unit_test(test_watch_v_is_found_at_any_position_among_other_parameters),
      cmocka_unit_test(test_path_forms_are_accepted_with_trailing_slash_query_or_fragment),
      cmocka_unit_test(test_default_ports_and_one_trailing_host_dot_are_accepted),
      cmocka_unit_test(test_lookalike_hosts_and_userinfo_are_rejected),
      cmocka_unit_test(test_other_schemes_and_relative_urls_are_rejected),
      cmocka_unit_test(test_playlists_channels_and_clips_are_rejected),
      cmocka_unit_test(test_empty_long_short_and_odd_ids_are_rejected),
      cmocka_unit_test(test_spaces_controls_and_non_ascii_are_rejected),
      cmocka_unit_test(test_embedded_nul_is_rejected),
      cmocka_unit_test(test_length_is_bounded_by_the_limit),
      cmocka_unit_test(test_only_the_given_length_is_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
