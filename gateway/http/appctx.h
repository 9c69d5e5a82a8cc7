/*
 * What every handler of a worker reads: the configuration, the key store, the limiter and the job store's queue. Its
 * own header, so that the handlers' modules (handlers.c, jobs_api.c) share it without including each other.
 */
#ifndef VTS_APPCTX_H
#define VTS_APPCTX_H

#include <stdint.h>
#include <uv.h>

#include "common/config.h"
#include "gateway/http/http.h"
#include "gateway/keys/keys.h"
#include "gateway/limits/ratelimit.h"

struct l1cache;
struct storeq;

struct handlers_ctx {
  const struct vts_config *cfg;
  struct keystore *keys; /* the current key store; the worker swaps it on reload */
  struct ratelimit *rl;
  uint64_t started_ms;  /* util_now_ms() when the master started: /health uptime */
  uv_loop_t *loop;      /* the worker's loop */
  struct storeq *jobsq; /* the batch jobs' store on its own thread, opened on the first jobs request (jobs_api.c) */
  struct l1cache *l1;   /* the worker's L1 and ETag store, lent to the dispatcher link (dispatch_client_init) */
  int jobs_made_fd;     /* the master's eventfd: a job made here is said to the dispatcher at once (-1: none) */
};

/*
 * The key of req: its entry (and req->key_id set to its name, for the access log), or NULL after answering 401 when
 * the request names no key, or one the store does not hold.
 */
const struct key_entry *appctx_authorize(struct handlers_ctx *ctx, struct http_request *req);

#endif
