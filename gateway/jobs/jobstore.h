/*
 * The durable state of batch jobs: a job, the key that made it, its options, and its items in the job's order, each
 * queued, running (taken), done (its answer kept compressed), failed (the error code and message of the synchronous
 * endpoint) or cancelled. Two backends fill one table of operations (struct jobstore_ops, below), chosen by the
 * configuration:
 *
 * - SQLite (this file's jobstore.c), without VTS_REDIS_URL: an embedded database (VTS_STATE_DIR/jobs.db, WAL mode).
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

#define JOBSTORE_ID_LEN 25 /* "j" + 12 hex digits of the creation time in ms + 12 random hex digits */
/* The longest name of an API key (the key file's, KEYS_MAX_NAME): a job's key_id as the store gives it back. */
#define JOBSTORE_KEY_ID_MAX 64

enum jobstore_item_status { ITEM_QUEUED, ITEM_RUNNING, ITEM_DONE, ITEM_FAILED, ITEM_CANCELLED, ITEM__COUNT };

/* "queued", "running", "done", "failed", "cancelled". */
const char *jobstore_item_status_name(enum jobstore_item_status s);

struct jobstore;

/*
 * Opens (creating when missing) the database at path. Returns 0, or a negative errno with err saying what failed
 * (the path and SQLite's message).
 */
int jobstore_open(const char *path, struct jobstore **out, char *err, size_t errlen);
void jobstore_close(struct jobstore *js);

/*
 * Master, before fork: with VTS_REDIS_URL, resolves the Redis host once, so a worker or the dispatcher never waits on
 * a name lookup. Returns 0, or a negative errno with err naming the variable.
 */
int jobstore_init(const struct vts_config *cfg, char *err, size_t errlen);
/*
 * The store the configuration names: Redis with VTS_REDIS_URL (keeping ended jobs VTS_JOB_TTL_S), else SQLite at
 * VTS_STATE_DIR/jobs.db (the directory made when missing). redis_timeout_ms bounds each connect and reply of Redis,
 * the longest the caller's loop may wait on it (VTS_JOBS_REDIS_TIMEOUT_MS for a worker, a shorter
 * VTS_JOBS_RUNNER_REDIS_TIMEOUT_MS for the dispatcher, whose loop also carries every synchronous request). Returns 0,
 * or a negative errno with err saying why.
 */
int jobstore_open_config(const struct vts_config *cfg, int redis_timeout_ms, struct jobstore **out, char *err,
                         size_t errlen);
/* "sqlite" or "redis". */
const char *jobstore_backend(const struct jobstore *js);
/*
 * How often a loop that found nothing to do asks the store again: local_ms for SQLite (a read of a local file), and
 * JOBSTORE_REMOTE_POLL_MS for Redis, whose every question is a round trip the asking loop waits for (the dispatcher's
 * loop carries every synchronous request too).
 */
#define JOBSTORE_REMOTE_POLL_MS 1000
uint64_t jobstore_idle_poll_ms(const struct jobstore *js, uint64_t local_ms);
/* This handle's name as a taker of items (Redis: its consumer in the work stream's group), "" when it has none. */
const char *jobstore_taker(const struct jobstore *js);

/* What a job asks for, besides its videos. Strings are "" when not given. */
struct jobstore_spec {
  const char *key_id;   /* the API key's id: a job is visible only to it */
  const char *language; /* as the transcript endpoint's */
  const char *translate;
  const char *format;
  const char *webhook_url;
  const char *webhook_secret;
  const char *source; /* "video_ids", "playlist:<id>" or "channel:<id>" */
  /*
   * A playlist's or channel's job: the continuation token of its list's next page (NULL or "" when the list was read
   * whole), kept with the job until jobstore_page_done reads it, and the most items the job may hold (its limit, or
   * VTS_JOB_MAX_ITEMS; 0 with no continuation).
   */
  const char *continuation;
  size_t max_items;
  /*
   * The most open jobs (jobstore_open_jobs) key_id may hold, the new one included; 0 for no cap. Checked in the step
   * that creates the job, so requests made at once (or a list's POST across its first page's reading) cannot pass it.
   */
  size_t max_open;
  /*
   * The most items key_id's jobs may keep, ended jobs included until they expire, the new one's n included; 0 for no
   * cap. Checked in the same step (a list's later pages are bounded by max_items, counted as they arrive).
   */
  size_t max_stored;
};

/*
 * Creates a job of n videos (checked ids, duplicates already folded by the caller) in their order, all queued, with
 * the continuation of spec when it has one. Returns 0 with the job's id in id_out, -EINVAL (n is 0 and no
 * continuation follows), -EDQUOT (key_id holds spec->max_open open jobs already: nothing made), -ENOSPC (key_id's jobs
 * would keep more than spec->max_stored items: nothing made), or -EIO.
 */
int jobstore_create(struct jobstore *js, const struct jobstore_spec *spec,
                    const char (*video_ids)[VTS_VIDEO_ID_LEN + 1], size_t n, int64_t now_ms,
                    char id_out[JOBSTORE_ID_LEN + 1]);

/* A job as GET /v1/jobs/{id} shows it. status is "queued", "running", "done" or "cancelled". */
struct jobstore_job {
  char id[JOBSTORE_ID_LEN + 1];
  const char *status;
  int64_t created_ms;
  int64_t updated_ms;
  size_t total;
  size_t counts[ITEM__COUNT];
  char language[32];
  char translate[32];
  char format[16];
  char webhook_url[2048];
  char webhook_secret[64];
  int more; /* pages of its list are still to be read (a continuation is kept): not done yet, whatever the counts */
};

/* The job id of key_id. Returns 0, -ENOENT (no such job, or another key's), or -EIO. */
int jobstore_get(struct jobstore *js, const char *key_id, const char *job_id, struct jobstore_job *out);

/* One item as GET /v1/jobs/{id}/items shows it. body is the answer (done), NULL otherwise; valid during the call. */
struct jobstore_item {
  int64_t seq; /* 1-based position in the job */
  char video_id[VTS_VIDEO_ID_LEN + 1];
  enum jobstore_item_status status;
  const char *error_code;    /* failed: the synchronous endpoint's code */
  const char *error_message; /* failed: its message */
  const char *body;
  size_t body_len;
};

/* fn's answer for "this item does not fit the page": the walk ends before it, and *next points at it. */
#define JOBSTORE_PAGE_FULL 1

typedef int (*jobstore_item_fn)(void *ctx, const struct jobstore_item *item);

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
/* How many items key_id's jobs keep now, ended jobs not yet expired included, into *n. Returns 0 or -EIO. */
int jobstore_stored_items(struct jobstore *js, const char *key_id, size_t *n);
int jobstore_open_jobs(struct jobstore *js, const char *key_id, size_t *n);

/* An item handed to a taker. */
struct jobstore_task {
  char job_id[JOBSTORE_ID_LEN + 1];
  int64_t seq;
  char video_id[VTS_VIDEO_ID_LEN + 1];
  char key_id[JOBSTORE_KEY_ID_MAX + 1];
  char language[32];
  char translate[32];
  char format[16];
  int tries;          /* earlier takes of this item */
  int64_t created_ms; /* when its job was made: an item rationed past VTS_JOB_MAX_AGE_S of it fails */
};

/*
 * Takes the next queued item whose time has come and marks it running until now_ms + lease_ms: from the job whose
 * turn it is (the jobs with items due take turns, one item each, the oldest job first in a round), in the job's
 * order. Returns 0, -EAGAIN (nothing to take now), or -EIO.
 */
int jobstore_take(struct jobstore *js, int64_t now_ms, int64_t lease_ms, struct jobstore_task *out);

/*
 * Ends a running item: done with its answer (kept compressed), or failed with the endpoint's code and message.
 * Returns 0, -ENOENT (not running any more: cancelled, or its lease ran out and another took it), or -EIO.
 */
int jobstore_done(struct jobstore *js, const char *job_id, int64_t seq, const char *body, size_t len, int64_t now_ms);

/* A unit of the month counted with an answer, in the same atomic step (a backend that can: jobstore_charges). */
struct jobstore_charge {
  char counter[128];                      /* the key's month counter, as the synchronous endpoint counts it */
  int64_t quota;                          /* the key's units of the month */
  int64_t ttl_s;                          /* the counter's lifetime when this unit starts it */
  const char *quota_code, *quota_message; /* what the item fails with when the month is used up */
};

/* Whether jobstore_done_charged can be used: the backend holds the month's counters (Redis). */
int jobstore_charges(const struct jobstore *js);
/*
 * jobstore_done, and one unit of charge's counter in the same atomic step: the answer is kept and the unit counted
 * together, or the item fails with the charge's quota code when the month is used up (the unit not counted), or
 * nothing happens (an item no longer running: answered already, so its unit was counted once). Returns 1 (kept and
 * counted), 0 (month used up: failed), -ENOENT (not running), -EIO (the store did not answer: nothing is known to have
 * happened; the item is claimed again later), -ENOTSUP (the backend cannot charge).
 */
int jobstore_done_charged(struct jobstore *js, const char *job_id, int64_t seq, const char *body, size_t len,
                          const struct jobstore_charge *charge, int64_t now_ms);
/*
 * With a backend that holds the month's counters (jobstore_charges): holds one unit of charge's counter for the
 * running item seq of job_id before its platform request, unless the month is used up. The unit is marked on the item:
 * a runner that claims it from a dead one holds it already. Returns 1 (held: jobstore_done keeps it with the answer),
 * 0 (the month is used up), -ENOENT (no such job), -EIO (the store did not answer), -ENOTSUP (another backend).
 */
int jobstore_reserve(struct jobstore *js, const char *job_id, int64_t seq, const struct jobstore_charge *charge);
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
#define JOBSTORE_KEEPALIVE_MS 1000
#define JOBSTORE_CLAIM_IDLE_MS 5000
int jobstore_keepalive(struct jobstore *js, int64_t now_ms);

/*
 * Deletes, in one small transaction, at most JOBSTORE_EXPIRE_BATCH items of a job that ended (no item queued or
 * running, no page to read) and last changed before now_ms - ttl_ms, and the job once it holds none, so that no
 * transaction holds the database (and its other writers) for long. Returns 1 when it deleted some (call again), 0
 * when nothing expired is left, or -EIO. Redis expires them by itself (each key of an ended
 * job lives VTS_JOB_TTL_S): 0.
 */
#define JOBSTORE_EXPIRE_BATCH 500
int jobstore_expire(struct jobstore *js, int64_t now_ms, int64_t ttl_ms);

/*
 * Webhooks. A job with a webhook_url owes one delivery once it has ended (no item queued or running, no page of its
 * list to read). Its state lives beside the job: the message (made once, so that every try sends the same body), the
 * tries made, when the next one is due, and whether it was delivered or given up. A job with a delivery pending, or
 * owed and not yet recorded, is not expired; the delivery is deleted with its job.
 */
enum jobstore_hook_state { HOOK_PENDING, HOOK_DELIVERED, HOOK_GIVEN_UP };

/* An ended job with a webhook_url and no delivery recorded: 0 with its id and key, -EAGAIN for none, or -EIO. */
int jobstore_hook_owed(struct jobstore *js, char job_id[JOBSTORE_ID_LEN + 1], char key_id[JOBSTORE_KEY_ID_MAX + 1]);

/*
 * Records job_id's delivery: pending, its message body (copied, at most VTS_WEBHOOK_MAX_PAYLOAD_BYTES), made at
 * now_ms, first due then. Returns 0 (also when one is recorded already: that one stays), -EINVAL, or -EIO.
 */
int jobstore_hook_add(struct jobstore *js, const char *job_id, const char *body, size_t len, int64_t now_ms);

/* A try of a delivery handed to a taker. */
struct jobstore_hook {
  char job_id[JOBSTORE_ID_LEN + 1];
  char url[VTS_WEBHOOK_URL_MAX_BYTES + 1];
  char secret[64];
  int attempt;     /* this try's number, from 1 */
  int64_t made_ms; /* when the delivery was recorded: no try is due VTS_WEBHOOK_RETRY_WINDOW_MS after */
  size_t body_len;
  char body[VTS_WEBHOOK_MAX_PAYLOAD_BYTES + 1];
};

/*
 * Takes the pending delivery due first at now_ms: counts its try and holds it back until now_ms + lease_ms, so that
 * a try whose taker died is taken again then. Returns 0, -EAGAIN (none due), or -EIO.
 */
int jobstore_hook_take(struct jobstore *js, int64_t now_ms, int64_t lease_ms, struct jobstore_hook *out);

/*
 * Ends a try of job_id's delivery: HOOK_DELIVERED, HOOK_GIVEN_UP, or HOOK_PENDING again from next_ms; http_status is
 * the receiver's answer (0 for none), kept with it. Returns 0, -ENOENT (no pending delivery), or -EIO.
 */
int jobstore_hook_end(struct jobstore *js, const char *job_id, enum jobstore_hook_state state, int64_t next_ms,
                      int http_status);

/*
 * The pages of a playlist's or channel's list after the first, read in the background: a job has at most one
 * continuation kept (the next page to read), taken by one reader at a time with a lease, like an item.
 */
struct jobstore_page {
  char job_id[JOBSTORE_ID_LEN + 1];
  char token[VTS_MAX_BROWSE_TOKEN_BYTES + 1]; /* the continuation to read */
  char key_id[JOBSTORE_KEY_ID_MAX + 1];
  int tries;          /* earlier takes of this page */
  int64_t created_ms; /* when its job was made */
};

/*
 * Takes the continuation of a job (not cancelled) whose time has come, the oldest job first, and leases it until
 * now_ms + lease_ms. Returns 0, -EAGAIN (nothing to read now), or -EIO.
 */
int jobstore_take_page(struct jobstore *js, int64_t now_ms, int64_t lease_ms, struct jobstore_page *out);

/*
 * Ends a taken page, in one transaction (a page is added whole or not at all): the ids of the page (n checked ids,
 * in its order) not already in the job are appended after its items, queued, until it holds its max_items; total
 * grows by as many (*added). next is the continuation after this page: kept, untaken, for the next read, unless it
 * is "" or the job is full, which ends the list. Returns 0, -ENOENT (the page is not taken: cancelled, or its job
 * gone), or -EIO.
 */
int jobstore_page_done(struct jobstore *js, const char *job_id, const char (*ids)[VTS_VIDEO_ID_LEN + 1], size_t n,
                       const char *next, int64_t now_ms, size_t *added);

/* Gives a taken page back, not to be read again before not_before_ms (a ration met). Returns as jobstore_page_done. */
int jobstore_page_retry(struct jobstore *js, const char *job_id, int64_t not_before_ms, int64_t now_ms);

/*
 * For the backends: what an implementation fills, a versioned table of operations, one per backend, chosen by
 * jobstore_open_config. The SQLite backend is jobstore.c's own, the Redis backend jobstore_redis.c. Each operation has
 * the meaning and the return values of the jobstore_* function of its name; self is the implementation's own state. An
 * operation a backend has no use for is NULL (the facade answers for it).
 */
#define JOBSTORE_OPS_VERSION 1

struct jobstore_ops {
  int version; /* JOBSTORE_OPS_VERSION */
  const char *name;
  int charges; /* done counts a charge with the answer (jobstore_charges) */
  void (*close)(void *self);
  int (*create)(void *self, const struct jobstore_spec *spec, const char (*video_ids)[VTS_VIDEO_ID_LEN + 1], size_t n,
                int64_t now_ms, const char *job_id);
  int (*get)(void *self, const char *key_id, const char *job_id, struct jobstore_job *out);
  int (*items)(void *self, const char *key_id, const char *job_id, int64_t after, size_t limit, jobstore_item_fn fn,
               void *ctx, int64_t *next);
  int (*cancel)(void *self, const char *key_id, const char *job_id, int64_t now_ms, size_t *n);
  int (*open_jobs)(void *self, const char *key_id, size_t *n);
  int (*stored_items)(void *self, const char *key_id, size_t *n);
  int (*take)(void *self, int64_t now_ms, int64_t lease_ms, struct jobstore_task *out);
  /* The answer compressed (a zlib stream of body), with its size before. */
  int (*done)(void *self, const char *job_id, int64_t seq, const void *z, size_t zlen, size_t len,
              const struct jobstore_charge *charge, int64_t now_ms);
  int (*fail)(void *self, const char *job_id, int64_t seq, const char *code, const char *message, int64_t now_ms);
  int (*retry)(void *self, const char *job_id, int64_t seq, int64_t not_before_ms, int64_t now_ms);
  int (*recover)(void *self, int64_t now_ms);
  int (*expire)(void *self, int64_t now_ms, int64_t ttl_ms);
  int (*keepalive)(void *self, int64_t now_ms);
  const char *(*taker)(void *self);
  int (*hook_owed)(void *self, char job_id[JOBSTORE_ID_LEN + 1], char key_id[JOBSTORE_KEY_ID_MAX + 1]);
  int (*hook_add)(void *self, const char *job_id, const char *body, size_t len, int64_t now_ms);
  int (*hook_take)(void *self, int64_t now_ms, int64_t lease_ms, struct jobstore_hook *out);
  int (*hook_end)(void *self, const char *job_id, enum jobstore_hook_state state, int64_t next_ms, int http_status);
  int (*take_page)(void *self, int64_t now_ms, int64_t lease_ms, struct jobstore_page *out);
  int (*page_done)(void *self, const char *job_id, const char (*ids)[VTS_VIDEO_ID_LEN + 1], size_t n, const char *next,
                   int64_t now_ms, size_t *added);
  int (*page_retry)(void *self, const char *job_id, int64_t not_before_ms, int64_t now_ms);
  int (*reserve)(void *self, const char *job_id, int64_t seq, const struct jobstore_charge *charge);
  int (*unreserve)(void *self, const char *job_id, int64_t seq, const struct jobstore_charge *charge);
};

/* The status a job shows (jobstore_job's), from its counts and whether it was cancelled. */
const char *jobstore_job_status(const struct jobstore_job *j, int cancelled);

/*
 * A kept answer back: z (zlen bytes, a zlib stream) inflated to exactly len bytes in *out (malloc'd, the caller frees).
 * Returns 0, -EBADMSG (it does not inflate to len, or len is past the transcript limit) or -ENOMEM.
 */
int jobstore_inflate(const void *z, size_t zlen, int64_t len, char **out);

/* The Redis backend (jobstore_redis.c): its table, and its opening with the address and the time an ended job is kept.
 */
extern const struct jobstore_ops jobstore_redis_ops;
struct redis_addr;
int jobstore_redis_open(const struct redis_addr *addr, int64_t ttl_ms, int timeout_ms, void **self, char *err,
                        size_t errlen);

#endif
