/*
 * A connection's life: accepted (or refused over the cap), read into the worker's one buffer, its deadlines by
 * state, the next pipelined request after an answer, the linger before close, and the server's drain.
 */
#include "gateway/http/http_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "gateway/metrics/metrics.h"

void conn_body_done(struct http_conn *conn) {
  void (*release)(void *) = conn->body_release;
  conn->body_release = NULL;
  if (release != NULL) release(conn->body_owner);
  conn->body_owner = NULL;
}

void conn_unref(struct http_conn *conn) {
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

void conn_close(struct http_conn *conn) {
  if (conn->closing) return;
  conn->closing = 1;
  conn_body_lost(conn, -ECONNRESET);
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

void conn_read_start(struct http_conn *conn) {
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

void conn_read_stop(struct http_conn *conn) {
  if (!conn->reading) return;
  uv_read_stop((uv_stream_t *)&conn->tcp);
  conn->reading = 0;
}

static void on_timer(uv_timer_t *t);

void conn_timer(struct http_conn *conn, int64_t ms) { uv_timer_start(&conn->timer, on_timer, (uint64_t)ms, 0); }

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

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  struct http_conn *conn = s->data;
  if (n == 0 || conn->closing) return;
  if (conn->state == CONN_BUSY && n < 0 && n != UV_EOF) {
    /*
     * Reset before its answer: the client is gone, and the handler learns it (http_request_gone), so that nothing
     * is charged for an answer no one reads. The end of the stream alone (a half-close, maybe behind pipelined
     * requests) is not gone: those still get their answers.
     */
    conn_access_log(conn, HTTP_STATUS_CLIENT_GONE);
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

void conn_dispatch(struct http_conn *conn) {
  struct http_server *srv = conn->srv;
  if (conn->body_cb != NULL) {
    http_body_cb cb = conn->body_cb;
    conn->body_cb = NULL;
    cb(conn->body_cb_arg, &conn->req, 0);
    return;
  }
  srv->cb(srv->app, &conn->req);
}

void conn_body_lost(struct http_conn *conn, int status) {
  http_body_cb cb = conn->body_cb;
  conn->body_cb = NULL;
  if (cb != NULL) cb(conn->body_cb_arg, &conn->req, status);
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

void conn_write_finished(struct http_conn *conn, int status) {
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

void conn_written_at_once(struct http_conn *conn) {
  struct http_server *srv = conn->srv;
  conn->refs++;
  conn->written_next = srv->written;
  srv->written = conn;
  uv_idle_start(&srv->written_idle, on_written_idle);
}

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
  conn_parse_init(conn);
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
  conn_parse_settings_init();
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
