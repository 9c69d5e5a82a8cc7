#include "fetcher/egress/transport.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/netaddr.h"
#include "common/util.h"
#include "proto/proto.h"

struct sink {
  struct buf *out;
  size_t limit; /* out->len may grow up to this */
  int overflow;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg) {
  struct sink *s = arg;
  size_t n = size * nmemb;
  /* Refusing the bytes makes curl abort the transfer at once: a cap that only truncated would still download. */
  if (s->out->len > s->limit || n > s->limit - s->out->len) {
    s->overflow = 1;
    return 0;
  }
  if (buf_append(s->out, data, n) != 0) return 0;
  return n;
}

int transport_init(struct transport *t) {
  memset(t, 0, sizeof(*t));
  t->curl = curl_easy_init();
  if (t->curl == NULL) return -ENOMEM;
  CURL *c = t->curl;
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  /* Redirects are followed by the callers, so that every hop passes their host policy. */
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, t->errbuf);
  return 0;
}

void transport_cleanup(struct transport *t) {
  if (t->curl != NULL) curl_easy_cleanup(t->curl);
  t->curl = NULL;
}

int transport_scheme_allowed(const char *scheme, const char *host) {
  if (strcmp(scheme, "https") == 0) return 0;
  if (strcmp(scheme, "http") == 0 && netaddr_is_loopback(host)) return 0;
  return -EPERM;
}

/* Copies part into out lowercased. Returns 0, or -EINVAL when it does not fit. */
static int copy_lower(const char *part, char *out, size_t outlen) {
  size_t n = strlen(part);
  if (n >= outlen) return -EINVAL;
  for (size_t i = 0; i <= n; i++) out[i] = (part[i] >= 'A' && part[i] <= 'Z') ? (char)(part[i] - 'A' + 'a') : part[i];
  return 0;
}

int transport_url_parts(const char *url, char *scheme, size_t scheme_len, char *host, size_t host_len, char *port,
                        size_t port_len) {
  CURLU *h = curl_url();
  if (h == NULL) return -ENOMEM;
  int rv = -EINVAL;
  char *s = NULL, *hs = NULL, *p = NULL;
  if (curl_url_set(h, CURLUPART_URL, url, 0) != CURLUE_OK) goto fail;
  if (curl_url_get(h, CURLUPART_SCHEME, &s, 0) != CURLUE_OK) goto fail;
  if (curl_url_get(h, CURLUPART_HOST, &hs, 0) != CURLUE_OK) goto fail;
  if (copy_lower(s, scheme, scheme_len) != 0 || copy_lower(hs, host, host_len) != 0) goto fail;
  if (port != NULL) {
    port[0] = '\0';
    if (curl_url_get(h, CURLUPART_PORT, &p, 0) == CURLUE_OK && copy_lower(p, port, port_len) != 0) goto fail;
  }
  rv = 0;
fail:
  curl_free(s);
  curl_free(hs);
  curl_free(p);
  curl_url_cleanup(h);
  return rv;
}

uint8_t transport_reason(int err) {
  switch (err) {
    case 0:
      return PROTO_REASON_NONE;
    case -ETIMEDOUT:
      return PROTO_REASON_TIMEOUT;
    case -EFBIG:
    case -EBADMSG:
    case -EIO:
      return PROTO_REASON_MALFORMED;
    case -ENETUNREACH:
      return PROTO_REASON_NETWORK;
    case -EPERM:
    case -EINVAL:
    case -ELOOP:
    case -EACCES:
      return PROTO_REASON_REFUSED;
    case -ENOMEM:
      return PROTO_REASON_INTERNAL;
    case -EAGAIN:
      return PROTO_REASON_BUDGET;
    default:
      return PROTO_REASON_INTERNAL;
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
    /* Nothing reached the server: name resolution, the connection, the proxy or the TLS handshake failed. */
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_PROXY:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SEND_ERROR:
      return -ENETUNREACH;
    default:
      return -EIO;
  }
}

/* Host and path of url for logs: a query may carry tokens or signatures, a userinfo ("user:secret@") credentials. */
static void log_target(char *out, size_t outlen, const char *url) {
  const char *start = strstr(url, "://");
  start = start ? start + 3 : url;
  size_t authority = strcspn(start, "/?#");
  const char *at = memchr(start, '@', authority);
  if (at != NULL) start = at + 1;
  size_t n = strcspn(start, "?#");
  snprintf(out, outlen, "%.*s", (int)(n < 200 ? n : 200), start);
}

/* Replaces every occurrence of the n bytes at secret in text by '*'. */
static void blank(char *text, const char *secret, size_t n) {
  if (n == 0) return;
  for (char *hit = memmem(text, strlen(text), secret, n); hit != NULL; hit = memmem(hit, strlen(hit), secret, n))
    memset(hit, '*', n);
}

/*
 * Blanks the userinfo of url ("user:secret@": a proxy's, or an operator's service's), and the secret alone, wherever
 * curl's error text repeats them.
 */
static void redact_userinfo(char *text, const char *url) {
  if (url == NULL) return;
  const char *scheme_end = strstr(url, "://");
  const char *start = scheme_end ? scheme_end + 3 : url;
  const char *at = memchr(start, '@', strcspn(start, "/?#"));
  if (at == NULL) return;
  size_t n = (size_t)(at - start);
  blank(text, start, n);
  const char *colon = memchr(start, ':', n);
  if (colon != NULL) blank(text, colon + 1, (size_t)(at - colon - 1));
}

/* A transfer's connect_check, as curl's open-socket callback sees it. */
struct opener {
  const struct transport_req *req;
  int refused;
};

static curl_socket_t open_checked(void *arg, curlsocktype purpose, struct curl_sockaddr *a) {
  struct opener *o = arg;
  if (purpose != CURLSOCKTYPE_IPCXN || o->req->connect_check(o->req->connect_ctx, &a->addr) != 0) {
    o->refused = 1;
    return CURL_SOCKET_BAD;
  }
  return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/* Over 80 lines: one transfer's curl options in one place, every request of the fetcher set the same way. */
int transport_perform(struct transport *t, const struct transport_req *req, struct buf *out, long *status,
                      uint8_t *reason) {
  *status = 0;
  char scheme[16], host[256];
  if (transport_url_parts(req->url, scheme, sizeof(scheme), host, sizeof(host), NULL, 0) != 0 ||
      (!req->operator_url && req->connect_check == NULL && transport_scheme_allowed(scheme, host) != 0)) {
    *reason = PROTO_REASON_REFUSED;
    return -EPERM;
  }
  uint64_t now = util_now_ms();
  if (now >= req->deadline_ms) {
    *reason = PROTO_REASON_TIMEOUT;
    return -ETIMEDOUT;
  }
  long remaining = (long)(req->deadline_ms - now);
  long connect_ms = remaining < VTS_UPSTREAM_CONNECT_TIMEOUT_MS ? remaining : VTS_UPSTREAM_CONNECT_TIMEOUT_MS;

  struct curl_slist *headers = NULL;
  int rv = -ENOMEM;
  /* curl sends "Expect: 100-continue" for larger POST bodies and waits for an answer no server here needs. */
  struct curl_slist *h = curl_slist_append(headers, "Expect:");
  if (h == NULL) goto fail;
  headers = h;
  for (const char *const *p = req->headers; p != NULL && *p != NULL; p++) {
    h = curl_slist_append(headers, *p);
    if (h == NULL) goto fail;
    headers = h;
  }
  struct sink s = {out, out->len + req->max_bytes, 0};
  CURL *c = t->curl;
  t->errbuf[0] = '\0';
  curl_easy_setopt(c, CURLOPT_URL, req->url);
  if (req->mime != NULL) {
    curl_easy_setopt(c, CURLOPT_MIMEPOST, req->mime);
  } else if (req->post) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body ? req->body : "");
  } else {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_USERAGENT, req->user_agent);
  curl_easy_setopt(c, CURLOPT_COOKIE, req->cookie);
  curl_easy_setopt(c, CURLOPT_RANGE, req->range);
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, req->accept_encoding);
  /* An empty string, not NULL: NULL would let curl take http_proxy from the environment. */
  curl_easy_setopt(c, CURLOPT_PROXY, req->proxy != NULL ? req->proxy : "");
  curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, req->fresh_connection ? 1L : 0L);
  curl_easy_setopt(c, CURLOPT_FORBID_REUSE, req->fresh_connection ? 1L : 0L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, remaining);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)req->max_bytes);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
  struct opener opener = {req, 0};
  if (req->connect_check != NULL) {
    curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_checked);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &opener);
  }

  CURLcode cc = curl_easy_perform(c);
  rv = curl_error(cc, &s);
  if (rv != 0 && opener.refused) rv = -EACCES;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
  *reason = transport_reason(rv);

  char target[256], code[24], dur[24], proxy[16];
  log_target(target, sizeof(target), req->url);
  snprintf(code, sizeof(code), "%ld", *status);
  snprintf(dur, sizeof(dur), "%llu", (unsigned long long)(util_now_ms() - now));
  snprintf(proxy, sizeof(proxy), "%d", req->proxy_index);
  redact_userinfo(t->errbuf, req->proxy);
  redact_userinfo(t->errbuf, req->url);
  if (rv == 0)
    log_msg(LOG_DEBUG, "upstream request", "request_id", req->request_id, "target", target, "=upstream_status", code,
            "=dur_ms", dur, "=proxy", proxy, NULL);
  else
    log_msg(LOG_WARN, "upstream request failed", "request_id", req->request_id, "target", target, "=upstream_status",
            code, "=dur_ms", dur, "=proxy", proxy, "reason", proto_reason_name(*reason), "error",
            t->errbuf[0] ? t->errbuf : curl_easy_strerror(cc), NULL);
fail:
  if (rv == -ENOMEM) *reason = PROTO_REASON_INTERNAL;
  /* The handle keeps pointers to these: clear them before they go. */
  curl_easy_setopt(t->curl, CURLOPT_HTTPHEADER, NULL);
  curl_easy_setopt(t->curl, CURLOPT_WRITEDATA, NULL);
  curl_easy_setopt(t->curl, CURLOPT_MIMEPOST, NULL);
  curl_easy_setopt(t->curl, CURLOPT_OPENSOCKETFUNCTION, NULL);
  curl_easy_setopt(t->curl, CURLOPT_OPENSOCKETDATA, NULL);
  curl_slist_free_all(headers);
  return rv;
}

int transport_fetch(struct transport *t, const struct transport_req *req, transport_policy policy, const void *ctx,
                    int max_redirects, struct buf *out, long *status, uint8_t *reason, struct buf *final_url) {
  struct buf url = BUF_INIT;
  struct transport_req hop = *req;
  size_t start = out->len;
  *status = 0;
  int rv = policy(ctx, req->url, &url);
  for (int hops = 0; rv == 0; hops++) {
    out->len = start; /* a redirect's own body is not the answer */
    hop.url = url.data;
    if (hop.admit != NULL) {
      rv = hop.admit(hop.admit_ctx);
      if (rv != 0) break;
    }
    rv = transport_perform(t, &hop, out, status, reason);
    if (rv != 0 || *status < 300 || *status > 399 || *status == 304) break;
    /* curl resolves a relative Location against the URL it just fetched. */
    char *location = NULL;
    if (curl_easy_getinfo(t->curl, CURLINFO_REDIRECT_URL, &location) != CURLE_OK || location == NULL) break;
    if (hops == max_redirects) {
      rv = -ELOOP;
      break;
    }
    struct buf next = BUF_INIT;
    rv = policy(ctx, location, &next);
    if (rv != 0) {
      buf_free(&next);
      rv = rv == -ENOMEM ? rv : -EPERM;
      break;
    }
    buf_free(&url);
    url = next;
    if (*status != 307 && *status != 308) {
      hop.post = 0;
      hop.mime = NULL;
    }
  }
  if (rv != 0) *reason = transport_reason(rv);
  if (final_url != NULL) {
    buf_reset(final_url);
    if (url.data != NULL && buf_puts(final_url, url.data) != 0 && rv == 0) rv = -ENOMEM;
  }
  buf_free(&url);
  return rv;
}

const char *transport_header(struct transport *t, const char *name) {
  struct curl_header *h = NULL;
  if (curl_easy_header(t->curl, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK || h == NULL) return NULL;
  return h->value;
}
