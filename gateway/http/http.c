#include "gateway/http/http.h"
#include "gateway/metrics/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>

#include "common/buf.h"
#include "common/ident.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/http/routes.h"
#include "gateway/http/status.h"

/*
 * One read buffer per worker serves every connection: libuv fills it and our read callback parses it at once, so it
 * never holds bytes across callbacks. Only bytes behind a complete (pipelined) request are copied to the connection.
 */
#define HTTP_READ_BUF_BYTES (64 * 1024)
/*
 * A request still waiting for its answer when the drain ends gets 503 with this Retry-After (seconds: another
 * gateway, or this one restarted, answers by then), and its connection this long to write it (well inside the
 * master's MASTER_STOP_GRACE_MS past the drain).
 */
#define HTTP_DRAIN_RETRY_AFTER_S "1"
#define HTTP_DRAIN_ANSWER_GRACE_MS 1000
/*
 * Status line and fixed headers (~200 bytes), X-Request-Id (64), Connection (24) and the caller's extra lines (rate
 * limit ~130, ETag, Cache-Control, Vary and Content-Encoding ~140) must fit here.
 */
#define HTTP_HEAD_BYTES 768
/* Longest header name we look at ("transfer-encoding"); longer names are never ours. */
#define HTTP_HNAME_BYTES 24
#define HTTP_REQUEST_ID_RANDOM_BYTES 16
/* Random bytes drawn at once for request ids: one getrandom call every 256 requests instead of one each. */
#define HTTP_RID_POOL_BYTES (256 * HTTP_REQUEST_ID_RANDOM_BYTES)
/* Logged (and counted) for a request whose client reset its connection before the answer; never sent. */
#define HTTP_STATUS_CLIENT_GONE 499
/* What a connection over VTS_MAX_CONNS is told before it is closed. */
#define HTTP_STR_(x) #x
#define HTTP_STR(x) HTTP_STR_(x)
#define HTTP_CAP_RETRY_AFTER "Retry-After: " HTTP_STR(VTS_CONN_CAP_RETRY_AFTER_S) "\r\n"

enum conn_state {
  CONN_IDLE,    /* between requests: no byte of the next one yet */
  CONN_HEADERS, /* a request has begun: its headers must complete in time */
  CONN_BODY,    /* the body of a route that reads one is arriving: it must complete in time too */
  CONN_BUSY,    /* a complete request is with its handler */
  CONN_WRITING, /* its response is being written */
  CONN_LINGER,  /* answered with close: FIN sent, discarding input until the peer closes */
};

enum hdr {
  HDR_OTHER = 0,
  HDR_API_KEY,
  HDR_REQUEST_ID,
  HDR_TRANSFER_ENCODING,
  HDR_ACCEPT_ENCODING,
  HDR_IF_NONE_MATCH,
  HDR_ACCEPT,
  HDR_HOST,
  HDR_CONTENT_TYPE,
  HDR_EXPECT,
  HDR_AUTHORIZATION,
  HDR_ORIGIN,
  HDR_MCP_VERSION
};

/* The longest Content-Type value kept ("application/json; charset=utf-8" and some room). */
#define HTTP_CTYPE_BYTES 64

/* A request header whose lines are joined into one list value (RFC 9110 5.3), up to a cap. */
struct list_header {
  size_t len;
  int seen;
  int bad; /* over the cap: the header is treated as absent */
};

/*
 * The negotiation headers of the current request (Accept-Encoding, If-None-Match, Accept). Allocated only for a
 * connection whose client sends one, so that the many idle keep-alive connections of a worker do not carry them.
 */
struct conn_negotiation {
  struct list_header ae;
  char ae_buf[VTS_MAX_ACCEPT_ENCODING_BYTES];
  struct list_header inm;
  char inm_buf[VTS_MAX_IF_NONE_MATCH_BYTES];
  struct list_header acc;
  char acc_buf[VTS_MAX_ACCEPT_BYTES];
  /* The headers only /mcp reads (Authorization, Origin, MCP-Protocol-Version): a repeat makes one unusable. */
  struct list_header auth;
  char auth_buf[VTS_MAX_API_KEY_BYTES + 16];
  struct list_header origin;
  char origin_buf[VTS_MAX_ORIGIN_BYTES];
  struct list_header mcpv;
  char mcpv_buf[32];
};

struct http_server {
  uv_loop_t *loop;
  const struct vts_config *cfg;
  http_request_cb cb;
  void *app;
  uv_tcp_t listener;
  uv_timer_t drain_timer;
  /*
   * Connections whose answer went out whole at once (the usual case): their write is finished from the next loop
   * turn, as libuv would finish it, without the write request whose completion re-arms the socket in epoll.
   */
  uv_idle_t written_idle;
  struct http_conn *written;
  int listener_open;
  int draining;
  int drained_reported;
  int freeing;
  int handles_open;
  void (*drained)(void *arg);
  void *drained_arg;
  struct http_conn *conns; /* every open connection, for the drain */
  size_t nconns;
  size_t nrefused; /* of those, connections over VTS_MAX_CONNS being answered 503 */
  /* Made in the worker (never before a fork), so no two processes draw the same ids. */
  unsigned char rid_pool[HTTP_RID_POOL_BYTES];
  size_t rid_pool_used;
  char rbuf[HTTP_READ_BUF_BYTES];
};

struct http_conn {
  uv_tcp_t tcp;
  uv_timer_t timer; /* header, idle, write or linger deadline, by state */
  union {
    uv_write_t write;
    uv_shutdown_t shutdown;
  } ureq;
  llhttp_t parser;
  struct http_server *srv;
  struct http_conn *prev, *next;
  struct http_conn *written_next; /* in srv->written, holding a reference */
  unsigned refs;                  /* open handles plus holds; the memory goes when it reaches 0 */
  enum conn_state state;
  unsigned closing : 1;
  unsigned reading : 1;
  unsigned keep_alive : 1;
  unsigned served : 1; /* a response went out: idle waits use the idle timeout */
  unsigned rid_set : 1;
  unsigned peer_done : 1;  /* the client closed its side (or failed) while a request was answered */
  unsigned head_begun : 1; /* a request head began in the bytes being parsed: its deadline is not set yet */
  unsigned refused : 1;    /* over VTS_MAX_CONNS: answered 503 and closed */
  unsigned char last_byte; /* last byte given to llhttp, for the framing scan across reads */
  enum api_error err;      /* our verdict when we stop llhttp from a callback */

  /* The request being parsed or served. */
  struct http_request req;
  struct buf url;
  size_t header_bytes;
  unsigned header_count;
  enum hdr cur_hdr;
  char hname[HTTP_HNAME_BYTES];
  size_t hname_len;
  char api_key[VTS_MAX_API_KEY_BYTES + 1];
  size_t api_key_len;
  int api_key_seen;
  int api_key_bad;
  char rid_in[VTS_MAX_REQUEST_ID_BYTES + 1];
  size_t rid_in_len;
  int rid_in_seen;
  int rid_in_bad;
  char rid[VTS_MAX_REQUEST_ID_BYTES + 1];
  unsigned host_count;
  unsigned char host_state;     /* enum host_state: the Host value is checked as it arrives, never kept */
  const char *exec_end;         /* the end of the bytes llhttp is parsing now */
  struct conn_negotiation *neg; /* made on the first Accept-Encoding or If-None-Match, kept with the connection */
  char ctype[HTTP_CTYPE_BYTES]; /* Content-Type, for a route that reads a body */
  size_t ctype_len;
  int ctype_seen;
  int ctype_bad;
  int cenc_seen;   /* Content-Encoding was sent */
  char expect[16]; /* Expect, for 100-continue */
  size_t expect_len;
  int expect_bad;
  struct buf body;  /* the body of a route that reads one, at most VTS_MAX_REQUEST_BODY_BYTES */
  size_t body_left; /* its bytes still to come */

  /*
   * Bytes that arrived behind a complete request (in its read, or read while it was answered: reading goes on then,
   * up to HTTP_READ_BUF_BYTES held), parsed once its response is written.
   */
  char *pending;
  size_t pending_len;

  char head[HTTP_HEAD_BYTES];
  void (*body_release)(void *owner); /* the body being written: whom to tell when done */
  void *body_owner;
};

static llhttp_settings_t parser_settings;

static struct http_conn *conn_of(const struct http_request *req) {
  return (struct http_conn *)(void *)((char *)(uintptr_t)req - offsetof(struct http_conn, req));
}

/* ---- dates and request ids ---- */

/* The IMF-fixdate of the current second, formatted at most once per second. Borrowed, valid until the next call. */
static const char *http_date_now(void) {
  static char date[40];
  static time_t date_sec = -1;
  time_t now = time(NULL);
  if (now != date_sec) {
    util_http_date(date, sizeof(date), now);
    date_sec = now;
  }
  return date;
}

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

/* ---- connection lifetime ---- */

/* The body of the last answer is no longer needed: hand it back to its owner. */
static void conn_body_done(struct http_conn *conn) {
  void (*release)(void *) = conn->body_release;
  conn->body_release = NULL;
  if (release != NULL) release(conn->body_owner);
  conn->body_owner = NULL;
}

static void conn_unref(struct http_conn *conn) {
  if (--conn->refs > 0) return;
  buf_free(&conn->url);
  buf_free(&conn->body);
  free(conn->pending);
  free(conn->neg);
  conn_body_done(conn);
  free(conn);
}

static void on_conn_handle_closed(uv_handle_t *h) { conn_unref(h->data); }

static void on_drained_tick(uv_timer_t *t);

static void server_check_drained(struct http_server *srv) {
  if (!srv->draining || srv->nconns > 0 || srv->drained_reported) return;
  srv->drained_reported = 1;
  /* Reported from a fresh loop turn: the caller may free the server, and we may be deep inside a connection. */
  uv_timer_start(&srv->drain_timer, on_drained_tick, 0, 0);
}

static void conn_close(struct http_conn *conn) {
  if (conn->closing) return;
  conn->closing = 1;
  struct http_server *srv = conn->srv;
  if (conn->prev != NULL)
    conn->prev->next = conn->next;
  else
    srv->conns = conn->next;
  if (conn->next != NULL) conn->next->prev = conn->prev;
  srv->nconns--;
  if (conn->refused) srv->nrefused--;
  metrics_connections(-1);
  uv_close((uv_handle_t *)&conn->timer, on_conn_handle_closed);
  uv_close((uv_handle_t *)&conn->tcp, on_conn_handle_closed);
  server_check_drained(srv);
}

void http_request_hold(struct http_request *req) { conn_of(req)->refs++; }

void http_request_release(struct http_request *req) { conn_unref(conn_of(req)); }

int http_request_gone(const struct http_request *req) { return conn_of(req)->closing; }

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  (void)suggested;
  struct http_conn *conn = h->data;
  b->base = conn->srv->rbuf;
  b->len = sizeof(conn->srv->rbuf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

static void conn_read_start(struct http_conn *conn) {
  if (conn->reading || conn->closing) return;
  if (conn->peer_done) {
    /* The client's end of the stream was reached while its last request was answered: nothing more will come. */
    conn_close(conn);
    return;
  }
  if (uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read) == 0)
    conn->reading = 1;
  else
    conn_close(conn);
}

static void conn_read_stop(struct http_conn *conn) {
  if (!conn->reading) return;
  uv_read_stop((uv_stream_t *)&conn->tcp);
  conn->reading = 0;
}

static void on_timer(uv_timer_t *t);

static void conn_timer(struct http_conn *conn, int64_t ms) { uv_timer_start(&conn->timer, on_timer, (uint64_t)ms, 0); }

/* Between requests: wait for the next one for the idle timeout (the header timeout before the first). */
static void conn_enter_idle(struct http_conn *conn) {
  conn->state = CONN_IDLE;
  const struct vts_config *cfg = conn->srv->cfg;
  conn_timer(conn, conn->served ? cfg->idle_timeout_ms : cfg->header_timeout_ms);
  conn_read_start(conn);
}

/*
 * Closing right after the last write would make the kernel answer unread input with a RST, which can destroy the
 * response before the client reads it (a client that sent a body we refused, or more pipelined requests). So send
 * FIN, read and discard until the peer closes, and close for good after a short linger.
 */
static void on_shutdown(uv_shutdown_t *sr, int status) {
  struct http_conn *conn = sr->data;
  if (conn->closing) return;
  if (status < 0) {
    conn_close(conn);
    return;
  }
  conn_read_start(conn);
}

static void conn_linger(struct http_conn *conn) {
  conn->state = CONN_LINGER;
  free(conn->pending);
  conn->pending = NULL;
  conn->pending_len = 0;
  conn_timer(conn, VTS_LINGER_MS);
  conn->ureq.shutdown.data = conn;
  if (uv_shutdown(&conn->ureq.shutdown, (uv_stream_t *)&conn->tcp, on_shutdown) != 0) conn_close(conn);
}

/* ---- parsing ---- */

static void conn_reset_request(struct http_conn *conn) {
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
      append_capped(conn->neg->ae_buf, sizeof(conn->neg->ae_buf), &conn->neg->ae.len, &conn->neg->ae.bad, at, len);
      break;
    case HDR_IF_NONE_MATCH:
      append_capped(conn->neg->inm_buf, sizeof(conn->neg->inm_buf), &conn->neg->inm.len, &conn->neg->inm.bad, at, len);
      break;
    case HDR_ACCEPT:
      append_capped(conn->neg->acc_buf, sizeof(conn->neg->acc_buf), &conn->neg->acc.len, &conn->neg->acc.bad, at, len);
      break;
    case HDR_AUTHORIZATION:
      append_capped(conn->neg->auth_buf, sizeof(conn->neg->auth_buf), &conn->neg->auth.len, &conn->neg->auth.bad, at,
                    len);
      break;
    case HDR_ORIGIN:
      append_capped(conn->neg->origin_buf, sizeof(conn->neg->origin_buf), &conn->neg->origin.len,
                    &conn->neg->origin.bad, at, len);
      break;
    case HDR_MCP_VERSION:
      append_capped(conn->neg->mcpv_buf, sizeof(conn->neg->mcpv_buf), &conn->neg->mcpv.len, &conn->neg->mcpv.bad, at,
                    len);
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

static int on_headers_complete(llhttp_t *p) {
  struct http_conn *conn = p->data;
  struct http_request *req = &conn->req;
  uv_timer_stop(&conn->timer);
  conn->state = CONN_BUSY;
  req->method = llhttp_get_method(p);
  if (p->flags & F_TRANSFER_ENCODING) {
    conn->err = API_ERR_BAD_REQUEST;
    return -1;
  }
  /* llhttp 8.1.0 also takes "HTTP/0.9" and "HTTP/2.0" request lines; we speak HTTP/1.x framing only. */
  if (p->http_major != 1) {
    conn->err = API_ERR_BAD_REQUEST;
    return -1;
  }
  /* RFC 9112 3.2: an HTTP/1.1 request has exactly one Host, and a valid one; an HTTP/1.0 request may have none. */
  if (conn->host_count > 1 || (conn->host_count == 0 && p->http_minor >= 1) ||
      (conn->host_count == 1 && !host_complete((enum host_state)conn->host_state))) {
    conn->err = API_ERR_BAD_REQUEST;
    return -1;
  }
  if (!method_known(req->method)) {
    conn->err = API_ERR_NOT_IMPLEMENTED;
    return -1;
  }
  conn->keep_alive = llhttp_should_keep_alive(p) && !p->upgrade && !conn->srv->draining;

  const char *url = conn->url.data != NULL ? conn->url.data : "";
  size_t path_at = 0;
  int absolute = absolute_form(url, conn->url.len, &path_at);
  if (absolute < 0) {
    conn->err = API_ERR_BAD_REQUEST;
    return -1;
  }
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
  enum http_route route = route_find(req->path, req->path_len);
  if (route_reads_body(route, req->method)) {
    /*
     * RFC 9110 8.6 and 15.5.12: a body is framed by Content-Length here (Transfer-Encoding is refused above), so a
     * POST without one is 411; one larger than we read is 413 at once, unread (15.5.14), and the connection closes.
     */
    if (!(p->flags & F_CONTENT_LENGTH)) {
      conn->err = API_ERR_LENGTH_REQUIRED;
      return -1;
    }
    if (p->content_length > VTS_MAX_REQUEST_BODY_BYTES) {
      conn->err = API_ERR_BODY_TOO_LARGE;
      return -1;
    }
    if (p->content_length > 0) {
      /* The body has the header timeout of its own, from the end of the head. */
      conn->body_left = (size_t)p->content_length;
      if (buf_reserve(&conn->body, conn->body_left + 1) != 0) {
        conn->err = API_ERR_SERVICE_UNAVAILABLE;
        return -1;
      }
      conn->state = CONN_BODY;
      conn_timer(conn, conn->srv->cfg->header_timeout_ms);
      /*
       * RFC 9110 10.1.1: a client that asked to hear before it sends the body (curl does for a large one) is told to
       * go on now, rather than after its own wait; an HTTP/1.0 client is sent no 1xx. The line is tiny and the
       * connection writes nothing else now: what the socket does not take is left, and the client goes on after its
       * wait as it would anyway.
       */
      static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
      size_t el = trim_trailing_ws(conn->expect, conn->expect_len);
      if (!conn->expect_bad && p->http_minor >= 1 && el == 12 && strncasecmp(conn->expect, "100-continue", 12) == 0 &&
          conn->pending == NULL) {
        uv_buf_t b = uv_buf_init((char *)(uintptr_t)cont, sizeof(cont) - 1);
        (void)uv_try_write((uv_stream_t *)&conn->tcp, &b, 1);
      }
    }
    return 0;
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

static void conn_dispatch(struct http_conn *conn);

/* Answers a protocol error (with extra_headers, or NULL) and closes the connection after the answer. */
static void conn_fail_with(struct http_conn *conn, enum api_error e, const char *extra_headers) {
  conn_read_stop(conn);
  uv_timer_stop(&conn->timer);
  conn->keep_alive = 0;
  conn->state = CONN_BUSY;
  conn_set_request_id(conn);
  http_respond_error(&conn->req, e, extra_headers);
}

static void conn_fail(struct http_conn *conn, enum api_error e) { conn_fail_with(conn, e, NULL); }

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

static void conn_execute(struct http_conn *conn, const char *data, size_t len) {
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

/*
 * Input that arrives while a request is answered: kept for after the response (a pipelined request), up to a bound
 * past which reading pauses until the held bytes are parsed. The end of the stream is remembered: the answer still
 * goes out, and so do the answers to complete requests held before it; then the connection closes.
 */
static void conn_hold_input(struct http_conn *conn, ssize_t n, const char *data) {
  if (n < 0) {
    conn->peer_done = 1;
    conn_read_stop(conn);
    return;
  }
  char *p = realloc(conn->pending, conn->pending_len + (size_t)n);
  if (p == NULL) {
    conn->peer_done = 1; /* cannot hold it: answer what we have and close */
    conn_read_stop(conn);
    return;
  }
  memcpy(p + conn->pending_len, data, (size_t)n);
  conn->pending = p;
  conn->pending_len += (size_t)n;
  if (conn->pending_len >= HTTP_READ_BUF_BYTES) conn_read_stop(conn);
}

static void access_log(const struct http_conn *conn, int status);

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  struct http_conn *conn = s->data;
  if (n == 0 || conn->closing) return;
  if (conn->state == CONN_BUSY && n < 0 && n != UV_EOF) {
    /*
     * Reset before its answer: the client is gone, and the handler learns it (http_request_gone), so that nothing
     * is charged for an answer no one reads. The end of the stream alone (a half-close, maybe behind pipelined
     * requests) is not gone: those still get their answers.
     */
    access_log(conn, HTTP_STATUS_CLIENT_GONE);
    conn_close(conn);
    return;
  }
  if (conn->state == CONN_BUSY || conn->state == CONN_WRITING) {
    conn_hold_input(conn, n, b->base);
    return;
  }
  if (n < 0) {
    /* EOF or error while no request is answered: there is no one left to answer. */
    conn_close(conn);
    return;
  }
  if (conn->state == CONN_LINGER) return;
  conn_execute(conn, b->base, (size_t)n);
}

static void on_timer(uv_timer_t *t) {
  struct http_conn *conn = t->data;
  switch (conn->state) {
    case CONN_HEADERS:
      conn_fail(conn, API_ERR_REQUEST_TIMEOUT);
      break;
    case CONN_BODY:
      conn_fail(conn, API_ERR_BODY_TIMEOUT);
      break;
    case CONN_BUSY:
      break;
    case CONN_IDLE:
    case CONN_WRITING:
    case CONN_LINGER:
      conn_close(conn);
      break;
  }
}

static void conn_dispatch(struct http_conn *conn) {
  struct http_server *srv = conn->srv;
  srv->cb(srv->app, &conn->req);
}

/* After a response: the next pipelined request, or back to reading. */
static void conn_next(struct http_conn *conn) {
  conn->served = 1;
  llhttp_resume(&conn->parser);
  conn->state = CONN_IDLE;
  char *rest = conn->pending;
  size_t rest_len = conn->pending_len;
  conn->pending = NULL;
  conn->pending_len = 0;
  if (rest != NULL) {
    conn_timer(conn, conn->srv->cfg->idle_timeout_ms);
    conn_execute(conn, rest, rest_len);
    free(rest);
    if (conn->closing || conn->state == CONN_BUSY || conn->state == CONN_WRITING || conn->state == CONN_LINGER) return;
    if (conn->state == CONN_HEADERS || conn->state == CONN_BODY) {
      conn_read_start(conn);
      return;
    }
  }
  conn_enter_idle(conn);
}

static void conn_write_finished(struct http_conn *conn, int status) {
  conn_body_done(conn);
  if (conn->closing) return;
  if (status < 0) {
    conn_close(conn);
    return;
  }
  uv_timer_stop(&conn->timer);
  if (!conn->keep_alive || conn->srv->draining) {
    conn_linger(conn);
    return;
  }
  conn_next(conn);
}

static void on_write(uv_write_t *w, int status) { conn_write_finished(w->data, status); }

static void on_written_idle(uv_idle_t *h) {
  struct http_server *srv = h->data;
  struct http_conn *list = srv->written;
  srv->written = NULL;
  uv_idle_stop(h);
  while (list != NULL) {
    struct http_conn *conn = list;
    list = conn->written_next;
    conn->written_next = NULL;
    conn_write_finished(conn, 0);
    conn_unref(conn);
  }
}

/* ---- responses ---- */

static void access_log(const struct http_conn *conn, int status) {
  const struct http_request *req = &conn->req;
  /* The path as logged: at most VTS_MAX_LOGGED_PATH_BYTES, up to a NUL byte if it holds one. */
  size_t plen = req->path_len < VTS_MAX_LOGGED_PATH_BYTES ? req->path_len : VTS_MAX_LOGGED_PATH_BYTES;
  plen = plen > 0 ? strnlen(req->path, plen) : 0;
  const char *method = req->method >= 0 ? llhttp_method_name((llhttp_method_t)req->method) : "-";
  log_access(req->request_id, method, plen > 0 ? req->path : "", plen, (uint64_t)status, util_now_ms() - req->start_ms,
             req->key_id);
  metrics_request(route_find(req->path, req->path_len), status, (uv_hrtime() - req->start_ns) / 1000);
}

/*
 * Writes what the socket takes now of head and then of the body in body_fd, which holds the body from offset 0: the
 * head with MSG_MORE (it leaves in one segment with the body's start), the body with sendfile(2). Nothing of this
 * connection is queued in libuv (a connection writes one answer at a time), so these writes are in order. Returns the
 * bytes written (maybe fewer than asked: the socket is full), or a negative errno when the connection failed.
 */
static ssize_t send_head_and_file(struct http_conn *conn, const uv_buf_t *head, int body_fd, size_t body_len) {
  uv_os_fd_t sock;
  if (uv_fileno((uv_handle_t *)&conn->tcp, &sock) != 0) return 0; /* not open: the usual write reports it */
  ssize_t n;
  do n = send(sock, head->base, head->len, MSG_MORE | MSG_NOSIGNAL | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
  if ((size_t)n < head->len) return n;
  off_t off = 0;
  while ((size_t)off < body_len) {
    ssize_t s = sendfile(sock, body_fd, &off, body_len - (size_t)off);
    if (s > 0) continue;
    if (s < 0 && errno == EINTR) continue;
    if (s < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINVAL && errno != ENOSYS) return -errno;
    break; /* the socket is full (or takes no sendfile): the rest goes by the usual write */
  }
  return n + (ssize_t)off;
}

/*
 * The one writer: status line and headers into the connection's head buffer, then head and body in one vectored
 * write (libuv writes at once when nothing is queued, and keeps only the unwritten rest), or, for a body in a file,
 * the head and what the socket takes of the file at once (send_head_and_file). The body is referenced, never
 * copied; release(owner) runs once the write is over or failed.
 */
static int respond(struct http_request *req, int status, const char *content_type, const char *extra_headers,
                   const char *body, size_t body_len, int body_fd, void (*release)(void *owner), void *owner) {
  struct http_conn *conn = conn_of(req);
  if (conn->closing) {
    if (release != NULL) release(owner);
    return 0;
  }
  if (conn->state != CONN_BUSY) {
    /* A second answer to one request is a bug in the caller; the first one stands. */
    if (release != NULL) release(owner);
    return -EALREADY;
  }
  if (conn->srv->draining) conn->keep_alive = 0;
  const char *connection = "";
  if (!conn->keep_alive)
    connection = "Connection: close\r\n";
  else if (conn->parser.http_major == 1 && conn->parser.http_minor == 0)
    connection = "Connection: keep-alive\r\n";
  struct strb h = strb_init(conn->head, sizeof(conn->head));
  strb_puts(&h, "HTTP/1.1 ");
  strb_u64(&h, (uint64_t)status);
  strb_puts(&h, " ");
  strb_puts(&h, http_status_reason(status));
  if (status == 304) {
    /* A 304 describes the representation the client holds: no content headers of its own, and no body. */
    body_len = 0;
  } else {
    strb_puts(&h, "\r\nContent-Type: ");
    strb_puts(&h, content_type);
    strb_puts(&h, "\r\nContent-Length: ");
    strb_u64(&h, body_len);
  }
  strb_puts(&h, "\r\nDate: ");
  strb_puts(&h, http_date_now());
  strb_puts(&h, "\r\nX-Request-Id: ");
  strb_puts(&h, req->request_id);
  strb_puts(&h, "\r\n");
  /* RFC 9110 11.6.1: every 401 says how to authenticate. */
  if (status == 401 && (extra_headers == NULL || strstr(extra_headers, "WWW-Authenticate:") == NULL))
    strb_puts(&h, "WWW-Authenticate: " HTTP_AUTH_CHALLENGE "\r\n");
  if (extra_headers != NULL) strb_puts(&h, extra_headers);
  strb_puts(&h, connection);
  strb_puts(&h, "\r\n");
  size_t n = h.len;
  if (!h.ok) {
    log_msg(LOG_ERROR, "response head too large", "request_id", req->request_id, NULL);
    if (release != NULL) release(owner);
    conn_close(conn);
    return -EOVERFLOW;
  }
  uv_buf_t bufs[2];
  unsigned nbufs = 1;
  bufs[0] = uv_buf_init(conn->head, (unsigned)n);
  if (req->method != HTTP_HEAD && body_len > 0)
    bufs[nbufs++] = uv_buf_init((char *)(uintptr_t)body, (unsigned)body_len);
  conn->body_release = release;
  conn->body_owner = owner;
  access_log(conn, status);
  conn->state = CONN_WRITING;
  /* A client that stops reading must not hold the connection, nor the body it pins, for longer than this. */
  conn_timer(conn, conn->srv->cfg->write_timeout_ms);
  size_t total = bufs[0].len + (nbufs > 1 ? bufs[1].len : 0);
  ssize_t sent = body_fd >= 0 && nbufs > 1 ? send_head_and_file(conn, &bufs[0], body_fd, bufs[1].len)
                                           : uv_try_write((uv_stream_t *)&conn->tcp, bufs, nbufs);
  if (sent == UV_EAGAIN) sent = 0;
  if (sent < 0) {
    conn_body_done(conn);
    conn_close(conn);
    return (int)sent;
  }
  if ((size_t)sent == total) {
    struct http_server *srv = conn->srv;
    conn_body_done(conn);
    conn->refs++;
    conn->written_next = srv->written;
    srv->written = conn;
    uv_idle_start(&srv->written_idle, on_written_idle);
    return 0;
  }
  /* The rest waits for the socket: libuv keeps what is left to write, by reference. */
  for (unsigned i = 0; i < nbufs && sent > 0; i++) {
    size_t skip = (size_t)sent < bufs[i].len ? (size_t)sent : bufs[i].len;
    bufs[i].base += skip;
    bufs[i].len -= skip;
    sent -= (ssize_t)skip;
  }
  uv_buf_t *rest = bufs;
  unsigned nrest = nbufs;
  while (nrest > 0 && rest->len == 0) {
    rest++;
    nrest--;
  }
  conn->ureq.write.data = conn;
  int rv = uv_write(&conn->ureq.write, (uv_stream_t *)&conn->tcp, rest, nrest, on_write);
  if (rv != 0) {
    conn_body_done(conn);
    conn_close(conn);
    return rv;
  }
  return 0;
}

int http_respond(struct http_request *req, int status, const char *extra_headers, const char *body, size_t body_len,
                 char *owned_body) {
  return respond(req, status, "application/json", extra_headers, body, body_len, -1, owned_body != NULL ? free : NULL,
                 owned_body);
}

int http_respond_typed(struct http_request *req, int status, const char *content_type, const char *extra_headers,
                       const char *body, size_t body_len, char *owned_body) {
  return respond(req, status, content_type, extra_headers, body, body_len, -1, owned_body != NULL ? free : NULL,
                 owned_body);
}

int http_respond_ref(struct http_request *req, int status, const char *extra_headers, const char *body, size_t body_len,
                     int body_fd, void (*release)(void *owner), void *owner) {
  return respond(req, status, "application/json", extra_headers, body, body_len, body_fd, release, owner);
}

int http_respond_error(struct http_request *req, enum api_error e, const char *extra_headers) {
  const struct api_error_info *info = api_error_get(e);
  return http_respond(req, info->status, extra_headers, info->body, info->body_len, NULL);
}

int http_respond_error_msg(struct http_request *req, enum api_error e, const char *message, const char *extra_headers) {
  const struct api_error_info *info = api_error_get(e);
  struct buf b = BUF_INIT;
  int rv = buf_puts(&b, "{\"error\":{\"code\":\"");
  rv |= buf_puts(&b, info->code);
  rv |= buf_puts(&b, "\",\"message\":\"");
  rv |= buf_json_escape(&b, message, strlen(message));
  rv |= buf_puts(&b, "\"}}");
  if (rv != 0) {
    buf_free(&b);
    return http_respond_error(req, e, extra_headers);
  }
  size_t len = 0;
  char *body = buf_steal(&b, &len);
  return http_respond(req, info->status, extra_headers, body, len, body);
}

/* ---- server ---- */

static void refuse_closed(uv_handle_t *h) { free(h); }

/* Draining, out of memory, or too many 503s in progress: take the connection off the queue and close it at once. */
static void refuse(struct http_server *srv) {
  uv_tcp_t *t = malloc(sizeof(*t));
  if (t == NULL) return;
  if (uv_tcp_init(srv->loop, t) != 0) {
    free(t);
    return;
  }
  uv_accept((uv_stream_t *)&srv->listener, (uv_stream_t *)t);
  uv_close((uv_handle_t *)t, refuse_closed);
}

static void on_connection(uv_stream_t *server, int status) {
  struct http_server *srv = server->data;
  if (status < 0) {
    log_msg(LOG_WARN, "accept failed", "error", uv_strerror(status), NULL);
    return;
  }
  /* Over the cap a connection is told so (503, Retry-After), up to VTS_MAX_REFUSED_CONNS such answers at once. */
  int over = srv->nconns - srv->nrefused >= (size_t)srv->cfg->max_conns;
  if (srv->draining || (over && srv->nrefused >= VTS_MAX_REFUSED_CONNS)) {
    refuse(srv);
    return;
  }
  struct http_conn *conn = calloc(1, sizeof(*conn));
  if (conn == NULL) {
    refuse(srv);
    return;
  }
  conn->srv = srv;
  uv_tcp_init(srv->loop, &conn->tcp);
  uv_timer_init(srv->loop, &conn->timer);
  conn->tcp.data = conn;
  conn->timer.data = conn;
  conn->refs = 2; /* the two handles */
  conn->next = srv->conns;
  if (srv->conns != NULL) srv->conns->prev = conn;
  srv->conns = conn;
  srv->nconns++;
  metrics_connections(1);
  if (uv_accept(server, (uv_stream_t *)&conn->tcp) != 0) {
    conn_close(conn);
    return;
  }
  uv_tcp_nodelay(&conn->tcp, 1);
  llhttp_init(&conn->parser, HTTP_REQUEST, &parser_settings);
  /* Leniency flags default to off; set them explicitly so a newer llhttp default cannot loosen framing. */
  llhttp_set_lenient_headers(&conn->parser, 0);
  llhttp_set_lenient_chunked_length(&conn->parser, 0);
  llhttp_set_lenient_keep_alive(&conn->parser, 0);
  llhttp_set_lenient_transfer_encoding(&conn->parser, 0);
  conn->parser.data = conn;
  conn_reset_request(conn);
  if (over) {
    conn->refused = 1;
    srv->nrefused++;
    conn_fail_with(conn, API_ERR_SERVICE_UNAVAILABLE, HTTP_CAP_RETRY_AFTER);
    return;
  }
  conn_enter_idle(conn);
}

struct http_server *http_server_new(uv_loop_t *loop, const struct vts_config *cfg, http_request_cb cb, void *app) {
  struct http_server *srv = calloc(1, sizeof(*srv));
  if (srv == NULL) return NULL;
  srv->loop = loop;
  srv->cfg = cfg;
  srv->cb = cb;
  srv->app = app;
  srv->rid_pool_used = sizeof(srv->rid_pool); /* drawn on the first id */
  uv_timer_init(loop, &srv->drain_timer);
  srv->drain_timer.data = srv;
  uv_idle_init(loop, &srv->written_idle);
  srv->written_idle.data = srv;
  srv->handles_open = 2;

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
  return srv;
}

int http_listen_addr(const struct vts_config *cfg, struct sockaddr_storage *ss) {
  memset(ss, 0, sizeof(*ss));
  if (uv_ip4_addr(cfg->listen_host, cfg->listen_port, (struct sockaddr_in *)ss) == 0) return 0;
  char host[sizeof(cfg->listen_host)];
  size_t len = strlen(cfg->listen_host);
  if (len < 3 || cfg->listen_host[0] != '[' || cfg->listen_host[len - 1] != ']') return -EINVAL;
  memcpy(host, cfg->listen_host + 1, len - 2);
  host[len - 2] = '\0';
  if (uv_ip6_addr(host, cfg->listen_port, (struct sockaddr_in6 *)ss) == 0) return 0;
  return -EINVAL;
}

int http_server_listen(struct http_server *srv) {
  struct sockaddr_storage ss;
  int rv = http_listen_addr(srv->cfg, &ss);
  if (rv != 0) return rv;
  rv = uv_tcp_init_ex(srv->loop, &srv->listener, ss.ss_family);
  if (rv != 0) return rv;
  srv->listener.data = srv;
  srv->listener_open = 1;
  srv->handles_open++;
  /* libuv 1.44 has no UV_TCP_REUSEPORT: each worker sets it on its own socket before bind. */
  uv_os_fd_t fd;
  rv = uv_fileno((uv_handle_t *)&srv->listener, &fd);
  if (rv != 0) return rv;
  int one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) return -errno;
  rv = uv_tcp_bind(&srv->listener, (const struct sockaddr *)&ss, 0);
  if (rv != 0) return rv;
  /* EADDRINUSE surfaces here, not at bind. */
  return uv_listen((uv_stream_t *)&srv->listener, VTS_LISTEN_BACKLOG, on_connection);
}

static void on_server_handle_closed(uv_handle_t *h) {
  struct http_server *srv = h->data;
  if (--srv->handles_open == 0 && srv->freeing) free(srv);
}

static void on_drained_tick(uv_timer_t *t) {
  struct http_server *srv = t->data;
  if (srv->drained != NULL) srv->drained(srv->drained_arg);
}

static void on_drain_last(uv_timer_t *t) {
  struct http_server *srv = t->data;
  while (srv->conns != NULL) conn_close(srv->conns);
}

/*
 * The drain's end. A request still with its handler (waiting for its job) gets 503 service_unavailable with
 * Retry-After, and its access line, rather than a connection closed under it; its connection closes once that answer
 * is written, or HTTP_DRAIN_ANSWER_GRACE_MS later at the latest. Every other connection closes now.
 */
static void on_drain_deadline(uv_timer_t *t) {
  struct http_server *srv = t->data;
  if (srv->nconns > 0) {
    char n[32];
    snprintf(n, sizeof(n), "%zu", srv->nconns);
    log_msg(LOG_WARN, "drain deadline: answering 503 and closing connections", "=connections", n, NULL);
  }
  struct http_conn *conn = srv->conns;
  while (conn != NULL) {
    struct http_conn *next = conn->next;
    if (conn->state == CONN_BUSY) {
      conn->keep_alive = 0;
      http_respond_error(&conn->req, API_ERR_SERVICE_UNAVAILABLE, "Retry-After: " HTTP_DRAIN_RETRY_AFTER_S "\r\n");
    } else {
      conn_close(conn);
    }
    conn = next;
  }
  if (srv->nconns > 0) uv_timer_start(&srv->drain_timer, on_drain_last, HTTP_DRAIN_ANSWER_GRACE_MS, 0);
}

void http_server_drain(struct http_server *srv, void (*done)(void *arg), void *arg) {
  if (srv->draining) return;
  srv->draining = 1;
  srv->drained = done;
  srv->drained_arg = arg;
  if (srv->listener_open) {
    srv->listener_open = 0;
    uv_close((uv_handle_t *)&srv->listener, on_server_handle_closed);
  }
  struct http_conn *conn = srv->conns;
  while (conn != NULL) {
    struct http_conn *next = conn->next;
    if (conn->state == CONN_IDLE)
      conn_close(conn);
    else
      conn->keep_alive = 0;
    conn = next;
  }
  if (srv->nconns > 0) uv_timer_start(&srv->drain_timer, on_drain_deadline, (uint64_t)srv->cfg->drain_timeout_ms, 0);
  server_check_drained(srv);
}

void http_server_free(struct http_server *srv) {
  if (srv == NULL) return;
  while (srv->conns != NULL) conn_close(srv->conns);
  srv->freeing = 1;
  if (srv->listener_open) {
    srv->listener_open = 0;
    uv_close((uv_handle_t *)&srv->listener, on_server_handle_closed);
  }
  uv_close((uv_handle_t *)&srv->drain_timer, on_server_handle_closed);
  while (srv->written != NULL) {
    struct http_conn *conn = srv->written;
    srv->written = conn->written_next;
    conn_unref(conn);
  }
  uv_close((uv_handle_t *)&srv->written_idle, on_server_handle_closed);
}

size_t http_server_conn_count(const struct http_server *srv) { return srv->nconns; }
