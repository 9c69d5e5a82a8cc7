/*
 * A worker's link to the dispatcher: a job request for a validated transcript query, answered with a result.
 * The dispatcher serves the shared cache, coalesces identical jobs and hands the rest to idle fetchers.
 */
#ifndef VTS_DISPATCH_CLIENT_H
#define VTS_DISPATCH_CLIENT_H

#include <uv.h>

#include "common/config.h"
#include "proto/proto.h"

/*
 * Called exactly once per dispatch_submit, on the loop thread. res is borrowed for the call; NULL means the job
 * failed inside the service (dispatcher gone, protocol error, deadline): answer 500 transcript_fetch_failed.
 */
typedef void (*dispatch_cb)(void *arg, const struct proto_result *res);

/* Connects this worker to the dispatcher at url (an ipc:// address). Returns 0 or a negative error. */
int dispatch_client_init(uv_loop_t *loop, const struct vts_config *cfg, const char *url);
/* Closes the link; pending callbacks are called with NULL first. */
void dispatch_client_close(void);
/* Sends job; cb reports its result. Returns 0 (cb will be called) or a negative error (cb will not be called). */
int dispatch_submit(const struct proto_job *job, dispatch_cb cb, void *arg);

/* Runs the dispatcher in the current (freshly forked) process until SIGTERM. Returns the exit status. */
int dispatcher_main(const struct vts_config *cfg, const char *worker_url);

#endif
