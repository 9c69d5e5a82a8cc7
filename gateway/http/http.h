/*
 * The HTTP/1.1 front of a worker: a listening socket of its own (SO_REUSEPORT), connections parsed with llhttp under
 * the limits of common/limits.h, keep-alive and pipelining with responses in request order, and one response writer
 * that adds the headers every answer carries (Content-Type, Content-Length, Date, X-Request-Id; a 304 carries no
 * Content-Type or Content-Length). The status line and headers go out with the body in one vectored write; the
 * body is never copied, so one cached body can be in flight to many connections at once. An answer the client does
 * not read within VTS_WRITE_TIMEOUT_MS closes its connection. A 401 also carries WWW-Authenticate
 * (HTTP_AUTH_CHALLENGE).
 *
 * RFC 9112 as a server: an HTTP/1.1 request needs exactly one valid Host (400 otherwise), an absolute-form target
 * (http://host/path) is served by its path, whitespace between a header's name and its colon is 400, and a method
 * the server does not know is 501 (it knows RFC 9110's methods and PATCH). A client whose connection resets before
 * its answer is logged with status 499; the handler finds the request gone (http_request_gone). Over VTS_MAX_CONNS a
 * connection gets a 503 with Retry-After and is closed.
 *
 * One request per connection is handled at a time: the parser pauses after each complete request and resumes once
 * its response is written, so pipelined responses cannot overtake each other.
 */
#ifndef VTS_HTTP_H
#define VTS_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "common/config.h"
#include "gateway/http/errors.h"
#include "gateway/http/routes.h"

/*
 * The challenge of every 401: the API key travels in the x-api-key request header (SPEC section 5), which no
 * registered scheme names, so the scheme is ApiKey and its parameter says which header carries the key.
 */
#define HTTP_AUTH_CHALLENGE "ApiKey header=\"x-api-key\""

/* Whether the x-api-key header of a request was absent, present, or present but unusable (too long, repeated). */
enum http_key_state { HTTP_KEY_ABSENT = 0, HTTP_KEY_PRESENT, HTTP_KEY_INVALID };

/* A parsed request, owned by its connection. Fields are valid until the response has been written. */
struct http_request {
  int method;       /* llhttp_method_t */
  const char *path; /* the URL without its query; not NUL-terminated */
  size_t path_len;
  enum http_route route; /* path's route, found once when the head ends; ROUTE_OTHER before */
  const char *query;     /* the bytes after '?', NULL when the URL has none */
  size_t query_len;
  const char *api_key; /* x-api-key value; NULL unless key_state is HTTP_KEY_PRESENT */
  size_t api_key_len;
  enum http_key_state key_state;
  const char *accept; /* the Accept header's value (repeats joined); NULL when absent or too long */
  size_t accept_len;
  /* Accept-Encoding and If-None-Match, each with its lines joined by ", "; NULL when absent or over its limit. */
  const char *accept_encoding;
  size_t accept_encoding_len;
  const char *if_none_match;
  size_t if_none_match_len;
  /* Authorization, Origin and MCP-Protocol-Version (read by /mcp only): NULL when absent, repeated or too long;
   * origin_bad and mcp_version_bad say a header was sent but is unusable. */
  const char *authorization;
  size_t authorization_len;
  const char *origin;
  size_t origin_len;
  int origin_bad;
  const char *mcp_version;
  size_t mcp_version_len;
  int mcp_version_bad;
  /*
   * The request carries a body (Content-Length > 0): no route reads one, so the route answers 413 once it has
   * decided that the path and method exist (404 and 405 come first), and the connection closes after the answer.
   */
  int has_body;
  /*
   * A route that reads a body (Content-Length > 0) is called when the head ends, with body_waiting set and body NULL:
   * nothing of the body is read yet (no 100 Continue went out). The handler either answers (a refusal: the
   * connection closes after the answer, the body unread) or reads the body with http_request_read_body.
   */
  int body_waiting;
  /* A route that reads a body (routes.h: a POST): its bytes, complete, and the Content-Type value (NULL when absent,
   * repeated or too long); content_encoded when a Content-Encoding was sent. body is NULL for another route. */
  const char *body;
  size_t body_len;
  const char *content_type;
  size_t content_type_len;
  int content_encoded;
  const char *request_id; /* echoed or generated X-Request-Id, NUL-terminated */
  char key_id[65];        /* name of the authenticated key for the access log, "" when none */
  uint64_t start_ms;      /* util_now_ms() when the request began */
  uint64_t start_ns;      /* uv_hrtime() when the request began, for the latency histogram */
};

struct http_server;

/*
 * Called for every complete request, on the loop thread. The handler answers exactly once with http_respond or
 * http_respond_error, now or later; around a later answer it holds the request (http_request_hold).
 */
typedef void (*http_request_cb)(void *app, struct http_request *req);

/* Creates the server of one worker on loop. Returns NULL on failure. Nothing listens until http_server_listen. */
struct http_server *http_server_new(uv_loop_t *loop, const struct vts_config *cfg, http_request_cb cb, void *app);
/* Parses cfg's VTS_LISTEN host and port ("0.0.0.0", "[::1]") into ss. Returns 0, or -EINVAL. */
int http_listen_addr(const struct vts_config *cfg, struct sockaddr_storage *ss);
/* Opens the worker's own listening socket with SO_REUSEPORT on cfg's VTS_LISTEN. Returns 0 or a negative errno. */
int http_server_listen(struct http_server *srv);
/*
 * Stops accepting, closes idle connections and lets each request in progress finish, with Connection: close.
 * After VTS_DRAIN_TIMEOUT_MS, a request still with its handler is answered 503 service_unavailable with Retry-After
 * (and logged), and every connection is closed. done(arg) is called once no connection remains.
 */
void http_server_drain(struct http_server *srv, void (*done)(void *arg), void *arg);
/* Closes the server's handles and frees it once they are closed; call after the drain reported done. */
void http_server_free(struct http_server *srv);
/* Number of open connections (for tests and logs). */
size_t http_server_conn_count(const struct http_server *srv);

/*
 * Answers req. extra_headers holds complete header lines ("Name: value\r\n"), or is NULL. The body is sent as-is with
 * Content-Type: application/json; a HEAD request gets the same headers and no body. When owned_body is not NULL the
 * server frees it after writing (body must then point into it). Does nothing but free owned_body when the client is
 * gone. Returns 0, or a negative errno when the response could not be queued (the connection is then closed).
 */
int http_respond(struct http_request *req, int status, const char *extra_headers, const char *body, size_t body_len,
                 char *owned_body);
/* As http_respond, with a Content-Type other than application/json (e.g. the Prometheus text format). */
int http_respond_typed(struct http_request *req, int status, const char *content_type, const char *extra_headers,
                       const char *body, size_t body_len, char *owned_body);
/*
 * As http_respond, for a body owned by someone else: release(owner) is called once the server is done with the
 * bytes (written, or the connection gone), including when this returns an error. release may be NULL. body_fd, when
 * not -1, is a file holding exactly the body from offset 0 (a memory file that body maps): what the socket takes at
 * once goes with sendfile(2), its pages handed to the socket rather than copied; the rest is written from body.
 */
int http_respond_ref(struct http_request *req, int status, const char *extra_headers, const char *body, size_t body_len,
                     int body_fd, void (*release)(void *owner), void *owner);
/* Answers req with the Error body of e and its status. */
int http_respond_error(struct http_request *req, enum api_error e, const char *extra_headers);

/* As http_respond_error, with message in place of e's own (JSON-escaped here): a 400 naming what was bad. */
int http_respond_error_msg(struct http_request *req, enum api_error e, const char *message, const char *extra_headers);

/*
 * Called once by http_request_read_body: status 0 when req->body holds the whole body, or a negative errno when the
 * body did not come (the client went, or it came too slowly or malformed: the server answered that itself). On the
 * loop thread, maybe before http_request_read_body returns.
 */
typedef void (*http_body_cb)(void *arg, struct http_request *req, int status);
/*
 * Reads the body of a request called with body_waiting (sending 100 Continue to a client that asked for it), then
 * calls cb. Returns 0 (cb will be called), or a negative errno (the request was answered already, or its client is
 * gone; cb is not called). The caller holds req until cb.
 */
int http_request_read_body(struct http_request *req, http_body_cb cb, void *arg);

/* Keeps req (and its connection's memory) alive across an asynchronous step; pair with http_request_release. */
void http_request_hold(struct http_request *req);
/* Drops a hold; the memory may be freed here when the connection has closed meanwhile. */
void http_request_release(struct http_request *req);
/* Whether the client is gone (connection closed), so that an answer would go nowhere. */
int http_request_gone(const struct http_request *req);

#endif
