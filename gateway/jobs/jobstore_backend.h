/*
 * What a backend of the job store is given and fills, as a speech engine sees fetcher/speech/engine.h and never the
 * facade: the types of jobs, items, webhook deliveries and pages, the table of operations, the table of backends,
 * and the helpers every backend shares (jobstore_backend.c). The facade (jobstore.c, whose header includes this one)
 * opens a row of the table; a backend includes only this header, so no backend and the facade include each other.
 */
#ifndef VTS_JOBSTORE_BACKEND_H
#define VTS_JOBSTORE_BACKEND_H

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
  /*
   * Why the job stopped short, "" when it did not: its list stopped (JOBSTORE_STOP_MAX_PAGES, _NO_NEW_IDS,
   * _PAGE_FAILED) or its key was revoked (JOBSTORE_STOP_KEY_REVOKED: its queued items were cancelled).
   */
  char stop_reason[24];
};

#define JOBSTORE_STOP_MAX_PAGES "max_pages"     /* its list's pages read reached VTS_JOB_MAX_PAGES */
#define JOBSTORE_STOP_NO_NEW_IDS "no_new_ids"   /* a page of its list added no id the job did not hold */
#define JOBSTORE_STOP_PAGE_FAILED "page_failed" /* a page of its list could not be read */
#define JOBSTORE_STOP_KEY_REVOKED "key_revoked" /* its key left the key file or was made inactive */

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
 * The keys a take passes over (the runner's keys holding their share, or revoked): their work stays queued, in its
 * order, for a later take. keys holds n key names.
 */
struct jobstore_skip {
  const char *const *keys;
  size_t n;
};

/* A unit of the month counted with an answer, in the same atomic step (a backend that can: jobstore_charges). */
struct jobstore_charge {
  char counter[128];                      /* the key's month counter, as the synchronous endpoint counts it */
  int64_t quota;                          /* the key's units of the month */
  int64_t ttl_s;                          /* the counter's lifetime when this unit starts it */
  const char *quota_code, *quota_message; /* what the item fails with when the month is used up */
};

/*
 * Webhooks. A job with a webhook_url owes one delivery once it has ended (no item queued or running, no page of its
 * list to read). Its state lives beside the job: the message (made once, so that every try sends the same body), the
 * tries made, when the next one is due, and whether it was delivered or given up. A job with a delivery pending, or
 * owed and not yet recorded, is not expired; the delivery is deleted with its job.
 */
enum jobstore_hook_state { HOOK_PENDING, HOOK_DELIVERED, HOOK_GIVEN_UP };

/* A try of a delivery handed to a taker. */
struct jobstore_hook {
  char job_id[JOBSTORE_ID_LEN + 1];
  char key_id[JOBSTORE_KEY_ID_MAX + 1]; /* its job's key */
  char url[VTS_WEBHOOK_URL_MAX_BYTES + 1];
  char secret[64];
  int attempt;     /* this try's number, from 1 */
  int64_t made_ms; /* when the delivery was recorded: no try is due VTS_WEBHOOK_RETRY_WINDOW_MS after */
  size_t body_len;
  char body[VTS_WEBHOOK_MAX_PAYLOAD_BYTES + 1];
};

/*
 * The pages of a playlist's or channel's list after the first, read in the background: a job has at most one
 * continuation kept (the next page to read), taken by one reader at a time with a lease, like an item.
 */
struct jobstore_page {
  char job_id[JOBSTORE_ID_LEN + 1];
  char token[VTS_MAX_BROWSE_TOKEN_BYTES + 1]; /* the continuation to read */
  char key_id[JOBSTORE_KEY_ID_MAX + 1];
  int tries;          /* earlier takes of this page */
  int64_t read;       /* pages of its list read so far (the first, read when the job was made, is 1) */
  int64_t created_ms; /* when its job was made */
};

/*
 * What a backend fills: a versioned table of operations, one per backend, chosen by jobstore_open_config. Each
 * operation has the meaning and the return values of the jobstore_* function of its name; self is the backend's own
 * state. An operation a backend has no use for is NULL (the facade answers for it).
 */
#define JOBSTORE_OPS_VERSION 2

struct jobstore_ops {
  int version; /* JOBSTORE_OPS_VERSION */
  const char *name;
  int charges; /* done counts a charge with the answer (jobstore_charges) */
  /* Whether the configuration asks for this backend: the facade opens the first row that says so. */
  int (*selected)(const struct vts_config *cfg);
  /* Master, before fork: what the backend prepares once for every process (NULL: nothing). Returns 0 or -errno. */
  int (*init)(const struct vts_config *cfg, char *err, size_t errlen);
  /*
   * Opens the backend's state for cfg into *self; timeout_ms bounds each connect and reply of a remote store. Returns
   * 0, or a negative errno with err saying why.
   */
  int (*open)(const struct vts_config *cfg, int timeout_ms, void **self, char *err, size_t errlen);
  void (*close)(void *self);
  int (*create)(void *self, const struct jobstore_spec *spec, const char (*video_ids)[VTS_VIDEO_ID_LEN + 1], size_t n,
                int64_t now_ms, const char *job_id);
  int (*get)(void *self, const char *key_id, const char *job_id, struct jobstore_job *out);
  int (*items)(void *self, const char *key_id, const char *job_id, int64_t after, size_t limit, jobstore_item_fn fn,
               void *ctx, int64_t *next);
  int (*cancel)(void *self, const char *key_id, const char *job_id, int64_t now_ms, size_t *n);
  int (*open_jobs)(void *self, const char *key_id, size_t *n);
  int (*stored_items)(void *self, const char *key_id, size_t *n);
  int (*take)(void *self, int64_t now_ms, int64_t lease_ms, const struct jobstore_skip *skip,
              struct jobstore_task *out);
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
  int (*hook_take)(void *self, int64_t now_ms, int64_t lease_ms, const struct jobstore_skip *skip,
                   struct jobstore_hook *out);
  int (*hook_end)(void *self, const char *job_id, enum jobstore_hook_state state, int64_t next_ms, int http_status);
  int (*take_page)(void *self, int64_t now_ms, int64_t lease_ms, const struct jobstore_skip *skip,
                   struct jobstore_page *out);
  int (*page_done)(void *self, const char *job_id, const char (*ids)[VTS_VIDEO_ID_LEN + 1], size_t n, const char *next,
                   int64_t read, int64_t max_pages, const char *why, int64_t now_ms, size_t *added);
  int (*stop_key)(void *self, const char *key_id, const char *why, int64_t now_ms);
  int (*page_retry)(void *self, const char *job_id, int64_t not_before_ms, int64_t now_ms);
  /* Held or given back (jobstore_reserve, jobstore_unreserve); NULL in a backend that holds no month (-ENOTSUP). */
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

/* A taker's keepalive period, and how long a taker stays silent before its items go to another (jobstore_keepalive). */
#define JOBSTORE_KEEPALIVE_MS 1000
#define JOBSTORE_CLAIM_IDLE_MS 5000
/* The most items one call of jobstore_expire deletes, in one transaction (a backend that expires jobs itself). */
#define JOBSTORE_EXPIRE_BATCH 500

/*
 * The backends, in the order the facade asks whether the configuration selects them, X(name): jobstore_<name>_ops in
 * jobstore_<name>.c, whose .name is "<name>". Redis with VTS_REDIS_URL; SQLite otherwise (it is always selected).
 */
#define JOBSTORE_BACKENDS(X) \
  X(redis)                   \
  X(sqlite)

#define JOBSTORE_BACKEND_DECLARE(name) extern const struct jobstore_ops jobstore_##name##_ops;
JOBSTORE_BACKENDS(JOBSTORE_BACKEND_DECLARE)
#undef JOBSTORE_BACKEND_DECLARE

#endif
