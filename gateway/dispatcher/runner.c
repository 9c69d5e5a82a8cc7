/*
 * The batch jobs' runner (see runner.h). Over 800 lines: each store call it makes is a pair, its work on the store's
 * thread and its end on the loop (storeq), beside the step that needs it; the pairs share the runner's one state.
 */
#include "gateway/dispatcher/runner.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "gateway/dispatcher/fair.h"
#include "gateway/dispatcher/gone.h"
#include "gateway/jobs/storeq.h"
#include "gateway/keys/keys.h"
#include "gateway/limits/ratelimit.h"

_Static_assert(JOBSTORE_KEY_ID_MAX == KEYS_MAX_NAME, "the store must give back every key name whole");

/* How often ended jobs past VTS_JOB_TTL_S are deleted. */
#define RUNNER_EXPIRE_MS 60000
/* A taken item's lease past its deadline: a taker alive that long has answered it. */
#define RUNNER_LEASE_SLACK_MS 30000

/*
 * The synchronous endpoint's codes and messages, as the rows of gateway/http/errors.h spell them (the dispatcher does
 * not include the worker's modules; tests/unit/test_runner.c holds them equal).
 */
#define RUNNER_NOT_AVAILABLE "No accessible transcript was found for this video."
#define RUNNER_UPSTREAM_FAILED "The video platform did not return the transcript."
#define RUNNER_FETCH_FAILED "The transcript could not be fetched."
#define RUNNER_QUOTA_EXCEEDED "The monthly quota of this API key is used up."
#define RUNNER_KEY_REVOKED "The API key of this job was revoked."
#define RUNNER_SERVICE_UNAVAILABLE "The service is not accepting requests now."

/*
 * A page of a playlist's or channel's list failed other than by a ration: read again this long after (times the
 * tries), at most RUNNER_PAGE_TRIES times; then the list ends with what the job holds.
 */
#define RUNNER_PAGE_RETRY_MS 5000
#define RUNNER_PAGE_TRIES 3

/* Where an item's unit of the month is held, from before its platform request until it ends (hold_unit). */
enum unit_kind { UNIT_NONE, UNIT_TABLE, UNIT_STORE };

struct runner_item {
  struct core_waiter waiter;       /* first: the core's handle */
  struct runner_item *prev, *next; /* runner.items: freed with the runner when the core never answered */
  struct jobstore_task task;
  int is_page; /* a page of a job's list (page_* below), not an item (task) */
  char page_job[JOBSTORE_ID_LEN + 1];
  int page_tries;
  int64_t page_created_ms;
  int64_t page_read;                 /* the page's number in its list */
  char key[JOBSTORE_KEY_ID_MAX + 1]; /* whose share it counts in */
  uint32_t weight;                   /* that key's weight in the key file when the work was taken */
  enum unit_kind unit;
  struct rl_decision table_unit; /* UNIT_TABLE: the unit of the limiter's shared table (its key's digest, its month) */
  struct jobstore_charge charge; /* UNIT_STORE: the store's month counter it was held in */
};

struct runner {
  const struct vts_config *cfg;
  struct ratelimit *months; /* the items' units of the month in the limiter's table; NULL without one */
  struct core *core;
  struct storeq *q;
  void (*kick)(void *arg); /* asks the dispatcher for a runner_pump soon: a store call answered */
  void *kick_arg;
  struct keystore *keys;
  char (*prev)[KEYS_MAX_NAME + 1]; /* the active keys of the file read before */
  size_t nprev;
  struct timespec keys_mtime;
  uint64_t keys_checked_ms;
  uint64_t in_flight;
  struct runner_item *items;
  struct fair *fair;
  /* Keys revoked or removed from the key file since the start: their work is passed over, their jobs stopped. */
  struct gone *gone;
  int stop_due; /* a gone key may be GONE_RUNNING: stop_gone looks (else it does not walk them at every pump) */
  const char *scratch[RUNNER_SKIP_MAX]; /* runner_skip's names, until runner_skipped_fill copies them */
  uint64_t next_take_ms;
  uint64_t poll_ms; /* how long after a take that finds nothing the next is made: RUNNER_POLL_MS, doubling when idle */
  uint64_t next_expire_ms;
  uint64_t next_keepalive_ms;
  /* Store calls in flight, each kind one at a time (a store that does not answer holds only that many). */
  int taking, expiring, keeping;
  int depth_full; /* a take waited for the store's queue to shrink below RUNNER_STORE_DEPTH_MAX */
  int page_first; /* the next take looks for a list's page before an item (every other take: take_work) */
  int closing;    /* runner_free: what the store answers now starts nothing */
};

/*
 * A write to the store for a piece of work that ended (or could not start), made on the store's thread: what the item
 * or page ends with, and the unit of the month it gives back. Owns its copies; freed when its done has run.
 */
enum write_op { W_DONE, W_FAIL, W_RETRY, W_UNRESERVE, W_PAGE_END, W_PAGE_RETRY };
struct store_write {
  struct runner *r;
  enum write_op op;
  char job_id[JOBSTORE_ID_LEN + 1];
  int64_t seq;
  int64_t now_ms;
  int64_t not_before_ms; /* W_RETRY, W_PAGE_RETRY */
  /*
   * The unit the item held: UNIT_STORE is given back on the store's thread, before the op (W_FAIL, W_RETRY,
   * W_UNRESERVE) or when W_DONE finds the item no longer running; UNIT_TABLE, in that last case, on the loop.
   */
  enum unit_kind unit;
  struct rl_decision table_unit;
  struct jobstore_charge charge;
  const char *code, *message; /* W_FAIL: static strings */
  char *body;                 /* W_DONE: the answer (a copy) */
  size_t len;
  char (*ids)[VTS_VIDEO_ID_LEN + 1]; /* W_PAGE_END: the page's ids, its next continuation, its number and why */
  size_t n;
  char *next;
  int64_t read;
  const char *why;
  int rv, unreserve_rv;
  size_t added;
};

/*
 * A take of the next piece of work (take_next), and the reservation of its unit when the store holds the month's
 * counters: the names passed over are copied, since the store's thread reads them while the loop changes its own.
 */
struct take_call {
  struct runner *r;
  int ahead;      /* this pass also passes over the keys ahead of the least served one */
  int page_first; /* a page is looked for before an item */
  size_t hard;
  struct runner_skipped skipped; /* the keys this pass passes over (take_pass) */
  int64_t wall, lease;
  int rv, page_rv, page;
  struct jobstore_task task;
  struct jobstore_page pg;
  struct runner_item *it; /* the reservation: the item whose unit is asked for */
  uint32_t weight;        /* the taken work's key's weight (runner_key_weight) */
};

uint64_t runner_room(uint64_t connected, uint64_t idle, uint64_t queued, uint64_t in_flight, int64_t share_pct) {
  if (share_pct <= 0 || connected == 0 || queued >= idle) return 0;
  uint64_t cap = connected * (uint64_t)share_pct / 100;
  if (cap == 0) cap = 1;
  if (in_flight >= cap) return 0;
  uint64_t room = cap - in_flight;
  uint64_t free_now = idle - queued;
  return room < free_now ? room : free_now;
}

/*
 * A retry wait ms from now_ms when the wait is known (>= 0) and the item, made at created_ms, is still under
 * max_age_ms when it ends; else the failure of code and message.
 */
static void retry_or_fail(struct runner_outcome *out, int64_t wait, int64_t now_ms, int64_t created_ms,
                          int64_t max_age_ms, const char *code, const char *message) {
  if (wait >= 0 && now_ms + wait - created_ms <= max_age_ms) {
    out->verdict = RUNNER_RETRY;
    out->not_before_ms = now_ms + wait;
    return;
  }
  out->code = code;
  out->message = message;
}

void runner_judge(const struct proto_result *res, int64_t now_ms, int64_t created_ms, int64_t max_age_ms,
                  struct runner_outcome *out) {
  memset(out, 0, sizeof(*out));
  out->verdict = RUNNER_FAIL;
  switch (res != NULL ? proto_outcome_status(res->outcome) : 500) {
    case 200:
      out->verdict = RUNNER_DONE;
      return;
    case 404:
      out->code = "transcript_not_available";
      out->message = RUNNER_NOT_AVAILABLE;
      return;
    case 502: {
      /* A ration: the 502's Retry-After, else (a budget or a ration that named no time) a default wait. */
      int64_t wait = res->retry_after_s > 0 ? (int64_t)res->retry_after_s * 1000
                     : res->reason == PROTO_REASON_BUDGET || res->reason == PROTO_REASON_RATIONED
                         ? RUNNER_RATION_RETRY_MS
                         : -1;
      retry_or_fail(out, wait, now_ms, created_ms, max_age_ms, "upstream_transcript_failed", RUNNER_UPSTREAM_FAILED);
      return;
    }
    case 503: {
      /* Shed: the item yielded to synchronous requests, back in the queue for when the dispatcher expects room. */
      int64_t wait = (int64_t)(res->retry_after_s > 0 ? res->retry_after_s : 1) * 1000;
      retry_or_fail(out, wait, now_ms, created_ms, max_age_ms, "service_unavailable", RUNNER_SERVICE_UNAVAILABLE);
      return;
    }
    default:
      out->code = "transcript_fetch_failed";
      out->message = RUNNER_FETCH_FAILED;
      return;
  }
}

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A gone key active in the file again (arg: the runner): its jobs run again. */
static int key_back(const char *name, void *arg) {
  const struct runner *r = arg;
  const struct key_entry *k = keystore_named(r->keys, name);
  if (k == NULL || !k->active) return 0;
  log_msg(LOG_INFO, "batch jobs of a key run again: the key is active", "key_id", name, NULL);
  return 1;
}

/*
 * The key file changed: a key that was active and is now inactive or absent is gone, and a gone key that is active
 * again is back. A gone key's jobs are stopped in the store (their queued items cancelled, their lists and webhooks
 * ended, jobstore_stop_key), once; until the store has done it, it is asked at every look. Its work is passed over
 * by every take from now on, and its items running end key_revoked (runner_answer).
 */
static void keys_gone(struct runner *r, uint64_t now) {
  (void)now;
  gone_drop_if(r->gone, key_back, r);
  /* Gone: inactive in the file, or in the file before and absent now (the previous file's active keys). */
  size_t n = r->keys != NULL ? keystore_count(r->keys) : 0;
  for (size_t i = 0; i < n + r->nprev; i++) {
    const char *name = NULL;
    if (i < n) {
      const struct key_entry *k = keystore_entry(r->keys, i);
      if (!k->active) name = k->name;
    } else if (keystore_named(r->keys, r->prev[i - n]) == NULL) {
      name = r->prev[i - n];
    }
    if (name != NULL && gone_add(r->gone, name) == -ENOMEM) return;
    if (name != NULL) r->stop_due = 1;
  }
  /* The active keys of this file, to know the ones a later file drops. */
  free(r->prev);
  r->prev = NULL;
  r->nprev = 0;
  if (n > 0 && (r->prev = calloc(n, sizeof(*r->prev))) != NULL) {
    for (size_t i = 0; i < n; i++) {
      const struct key_entry *k = keystore_entry(r->keys, i);
      if (k->active) memcpy(r->prev[r->nprev++], k->name, strlen(k->name) + 1);
    }
  }
}

/* Asks the dispatcher for a pump soon, unless the runner is closing (the core is gone then). */
static void kick(struct runner *r) {
  if (!r->closing) r->kick(r->kick_arg);
}

static struct store_write *write_new(struct runner *r, enum write_op op, const char *job_id, int64_t seq) {
  struct store_write *w = calloc(1, sizeof(*w));
  if (w == NULL) return NULL;
  w->r = r;
  w->op = op;
  util_copy_str(w->job_id, sizeof(w->job_id), job_id);
  w->seq = seq;
  w->now_ms = wall_ms();
  return w;
}

static void write_free(struct store_write *w) {
  free(w->body);
  free(w->ids);
  free(w->next);
  free(w);
}

/* runs on the store's thread */
static void write_work(struct jobstore *js, void *arg) {
  struct store_write *w = arg;
  if (w->unit == UNIT_STORE && w->op != W_DONE) w->unreserve_rv = jobstore_unreserve(js, w->job_id, w->seq, &w->charge);
  switch (w->op) {
    case W_DONE:
      w->rv = jobstore_done(js, w->job_id, w->seq, w->body, w->len, w->now_ms);
      /* Not running any more (cancelled meanwhile, or its lease lost and another taker holds its own unit). */
      if (w->rv == -ENOENT && w->unit == UNIT_STORE)
        w->unreserve_rv = jobstore_unreserve(js, w->job_id, w->seq, &w->charge);
      break;
    case W_FAIL:
      w->rv = jobstore_fail(js, w->job_id, w->seq, w->code, w->message, w->now_ms);
      break;
    case W_RETRY:
      w->rv = jobstore_retry(js, w->job_id, w->seq, w->not_before_ms, w->now_ms);
      break;
    case W_UNRESERVE:
      break;
    case W_PAGE_END:
      w->rv = jobstore_page_end(js, w->job_id, (const char(*)[VTS_VIDEO_ID_LEN + 1]) w->ids, w->n,
                                w->next != NULL ? w->next : "", w->read, w->r->cfg->job_max_pages, w->why, w->now_ms,
                                &w->added);
      break;
    case W_PAGE_RETRY:
      w->rv = jobstore_page_retry(js, w->job_id, w->not_before_ms, w->now_ms);
      break;
  }
}

static void write_done(void *arg) {
  struct store_write *w = arg;
  struct runner *r = w->r;
  if (w->unreserve_rv != 0)
    log_msg(LOG_WARN, "a batch item's unit of the month not given back", "job_id", w->job_id, NULL);
  /* A transcript delivered to no one: its unit of the shared table goes back (the store's went back on its thread). */
  if (w->op == W_DONE && w->rv == -ENOENT && w->unit == UNIT_TABLE) ratelimit_refund(r->months, &w->table_unit);
  char num[24];
  if (w->op == W_PAGE_END || w->op == W_PAGE_RETRY) {
    if (w->op == W_PAGE_END && w->rv == 0 && w->why == NULL && w->next != NULL) {
      snprintf(num, sizeof(num), "%zu", w->added);
      log_msg(LOG_INFO, "batch page read", "job_id", w->job_id, "=items", num, "next_page", w->next[0] ? "yes" : "no",
              NULL);
    }
    if (w->rv != 0 && w->rv != -ENOENT) log_msg(LOG_ERROR, "batch page not recorded", "job_id", w->job_id, NULL);
  } else if (w->rv != 0 && w->rv != -ENOENT) {
    snprintf(num, sizeof(num), "%lld", (long long)w->seq);
    log_msg(LOG_ERROR, "batch item not recorded", "job_id", w->job_id, "=seq", num, NULL);
  }
  write_free(w);
  if (r->depth_full) {
    r->depth_full = 0;
    kick(r);
  }
}

/* Hands w to the store's thread (takes ownership of w); NULL is a write that could not be made (no memory). */
static void write_submit(struct runner *r, struct store_write *w, const char *job_id) {
  if (w != NULL && storeq_call(r->q, write_work, write_done, w) == 0) return;
  log_msg(LOG_ERROR, "batch item not recorded: the store's queue refused it", "job_id", job_id, NULL);
  if (w != NULL) write_free(w);
}

/*
 * Gives back the unit an item held into w, the write that ends it without a transcript (a failure, a retry, a
 * cancel meanwhile): the shared table's now, the store's on its thread before w's op.
 */
static void give_back_unit(struct runner *r, struct runner_item *it, struct store_write *w) {
  if (it->unit == UNIT_TABLE) {
    ratelimit_refund(r->months, &it->table_unit);
  } else if (it->unit == UNIT_STORE && w != NULL) {
    w->unit = UNIT_STORE;
    w->charge = it->charge;
  }
  it->unit = UNIT_NONE;
}

/* Ends a taken item without a platform request: failed with code, or back in the queue from not_before_ms. */
static void item_write(struct runner *r, struct runner_item *it, const struct jobstore_task *t, enum write_op op,
                       const char *code, const char *message, int64_t not_before_ms) {
  struct store_write *w = write_new(r, op, t->job_id, t->seq);
  if (it != NULL) give_back_unit(r, it, w);
  if (w != NULL) {
    w->code = code;
    w->message = message;
    w->not_before_ms = not_before_ms;
  }
  write_submit(r, w, t->job_id);
}

/* Ends a taken page: its ids (owned by the write when given), next continuation, or a stop with why. */
static void page_write(struct runner *r, const char *job_id, enum write_op op, int64_t read, const char *why,
                       int64_t not_before_ms) {
  struct store_write *w = write_new(r, op, job_id, 0);
  if (w != NULL) {
    w->read = read;
    w->why = why;
    w->not_before_ms = not_before_ms;
  }
  write_submit(r, w, job_id);
}

/* One gone key's jobs stopped by the store's thread. */
struct stop_call {
  struct runner *r;
  char key[KEYS_MAX_NAME + 1];
  int64_t now_ms;
  int n;
};

/* runs on the store's thread */
static void stop_work(struct jobstore *js, void *arg) {
  struct stop_call *c = arg;
  c->n = jobstore_stop_key(js, c->key, JOBSTORE_STOP_KEY_REVOKED, c->now_ms);
}

static void stop_done(void *arg) {
  struct stop_call *c = arg;
  struct gone_key *k = gone_find(c->r->gone, c->key);
  if (c->n < 0) {
    log_msg(LOG_WARN, "jobs of a revoked key not stopped yet: tried again", "key_id", c->key, NULL);
    if (k != NULL) k->state = GONE_RUNNING;
    c->r->stop_due = 1;
  } else {
    if (k != NULL) k->state = GONE_STOPPED;
    char num[16];
    snprintf(num, sizeof(num), "%d", c->n);
    log_msg(LOG_INFO, "batch jobs of a revoked key stopped", "key_id", c->key, "=jobs", num, NULL);
  }
  free(c);
}

/* Stops the jobs of the gone keys the store has not stopped yet (asked again at the next look when it failed). */
static void stop_gone(struct runner *r) {
  if (!r->stop_due) return;
  r->stop_due = 0;
  for (size_t i = 0; i < gone_count(r->gone); i++) {
    struct gone_key *k = gone_at(r->gone, i);
    if (k->state != GONE_RUNNING) continue;
    struct stop_call *c = calloc(1, sizeof(*c));
    if (c != NULL) {
      c->r = r;
      util_copy_str(c->key, sizeof(c->key), k->name);
      c->now_ms = wall_ms();
    }
    if (c == NULL || storeq_call(r->q, stop_work, stop_done, c) != 0) {
      free(c);
      r->stop_due = 1;
      return;
    }
    k->state = GONE_STOPPING;
  }
}

/* The key file again when it changed: an item is charged to its key's month as the file says now. */
static void keys_refresh(struct runner *r, uint64_t now) {
  if (r->keys != NULL && now < r->keys_checked_ms + RUNNER_KEYS_POLL_MS) return;
  r->keys_checked_ms = now;
  struct stat st;
  if (stat(r->cfg->keys_file, &st) != 0) return;
  if (r->keys != NULL && st.st_mtim.tv_sec == r->keys_mtime.tv_sec && st.st_mtim.tv_nsec == r->keys_mtime.tv_nsec)
    return;
  char err[256] = "";
  struct keystore *ks = keystore_load(r->cfg->keys_file, err, sizeof(err));
  if (ks == NULL) {
    log_msg(LOG_WARN, "runner keeps its keys: key file not loaded", "error", err, NULL);
    return;
  }
  keystore_free(r->keys);
  r->keys = ks;
  r->keys_mtime = st.st_mtim;
  keys_gone(r, now);
}

struct recover_call {
  struct runner *r;
  int n;
};

/* runs on the store's thread */
static void recover_work(struct jobstore *js, void *arg) {
  struct recover_call *c = arg;
  c->n = jobstore_recover(js, INT64_MAX);
}

static void recover_done(void *arg) {
  struct recover_call *c = arg;
  if (c->n > 0) {
    char num[16];
    snprintf(num, sizeof(num), "%d", c->n);
    log_msg(LOG_INFO, "batch items resumed", "=items", num, NULL);
  }
  free(c);
}

/* Allocated and filled in as the gateway's other objects are: alike in shape, each its own members. */
struct runner *runner_new(const struct vts_config *cfg, const struct ratelimit_shared *limits, struct core *core,
                          uv_loop_t *loop, void (*kick_fn)(void *), void *kick_arg) {
  struct runner *r = calloc(1, sizeof(*r));
  if (r == NULL) return NULL;
  r->cfg = cfg;
  r->core = core;
  r->kick = kick_fn;
  r->kick_arg = kick_arg;
  r->poll_ms = RUNNER_POLL_MS;
  if (limits != NULL && (r->months = ratelimit_new_months(cfg, limits)) == NULL) {
    free(r);
    return NULL;
  }
  /* The batch share of the egress budget: the rest of it stays for synchronous requests, as the fetchers' slots do. */
  uint64_t share = cfg->jobs_fetcher_share > 0 ? (uint64_t)cfg->jobs_fetcher_share : 0;
  struct fair_limits lim = {.per_hour = (uint64_t)cfg->egress_rate * runner_egresses(cfg) * share / 100,
                            .burst = (uint64_t)cfg->egress_burst * runner_egresses(cfg) * share / 100};
  if (lim.per_hour > 0 && lim.burst == 0) lim.burst = 1;
  r->fair = fair_new(&lim);
  r->gone = gone_new();
  if (r->fair == NULL || r->gone == NULL) {
    gone_free(r->gone);
    fair_free(r->fair);
    ratelimit_free(r->months);
    free(r);
    return NULL;
  }
  char err[256] = "";
  if (storeq_open(loop, cfg, VTS_JOBS_REDIS_TIMEOUT_MS, &r->q, err, sizeof(err)) != 0) {
    log_msg(LOG_ERROR, "batch jobs not run: job store unavailable", "error", err, NULL);
    gone_free(r->gone);
    fair_free(r->fair);
    ratelimit_free(r->months);
    free(r);
    return NULL;
  }
  const struct jobstore *js = storeq_store(r->q);
  log_msg(LOG_INFO, "batch jobs runner ready", "store", jobstore_backend(js), "taker", jobstore_taker(js), NULL);
  /*
   * SQLite: one gateway owns the directory, so what was running when it stopped (or was killed) runs again now: the
   * first call of the queue, before any take. Redis: nothing to do here; the entries a dead runner held are claimed by
   * the next takes, here or elsewhere.
   */
  struct recover_call *c = calloc(1, sizeof(*c));
  if (c != NULL) {
    c->r = r;
    if (storeq_call(r->q, recover_work, recover_done, c) != 0) free(c);
  }
  return r;
}

/*
 * Holds one unit of the month of the item's key before the platform is asked, as the synchronous endpoint reserves
 * one before its request: in the store's month counter when the store holds them (Redis, the synchronous endpoint's
 * own counter: HOLD_ASK_STORE, the charge set for jobstore_reserve), else in the limiter's shared table. Returns
 * HOLD_HELD, HOLD_USED_UP (the month is used up, or the key left the key file: nothing can be charged to it),
 * HOLD_ASK_STORE, or a negative errno (nothing known: the item is tried again later).
 */
enum { HOLD_USED_UP = 0, HOLD_HELD = 1, HOLD_ASK_STORE = 2 };
static int hold_unit(struct runner *r, struct runner_item *it, int64_t now_ms) {
  const struct key_entry *key = keystore_named(r->keys, it->task.key_id);
  if (key == NULL) return HOLD_USED_UP;
  int rv = 0;
  if (jobstore_charges(storeq_store(r->q))) {
    struct jobstore_charge *c = &it->charge;
    rv = ratelimit_month_counter(r->cfg, key, now_ms / 1000, c->counter, sizeof(c->counter), &c->quota, &c->ttl_s);
    return rv == 0 ? HOLD_ASK_STORE : rv;
  }
  enum rl_charge charged = RL_CHARGE_QUOTA_USED_UP;
  rv = ratelimit_charge_month(r->months, key, &it->table_unit, &charged);
  if (rv < 0) return rv;
  if (charged == RL_CHARGE_QUOTA_USED_UP) return HOLD_USED_UP;
  it->unit = UNIT_TABLE;
  return HOLD_HELD;
}

void runner_free(struct runner *r) {
  if (r == NULL) return;
  r->closing = 1;
  /*
   * Items the core never answered (the dispatcher stopping): still running in the store, put back at the next start;
   * their units go back first (the next start holds them again). Closing the queue runs these writes and every call
   * still queued, then their dones, which start nothing now.
   */
  while (r->items != NULL) {
    struct runner_item *it = r->items;
    r->items = it->next;
    struct store_write *w = it->unit == UNIT_STORE ? write_new(r, W_UNRESERVE, it->task.job_id, it->task.seq) : NULL;
    give_back_unit(r, it, w);
    if (w != NULL) write_submit(r, w, it->task.job_id);
    free(it);
  }
  storeq_close(r->q);
  ratelimit_free(r->months);
  keystore_free(r->keys);
  fair_free(r->fair);
  gone_free(r->gone);
  free(r->prev);
  free(r);
}

struct storeq *runner_storeq(struct runner *r) {
  return r->q;
}

void runner_kick(struct runner *r) { kick(r); }

uint64_t runner_idle_wait(uint64_t ms) { return ms * 2 < RUNNER_IDLE_POLL_MS ? ms * 2 : RUNNER_IDLE_POLL_MS; }

void runner_wake(struct runner *r) {
  r->poll_ms = RUNNER_POLL_MS;
  r->next_take_ms = 0;
  kick(r);
}

int runner_closing(const struct runner *r) { return r->closing; }

void runner_stats(const struct runner *r, struct dispatcher_stats *st) {
  if (r != NULL) st->store_calls = storeq_depth(r->q);
}

struct fair *runner_fair(struct runner *r) {
  return r->fair;
}

uint64_t runner_egresses(const struct vts_config *cfg) {
  uint64_t n = 1;
  for (const char *p = cfg->upstream_proxy; *p != '\0'; p++) n += *p == ',';
  return cfg->upstream_proxy[0] != '\0' ? n + 1 : 1;
}

uint64_t runner_cap(struct runner *r) {
  struct dispatcher_stats st;
  core_stats(r->core, &st);
  if (r->cfg->jobs_fetcher_share <= 0 || st.fetchers_connected == 0) return 0;
  uint64_t cap = st.fetchers_connected * (uint64_t)r->cfg->jobs_fetcher_share / 100;
  return cap > 0 ? cap : 1;
}

size_t runner_skip(struct runner *r, uint64_t now, int ahead, const char **out, size_t max) {
  /* The keys at their share (or ahead) first: one left out could take more than its share (RUNNER_SKIP_MAX). */
  size_t n = fair_skip(r->fair, now, runner_cap(r), ahead, out, max);
  size_t end = max - n > RUNNER_SKIP_GONE_MAX ? n + RUNNER_SKIP_GONE_MAX : max;
  for (size_t i = 0; i < gone_count(r->gone) && n < end; i++) out[n++] = gone_at(r->gone, i)->name;
  return n;
}

int runner_skipped_fill(struct runner *r, uint64_t now, int ahead, const char *const *first, size_t nfirst,
                        struct runner_skipped *s) {
  size_t n = runner_skip(r, now, ahead, r->scratch, RUNNER_SKIP_MAX);
  runner_skipped_free(s);
  s->names = malloc((nfirst + n + 1) * sizeof(*s->names));
  s->keys = malloc((nfirst + n + 1) * sizeof(*s->keys));
  if (s->names == NULL || s->keys == NULL) {
    runner_skipped_free(s);
    return -ENOMEM;
  }
  for (size_t i = 0; i < nfirst + n; i++) {
    util_copy_str(s->names[i], sizeof(s->names[i]), i < nfirst ? first[i] : r->scratch[i - nfirst]);
    s->keys[i] = s->names[i];
  }
  s->n = nfirst + n;
  return 0;
}

void runner_skipped_free(struct runner_skipped *s) {
  free(s->names);
  free(s->keys);
  *s = (struct runner_skipped){0};
}

int runner_key_gone(const struct runner *r, const char *key) {
  const struct key_entry *k = keystore_named(r->keys, key);
  return k == NULL || !k->active;
}

int runner_gone_found(struct runner *r, const char *key) {
  if (r->keys == NULL || !runner_key_gone(r, key) || gone_add(r->gone, key) != 0) return 0;
  r->stop_due = 1;
  return 1;
}

uint32_t runner_key_weight(const struct runner *r, const char *key) {
  const struct key_entry *k = keystore_named(r->keys, key);
  return k != NULL && k->weight > 1 ? (uint32_t)k->weight : 1;
}

static void link_item(struct runner *r, struct runner_item *it) {
  it->waiter.internal = 1;
  it->next = r->items;
  if (r->items != NULL) r->items->prev = it;
  r->items = it;
}

/*
 * Starts one taken page of a job's list: a browse job of the core (its continuation), answered through runner_answer
 * like an item, within the same share of the fetchers.
 */
static void start_page(struct runner *r, uint64_t now, const struct jobstore_page *pg, uint32_t weight) {
  struct runner_item *it = calloc(1, sizeof(*it));
  if (it == NULL) {
    page_write(r, pg->job_id, W_PAGE_RETRY, 0, NULL, wall_ms() + RUNNER_POLL_MS);
    return;
  }
  it->is_page = 1;
  memcpy(it->page_job, pg->job_id, sizeof(it->page_job));
  it->page_tries = pg->tries;
  it->page_created_ms = pg->created_ms;
  it->page_read = pg->read + 1; /* this page's number: the pages read so far and itself */
  memcpy(it->key, pg->key_id, sizeof(it->key));
  fair_started(r->fair, now, it->key, weight);
  log_msg(LOG_DEBUG, "batch work started", "key_id", it->key, "kind", "page", "job_id", it->page_job, NULL);
  link_item(r, it);
  struct proto_job job = {.kind = PROTO_KIND_BROWSE,
                          .deadline_ms = (uint32_t)r->cfg->job_timeout_ms,
                          .browse_what = PROTO_BROWSE_CONTINUATION,
                          .browse = pg->token,
                          .browse_len = (uint32_t)strlen(pg->token)};
  snprintf(job.request_id, sizeof(job.request_id), "%s-page", pg->job_id);
  r->in_flight++;
  core_request(r->core, now, &it->waiter, &job);
}

/* An item whose unit is known (held > 0, or not): a request of the core of its own, or its end without one. */
static void start_held(struct runner *r, uint64_t now, struct runner_item *it, int held) {
  const struct jobstore_task *t = &it->task;
  if (held <= 0) {
    /* Paid before spent: with no unit the platform is never asked. */
    if (held == HOLD_USED_UP) {
      item_write(r, NULL, t, W_FAIL, "quota_exceeded", RUNNER_QUOTA_EXCEEDED, 0);
    } else {
      log_msg(LOG_WARN, "batch item not charged: tried again later", "job_id", t->job_id, NULL);
      item_write(r, NULL, t, W_RETRY, NULL, NULL, wall_ms() + RUNNER_CHARGE_RETRY_MS);
    }
    free(it);
    return;
  }
  fair_started(r->fair, now, it->key, it->weight);
  log_msg(LOG_DEBUG, "batch work started", "key_id", it->key, "kind", "item", "job_id", t->job_id, "video_id",
          t->video_id, NULL);
  link_item(r, it);
  struct proto_job job = {.kind = PROTO_KIND_CAPTIONS, .deadline_ms = (uint32_t)r->cfg->job_timeout_ms};
  memcpy(job.video_id, t->video_id, sizeof(job.video_id));
  util_copy_str(job.lang, sizeof(job.lang), t->language);
  util_copy_str(job.translate, sizeof(job.translate), t->translate);
  snprintf(job.request_id, sizeof(job.request_id), "%s-%lld", t->job_id, (long long)t->seq);
  r->in_flight++;
  core_request(r->core, now, &it->waiter, &job);
}

static void take_free(struct take_call *c) {
  runner_skipped_free(&c->skipped);
  free(c);
}

/* The take is over (an item started or not): the next one may be asked for at once. */
static void take_over(struct take_call *c) {
  struct runner *r = c->r;
  r->taking = 0;
  take_free(c);
  kick(r);
}

/* runs on the store's thread */
static void reserve_work(struct jobstore *js, void *arg) {
  struct take_call *c = arg;
  enum jobstore_reserved got = JOBSTORE_RESERVED_USED_UP;
  c->rv = jobstore_reserve(js, c->it->task.job_id, c->it->task.seq, &c->it->charge, &got);
  if (c->rv == 0) c->rv = got == JOBSTORE_RESERVED_HELD ? HOLD_HELD : HOLD_USED_UP;
}

static void reserve_done(void *arg) {
  struct take_call *c = arg;
  struct runner_item *it = c->it;
  if (c->r->closing) {
    free(it);
    take_over(c);
    return;
  }
  if (c->rv == HOLD_HELD) it->unit = UNIT_STORE;
  /* A job gone meanwhile: the item's end finds nothing to record. */
  start_held(c->r, util_now_ms(), it, c->rv == -ENOENT ? HOLD_USED_UP : c->rv);
  take_over(c);
}

/* Starts one taken item: its unit held first (maybe by the store's thread), then a request of the core. */
static void start_item(struct runner *r, uint64_t now, struct take_call *c) {
  const struct jobstore_task *t = &c->task;
  struct runner_item *it = calloc(1, sizeof(*it));
  if (it == NULL) {
    item_write(r, NULL, t, W_RETRY, NULL, NULL, wall_ms() + RUNNER_POLL_MS);
    take_over(c);
    return;
  }
  it->task = *t;
  memcpy(it->key, t->key_id, sizeof(it->key));
  it->weight = c->weight;
  int held = hold_unit(r, it, wall_ms());
  if (held == HOLD_ASK_STORE) {
    c->it = it;
    if (storeq_call(r->q, reserve_work, reserve_done, c) == 0) return;
    held = -EIO;
  }
  start_held(r, now, it, held);
  take_over(c);
}

struct keep_call {
  struct runner *r;
  int rv;
};

/* runs on the store's thread */
static void keep_work(struct jobstore *js, void *arg) {
  struct keep_call *c = arg;
  c->rv = jobstore_keepalive(js, wall_ms());
}

static void keep_done(void *arg) {
  struct keep_call *c = arg;
  c->r->keeping = 0;
  if (c->rv != 0) log_msg(LOG_WARN, "renewing batch items in hand failed", NULL);
  free(c);
}

uint64_t runner_hold(struct runner *r, uint64_t now) {
  if (now >= r->next_keepalive_ms && !r->keeping) {
    r->next_keepalive_ms = now + JOBSTORE_KEEPALIVE_MS;
    struct keep_call *c = calloc(1, sizeof(*c));
    if (c != NULL) {
      c->r = r;
      if (storeq_call(r->q, keep_work, keep_done, c) == 0)
        r->keeping = 1;
      else
        free(c);
    }
  }
  /*
   * A renewal still in flight is due again once answered, not sooner: never a time already past, which would make the
   * loop's timer fire again at once, before the loop reads the answer.
   */
  return r->next_keepalive_ms > now ? r->next_keepalive_ms : now + RUNNER_POLL_MS;
}

/* Fills c's names passed over for a pass (ahead or not) from the runner's state now. Returns 0, or -ENOMEM. */
static int take_pass(struct runner *r, uint64_t now, struct take_call *c, int ahead) {
  c->ahead = ahead;
  if (runner_skipped_fill(r, now, ahead, NULL, 0, &c->skipped) != 0) return -ENOMEM;
  c->wall = wall_ms();
  c->lease = r->cfg->job_timeout_ms + RUNNER_LEASE_SLACK_MS;
  return 0;
}

/*
 * runs on the store's thread: a page of a job's list or an item, the page first every other take. A page read early
 * joins its items to the queue before later jobs' run; but a take that always looked for pages first would hand out
 * one key's endless lists before any other key's items, and the fair shares learn of a key only from a take that
 * found its work: the other key would wait, unseen, for every page of the first key's lists.
 */
static void take_work(struct jobstore *js, void *arg) {
  struct take_call *c = arg;
  struct jobstore_skip sk = {c->skipped.keys, c->skipped.n};
  c->page_rv = -EAGAIN;
  for (int i = 0; i < 2; i++) {
    c->page = (i == 0) == (c->page_first != 0);
    int rv = c->page ? jobstore_take_page_skip(js, c->wall, c->lease, &sk, &c->pg)
                     : jobstore_take_skip(js, c->wall, c->lease, &sk, &c->task);
    if (c->page)
      c->page_rv = rv;
    else
      c->rv = rv;
    if (rv == 0) {
      c->rv = 0;
      return;
    }
  }
  c->page = 0;
}

static void take_done(void *arg);

static int take_submit(struct runner *r, struct take_call *c) { return storeq_call(r->q, take_work, take_done, c); }

/*
 * A take answered. The first pass also passed over the keys ahead of the least served one; when it found nothing, the
 * keys it did not pass over have nothing waiting (they stop sharing) and a second pass lets the others take their
 * turn. Work found starts now if the fetchers still have room for it, else goes back to the queue at once.
 */
static void take_done(void *arg) {
  struct take_call *c = arg;
  struct runner *r = c->r;
  if (r->closing) {
    take_over(c);
    return;
  }
  uint64_t now = util_now_ms();
  if (c->page_rv != 0 && c->page_rv != -EAGAIN) log_msg(LOG_WARN, "taking a batch page failed", NULL);
  if (c->rv == -EAGAIN) {
    fair_idle_but(r->fair, c->skipped.keys, c->skipped.n);
    /* The first pass passed over no key for being ahead: the second would be the same take. */
    if (c->ahead && c->skipped.n != c->hard && take_pass(r, now, c, 0) == 0 && take_submit(r, c) == 0) return;
  }
  if (c->rv != 0) {
    if (c->rv != -EAGAIN) log_msg(LOG_WARN, "taking a batch item failed", NULL);
    r->next_take_ms = now + r->poll_ms;
    r->poll_ms = runner_idle_wait(r->poll_ms);
    take_over(c);
    return;
  }
  r->poll_ms = RUNNER_POLL_MS;
  const char *key = c->page ? c->pg.key_id : c->task.key_id;
  c->weight = runner_key_weight(r, key);
  fair_seen(r->fair, now, key, c->weight);
  /*
   * Work of a key the key file does not hold as active (revoked or removed before this gateway read the file, or
   * while it was down) is not started: the key is gone from now on, and its jobs are stopped at the next look.
   */
  if (runner_gone_found(r, key)) {
    if (c->page)
      page_write(r, c->pg.job_id, W_PAGE_END, c->pg.read + 1, JOBSTORE_STOP_KEY_REVOKED, 0);
    else
      item_write(r, NULL, &c->task, W_FAIL, "key_revoked", RUNNER_KEY_REVOKED, 0);
    take_over(c);
    return;
  }
  /* The fetchers' room may have gone while the store answered: the work waits in the queue, due now. */
  struct dispatcher_stats st;
  core_stats(r->core, &st);
  if (runner_room(st.fetchers_connected, st.fetchers_idle, st.jobs_queued, fair_held_all(r->fair),
                  r->cfg->jobs_fetcher_share) == 0) {
    if (c->page)
      page_write(r, c->pg.job_id, W_PAGE_RETRY, 0, NULL, wall_ms());
    else
      item_write(r, NULL, &c->task, W_RETRY, NULL, NULL, wall_ms());
    take_over(c);
    return;
  }
  if (c->page) {
    start_page(r, now, &c->pg, c->weight);
    take_over(c);
    return;
  }
  start_item(r, now, c);
}

struct expire_call {
  struct runner *r;
  int64_t now_ms, ttl_ms;
  int n;
};

/* runs on the store's thread: one small batch (jobstore_expire), so that the calls queued behind it wait little. */
static void expire_work(struct jobstore *js, void *arg) {
  struct expire_call *c = arg;
  c->n = jobstore_expire(js, c->now_ms, c->ttl_ms);
}

static void expire_done(void *arg) {
  struct expire_call *c = arg;
  struct runner *r = c->r;
  if (c->n < 0) log_msg(LOG_WARN, "expiring batch jobs failed", NULL);
  r->expiring = 0;
  /* More left: the next batch goes behind what was queued meanwhile. */
  r->next_expire_ms = c->n > 0 ? 0 : util_now_ms() + RUNNER_EXPIRE_MS;
  if (c->n > 0) kick(r);
  free(c);
}

static void expire_some(struct runner *r, uint64_t now) {
  if (now < r->next_expire_ms || r->expiring) return;
  struct expire_call *c = calloc(1, sizeof(*c));
  if (c == NULL) return;
  c->r = r;
  c->now_ms = wall_ms();
  c->ttl_ms = r->cfg->job_ttl_s * 1000;
  if (storeq_call(r->q, expire_work, expire_done, c) != 0) {
    free(c);
    return;
  }
  r->expiring = 1;
}

uint64_t runner_pump(struct runner *r, uint64_t now) {
  uint64_t wake = runner_hold(r, now);
  expire_some(r, now);
  if (!r->expiring && r->next_expire_ms > now && r->next_expire_ms < wake) wake = r->next_expire_ms;
  if (now + r->poll_ms < wake) wake = now + r->poll_ms;
  keys_refresh(r, now);
  stop_gone(r);
  if (r->taking) return wake; /* its answer asks for the next pump */
  if (now < r->next_take_ms) return r->next_take_ms < wake ? r->next_take_ms : wake;
  /* A store that answers slowly holds the writes of the work that ended: no more is taken until they are made. */
  if (storeq_depth(r->q) >= RUNNER_STORE_DEPTH_MAX) {
    r->depth_full = 1;
    return wake;
  }
  struct dispatcher_stats st;
  core_stats(r->core, &st);
  /* Every piece of batch work counts against the share, a webhook try too (hooks.h). */
  if (runner_room(st.fetchers_connected, st.fetchers_idle, st.jobs_queued, fair_held_all(r->fair),
                  r->cfg->jobs_fetcher_share) == 0)
    return wake;
  struct take_call *c = calloc(1, sizeof(*c));
  if (c == NULL) return wake;
  c->r = r;
  c->hard = runner_skip(r, now, 0, r->scratch, RUNNER_SKIP_MAX);
  c->page_first = r->page_first;
  r->page_first = !r->page_first;
  if (take_pass(r, now, c, 1) != 0 || take_submit(r, c) != 0) {
    take_free(c);
    return wake;
  }
  r->taking = 1;
  return wake;
}

/* The platform requests a piece of work made, by its result: what its key's share of the egress budget pays. */
static uint32_t requests_of(const struct runner_item *it, const struct proto_result *res) {
  if (res == NULL) return 0;
  /* A browse page is one request when a fetcher read it (a result from no fetcher is the core's own failure). */
  if (it->is_page) return res->fetch_ms > 0 || res->outcome != PROTO_INTERNAL ? 1 : 0;
  /* Each attempt asked the player; a transcript a fetcher fetched was one caption download more. A cache hit: none. */
  uint32_t n = res->nattempts;
  if (res->outcome == PROTO_OK && res->source == PROTO_SOURCE_CAPTIONS && (res->nattempts > 0 || res->fetch_ms > 0))
    n++;
  return n;
}

/*
 * A page's answer: its ids appended to the job and its continuation kept (one transaction), or the page put back (a
 * ration; or a failure, RUNNER_PAGE_TRIES times), or, past that, the list ended with what the job holds.
 */
static void page_answer(struct runner *r, const struct runner_item *it, const struct proto_result *res) {
  int64_t now = wall_ms();
  struct runner_outcome o;
  runner_judge(res, now, it->page_created_ms, r->cfg->job_max_age_s * 1000, &o);
  struct proto_browse_page page;
  if (o.verdict == RUNNER_DONE && proto_browse_read(res->body, res->body_len, &page) != 0) o.verdict = RUNNER_FAIL;
  if (o.verdict == RUNNER_DONE) {
    struct store_write *w = write_new(r, W_PAGE_END, it->page_job, 0);
    if (w != NULL) {
      w->ids = calloc(page.n + 1, sizeof(*w->ids));
      w->next = malloc(page.token_len + 1);
    }
    if (w == NULL || w->ids == NULL || w->next == NULL) {
      if (w != NULL) write_free(w);
      page_write(r, it->page_job, W_PAGE_RETRY, 0, NULL, now + RUNNER_POLL_MS);
      return;
    }
    for (size_t i = 0; i < page.n; i++) memcpy(w->ids[i], page.ids + i * (VTS_VIDEO_ID_LEN + 1), VTS_VIDEO_ID_LEN);
    w->n = page.n;
    memcpy(w->next, page.token, page.token_len);
    w->next[page.token_len] = '\0';
    w->read = it->page_read;
    write_submit(r, w, it->page_job);
  } else if (o.verdict == RUNNER_RETRY) {
    page_write(r, it->page_job, W_PAGE_RETRY, 0, NULL, o.not_before_ms);
  } else if (it->page_tries + 1 < RUNNER_PAGE_TRIES) {
    page_write(r, it->page_job, W_PAGE_RETRY, 0, NULL, now + (int64_t)RUNNER_PAGE_RETRY_MS * (it->page_tries + 1));
  } else {
    char num[24];
    snprintf(num, sizeof(num), "%d", res != NULL ? proto_outcome_status(res->outcome) : 500);
    log_msg(LOG_WARN, "batch list ended early: a page could not be read", "job_id", it->page_job, "=status", num,
            "reason", res != NULL ? proto_reason_name(res->reason) : "none", NULL);
    page_write(r, it->page_job, W_PAGE_END, it->page_read, JOBSTORE_STOP_PAGE_FAILED, 0);
  }
}

void runner_answer(struct runner *r, struct core_waiter *w, const struct proto_result *res) {
  struct runner_item *it = (struct runner_item *)(void *)w;
  const struct jobstore_task *t = &it->task;
  r->in_flight--;
  uint32_t requests = requests_of(it, res);
  fair_ended(r->fair, util_now_ms(), it->key, requests);
  char spent[16];
  snprintf(spent, sizeof(spent), "%u", requests);
  log_msg(LOG_DEBUG, "batch work ended", "key_id", it->key, "kind", it->is_page ? "page" : "item", "job_id",
          it->is_page ? it->page_job : t->job_id, "=requests", spent, NULL);
  if (it->prev != NULL)
    it->prev->next = it->next;
  else
    r->items = it->next;
  if (it->next != NULL) it->next->prev = it->prev;
  int gone = gone_find(r->gone, it->key) != NULL;
  if (it->is_page) {
    /* A revoked key's list was ended by jobstore_stop_key; a page read meanwhile adds nothing. */
    if (gone)
      page_write(r, it->page_job, W_PAGE_END, it->page_read, JOBSTORE_STOP_KEY_REVOKED, 0);
    else
      page_answer(r, it, res);
    free(it);
    kick(r);
    return;
  }
  int64_t now = wall_ms();
  struct runner_outcome o;
  runner_judge(res, now, t->created_ms, r->cfg->job_max_age_s * 1000, &o);
  if (gone) {
    /* Revoked while it ran: nothing is kept or charged (its unit given back), and it is not tried again. */
    item_write(r, it, t, W_FAIL, "key_revoked", RUNNER_KEY_REVOKED, 0);
  } else if (o.verdict == RUNNER_DONE) {
    /*
     * A transcript: kept, with the unit of the month it held since before its platform request (hold_unit). An item
     * no longer running (cancelled meanwhile, or its lease lost and another taker holds its own unit) was delivered
     * nothing: its unit goes back. A store that did not answer may have kept it: the unit stays counted (a customer
     * may be billed one unit too many, never served one too many).
     */
    struct store_write *sw = write_new(r, W_DONE, t->job_id, t->seq);
    if (sw != NULL && res->body_len > 0 && (sw->body = malloc(res->body_len)) == NULL) {
      write_free(sw);
      sw = NULL;
    }
    if (sw != NULL) {
      if (res->body_len > 0) memcpy(sw->body, res->body, res->body_len);
      sw->len = res->body_len;
      sw->unit = it->unit;
      sw->table_unit = it->table_unit;
      sw->charge = it->charge;
    }
    write_submit(r, sw, t->job_id);
  } else if (o.verdict == RUNNER_RETRY) {
    item_write(r, it, t, W_RETRY, NULL, NULL, o.not_before_ms); /* its unit held again when it is taken again */
  } else {
    item_write(r, it, t, W_FAIL, o.code, o.message, 0);
  }
  free(it);
  kick(r);
}
