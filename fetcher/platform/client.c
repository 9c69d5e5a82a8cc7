#include "fetcher/platform/client.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/percent.h"

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

int client_player_body(const struct client_profile *c, const char *ua, const char *video_id, const char *visitor_data,
                       struct buf *body) {
  int rv = buf_puts(body, "{\"context\":{\"client\":{\"clientName\":\"");
  if (rv == 0) rv = buf_json_escape(body, c->name, strlen(c->name));
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
  if (rv == 0 && c->needs_page && visitor_data[0] != '\0') {
    /* The page holds it percent-encoded; a value with a malformed escape is left out rather than sent mangled. */
    char decoded[CLIENT_VISITOR_DATA_MAX];
    long n = percent_decode(visitor_data, strlen(visitor_data), decoded, sizeof(decoded), 0);
    if (n >= 0) {
      rv = buf_puts(body, ",\"visitorData\":\"");
      if (rv == 0) rv = buf_json_escape(body, decoded, (size_t)n);
      if (rv == 0) rv = buf_puts(body, "\"");
    }
  }
  if (rv == 0) rv = buf_printf(body, "}},\"videoId\":\"%s\",\"contentCheckOk\":true,\"racyCheckOk\":true}", video_id);
  return rv;
}

int client_user_agent(const struct client_profile *c, struct buf *ua) {
  static const char mark[] = "{version}";
  const char *at = strstr(c->user_agent, mark);
  if (at == NULL) return buf_puts(ua, c->user_agent);
  return buf_printf(ua, "%.*s%s%s", (int)(at - c->user_agent), c->user_agent, c->version, at + strlen(mark));
}
