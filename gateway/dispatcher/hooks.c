/* The webhooks of batch jobs (see hooks.h). */
#include "gateway/dispatcher/hooks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "common/whsig.h"
#include "gateway/dispatcher/fair.h"
#include "gateway/jobs/jobjson.h"
#include "gateway/jobs/storeq.h"

/* Messages recorded in one scan at most, so that a backlog does not hold the store's thread long. */
#define HOOKS_SCAN_BURST 32

/* One try held by the core: its delivery as the store gave it, which the job sent borrows from. */
struct hook_call {
  struct core_waiter waiter; /* first: the core's handle */
  struct hook_call *prev, *next;
  struct jobstore_hook hook;
};

struct hooks {
  const struct vts_config *cfg;
  struct core *core;
  struct runner *runner;
  struct storeq *q;
  struct hook_call *calls;
  int scanning, taking; /* a scan, a take in the store's queue (one of each at a time) */
  uint64_t in_flight;
  uint64_t next_scan_ms;
  uint64_t next_take_ms;     /* the store is asked for a due try no more often than poll_ms when none was */
  uint64_t scan_ms, poll_ms; /* the waits before the next scan and take: doubled by each that finds nothing */
  uint64_t delivered, failed, given_up;
};

int hooks_next_try(int attempt, int64_t retry_ms, int64_t made_ms, int64_t now_ms, int64_t *next_ms) {
  int64_t delay = retry_ms;
  for (int i = 1; i < attempt && delay <= VTS_WEBHOOK_RETRY_WINDOW_MS; i++) delay *= 2;
  *next_ms = now_ms + delay;
  return *next_ms <= made_ms + VTS_WEBHOOK_RETRY_WINDOW_MS;
}

struct hooks *hooks_new(const struct vts_config *cfg, struct core *core, struct runner *runner) {
  struct hooks *h = calloc(1, sizeof(*h));
  if (h == NULL) return NULL;
  h->cfg = cfg;
  h->core = core;
  h->runner = runner;
  h->q = runner_storeq(runner);
  h->scan_ms = HOOKS_SCAN_MS;
  h->poll_ms = HOOKS_POLL_MS;
  return h;
}

void hooks_wake(struct hooks *h) {
  h->scan_ms = HOOKS_SCAN_MS;
  h->poll_ms = HOOKS_POLL_MS;
  h->next_scan_ms = 0;
  h->next_take_ms = 0;
}

void hooks_free(struct hooks *h) {
  if (h == NULL) return;
  while (h->calls != NULL) {
    struct hook_call *c = h->calls;
    h->calls = c->next;
    free(c);
  }
  free(h);
}

/* A scan of the store's thread: the messages it recorded, for the loop's log. */
struct scan_call {
  struct hooks *h;
  int n;
  int failed; /* the last one could not be recorded */
  char job_id[HOOKS_SCAN_BURST][JOBSTORE_ID_LEN + 1];
  const char *status[HOOKS_SCAN_BURST];
};

/* runs on the store's thread: makes and records the message of each ended job that owes one. */
static void scan_work(struct jobstore *js, void *arg) {
  struct scan_call *c = arg;
  for (c->n = 0; c->n < HOOKS_SCAN_BURST; c->n++) {
    char *job_id = c->job_id[c->n], key_id[JOBSTORE_KEY_ID_MAX + 1];
    if (jobstore_hook_owed(js, job_id, key_id) != 0) return;
    struct jobstore_job j;
    struct buf body = BUF_INIT;
    int rv = jobstore_get(js, key_id, job_id, &j);
    if (rv == 0) rv = jobjson_status(&body, &j, strcmp(j.status, "cancelled") == 0 ? "job.cancelled" : "job.done");
    if (rv == 0) rv = jobstore_hook_add(js, job_id, body.data, body.len, util_wall_ms());
    buf_free(&body);
    if (rv != 0) {
      c->failed = 1;
      return;
    }
    c->status[c->n] = j.status;
  }
}

static void scan_done(void *arg) {
  struct scan_call *c = arg;
  c->h->scanning = 0;
  c->h->scan_ms = c->n > 0 || c->failed ? HOOKS_SCAN_MS : runner_idle_wait(c->h->scan_ms);
  for (int i = 0; i < c->n; i++)
    log_msg(LOG_INFO, "webhook owed", "job_id", c->job_id[i], "status", c->status[i], NULL);
  if (c->failed) log_msg(LOG_ERROR, "webhook message not recorded", "job_id", c->job_id[c->n], NULL);
  free(c);
}

static void scan(struct hooks *h) {
  struct scan_call *c = calloc(1, sizeof(*c));
  if (c == NULL) return;
  c->h = h;
  if (storeq_call(h->q, scan_work, scan_done, c) != 0) {
    free(c);
    return;
  }
  h->scanning = 1;
}

/* Signs a taken try and hands it to the core; a try that cannot be signed ends as a failure now. */
static void start_try(struct hooks *h, uint64_t now, struct hook_call *c) {
  const struct jobstore_hook *k = &c->hook;
  struct proto_job job = {.kind = PROTO_KIND_WEBHOOK, .deadline_ms = (uint32_t)h->cfg->job_timeout_ms};
  snprintf(job.hook_id, sizeof(job.hook_id), "msg_%s", k->job_id);
  job.hook_timestamp = (uint64_t)util_wall_s();
  snprintf(job.request_id, sizeof(job.request_id), "%s-hook-%d", k->job_id, k->attempt);
  job.hook_url = k->url;
  job.hook_url_len = (uint32_t)strlen(k->url);
  job.hook_body = k->body;
  job.hook_body_len = (uint32_t)k->body_len;
  c->waiter.internal = HOOKS_WAITER;
  fair_started(runner_fair(h->runner), now, k->key_id, runner_key_weight(h->runner, k->key_id));
  log_msg(LOG_DEBUG, "batch work started", "key_id", k->key_id, "kind", "webhook", "job_id", k->job_id, NULL);
  c->next = h->calls;
  if (h->calls != NULL) h->calls->prev = c;
  h->calls = c;
  h->in_flight++;
  if (whsig_sign(k->secret, job.hook_id, (int64_t)job.hook_timestamp, k->body, k->body_len, job.hook_signature,
                 sizeof(job.hook_signature)) != 0) {
    struct proto_result fail = {.outcome = PROTO_INTERNAL, .reason = PROTO_REASON_INTERNAL};
    snprintf(fail.detail, sizeof(fail.detail), "not_signed");
    hooks_answer(h, &c->waiter, &fail);
    return;
  }
  core_request(h->core, now, &c->waiter, &job);
}

/* A take of the store's thread: the keys passed over copied (the loop's own change meanwhile), the try it took. */
struct take_call {
  struct hooks *h;
  struct runner_skipped skipped;
  int64_t wall;
  int rv;
  struct hook_call *c;
};

static void take_free(struct take_call *t) {
  if (t == NULL) return;
  runner_skipped_free(&t->skipped);
  free(t);
}

/* runs on the store's thread */
static void take_work(struct jobstore *js, void *arg) {
  struct take_call *t = arg;
  struct jobstore_skip sk = {t->skipped.keys, t->skipped.n};
  t->rv = jobstore_hook_take_skip(js, t->wall, HOOKS_LEASE_MS, &sk, &t->c->hook);
}

static void record_end(struct hooks *h, const struct jobstore_hook *k, enum jobstore_hook_state state, int64_t next_ms,
                       int http_status);

static void take_done(void *arg) {
  struct take_call *t = arg;
  struct hooks *h = t->h;
  h->taking = 0;
  uint64_t now = util_now_ms();
  /* A try taken while the runner closes is made again when its lease ends (HOOKS_LEASE_MS). */
  if (t->rv == 0 && !runner_closing(h->runner) && runner_gone_found(h->runner, t->c->hook.key_id)) {
    /*
     * Its key went while the take was asked for (or is past the revoked keys a take passes over): never sent, its
     * delivery given up as the key's stop gives up the others.
     */
    h->given_up++;
    char attempt[16];
    snprintf(attempt, sizeof(attempt), "%d", t->c->hook.attempt);
    log_msg(LOG_WARN, "webhook try", "job_id", t->c->hook.job_id, "=attempt", attempt, "outcome", "given_up", "reason",
            "key_revoked", NULL);
    record_end(h, &t->c->hook, HOOK_GIVEN_UP, 0, 0);
    free(t->c);
  } else if (t->rv == 0 && !runner_closing(h->runner)) {
    start_try(h, now, t->c);
  } else {
    free(t->c);
    if (t->rv != -EAGAIN && t->rv != 0) log_msg(LOG_WARN, "taking a webhook try failed", NULL);
    if (t->rv != 0) {
      h->next_take_ms = now + h->poll_ms;
      h->poll_ms = runner_idle_wait(h->poll_ms);
    }
  }
  if (t->rv == 0) h->poll_ms = HOOKS_POLL_MS;
  take_free(t);
  runner_kick(h->runner);
}

uint64_t hooks_pump(struct hooks *h, uint64_t now) {
  if (now >= h->next_scan_ms && !h->scanning) {
    h->next_scan_ms = now + h->scan_ms;
    scan(h);
  }
  /* A scan still in flight: looked at again after poll_ms, never at a time already past. */
  uint64_t wake = h->next_scan_ms > now ? h->next_scan_ms : now + h->poll_ms;
  /* The pump runs after every batch of the loop's events: the store's write lock is not taken at that pace. */
  if (h->taking) return wake; /* its answer asks for the next pump */
  if (now < h->next_take_ms) return h->next_take_ms < wake ? h->next_take_ms : wake;
  if (h->in_flight >= HOOKS_MAX_IN_FLIGHT) return wake;
  struct dispatcher_stats st;
  core_stats(h->core, &st);
  /* Within the batch share, beside the runner's items: the rest of the fetchers serve transcripts. */
  if (runner_room(st.fetchers_connected, st.fetchers_idle, st.jobs_queued, fair_held_all(runner_fair(h->runner)),
                  h->cfg->jobs_fetcher_share) == 0)
    return now + h->poll_ms;
  /* Passed over: keys with a try in flight (one try per key at once), keys at their share, revoked keys. */
  const char *busy[HOOKS_MAX_IN_FLIGHT];
  size_t n = 0;
  for (const struct hook_call *o = h->calls; o != NULL && n < HOOKS_MAX_IN_FLIGHT; o = o->next)
    busy[n++] = o->hook.key_id;
  struct take_call *t = calloc(1, sizeof(*t));
  struct hook_call *c = calloc(1, sizeof(*c));
  if (t == NULL || c == NULL || runner_skipped_fill(h->runner, now, 0, busy, n, &t->skipped) != 0) {
    take_free(t);
    free(c);
    return wake;
  }
  t->h = h;
  t->c = c;
  t->wall = util_wall_ms();
  if (storeq_call(h->q, take_work, take_done, t) != 0) {
    take_free(t);
    free(c);
    return wake;
  }
  h->taking = 1;
  return wake;
}

/* The receiver's status a result carries (its body, in decimal), 0 for none. */
static int result_status(const struct proto_result *res) {
  int64_t v = 0;
  if (res == NULL || res->body_len == 0 || util_parse_i64_n(res->body, res->body_len, 100, 599, &v) != 0) return 0;
  return (int)v;
}

/* A try's end, recorded on the store's thread. */
struct end_call {
  char job_id[JOBSTORE_ID_LEN + 1];
  int attempt;
  enum jobstore_hook_state state;
  int64_t next_ms;
  int http_status;
  int rv;
};

/* runs on the store's thread */
static void end_work(struct jobstore *js, void *arg) {
  struct end_call *e = arg;
  e->rv = jobstore_hook_end(js, e->job_id, e->state, e->next_ms, e->http_status);
}

static void end_done(void *arg) {
  struct end_call *e = arg;
  /* A give-up that finds the delivery ended already: the key's stop gave it up first. */
  if (e->rv != 0 && !(e->rv == -ENOENT && e->state == HOOK_GIVEN_UP)) {
    char attempt[16];
    snprintf(attempt, sizeof(attempt), "%d", e->attempt);
    log_msg(LOG_ERROR, "webhook try not recorded", "job_id", e->job_id, "=attempt", attempt, NULL);
  }
  free(e);
}

/* Records the end of try k on the store's thread: delivered, given up, or pending again from next_ms. */
static void record_end(struct hooks *h, const struct jobstore_hook *k, enum jobstore_hook_state state, int64_t next_ms,
                       int http_status) {
  struct end_call *e = calloc(1, sizeof(*e));
  if (e != NULL) {
    memcpy(e->job_id, k->job_id, sizeof(e->job_id));
    e->attempt = k->attempt;
    e->state = state;
    e->next_ms = next_ms;
    e->http_status = http_status;
  }
  if (e == NULL || storeq_call(h->q, end_work, end_done, e) != 0) {
    char attempt[16];
    snprintf(attempt, sizeof(attempt), "%d", k->attempt);
    log_msg(LOG_ERROR, "webhook try not recorded", "job_id", k->job_id, "=attempt", attempt, NULL);
    free(e);
  }
}

void hooks_answer(struct hooks *h, struct core_waiter *w, const struct proto_result *res) {
  struct hook_call *c = (struct hook_call *)(void *)w;
  const struct jobstore_hook *k = &c->hook;
  h->in_flight--;
  /* A try is no platform request: it spends its key's share of the slots only. */
  fair_ended(runner_fair(h->runner), util_now_ms(), k->key_id, 0);
  log_msg(LOG_DEBUG, "batch work ended", "key_id", k->key_id, "kind", "webhook", "job_id", k->job_id, "=requests", "0",
          NULL);
  if (c->prev != NULL)
    c->prev->next = c->next;
  else
    h->calls = c->next;
  if (c->next != NULL) c->next->prev = c->prev;
  int64_t now = util_wall_ms(), next = 0;
  enum jobstore_hook_state state = HOOK_DELIVERED;
  const char *outcome = "delivered";
  if (res->outcome == PROTO_OK) {
    h->delivered++;
  } else if (hooks_next_try(k->attempt, h->cfg->webhook_retry_ms, k->made_ms, now, &next)) {
    state = HOOK_PENDING;
    outcome = "failed";
    h->failed++;
  } else {
    state = HOOK_GIVEN_UP;
    outcome = "given_up";
    h->given_up++;
  }
  char attempt[16], status[16], next_ts[40] = "";
  snprintf(attempt, sizeof(attempt), "%d", k->attempt);
  snprintf(status, sizeof(status), "%d", result_status(res));
  if (state == HOOK_PENDING) util_rfc3339(next_ts, sizeof(next_ts), next);
  log_msg(state == HOOK_DELIVERED ? LOG_INFO : LOG_WARN, "webhook try", "job_id", k->job_id, "=attempt", attempt,
          "outcome", outcome, "=http_status", status, "reason", proto_reason_name(res->reason), "detail", res->detail,
          state == HOOK_PENDING ? "next_try" : NULL, next_ts, NULL);
  record_end(h, k, state, next, result_status(res));
  free(c);
  runner_kick(h->runner);
}

void hooks_stats(const struct hooks *h, struct dispatcher_stats *st) {
  if (h == NULL) return;
  st->webhooks_delivered = h->delivered;
  st->webhooks_failed = h->failed;
  st->webhooks_given_up = h->given_up;
}
