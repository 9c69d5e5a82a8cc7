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
#include "gateway/jobs/jobstore.h"
#include "gateway/keys/keys.h"
#include "gateway/limits/ratelimit.h"

_Static_assert(JOBSTORE_KEY_ID_MAX == KEYS_MAX_NAME, "the store must give back every key name whole");

/* How often ended jobs past VTS_JOB_TTL_S are deleted, and the key file looked at for changes. */
#define RUNNER_EXPIRE_MS 60000
#define RUNNER_KEYS_POLL_MS 1000
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
};

struct runner {
  const struct vts_config *cfg;
  struct core *core;
  struct jobstore *js;
  struct keystore *keys;
  struct timespec keys_mtime;
  uint64_t keys_checked_ms;
  uint64_t in_flight;
  struct runner_item *items;
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
  char err[256] = "";
  if (jobstore_open_config(cfg, VTS_JOBS_RUNNER_REDIS_TIMEOUT_MS, &r->js, err, sizeof(err)) != 0) {
    log_msg(LOG_ERROR, "batch jobs not run: job store unavailable", "error", err, NULL);
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

void runner_free(struct runner *r) {
  if (r == NULL) return;
  /* Items the core never answered (the dispatcher stopping): still running in the store, put back at the next start. */
  while (r->items != NULL) {
    struct runner_item *it = r->items;
    r->items = it->next;
    free(it);
  }
  jobstore_close(r->js);
  keystore_free(r->keys);
  free(r);
}

struct jobstore *runner_store(struct runner *r) {
  return r->js;
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

uint64_t runner_pump(struct runner *r, uint64_t now) {
  runner_hold(r, now);
  if (now >= r->next_expire_ms) {
    r->next_expire_ms = now + RUNNER_EXPIRE_MS;
    int n = jobstore_expire(r->js, wall_ms(), r->cfg->job_ttl_s * 1000);
    if (n < 0) log_msg(LOG_WARN, "expiring batch jobs failed", NULL);
  }
  uint64_t wake = now + RUNNER_POLL_MS;
  if (r->next_keepalive_ms < wake) wake = r->next_keepalive_ms;
  if (now < r->next_take_ms) return r->next_take_ms < wake ? r->next_take_ms : wake;
  keys_refresh(r, now);
  for (int started = 0; started < RUNNER_BURST; started++) {
    struct dispatcher_stats st;
    core_stats(r->core, &st);
    if (runner_room(st.fetchers_connected, st.fetchers_idle, st.jobs_queued, r->in_flight,
                    r->cfg->jobs_fetcher_share) == 0)
      return wake;
    int64_t wall = wall_ms();
    /* A job's next page first: its items join the queue before the items of later jobs run. */
    int rv = jobstore_take_page(r->js, wall, r->cfg->job_timeout_ms + RUNNER_LEASE_SLACK_MS, &r->page);
    if (rv == 0) {
      start_page(r, now, &r->page);
      continue;
    }
    if (rv != -EAGAIN) log_msg(LOG_WARN, "taking a batch page failed", NULL);
    struct jobstore_task t;
    rv = jobstore_take(r->js, wall, r->cfg->job_timeout_ms + RUNNER_LEASE_SLACK_MS, &t);
    if (rv != 0) {
      if (rv != -EAGAIN) log_msg(LOG_WARN, "taking a batch item failed", NULL);
      r->next_take_ms = now + jobstore_idle_poll_ms(r->js, RUNNER_POLL_MS);
      return wake;
    }
    start_item(r, now, &t);
  }
  return now; /* more may start: the next loop turn */
}

/*
 * A transcript for an item: kept, and one unit of its key's month counted, exactly once. With Redis the store counts
 * the unit in the key's month counter (the synchronous endpoint's) in the step that keeps the answer; else the
 * limiter's shared table is charged first and given back when the store does not keep it. A month used up fails the
 * item quota_exceeded; a store or counter that cannot answer is not a month used up: the item is put back for later
 * (with Redis, if even that is not stored, its entry is claimed again after JOBSTORE_CLAIM_IDLE_MS).
 */
static int record_done(struct runner *r, const struct jobstore_task *t, const struct proto_result *res, int64_t now) {
  const struct key_entry *key = key_named(r, t->key_id);
  if (key == NULL) /* the key left the key file: nothing can be charged to it, nothing is delivered */
    return jobstore_fail(r->js, t->job_id, t->seq, "quota_exceeded", RUNNER_QUOTA_EXCEEDED, now);
  if (jobstore_charges(r->js)) {
    struct jobstore_charge c = {.quota_code = "quota_exceeded", .quota_message = RUNNER_QUOTA_EXCEEDED};
    int rv = ratelimit_month_counter(r->cfg, key, now / 1000, c.counter, sizeof(c.counter), &c.quota, &c.ttl_s);
    /* Kept, or failed for the month used up: the store did either in the same step. */
    if (rv == 0) rv = jobstore_done_charged(r->js, t->job_id, t->seq, res->body, res->body_len, &c, now, NULL);
    if (rv == 0 || rv == -ENOENT) return rv;
    log_msg(LOG_WARN, "batch item not charged: tried again later", "job_id", t->job_id, NULL);
    return jobstore_retry(r->js, t->job_id, t->seq, now + RUNNER_CHARGE_RETRY_MS, now);
  }
  int64_t month = 0;
  enum rl_charge charged = RL_CHARGE_QUOTA_USED_UP;
  int crv = ratelimit_charge_month(r->cfg, key, &month, &charged);
  if (crv == 0 && charged == RL_CHARGE_QUOTA_USED_UP)
    return jobstore_fail(r->js, t->job_id, t->seq, "quota_exceeded", RUNNER_QUOTA_EXCEEDED, now);
  if (crv < 0) {
    log_msg(LOG_WARN, "batch item not charged: tried again later", "job_id", t->job_id, NULL);
    return jobstore_retry(r->js, t->job_id, t->seq, now + RUNNER_CHARGE_RETRY_MS, now);
  }
  int rv = jobstore_done(r->js, t->job_id, t->seq, res->body, res->body_len, now);
  /* Cancelled meanwhile, or its lease lost: nothing was delivered, so nothing is owed. */
  if (rv != 0) ratelimit_give_back(key, month);
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
      rv =
          jobstore_page_done(r->js, it->page_job, (const char(*)[VTS_VIDEO_ID_LEN + 1]) ids, page.n, next, now, &added);
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
    rv = jobstore_page_done(r->js, it->page_job, NULL, 0, "", now, &added);
  }
  if (rv != 0 && rv != -ENOENT) log_msg(LOG_ERROR, "batch page not recorded", "job_id", it->page_job, NULL);
}

void runner_answer(struct runner *r, struct core_waiter *w, const struct proto_result *res) {
  struct runner_item *it = (struct runner_item *)(void *)w;
  const struct jobstore_task *t = &it->task;
  r->in_flight--;
  if (it->prev != NULL)
    it->prev->next = it->next;
  else
    r->items = it->next;
  if (it->next != NULL) it->next->prev = it->prev;
  if (it->is_page) {
    page_answer(r, it, res);
    free(it);
    return;
  }
  int64_t now = wall_ms();
  struct runner_outcome o;
  runner_judge(res, now, t->created_ms, r->cfg->job_max_age_s * 1000, &o);
  int rv = 0;
  if (o.verdict == RUNNER_DONE) {
    rv = record_done(r, t, res, now);
  } else if (o.verdict == RUNNER_RETRY) {
    rv = jobstore_retry(r->js, t->job_id, t->seq, o.not_before_ms, now);
  } else {
    rv = jobstore_fail(r->js, t->job_id, t->seq, o.code, o.message, now);
  }
  if (rv != 0 && rv != -ENOENT) {
    char seq[24];
    snprintf(seq, sizeof(seq), "%lld", (long long)t->seq);
    log_msg(LOG_ERROR, "batch item not recorded", "job_id", t->job_id, "=seq", seq, NULL);
  }
  free(it);
}
