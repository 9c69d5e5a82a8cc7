/*
 * What the three parts of the HTTP server share and no other module sees: the server and connection structures, and
 * the calls one part makes into another. http_conn.c owns a connection's life (accepting, reading, deadlines, the
 * next pipelined request, the drain), http_parse.c reads a request (llhttp's callbacks, the framing and head checks),
 * and http_answer.c writes its answer (the one writer and the access line).
 */
#ifndef VTS_HTTP_INTERNAL_H
#define VTS_HTTP_INTERNAL_H

#include <llhttp.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/buf.h"
#include "common/limits.h"
#include "gateway/http/errors.h"
#include "gateway/http/http.h"

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
  /* The handler decides on the head first: the body is unread until it asks (http_request_read_body). */
  unsigned body_unread : 1;
  http_body_cb body_cb; /* the handler asked for the body: whom to call when it is complete or lost */
  void *body_cb_arg;

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

/* The connection a request belongs to (a request is a member of its connection). */
static inline struct http_conn *conn_of(const struct http_request *req) {
  return (struct http_conn *)(void *)((char *)(uintptr_t)req - offsetof(struct http_conn, req));
}

/* http_conn.c: a connection's life. */
void conn_close(struct http_conn *conn);
/* Drops a reference (a handle or a hold); the memory goes with the last. */
void conn_unref(struct http_conn *conn);
/* Reads again (at once closing a connection whose client ended its stream while its request was answered). */
void conn_read_start(struct http_conn *conn);
/* The body of the last answer is no longer needed: hand it back to its owner. */
void conn_body_done(struct http_conn *conn);
void conn_read_stop(struct http_conn *conn);
/* Starts the connection's one deadline (header, body, idle, write or linger, by state) ms from now. */
void conn_timer(struct http_conn *conn, int64_t ms);
/* A complete request goes to the server's handler (or a complete body to the handler that asked for it). */
void conn_dispatch(struct http_conn *conn);
/* The handler waits for a body that will not come: it learns so (status, a negative errno), once. */
void conn_body_lost(struct http_conn *conn, int status);
/* The answer's write ended (status < 0: it failed): linger, or the next request. */
void conn_write_finished(struct http_conn *conn, int status);
/* The answer went out whole at once: its write is finished from the next loop turn, as libuv would finish it. */
void conn_written_at_once(struct http_conn *conn);

/* http_parse.c: reading a request. */
/* Sets the parser's callbacks (once per server) and readies a new connection's parser. */
void conn_parse_settings_init(void);
void conn_parse_init(struct http_conn *conn);
/* Forgets the last request: the connection waits for the next one's first byte. */
void conn_reset_request(struct http_conn *conn);
/* Parses len bytes of input: a complete request goes to its handler, a refused one is answered and closed. */
void conn_execute(struct http_conn *conn, const char *data, size_t len);
/* Answers a protocol error (with extra_headers, or NULL) and closes the connection after the answer. */
void conn_fail_with(struct http_conn *conn, enum api_error e, const char *extra_headers);
void conn_fail(struct http_conn *conn, enum api_error e);

/* http_answer.c: writing the answer. */
/* The access line of the request and its count in the metrics. */
void conn_access_log(const struct http_conn *conn, int status);

#endif
