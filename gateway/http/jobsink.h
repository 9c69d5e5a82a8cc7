/*
 * Where the answer of a jobs request goes. The jobs API (jobs_api.c) produces each answer (a status, header lines
 * and a JSON body, or a refusal) into a sink, now or later (after the limiter, a list's first page or a store call
 * returns on the loop): the HTTP sink writes it to the request's connection, an MCP tool's sink collects it into a
 * tool result. A sink is given one answer (answer or error) at most, then ended once (end), also when the answer
 * would go nowhere (gone).
 */
#ifndef VTS_JOBSINK_H
#define VTS_JOBSINK_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/http/errors.h"
#include "gateway/http/http.h"

struct jobsink;

struct jobsink_ops {
  /*
   * The answer: status, header lines ("Name: value\r\n" each, "" for none) and the JSON body, of which the sink takes
   * ownership (freed with free).
   */
  void (*answer)(struct jobsink *s, int status, const char *headers, char *body, size_t len);
  /* A refusal: e, with message in place of e's own (NULL: e's own), and header lines. */
  void (*error)(struct jobsink *s, enum api_error e, const char *message, const char *headers);
  /* Whether an answer would go nowhere now (the client went meanwhile): the call then ends without one. */
  int (*gone)(const struct jobsink *s);
  /* The call is over: what the sink holds for it (the request) can go. Called once, last. */
  void (*end)(struct jobsink *s);
};

struct jobsink {
  const struct jobsink_ops *ops;
};

/* The sink of a REST request: it holds req (http_request_hold) until end, so a connection closed meanwhile is safe. */
struct jobsink_http {
  struct jobsink sink;
  struct http_request *req;
};

void jobsink_http_init(struct jobsink_http *s, struct http_request *req);

/* The seconds of a Retry-After line in headers (as the sink is given them), or 0 when there is none. */
int64_t jobsink_retry_after(const char *headers);

#endif
