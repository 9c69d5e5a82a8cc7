#include "fetcher/platform/upstream.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"

/* The platform's own hosts. Anything else is refused, whatever a reply or a redirect says. */
#define PLATFORM_HOST "www.youtube.com"
#define CONSENT_HOST "consent.youtube.com"

struct upstream {
  CURL *curl;
  char origin[CONFIG_STR_MAX]; /* scheme://host[:port] of VTS_UPSTREAM_URL */
  char host[256];              /* its host, lowercase, without brackets */
  int loopback;                /* the upstream is a loopback host: every platform host maps onto it */
  char *proxies[VTS_UPSTREAM_MAX_PROXIES];
  size_t nproxies;
  size_t next_proxy;
  const char *job_proxy; /* the proxy of the current job, NULL for none */
  uint64_t deadline_ms;
  const char *request_id;
};

struct sink {
  struct buf *body;
  size_t max;
  int overflow;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg) {
  struct sink *s = arg;
  size_t n = size * nmemb;
  /* Refusing the bytes makes curl abort the transfer at once: a cap that only truncated would still download. */
  if (n > s->max - s->body->len) {
    s->overflow = 1;
    return 0;
  }
  if (buf_append(s->body, data, n) != 0) return 0;
  return n;
}

static int is_loopback(const char *host) {
  return strcmp(host, "localhost") == 0 || strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0 ||
         strcmp(host, "[::1]") == 0;
}

/* Reads scheme, host and port of url. Returns 0, or -EINVAL. */
static int url_parts(const char *url, char *scheme, size_t scheme_len, char *host, size_t host_len, char *port,
                     size_t port_len) {
  CURLU *h = curl_url();
  if (h == NULL) return -ENOMEM;
  int rv = -EINVAL;
  char *s = NULL, *hs = NULL, *p = NULL;
  if (curl_url_set(h, CURLUPART_URL, url, 0) != CURLUE_OK) goto fail;
  if (curl_url_get(h, CURLUPART_SCHEME, &s, 0) != CURLUE_OK) goto fail;
  if (curl_url_get(h, CURLUPART_HOST, &hs, 0) != CURLUE_OK) goto fail;
  if (strlen(s) >= scheme_len || strlen(hs) >= host_len) goto fail;
  snprintf(scheme, scheme_len, "%s", s);
  snprintf(host, host_len, "%s", hs);
  for (char *c = host; *c; c++)
    if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
  port[0] = '\0';
  if (curl_url_get(h, CURLUPART_PORT, &p, 0) == CURLUE_OK) {
    if (strlen(p) >= port_len) goto fail;
    snprintf(port, port_len, "%s", p);
  }
  rv = 0;
fail:
  curl_free(s);
  curl_free(hs);
  curl_free(p);
  curl_url_cleanup(h);
  return rv;
}

static int parse_proxies(struct upstream *u, const char *list, char *err, size_t errlen) {
  const char *p = list;
  while (*p != '\0') {
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    if (n == 0 || u->nproxies == VTS_UPSTREAM_MAX_PROXIES) {
      snprintf(err, errlen, "VTS_UPSTREAM_PROXY: invalid value: expected 1 to %d comma-separated proxy URLs",
               VTS_UPSTREAM_MAX_PROXIES);
      return -EINVAL;
    }
    char *proxy = strndup(p, n);
    if (proxy == NULL) return -ENOMEM;
    u->proxies[u->nproxies++] = proxy;
    if (strncmp(proxy, "http://", 7) != 0 && strncmp(proxy, "https://", 8) != 0 &&
        strncmp(proxy, "socks5://", 9) != 0 && strncmp(proxy, "socks5h://", 10) != 0) {
      /* The value may hold credentials: name the variable, not the value. */
      snprintf(err, errlen,
               "VTS_UPSTREAM_PROXY: invalid value: entry %zu is not an http://, https://, socks5:// "
               "or socks5h:// URL",
               u->nproxies);
      return -EINVAL;
    }
    p = comma ? comma + 1 : p + n;
    if (comma != NULL && *p == '\0') {
      snprintf(err, errlen, "VTS_UPSTREAM_PROXY: invalid value: empty entry");
      return -EINVAL;
    }
  }
  return 0;
}

static int upstream_new_handle(const struct vts_config *cfg, struct upstream **out, int with_curl, char *err,
                               size_t errlen) {
  struct upstream *u = calloc(1, sizeof(*u));
  if (u == NULL) return -ENOMEM;
  int rv = -EINVAL;
  char scheme[16], port[16];
  if (url_parts(cfg->upstream_url, scheme, sizeof(scheme), u->host, sizeof(u->host), port, sizeof(port)) != 0) {
    snprintf(err, errlen, "VTS_UPSTREAM_URL: invalid value: expected an http(s) URL");
    goto fail;
  }
  u->loopback = is_loopback(u->host);
  if (strcmp(scheme, "https") != 0 && !(strcmp(scheme, "http") == 0 && u->loopback)) {
    snprintf(err, errlen, "VTS_UPSTREAM_URL: invalid value: expected https://, or http:// on a loopback host");
    goto fail;
  }
  const char *path = strstr(cfg->upstream_url, "://") + 3;
  path += strcspn(path, "/?#");
  if (*path != '\0' && strcmp(path, "/") != 0) {
    snprintf(err, errlen, "VTS_UPSTREAM_URL: invalid value: expected an origin without a path");
    goto fail;
  }
  int is_v6 = strchr(u->host, ':') != NULL;
  snprintf(u->origin, sizeof(u->origin), "%s://%s%s%s%s%s", scheme, is_v6 ? "[" : "", u->host, is_v6 ? "]" : "",
           port[0] ? ":" : "", port);
  rv = parse_proxies(u, cfg->upstream_proxy, err, errlen);
  if (rv != 0) goto fail;

  rv = -ENOMEM;
  if (!with_curl) {
    *out = u;
    return 0;
  }
  u->curl = curl_easy_init();
  if (u->curl == NULL) goto fail;
  /* Options that hold for every request of the process; per-request ones are set in upstream_fetch. */
  curl_easy_setopt(u->curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(u->curl, CURLOPT_PROTOCOLS_STR, strcmp(scheme, "http") == 0 ? "http,https" : "https");
  curl_easy_setopt(u->curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(u->curl, CURLOPT_ACCEPT_ENCODING, "gzip");
  curl_easy_setopt(u->curl, CURLOPT_COOKIEFILE, "");
  curl_easy_setopt(u->curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(u->curl, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(u->curl, CURLOPT_SSL_VERIFYHOST, 2L);
  *out = u;
  return 0;
fail:
  upstream_free(u);
  return rv;
}

int upstream_config_check(const struct vts_config *cfg, char *err, size_t errlen) {
  struct upstream *u = NULL;
  int rv = upstream_new_handle(cfg, &u, 0, err, errlen);
  upstream_free(u);
  return rv;
}

int upstream_new(const struct vts_config *cfg, struct upstream **out, char *err, size_t errlen) {
  return upstream_new_handle(cfg, out, 1, err, errlen);
}

void upstream_free(struct upstream *u) {
  if (u == NULL) return;
  if (u->curl != NULL) curl_easy_cleanup(u->curl);
  for (size_t i = 0; i < u->nproxies; i++) free(u->proxies[i]);
  free(u);
}

void upstream_begin_job(struct upstream *u, uint64_t deadline_ms, const char *request_id) {
  u->deadline_ms = deadline_ms;
  u->request_id = request_id;
  /* A job must not see the cookies of another (a consent answer, a visitor id): each job starts clean. */
  curl_easy_setopt(u->curl, CURLOPT_COOKIELIST, "ALL");
  if (u->nproxies > 0) {
    u->job_proxy = u->proxies[u->next_proxy];
    curl_easy_setopt(u->curl, CURLOPT_PROXY, u->job_proxy);
    u->next_proxy = (u->next_proxy + 1) % u->nproxies;
  } else {
    u->job_proxy = NULL;
    /* An empty string, not NULL: NULL would let curl read http_proxy from the environment. */
    curl_easy_setopt(u->curl, CURLOPT_PROXY, "");
  }
}

const char *upstream_job_proxy(const struct upstream *u) { return u->job_proxy; }

uint64_t upstream_job_deadline(const struct upstream *u) { return u->deadline_ms; }

int upstream_map_url(const struct upstream *u, const char *url, struct buf *out) {
  CURLU *h = curl_url();
  if (h == NULL) return -ENOMEM;
  int rv = -EINVAL;
  char *scheme = NULL, *host = NULL, *path = NULL, *query = NULL;
  /* A path alone is resolved against the origin; curl parses the absolute form for us otherwise. */
  if (curl_url_set(h, CURLUPART_URL, u->origin, 0) != CURLUE_OK) goto fail;
  if (curl_url_set(h, CURLUPART_URL, url, 0) != CURLUE_OK) goto fail;
  if (curl_url_get(h, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) goto fail;
  if (curl_url_get(h, CURLUPART_HOST, &host, 0) != CURLUE_OK) goto fail;
  if (curl_url_get(h, CURLUPART_PATH, &path, 0) != CURLUE_OK) goto fail;
  if (curl_url_get(h, CURLUPART_QUERY, &query, 0) != CURLUE_OK) query = NULL;

  rv = -EPERM;
  if (strcmp(scheme, "https") != 0 && strcmp(scheme, "http") != 0) goto fail;
  const char *origin;
  if (strcasecmp(host, u->host) == 0 || strcasecmp(host, PLATFORM_HOST) == 0) {
    origin = u->origin;
  } else if (strcasecmp(host, CONSENT_HOST) == 0) {
    /* A test upstream serves the consent host too; in production the consent host is itself. */
    origin = u->loopback ? u->origin : "https://" CONSENT_HOST;
  } else {
    goto fail;
  }
  rv = buf_puts(out, origin);
  if (rv == 0) rv = buf_puts(out, path);
  if (rv == 0 && query != NULL) rv = buf_printf(out, "?%s", query);
fail:
  curl_free(scheme);
  curl_free(host);
  curl_free(path);
  curl_free(query);
  curl_url_cleanup(h);
  return rv;
}

const char *upstream_strerror(int err) {
  switch (err) {
    case 0:
      return "ok";
    case -ETIMEDOUT:
      return "timeout";
    case -EFBIG:
      return "too_large";
    case -EPERM:
      return "bad_redirect";
    case -ELOOP:
      return "too_many_redirects";
    case -EBADMSG:
      return "truncated";
    case -ENOMEM:
      return "no_memory";
    default:
      return "transport";
  }
}

static int curl_error(CURLcode c, const struct sink *s) {
  if (s->overflow) return -EFBIG;
  switch (c) {
    case CURLE_OK:
      return 0;
    case CURLE_OPERATION_TIMEDOUT:
      return -ETIMEDOUT;
    case CURLE_FILESIZE_EXCEEDED:
      return -EFBIG;
    case CURLE_PARTIAL_FILE:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
      return -EBADMSG;
    case CURLE_OUT_OF_MEMORY:
      return -ENOMEM;
    default:
      return -EIO;
  }
}

/* Host and path of url for logs: a query may carry tokens or signatures. */
static void log_target(char *out, size_t outlen, const char *url) {
  const char *start = strstr(url, "://");
  start = start ? start + 3 : url;
  size_t n = strcspn(start, "?#");
  snprintf(out, outlen, "%.*s", (int)(n < 200 ? n : 200), start);
}

/* One hop: no redirect handling. Returns 0 or a negative error of upstream_fetch. */
static int perform(struct upstream *u, enum upstream_method method, const char *url, const struct upstream_request *req,
                   struct upstream_response *resp) {
  uint64_t now = util_now_ms();
  if (now >= u->deadline_ms) return -ETIMEDOUT;
  long remaining = (long)(u->deadline_ms - now);
  long connect_ms = remaining < VTS_UPSTREAM_CONNECT_TIMEOUT_MS ? remaining : VTS_UPSTREAM_CONNECT_TIMEOUT_MS;

  struct curl_slist *headers = NULL;
  int rv = -ENOMEM;
  /* curl sends "Expect: 100-continue" for larger POST bodies and waits for an answer; the platform never needs it. */
  struct curl_slist *h = curl_slist_append(headers, "Expect:");
  if (h == NULL) goto fail;
  headers = h;
  for (const char *const *p = req->headers; p != NULL && *p != NULL; p++) {
    h = curl_slist_append(headers, *p);
    if (h == NULL) goto fail;
    headers = h;
  }
  buf_reset(&resp->body);
  struct sink s = {&resp->body, req->max_bytes, 0};
  CURL *c = u->curl;
  curl_easy_setopt(c, CURLOPT_URL, url);
  if (method == UPSTREAM_POST) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body ? req->body : "");
  } else {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_USERAGENT, req->user_agent);
  curl_easy_setopt(c, CURLOPT_COOKIE, req->cookie);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, remaining);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)req->max_bytes);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);

  CURLcode cc = curl_easy_perform(c);
  rv = curl_error(cc, &s);
  resp->status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);

  char target[256];
  log_target(target, sizeof(target), url);
  char status[16], dur[24];
  snprintf(status, sizeof(status), "%ld", resp->status);
  snprintf(dur, sizeof(dur), "%llu", (unsigned long long)(util_now_ms() - now));
  log_msg(rv == 0 ? LOG_DEBUG : LOG_INFO, rv == 0 ? "upstream request" : "upstream request failed", "request_id",
          u->request_id, "target", target, "=upstream_status", status, "=dur_ms", dur, "error",
          rv == 0 ? NULL : upstream_strerror(rv), NULL);
fail:
  /* The handle keeps pointers to these: clear them before they go. */
  curl_easy_setopt(u->curl, CURLOPT_HTTPHEADER, NULL);
  curl_easy_setopt(u->curl, CURLOPT_WRITEDATA, NULL);
  curl_slist_free_all(headers);
  return rv;
}

int upstream_fetch(struct upstream *u, const struct upstream_request *req, struct upstream_response *resp) {
  struct buf url = BUF_INIT;
  int rv = upstream_map_url(u, req->url, &url);
  if (rv != 0) goto fail;
  enum upstream_method method = req->method;
  for (int hop = 0;; hop++) {
    rv = perform(u, method, url.data, req, resp);
    if (rv != 0) goto fail;
    if (resp->status < 300 || resp->status > 399 || resp->status == 304) break;
    char *location = NULL;
    /* curl resolves a relative Location against the URL it just fetched. */
    if (curl_easy_getinfo(u->curl, CURLINFO_REDIRECT_URL, &location) != CURLE_OK || location == NULL) break;
    if (hop == VTS_UPSTREAM_MAX_REDIRECTS) {
      rv = -ELOOP;
      goto fail;
    }
    struct buf next = BUF_INIT;
    rv = upstream_map_url(u, location, &next);
    if (rv != 0) {
      buf_free(&next);
      rv = rv == -ENOMEM ? rv : -EPERM;
      goto fail;
    }
    buf_free(&url);
    url = next;
    /* As browsers do: 301, 302 and 303 turn a POST into a GET; 307 and 308 repeat it. */
    if (resp->status != 307 && resp->status != 308) method = UPSTREAM_GET;
  }
fail:
  buf_free(&url);
  return rv;
}
