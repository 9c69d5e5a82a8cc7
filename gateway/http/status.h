/*
 * The HTTP statuses the gateway answers, one row each: the status line's reason phrase and the status label of
 * vts_http_requests_total are both read from this table. A status the table lacks goes out as "Unknown" and is
 * counted as "other"; adding a status is adding its row.
 */
#ifndef VTS_HTTP_STATUS_H
#define VTS_HTTP_STATUS_H

/*
 * X(code, reason phrase), in the order /metrics lists them. 499 is never sent: it is the status a request is logged
 * and counted with when its client reset the connection before its answer.
 */
#define HTTP_STATUSES(X)                    \
  X(200, "OK")                              \
  X(202, "Accepted")                        \
  X(304, "Not Modified")                    \
  X(400, "Bad Request")                     \
  X(401, "Unauthorized")                    \
  X(403, "Forbidden")                       \
  X(404, "Not Found")                       \
  X(405, "Method Not Allowed")              \
  X(406, "Not Acceptable")                  \
  X(408, "Request Timeout")                 \
  X(411, "Length Required")                 \
  X(413, "Content Too Large")               \
  X(414, "URI Too Long")                    \
  X(415, "Unsupported Media Type")          \
  X(429, "Too Many Requests")               \
  X(431, "Request Header Fields Too Large") \
  X(499, "Client Closed Request")           \
  X(500, "Internal Server Error")           \
  X(501, "Not Implemented")                 \
  X(502, "Bad Gateway")                     \
  X(503, "Service Unavailable")

#define HTTP_STATUS_ONE_(code, phrase) +1
/* How many rows the table has. */
enum { HTTP_NSTATUS = 0 HTTP_STATUSES(HTTP_STATUS_ONE_) };

/* The row of status in the table, or HTTP_NSTATUS for a status it lacks. */
int http_status_index(int status);
/* The status of row i (0 <= i < HTTP_NSTATUS). */
int http_status_code(int i);
/* The reason phrase of status: "Unknown" for a status the table lacks. */
const char *http_status_reason(int status);

#endif
