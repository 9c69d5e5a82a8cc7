/*
 * The dispatcher process: shared cache, coalescing, job queues, deadlines and the fetcher pool.
 *
 * Worker link (ipc, worker_url): a worker's request is a PROTO_JOB with job_id 0; the dispatcher answers it with a
 * PROTO_RESULT whose cache_ms is the shared entry's lifetime left, so a worker keeps a hot answer in its own cache
 * no longer than the shared entry lives.
 *
 * Fetcher link (tcp, cfg->jobs_url): a fetcher's every message (PROTO_READY, or PROTO_RESULT which also means idle)
 * is a request the dispatcher answers later with that fetcher's next PROTO_JOB.
 *
 * Every decision is the core's (core.h); this process is the shell around it: nng, Redis and the clock.
 */
#ifndef VTS_DISPATCHER_H
#define VTS_DISPATCHER_H

#include <stdint.h>

#include "common/config.h"
#include "gateway/dispatcher/core.h"
#include "gateway/limits/ratelimit.h"

/*
 * Runs the dispatcher in the current (freshly forked) process until SIGTERM. limits is what the master made for the
 * rate limiter before fork (borrowed; NULL: no batch item can take a unit of the month from its table).
 * jobs_made_fd is the master's eventfd that workers write when they make a batch job: the runner looks at once
 * (-1: none, the store's polls find it). Returns the exit status.
 */
int dispatcher_main(const struct vts_config *cfg, const char *worker_url, const struct ratelimit_shared *limits,
                    int jobs_made_fd);

#endif
