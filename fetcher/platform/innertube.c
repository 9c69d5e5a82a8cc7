#include "fetcher/platform/innertube.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/percent.h"
#include "fetcher/captions/captions.h"
#include "fetcher/platform/player.h"
#include "fetcher/speech/speech.h"
#include "fetcher/captions/transcript.h"

/*
 * The clients we know how to impersonate. Versions come from the configuration (they change every few months);
 * what else a client sends (device fields, user agent shape) is stable and lives here. A client that "needs the
 * page" follows the flow of the captures: the watch page gives INNERTUBE_API_KEY and visitorData, then the player
 * endpoint is called with ?key=.
 */
struct client_kind {
  const char *name;
  int needs_page;
  const char *ua_prefix; /* user agent: prefix, then the version when ua_versioned, then suffix */
  int ua_versioned;
  const char *ua_suffix;
  const char *context_extra; /* members added to context.client, each followed by a comma */
  const char *client_id;     /* X-YouTube-Client-Name, NULL when none is sent */
};

#define BROWSER_UA \
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"

static const struct client_kind kinds[] = {
    {"VISIONOS", 0,
     "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 "
     "Safari/605.1.15",
     0, "",
     "\"deviceMake\":\"Apple\",\"deviceModel\":\"RealityDevice14,1\",\"osName\":\"visionOS\","
     "\"osVersion\":\"1.3.21O771\",",
     NULL},
    {"ANDROID", 1, "com.google.android.youtube/", 1, " (Linux; U; Android 11) gzip",
     "\"androidSdkVersion\":30,\"osName\":\"Android\",\"osVersion\":\"11\",", "3"},
    {"IOS", 0, "com.google.ios.youtube/", 1, " (iPhone16,2; U; CPU iOS 17_5_1 like Mac OS X;)",
     "\"deviceMake\":\"Apple\",\"deviceModel\":\"iPhone16,2\",\"osName\":\"iPhone\",\"osVersion\":\"17.5.1.21F90\",",
     "5"},
    {"WEB", 1, BROWSER_UA, 0, "", "", "1"},
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

struct innertube {
  const struct vts_config *cfg;
  struct upstream *up;
  struct innertube_client clients[VTS_INNERTUBE_MAX_CLIENTS];
  size_t nclients;
};

int innertube_clients_parse(const char *spec, struct innertube_client *out, size_t max, size_t *n, char *err,
                            size_t errlen) {
  size_t count = 0;
  const char *p = spec;
  for (;;) {
    size_t len = strcspn(p, ",");
    const char *colon = memchr(p, ':', len);
    if (count == max) {
      snprintf(err, errlen, "VTS_INNERTUBE_CLIENTS: invalid value: at most %zu clients", max);
      return -EINVAL;
    }
    struct innertube_client *c = &out[count];
    size_t name_len = colon ? (size_t)(colon - p) : 0;
    size_t ver_len = colon ? len - name_len - 1 : 0;
    if (colon == NULL || name_len == 0 || name_len >= sizeof(c->name) || ver_len == 0 ||
        ver_len >= sizeof(c->version) || strspn(colon + 1, "0123456789.") < ver_len) {
      snprintf(err, errlen,
               "VTS_INNERTUBE_CLIENTS: invalid value: expected NAME:VERSION[,NAME:VERSION...] "
               "with a version of digits and dots");
      return -EINVAL;
    }
    memcpy(c->name, p, name_len);
    c->name[name_len] = '\0';
    memcpy(c->version, colon + 1, ver_len);
    c->version[ver_len] = '\0';
    c->kind = -1;
    for (size_t k = 0; k < NKINDS; k++)
      if (strcmp(kinds[k].name, c->name) == 0) c->kind = (int)k;
    if (c->kind < 0) {
      snprintf(err, errlen,
               "VTS_INNERTUBE_CLIENTS: invalid value: unknown client \"%.31s\" (known: VISIONOS, "
               "ANDROID, IOS, WEB)",
               c->name);
      return -EINVAL;
    }
    /* Trying the same client twice would repeat a request the platform has already refused. */
    for (size_t i = 0; i < count; i++) {
      if (strcmp(out[i].name, c->name) == 0 && strcmp(out[i].version, c->version) == 0) {
        snprintf(err, errlen, "VTS_INNERTUBE_CLIENTS: invalid value: %.31s:%.31s is listed twice", c->name, c->version);
        return -EINVAL;
      }
    }
    count++;
    if (p[len] == '\0') break;
    p += len + 1;
  }
  *n = count;
  return 0;
}

#define ALNUM "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

/* Copies the characters from v up to the next '"' when they are all allowed and fit; else leaves out empty. */
static void copy_quoted(const char *v, const char *end, const char *allowed, char *out, size_t outlen) {
  out[0] = '\0';
  size_t n = 0;
  while (v + n < end && v[n] != '"') {
    if (v[n] == '\0' || strchr(allowed, v[n]) == NULL) return;
    n++;
  }
  if (v + n >= end || n == 0 || n >= outlen) return;
  memcpy(out, v, n);
  out[n] = '\0';
}

/*
 * The value of the first "key": "value" pair named key. Whitespace around the colon is accepted: the page is
 * minified today, and might not stay so.
 */
static void find_value(const char *html, size_t len, const char *key, const char *allowed, char *out, size_t outlen) {
  out[0] = '\0';
  const char *end = html + len;
  const char *at = memmem(html, len, key, strlen(key));
  if (at == NULL) return;
  const char *v = at + strlen(key);
  while (v < end && (*v == ' ' || *v == ':')) v++;
  if (v < end && *v == '"') copy_quoted(v + 1, end, allowed, out, outlen);
}

static int contains(const char *html, size_t len, const char *needle) {
  return memmem(html, len, needle, strlen(needle)) != NULL;
}

void innertube_page_scan(const char *html, size_t len, struct innertube_page *out) {
  memset(out, 0, sizeof(*out));
  out->consent_wall = contains(html, len, "action=\"https://consent.youtube.com");
  /* The wall's hidden field <input type="hidden" name="v" value="..."> is what answers it. */
  static const char v_field[] = "name=\"v\" value=\"";
  const char *v = out->consent_wall ? memmem(html, len, v_field, strlen(v_field)) : NULL;
  if (v != NULL) copy_quoted(v + strlen(v_field), html + len, ALNUM "._+-", out->consent_v, sizeof(out->consent_v));
  out->recaptcha = contains(html, len, "class=\"g-recaptcha\"");
  find_value(html, len, "\"INNERTUBE_API_KEY\"", ALNUM "_-", out->api_key, sizeof(out->api_key));
  find_value(html, len, "\"VISITOR_DATA\"", ALNUM "_-%=", out->visitor_data, sizeof(out->visitor_data));
  if (out->visitor_data[0] == '\0')
    find_value(html, len, "\"visitorData\"", ALNUM "_-%=", out->visitor_data, sizeof(out->visitor_data));
}

int innertube_timedtext_url(const struct upstream *up, const char *base_url, struct buf *out) {
  struct buf mapped = BUF_INIT;
  int rv = upstream_map_url(up, base_url, &mapped);
  if (rv != 0) goto fail;
  const char *path = strstr(mapped.data, "://");
  path = path ? path + 3 + strcspn(path + 3, "/") : mapped.data;
  size_t path_len = strcspn(path, "?#");
  /* A caption URL that leads anywhere but the timedtext endpoint is not a caption URL. */
  rv = -EPERM;
  if (path_len != strlen("/api/timedtext") || strncmp(path, "/api/timedtext", path_len) != 0) goto fail;
  rv = buf_append(out, mapped.data, (size_t)(path - mapped.data) + path_len);
  if (rv != 0) goto fail;
  const char *q = path + path_len;
  char sep = '?';
  if (*q == '?') {
    q++;
    /* Keep every parameter in its order except fmt, which we choose. */
    while (*q != '\0' && *q != '#') {
      size_t n = strcspn(q, "&#");
      if (n > 0 && !(n >= 4 && strncmp(q, "fmt=", 4) == 0) && !(n == 3 && strncmp(q, "fmt", 3) == 0)) {
        rv = buf_printf(out, "%c%.*s", sep, (int)n, q);
        if (rv != 0) goto fail;
        sep = '&';
      }
      q += n;
      if (*q == '&') q++;
    }
  }
  rv = buf_printf(out, "%cfmt=json3", sep);
fail:
  buf_free(&mapped);
  return rv;
}

int innertube_new(const struct vts_config *cfg, struct upstream *up, struct innertube **out, char *err, size_t errlen) {
  struct innertube *it = calloc(1, sizeof(*it));
  if (it == NULL) return -ENOMEM;
  it->cfg = cfg;
  it->up = up;
  int rv = innertube_clients_parse(cfg->innertube_clients, it->clients, VTS_INNERTUBE_MAX_CLIENTS, &it->nclients, err,
                                   errlen);
  if (rv != 0) {
    free(it);
    return rv;
  }
  *out = it;
  return 0;
}

void innertube_free(struct innertube *it) { free(it); }

/* The state of one job's flow. */
struct flow {
  struct innertube *it;
  const char *video_id;
  const char *lang;
  const char *request_id;
  int speech;     /* a speech job: a playable reply goes to the speech pipeline instead of its caption tracks */
  int page_state; /* 0 not fetched, 1 usable, -1 failed (never fetched again in this job) */
  struct innertube_page page;
  char cookie[160]; /* "CONSENT=YES+..." once the consent wall was answered, else "" */
  struct upstream_response resp;
};

/* How a step ended: the job is decided, or this client was refused and the next one may be tried. */
enum step { STEP_DONE, STEP_NEXT };

static void set_result(struct innertube_result *res, uint8_t outcome, const char *detail) {
  res->outcome = outcome;
  snprintf(res->detail, sizeof(res->detail), "%s", detail);
}

/*
 * Performs req into f->resp and accepts only a 200. Otherwise sets res (a transport error or "http_<status>") and
 * returns the error of upstream_fetch, or -EIO for another status.
 */
static int fetch_200(struct flow *f, const struct upstream_request *req, struct innertube_result *res) {
  int rv = upstream_fetch(f->it->up, req, &f->resp);
  if (rv != 0) {
    set_result(res, rv == -ENOMEM ? PROTO_INTERNAL : PROTO_UPSTREAM_FAILED, upstream_strerror(rv));
    return rv;
  }
  if (f->resp.status != 200) {
    res->outcome = PROTO_UPSTREAM_FAILED;
    snprintf(res->detail, sizeof(res->detail), "http_%ld", f->resp.status);
    return -EIO;
  }
  return 0;
}

static int get_watch_page(struct flow *f, struct innertube_result *res) {
  char url[64];
  snprintf(url, sizeof(url), "/watch?v=%s", f->video_id);
  static const char *const headers[] = {"Accept-Language: en-US,en;q=0.9", NULL};
  struct upstream_request req = {
      .method = UPSTREAM_GET,
      .url = url,
      .user_agent = BROWSER_UA,
      .headers = headers,
      .max_bytes = VTS_MAX_WATCH_PAGE_BYTES,
  };
  /* Once for the page, once more after answering a consent wall: never more. */
  for (int attempt = 0; attempt < 2; attempt++) {
    req.cookie = f->cookie[0] ? f->cookie : NULL;
    int rv = fetch_200(f, &req, res);
    if (rv != 0) return rv;
    innertube_page_scan(f->resp.body.data ? f->resp.body.data : "", f->resp.body.len, &f->page);
    if (!f->page.consent_wall) break;
    if (attempt > 0 || f->page.consent_v[0] == '\0') {
      set_result(res, PROTO_UPSTREAM_FAILED, "consent");
      return -EIO;
    }
    snprintf(f->cookie, sizeof(f->cookie), "CONSENT=YES+%s", f->page.consent_v);
  }
  if (f->page.recaptcha) {
    set_result(res, PROTO_UPSTREAM_FAILED, "recaptcha");
    return -EIO;
  }
  if (f->page.api_key[0] == '\0') {
    set_result(res, PROTO_UPSTREAM_FAILED, "no_api_key");
    return -EIO;
  }
  return 0;
}

static int build_player_body(const struct flow *f, const struct innertube_client *c, struct buf *body) {
  const struct client_kind *k = &kinds[c->kind];
  int rv = buf_printf(body,
                      "{\"context\":{\"client\":{\"clientName\":\"%s\",\"clientVersion\":\"%s\",%s"
                      "\"hl\":\"en\",\"gl\":\"US\",\"utcOffsetMinutes\":0",
                      c->name, c->version, k->context_extra);
  if (rv == 0 && k->needs_page && f->page.visitor_data[0] != '\0') {
    /* The page holds it percent-encoded; a value with a malformed escape is left out rather than sent mangled. */
    char decoded[sizeof(f->page.visitor_data)];
    long n = percent_decode(f->page.visitor_data, strlen(f->page.visitor_data), decoded, sizeof(decoded), 0);
    if (n >= 0) {
      rv = buf_puts(body, ",\"visitorData\":\"");
      if (rv == 0) rv = buf_json_escape(body, decoded, (size_t)n);
      if (rv == 0) rv = buf_puts(body, "\"");
    }
  }
  if (rv == 0)
    rv = buf_printf(body, "}},\"videoId\":\"%s\",\"contentCheckOk\":true,\"racyCheckOk\":true}", f->video_id);
  return rv;
}

static enum step fetch_track(struct flow *f, const char *user_agent, const struct caption_track *track,
                             struct innertube_result *res) {
  struct buf url = BUF_INIT;
  struct segment_list segs = {0};
  int rv = innertube_timedtext_url(f->it->up, track->base_url, &url);
  if (rv != 0) {
    set_result(res, rv == -ENOMEM ? PROTO_INTERNAL : PROTO_UPSTREAM_FAILED, "bad_track_url");
    goto done;
  }
  struct upstream_request req = {
      .method = UPSTREAM_GET,
      .url = url.data,
      .user_agent = user_agent,
      .cookie = f->cookie[0] ? f->cookie : NULL,
      .max_bytes = VTS_MAX_UPSTREAM_BODY_BYTES,
  };
  if (fetch_200(f, &req, res) != 0) goto done;
  /* The platform answers an empty 200 to a track it will not serve us (a PO token it wanted, for one). */
  if (f->resp.body.len == 0) {
    set_result(res, PROTO_UPSTREAM_FAILED, "empty_captions");
    goto done;
  }
  if (captions_parse(f->resp.body.data, f->resp.body.len, &segs) != 0) {
    set_result(res, PROTO_UPSTREAM_FAILED, "bad_captions");
    goto done;
  }
  if (segs.len == 0) {
    set_result(res, PROTO_NO_CAPTIONS, "empty_track");
    goto done;
  }
  rv = transcript_serialize(&segs, track->lang, "captions", &res->body);
  if (rv == -EILSEQ) {
    set_result(res, PROTO_UPSTREAM_FAILED, "bad_utf8");
  } else if (rv != 0) {
    set_result(res, PROTO_INTERNAL, rv == -E2BIG ? "transcript_too_large" : "no_memory");
  } else {
    set_result(res, PROTO_OK, "ok");
    snprintf(res->lang, sizeof(res->lang), "%s", track->lang);
  }
done:
  if (res->outcome != PROTO_OK) buf_reset(&res->body);
  segment_list_free(&segs);
  buf_free(&url);
  return STEP_DONE;
}

static const char *not_playable_detail(enum playability p) {
  switch (p) {
    case PLAY_LOGIN_REQUIRED:
      return "login_required";
    case PLAY_UNAVAILABLE:
      return "unavailable";
    case PLAY_UNPLAYABLE:
      return "unplayable";
    case PLAY_LIVE_OFFLINE:
      return "live_offline";
    default:
      return "not_playable";
  }
}

/*
 * A speech job on a playable reply: the audio through the job's proxy (the platform binds audio URLs to the address
 * that asked for the player reply), recognised into segments, serialised with source "speech".
 */
static enum step speech_step(struct flow *f, const struct player_info *pi, struct innertube_result *res) {
  struct segment_list sl;
  memset(&sl, 0, sizeof(sl));
  char lang[16] = "", detail[64] = "";
  int outcome = speech_transcribe_via(f->it->cfg, pi, upstream_job_proxy(f->it->up), upstream_job_deadline(f->it->up),
                                      &sl, lang, detail, sizeof(detail));
  set_result(res, (uint8_t)outcome, detail);
  if (outcome == PROTO_OK) {
    int rv = transcript_serialize(&sl, lang, "speech", &res->body);
    if (rv != 0)
      set_result(res, PROTO_INTERNAL, rv == -E2BIG ? "transcript_too_large" : "serialize_failed");
    else
      snprintf(res->lang, sizeof(res->lang), "%s", lang);
  }
  segment_list_free(&sl);
  return STEP_DONE;
}

static enum step try_client(struct flow *f, const struct innertube_client *c, struct innertube_result *res) {
  const struct client_kind *k = &kinds[c->kind];
  enum step step = STEP_NEXT;
  struct buf url = BUF_INIT, body = BUF_INIT, ua = BUF_INIT;
  struct player_info pi;
  memset(&pi, 0, sizeof(pi));
  char h_name[64] = "", h_version[64], h_visitor[600] = "";
  const char *headers[5];
  size_t nh = 0;
  headers[nh++] = "Content-Type: application/json";
  if (k->client_id != NULL) {
    snprintf(h_name, sizeof(h_name), "X-YouTube-Client-Name: %s", k->client_id);
    headers[nh++] = h_name;
  }
  snprintf(h_version, sizeof(h_version), "X-YouTube-Client-Version: %s", c->version);
  headers[nh++] = h_version;
  if (k->needs_page && f->page.visitor_data[0] != '\0') {
    snprintf(h_visitor, sizeof(h_visitor), "X-Goog-Visitor-Id: %s", f->page.visitor_data);
    headers[nh++] = h_visitor;
  }
  headers[nh] = NULL;

  int rv = k->needs_page ? buf_printf(&url, "/youtubei/v1/player?key=%s&prettyPrint=false", f->page.api_key)
                         : buf_puts(&url, "/youtubei/v1/player?prettyPrint=false");
  if (rv == 0) rv = build_player_body(f, c, &body);
  if (rv == 0) rv = buf_printf(&ua, "%s%s%s", k->ua_prefix, k->ua_versioned ? c->version : "", k->ua_suffix);
  if (rv != 0) {
    set_result(res, PROTO_INTERNAL, "no_memory");
    step = STEP_DONE;
    goto done;
  }
  struct upstream_request req = {
      .method = UPSTREAM_POST,
      .url = url.data,
      .body = body.data,
      .body_len = body.len,
      .user_agent = ua.data,
      .headers = headers,
      .cookie = f->cookie[0] ? f->cookie : NULL,
      .max_bytes = VTS_MAX_UPSTREAM_BODY_BYTES,
  };
  rv = fetch_200(f, &req, res);
  if (rv != 0) {
    /* Out of time or memory: no other client can do better in this job. */
    if (rv == -ETIMEDOUT || rv == -ENOMEM) step = STEP_DONE;
    goto done;
  }
  if (player_parse(f->resp.body.data ? f->resp.body.data : "", f->resp.body.len, &pi) != 0) {
    set_result(res, PROTO_UPSTREAM_FAILED, "bad_player_reply");
    goto done;
  }
  step = STEP_DONE;
  /* A bot check is about us, not the video: another client may pass. Any other refusal is the video's. */
  if (pi.playability == PLAY_BOT_CHECK) {
    set_result(res, PROTO_UPSTREAM_FAILED, "bot_check");
    step = STEP_NEXT;
    goto done;
  }
  if (pi.playability != PLAY_OK) {
    set_result(res, PROTO_NOT_AVAILABLE, not_playable_detail(pi.playability));
    goto done;
  }
  if (f->speech) {
    step = speech_step(f, &pi, res);
    goto done;
  }
  if (pi.ntracks == 0) {
    set_result(res, PROTO_NO_CAPTIONS, "no_captions");
    goto done;
  }
  int idx = player_choose_track(&pi, f->lang);
  if (idx < 0 || (size_t)idx >= pi.ntracks) {
    /* Tracks exist but none is usable without a PO token: another client may be given usable ones. */
    set_result(res, PROTO_UPSTREAM_FAILED, "po_token");
    step = STEP_NEXT;
    goto done;
  }
  step = fetch_track(f, ua.data, &pi.tracks[idx], res);
done:
  if (step == STEP_NEXT) {
    char client[72];
    snprintf(client, sizeof(client), "%s:%s", c->name, c->version);
    log_msg(LOG_INFO, "player client refused", "request_id", f->request_id, "client", client, "detail", res->detail,
            NULL);
  }
  player_info_free(&pi);
  buf_free(&url);
  buf_free(&body);
  buf_free(&ua);
  return step;
}

static void run_flow(struct flow *f, struct innertube_result *res);

void innertube_fetch_captions(struct innertube *it, const char *video_id, const char *lang, const char *request_id,
                              struct innertube_result *res) {
  struct flow f = {.it = it, .video_id = video_id, .lang = lang, .request_id = request_id};
  run_flow(&f, res);
}

void innertube_fetch_speech(struct innertube *it, const char *video_id, const char *request_id,
                            struct innertube_result *res) {
  struct flow f = {.it = it, .video_id = video_id, .lang = "", .request_id = request_id, .speech = 1};
  run_flow(&f, res);
}

/* The clients in turn, the watch page fetched once for those that need it, until one decides the job. */
static void run_flow(struct flow *f, struct innertube_result *res) {
  struct innertube *it = f->it;
  res->lang[0] = '\0';
  buf_reset(&res->body);
  set_result(res, PROTO_INTERNAL, "no_clients");
  for (size_t i = 0; i < it->nclients; i++) {
    const struct innertube_client *c = &it->clients[i];
    if (kinds[c->kind].needs_page) {
      if (f->page_state == 0) f->page_state = get_watch_page(f, res) == 0 ? 1 : -1;
      if (f->page_state < 0) {
        /* The page failed for this client; one that does not need it may still get through. */
        if (strcmp(res->detail, "timeout") == 0 || res->outcome == PROTO_INTERNAL) break;
        continue;
      }
    }
    if (try_client(f, c, res) == STEP_DONE) break;
  }
  buf_free(&f->resp.body);
}
