/*
 * Every route the gateway answers, one row each. The handlers' dispatch (404 for a path no row has, 405 with its
 * Allow header for a method its row lacks), the listener that serves it and the route label of
 * vts_http_requests_total are all read from this table: adding a route is adding its row (and writing its handler).
 */
#ifndef VTS_HTTP_ROUTES_H
#define VTS_HTTP_ROUTES_H

#include <stddef.h>
#include <stdint.h>

/* A set of methods: the bits of llhttp's method numbers (HTTP_GET, HTTP_HEAD, ...). */
#define ROUTE_METHOD(m) (UINT64_C(1) << (m))
#define ROUTE_GET_HEAD (ROUTE_METHOD(HTTP_GET) | ROUTE_METHOD(HTTP_HEAD))

/*
 * X(id, path, methods, server, handler), in the order /metrics lists the routes:
 *   id       ROUTE_<id> in enum http_route
 *   path     the path, without the query: exact, or with one "{id}" segment standing for a resource's id (1 to
 *            ROUTE_ID_MAX characters of A-Z, a-z, 0-9, _ and -), which the handler reads with route_id
 *   methods  the methods it answers; another is 405 method_not_allowed with an Allow header naming these. A POST
 *            is the one method that reads a request body (route_reads_body); any other request with a body is 413
 *   server   PUBLIC (VTS_LISTEN) or METRICS (VTS_METRICS_LISTEN); the other listener answers 404
 *   handler  its function in handlers.c
 */
#define HTTP_ROUTES(X)                                                                    \
  X(HEALTH, "/health", ROUTE_GET_HEAD, PUBLIC, handle_health)                             \
  X(OPENAPI, "/openapi.json", ROUTE_GET_HEAD, PUBLIC, handle_openapi)                     \
  X(TRANSCRIPT, "/v1/video/transcript", ROUTE_GET_HEAD, PUBLIC, handle_transcript)        \
  X(METRICS, "/metrics", ROUTE_GET_HEAD, METRICS, handle_metrics)                         \
  X(TRACKS, "/v1/video/tracks", ROUTE_GET_HEAD, PUBLIC, handle_tracks)                    \
  X(METADATA, "/v1/video/metadata", ROUTE_GET_HEAD, PUBLIC, handle_metadata)              \
  X(READY, "/ready", ROUTE_GET_HEAD, PUBLIC, handle_ready)                                \
  X(JOBS, "/v1/jobs", ROUTE_METHOD(HTTP_POST), PUBLIC, handle_jobs_create)                \
  X(JOB, "/v1/jobs/{id}", ROUTE_GET_HEAD | ROUTE_METHOD(HTTP_DELETE), PUBLIC, handle_job) \
  X(JOB_ITEMS, "/v1/jobs/{id}/items", ROUTE_GET_HEAD, PUBLIC, handle_job_items)           \
  X(USAGE, "/v1/usage", ROUTE_GET_HEAD, PUBLIC, handle_usage)                             \
  X(MCP, "/mcp", ROUTE_METHOD(HTTP_POST), PUBLIC, mcp_handle)

#define ROUTE_ENUM_(id, path, methods, server, handler) ROUTE_##id,
/* A route by its row; ROUTE_OTHER is every path no row has. */
enum http_route { HTTP_ROUTES(ROUTE_ENUM_) ROUTE_OTHER, ROUTE__COUNT };
#undef ROUTE_ENUM_

/* The listeners a route may be served by. */
enum route_server { ROUTE_SERVER_PUBLIC, ROUTE_SERVER_METRICS };

/* The longest id a "{id}" segment matches. */
#define ROUTE_ID_MAX 64

/* The route of a request path (len bytes, no query), whichever listener it came to; ROUTE_OTHER for none. */
enum http_route route_find(const char *path, size_t len);
/*
 * The "{id}" segment of path (len bytes) for route r, which route_find matched: *id points into path, *id_len its
 * length. Returns 0, or -ENOENT when r has no such segment.
 */
int route_id(enum http_route r, const char *path, size_t len, const char **id, size_t *id_len);
/* Whether a request of method to route r reads its body (a POST the route answers). */
int route_reads_body(enum http_route r, int method);
/* The label of a route in metrics: its path, "other" for ROUTE_OTHER. */
const char *route_label(enum http_route r);
/* Whether the listener server answers route r. */
int route_served_by(enum http_route r, enum route_server server);
/* Whether route r answers method (an llhttp method number). */
int route_allows(enum http_route r, int method);
/*
 * Writes the "Allow: GET, HEAD\r\n" header line of route r into out (cap bytes, NUL-terminated; ROUTE_ALLOW_BYTES
 * holds any). Returns out.
 */
#define ROUTE_ALLOW_BYTES 128
const char *route_allow_header(enum http_route r, char *out, size_t cap);

/* Registers the routes and the statuses of status.h as the family of vts_http_requests_total (master, before fork). */
void routes_metrics_register(void);

#endif
