/*
 * A worker's link to the dispatcher: a job request for a validated transcript query, answered with a result.
 * The dispatcher serves the shared cache, coalesces identical jobs and hands the rest to idle fetchers.
 */
#ifndef VTS_DISPATCH_CLIENT_H
#define VTS_DISPATCH_CLIENT_H

#include <uv.h>

#include "common/config.h"
#include "gateway/cache/entity.h"
#include "gateway/http/l1cache.h"
#include "proto/proto.h"

/*
 * Called exactly once per dispatch_submit, on the loop thread, never from inside dispatch_submit. res is borrowed
 * for the call; NULL means the job failed inside the service (dispatcher gone, protocol error, deadline): answer 500
 * transcript_fetch_failed. res->outcome is never PROTO_NO_CAPTIONS (the dispatcher maps it). ent, borrowed for the
 * call too (entity_ref it to keep it), is res's body with, for a PROTO_OK, its compressed forms and ETag, and its
 * expires_ms set from the dispatcher's entry; NULL when res is NULL or memory ran out, and always for a browse job
 * (PROTO_KIND_BROWSE: never in L1; read res's body).
 */
typedef void (*dispatch_cb)(void *arg, const struct proto_result *res, struct entity *ent);

/*
 * Connects this worker to the dispatcher at url (an ipc:// address), in the background: the dispatcher may start
 * later or restart; nng redials. Call once per process, after fork. The link's uv handle is unreferenced: it does
 * not keep the loop alive by itself. l1 is the worker's L1 (l1cache_new), used until dispatch_client_close; the worker
 * frees it after. Returns 0, -EALREADY, -ENOMEM or -EIO.
 */
int dispatch_client_init(uv_loop_t *loop, const struct vts_config *cfg, const char *url, struct l1cache *l1);
/*
 * Closes the link; the callbacks of jobs still pending are called with NULL before it returns. Run the loop once
 * more afterwards (its handle closes asynchronously) before uv_loop_close.
 */
void dispatch_client_close(void);
/*
 * Sends job (job_id and deadline_ms are ignored: the dispatcher owns deadlines); cb reports its result. A hot
 * answer may come from this worker's own small cache (VTS_L1_CACHE_*), never kept longer than the dispatcher's
 * shared entry. A job the same as one already in flight from this worker (video and job key, not a browse page, neither
 * with an If-None-Match) is not sent again: cb gets that job's result when it comes, or its failure. A worker that
 * cannot reach the dispatcher gets cb(NULL) within VTS_DISPATCH_CONNECT_WAIT_MS; a lost
 * dispatcher fails every job in flight at once. Returns 0 (cb will be called), or -EINVAL for a malformed job,
 * -ENOTCONN when the link is not open, -ENOMEM or -EIO (cb will not be called).
 */
int dispatch_submit(const struct proto_job *job, dispatch_cb cb, void *arg);
/*
 * What this worker knows of the answer (a PROTO_OK one) for (video_id, key: proto_job_key), without a job: a new
 * reference (release it) to its entity when L1 holds it, else to its validator (entity_validator: its ETags, no
 * body) while the dispatcher's entry lives; NULL when neither is there.
 */
struct entity *dispatch_cached(const char *video_id, const char *key);

#endif
