/*
 * Writing an answer: the one writer of every response (status line, headers, a body by reference or from a file),
 * the public error bodies, and the access line with its count.
 */
#include "gateway/http/http_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "gateway/http/routes.h"
#include "gateway/http/status.h"
#include "gateway/metrics/metrics.h"

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

static void on_write(uv_write_t *w, int status) { conn_write_finished(w->data, status); }

void conn_access_log(const struct http_conn *conn, int status) {
  const struct http_request *req = &conn->req;
  /* The path as logged: at most VTS_MAX_LOGGED_PATH_BYTES, up to a NUL byte if it holds one. */
  size_t plen = req->path_len < VTS_MAX_LOGGED_PATH_BYTES ? req->path_len : VTS_MAX_LOGGED_PATH_BYTES;
  plen = plen > 0 ? strnlen(req->path, plen) : 0;
  const char *method = req->method >= 0 ? llhttp_method_name((llhttp_method_t)req->method) : "-";
  log_access(req->request_id, method, plen > 0 ? req->path : "", plen, (uint64_t)status, util_now_ms() - req->start_ms,
             req->key_id);
  metrics_request(req->route, status, (uv_hrtime() - req->start_ns) / 1000);
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

/* The status line and headers of an answer (body_len bytes of content_type) into h. */
static void write_head(const struct http_conn *conn, struct strb *h, int status, const char *content_type,
                       const char *extra_headers, size_t body_len) {
  const char *connection = "";
  if (!conn->keep_alive)
    connection = "Connection: close\r\n";
  else if (conn->parser.http_major == 1 && conn->parser.http_minor == 0)
    connection = "Connection: keep-alive\r\n";
  strb_puts(h, "HTTP/1.1 ");
  strb_u64(h, (uint64_t)status);
  strb_puts(h, " ");
  strb_puts(h, http_status_reason(status));
  if (status != 304) {
    strb_puts(h, "\r\nContent-Type: ");
    strb_puts(h, content_type);
    strb_puts(h, "\r\nContent-Length: ");
    strb_u64(h, body_len);
  }
  strb_puts(h, "\r\nDate: ");
  strb_puts(h, http_date_now());
  strb_puts(h, "\r\nX-Request-Id: ");
  strb_puts(h, conn->req.request_id);
  strb_puts(h, "\r\n");
  /* RFC 9110 11.6.1: every 401 says how to authenticate (its own challenge when the answer brings one: /mcp's). */
  if (status == 401 && (extra_headers == NULL || strstr(extra_headers, "WWW-Authenticate:") == NULL))
    strb_puts(h, "WWW-Authenticate: " HTTP_AUTH_CHALLENGE "\r\n");
  if (extra_headers != NULL) strb_puts(h, extra_headers);
  strb_puts(h, connection);
  strb_puts(h, "\r\n");
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
  /* A body left unread closes the connection after the answer: its bytes are never read as a next request. */
  if (conn->srv->draining || conn->body_unread) conn->keep_alive = 0;
  /* A 304 describes the representation the client holds: no content headers of its own, and no body. */
  if (status == 304) body_len = 0;
  struct strb h = strb_init(conn->head, sizeof(conn->head));
  write_head(conn, &h, status, content_type, extra_headers, body_len);
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
  conn_access_log(conn, status);
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
    conn_body_done(conn);
    conn_written_at_once(conn);
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

/* Built as mcp_rpc_error builds its JSON-RPC error: alike in shape, the two bodies and their fallbacks differ. */
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
