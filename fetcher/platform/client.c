#include "fetcher/platform/client.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "fetcher/platform/browse.h"
#include "fetcher/platform/chapters.h"
#include "fetcher/readers/jsonstream.h"
#include "proto/proto.h"

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

void client_page_scan(const char *html, size_t len, struct client_page *out) {
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

/* Whether the query parameter at q (n bytes, up to '&' or '#') is named name ("fmt" matches "fmt" and "fmt=..."). */
static int param_named(const char *q, size_t n, const char *name) {
  size_t len = strlen(name);
  return n >= len && strncmp(q, name, len) == 0 && (n == len || q[len] == '=');
}

int client_timedtext_url(const struct upstream *up, const char *base_url, const char *tlang, const char *pot,
                         const char *client_name, struct buf *out) {
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
    /* Keep every parameter in its order except fmt and tlang, which we choose, and a token's, when we give one. */
    while (*q != '\0' && *q != '#') {
      size_t n = strcspn(q, "&#");
      int token_param = param_named(q, n, "pot") || param_named(q, n, "potc") || param_named(q, n, "c");
      if (n > 0 && !param_named(q, n, "fmt") && !param_named(q, n, "tlang") && !(pot[0] != '\0' && token_param)) {
        rv = buf_printf(out, "%c%.*s", sep, (int)n, q);
        if (rv != 0) goto fail;
        sep = '&';
      }
      q += n;
      if (*q == '&') q++;
    }
  }
  rv = buf_printf(out, "%cfmt=json3", sep);
  if (rv == 0 && tlang[0] != '\0') rv = buf_printf(out, "&tlang=%s", tlang);
  if (rv == 0 && pot[0] != '\0') rv = buf_printf(out, "&pot=%s&potc=1&c=%s", pot, client_name);
fail:
  buf_free(&mapped);
  return rv;
}

#define NONCE_ALPHABET "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

int client_expand(const char *tmpl, const char *video_id, struct buf *out) {
  int rv = 0;
  const char *at = tmpl;
  while (rv == 0 && *at != '\0') {
    size_t plain = strcspn(at, "{");
    rv = buf_append(out, at, plain);
    at += plain;
    if (rv != 0 || *at == '\0') break;
    if (strncmp(at, "{video_id}", 10) == 0) {
      rv = buf_puts(out, video_id);
      at += 10;
    } else if (strncmp(at, "{nonce:", 7) == 0 && strchr(at, '}') != NULL) {
      long n = strtol(at + 7, NULL, 10);
      unsigned char bytes[PROFILES_MAX_NONCE];
      if (n < 1 || n > PROFILES_MAX_NONCE) n = PROFILES_MAX_NONCE;
      rv = util_random_bytes(bytes, (size_t)n);
      for (long i = 0; rv == 0 && i < n; i++) rv = buf_append(out, &NONCE_ALPHABET[bytes[i] & 63], 1);
      at = strchr(at, '}') + 1;
    } else {
      rv = buf_append(out, at, 1);
      at++;
    }
  }
  return rv;
}

int client_player_url(const struct client_profile *c, const char *video_id, const char *api_key, struct buf *out) {
  int rv = buf_printf(out, "https://%s%s?prettyPrint=false", c->host, c->path);
  if (rv == 0 && api_key[0] != '\0') rv = buf_printf(out, "&key=%s", api_key);
  for (size_t i = 0; rv == 0 && i < c->nquery; i++) {
    rv = buf_printf(out, "&%s=", c->query[i][0]);
    if (rv == 0) rv = client_expand(c->query[i][1], video_id, out);
  }
  return rv;
}

/* {"context":{"client":{...}<context members>} of client c, with visitor data when it is not "". */
static int put_context(const struct client_profile *c, const char *ua, const char *visitor_data, struct buf *body) {
  int rv = buf_puts(body, "{\"context\":{\"client\":{\"clientName\":\"");
  if (rv == 0) rv = buf_json_escape(body, c->client_name, strlen(c->client_name));
  if (rv == 0) rv = buf_puts(body, "\",\"clientVersion\":\"");
  if (rv == 0) rv = buf_json_escape(body, c->version, strlen(c->version));
  if (rv == 0) rv = buf_puts(body, "\"");
  for (size_t i = 0; rv == 0 && i < c->nfields; i++) {
    const struct profile_field *pf = &c->fields[i];
    rv = buf_printf(body, ",\"%s\":", pf->key);
    if (rv == 0 && pf->is_number) rv = buf_puts(body, pf->value);
    if (rv == 0 && !pf->is_number) rv = buf_puts(body, "\"");
    if (rv == 0 && !pf->is_number) rv = buf_json_escape(body, pf->value, strlen(pf->value));
    if (rv == 0 && !pf->is_number) rv = buf_puts(body, "\"");
  }
  if (rv == 0 && c->user_agent_in_context) {
    rv = buf_puts(body, ",\"userAgent\":\"");
    if (rv == 0) rv = buf_json_escape(body, ua, strlen(ua));
    if (rv == 0) rv = buf_puts(body, "\"");
  }
  if (rv == 0 && visitor_data[0] != '\0') {
    /* The platform's value as it gave it (its padding percent-encoded), the same bytes X-Goog-Visitor-Id carries. */
    rv = buf_puts(body, ",\"visitorData\":\"");
    if (rv == 0) rv = buf_json_escape(body, visitor_data, strlen(visitor_data));
    if (rv == 0) rv = buf_puts(body, "\"");
  }
  if (rv == 0) rv = buf_printf(body, "}%s}", c->context_members);
  return rv;
}

int client_player_body(const struct client_profile *c, const char *ua, const char *video_id, const char *visitor_data,
                       struct buf *body) {
  int rv = put_context(c, ua, visitor_data, body);
  if (rv == 0 && c->wrap_request[0] != '\0') rv = buf_printf(body, ",\"%s\":{", c->wrap_request);
  if (rv == 0)
    rv = buf_printf(body, "%s\"videoId\":\"%s\",\"contentCheckOk\":true,\"racyCheckOk\":true",
                    c->wrap_request[0] != '\0' ? "" : ",", video_id);
  if (rv == 0) rv = client_expand(c->request_members, video_id, body);
  if (rv == 0 && c->wrap_request[0] != '\0') rv = buf_puts(body, "}");
  if (rv == 0) rv = client_expand(c->wrap_members, video_id, body);
  if (rv == 0) rv = buf_puts(body, "}");
  return rv;
}

int client_visitor_body(const struct client_profile *c, const char *ua, struct buf *body) {
  int rv = put_context(c, ua, "", body);
  return rv == 0 ? buf_puts(body, "}") : rv;
}

/* The visitor call's reply: responseContext.visitorData, nothing else read. */
enum { VN_CONTEXT = 2, VF_CONTEXT = 1, VF_VISITOR = 2 };

struct visitor_parse {
  char *out;
  int found;
};

static int visitor_key(void *ctx, int node, const char *key, size_t len) {
  (void)ctx;
  if (node == JSONSTREAM_ROOT && len == 15 && memcmp(key, "responseContext", 15) == 0) return VF_CONTEXT;
  if (node == VN_CONTEXT && len == 11 && memcmp(key, "visitorData", 11) == 0) return VF_VISITOR;
  return 0;
}

static int visitor_open(void *ctx, int node, int field, int is_array) {
  (void)ctx;
  return node == JSONSTREAM_ROOT && field == VF_CONTEXT && !is_array ? VN_CONTEXT : JSONSTREAM_SKIP;
}

static int visitor_close(void *ctx, int node) {
  (void)ctx;
  (void)node;
  return 0;
}

static int visitor_scalar(void *ctx, int node, int field, enum jsonstream_kind kind, const char *s, size_t len) {
  struct visitor_parse *p = ctx;
  if (node != VN_CONTEXT || field != VF_VISITOR || kind != JSONSTREAM_STRING) return 0;
  /* s is not NUL-terminated: each byte is looked at within len. */
  p->found = len > 0 && len < CLIENT_VISITOR_DATA_MAX;
  for (size_t i = 0; p->found && i < len; i++) p->found = s[i] != '\0' && strchr(ALNUM "_-%=", s[i]) != NULL;
  if (p->found) {
    memcpy(p->out, s, len);
    p->out[len] = '\0';
  }
  return 0;
}

static const struct jsonstream_ops visitor_ops = {visitor_key, visitor_open, visitor_close, visitor_scalar};

int client_visitor_reply(const char *json, size_t len, char *out) {
  struct visitor_parse p = {.out = out, .found = 0};
  out[0] = '\0';
  int rv = jsonstream_parse(json, len, 1, &visitor_ops, &p);
  if (rv == -ENOMEM) return rv;
  if (rv != 0 || !p.found) {
    out[0] = '\0';
    return -EPROTO;
  }
  return 0;
}

/* Appends v as a protobuf varint. */
static size_t put_varint(unsigned char *at, uint64_t v) {
  size_t n = 0;
  do {
    at[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v != 0);
  return n;
}

int client_visitor_local(char *out) {
  static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  unsigned char msg[64], id[11];
  int rv = util_random_bytes(id, sizeof(id));
  if (rv != 0) return rv;
  size_t n = 0;
  /* 1: the visitor id; 5: the time it was made; 6: {1: the country, 2: {3: "", 4: 0}}. */
  msg[n++] = 0x0a;
  msg[n++] = sizeof(id);
  for (size_t i = 0; i < sizeof(id); i++) msg[n++] = (unsigned char)NONCE_ALPHABET[id[i] & 63];
  msg[n++] = 0x28;
  n += put_varint(msg + n, (uint64_t)util_wall_s());
  static const unsigned char place[] = {0x32, 0x0a, 0x0a, 0x02, 'U', 'S', 0x12, 0x04, 0x1a, 0x00, 0x20, 0x00};
  memcpy(msg + n, place, sizeof(place));
  n += sizeof(place);
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t w = (uint32_t)msg[i] << 16 | (i + 1 < n ? (uint32_t)msg[i + 1] << 8 : 0) | (i + 2 < n ? msg[i + 2] : 0);
    out[o++] = b64[(w >> 18) & 63];
    out[o++] = b64[(w >> 12) & 63];
    if (i + 1 < n) out[o++] = b64[(w >> 6) & 63];
    if (i + 2 < n) out[o++] = b64[w & 63];
  }
  for (size_t pad = (3 - n % 3) % 3; pad > 0; pad--) {
    memcpy(out + o, "%3D", 3);
    o += 3;
  }
  out[o] = '\0';
  return 0;
}

int client_user_agent(const struct client_profile *c, struct buf *ua) {
  static const char mark[] = "{version}";
  const char *at = strstr(c->user_agent, mark);
  if (at == NULL) return buf_puts(ua, c->user_agent);
  return buf_printf(ua, "%.*s%s%s", (int)(at - c->user_agent), c->user_agent, c->version, at + strlen(mark));
}

void client_request_free(struct client_request *r) {
  buf_free(&r->url);
  buf_free(&r->body);
  buf_free(&r->ua);
  memset(&r->req, 0, sizeof(r->req));
}

/* Content-Type, the client's name and version, its visitor data (when not ""), Origin, and the profile's headers. */
static void put_headers(struct client_request *r, const struct client_profile *c, const char *visitor) {
  size_t n = 0;
  r->headers[n++] = "Content-Type: application/json";
  if (c->client_id[0] != '\0') {
    snprintf(r->name, sizeof(r->name), "X-YouTube-Client-Name: %s", c->client_id);
    r->headers[n++] = r->name;
  }
  snprintf(r->version, sizeof(r->version), "X-YouTube-Client-Version: %s", c->version);
  r->headers[n++] = r->version;
  if (visitor[0] != '\0') {
    snprintf(r->visitor, sizeof(r->visitor), "X-Goog-Visitor-Id: %s", visitor);
    r->headers[n++] = r->visitor;
  }
  if (c->origin[0] != '\0') {
    snprintf(r->origin, sizeof(r->origin), "Origin: %s", c->origin);
    r->headers[n++] = r->origin;
  }
  for (size_t i = 0; i < c->nheaders; i++) r->headers[n++] = c->headers[i];
  r->headers[n] = NULL;
}

/* The one shape of a client's InnerTube call: a POST of r's URL and body as c's user agent, with c's headers. */
static void put_post(struct client_request *r, const struct client_profile *c, const char *visitor) {
  put_headers(r, c, visitor);
  r->req = (struct upstream_request){
      .method = UPSTREAM_POST,
      .url = r->url.data,
      .body = r->body.data,
      .body_len = r->body.len,
      .user_agent = r->ua.data,
      .headers = r->headers,
      .max_bytes = VTS_MAX_UPSTREAM_BODY_BYTES,
  };
}

int client_player_request(struct client_request *r, const struct client_profile *c, const char *video_id,
                          const char *api_key, const char *visitor_data, const char *cookie) {
  int rv = client_user_agent(c, &r->ua);
  if (rv == 0) rv = client_player_url(c, video_id, api_key, &r->url);
  if (rv == 0) rv = client_player_body(c, r->ua.data, video_id, visitor_data, &r->body);
  if (rv != 0) return rv;
  put_post(r, c, visitor_data);
  r->req.cookie = cookie;
  return 0;
}

int client_visitor_request(struct client_request *r, const struct client_profile *c) {
  int rv = client_user_agent(c, &r->ua);
  if (rv == 0) rv = buf_printf(&r->url, "https://%s%s?prettyPrint=false", c->host, PROFILES_VISITOR_PATH);
  if (rv == 0) rv = client_visitor_body(c, r->ua.data, &r->body);
  if (rv != 0) return rv;
  put_post(r, c, "");
  return 0;
}

int client_browse_request(struct client_request *r, const struct client_profile *c, uint8_t what, const char *target) {
  struct buf token = BUF_INIT;
  int rv = buf_printf(&r->url, "https://%s/youtubei/v1/browse?prettyPrint=false", c->host);
  if (rv == 0) rv = client_user_agent(c, &r->ua);
  if (rv == 0 && what == PROTO_BROWSE_PLAYLIST) rv = browse_playlist_token(target, &token);
  if (rv == 0) {
    if (what == PROTO_BROWSE_CHANNEL)
      rv = browse_request_body(c, target, BROWSE_VIDEOS_TAB_PARAMS, NULL, &r->body);
    else
      rv = browse_request_body(c, NULL, NULL, what == PROTO_BROWSE_PLAYLIST ? token.data : target, &r->body);
  }
  buf_free(&token);
  if (rv != 0) return rv;
  put_post(r, c, "");
  return 0;
}

int client_next_request(struct client_request *r, const struct client_profile *c, const char *video_id) {
  int rv = buf_printf(&r->url, "https://%s" CHAPTERS_NEXT_PATH "?prettyPrint=false", c->host);
  if (rv == 0) rv = client_user_agent(c, &r->ua);
  if (rv == 0) rv = chapters_next_body(c, video_id, &r->body);
  if (rv != 0) return rv;
  put_post(r, c, "");
  return 0;
}

int client_watch_request(struct client_request *r, const char *video_id, const char *cookie) {
  static const char *const headers[] = {"Accept-Language: en-US,en;q=0.9", NULL};
  int rv = buf_printf(&r->url, "/watch?v=%s", video_id);
  if (rv != 0) return rv;
  r->req = (struct upstream_request){
      .method = UPSTREAM_GET,
      .url = r->url.data,
      .user_agent = PROFILES_BROWSER_UA,
      .headers = headers,
      .cookie = cookie,
      .max_bytes = VTS_MAX_WATCH_PAGE_BYTES,
  };
  return 0;
}

int client_track_request(struct client_request *r, const struct upstream *up, const char *base_url, const char *tlang,
                         const char *pot, const char *client_name, const char *user_agent, const char *cookie) {
  int rv = client_timedtext_url(up, base_url, tlang, pot, client_name, &r->url);
  if (rv != 0) return rv;
  r->req = (struct upstream_request){
      .method = UPSTREAM_GET,
      .url = r->url.data,
      .user_agent = user_agent,
      .cookie = cookie,
      .max_bytes = VTS_MAX_UPSTREAM_BODY_BYTES,
  };
  return 0;
}
