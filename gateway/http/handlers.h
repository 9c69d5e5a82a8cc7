/*
 * The routes of a worker, as the table of routes.h lists them: GET /health, GET /openapi.json,
 * GET /v1/video/transcript and GET /v1/video/tracks (auth -> rate limit and quota -> query validation -> dispatch)
 * on the public listener, GET /metrics on the metrics listener, each also answering HEAD. Unknown paths are 404
 * not_found; a known path with another method is 405 method_not_allowed with an Allow header naming its methods.
 */
#ifndef VTS_HANDLERS_H
#define VTS_HANDLERS_H

#include <stdint.h>

#include "common/config.h"
#include "gateway/http/http.h"
#include "gateway/keys/keys.h"
#include "gateway/limits/ratelimit.h"

struct handlers_ctx {
  const struct vts_config *cfg;
  struct keystore *keys; /* the current key store; the worker swaps it on reload */
  struct ratelimit *rl;
  uint64_t started_ms; /* util_now_ms() when the master started: /health uptime */
};

/* The http_request_cb of a worker; app is a struct handlers_ctx that outlives every request. */
void handlers_request(void *app, struct http_request *req);
/* The http_request_cb of a worker's metrics listener (VTS_METRICS_LISTEN); app as for handlers_request. */
void handlers_metrics_request(void *app, struct http_request *req);

#endif
