/*
 * An HTTP worker: one process, one libuv loop, its own SO_REUSEPORT listening socket, the routes of handlers.h, a
 * link to the dispatcher, and the API key store (reloaded on SIGHUP and when the key file changes). SIGTERM drains:
 * stop accepting, finish requests in progress within VTS_DRAIN_TIMEOUT_MS, exit.
 */
#ifndef VTS_WORKER_H
#define VTS_WORKER_H

#include <stdint.h>

#include "common/config.h"
#include "gateway/keys/keys.h"
#include "gateway/limits/ratelimit.h"

/* Exit status of a worker that cannot listen: a configuration problem that restarting does not fix. */
#define WORKER_EXIT_CONFIG 78

/*
 * Runs a worker in the current, freshly forked process until it has drained. keys is the store loaded by the master
 * (used when the worker's own load fails); the worker takes ownership. worker_url is the dispatcher's ipc address;
 * started_ms is util_now_ms() at master start; limits is what the master made for the rate limiter before fork
 * (borrowed: the master frees it). jobs_made_fd is the master's eventfd the dispatcher reads: written once for each
 * batch job this worker makes (-1: none). Returns the exit status.
 */
int worker_main(const struct vts_config *cfg, const char *worker_url, uint64_t started_ms, struct keystore *keys,
                const struct ratelimit_shared *limits, int jobs_made_fd);

#endif
