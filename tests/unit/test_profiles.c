/*
 * Client profiles as data (built-ins, the VTS_CLIENT_PROFILES document, its reload) and the proxies' health (which
 * proxy a job takes, rest after blocks, the one resting longest when all rest).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <errno.h>

#include "common/buf.h"
#include "common/config.h"
#include "common/util.h"
#include "fetcher/platform/profiles.h"
#include "fetcher/egress/upstream.h"

static const char *field(const struct client_profile *p, const char *key) {
  for (size_t i = 0; i < p->nfields; i++)
    if (strcmp(p->fields[i].key, key) == 0) return p->fields[i].value;
  return NULL;
}

static void test_builtins_carry_the_whole_identity(void **state) {
  (void)state;
  struct profile_set set;
  profiles_builtin(&set);
  const struct client_profile *v = profiles_find(&set, "VISIONOS");
  assert_non_null(v);
  assert_string_equal(v->client_id, "101");
  assert_string_equal(field(v, "deviceMake"), "Apple");
  assert_string_equal(field(v, "deviceModel"), "RealityDevice17,1");
  assert_true(v->user_agent_in_context);
  assert_string_equal(field(v, "osName"), "visionOS");
  assert_false(v->needs_page);
  const struct client_profile *a = profiles_find(&set, "ANDROID");
  assert_non_null(a);
  assert_string_equal(a->client_id, "3");
  assert_int_equal(strncmp(a->version, "21.", 3), 0);
  assert_non_null(strstr(a->user_agent, "{version}"));
  assert_non_null(profiles_find(&set, "WEB"));
  assert_true(profiles_find(&set, "WEB")->needs_page);
  assert_null(profiles_find(&set, "NOPE"));
}

static const char good_doc[] =
    "{\"profiles\": ["
    " {\"name\": \"VISIONOS\", \"client_id\": 101, \"version\": \"1.9\", \"user_agent\": \"UA/{version}\","
    "  \"context\": {\"deviceModel\": \"RealityDevice15,1\", \"osVersion\": \"27.0\", \"utcOffsetMinutes\": 0},"
    "  \"headers\": {\"X-Test\": \"yes\"}},"
    " {\"name\": \"TV_LITE\", \"client_id\": \"85\", \"version\": \"2.0\", \"user_agent\": \"tv\", \"needs_page\": "
    "true}"
    "]}";

static void test_document_adds_and_replaces_profiles_whole(void **state) {
  (void)state;
  struct profile_set set;
  profiles_builtin(&set);
  size_t before = set.n;
  char err[256] = "";
  assert_int_equal(profiles_apply_json(&set, good_doc, strlen(good_doc), err, sizeof(err)), 0);
  assert_int_equal(set.n, before + 1);
  const struct client_profile *v = profiles_find(&set, "VISIONOS");
  assert_string_equal(v->version, "1.9");
  assert_string_equal(field(v, "deviceModel"), "RealityDevice15,1");
  assert_null(field(v, "deviceMake")); /* replaced whole, not merged */
  assert_int_equal(v->nheaders, 1);
  assert_string_equal(v->headers[0], "X-Test: yes");
  const struct client_profile *t = profiles_find(&set, "TV_LITE");
  assert_string_equal(t->client_id, "85");
  assert_true(t->needs_page);
}

static void test_bad_documents_are_refused_with_what_is_wrong(void **state) {
  (void)state;
  static const struct {
    const char *doc, *says;
  } bad[] = {
      {"{\"profiles\": [", "not JSON"},
      {"[]", "expected {\"profiles\""},
      {"{\"profiles\": [], \"x\": 1}", "expected {\"profiles\""},
      {"{\"profiles\": [{\"name\": \"lower\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\"}]}",
       "\"name\""},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1.x\", \"user_agent\": \"u\"}]}",
       "profile A: \"version\""},
      {"{\"profiles\": [{\"name\": \"A\", \"version\": \"1\", \"user_agent\": \"u\"}]}", "are required"},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\", \"cntext\": "
       "{}}]}",
       "unknown member \"cntext\""},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\", \"context\": "
       "{\"clientName\": \"X\"}}]}",
       "context member \"clientName\""},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\", \"headers\": "
       "{\"Bad Name\": \"x\"}}]}",
       "header name"},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\", \"headers\": "
       "{\"X-Ok\": \"x\", \"Host\": \"x\"}}]}",
       "profile A: header Host is a framing or hop-by-hop header"},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\", \"headers\": "
       "{\"X-Ok\": \"x\", \"Content-Length\": \"x\"}}]}",
       "profile A: header Content-Length is a framing or hop-by-hop header"},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\", \"headers\": "
       "{\"X-Ok\": \"x\", \"transfer-encoding\": \"x\"}}]}",
       "profile A: header transfer-encoding is a framing or hop-by-hop header"},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\", \"headers\": "
       "{\"X-Ok\": \"x\", \"Connection\": \"x\"}}]}",
       "profile A: header Connection is a framing or hop-by-hop header"},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\", \"headers\": "
       "{\"X-Ok\": \"x\", \"Keep-Alive\": \"x\"}}]}",
       "profile A: header Keep-Alive is a framing or hop-by-hop header"},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\", \"headers\": "
       "{\"X-Ok\": \"x\", \"TE\": \"x\"}}]}",
       "profile A: header TE is a framing or hop-by-hop header"},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\", \"headers\": "
       "{\"X-Ok\": \"x\", \"Trailer\": \"x\"}}]}",
       "profile A: header Trailer is a framing or hop-by-hop header"},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\", \"headers\": "
       "{\"X-Ok\": \"x\", \"Upgrade\": \"x\"}}]}",
       "profile A: header Upgrade is a framing or hop-by-hop header"},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\", \"headers\": "
       "{\"X-Ok\": \"x\", \"Expect\": \"x\"}}]}",
       "profile A: header Expect is a framing or hop-by-hop header"},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\", \"headers\": "
       "{\"X-Ok\": \"x\", \"Proxy-Authorization\": \"x\"}}]}",
       "profile A: header Proxy-Authorization is a framing or hop-by-hop header"},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\", \"headers\": "
       "{\"X-Ok\": \"x\", \"proxy-connection\": \"x\"}}]}",
       "profile A: header proxy-connection is a framing or hop-by-hop header"},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\\r\\nX: y\"}]}",
       "\"user_agent\""},
      /* Twice the same member: two halves of the caps would add up past them. */
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\", \"context\": "
       "{\"f0\": 0, \"f1\": 1, \"f2\": 2, \"f3\": 3, \"f4\": 4, \"f5\": 5, \"f6\": 6, \"f7\": 7, \"f8\": 8}, "
       "\"context\": {\"f0\": 0, \"f1\": 1, \"f2\": 2, \"f3\": 3, \"f4\": 4, \"f5\": 5, \"f6\": 6, \"f7\": 7, \"f8\": "
       "8}}]}",
       "member \"context\" is given more than once"},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"user_agent\": \"u\", \"headers\": "
       "{\"H0\": \"v\", \"H1\": \"v\", \"H2\": \"v\", \"H3\": \"v\", \"H4\": \"v\"}, \"headers\": {\"H0\": \"v\", "
       "\"H1\": \"v\", \"H2\": \"v\", \"H3\": \"v\", \"H4\": \"v\"}}]}",
       "member \"headers\" is given more than once"},
      {"{\"profiles\": [{\"name\": \"A\", \"client_id\": 1, \"version\": \"1\", \"version\": \"2\", \"user_agent\": "
       "\"u\"}]}",
       "member \"version\" is given more than once"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct profile_set set;
    profiles_builtin(&set);
    struct profile_set copy = set;
    char err[256] = "";
    if (profiles_apply_json(&set, bad[i].doc, strlen(bad[i].doc), err, sizeof(err)) != -EINVAL)
      fail_msg("accepted %s", bad[i].doc);
    if (strstr(err, bad[i].says) == NULL) fail_msg("%s: message \"%s\" does not say %s", bad[i].doc, err, bad[i].says);
    assert_null(strchr(err, '\n'));
    assert_memory_equal(&set, &copy, sizeof(set));
  }
}

static void test_every_request_member_is_read(void **state) {
  (void)state;
  static const char doc[] =
      "{\"profiles\": [{\"name\": \"MY_REEL\", \"client_name\": \"ANDROID\", \"client_id\": 3, \"version\": \"21.1\","
      " \"user_agent\": \"ua\", \"host\": \"youtubei.googleapis.com\", \"path\": \"/youtubei/v1/reel/reel_item_watch\","
      " \"query\": {\"id\": \"{video_id}\", \"t\": \"{nonce:12}\"},"
      " \"context_members\": {\"thirdParty\": {\"embedUrl\": \"https://example.org/\"}, \"flags\": [1, true, null]},"
      " \"request_members\": {\"cpn\": \"{nonce:16}\"},"
      " \"wrapper\": {\"request\": \"playerRequest\", \"reply\": \"playerResponse\", \"members\": {\"x\": false}},"
      " \"visitor_data\": \"local\", \"visitor_renew_s\": 60, \"origin\": \"https://www.youtube.com\"}]}";
  struct profile_set set;
  profiles_builtin(&set);
  char err[512] = "";
  assert_int_equal(profiles_apply_json(&set, doc, strlen(doc), err, sizeof(err)), 0);
  const struct client_profile *p = profiles_find(&set, "MY_REEL");
  assert_non_null(p);
  assert_string_equal(p->client_name, "ANDROID");
  assert_string_equal(p->host, "youtubei.googleapis.com");
  assert_string_equal(p->path, "/youtubei/v1/reel/reel_item_watch");
  assert_int_equal(p->nquery, 2);
  assert_string_equal(p->query[0][0], "id");
  assert_string_equal(p->query[0][1], "{video_id}");
  assert_string_equal(p->query[1][1], "{nonce:12}");
  assert_string_equal(p->context_members,
                      ",\"thirdParty\":{\"embedUrl\":\"https://example.org/\"},\"flags\":[1,true,null]");
  assert_string_equal(p->request_members, ",\"cpn\":\"{nonce:16}\"");
  assert_string_equal(p->wrap_request, "playerRequest");
  assert_string_equal(p->wrap_reply, "playerResponse");
  assert_string_equal(p->wrap_members, ",\"x\":false");
  assert_int_equal(p->visitor, PROFILE_VISITOR_LOCAL);
  assert_int_equal(p->visitor_renew_s, 60);
  assert_string_equal(p->origin, "https://www.youtube.com");
  /* A profile that says none of them calls the player as before. */
  const struct client_profile *v = profiles_find(&set, "VISIONOS");
  assert_string_equal(v->client_name, "VISIONOS");
  assert_string_equal(v->host, "www.youtube.com");
  assert_string_equal(v->path, "/youtubei/v1/player");
  assert_int_equal(v->visitor, PROFILE_VISITOR_NONE);
  assert_int_equal(profiles_find(&set, "WEB")->visitor, PROFILE_VISITOR_PAGE);
}

/* Extra members whose JSON text, with the comma that leads it, is one byte more than fits: refused, never cut. */
static void test_members_one_byte_too_long_are_refused_not_cut(void **state) {
  (void)state;
  for (size_t last = 183; last <= 184; last++) {
    struct buf doc = BUF_INIT;
    assert_int_equal(buf_puts(&doc,
                              "{\"profiles\": [{\"name\": \"BIG\", \"client_name\": \"WEB\", \"client_id\": 1,"
                              " \"version\": \"2.1\", \"user_agent\": \"ua\", \"context_members\": {"),
                     0);
    char s[256];
    memset(s, 'x', 200);
    s[200] = '\0';
    for (int i = 0; i < 4; i++) assert_int_equal(buf_printf(&doc, "\"k%d\": \"%s\", ", i, s), 0);
    s[last] = '\0';
    assert_int_equal(buf_printf(&doc, "\"k4\": \"%s\"}}]}", s), 0);
    struct profile_set set;
    profiles_builtin(&set);
    char err[512] = "";
    int rv = profiles_apply_json(&set, doc.data, doc.len, err, sizeof(err));
    buf_free(&doc);
    if (last == 183) {
      /* ",\"k0\":\"x...x\",...,\"k4\":\"x...x\"": 1023 bytes, the most that fits. */
      assert_int_equal(rv, 0);
      const struct client_profile *p = profiles_find(&set, "BIG");
      assert_non_null(p);
      assert_int_equal(strlen(p->context_members), PROFILES_MAX_MEMBERS_TEXT - 1);
      assert_int_equal(p->context_members[PROFILES_MAX_MEMBERS_TEXT - 2], '"');
    } else {
      assert_int_equal(rv, -EINVAL);
      assert_string_equal(err, "profile BIG: \"context_members\" is too long as JSON (at most 1023 bytes)");
    }
  }
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_source_reloads_a_changed_file_and_keeps_the_old_on_error(void **state) {
  (void)state;
  char path[] = "/tmp/vts-profiles-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  write_file(path, good_doc);
  struct profile_source *src = malloc(sizeof(*src));
  assert_non_null(src);
  char err[256] = "";
  assert_int_equal(profiles_source_init(src, path, err, sizeof(err)), 0);
  assert_string_equal(profiles_find(&src->set, "VISIONOS")->version, "1.9");
  assert_int_equal(profiles_source_refresh(src), 0); /* unchanged: not re-read */

  write_file(path,
             "{\"profiles\": [{\"name\": \"VISIONOS\", \"client_id\": 101, \"version\": \"2.25\", "
             "\"user_agent\": \"u\"}]}");
  assert_int_equal(profiles_source_refresh(src), 1);
  assert_string_equal(profiles_find(&src->set, "VISIONOS")->version, "2.25");
  assert_null(profiles_find(&src->set, "TV_LITE"));

  write_file(path, "{\"profiles\": [{\"name\": \"VISIONOS\"");
  assert_int_equal(profiles_source_refresh(src), 0);
  assert_string_equal(profiles_find(&src->set, "VISIONOS")->version, "2.25");
  assert_int_equal(profiles_source_refresh(src), 0); /* the same broken version is not read again */

  unlink(path);
  assert_int_equal(profiles_source_refresh(src), 0);
  assert_string_equal(profiles_find(&src->set, "VISIONOS")->version, "2.25");

  write_file(path, "not json");
  assert_int_equal(profiles_source_init(src, path, err, sizeof(err)), -EINVAL);
  assert_non_null(strstr(err, "VTS_CLIENT_PROFILES"));
  unlink(path);
  free(src);
}

static void test_clients_resolve_against_file_profiles(void **state) {
  (void)state;
  struct profile_set set;
  profiles_builtin(&set);
  char err[256] = "";
  assert_int_equal(profiles_apply_json(&set, good_doc, strlen(good_doc), err, sizeof(err)), 0);
  struct innertube_client c[4];
  size_t n = 0;
  assert_int_equal(profiles_clients_parse(&set, "TV_LITE,VISIONOS:3.1", c, 4, &n, err, sizeof(err)), 0);
  assert_int_equal(n, 2);
  assert_string_equal(c[0].profile.name, "TV_LITE");
  assert_string_equal(c[1].profile.version, "3.1");
  assert_int_equal(profiles_clients_parse(&set, "NOPE", c, 4, &n, err, sizeof(err)), -EINVAL);
  assert_non_null(strstr(err, "unknown client \"NOPE\" (known: VISIONOS, ANDROID"));
}

/* An upstream through the proxies of list, with VTS_EGRESS_RATE rate and VTS_EGRESS_BURST burst. */
static struct upstream *with_proxies(struct vts_config *cfg, const char *list, int64_t rest_ms, int64_t rate,
                                     int64_t burst) {
  memset(cfg, 0, sizeof(*cfg));
  snprintf(cfg->upstream_url, sizeof(cfg->upstream_url), "http://127.0.0.1:9");
  snprintf(cfg->upstream_proxy, sizeof(cfg->upstream_proxy), "%s", list);
  cfg->proxy_rest_ms = rest_ms;
  cfg->egress_rate = rate;
  cfg->egress_burst = burst;
  struct upstream *u = NULL;
  char err[256];
  if (upstream_new(cfg, &u, err, sizeof(err)) != 0) fail_msg("upstream_new: %s", err);
  return u;
}

static struct upstream *two_proxies_resting(struct vts_config *cfg, int64_t rest_ms) {
  /* The defaults of VTS_EGRESS_RATE and VTS_EGRESS_BURST. */
  return with_proxies(cfg, "http://127.0.0.1:8,http://u:secret@127.0.0.1:7", rest_ms, 900, 30);
}

static struct upstream *two_proxies(struct vts_config *cfg) { return two_proxies_resting(cfg, 60000); }

static void block(struct upstream *u, int proxy, int times) {
  for (int i = 0; i < times; i++) {
    assert_int_equal(upstream_use_egress(u, proxy), 0);
    upstream_egress_report(u, 1);
  }
}

/* The proxy a new job takes. */
static int chosen(struct upstream *u) {
  upstream_begin_job(u, util_now_ms() + 1000, "t");
  return upstream_job_proxy_index(u);
}

/* Waits for the clock itself: the rest under test is a length of time. */
static void wait_until(uint64_t t) {
  while (util_now_ms() < t) usleep(5000); /* the wait is the test: a rest is a length of time */
}

static void test_proxies_alternate_and_a_blocked_one_rests(void **state) {
  (void)state;
  struct vts_config cfg;
  struct upstream *u = two_proxies(&cfg);
  uint64_t deadline = util_now_ms() + 1000;
  upstream_begin_job(u, deadline, "t");
  assert_int_equal(upstream_job_proxy_index(u), 1);
  upstream_egress_report(u, 1); /* one block: not resting yet */
  upstream_begin_job(u, deadline, "t");
  assert_int_equal(upstream_job_proxy_index(u), 2);
  upstream_egress_report(u, 0);
  upstream_begin_job(u, deadline, "t");
  assert_int_equal(upstream_job_proxy_index(u), 1);
  upstream_egress_report(u, 1); /* second in a row: proxy 1 rests */
  for (int i = 0; i < 4; i++) {
    upstream_begin_job(u, deadline, "t");
    assert_int_equal(upstream_job_proxy_index(u), 2);
    /* The job may still move: to the resting proxy, the only one it has not tried. */
    assert_int_equal(upstream_next_egress(u), 0);
    assert_int_equal(upstream_job_proxy_index(u), 1);
    assert_int_equal(upstream_next_egress(u), -ENOENT);
  }
  upstream_free(u);
}

static void test_when_all_rest_the_one_resting_longest_is_tried(void **state) {
  (void)state;
  struct vts_config cfg;
  struct upstream *u = two_proxies(&cfg);
  uint64_t deadline = util_now_ms() + 1000;
  /* Proxy 1 goes to rest first, then proxy 2. */
  for (int i = 0; i < 2; i++) {
    assert_int_equal(upstream_use_egress(u, 1), 0);
    upstream_egress_report(u, 1);
  }
  usleep(2000); /* the wait is the test: proxy 1 began to rest before proxy 2 */
  for (int i = 0; i < 2; i++) {
    assert_int_equal(upstream_use_egress(u, 2), 0);
    upstream_egress_report(u, 1);
  }
  for (int i = 0; i < 3; i++) {
    upstream_begin_job(u, deadline, "t");
    assert_int_equal(upstream_job_proxy_index(u), 1);
  }
  upstream_free(u);
}

/* A rotating proxy is many addresses: blocks never rest it, and a blocked job moves to it again (a new connection). */
static void test_rotating_proxy_never_rests_and_takes_the_next_attempt(void **state) {
  (void)state;
  struct vts_config cfg;
  struct upstream *u = with_proxies(&cfg, "rotating+http://u:secret@127.0.0.1:7", 60000, 900, 30);
  upstream_begin_job(u, util_now_ms() + 1000, "t");
  assert_int_equal(upstream_job_proxy_index(u), 1);
  /* curl is given the URL without its prefix. */
  assert_string_equal(upstream_job_proxy(u), "http://u:secret@127.0.0.1:7");
  for (int i = 0; i < 5; i++) {
    upstream_egress_report(u, 1);
    assert_true(upstream_has_next_egress(u));
    assert_int_equal(upstream_next_egress(u), 0);
    assert_int_equal(upstream_job_proxy_index(u), 1);
  }
  assert_int_equal(upstream_rest_left_ms(u), 0);
  /* Nor do its translations rest: the next one goes out from another address. */
  upstream_translation_report(u, 1);
  assert_int_equal(upstream_translation_rest_left_ms(u), 0);
  assert_int_equal(upstream_translation_egress(u), 0);
  assert_int_equal(upstream_job_proxy_index(u), 1);
  upstream_free(u);
}

/* A proxy whose budget is spent gives way to one whose budget holds a unit; with every budget spent, health decides. */
static void test_a_spent_budget_gives_way_to_another_proxy(void **state) {
  (void)state;
  struct vts_config cfg;
  /* One request an hour on each proxy: proxy 1 by its own option, proxy 2 by VTS_EGRESS_RATE and VTS_EGRESS_BURST. */
  struct upstream *u = with_proxies(&cfg, "http://127.0.0.1:8;rate=1;burst=1,http://127.0.0.1:7", 60000, 1, 1);
  struct upstream_request req = {.method = UPSTREAM_GET, .url = "/watch?v=x", .max_bytes = 1024};
  struct upstream_response resp = {0};
  upstream_begin_job(u, util_now_ms() + 1000, "t");
  assert_int_equal(upstream_job_proxy_index(u), 1);
  /* Nothing listens on the proxy: the request spends its unit and fails to connect. */
  assert_int_equal(upstream_fetch(u, &req, &resp), -ENETUNREACH);
  assert_int_equal(upstream_fetch(u, &req, &resp), -EAGAIN);
  assert_int_equal(resp.outcome.outcome, PROTO_UPSTREAM_FAILED);
  assert_int_equal(resp.outcome.reason, PROTO_REASON_BUDGET);
  assert_string_equal(resp.outcome.detail, "egress_budget");
  /* Proxy 2 still holds its unit: the first egress the job could use has one now. */
  assert_int_equal(upstream_budget_wait_ms(u), 0);
  for (int i = 0; i < 3; i++) {
    upstream_begin_job(u, util_now_ms() + 1000, "t");
    assert_int_equal(upstream_job_proxy_index(u), 2);
  }
  assert_int_equal(upstream_fetch(u, &req, &resp), -ENETUNREACH);
  uint64_t wait = upstream_budget_wait_ms(u);
  assert_true(wait > 3590000 && wait <= 3600000);
  struct proto_egress rep[PROTO_MAX_EGRESS];
  assert_int_equal(upstream_budget_report(u, rep), 2);
  assert_int_equal(rep[0].egress, 1);
  assert_int_equal(rep[0].left, 0);
  assert_int_equal(rep[1].egress, 2);
  assert_int_equal(rep[1].left, 0);
  buf_free(&resp.body);
  upstream_free(u);
}

static void test_rest_doubles_with_each_further_block_and_a_served_job_resets_it(void **state) {
  (void)state;
  struct vts_config cfg;
  struct upstream *u = two_proxies_resting(&cfg, 300);
  block(u, 2, 8); /* proxy 2 rests for its longest (300 ms doubled up to 16 times): it is the fallback below */
  wait_until(util_now_ms() + 2);
  block(u, 1, 2); /* two in a row: proxy 1 rests 300 ms */
  uint64_t after = util_now_ms();
  assert_int_equal(chosen(u), 2); /* both rest: proxy 2 has rested longer */
  wait_until(after + 310);
  assert_int_equal(chosen(u), 1);

  uint64_t before = util_now_ms();
  block(u, 1, 1); /* a further block: 600 ms */
  after = util_now_ms();
  wait_until(before + 350);
  assert_int_equal(chosen(u), 2);
  wait_until(after + 610);
  assert_int_equal(chosen(u), 1);

  upstream_egress_report(u, 0); /* served: the row and the doubling end */
  block(u, 1, 1);
  assert_int_equal(chosen(u), 1); /* one block alone does not rest it */
  block(u, 1, 1);
  after = util_now_ms();
  assert_int_equal(chosen(u), 2);
  wait_until(after + 310); /* 300 ms again, not 1200 */
  assert_int_equal(chosen(u), 1);
  upstream_free(u);
}

/* The direct route (no proxy configured) rests as a proxy does, and says until when. */
static void test_the_direct_route_rests_and_says_when_it_is_back(void **state) {
  (void)state;
  struct vts_config cfg;
  struct upstream *u = with_proxies(&cfg, "", 60000, 900, 30); /* no proxy: the direct route */
  upstream_begin_job(u, util_now_ms() + 1000, "t");
  assert_int_equal(upstream_job_proxy_index(u), 0);
  upstream_egress_report(u, 1);
  assert_int_equal(upstream_rest_left_ms(u), 0); /* one block: not resting yet */
  upstream_egress_report(u, 1);
  uint64_t left = upstream_rest_left_ms(u);
  assert_true(left > 59000 && left <= 60000);
  upstream_egress_report(u, 1); /* a further block doubles it */
  left = upstream_rest_left_ms(u);
  assert_true(left > 119000 && left <= 120000);
  upstream_egress_report(u, 0); /* served: the rest is over */
  assert_int_equal(upstream_rest_left_ms(u), 0);
  upstream_free(u);
}

/* Every proxy must rest for a Retry-After; its value is the first to come back. */
static void test_rest_left_is_the_first_proxy_back_when_all_rest(void **state) {
  (void)state;
  struct vts_config cfg;
  struct upstream *u = two_proxies_resting(&cfg, 60000);
  block(u, 1, 2);
  assert_int_equal(upstream_rest_left_ms(u), 0); /* proxy 2 does not rest */
  block(u, 2, 3);                                /* 120 s */
  uint64_t left = upstream_rest_left_ms(u);
  assert_true(left > 59000 && left <= 60000);
  upstream_free(u);
}

/*
 * A throttled translation rests the translations through that egress at once, not the egress: untranslated jobs keep
 * it, translation jobs take another proxy, and with every egress's translations resting they are refused until the
 * first comes back.
 */
static void test_translations_rest_apart_from_their_egress(void **state) {
  (void)state;
  struct vts_config cfg;
  struct upstream *u = two_proxies_resting(&cfg, 60000);
  assert_int_equal(upstream_use_egress(u, 1), 0);
  upstream_translation_report(u, 1);
  assert_int_equal(upstream_rest_left_ms(u), 0);
  assert_int_equal(upstream_translation_rest_left_ms(u), 0); /* proxy 2 still translates */
  /* Untranslated jobs go on alternating over both proxies. */
  int seen[3] = {0};
  for (int i = 0; i < 4; i++) seen[chosen(u)]++;
  assert_int_equal(seen[1], 2);
  assert_int_equal(seen[2], 2);
  /* A translation job that started on proxy 1 moves to proxy 2 before its first request; on proxy 2 it stays. */
  for (int i = 0; i < 4; i++) {
    upstream_begin_job(u, util_now_ms() + 1000, "t");
    assert_int_equal(upstream_translation_egress(u), 0);
    assert_int_equal(upstream_job_proxy_index(u), 2);
    /* Proxy 1 was not used: the job may still move there after a block. */
    assert_int_equal(upstream_next_egress(u), 0);
    assert_int_equal(upstream_job_proxy_index(u), 1);
  }
  /* Proxy 2 throttles too: translations rest everywhere, until proxy 1's come back. */
  assert_int_equal(upstream_use_egress(u, 2), 0);
  upstream_translation_report(u, 1);
  uint64_t left = upstream_translation_rest_left_ms(u);
  assert_true(left > 58000 && left <= 60000);
  upstream_begin_job(u, util_now_ms() + 1000, "t");
  assert_int_equal(upstream_translation_egress(u), -EAGAIN);
  assert_int_equal(upstream_rest_left_ms(u), 0); /* the egresses themselves never rested */
  /* A second throttle in a row doubles; a translation served ends the rest. */
  upstream_translation_report(u, 1);
  assert_true(upstream_translation_rest_left_ms(u) > 58000);
  assert_int_equal(upstream_use_egress(u, 1), 0);
  upstream_translation_report(u, 0);
  assert_int_equal(upstream_translation_rest_left_ms(u), 0);
  upstream_begin_job(u, util_now_ms() + 1000, "t");
  assert_int_equal(upstream_translation_egress(u), 0);
  assert_int_equal(upstream_job_proxy_index(u), 1);
  upstream_free(u);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_builtins_carry_the_whole_identity),
      cmocka_unit_test(test_document_adds_and_replaces_profiles_whole),
      cmocka_unit_test(test_bad_documents_are_refused_with_what_is_wrong),
      cmocka_unit_test(test_every_request_member_is_read),
      cmocka_unit_test(test_members_one_byte_too_long_are_refused_not_cut),
      cmocka_unit_test(test_source_reloads_a_changed_file_and_keeps_the_old_on_error),
      cmocka_unit_test(test_clients_resolve_against_file_profiles),
      cmocka_unit_test(test_proxies_alternate_and_a_blocked_one_rests),
      cmocka_unit_test(test_when_all_rest_the_one_resting_longest_is_tried),
      cmocka_unit_test(test_rest_doubles_with_each_further_block_and_a_served_job_resets_it),
      cmocka_unit_test(test_the_direct_route_rests_and_says_when_it_is_back),
      cmocka_unit_test(test_rest_left_is_the_first_proxy_back_when_all_rest),
      cmocka_unit_test(test_translations_rest_apart_from_their_egress),
      cmocka_unit_test(test_rotating_proxy_never_rests_and_takes_the_next_attempt),
      cmocka_unit_test(test_a_spent_budget_gives_way_to_another_proxy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
