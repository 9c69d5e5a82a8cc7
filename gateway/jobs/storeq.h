/*
 * The job store on a thread of its own, so that no store call runs on a loop: a SQLite busy wait or a slow or frozen
 * Redis then delays only the jobs that wait for it, never the synchronous requests the loop also serves.
 *
 * One queue per process: its thread opens and owns a struct jobstore (the SQLite connection or the hiredis context
 * lives on that thread only) and runs the calls it is given one at a time, in the order they were made (FIFO). A call
 * is a pair of functions: work(js, arg) runs on the store's thread with the handle, then done(arg) runs on the loop
 * that opened the queue, in the same order. Whatever work learns from the store goes to done through arg: the loop
 * reads it only in done. A store call that does not answer holds the calls behind it, so a user bounds how many it
 * keeps in flight (storeq_depth).
 */
#ifndef VTS_STOREQ_H
#define VTS_STOREQ_H

#include <stddef.h>

#include <uv.h>

#include "common/config.h"
#include "gateway/jobs/jobstore.h"

struct storeq;

/* Runs on the store's thread: the store's calls for arg, their results kept in arg. */
typedef void (*storeq_work_fn)(struct jobstore *js, void *arg);
/* Runs on the queue's loop once work has returned: the results read, arg freed or reused as its owner decides. */
typedef void (*storeq_done_fn)(void *arg);

/*
 * Starts the store's thread on loop, which opens the store cfg names (jobstore_open_config with timeout_ms, a bound
 * that now holds only the store's thread) and waits for it to be open. Returns 0 with the queue in *out, or the
 * open's negative errno with err saying why (no thread left behind).
 */
int storeq_open(uv_loop_t *loop, const struct vts_config *cfg, int timeout_ms, struct storeq **out, char *err,
                size_t errlen);

/*
 * Queues work(js, arg) for the store's thread, then done(arg) on the loop (done may be NULL). On the loop thread only.
 * Returns 0, -ESHUTDOWN (the queue is closing: neither runs), or -ENOMEM.
 */
int storeq_call(struct storeq *q, storeq_work_fn work, storeq_done_fn done, void *arg);

/* Calls made and whose done has not run yet (queued, running, or answered): the queue's depth. On the loop thread. */
size_t storeq_depth(const struct storeq *q);

/*
 * The store's fixed properties (jobstore_backend, jobstore_charges, jobstore_taker) for the loop: a borrowed pointer
 * valid until storeq_close, never to be given to a call that asks the store.
 */
const struct jobstore *storeq_store(const struct storeq *q);

/*
 * Refuses new calls, lets the thread run every call queued, joins it and closes the store, runs the done of each on
 * this loop (before returning), then closes the loop's handle: q is freed when the loop next runs. A done that calls
 * storeq_call meanwhile gets -ESHUTDOWN. On the loop thread; NULL is nothing.
 */
void storeq_close(struct storeq *q);

#endif
