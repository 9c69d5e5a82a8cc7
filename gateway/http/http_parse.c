/*
 * Reading a request: llhttp's callbacks, the framing it would let through and we refuse (a bare CR, obs-fold), the
 * headers we keep, the checks of a complete head (Host, method, target, body framing), and the protocol errors'
 * answers.
 */
#include "gateway/http/http_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/ident.h"
#include "common/util.h"
#include "gateway/http/routes.h"

static llhttp_settings_t parser_settings;

/* Whether s (len bytes) is an acceptable client X-Request-Id: 1..64 characters of [A-Za-z0-9._-]. */
static int request_id_valid(const char *s, size_t len) { return ident_token_valid(s, len, VTS_MAX_REQUEST_ID_BYTES); }

static void conn_set_request_id(struct http_conn *conn) {
  if (conn->rid_set) return;
  if (conn->rid_in_seen && !conn->rid_in_bad && request_id_valid(conn->rid_in, conn->rid_in_len)) {
    memcpy(conn->rid, conn->rid_in, conn->rid_in_len);
    conn->rid[conn->rid_in_len] = '\0';
  } else {
    struct http_server *srv = conn->srv;
    if (srv->rid_pool_used + HTTP_REQUEST_ID_RANDOM_BYTES > sizeof(srv->rid_pool) &&
        util_random_bytes(srv->rid_pool, sizeof(srv->rid_pool)) == 0)
      srv->rid_pool_used = 0;
    if (srv->rid_pool_used + HTTP_REQUEST_ID_RANDOM_BYTES <= sizeof(srv->rid_pool)) {
      util_hex(srv->rid_pool + srv->rid_pool_used, HTTP_REQUEST_ID_RANDOM_BYTES, conn->rid);
      srv->rid_pool_used += HTTP_REQUEST_ID_RANDOM_BYTES;
    } else {
      /* getrandom cannot fail once the pool is ready; keep the id unique per process anyway. */
      static unsigned long long fallback;
      snprintf(conn->rid, sizeof(conn->rid), "r%llu", ++fallback);
    }
  }
  conn->rid_set = 1;
  conn->req.request_id = conn->rid;
}

void conn_reset_request(struct http_conn *conn) {
  buf_reset(&conn->url);
  conn->header_bytes = 0;
  conn->header_count = 0;
  conn->cur_hdr = HDR_OTHER;
  conn->hname_len = 0;
  conn->api_key_len = 0;
  conn->api_key_seen = 0;
  conn->api_key_bad = 0;
  conn->rid_in_len = 0;
  conn->rid_in_seen = 0;
  conn->rid_in_bad = 0;
  conn->rid_set = 0;
  conn->host_count = 0;
  conn->host_state = 0;
  conn->ctype_len = 0;
  conn->ctype_seen = 0;
  conn->ctype_bad = 0;
  conn->cenc_seen = 0;
  conn->expect_len = 0;
  conn->expect_bad = 0;
  buf_free(&conn->body); /* a body is rare: an idle connection keeps none */
  conn->body_left = 0;
  conn->body_unread = 0;
  if (conn->neg != NULL) {
    memset(&conn->neg->ae, 0, sizeof(conn->neg->ae));
    memset(&conn->neg->inm, 0, sizeof(conn->neg->inm));
    memset(&conn->neg->acc, 0, sizeof(conn->neg->acc));
    memset(&conn->neg->auth, 0, sizeof(conn->neg->auth));
    memset(&conn->neg->origin, 0, sizeof(conn->neg->origin));
    memset(&conn->neg->mcpv, 0, sizeof(conn->neg->mcpv));
  }
  conn->err = API_OK;
  memset(&conn->req, 0, sizeof(conn->req));
  conn->req.method = -1;
  conn->req.route = ROUTE_OTHER;
  conn->req.request_id = "";
  conn->req.start_ms = util_now_ms();
  conn->req.start_ns = uv_hrtime();
}

static int on_message_begin(llhttp_t *p) {
  struct http_conn *conn = p->data;
  conn_reset_request(conn);
  conn->state = CONN_HEADERS;
  /* The header deadline starts once this read is parsed, and only if the head is still incomplete then. */
  conn->head_begun = 1;
  return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len) {
  struct http_conn *conn = p->data;
  if (conn->req.method < 0) conn->req.method = llhttp_get_method(p);
  if (conn->url.len + len > VTS_MAX_REQUEST_LINE_BYTES) {
    conn->err = API_ERR_URI_TOO_LONG;
    return HPE_USER;
  }
  if (buf_append(&conn->url, at, len) != 0) {
    conn->err = API_ERR_SERVICE_UNAVAILABLE;
    return HPE_USER;
  }
  return 0;
}

static int count_header_bytes(struct http_conn *conn, size_t len) {
  conn->header_bytes += len;
  if (conn->header_bytes > VTS_MAX_HEADER_BYTES) {
    conn->err = API_ERR_HEADERS_TOO_LARGE;
    return HPE_USER;
  }
  return 0;
}

static void append_capped(char *dst, size_t cap, size_t *dlen, int *bad, const char *at, size_t len) {
  if (*dlen + len > cap) {
    *bad = 1;
    return;
  }
  memcpy(dst + *dlen, at, len);
  *dlen += len;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len) {
  struct http_conn *conn = p->data;
  if (count_header_bytes(conn, len) != 0) return HPE_USER;
  /*
   * RFC 9112 5.1: whitespace between a field name and its colon is 400 (a proxy might read the name otherwise). The
   * byte after the name's last piece, when it is in these bytes, is what ended the name: it must be the colon.
   */
  if (memchr(at, ' ', len) != NULL || memchr(at, '\t', len) != NULL || (at + len < conn->exec_end && at[len] != ':')) {
    conn->err = API_ERR_BAD_REQUEST;
    return HPE_USER;
  }
  if (conn->hname_len + len < sizeof(conn->hname)) {
    memcpy(conn->hname + conn->hname_len, at, len);
    conn->hname_len += len;
  } else {
    conn->hname_len = sizeof(conn->hname); /* too long to be one we look at */
  }
  return 0;
}

static int hname_is(const struct http_conn *conn, const char *name) {
  size_t n = strlen(name);
  return conn->hname_len == n && strncasecmp(conn->hname, name, n) == 0;
}

static void append_capped(char *dst, size_t cap, size_t *dlen, int *bad, const char *at, size_t len);

/* A new line of a list header: joined to the previous ones with ", ". */
static void list_header_begin(struct list_header *h, char *dst, size_t cap) {
  if (h->seen) append_capped(dst, cap, &h->len, &h->bad, ", ", 2);
  h->seen = 1;
}

static int on_header_field_complete(llhttp_t *p) {
  struct http_conn *conn = p->data;
  if (++conn->header_count > VTS_MAX_HEADER_COUNT) {
    conn->err = API_ERR_HEADERS_TOO_LARGE;
    return HPE_USER;
  }
  conn->cur_hdr = HDR_OTHER;
  if (hname_is(conn, "x-api-key")) {
    /* Two keys in one request: neither is trusted. */
    if (conn->api_key_seen) conn->api_key_bad = 1;
    conn->api_key_seen = 1;
    conn->cur_hdr = HDR_API_KEY;
  } else if (hname_is(conn, "x-request-id")) {
    if (conn->rid_in_seen) conn->rid_in_bad = 1;
    conn->rid_in_seen = 1;
    conn->cur_hdr = HDR_REQUEST_ID;
  } else if (hname_is(conn, "accept-encoding") || hname_is(conn, "if-none-match") || hname_is(conn, "accept") ||
             hname_is(conn, "authorization") || hname_is(conn, "origin") || hname_is(conn, "mcp-protocol-version")) {
    if (conn->neg == NULL) conn->neg = calloc(1, sizeof(*conn->neg));
    if (conn->neg == NULL) {
      conn->err = API_ERR_SERVICE_UNAVAILABLE;
      return HPE_USER;
    }
    struct conn_negotiation *n = conn->neg;
    if (hname_is(conn, "accept-encoding")) {
      conn->cur_hdr = HDR_ACCEPT_ENCODING;
      list_header_begin(&n->ae, n->ae_buf, sizeof(n->ae_buf));
    } else if (hname_is(conn, "if-none-match")) {
      conn->cur_hdr = HDR_IF_NONE_MATCH;
      list_header_begin(&n->inm, n->inm_buf, sizeof(n->inm_buf));
    } else if (hname_is(conn, "authorization") || hname_is(conn, "origin") || hname_is(conn, "mcp-protocol-version")) {
      struct list_header *h = hname_is(conn, "authorization") ? &n->auth
                              : hname_is(conn, "origin")      ? &n->origin
                                                              : &n->mcpv;
      conn->cur_hdr = h == &n->auth ? HDR_AUTHORIZATION : h == &n->origin ? HDR_ORIGIN : HDR_MCP_VERSION;
      if (h->seen) h->bad = 1;
      h->seen = 1;
    } else {
      conn->cur_hdr = HDR_ACCEPT;
      list_header_begin(&n->acc, n->acc_buf, sizeof(n->acc_buf));
    }
  } else if (hname_is(conn, "host")) {
    conn->host_count++;
    conn->cur_hdr = HDR_HOST;
  } else if (hname_is(conn, "content-type")) {
    if (conn->ctype_seen) conn->ctype_bad = 1;
    conn->ctype_seen = 1;
    conn->cur_hdr = HDR_CONTENT_TYPE;
  } else if (hname_is(conn, "expect")) {
    conn->cur_hdr = HDR_EXPECT;
    if (conn->expect_len > 0) conn->expect_bad = 1;
  } else if (hname_is(conn, "content-encoding")) {
    conn->cenc_seen = 1;
  } else if (hname_is(conn, "transfer-encoding")) {
    /* GET carries no body; any Transfer-Encoding is a framing question we refuse to answer. */
    conn->err = API_ERR_BAD_REQUEST;
    return HPE_USER;
  }
  conn->hname_len = 0;
  return 0;
}

static void host_feed(unsigned char *state, const char *s, size_t len);

/* A header kept whole in its own buffer of the connection's negotiation (name_buf, and name's len and bad). */
#define KEEP_CAPPED(name)                                                                                             \
  append_capped(conn->neg->name##_buf, sizeof(conn->neg->name##_buf), &conn->neg->name.len, &conn->neg->name.bad, at, \
                len)

static int on_header_value(llhttp_t *p, const char *at, size_t len) {
  struct http_conn *conn = p->data;
  if (count_header_bytes(conn, len) != 0) return HPE_USER;
  /* llhttp 8.1.0 can take a CR that no LF follows as part of a value (CVE-2023-30589); we never do. */
  if (memchr(at, '\r', len) != NULL) {
    conn->err = API_ERR_BAD_REQUEST;
    return HPE_USER;
  }
  switch (conn->cur_hdr) {
    case HDR_API_KEY:
      append_capped(conn->api_key, VTS_MAX_API_KEY_BYTES, &conn->api_key_len, &conn->api_key_bad, at, len);
      break;
    case HDR_REQUEST_ID:
      append_capped(conn->rid_in, VTS_MAX_REQUEST_ID_BYTES, &conn->rid_in_len, &conn->rid_in_bad, at, len);
      break;
    case HDR_ACCEPT_ENCODING:
      KEEP_CAPPED(ae);
      break;
    case HDR_IF_NONE_MATCH:
      KEEP_CAPPED(inm);
      break;
    case HDR_ACCEPT:
      KEEP_CAPPED(acc);
      break;
    case HDR_AUTHORIZATION:
      KEEP_CAPPED(auth);
      break;
    case HDR_ORIGIN:
      KEEP_CAPPED(origin);
      break;
    case HDR_MCP_VERSION:
      KEEP_CAPPED(mcpv);
      break;
    case HDR_HOST:
      host_feed(&conn->host_state, at, len);
      break;
    case HDR_CONTENT_TYPE:
      append_capped(conn->ctype, sizeof(conn->ctype), &conn->ctype_len, &conn->ctype_bad, at, len);
      break;
    case HDR_EXPECT:
      append_capped(conn->expect, sizeof(conn->expect), &conn->expect_len, &conn->expect_bad, at, len);
      break;
    default:
      break;
  }
  return 0;
}
#undef KEEP_CAPPED

static int on_header_value_complete(llhttp_t *p) {
  struct http_conn *conn = p->data;
  conn->cur_hdr = HDR_OTHER;
  return 0;
}

static size_t trim_trailing_ws(const char *s, size_t len) {
  while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
  return len;
}

/*
 * Whether the method (llhttp_method_t) is one of RFC 9110's (GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE)
 * or PATCH: a route answers those 405 with Allow when it does not take them; any other method is 501.
 */
static int method_known(int method) {
  switch (method) {
    case HTTP_GET:
    case HTTP_HEAD:
    case HTTP_POST:
    case HTTP_PUT:
    case HTTP_DELETE:
    case HTTP_CONNECT:
    case HTTP_OPTIONS:
    case HTTP_TRACE:
    case HTTP_PATCH:
      return 1;
    default:
      return 0;
  }
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/*
 * Where a Host value stands after the bytes seen so far: uri-host [":" port], where uri-host is a reg-name
 * (unreserved, sub-delims and %XX; an IPv4 address is one too) or an IP literal in brackets (hex digits, colons and
 * dots). The value arrives in pieces and is checked byte by byte, so no connection keeps a copy of it. Trailing
 * whitespace (llhttp leaves it in the value) may follow a complete host.
 */
enum host_state {
  HOST_EMPTY = 0,
  HOST_NAME,
  HOST_PCT1, /* after '%' */
  HOST_PCT2, /* after '%' and one hex digit */
  HOST_LITERAL_OPEN,
  HOST_LITERAL,
  HOST_LITERAL_END,
  HOST_PORT,
  HOST_WS,
  HOST_BAD
};

static int host_complete(enum host_state st) {
  return st == HOST_EMPTY || st == HOST_NAME || st == HOST_LITERAL_END || st == HOST_PORT || st == HOST_WS;
}

static enum host_state host_step(enum host_state st, char c) {
  if (c == ' ' || c == '\t') return host_complete(st) ? HOST_WS : HOST_BAD;
  if (st == HOST_EMPTY && c == '[') return HOST_LITERAL_OPEN;
  switch (st) {
    case HOST_EMPTY: /* a reg-name begins */
    case HOST_NAME:
      if (c == '%') return HOST_PCT1;
      if (c == ':') return HOST_PORT;
      if (is_alpha(c) || is_digit(c) || (c != '\0' && strchr("-._~!$&'()*+,;=", c) != NULL)) return HOST_NAME;
      return HOST_BAD;
    case HOST_PCT1:
      return is_hex(c) ? HOST_PCT2 : HOST_BAD;
    case HOST_PCT2:
      return is_hex(c) ? HOST_NAME : HOST_BAD;
    case HOST_LITERAL_OPEN:
    case HOST_LITERAL:
      if (c == ']') return st == HOST_LITERAL ? HOST_LITERAL_END : HOST_BAD;
      return is_hex(c) || c == ':' || c == '.' ? HOST_LITERAL : HOST_BAD;
    case HOST_LITERAL_END:
      return c == ':' ? HOST_PORT : HOST_BAD;
    case HOST_PORT:
      return is_digit(c) ? HOST_PORT : HOST_BAD;
    default:
      return HOST_BAD;
  }
}

static void host_feed(unsigned char *state, const char *s, size_t len) {
  enum host_state st = *state;
  for (size_t i = 0; i < len && st != HOST_BAD; i++) st = host_step(st, s[i]);
  *state = (unsigned char)st;
}

/*
 * Whether s (len bytes) is a valid Host field value (RFC 9110 7.2: uri-host [":" port]; empty allowed): a reg-name
 * of unreserved, pct-encoded and sub-delims characters, an IPv4 address, or an IP literal in brackets.
 */
static int host_valid(const char *s, size_t len) {
  unsigned char st = HOST_EMPTY;
  host_feed(&st, s, len);
  return host_complete((enum host_state)st);
}

/*
 * An absolute-form target (RFC 9112 3.2.2, "http://host/path?query"): *path_at is where its path begins (at its '?'
 * or its end when it has none). Returns 1 for one with a valid authority, 0 for any other form, -1 for an
 * absolute-form target without a valid authority.
 */
static int absolute_form(const char *url, size_t len, size_t *path_at) {
  size_t start;
  *path_at = 0;
  if (len >= 7 && strncasecmp(url, "http://", 7) == 0)
    start = 7;
  else if (len >= 8 && strncasecmp(url, "https://", 8) == 0)
    start = 8;
  else
    return 0;
  size_t end = start;
  while (end < len && url[end] != '/' && url[end] != '?') end++;
  if (end == start || !host_valid(url + start, end - start)) return -1;
  *path_at = end;
  return 1;
}

/*
 * The head's framing and request line as we take them: no Transfer-Encoding, HTTP/1.x only, exactly one valid Host
 * for HTTP/1.1 (none or one for HTTP/1.0), a method we know. Returns API_OK or the error that answers the request.
 */
static enum api_error head_check(const llhttp_t *p, const struct http_conn *conn) {
  if (p->flags & F_TRANSFER_ENCODING) return API_ERR_BAD_REQUEST;
  /* llhttp 8.1.0 also takes "HTTP/0.9" and "HTTP/2.0" request lines; we speak HTTP/1.x framing only. */
  if (p->http_major != 1) return API_ERR_BAD_REQUEST;
  /* RFC 9112 3.2: an HTTP/1.1 request has exactly one Host, and a valid one; an HTTP/1.0 request may have none. */
  if (conn->host_count > 1 || (conn->host_count == 0 && p->http_minor >= 1) ||
      (conn->host_count == 1 && !host_complete((enum host_state)conn->host_state)))
    return API_ERR_BAD_REQUEST;
  if (!method_known(conn->req.method)) return API_ERR_NOT_IMPLEMENTED;
  return API_OK;
}

/* The request's path and query from its target. Returns 0, or -EINVAL for an absolute form with a bad authority. */
static int head_target(struct http_conn *conn) {
  struct http_request *req = &conn->req;
  const char *url = conn->url.data != NULL ? conn->url.data : "";
  size_t path_at = 0;
  int absolute = absolute_form(url, conn->url.len, &path_at);
  if (absolute < 0) return -EINVAL;
  /* An absolute-form target's authority stands for Host (RFC 9112 3.2.2): the route is its path. */
  const char *target = url + path_at;
  size_t target_len = conn->url.len - path_at;
  const char *q = memchr(target, '?', target_len);
  req->path = target;
  req->path_len = q != NULL ? (size_t)(q - target) : target_len;
  if (q != NULL) {
    req->query = q + 1;
    req->query_len = target_len - req->path_len - 1;
  }
  if (absolute && req->path_len == 0) {
    req->path = "/";
    req->path_len = 1;
  }
  req->route = route_find(req->path, req->path_len);
  return 0;
}

/* Hands the headers kept while parsing to the request: its id, the negotiation headers, the key, the body's type. */
static void head_give_headers(struct http_conn *conn) {
  struct http_request *req = &conn->req;
  conn->rid_in_len = trim_trailing_ws(conn->rid_in, conn->rid_in_len);
  conn_set_request_id(conn);
  struct conn_negotiation *n = conn->neg;
  if (n != NULL && n->ae.seen && !n->ae.bad) {
    req->accept_encoding = n->ae_buf;
    req->accept_encoding_len = n->ae.len;
  }
  if (n != NULL && n->inm.seen && !n->inm.bad) {
    req->if_none_match = n->inm_buf;
    req->if_none_match_len = n->inm.len;
  }
  if (n != NULL && n->acc.seen && !n->acc.bad) {
    req->accept = n->acc_buf;
    req->accept_len = n->acc.len;
  }
  if (n != NULL) {
    req->authorization = n->auth.seen && !n->auth.bad ? n->auth_buf : NULL;
    req->authorization_len = trim_trailing_ws(n->auth_buf, n->auth.len);
    req->origin = n->origin.seen && !n->origin.bad ? n->origin_buf : NULL;
    req->origin_bad = n->origin.seen && n->origin.bad;
    req->origin_len = trim_trailing_ws(n->origin_buf, n->origin.len);
    req->mcp_version = n->mcpv.seen && !n->mcpv.bad ? n->mcpv_buf : NULL;
    req->mcp_version_bad = n->mcpv.seen && n->mcpv.bad;
    req->mcp_version_len = trim_trailing_ws(n->mcpv_buf, n->mcpv.len);
  }
  if (conn->api_key_seen) {
    conn->api_key_len = trim_trailing_ws(conn->api_key, conn->api_key_len);
    if (conn->api_key_bad || conn->api_key_len == 0) {
      req->key_state = HTTP_KEY_INVALID;
    } else {
      req->key_state = HTTP_KEY_PRESENT;
      req->api_key = conn->api_key;
      req->api_key_len = conn->api_key_len;
    }
  }
  if (conn->ctype_seen && !conn->ctype_bad) {
    req->content_type = conn->ctype;
    req->content_type_len = trim_trailing_ws(conn->ctype, conn->ctype_len);
  }
  req->content_encoded = conn->cenc_seen;
}

/*
 * The body of a route that reads one. RFC 9110 8.6 and 15.5.12: a body is framed by Content-Length here
 * (Transfer-Encoding is refused before), so a POST without one is 411; one larger than we read is 413 at once, unread
 * (15.5.14), and the connection closes. Otherwise the handler sees the head first (body_waiting): a refusal (no key,
 * a spent window, a full cap) costs no byte of the body, which stays unread (bytes already sent wait in pending, up
 * to HTTP_READ_BUF_BYTES) until the handler asks for it (http_request_read_body). Returns API_OK (the head goes to
 * its handler now, or there is no body) or the error.
 */
static enum api_error head_await_body(const llhttp_t *p, struct http_conn *conn) {
  if (!(p->flags & F_CONTENT_LENGTH)) return API_ERR_LENGTH_REQUIRED;
  if (p->content_length > VTS_MAX_REQUEST_BODY_BYTES) return API_ERR_BODY_TOO_LARGE;
  if (p->content_length == 0) return API_OK;
  conn->body_left = (size_t)p->content_length;
  conn->body_unread = 1;
  conn->req.body_waiting = 1;
  return API_OK;
}

int http_request_read_body(struct http_request *req, http_body_cb cb, void *arg) {
  struct http_conn *conn = conn_of(req);
  if (conn->closing) return -ECONNRESET;
  if (conn->state != CONN_BUSY || !conn->body_unread) return -EALREADY;
  if (buf_reserve(&conn->body, conn->body_left + 1) != 0) {
    conn_fail(conn, API_ERR_SERVICE_UNAVAILABLE);
    return -ENOMEM;
  }
  conn->body_unread = 0;
  req->body_waiting = 0;
  conn->body_cb = cb;
  conn->body_cb_arg = arg;
  conn->state = CONN_BODY;
  /* The body has the header timeout of its own, from now. */
  conn_timer(conn, conn->srv->cfg->header_timeout_ms);
  /*
   * RFC 9110 10.1.1: a client that asked to hear before it sends the body (curl does for a large one) is told to go
   * on now, rather than after its own wait; an HTTP/1.0 client is sent no 1xx, nor one that sent bytes already. The
   * line is tiny and the connection writes nothing else now: what the socket does not take is left, and the client
   * goes on after its wait as it would anyway.
   */
  static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
  size_t el = trim_trailing_ws(conn->expect, conn->expect_len);
  if (!conn->expect_bad && conn->parser.http_minor >= 1 && el == 12 &&
      strncasecmp(conn->expect, "100-continue", 12) == 0 && conn->pending == NULL) {
    uv_buf_t b = uv_buf_init((char *)(uintptr_t)cont, sizeof(cont) - 1);
    (void)uv_try_write((uv_stream_t *)&conn->tcp, &b, 1);
  }
  llhttp_resume(&conn->parser);
  char *rest = conn->pending;
  size_t rest_len = conn->pending_len;
  conn->pending = NULL;
  conn->pending_len = 0;
  conn->refs++; /* cb may end the request while its bytes are parsed */
  if (rest != NULL) conn_execute(conn, rest, rest_len);
  free(rest);
  if (!conn->closing && conn->state == CONN_BODY) conn_read_start(conn);
  conn_unref(conn);
  return 0;
}

/* A head is complete: checked, its target and headers given to the request, its body awaited, skipped or refused. */
static int on_headers_complete(llhttp_t *p) {
  struct http_conn *conn = p->data;
  struct http_request *req = &conn->req;
  uv_timer_stop(&conn->timer);
  conn->state = CONN_BUSY;
  req->method = llhttp_get_method(p);
  conn->err = head_check(p, conn);
  if (conn->err != API_OK) return -1;
  conn->keep_alive = llhttp_should_keep_alive(p) && !p->upgrade && !conn->srv->draining;
  if (head_target(conn) != 0) {
    conn->err = API_ERR_BAD_REQUEST;
    return -1;
  }
  head_give_headers(conn);
  if (route_reads_body(req->route, req->method)) {
    conn->err = head_await_body(p, conn);
    if (conn->err != API_OK) return -1;
    return req->body_waiting ? HPE_PAUSED : 0;
  }
  if ((p->flags & F_CONTENT_LENGTH) && p->content_length > VTS_MAX_BODY_BYTES) {
    /*
     * A body no route reads: the request goes to its route now, without its body, so that 404 and 405 come before
     * 413 (RFC 9110 15.5.6). The body is never parsed; the connection closes after the answer.
     */
    req->has_body = 1;
    conn->keep_alive = 0;
    return HPE_PAUSED;
  }
  return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len) {
  struct http_conn *conn = p->data;
  /* Only a route that reads a body gets here with one (another stops at its head); Content-Length bounds it. */
  if (conn->state != CONN_BODY || len > conn->body_left || buf_append(&conn->body, at, len) != 0) {
    conn->err = API_ERR_BAD_REQUEST;
    return HPE_USER;
  }
  conn->body_left -= len;
  return 0;
}

static int on_message_complete(llhttp_t *p) {
  struct http_conn *conn = p->data;
  if (conn->state == CONN_BODY) {
    uv_timer_stop(&conn->timer);
    if (conn->body.data != NULL) conn->body.data[conn->body.len] = '\0'; /* reserved: parsers take a C string */
    conn->req.body = conn->body.data != NULL ? conn->body.data : "";
    conn->req.body_len = conn->body.len;
  }
  conn->state = CONN_BUSY;
  /* One request at a time: parsing resumes once this response has been written. */
  return HPE_PAUSED;
}

/*
 * Returns how many bytes of data can go to llhttp before a framing shape we refuse: a CR not followed by LF, or a
 * line that starts with whitespace (obs-fold). A request carries no body here, so every byte is request head.
 */
static size_t framing_scan(unsigned char prev, const char *data, size_t len) {
  if (len == 0) return 0;
  /* The last byte of the previous read speaks for the first one of this read. */
  if (prev == '\r' && data[0] != '\n') return 0;
  if (prev == '\n' && (data[0] == ' ' || data[0] == '\t')) return 0;
  /* Only the bytes after a CR or an LF matter: jump from one to the next, in order (memchr, not byte by byte). */
  const char *end = data + len;
  const char *cr = memchr(data, '\r', len), *lf = memchr(data, '\n', len);
  while (cr != NULL || lf != NULL) {
    if (cr != NULL && (lf == NULL || cr < lf)) {
      if (cr + 1 < end && cr[1] != '\n') return (size_t)(cr + 1 - data);
      cr = memchr(cr + 1, '\r', (size_t)(end - cr - 1));
    } else {
      if (lf + 1 < end && (lf[1] == ' ' || lf[1] == '\t')) return (size_t)(lf + 1 - data);
      lf = memchr(lf + 1, '\n', (size_t)(end - lf - 1));
    }
  }
  return len;
}

void conn_fail_with(struct http_conn *conn, enum api_error e, const char *extra_headers) {
  conn_body_lost(conn, -EIO);
  conn_read_stop(conn);
  uv_timer_stop(&conn->timer);
  conn->keep_alive = 0;
  conn->state = CONN_BUSY;
  conn_set_request_id(conn);
  http_respond_error(&conn->req, e, extra_headers);
}

void conn_fail(struct http_conn *conn, enum api_error e) { conn_fail_with(conn, e, NULL); }

static int is_tchar(char c) {
  return is_alpha(c) || is_digit(c) || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/*
 * llhttp refuses a method it does not know as it refuses garbage. From where it stopped, a token that a space ends
 * (or these bytes end) is a method, which RFC 9110 9.1 answers 501; anything else is a malformed request line.
 */
static int unknown_method_at(const char *pos, const char *end) {
  if (pos == NULL || pos >= end || !is_tchar(*pos)) return 0;
  while (pos < end && is_tchar(*pos)) pos++;
  return pos == end || *pos == ' ';
}

void conn_execute(struct http_conn *conn, const char *data, size_t len) {
  size_t ok;
  llhttp_errno_t e;
  for (;;) {
    /* A body's bytes are not request head: they go to llhttp unscanned, bounded by what Content-Length leaves. */
    int in_body = conn->state == CONN_BODY;
    ok = in_body ? (len < conn->body_left ? len : conn->body_left) : framing_scan(conn->last_byte, data, len);
    conn->exec_end = data + ok;
    e = llhttp_execute(&conn->parser, data, ok);
    conn->exec_end = NULL;
    if (e != HPE_OK || ok == len) break;
    /* All of ok was taken and more follows: go on if a body began (or went on) within these bytes. */
    if (conn->state != CONN_BODY && !in_body) break;
    if (ok > 0) conn->last_byte = in_body ? 0 : (unsigned char)data[ok - 1];
    data += ok;
    len -= ok;
  }
  if (conn->head_begun) {
    /* A head that is complete already needs no deadline (the usual case: no timer set and stopped per request). */
    conn->head_begun = 0;
    if (conn->state == CONN_HEADERS) conn_timer(conn, conn->srv->cfg->header_timeout_ms);
  }
  if (e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) {
    size_t used = (size_t)(llhttp_get_error_pos(&conn->parser) - data);
    /* A body's last byte is no part of the framing: a body ending in CR must not look like a bare CR to the next head.
     */
    if (used > 0) conn->last_byte = conn->req.body != NULL ? 0 : (unsigned char)data[used - 1];
    /* Reading goes on while the request is answered (on_read holds what comes): no epoll change per request. */
    if (used < len) {
      char *rest = malloc(len - used);
      if (rest == NULL) {
        conn_fail(conn, API_ERR_SERVICE_UNAVAILABLE);
        return;
      }
      memcpy(rest, data + used, len - used);
      conn->pending = rest;
      conn->pending_len = len - used;
    }
    conn_dispatch(conn);
    return;
  }
  if (e == HPE_INVALID_METHOD && unknown_method_at(llhttp_get_error_pos(&conn->parser), data + ok)) {
    conn_fail(conn, API_ERR_NOT_IMPLEMENTED);
    return;
  }
  if (e != HPE_OK) {
    conn_fail(conn, conn->err != API_OK ? conn->err : API_ERR_BAD_REQUEST);
    return;
  }
  if (ok < len) {
    conn_fail(conn, API_ERR_BAD_REQUEST);
    return;
  }
  if (len > 0) conn->last_byte = conn->state == CONN_BODY ? 0 : (unsigned char)data[len - 1];
}

void conn_parse_settings_init(void) {
  llhttp_settings_init(&parser_settings);
  parser_settings.on_message_begin = on_message_begin;
  parser_settings.on_url = on_url;
  parser_settings.on_header_field = on_header_field;
  parser_settings.on_header_field_complete = on_header_field_complete;
  parser_settings.on_header_value = on_header_value;
  parser_settings.on_header_value_complete = on_header_value_complete;
  parser_settings.on_headers_complete = on_headers_complete;
  parser_settings.on_message_complete = on_message_complete;
  parser_settings.on_body = on_body;
}

void conn_parse_init(struct http_conn *conn) {
  llhttp_init(&conn->parser, HTTP_REQUEST, &parser_settings);
  /* Leniency flags default to off; set them explicitly so a newer llhttp default cannot loosen framing. */
  llhttp_set_lenient_headers(&conn->parser, 0);
  llhttp_set_lenient_chunked_length(&conn->parser, 0);
  llhttp_set_lenient_keep_alive(&conn->parser, 0);
  llhttp_set_lenient_transfer_encoding(&conn->parser, 0);
  conn->parser.data = conn;
  conn_reset_request(conn);
}
