/* The batch jobs' runner (see runner.h). */
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
#include "gateway/jobs/jobstore.h"
#include "gateway/keys/keys.h"
#include "gateway/limits/ratelimit.h"

_Static_assert(JOBSTORE_KEY_ID_MAX == KEYS_MAX_NAME, "the store must give back every key name whole");

/* How often ended jobs past VTS_JOB_TTL_S are deleted, and the key file looked at for changes. */
#define RUNNER_EXPIRE_MS 60000
#define RUNNER_KEYS_POLL_MS 500
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
  /* The item's unit of the month, held from before its platform request until it ends (hold_unit). */
  enum { UNIT_NONE, UNIT_TABLE, UNIT_STORE } unit;
  struct rl_decision table_unit; /* UNIT_TABLE: the unit of the limiter's shared table (its key's digest, its month) */
  struct jobstore_charge charge; /* UNIT_STORE: the store's month counter it was held in */
};

struct runner {
  const struct vts_config *cfg;
  struct core *core;
  struct jobstore *js;
  struct keystore *keys;
  char (*prev)[KEYS_MAX_NAME + 1]; /* the active keys of the file read before */
  size_t nprev;
  struct timespec keys_mtime;
  uint64_t keys_checked_ms;
  uint64_t in_flight;
  struct runner_item *items;
  struct fair *fair;
  /* Keys revoked or removed from the key file since the start: their work is passed over, their jobs stopped. */
  char (*gone)[KEYS_MAX_NAME + 1];
  int *gone_stopped; /* the store stopped that key's jobs (else it is asked again at the next look) */
  size_t ngone;
  uint64_t next_take_ms;
  uint64_t next_expire_ms;
  uint64_t next_keepalive_ms;
  struct jobstore_page page; /* the page being taken (its token is large: not on the stack) */
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
      if (wait >= 0 && now_ms + wait - created_ms <= max_age_ms) {
        out->verdict = RUNNER_RETRY;
        out->not_before_ms = now_ms + wait;
        return;
      }
      out->code = "upstream_transcript_failed";
      out->message = RUNNER_UPSTREAM_FAILED;
      return;
    }
    case 503: {
      /* Shed: the item yielded to synchronous requests, back in the queue for when the dispatcher expects room. */
      int64_t wait = (int64_t)(res->retry_after_s > 0 ? res->retry_after_s : 1) * 1000;
      if (now_ms + wait - created_ms <= max_age_ms) {
        out->verdict = RUNNER_RETRY;
        out->not_before_ms = now_ms + wait;
        return;
      }
      out->code = "service_unavailable";
      out->message = RUNNER_SERVICE_UNAVAILABLE;
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

static const struct key_entry *key_named(const struct runner *r, const char *name);

static int gone_find(const struct runner *r, const char *name) {
  for (size_t i = 0; i < r->ngone; i++)
    if (strcmp(r->gone[i], name) == 0) return (int)i;
  return -1;
}

/* Counts name among the gone keys (once). Returns 0, or -ENOMEM. */
static int gone_add(struct runner *r, const char *name) {
  if (gone_find(r, name) >= 0) return 0;
  if (r->ngone % 16 == 0) {
    void *g = realloc(r->gone, (r->ngone + 16) * sizeof(*r->gone));
    if (g == NULL) return -ENOMEM;
    r->gone = g;
    void *s = realloc(r->gone_stopped, (r->ngone + 16) * sizeof(*r->gone_stopped));
    if (s == NULL) return -ENOMEM;
    r->gone_stopped = s;
  }
  memcpy(r->gone[r->ngone], name, strlen(name) + 1);
  r->gone_stopped[r->ngone++] = 0;
  return 0;
}

/*
 * The key file changed: a key that was active and is now inactive or absent is gone, and a gone key that is active
 * again is back. A gone key's jobs are stopped in the store (their queued items cancelled, their lists and webhooks
 * ended, jobstore_stop_key), once; until the store has done it, it is asked at every look. Its work is passed over
 * by every take from now on, and its items running end key_revoked (runner_answer).
 */
static void keys_gone(struct runner *r, uint64_t now) {
  (void)now;
  /* Back: active in the file again. */
  for (size_t i = 0; i < r->ngone;) {
    const struct key_entry *k = key_named(r, r->gone[i]);
    if (k != NULL && k->active) {
      log_msg(LOG_INFO, "batch jobs of a key run again: the key is active", "key_id", r->gone[i], NULL);
      r->ngone--;
      memmove(r->gone[i], r->gone[r->ngone], sizeof(r->gone[i]));
      r->gone_stopped[i] = r->gone_stopped[r->ngone];
      continue;
    }
    i++;
  }
  /* Gone: inactive in the file, or in the file before and absent now (the previous file's active keys). */
  size_t n = r->keys != NULL ? keystore_count(r->keys) : 0;
  for (size_t i = 0; i < n + r->nprev; i++) {
    const char *name = NULL;
    if (i < n) {
      const struct key_entry *k = keystore_entry(r->keys, i);
      if (!k->active) name = k->name;
    } else if (key_named(r, r->prev[i - n]) == NULL) {
      name = r->prev[i - n];
    }
    if (name != NULL && gone_add(r, name) != 0) return;
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

/* Stops the jobs of the gone keys the store has not stopped yet. */
static void stop_gone(struct runner *r) {
  for (size_t i = 0; i < r->ngone; i++) {
    if (r->gone_stopped[i]) continue;
    int n = jobstore_stop_key(r->js, r->gone[i], JOBSTORE_STOP_KEY_REVOKED, wall_ms());
    if (n < 0) {
      log_msg(LOG_WARN, "jobs of a revoked key not stopped yet: tried again", "key_id", r->gone[i], NULL);
      continue;
    }
    r->gone_stopped[i] = 1;
    char num[16];
    snprintf(num, sizeof(num), "%d", n);
    log_msg(LOG_INFO, "batch jobs of a revoked key stopped", "key_id", r->gone[i], "=jobs", num, NULL);
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

static const struct key_entry *key_named(const struct runner *r, const char *name) {
  for (size_t i = 0; r->keys != NULL && i < keystore_count(r->keys); i++) {
    const struct key_entry *k = keystore_entry(r->keys, i);
    if (strcmp(k->name, name) == 0) return k;
  }
  return NULL;
}

struct runner *runner_new(const struct vts_config *cfg, struct core *core) {
  struct runner *r = calloc(1, sizeof(*r));
  if (r == NULL) return NULL;
  r->cfg = cfg;
  r->core = core;
  /* The batch share of the egress budget: the rest of it stays for synchronous requests, as the fetchers' slots do. */
  uint64_t share = cfg->jobs_fetcher_share > 0 ? (uint64_t)cfg->jobs_fetcher_share : 0;
  struct fair_limits lim = {.per_hour = (uint64_t)cfg->egress_rate * runner_egresses(cfg) * share / 100,
                            .burst = (uint64_t)cfg->egress_burst * runner_egresses(cfg) * share / 100};
  if (lim.per_hour > 0 && lim.burst == 0) lim.burst = 1;
  r->fair = fair_new(&lim);
  if (r->fair == NULL) {
    free(r);
    return NULL;
  }
  char err[256] = "";
  if (jobstore_open_config(cfg, VTS_JOBS_RUNNER_REDIS_TIMEOUT_MS, &r->js, err, sizeof(err)) != 0) {
    log_msg(LOG_ERROR, "batch jobs not run: job store unavailable", "error", err, NULL);
    fair_free(r->fair);
    free(r);
    return NULL;
  }
  /*
   * SQLite: one gateway owns the directory, so what was running when it stopped (or was killed) runs again now.
   * Redis: nothing to do here; the entries a dead runner held are claimed by the next takes, here or elsewhere.
   */
  log_msg(LOG_INFO, "batch jobs runner ready", "store", jobstore_backend(r->js), "taker", jobstore_taker(r->js), NULL);
  int n = jobstore_recover(r->js, INT64_MAX);
  if (n > 0) {
    char num[16];
    snprintf(num, sizeof(num), "%d", n);
    log_msg(LOG_INFO, "batch items resumed", "=items", num, NULL);
  }
  return r;
}

/*
 * Holds one unit of the month of the item's key before the platform is asked, as the synchronous endpoint reserves
 * one before its request: in the store's month counter when the store holds them (Redis, the synchronous endpoint's
 * own counter), else in the limiter's shared table. Returns 1 (held), 0 (the month is used up, or the key left the
 * key file: nothing can be charged to it), or a negative errno (nothing known: the item is tried again later).
 */
static int hold_unit(struct runner *r, struct runner_item *it, int64_t now_ms) {
  const struct key_entry *key = key_named(r, it->task.key_id);
  if (key == NULL) return 0;
  int rv;
  if (jobstore_charges(r->js)) {
    struct jobstore_charge *c = &it->charge;
    rv = ratelimit_month_counter(r->cfg, key, now_ms / 1000, c->counter, sizeof(c->counter), &c->quota, &c->ttl_s);
    if (rv == 0) rv = jobstore_reserve(r->js, it->task.job_id, it->task.seq, c);
    if (rv == 1) it->unit = UNIT_STORE;
    return rv == -ENOENT ? 0 : rv; /* a job gone meanwhile: the item's end finds nothing to record */
  }
  enum rl_charge charged = RL_CHARGE_QUOTA_USED_UP;
  rv = ratelimit_charge_month(r->cfg, key, &it->table_unit, &charged);
  if (rv < 0) return rv;
  if (charged == RL_CHARGE_QUOTA_USED_UP) return 0;
  it->unit = UNIT_TABLE;
  return 1;
}

/* Gives back the unit an item held: it ended without a transcript (a failure, a retry, a cancel meanwhile). */
static void give_back_unit(struct runner *r, struct runner_item *it) {
  if (it->unit == UNIT_STORE && jobstore_unreserve(r->js, it->task.job_id, it->task.seq, &it->charge) != 0)
    log_msg(LOG_WARN, "a batch item's unit of the month not given back", "job_id", it->task.job_id, NULL);
  else if (it->unit == UNIT_TABLE)
    ratelimit_refund(NULL, &it->table_unit);
  it->unit = UNIT_NONE;
}

void runner_free(struct runner *r) {
  if (r == NULL) return;
  /* Items the core never answered (the dispatcher stopping): still running in the store, put back at the next start. */
  while (r->items != NULL) {
    struct runner_item *it = r->items;
    r->items = it->next;
    give_back_unit(r, it); /* the next start holds it again */
    free(it);
  }
  jobstore_close(r->js);
  keystore_free(r->keys);
  fair_free(r->fair);
  free(r->gone);
  free(r->gone_stopped);
  free(r->prev);
  free(r);
}

struct jobstore *runner_store(struct runner *r) {
  return r->js;
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
  size_t n = 0;
  for (size_t i = 0; i < r->ngone && n < max; i++) out[n++] = r->gone[i];
  return n + fair_skip(r->fair, now, runner_cap(r), ahead, out + n, max - n);
}

int runner_key_gone(const struct runner *r, const char *key) {
  const struct key_entry *k = key_named(r, key);
  return k == NULL || !k->active;
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
static void start_page(struct runner *r, uint64_t now, const struct jobstore_page *pg) {
  struct runner_item *it = calloc(1, sizeof(*it));
  if (it == NULL) {
    jobstore_page_retry(r->js, pg->job_id, wall_ms() + RUNNER_POLL_MS, wall_ms());
    return;
  }
  it->is_page = 1;
  memcpy(it->page_job, pg->job_id, sizeof(it->page_job));
  it->page_tries = pg->tries;
  it->page_created_ms = pg->created_ms;
  it->page_read = pg->read + 1; /* this page's number: the pages read so far and itself */
  memcpy(it->key, pg->key_id, sizeof(it->key));
  fair_started(r->fair, now, it->key, 1);
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

/* Starts one taken item: a request of the core of its own, answered (maybe at once) through runner_answer. */
static void start_item(struct runner *r, uint64_t now, const struct jobstore_task *t) {
  struct runner_item *it = calloc(1, sizeof(*it));
  if (it == NULL) {
    jobstore_retry(r->js, t->job_id, t->seq, wall_ms() + RUNNER_POLL_MS, wall_ms());
    return;
  }
  it->task = *t;
  memcpy(it->key, t->key_id, sizeof(it->key));
  int64_t wall = wall_ms();
  int held = hold_unit(r, it, wall);
  if (held <= 0) {
    /* Paid before spent: with no unit the platform is never asked. */
    if (held == 0) {
      jobstore_fail(r->js, t->job_id, t->seq, "quota_exceeded", RUNNER_QUOTA_EXCEEDED, wall);
    } else {
      log_msg(LOG_WARN, "batch item not charged: tried again later", "job_id", t->job_id, NULL);
      jobstore_retry(r->js, t->job_id, t->seq, wall + RUNNER_CHARGE_RETRY_MS, wall);
    }
    free(it);
    return;
  }
  fair_started(r->fair, now, it->key, 1);
  link_item(r, it);
  struct proto_job job = {.kind = PROTO_KIND_CAPTIONS, .deadline_ms = (uint32_t)r->cfg->job_timeout_ms};
  memcpy(job.video_id, t->video_id, sizeof(job.video_id));
  util_copy_str(job.lang, sizeof(job.lang), t->language);
  util_copy_str(job.translate, sizeof(job.translate), t->translate);
  snprintf(job.request_id, sizeof(job.request_id), "%s-%lld", t->job_id, (long long)t->seq);
  r->in_flight++;
  core_request(r->core, now, &it->waiter, &job);
}

uint64_t runner_hold(struct runner *r, uint64_t now) {
  if (now >= r->next_keepalive_ms) {
    r->next_keepalive_ms = now + JOBSTORE_KEEPALIVE_MS;
    if (jobstore_keepalive(r->js, wall_ms()) != 0) log_msg(LOG_WARN, "renewing batch items in hand failed", NULL);
  }
  return r->next_keepalive_ms;
}

/*
 * Takes the next piece of work of a key that may start now (fair.h): a page of a job's list first (its items join the
 * queue before later jobs' items run), else an item, into r->page or *t; *page tells which. The first pass also passes
 * over the keys ahead of the least served one; when it finds nothing, the keys it did not pass over have nothing
 * waiting (they stop sharing) and the second pass lets the others take their turn. Returns 0, -EAGAIN or -EIO.
 */
static int take_next(struct runner *r, uint64_t now, struct jobstore_task *t, int *page) {
  const char *skip[RUNNER_SKIP_MAX];
  int64_t wall = wall_ms(), lease = r->cfg->job_timeout_ms + RUNNER_LEASE_SLACK_MS;
  size_t hard = runner_skip(r, now, 0, skip, RUNNER_SKIP_MAX), first = 0;
  for (int ahead = 1; ahead >= 0; ahead--) {
    size_t n = runner_skip(r, now, ahead, skip, RUNNER_SKIP_MAX);
    if (ahead == 1) first = n;
    if (ahead == 0 && first == hard) break; /* the first pass passed over no key for being ahead: the same take */
    struct jobstore_skip sk = {skip, n};
    int rv = jobstore_take_page_skip(r->js, wall, lease, &sk, &r->page);
    if (rv == 0) {
      *page = 1;
      fair_seen(r->fair, now, r->page.key_id, 1);
      return 0;
    }
    if (rv != -EAGAIN) log_msg(LOG_WARN, "taking a batch page failed", NULL);
    rv = jobstore_take_skip(r->js, wall, lease, &sk, t);
    if (rv == 0) {
      *page = 0;
      fair_seen(r->fair, now, t->key_id, 1);
      return 0;
    }
    if (rv != -EAGAIN) {
      log_msg(LOG_WARN, "taking a batch item failed", NULL);
      return rv;
    }
    fair_idle_but(r->fair, skip, n);
  }
  return -EAGAIN;
}

uint64_t runner_pump(struct runner *r, uint64_t now) {
  runner_hold(r, now);
  int expiring = 0;
  if (now >= r->next_expire_ms) {
    /* One small batch a loop turn (jobstore_expire): the next one comes after the loop's other work. */
    int n = jobstore_expire(r->js, wall_ms(), r->cfg->job_ttl_s * 1000);
    if (n < 0) log_msg(LOG_WARN, "expiring batch jobs failed", NULL);
    expiring = n > 0;
    r->next_expire_ms = expiring ? now : now + RUNNER_EXPIRE_MS;
  }
  uint64_t wake = expiring ? now : now + RUNNER_POLL_MS;
  if (r->next_keepalive_ms < wake) wake = r->next_keepalive_ms;
  keys_refresh(r, now);
  stop_gone(r);
  if (now < r->next_take_ms) return r->next_take_ms < wake ? r->next_take_ms : wake;
  for (int started = 0; started < RUNNER_BURST; started++) {
    struct dispatcher_stats st;
    core_stats(r->core, &st);
    /* Every piece of batch work counts against the share, a webhook try too (hooks.h). */
    if (runner_room(st.fetchers_connected, st.fetchers_idle, st.jobs_queued, fair_held_all(r->fair),
                    r->cfg->jobs_fetcher_share) == 0)
      return wake;
    struct jobstore_task t;
    int page = 0;
    int rv = take_next(r, now, &t, &page);
    if (rv != 0) {
      r->next_take_ms = now + jobstore_idle_poll_ms(r->js, RUNNER_POLL_MS);
      return wake;
    }
    /*
     * Work of a key the key file does not hold as active (revoked or removed before this gateway read the file, or
     * while it was down) is not started: the key is gone from now on, and its jobs are stopped at the next look.
     */
    const char *key = page ? r->page.key_id : t.key_id;
    if (r->keys != NULL && runner_key_gone(r, key) && gone_add(r, key) == 0) {
      size_t added = 0;
      int64_t wall = wall_ms();
      if (page)
        jobstore_page_end(r->js, r->page.job_id, NULL, 0, "", r->page.read + 1, r->cfg->job_max_pages,
                          JOBSTORE_STOP_KEY_REVOKED, wall, &added);
      else
        jobstore_fail(r->js, t.job_id, t.seq, "key_revoked", RUNNER_KEY_REVOKED, wall);
      continue;
    }
    if (page)
      start_page(r, now, &r->page);
    else
      start_item(r, now, &t);
  }
  return now; /* more may start: the next loop turn */
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
 * A transcript for an item: kept, with the unit of the month it held since before its platform request (hold_unit).
 * An item no longer running (cancelled meanwhile, or its lease lost and another taker holds its own unit) was
 * delivered nothing: its unit goes back. A store that did not answer may have kept it: the unit stays counted (a
 * customer may be billed one unit too many, never served one too many).
 */
static int record_done(struct runner *r, struct runner_item *it, const struct proto_result *res, int64_t now) {
  const struct jobstore_task *t = &it->task;
  int rv = jobstore_done(r->js, t->job_id, t->seq, res->body, res->body_len, now);
  if (rv == -ENOENT) give_back_unit(r, it);
  it->unit = UNIT_NONE;
  return rv;
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
  int rv = 0;
  size_t added = 0;
  char num[24];
  if (o.verdict == RUNNER_DONE) {
    char(*ids)[VTS_VIDEO_ID_LEN + 1] = calloc(page.n + 1, sizeof(*ids));
    char *next = malloc(page.token_len + 1);
    if (ids == NULL || next == NULL) {
      rv = jobstore_page_retry(r->js, it->page_job, now + RUNNER_POLL_MS, now);
    } else {
      for (size_t i = 0; i < page.n; i++) memcpy(ids[i], page.ids + i * (VTS_VIDEO_ID_LEN + 1), VTS_VIDEO_ID_LEN);
      memcpy(next, page.token, page.token_len);
      next[page.token_len] = '\0';
      rv = jobstore_page_end(r->js, it->page_job, (const char(*)[VTS_VIDEO_ID_LEN + 1]) ids, page.n, next,
                             it->page_read, r->cfg->job_max_pages, NULL, now, &added);
      snprintf(num, sizeof(num), "%zu", added);
      if (rv == 0)
        log_msg(LOG_INFO, "batch page read", "job_id", it->page_job, "=items", num, "next_page", next[0] ? "yes" : "no",
                NULL);
    }
    free(ids);
    free(next);
  } else if (o.verdict == RUNNER_RETRY) {
    rv = jobstore_page_retry(r->js, it->page_job, o.not_before_ms, now);
  } else if (it->page_tries + 1 < RUNNER_PAGE_TRIES) {
    rv = jobstore_page_retry(r->js, it->page_job, now + (int64_t)RUNNER_PAGE_RETRY_MS * (it->page_tries + 1), now);
  } else {
    snprintf(num, sizeof(num), "%d", res != NULL ? proto_outcome_status(res->outcome) : 500);
    log_msg(LOG_WARN, "batch list ended early: a page could not be read", "job_id", it->page_job, "=status", num,
            "reason", res != NULL ? proto_reason_name(res->reason) : "none", NULL);
    rv = jobstore_page_end(r->js, it->page_job, NULL, 0, "", it->page_read, r->cfg->job_max_pages,
                           JOBSTORE_STOP_PAGE_FAILED, now, &added);
  }
  if (rv != 0 && rv != -ENOENT) log_msg(LOG_ERROR, "batch page not recorded", "job_id", it->page_job, NULL);
}

void runner_answer(struct runner *r, struct core_waiter *w, const struct proto_result *res) {
  struct runner_item *it = (struct runner_item *)(void *)w;
  const struct jobstore_task *t = &it->task;
  r->in_flight--;
  fair_ended(r->fair, util_now_ms(), it->key, requests_of(it, res));
  if (it->prev != NULL)
    it->prev->next = it->next;
  else
    r->items = it->next;
  if (it->next != NULL) it->next->prev = it->prev;
  int gone = gone_find(r, it->key) >= 0;
  if (it->is_page) {
    size_t added = 0;
    /* A revoked key's list was ended by jobstore_stop_key; a page read meanwhile adds nothing. */
    if (gone)
      jobstore_page_end(r->js, it->page_job, NULL, 0, "", it->page_read, r->cfg->job_max_pages,
                        JOBSTORE_STOP_KEY_REVOKED, wall_ms(), &added);
    else
      page_answer(r, it, res);
    free(it);
    return;
  }
  int64_t now = wall_ms();
  struct runner_outcome o;
  runner_judge(res, now, t->created_ms, r->cfg->job_max_age_s * 1000, &o);
  int rv = 0;
  if (gone) {
    /* Revoked while it ran: nothing is kept or charged (its unit given back), and it is not tried again. */
    give_back_unit(r, it);
    rv = jobstore_fail(r->js, t->job_id, t->seq, "key_revoked", RUNNER_KEY_REVOKED, now);
  } else if (o.verdict == RUNNER_DONE) {
    rv = record_done(r, it, res, now);
  } else if (o.verdict == RUNNER_RETRY) {
    give_back_unit(r, it); /* held again when it is taken again */
    rv = jobstore_retry(r->js, t->job_id, t->seq, o.not_before_ms, now);
  } else {
    give_back_unit(r, it);
    rv = jobstore_fail(r->js, t->job_id, t->seq, o.code, o.message, now);
  }
  if (rv != 0 && rv != -ENOENT) {
    char seq[24];
    snprintf(seq, sizeof(seq), "%lld", (long long)t->seq);
    log_msg(LOG_ERROR, "batch item not recorded", "job_id", t->job_id, "=seq", seq, NULL);
  }
  free(it);
}
