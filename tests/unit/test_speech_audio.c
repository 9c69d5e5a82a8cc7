/* Audio format choice, the download host policy, and ranged downloads against the fake media host. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/config.h"
#include "common/limits.h"
#include "common/util.h"
#include "fetcher/speech/audio.h"
#include "proto/proto.h"
#include "test_speech_util.h"

static struct audio_format fmt(const char *url, int itag, int64_t len, int64_t bitrate, int64_t dur_ms,
                               const char *mime, int is_default) {
  struct audio_format f = {.url = (char *)url,
                           .itag = itag,
                           .content_length = len,
                           .bitrate = bitrate,
                           .duration_ms = dur_ms,
                           .is_default = is_default};
  snprintf(f.mime, sizeof(f.mime), "%s", mime);
  return f;
}

#define M4A "audio/mp4; codecs=\"mp4a.40.2\""
#define WEBM "audio/webm; codecs=\"opus\""
#define U "https://rr1---sn-abc.googlevideo.com/videoplayback?itag=1"

static int choose(struct audio_format *formats, size_t n) {
  struct player_info pi = {.audio = formats, .naudio = n, .default_track = -1};
  return audio_choose(&pi);
}

static void test_smallest_format_by_content_length_is_chosen(void **state) {
  (void)state;
  struct audio_format f[] = {fmt(U, 140, 3000000, 130000, 180000, M4A, 1), fmt(U, 249, 1100000, 50000, 180000, WEBM, 1),
                             fmt(U, 251, 2900000, 140000, 180000, WEBM, 1)};
  assert_int_equal(choose(f, 3), 1);
}

static void test_bitrate_times_duration_stands_in_for_missing_length(void **state) {
  (void)state;
  /* 48 kbit/s for 100 s is 600 kB, smaller than the 1 MB of the other... */
  struct audio_format f[] = {fmt(U, 140, 1000000, 130000, 100000, M4A, 1), fmt(U, 139, -1, 48000, 100000, M4A, 1)};
  assert_int_equal(choose(f, 2), 1);
  /* ...exactly: one byte less wins over it, one byte more does not. */
  struct audio_format less[] = {fmt(U, 139, -1, 48000, 100000, M4A, 1), fmt(U, 140, 599999, 130000, 100000, M4A, 1)};
  assert_int_equal(choose(less, 2), 1);
  struct audio_format more[] = {fmt(U, 139, -1, 48000, 100000, M4A, 1), fmt(U, 140, 600001, 130000, 100000, M4A, 1)};
  assert_int_equal(choose(more, 2), 0);
}

static void test_format_of_unknown_size_comes_last(void **state) {
  (void)state;
  struct audio_format f[] = {fmt(U, 1, -1, 0, -1, M4A, 1), fmt(U, 2, 9000000, 0, -1, WEBM, 1)};
  assert_int_equal(choose(f, 2), 1);
}

static void test_default_audio_track_wins_over_smaller_dubs(void **state) {
  (void)state;
  struct audio_format f[] = {fmt(U, 249, 500000, 0, -1, WEBM, 0), fmt(U, 251, 2000000, 0, -1, WEBM, 1),
                             fmt(U, 140, 3000000, 0, -1, M4A, 1)};
  assert_int_equal(choose(f, 3), 1);
}

static void test_formats_without_url_or_decodable_mime_are_skipped(void **state) {
  (void)state;
  struct audio_format f[] = {fmt(NULL, 249, 100, 0, -1, WEBM, 1), fmt("", 250, 200, 0, -1, WEBM, 1),
                             fmt(U, 600, 300, 0, -1, "audio/mp4a-latm", 1), fmt(U, 251, 5000, 0, -1, WEBM, 1)};
  assert_int_equal(choose(f, 4), 3);
}

static void test_no_usable_format_is_enoent(void **state) {
  (void)state;
  struct audio_format f[] = {fmt(NULL, 249, 100, 0, -1, WEBM, 1), fmt(U, 18, 100, 0, -1, "video/mp4", 1)};
  assert_int_equal(choose(f, 2), -ENOENT);
  assert_int_equal(choose(NULL, 0), -ENOENT);
}

static void test_download_hosts_are_matched_on_a_dot_boundary(void **state) {
  (void)state;
  struct vts_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  snprintf(cfg.upstream_url, sizeof(cfg.upstream_url), "https://www.youtube.com");
  assert_int_equal(audio_url_allowed("https://rr3---sn-4g5e6nzz.googlevideo.com/videoplayback?x=1", &cfg), 0);
  assert_int_equal(audio_url_allowed("https://RR3---SN-X.GoogleVideo.com/videoplayback", &cfg), 0);
  assert_int_equal(audio_url_allowed("https://www.youtube.com/audio", &cfg), 0);
  assert_int_equal(audio_url_allowed("https://googlevideo.com/videoplayback", &cfg), -EPERM);
  assert_int_equal(audio_url_allowed("https://evilgooglevideo.com/videoplayback", &cfg), -EPERM);
  assert_int_equal(audio_url_allowed("https://x.googlevideo.com.evil.example/videoplayback", &cfg), -EPERM);
  assert_int_equal(audio_url_allowed("https://evil.example/x.googlevideo.com", &cfg), -EPERM);
  assert_int_equal(audio_url_allowed("https://evil.example/?.googlevideo.com", &cfg), -EPERM);
  assert_int_equal(audio_url_allowed("https://x.googlevideo.com@evil.example/", &cfg), -EPERM);
  assert_int_equal(audio_url_allowed("https://m.youtube.com/audio", &cfg), -EPERM);
  assert_int_equal(audio_url_allowed("not a url", &cfg), -EPERM);
}

static void test_plain_http_only_on_loopback(void **state) {
  (void)state;
  struct vts_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  snprintf(cfg.upstream_url, sizeof(cfg.upstream_url), "http://127.0.0.1:8999");
  assert_int_equal(audio_url_allowed("http://rr1---sn-x.googlevideo.com/videoplayback", &cfg), -EPERM);
  assert_int_equal(audio_url_allowed("ftp://rr1---sn-x.googlevideo.com/videoplayback", &cfg), -EPERM);
  assert_int_equal(audio_url_allowed("http://127.0.0.1:8999/audio", &cfg), 0);
  /* The upstream's host is allowed on any port; another loopback name is another host. */
  assert_int_equal(audio_url_allowed("http://127.0.0.1:1234/audio", &cfg), 0);
  assert_int_equal(audio_url_allowed("http://localhost:8999/audio", &cfg), -EPERM);
}

struct dl {
  int rv; /* the outcome */
  uint8_t reason;
  struct buf out;
  char detail[64];
};

static void download(const char *path, uint64_t timeout_ms, struct dl *d) {
  struct vts_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  snprintf(cfg.upstream_url, sizeof(cfg.upstream_url), "http://127.0.0.1:%d", th_shared_server.port);
  char url[512];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", th_shared_server.port, path);
  d->out = (struct buf)BUF_INIT;
  struct fetch_outcome res;
  d->rv = audio_download(url, &cfg, NULL, util_now_ms() + timeout_ms, &d->out, &res);
  assert_int_equal(res.outcome, d->rv);
  d->reason = res.reason;
  snprintf(d->detail, sizeof(d->detail), "%s", res.detail);
}

static void assert_pattern(const struct buf *b, size_t n) {
  assert_int_equal(b->len, n);
  for (size_t i = 0; i < n; i++) {
    if ((unsigned char)b->data[i] != (unsigned char)((i * 7 + 3) % 256)) fail_msg("byte %zu differs", i);
  }
}

static void test_download_is_fetched_in_ranged_chunks(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  /* The fake host refuses unranged requests and ranges over 1 MiB, like the platform's throttle. */
  size_t n = 2 * VTS_AUDIO_CHUNK_BYTES + 12345;
  char path[64];
  snprintf(path, sizeof(path), "/audio/pattern/%zu", n);
  struct dl d;
  download(path, 20000, &d);
  assert_int_equal(d.rv, PROTO_OK);
  assert_pattern(&d.out, n);
  buf_free(&d.out);
}

static void test_download_of_exactly_one_chunk(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  char path[64];
  snprintf(path, sizeof(path), "/audio/pattern/%ld", (long)VTS_AUDIO_CHUNK_BYTES);
  struct dl d;
  download(path, 20000, &d);
  assert_int_equal(d.rv, PROTO_OK);
  assert_pattern(&d.out, VTS_AUDIO_CHUNK_BYTES);
  buf_free(&d.out);
}

static void test_server_ignoring_range_still_gives_the_whole_file(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  struct dl d;
  download("/audio/norange/5000", 10000, &d);
  assert_int_equal(d.rv, PROTO_OK);
  assert_pattern(&d.out, 5000);
  buf_free(&d.out);
}

static void test_http_error_is_eio_with_its_status(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  struct dl d;
  download("/audio/status/403", 10000, &d);
  assert_int_equal(d.rv, PROTO_UPSTREAM_FAILED);
  assert_int_equal(d.reason, PROTO_REASON_SPEECH);
  assert_string_equal(d.detail, "audio_http_403");
  assert_int_equal(d.out.len, 0);
  buf_free(&d.out);
}

static void test_mismatched_content_range_is_eio(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  struct dl d;
  download("/audio/badrange/5000", 10000, &d);
  assert_int_equal(d.rv, PROTO_UPSTREAM_FAILED);
  assert_int_equal(d.reason, PROTO_REASON_SPEECH);
  assert_string_equal(d.detail, "audio_bad_range");
  assert_int_equal(d.out.len, 0);
  buf_free(&d.out);
}

static void test_redirect_within_allowed_hosts_is_followed(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  char path[256];
  snprintf(path, sizeof(path), "/audio/redirect?to=http%%3A%%2F%%2F127.0.0.1%%3A%d%%2Faudio%%2Fpattern%%2F3000",
           th_shared_server.port);
  struct dl d;
  download(path, 10000, &d);
  assert_int_equal(d.rv, PROTO_OK);
  assert_pattern(&d.out, 3000);
  buf_free(&d.out);
}

static void test_redirect_to_another_host_is_refused(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  char path[256];
  snprintf(path, sizeof(path), "/audio/redirect?to=http%%3A%%2F%%2Flocalhost%%3A%d%%2Faudio%%2Fpattern%%2F3000",
           th_shared_server.port);
  struct dl d;
  download(path, 10000, &d);
  assert_int_equal(d.rv, PROTO_UPSTREAM_FAILED);
  assert_int_equal(d.reason, PROTO_REASON_SPEECH);
  assert_string_equal(d.detail, "audio_redirect_refused");
  assert_int_equal(d.out.len, 0);
  buf_free(&d.out);
}

static void test_redirect_loop_is_eio(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  struct dl d;
  download("/audio/loop", 10000, &d);
  assert_int_equal(d.rv, PROTO_UPSTREAM_FAILED);
  assert_int_equal(d.reason, PROTO_REASON_SPEECH);
  assert_string_equal(d.detail, "audio_redirect_loop");
  assert_int_equal(d.out.len, 0);
  buf_free(&d.out);
}

static void test_refused_url_fails_before_any_request(void **state) {
  (void)state;
  struct vts_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  snprintf(cfg.upstream_url, sizeof(cfg.upstream_url), "https://www.youtube.com");
  struct buf out = BUF_INIT;
  struct fetch_outcome res;
  assert_int_equal(audio_download("https://evil.example/a.m4a", &cfg, NULL, util_now_ms() + 1000, &out, &res),
                   PROTO_UPSTREAM_FAILED);
  assert_int_equal(res.reason, PROTO_REASON_SPEECH);
  assert_string_equal(res.detail, "audio_url_refused");
  assert_int_equal(out.len, 0);
  buf_free(&out);
}

static void test_passed_deadline_is_an_upstream_failure(void **state) {
  (void)state;
  TH_SKIP_UNLESS(th_server_ready);
  struct dl d;
  download("/audio/pattern/100", 0, &d);
  assert_int_equal(d.rv, PROTO_UPSTREAM_FAILED);
  assert_int_equal(d.reason, PROTO_REASON_SPEECH);
  assert_string_equal(d.detail, "audio_timeout");
  buf_free(&d.out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_smallest_format_by_content_length_is_chosen),
      cmocka_unit_test(test_bitrate_times_duration_stands_in_for_missing_length),
      cmocka_unit_test(test_format_of_unknown_size_comes_last),
      cmocka_unit_test(test_default_audio_track_wins_over_smaller_dubs),
      cmocka_unit_test(test_formats_without_url_or_decodable_mime_are_skipped),
      cmocka_unit_test(test_no_usable_format_is_enoent),
      cmocka_unit_test(test_download_hosts_are_matched_on_a_dot_boundary),
      cmocka_unit_test(test_plain_http_only_on_loopback),
      cmocka_unit_test(test_download_is_fetched_in_ranged_chunks),
      cmocka_unit_test(test_download_of_exactly_one_chunk),
      cmocka_unit_test(test_server_ignoring_range_still_gives_the_whole_file),
      cmocka_unit_test(test_http_error_is_eio_with_its_status),
      cmocka_unit_test(test_mismatched_content_range_is_eio),
      cmocka_unit_test(test_redirect_within_allowed_hosts_is_followed),
      cmocka_unit_test(test_redirect_to_another_host_is_refused),
      cmocka_unit_test(test_redirect_loop_is_eio),
      cmocka_unit_test(test_refused_url_fails_before_any_request),
      cmocka_unit_test(test_passed_deadline_is_an_upstream_failure),
  };
  return cmocka_run_group_tests(tests, th_shared_server_setup, th_shared_server_teardown);
}
