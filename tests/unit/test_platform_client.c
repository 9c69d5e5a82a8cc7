/*
 * Unit tests of the platform client's pure parts: VTS_INNERTUBE_CLIENTS, the watch page scan (on our own pages and,
 * when present, on the real captures), the timedtext URL, the mapping of platform URLs onto the upstream origin, and
 * each call as a whole request (client_*_request).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/test_skip.h"
#include <errno.h>

#include "common/config.h"
#include "fetcher/platform/client.h"
#include "fetcher/egress/upstream.h"
#include "fetcher/platform/browse.h"
#include "proto/proto.h"

/* VTS_INNERTUBE_CLIENTS against the built-in profiles. */
static int clients_parse(const char *spec, struct innertube_client *out, size_t max, size_t *n, char *err,
                         size_t errlen) {
  struct profile_set set;
  profiles_builtin(&set);
  return profiles_clients_parse(&set, spec, out, max, n, err, errlen);
}

static void test_clients_spec_parsed_in_order(void **state) {
  (void)state;
  struct innertube_client c[8];
  size_t n = 0;
  char err[256];
  assert_int_equal(clients_parse("VISIONOS:1.02,ANDROID:20.10.38", c, 8, &n, err, sizeof(err)), 0);
  assert_int_equal(n, 2);
  assert_string_equal(c[0].profile.name, "VISIONOS");
  assert_string_equal(c[0].profile.version, "1.02");
  assert_string_equal(c[0].profile.client_id, "101");
  assert_string_equal(c[1].profile.name, "ANDROID");
  assert_string_equal(c[1].profile.version, "20.10.38");
  assert_string_equal(c[1].profile.client_id, "3");
  /* A name alone takes the profile's own version. */
  assert_int_equal(clients_parse("ANDROID,VISIONOS", c, 8, &n, err, sizeof(err)), 0);
  assert_int_equal(n, 2);
  assert_string_equal(c[0].profile.version, "21.26.364");
  assert_string_equal(c[1].profile.version, "1.02");
  /* The built-ins of late 2026: ANDROID_VR is gone (every format refused from 2026-08-17). */
  assert_int_equal(clients_parse("IOS,WEB", c, 8, &n, err, sizeof(err)), 0);
  assert_string_equal(c[0].profile.version, "21.26.4");
  assert_string_equal(c[1].profile.version, "2.20260708.00.00");
  assert_int_equal(clients_parse("ANDROID_VR", c, 8, &n, err, sizeof(err)), -EINVAL);
}

static void test_clients_spec_errors_name_the_variable(void **state) {
  (void)state;
  static const char *const bad[] = {"",
                                    "ANDROID:",
                                    ":1.0",
                                    "FOO:1",
                                    "ANDROID:20.x",
                                    "ANDROID:1,",
                                    "ANDROID:1,,IOS:2",
                                    "WEB:1,WEB:1",
                                    "ANDROID:1 ,IOS:2",
                                    "A:1,B:2,C:3"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct innertube_client c[2];
    size_t n = 0;
    char err[256] = "";
    if (clients_parse(bad[i], c, 2, &n, err, sizeof(err)) != -EINVAL) fail_msg("accepted \"%s\"", bad[i]);
    assert_non_null(strstr(err, "VTS_INNERTUBE_CLIENTS"));
  }
}

static void test_clients_spec_over_the_limit_refused(void **state) {
  (void)state;
  struct innertube_client c[2];
  size_t n = 0;
  char err[256];
  assert_int_equal(clients_parse("ANDROID:1,IOS:2,WEB:3", c, 2, &n, err, sizeof(err)), -EINVAL);
  assert_int_equal(clients_parse("ANDROID:1,ANDROID:2", c, 2, &n, err, sizeof(err)), 0);
  assert_int_equal(n, 2);
}

static void scan(const char *html, struct client_page *p) { client_page_scan(html, strlen(html), p); }

static void test_page_scan_reads_key_and_visitor_data(void **state) {
  (void)state;
  struct client_page p;
  scan("<script>ytcfg.set({\"INNERTUBE_API_KEY\":\"AIzaTest_key-1\",\"VISITOR_DATA\":\"Cgt%3D\"});</script>", &p);
  assert_string_equal(p.api_key, "AIzaTest_key-1");
  assert_string_equal(p.visitor_data, "Cgt%3D");
  assert_false(p.consent_wall);
  assert_false(p.recaptcha);
  scan("{\"INNERTUBE_API_KEY\" : \"k2\", \"responseContext\":{\"visitorData\":\"V2\"}}", &p);
  assert_string_equal(p.api_key, "k2");
  assert_string_equal(p.visitor_data, "V2");
}

static void test_page_scan_refuses_unsafe_or_unterminated_values(void **state) {
  (void)state;
  struct client_page p;
  scan("\"INNERTUBE_API_KEY\":\"bad\\\"key\"", &p);
  assert_string_equal(p.api_key, "");
  scan("\"INNERTUBE_API_KEY\":\"a&b=c\"", &p);
  assert_string_equal(p.api_key, "");
  scan("\"INNERTUBE_API_KEY\":\"unterminated", &p);
  assert_string_equal(p.api_key, "");
  scan("\"INNERTUBE_API_KEY\":\"\"", &p);
  assert_string_equal(p.api_key, "");
  char big[400];
  int head = snprintf(big, sizeof(big), "\"INNERTUBE_API_KEY\":\"");
  memset(big + head, 'k', 300);
  memcpy(big + head + 300, "\"", 2);
  scan(big, &p);
  assert_string_equal(p.api_key, "");
}

static void test_page_scan_recognises_consent_wall_and_its_v(void **state) {
  (void)state;
  struct client_page p;
  scan(
      "<form action=\"https://consent.youtube.com/s\" method=\"POST\"><input type=\"hidden\" name=\"gl\" "
      "value=\"DE\"><input type=\"hidden\" name=\"v\" value=\"cb.20250101-01-p0.en+FX+7\"></form>",
      &p);
  assert_true(p.consent_wall);
  assert_string_equal(p.consent_v, "cb.20250101-01-p0.en+FX+7");
  scan(
      "<form action=\"https://consent.youtube.com/s\" method=\"POST\"><input type=\"hidden\" name=\"gl\" "
      "value=\"DE\"></form>",
      &p);
  assert_true(p.consent_wall);
  assert_string_equal(p.consent_v, "");
  scan("<form action=\"https://consent.youtube.com/s\"><input name=\"v\" value=\"x;y\"></form>", &p);
  assert_string_equal(p.consent_v, "");
}

static void test_page_scan_recognises_recaptcha(void **state) {
  (void)state;
  struct client_page p;
  scan("<form action=\"/das_captcha\" method=\"POST\"><div class=\"g-recaptcha\" data-sitekey=\"x\"></div></form>", &p);
  assert_true(p.recaptcha);
  assert_string_equal(p.api_key, "");
}

static char *read_capture(const char *name, size_t *len) {
  const char *dir = getenv("VTS_SHARED_FIXTURES");
  if (dir == NULL) return NULL;
  char path[1024];
  snprintf(path, sizeof(path), "%s/youtube-transcript-api/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  struct buf b = BUF_INIT;
  char chunk[65536];
  size_t n;
  for (;;) {
    n = fread(chunk, 1, sizeof(chunk), f);
    if (n == 0) break;
    buf_append(&b, chunk, n);
  }
  fclose(f);
  return buf_steal(&b, len);
}

/* Scans a capture into p; skips the test when the captures are not there. */
static void scan_capture(const char *name, struct client_page *p) {
  size_t len;
  char *html = read_capture(name, &len);
  if (html == NULL) {
    TEST_NOT_HERE("captures", "capture %s not found: %s", name, TEST_CAPTURES_HOWTO);
  }
  client_page_scan(html, len, p);
  free(html);
}

static void test_page_scan_on_real_captures(void **state) {
  (void)state;
  struct client_page p;
  scan_capture("youtube.html.static", &p);
  assert_false(p.consent_wall);
  assert_false(p.recaptcha);
  assert_string_equal(p.api_key, "AIzaSyAO_FJ2SlqU8Q4STEHLGCilw_Y9_11qcW8");
  assert_true(strlen(p.visitor_data) > 10);

  scan_capture("youtube_consent_page.html.static", &p);
  assert_true(p.consent_wall);
  assert_string_equal(p.consent_v, "cb.20210328-17-p0.de+FX+119");

  scan_capture("youtube_consent_page_invalid.html.static", &p);
  assert_true(p.consent_wall);
  assert_string_equal(p.consent_v, "");

  scan_capture("youtube_too_many_requests.html.static", &p);
  assert_true(p.recaptcha);
  assert_string_equal(p.api_key, "");
}

/* A configuration with nothing set but the egress budget's defaults (VTS_EGRESS_RATE, VTS_EGRESS_BURST). */
static void config_clear(struct vts_config *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->egress_rate = 900;
  cfg->egress_burst = 30;
}

static struct upstream *make_upstream(const char *url) {
  static struct vts_config cfg;
  char err[256];
  config_clear(&cfg);
  snprintf(cfg.upstream_url, sizeof(cfg.upstream_url), "%s", url);
  struct upstream *u = NULL;
  if (upstream_new(&cfg, &u, err, sizeof(err)) != 0) fail_msg("upstream_new(%s): %s", url, err);
  return u;
}

static void assert_timedtext(struct upstream *u, const char *base, int want_rv, const char *want) {
  struct buf out = BUF_INIT;
  int rv = client_timedtext_url(u, base, "", "", "", &out);
  if (rv != want_rv) fail_msg("%s: returned %d, expected %d", base, rv, want_rv);
  if (want != NULL) assert_string_equal(out.data, want);
  buf_free(&out);
}

static void test_timedtext_url_moves_to_origin_and_asks_json3(void **state) {
  (void)state;
  struct upstream *u = make_upstream("http://127.0.0.1:8999");
  assert_timedtext(u, "https://www.youtube.com/api/timedtext?v=abc&sig=1&lang=en&fmt=srv3", 0,
                   "http://127.0.0.1:8999/api/timedtext?v=abc&sig=1&lang=en&fmt=json3");
  assert_timedtext(u, "https://www.youtube.com/api/timedtext?fmt=srv1&v=abc&fmt=vtt", 0,
                   "http://127.0.0.1:8999/api/timedtext?v=abc&fmt=json3");
  assert_timedtext(u, "https://www.youtube.com/api/timedtext?v=abc&format=x&fmtx=1", 0,
                   "http://127.0.0.1:8999/api/timedtext?v=abc&format=x&fmtx=1&fmt=json3");
  assert_timedtext(u, "http://127.0.0.1:8999/api/timedtext", 0, "http://127.0.0.1:8999/api/timedtext?fmt=json3");
  assert_timedtext(u, "/api/timedtext?v=a", 0, "http://127.0.0.1:8999/api/timedtext?v=a&fmt=json3");
  assert_timedtext(u, "https://evil.example.com/api/timedtext?v=a", -EPERM, NULL);
  assert_timedtext(u, "https://www.youtube.com.evil.com/api/timedtext?v=a", -EPERM, NULL);
  assert_timedtext(u, "https://www.youtube.com/api/timedtextx?v=a", -EPERM, NULL);
  assert_timedtext(u, "https://www.youtube.com/watch?v=a", -EPERM, NULL);
  assert_timedtext(u, "ftp://www.youtube.com/api/timedtext", -EPERM, NULL);
  upstream_free(u);
}

static void test_timedtext_url_asks_a_translation_once(void **state) {
  (void)state;
  struct upstream *u = make_upstream("http://127.0.0.1:8999");
  static const struct {
    const char *base, *tlang, *want;
  } cases[] = {
      {"https://www.youtube.com/api/timedtext?v=abc&lang=en", "fr",
       "http://127.0.0.1:8999/api/timedtext?v=abc&lang=en&fmt=json3&tlang=fr"},
      /* A tlang already in the baseUrl is replaced, never sent twice. */
      {"https://www.youtube.com/api/timedtext?tlang=de&v=abc&tlang&lang=en&tlangx=1", "pt-BR",
       "http://127.0.0.1:8999/api/timedtext?v=abc&lang=en&tlangx=1&fmt=json3&tlang=pt-BR"},
      {"https://www.youtube.com/api/timedtext?v=abc&tlang=de", "",
       "http://127.0.0.1:8999/api/timedtext?v=abc&fmt=json3"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct buf out = BUF_INIT;
    assert_int_equal(client_timedtext_url(u, cases[i].base, cases[i].tlang, "", "", &out), 0);
    assert_string_equal(out.data, cases[i].want);
    buf_free(&out);
  }
  upstream_free(u);
}

/* A PO token goes on as pot, potc=1 and the reply's client: any such parameter of the baseUrl is replaced, once. */
static void test_timedtext_url_carries_a_po_token_only_when_given(void **state) {
  (void)state;
  struct upstream *u = make_upstream("http://127.0.0.1:8999");
  static const struct {
    const char *base, *tlang, *pot, *client, *want;
  } cases[] = {
      {"https://www.youtube.com/api/timedtext?v=abc&exp=xpe&lang=en", "", "MnQ-_x=", "WEB",
       "http://127.0.0.1:8999/api/timedtext?v=abc&exp=xpe&lang=en&fmt=json3&pot=MnQ-_x=&potc=1&c=WEB"},
      {"https://www.youtube.com/api/timedtext?v=abc&c=IOS&pot=old&potc=0&exp=xpo,xpv&lang=en&cx=1", "fr", "tok",
       "VISIONOS",
       "http://127.0.0.1:8999/api/"
       "timedtext?v=abc&exp=xpo,xpv&lang=en&cx=1&fmt=json3&tlang=fr&pot=tok&potc=1&c=VISIONOS"},
      /* No token: the baseUrl's own c stays as the platform wrote it. */
      {"https://www.youtube.com/api/timedtext?v=abc&c=IOS&lang=en", "", "", "WEB",
       "http://127.0.0.1:8999/api/timedtext?v=abc&c=IOS&lang=en&fmt=json3"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct buf out = BUF_INIT;
    assert_int_equal(client_timedtext_url(u, cases[i].base, cases[i].tlang, cases[i].pot, cases[i].client, &out), 0);
    assert_string_equal(out.data, cases[i].want);
    buf_free(&out);
  }
  upstream_free(u);
}

static void assert_mapped(struct upstream *u, const char *url, int want_rv, const char *want) {
  struct buf out = BUF_INIT;
  int rv = upstream_map_url(u, url, &out);
  if (rv != want_rv) fail_msg("%s: returned %d, expected %d", url, rv, want_rv);
  if (want != NULL) assert_string_equal(out.data, want);
  buf_free(&out);
}

static void test_platform_hosts_map_onto_the_configured_origin(void **state) {
  (void)state;
  struct upstream *prod = make_upstream("https://www.youtube.com");
  assert_mapped(prod, "/watch?v=x", 0, "https://www.youtube.com/watch?v=x");
  assert_mapped(prod, "https://WWW.YOUTUBE.COM/a?b=c", 0, "https://www.youtube.com/a?b=c");
  assert_mapped(prod, "https://consent.youtube.com/m?continue=x", 0, "https://consent.youtube.com/m?continue=x");
  assert_mapped(prod, "http://consent.youtube.com/m", 0, "https://consent.youtube.com/m");
  assert_mapped(prod, "https://youtube.com.evil.org/", -EPERM, NULL);
  assert_mapped(prod, "https://accounts.google.com/ServiceLogin", -EPERM, NULL);
  assert_mapped(prod, "file:///etc/passwd", -EINVAL, NULL);
  upstream_free(prod);

  struct upstream *test = make_upstream("http://127.0.0.1:8999/");
  assert_mapped(test, "https://consent.youtube.com/s", 0, "http://127.0.0.1:8999/s");
  assert_mapped(test, "https://www.youtube.com/", 0, "http://127.0.0.1:8999/");
  assert_mapped(test, "https://youtubei.googleapis.com/youtubei/v1/visitor_id?prettyPrint=false", 0,
                "http://127.0.0.1:8999/youtubei/v1/visitor_id?prettyPrint=false");
  upstream_free(test);
  prod = make_upstream("https://www.youtube.com");
  assert_mapped(prod, "https://youtubei.googleapis.com/youtubei/v1/reel/reel_item_watch?id=x", 0,
                "https://youtubei.googleapis.com/youtubei/v1/reel/reel_item_watch?id=x");
  assert_mapped(prod, "https://googleapis.com/youtubei/v1/player", -EPERM, NULL);
  upstream_free(prod);
  assert_true(upstream_api_host("youtubei.googleapis.com"));
  assert_true(upstream_api_host("www.youtube.com"));
  assert_false(upstream_api_host("consent.youtube.com"));
  assert_false(upstream_api_host("YOUTUBEI.googleapis.com"));
  assert_false(upstream_api_host("evil.example.com"));
}

/* The profile named name among the built-ins, copied. */
static struct client_profile builtin(const char *name) {
  struct profile_set set;
  profiles_builtin(&set);
  const struct client_profile *p = profiles_find(&set, name);
  assert_non_null(p);
  return *p;
}

/* Replaces each run of n characters of the nonce alphabet after marker in s by "N" (n of them), checking them. */
static void blank_nonce(char *s, const char *marker, size_t n) {
  char *at = strstr(s, marker);
  if (at == NULL) fail_msg("no %s in %s", marker, s);
  at += strlen(marker);
  for (size_t i = 0; i < n; i++) {
    if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", at[i]) == NULL || at[i] == '\0')
      fail_msg("not a nonce of %zu at %s", n, at);
    at[i] = 'N';
  }
  if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", at[n]) != NULL && at[n] != '\0')
    fail_msg("nonce longer than %zu at %s", n, at);
}

static void test_templates_expand_the_video_id_and_fresh_nonces(void **state) {
  (void)state;
  struct buf a = BUF_INIT, b = BUF_INIT;
  assert_int_equal(client_expand("id={video_id}&t={nonce:12}&c={nonce:1}", "abcdefghijk", &a), 0);
  assert_int_equal(client_expand("id={video_id}&t={nonce:12}&c={nonce:1}", "abcdefghijk", &b), 0);
  assert_string_not_equal(a.data, b.data); /* 2^78 to one against */
  blank_nonce(a.data, "t=", 12);
  blank_nonce(a.data, "c=", 1);
  assert_string_equal(a.data, "id=abcdefghijk&t=NNNNNNNNNNNN&c=N");
  buf_reset(&a);
  assert_int_equal(client_expand("plain {", "x", &a), 0);
  assert_string_equal(a.data, "plain {");
  buf_free(&a);
  buf_free(&b);
}

static void test_reel_request_is_wrapped_with_its_query_and_visitor_data(void **state) {
  (void)state;
  struct client_profile reel = builtin("ANDROID_REEL");
  struct buf url = BUF_INIT, body = BUF_INIT, ua = BUF_INIT;
  assert_int_equal(client_user_agent(&reel, &ua), 0);
  assert_string_equal(ua.data, "com.google.android.youtube/21.26.364 (Linux; U; Android 11) gzip");
  assert_int_equal(client_player_url(&reel, "abcdefghijk", "", &url), 0);
  blank_nonce(url.data, "&t=", 12);
  assert_string_equal(url.data,
                      "https://youtubei.googleapis.com/youtubei/v1/reel/reel_item_watch?prettyPrint=false"
                      "&t=NNNNNNNNNNNN&id=abcdefghijk&$fields=playerResponse");
  assert_int_equal(client_player_body(&reel, ua.data, "abcdefghijk", "Cgt%3D", &body), 0);
  blank_nonce(body.data, "\"cpn\":\"", 16);
  assert_string_equal(body.data,
                      "{\"context\":{\"client\":{\"clientName\":\"ANDROID\",\"clientVersion\":\"21.26.364\","
                      "\"clientScreen\":\"WATCH\",\"platform\":\"MOBILE\",\"osName\":\"Android\",\"osVersion\":\"11\","
                      "\"androidSdkVersion\":30,\"hl\":\"en\",\"gl\":\"US\",\"utcOffsetMinutes\":0,"
                      "\"visitorData\":\"Cgt%3D\"},\"request\":{\"internalExperimentFlags\":[],\"useSsl\":true},"
                      "\"user\":{\"lockedSafetyMode\":false}},\"playerRequest\":{\"videoId\":\"abcdefghijk\","
                      "\"contentCheckOk\":true,\"racyCheckOk\":true,\"cpn\":\"NNNNNNNNNNNNNNNN\"},"
                      "\"disablePlayerResponse\":false}");
  buf_reset(&body);
  assert_int_equal(client_visitor_body(&reel, ua.data, &body), 0);
  assert_string_equal(body.data,
                      "{\"context\":{\"client\":{\"clientName\":\"ANDROID\",\"clientVersion\":\"21.26.364\","
                      "\"clientScreen\":\"WATCH\",\"platform\":\"MOBILE\",\"osName\":\"Android\",\"osVersion\":\"11\","
                      "\"androidSdkVersion\":30,\"hl\":\"en\",\"gl\":\"US\",\"utcOffsetMinutes\":0},"
                      "\"request\":{\"internalExperimentFlags\":[],\"useSsl\":true},"
                      "\"user\":{\"lockedSafetyMode\":false}}}");
  buf_free(&url);
  buf_free(&body);
  buf_free(&ua);
}

static void test_embedded_client_sends_third_party_beside_client(void **state) {
  (void)state;
  struct client_profile web = builtin("WEB_EMBEDDED");
  struct buf url = BUF_INIT, body = BUF_INIT;
  assert_int_equal(client_player_url(&web, "abcdefghijk", "", &url), 0);
  assert_string_equal(url.data, "https://www.youtube.com/youtubei/v1/player?prettyPrint=false");
  assert_int_equal(client_player_body(&web, "ua", "abcdefghijk", "", &body), 0);
  assert_string_equal(
      body.data,
      "{\"context\":{\"client\":{\"clientName\":\"WEB_EMBEDDED_PLAYER\",\"clientVersion\":"
      "\"2.20260708.00.00\",\"clientScreen\":\"EMBED\",\"platform\":\"DESKTOP\",\"hl\":\"en\","
      "\"gl\":\"US\",\"utcOffsetMinutes\":0},\"thirdParty\":{\"embedUrl\":\"https://www.reddit.com/\"}},"
      "\"videoId\":\"abcdefghijk\",\"contentCheckOk\":true,\"racyCheckOk\":true}");
  assert_string_equal(web.origin, "https://www.youtube.com");
  assert_int_equal(web.visitor, PROFILE_VISITOR_FETCH);
  buf_free(&url);
  buf_free(&body);
}

/* The strings of a NULL-terminated header list, joined by "|", for one comparison. */
static void join_headers(const char *const *h, char *out, size_t outlen) {
  out[0] = '\0';
  for (size_t i = 0; h[i] != NULL; i++)
    snprintf(out + strlen(out), outlen - strlen(out), "%s%s", i > 0 ? "|" : "", h[i]);
}

/* A whole player call: what egress sends is the URL, body and user agent the builders make, with the client's headers.
 */
static void test_player_request_is_the_whole_call(void **state) {
  (void)state;
  struct client_profile web = builtin("WEB_EMBEDDED");
  struct client_request r = CLIENT_REQUEST_INIT;
  char headers[1024];
  assert_int_equal(client_player_request(&r, &web, "abcdefghijk", "KEY1", "Cgt%3D", "CONSENT=YES+x"), 0);
  assert_int_equal(r.req.method, UPSTREAM_POST);
  assert_string_equal(r.req.url, "https://www.youtube.com/youtubei/v1/player?prettyPrint=false&key=KEY1");
  assert_string_equal(r.req.user_agent, PROFILES_BROWSER_UA);
  assert_ptr_equal(r.req.user_agent, r.ua.data);
  assert_string_equal(r.req.body,
                      "{\"context\":{\"client\":{\"clientName\":\"WEB_EMBEDDED_PLAYER\",\"clientVersion\":"
                      "\"2.20260708.00.00\",\"clientScreen\":\"EMBED\",\"platform\":\"DESKTOP\",\"hl\":\"en\","
                      "\"gl\":\"US\",\"utcOffsetMinutes\":0,\"visitorData\":\"Cgt%3D\"},\"thirdParty\":{\"embedUrl\":"
                      "\"https://www.reddit.com/\"}},\"videoId\":\"abcdefghijk\",\"contentCheckOk\":true,"
                      "\"racyCheckOk\":true}");
  assert_int_equal(r.req.body_len, strlen(r.req.body));
  join_headers(r.req.headers, headers, sizeof(headers));
  assert_string_equal(headers,
                      "Content-Type: application/json|X-YouTube-Client-Name: 56|X-YouTube-Client-Version: "
                      "2.20260708.00.00|X-Goog-Visitor-Id: Cgt%3D|Origin: https://www.youtube.com|"
                      "Referer: https://www.reddit.com/");
  assert_string_equal(r.req.cookie, "CONSENT=YES+x");
  assert_int_equal(r.req.max_bytes, VTS_MAX_UPSTREAM_BODY_BYTES);
  client_request_free(&r);
  assert_null(r.url.data);
  assert_null(r.req.url);
  client_request_free(&r);
}

/* The visitor and browse calls share the player call's shape: a POST with the client's headers, no visitor data. */
static void test_visitor_and_browse_requests_are_posts_of_the_client(void **state) {
  (void)state;
  struct client_profile reel = builtin("ANDROID_REEL"), web = builtin("WEB");
  struct client_request r = CLIENT_REQUEST_INIT;
  char headers[1024];
  assert_int_equal(client_visitor_request(&r, &reel), 0);
  assert_int_equal(r.req.method, UPSTREAM_POST);
  assert_string_equal(r.req.url, "https://youtubei.googleapis.com/youtubei/v1/visitor_id?prettyPrint=false");
  assert_string_equal(r.req.user_agent, "com.google.android.youtube/21.26.364 (Linux; U; Android 11) gzip");
  assert_non_null(strstr(r.req.body, "\"clientName\":\"ANDROID\""));
  assert_null(strstr(r.req.body, "visitorData"));
  assert_null(r.req.cookie);
  join_headers(r.req.headers, headers, sizeof(headers));
  assert_string_equal(headers,
                      "Content-Type: application/json|X-YouTube-Client-Name: 3|X-YouTube-Client-Version: 21.26.364|"
                      "X-Goog-Api-Format-Version: 2");
  client_request_free(&r);

  assert_int_equal(client_browse_request(&r, &web, PROTO_BROWSE_CONTINUATION, "4qmFsgtoken"), 0);
  assert_int_equal(r.req.method, UPSTREAM_POST);
  assert_string_equal(r.req.url, "https://www.youtube.com/youtubei/v1/browse?prettyPrint=false");
  assert_string_equal(r.req.user_agent, PROFILES_BROWSER_UA);
  assert_non_null(strstr(r.req.body, "\"continuation\":\"4qmFsgtoken\""));
  join_headers(r.req.headers, headers, sizeof(headers));
  assert_string_equal(headers,
                      "Content-Type: application/json|X-YouTube-Client-Name: 1|X-YouTube-Client-Version: "
                      "2.20260708.00.00");
  assert_int_equal(r.req.max_bytes, VTS_MAX_UPSTREAM_BODY_BYTES);
  client_request_free(&r);
  assert_int_equal(client_browse_request(&r, &web, PROTO_BROWSE_CHANNEL, "UCabcdefghijklmnopqrstuv"), 0);
  assert_non_null(strstr(r.req.body, "\"browseId\":\"UCabcdefghijklmnopqrstuv\""));
  assert_non_null(strstr(r.req.body, "\"params\":\"" BROWSE_VIDEOS_TAB_PARAMS "\""));
  client_request_free(&r);
  char long_id[VTS_PLAYLIST_ID_MAX + 2];
  memset(long_id, 'P', sizeof(long_id) - 1);
  long_id[sizeof(long_id) - 1] = '\0';
  assert_int_equal(client_browse_request(&r, &web, PROTO_BROWSE_PLAYLIST, long_id), -EINVAL);
  client_request_free(&r);
}

/* The watch page goes as a browser, in English; a caption track as the player call's user agent, mapped and json3. */
static void test_watch_and_track_requests_are_gets(void **state) {
  (void)state;
  struct client_request r = CLIENT_REQUEST_INIT;
  char headers[1024];
  assert_int_equal(client_watch_request(&r, "abcdefghijk", NULL), 0);
  assert_int_equal(r.req.method, UPSTREAM_GET);
  assert_string_equal(r.req.url, "/watch?v=abcdefghijk");
  assert_string_equal(r.req.user_agent, PROFILES_BROWSER_UA);
  join_headers(r.req.headers, headers, sizeof(headers));
  assert_string_equal(headers, "Accept-Language: en-US,en;q=0.9");
  assert_null(r.req.cookie);
  assert_null(r.req.body);
  assert_int_equal(r.req.max_bytes, VTS_MAX_WATCH_PAGE_BYTES);
  client_request_free(&r);

  struct upstream *u = make_upstream("http://127.0.0.1:8999");
  assert_int_equal(client_track_request(&r, u, "https://www.youtube.com/api/timedtext?v=abc&fmt=srv3", "fr", "", "",
                                        "the-ua", "CONSENT=YES+x"),
                   0);
  assert_int_equal(r.req.method, UPSTREAM_GET);
  assert_string_equal(r.req.url, "http://127.0.0.1:8999/api/timedtext?v=abc&fmt=json3&tlang=fr");
  assert_string_equal(r.req.user_agent, "the-ua");
  assert_string_equal(r.req.cookie, "CONSENT=YES+x");
  assert_null(r.req.headers);
  assert_int_equal(r.req.max_bytes, VTS_MAX_UPSTREAM_BODY_BYTES);
  client_request_free(&r);
  assert_int_equal(client_track_request(&r, u, "https://evil.example.com/api/timedtext?v=a", "", "", "", "ua", NULL),
                   -EPERM);
  client_request_free(&r);
  upstream_free(u);
}

static void test_visitor_reply_read_and_checked(void **state) {
  (void)state;
  char v[CLIENT_VISITOR_DATA_MAX];
  static const char good[] = "{\"responseContext\":{\"serviceTrackingParams\":[],\"visitorData\":\"CgtA_b-%3D\"}}";
  assert_int_equal(client_visitor_reply(good, strlen(good), v), 0);
  assert_string_equal(v, "CgtA_b-%3D");
  static const char *const bad[] = {"{}",
                                    "{\"responseContext\":{}}",
                                    "{\"responseContext\":{\"visitorData\":\"a b\"}}",
                                    "{\"responseContext\":{\"visitorData\":\"\"}}",
                                    "{\"responseContext\":{\"visitorData\":7}}",
                                    "{\"responseContext\":{\"visitorData\":\"a\\u0000b\"}}",
                                    "[1]",
                                    "{\"responseContext\":"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (client_visitor_reply(bad[i], strlen(bad[i]), v) != -EPROTO) fail_msg("accepted %s", bad[i]);
    assert_string_equal(v, "");
  }
}

/* Decodes base64url (padding percent-encoded) into out; returns its length. */
static size_t b64url_decode(const char *s, unsigned char *out) {
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  uint32_t acc = 0;
  int bits = 0;
  size_t n = 0;
  for (; *s != '\0' && *s != '%'; s++) {
    const char *at = strchr(alphabet, *s);
    assert_non_null(at);
    acc = acc << 6 | (uint32_t)(at - alphabet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = (unsigned char)(acc >> bits);
    }
  }
  return n;
}

static void test_local_visitor_data_has_the_platform_form(void **state) {
  (void)state;
  char a[CLIENT_VISITOR_DATA_MAX], b[CLIENT_VISITOR_DATA_MAX];
  assert_int_equal(client_visitor_local(a), 0);
  assert_int_equal(client_visitor_local(b), 0);
  assert_string_not_equal(a, b);
  unsigned char raw[128];
  size_t n = b64url_decode(a, raw);
  /* 1: an 11-character id; 5: a varint time; 6: the place. */
  assert_true(n > 24);
  assert_int_equal(raw[0], 0x0a);
  assert_int_equal(raw[1], 11);
  assert_int_equal(raw[13], 0x28);
  assert_int_equal(raw[n - 12], 0x32);
  assert_memory_equal(raw + n - 8, "US", 2);
  size_t pad = strlen(a) - strcspn(a, "%");
  assert_int_equal(pad, ((3 - n % 3) % 3) * 3);
}

static void test_upstream_settings_checked(void **state) {
  (void)state;
  struct vts_config cfg;
  char err[256];
  static const char *const bad_urls[] = {"http://www.youtube.com", "http://10.0.0.1:80", "https://x/path",
                                         "ftp://127.0.0.1", "nonsense"};
  for (size_t i = 0; i < sizeof(bad_urls) / sizeof(bad_urls[0]); i++) {
    config_clear(&cfg);
    snprintf(cfg.upstream_url, sizeof(cfg.upstream_url), "%s", bad_urls[i]);
    if (upstream_config_check(&cfg, err, sizeof(err)) != -EINVAL) fail_msg("accepted %s", bad_urls[i]);
    assert_non_null(strstr(err, "VTS_UPSTREAM_URL"));
  }
  config_clear(&cfg);
  snprintf(cfg.upstream_url, sizeof(cfg.upstream_url), "http://localhost:1234");
  snprintf(cfg.upstream_proxy, sizeof(cfg.upstream_proxy), "http://p1:3128,socks5h://u:pw@p2:1080");
  assert_int_equal(upstream_config_check(&cfg, err, sizeof(err)), 0);
  /* A rotating proxy, and the per-entry budget options. */
  static const char *const good_proxies[] = {"rotating+http://u:pw@gw:8000",
                                             "rotating+socks5://gw:1080;rate=3600;burst=5", "http://p1:3128;rate=0",
                                             "https://p1:3128;burst=2,rotating+https://gw:443;rate=120"};
  for (size_t i = 0; i < sizeof(good_proxies) / sizeof(good_proxies[0]); i++) {
    snprintf(cfg.upstream_proxy, sizeof(cfg.upstream_proxy), "%s", good_proxies[i]);
    if (upstream_config_check(&cfg, err, sizeof(err)) != 0) fail_msg("refused %s: %s", good_proxies[i], err);
  }
  static const char *const bad_proxies[] = {"rotating+p1:3128",
                                            "rotating+ftp://u:pw@gw:21",
                                            "http://u:pw@p1:3128;rate=-1",
                                            "http://u:pw@p1:3128;rate=",
                                            "http://u:pw@p1:3128;burst=0",
                                            "http://u:pw@p1:3128;rate=1;rate=2",
                                            "http://u:pw@p1:3128;speed=9",
                                            "http://u:pw@p1:3128;rate=3600001"};
  for (size_t i = 0; i < sizeof(bad_proxies) / sizeof(bad_proxies[0]); i++) {
    snprintf(cfg.upstream_proxy, sizeof(cfg.upstream_proxy), "%s", bad_proxies[i]);
    if (upstream_config_check(&cfg, err, sizeof(err)) != -EINVAL) fail_msg("accepted %s", bad_proxies[i]);
    assert_non_null(strstr(err, "VTS_UPSTREAM_PROXY: invalid value: entry 1"));
    assert_null(strstr(err, "pw"));
  }
  snprintf(cfg.upstream_proxy, sizeof(cfg.upstream_proxy), "http://p1:3128,");
  assert_int_equal(upstream_config_check(&cfg, err, sizeof(err)), -EINVAL);
  snprintf(cfg.upstream_proxy, sizeof(cfg.upstream_proxy), "p1:3128");
  assert_int_equal(upstream_config_check(&cfg, err, sizeof(err)), -EINVAL);
  assert_null(strstr(err, "p1:3128"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_clients_spec_parsed_in_order),
      cmocka_unit_test(test_clients_spec_errors_name_the_variable),
      cmocka_unit_test(test_clients_spec_over_the_limit_refused),
      cmocka_unit_test(test_page_scan_reads_key_and_visitor_data),
      cmocka_unit_test(test_page_scan_refuses_unsafe_or_unterminated_values),
      cmocka_unit_test(test_page_scan_recognises_consent_wall_and_its_v),
      cmocka_unit_test(test_page_scan_recognises_recaptcha),
      cmocka_unit_test(test_page_scan_on_real_captures),
      cmocka_unit_test(test_timedtext_url_moves_to_origin_and_asks_json3),
      cmocka_unit_test(test_timedtext_url_asks_a_translation_once),
      cmocka_unit_test(test_timedtext_url_carries_a_po_token_only_when_given),
      cmocka_unit_test(test_platform_hosts_map_onto_the_configured_origin),
      cmocka_unit_test(test_upstream_settings_checked),
      cmocka_unit_test(test_templates_expand_the_video_id_and_fresh_nonces),
      cmocka_unit_test(test_reel_request_is_wrapped_with_its_query_and_visitor_data),
      cmocka_unit_test(test_embedded_client_sends_third_party_beside_client),
      cmocka_unit_test(test_player_request_is_the_whole_call),
      cmocka_unit_test(test_visitor_and_browse_requests_are_posts_of_the_client),
      cmocka_unit_test(test_watch_and_track_requests_are_gets),
      cmocka_unit_test(test_visitor_reply_read_and_checked),
      cmocka_unit_test(test_local_visitor_data_has_the_platform_form),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
