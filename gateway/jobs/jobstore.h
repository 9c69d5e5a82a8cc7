/*
 * The durable state of batch jobs: a job, the key that made it, its options, and its items in the job's order, each
 * queued, running (taken), done (its answer kept compressed), failed (the error code and message of the synchronous
 * endpoint) or cancelled. Two backends fill one table of operations (struct jobstore_ops, jobstore_backend.h), chosen
 * by the configuration:
 *
 * - SQLite (jobstore_sqlite.c), without VTS_REDIS_URL: an embedded database (VTS_STATE_DIR/jobs.db, WAL mode).
 *   Every change is one transaction, so a process killed at any point loses nothing that was answered; a running item
 *   whose lease ran out (its taker died) goes back to the queue. Several processes may open the same file: SQLite's
 *   locks order them, and a take hands an item to one taker only.
 * - Redis (jobstore_redis.c), with VTS_REDIS_URL: hashes for the job and its items, a stream with a consumer group for
 *   the work (each gateway's runner a consumer), so every gateway serves every job and the items a dead gateway held
 *   are claimed by another within seconds (docs/ARCHITECTURE.md says the layout).
 *
 * Both take items round-robin across the jobs that have some to run (a job's next item after one of each other job),
 * so a long job never starves a short one. Every call is synchronous and bounded: SQLite by its busy timeout, Redis by
 * VTS_JOBS_REDIS_TIMEOUT_MS a command (a Redis that does not answer is -EIO at once until it is tried again).
 */
#ifndef VTS_JOBSTORE_H
#define VTS_JOBSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "common/limits.h"
#include "gateway/jobs/jobstore_backend.h"

struct jobstore;

void jobstore_close(struct jobstore *js);

/*
 * Master, before fork: what the configuration's backend prepares once; with VTS_REDIS_URL, resolves the Redis host
 * once, so a worker or the dispatcher never waits on a name lookup. Returns 0, or a negative errno with err naming the
 * variable.
 */
int jobstore_init(const struct vts_config *cfg, char *err, size_t errlen);
/*
 * The store the configuration names: Redis with VTS_REDIS_URL (keeping ended jobs VTS_JOB_TTL_S), else SQLite at
 * VTS_STATE_DIR/jobs.db (the directory made when missing). timeout_ms bounds each connect and reply of Redis
 * (VTS_JOBS_REDIS_TIMEOUT_MS), the longest its caller waits on it; the dispatcher calls from a thread of its own
 * (storeq.h). Returns 0, or a negative errno with err saying why.
 */
int jobstore_open_config(const struct vts_config *cfg, int timeout_ms, struct jobstore **out, char *err, size_t errlen);
/* "sqlite" or "redis". */
const char *jobstore_backend(const struct jobstore *js);
/* This handle's name as a taker of items (Redis: its consumer in the work stream's group), "" when it has none. */
const char *jobstore_taker(const struct jobstore *js);

/*
 * Creates a job of n videos (checked ids, duplicates already folded by the caller) in their order, all queued, with
 * the continuation of spec when it has one. Returns 0 with the job's id in id_out, -EINVAL (n is 0 and no
 * continuation follows), -EDQUOT (key_id holds spec->max_open open jobs already: nothing made), -ENOSPC (key_id's jobs
 * would keep more than spec->max_stored items: nothing made), or -EIO.
 */
int jobstore_create(struct jobstore *js, const struct jobstore_spec *spec,
                    const char (*video_ids)[VTS_VIDEO_ID_LEN + 1], size_t n, int64_t now_ms,
                    char id_out[JOBSTORE_ID_LEN + 1]);

/* The job id of key_id. Returns 0, -ENOENT (no such job, or another key's), or -EIO. */
int jobstore_get(struct jobstore *js, const char *key_id, const char *job_id, struct jobstore_job *out);

/*
 * Calls fn for at most limit items of job_id (key_id's) after position after (0 for the first), in order. *next is the
 * position to continue after, or 0 at the end. fn returning JOBSTORE_PAGE_FULL ends the page before that item;
 * any other non-zero stops the walk and is returned. Returns 0,
 * -ENOENT, -EIO, -EBADMSG (a stored answer that does not decompress) or fn's value.
 */
int jobstore_items(struct jobstore *js, const char *key_id, const char *job_id, int64_t after, size_t limit,
                   jobstore_item_fn fn, void *ctx, int64_t *next);

/*
 * Cancels what has not started, and the pages of its list not read yet. Returns 0 with the number of items cancelled
 * in *n, -ENOENT or -EIO.
 */
int jobstore_cancel(struct jobstore *js, const char *key_id, const char *job_id, int64_t now_ms, size_t *n);

/* The jobs of key_id with items queued or running, or pages still to read. Returns 0 or -EIO. */
int jobstore_open_jobs(struct jobstore *js, const char *key_id, size_t *n);
/* How many items key_id's jobs keep now, ended jobs not yet expired included, into *n. Returns 0 or -EIO. */
int jobstore_stored_items(struct jobstore *js, const char *key_id, size_t *n);

/*
 * Takes the next queued item whose time has come and marks it running until now_ms + lease_ms: from the job whose
 * turn it is (the jobs with items due take turns, one item each, the oldest job first in a round), in the job's
 * order. Returns 0, -EAGAIN (nothing to take now), or -EIO.
 */
int jobstore_take(struct jobstore *js, int64_t now_ms, int64_t lease_ms, struct jobstore_task *out);
/* jobstore_take of an item of a key not in skip (NULL: none; struct jobstore_skip in jobstore_backend.h). */
int jobstore_take_skip(struct jobstore *js, int64_t now_ms, int64_t lease_ms, const struct jobstore_skip *skip,
                       struct jobstore_task *out);

/*
 * Ends a running item: done with its answer (kept compressed), or failed with the endpoint's code and message.
 * Returns 0, -ENOENT (not running any more: cancelled, or its lease ran out and another took it), or -EIO.
 */
int jobstore_done(struct jobstore *js, const char *job_id, int64_t seq, const char *body, size_t len, int64_t now_ms);

/* Whether jobstore_done_charged can be used: the backend holds the month's counters (Redis). */
int jobstore_charges(const struct jobstore *js);
/* What jobstore_done_charged did with an item it found running. */
enum jobstore_charged {
  JOBSTORE_CHARGED_KEPT,        /* the answer kept and the unit counted */
  JOBSTORE_CHARGED_QUOTA_FAILED /* the month was used up: the item failed with the charge's quota code */
};
/*
 * jobstore_done, and one unit of charge's counter in the same atomic step: the answer is kept and the unit counted
 * together, or the item fails with the charge's quota code when the month is used up (the unit not counted), or
 * nothing happens (an item no longer running: answered already, so its unit was counted once). Returns 0 with what
 * happened in *outcome (when not NULL), -ENOENT (not running), -EIO (the store did not answer: nothing is known to
 * have happened; the item is claimed again later), -ENOTSUP (the backend cannot charge).
 */
int jobstore_done_charged(struct jobstore *js, const char *job_id, int64_t seq, const char *body, size_t len,
                          const struct jobstore_charge *charge, int64_t now_ms, enum jobstore_charged *outcome);
/*
 * With a backend that holds the month's counters (jobstore_charges): holds one unit of charge's counter for the
 * running item seq of job_id before its platform request, unless the month is used up. The unit is marked on the item:
 * a runner that claims it from a dead one holds it already. Returns 0 with what happened in *out, -ENOENT (no such
 * job), -EIO (the store did not answer), -ENOTSUP (another backend).
 */
enum jobstore_reserved {
  JOBSTORE_RESERVED_HELD,   /* held (or held already): jobstore_done keeps it with the answer */
  JOBSTORE_RESERVED_USED_UP /* the month is used up: nothing held */
};
int jobstore_reserve(struct jobstore *js, const char *job_id, int64_t seq, const struct jobstore_charge *charge,
                     enum jobstore_reserved *out);
/* Gives back the unit jobstore_reserve held for the item, once: it ended without a transcript. 0, -EIO, -ENOTSUP. */
int jobstore_unreserve(struct jobstore *js, const char *job_id, int64_t seq, const struct jobstore_charge *charge);
int jobstore_fail(struct jobstore *js, const char *job_id, int64_t seq, const char *code, const char *message,
                  int64_t now_ms);

/* Puts a running item back in the queue, not to be taken before not_before_ms (a ration met). Returns as done. */
int jobstore_retry(struct jobstore *js, const char *job_id, int64_t seq, int64_t not_before_ms, int64_t now_ms);

/*
 * Running items whose lease ended before now_ms go back to the queue, and so do taken pages whose lease ended (their
 * continuation is read again). Returns how many items, or -EIO. Redis has no leases of items (a dead taker's items
 * are claimed by the next take, see jobstore_keepalive; a taken page's lease is its due time): 0.
 */
int jobstore_recover(struct jobstore *js, int64_t now_ms);

/*
 * The taker (this handle) still runs the items it took and has not ended: Redis marks them fresh, so no other gateway
 * claims them; a taker silent past JOBSTORE_CLAIM_IDLE_MS loses them to the next take anywhere. Call it at least
 * every JOBSTORE_KEEPALIVE_MS. Returns 0 or -EIO; SQLite's leases need nothing (0).
 */
int jobstore_keepalive(struct jobstore *js, int64_t now_ms);

/*
 * Deletes, in one small transaction, at most JOBSTORE_EXPIRE_BATCH items of a job that ended (no item queued or
 * running, no page to read) and last changed before now_ms - ttl_ms, and the job once it holds none, so that no
 * transaction holds the database (and its other writers) for long. Returns 1 when it deleted some (call again), 0
 * when nothing expired is left, or -EIO. Redis expires them by itself (each key of an ended
 * job lives VTS_JOB_TTL_S): 0.
 */
int jobstore_expire(struct jobstore *js, int64_t now_ms, int64_t ttl_ms);

/* An ended job with a webhook_url and no delivery recorded: 0 with its id and key, -EAGAIN for none, or -EIO. */
int jobstore_hook_owed(struct jobstore *js, char job_id[JOBSTORE_ID_LEN + 1], char key_id[JOBSTORE_KEY_ID_MAX + 1]);

/*
 * Records job_id's delivery: pending, its message body (copied, at most VTS_WEBHOOK_MAX_PAYLOAD_BYTES), made at
 * now_ms, first due then. Returns 0 (also when one is recorded already: that one stays), -EINVAL, or -EIO.
 */
int jobstore_hook_add(struct jobstore *js, const char *job_id, const char *body, size_t len, int64_t now_ms);

/*
 * Takes the pending delivery due first at now_ms: counts its try and holds it back until now_ms + lease_ms, so that
 * a try whose taker died is taken again then. Returns 0, -EAGAIN (none due), or -EIO.
 */
int jobstore_hook_take(struct jobstore *js, int64_t now_ms, int64_t lease_ms, struct jobstore_hook *out);
/* jobstore_hook_take of a delivery of a job whose key is not in skip (NULL: none). */
int jobstore_hook_take_skip(struct jobstore *js, int64_t now_ms, int64_t lease_ms, const struct jobstore_skip *skip,
                            struct jobstore_hook *out);

/*
 * Ends a try of job_id's delivery: HOOK_DELIVERED, HOOK_GIVEN_UP, or HOOK_PENDING again from next_ms; http_status is
 * the receiver's answer (0 for none), kept with it. Returns 0, -ENOENT (no pending delivery), or -EIO.
 */
int jobstore_hook_end(struct jobstore *js, const char *job_id, enum jobstore_hook_state state, int64_t next_ms,
                      int http_status);

/*
 * Takes the continuation of a job (not cancelled) whose time has come, the oldest job first, and leases it until
 * now_ms + lease_ms. Returns 0, -EAGAIN (nothing to read now), or -EIO.
 */
int jobstore_take_page(struct jobstore *js, int64_t now_ms, int64_t lease_ms, struct jobstore_page *out);
/* jobstore_take_page of a job whose key is not in skip (NULL: none). */
int jobstore_take_page_skip(struct jobstore *js, int64_t now_ms, int64_t lease_ms, const struct jobstore_skip *skip,
                            struct jobstore_page *out);

/*
 * Ends a taken page, in one transaction (a page is added whole or not at all): the ids of the page (n checked ids,
 * in its order) not already in the job are appended after its items, queued, until it holds its max_items; total
 * grows by as many (*added). next is the continuation after this page: kept, untaken, for the next read, unless it
 * is "" or the job is full, which ends the list. Returns 0, -ENOENT (the page is not taken: cancelled, or its job
 * gone), or -EIO.
 */
int jobstore_page_done(struct jobstore *js, const char *job_id, const char (*ids)[VTS_VIDEO_ID_LEN + 1], size_t n,
                       const char *next, int64_t now_ms, size_t *added);

/*
 * jobstore_page_done within bounds: this page is the job's page number `read` (from 1; the first page, read when
 * the job was made, is 1); the list stops, with the job's stop_reason, when a next page is named but read reaches
 * max_pages (JOBSTORE_STOP_MAX_PAGES) or the page added no id (JOBSTORE_STOP_NO_NEW_IDS). why, when not NULL, is the
 * stop_reason of a list ended by the caller (next "": JOBSTORE_STOP_PAGE_FAILED). Returns as jobstore_page_done.
 */
int jobstore_page_end(struct jobstore *js, const char *job_id, const char (*ids)[VTS_VIDEO_ID_LEN + 1], size_t n,
                      const char *next, int64_t read, int64_t max_pages, const char *why, int64_t now_ms,
                      size_t *added);

/* Gives a taken page back, not to be read again before not_before_ms (a ration met). Returns as jobstore_page_done. */
int jobstore_page_retry(struct jobstore *js, const char *job_id, int64_t not_before_ms, int64_t now_ms);

/*
 * A key revoked: every job of key_id with work left is cancelled with stop_reason why (its queued items end
 * cancelled, its list stops, what is running ends as it ends), and every pending delivery of its jobs is given up.
 * Returns how many jobs were stopped, or -EIO.
 */
int jobstore_stop_key(struct jobstore *js, const char *key_id, const char *why, int64_t now_ms);

#endif
