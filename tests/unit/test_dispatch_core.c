/*
 * The dispatcher's decision core in-process: events and the time go in by hand, and every action it asks for is
 * recorded and checked. No sockets, no Redis, no sleeps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "common/config.h"
#include "common/limits.h"
#include "common/log.h"
#include "gateway/cache/entity.h"
#include "gateway/dispatcher/core.h"
#include "proto/tracks.h"

#define BODY_OK "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"hi\",\"segments\":[]}"
#define T0 1000000 /* the time the tests start at: any value works, the core has no clock */
#define MAX_REC 96

/* What the core asked for, in order. */
enum act { A_ANSWER, A_JOB, A_READY, A_DROP, A_CLOSE, A_GET, A_CLAIM, A_PUT, A_RELEASE, A_RENEW };
struct rec {
  enum act act;
  struct core_waiter *w; /* A_ANSWER: one record per waiter */
  uint8_t outcome;
  char detail[64];
  uint64_t cache_ms;
  uint32_t retry_after_s; /* A_ANSWER */
  uint8_t notmod;         /* A_ANSWER: a 304, of etag, without a body */
  char etag[PROTO_MAX_ETAG + 1];
  uint32_t body_len;
  uint64_t fetcher;
  void *token;
  uint64_t job_id; /* A_JOB, A_GET, A_CLAIM, A_RELEASE */
  uint8_t kind;
  char video[12];
  uint64_t ttl_ms; /* A_CLAIM, A_PUT */
  uint32_t deadline_ms;
  uint8_t declines; /* A_JOB: times it was given back for want of budget */
  char player[512]; /* A_JOB: the player summary handed with it; A_ANSWER: one a worker was sent (never) */
  uint32_t player_len;
  char lang[PROTO_MAX_LANG + 1]; /* A_JOB: the language it asks */
  char browse[64];               /* A_JOB: a browse job's target */
};

struct fx {
  struct vts_config cfg;
  struct core *core;
  struct rec rec[MAX_REC];
  size_t n, seen; /* recorded; checked so far */
  int send_fails; /* the next send_job calls that fail */
  char last_put_key[PROTO_MAX_JOB_KEY + 1];
  struct core_waiter w[16];
};

static struct rec *add(struct fx *f, enum act act) {
  assert_true(f->n < MAX_REC);
  struct rec *r = &f->rec[f->n++];
  memset(r, 0, sizeof(*r));
  r->act = act;
  return r;
}

static void on_answer(void *ctx, struct core_waiter *w, const struct proto_result *res, uint64_t cache_ms) {
  for (; w != NULL; w = w->next) {
    struct rec *r = add(ctx, A_ANSWER);
    r->w = w;
    r->outcome = res->outcome;
    snprintf(r->detail, sizeof(r->detail), "%s", res->detail);
    r->cache_ms = cache_ms;
    r->retry_after_s = res->retry_after_s;
    r->notmod = res->notmod;
    snprintf(r->etag, sizeof(r->etag), "%s", res->etag);
    r->body_len = res->body_len;
    r->player_len = res->player_len;
  }
}
static int on_send_job(void *ctx, uint64_t fetcher, void *token, const struct proto_job *job) {
  struct fx *f = ctx;
  struct rec *r = add(f, A_JOB);
  r->fetcher = fetcher;
  r->token = token;
  r->job_id = job->job_id;
  r->kind = job->kind;
  r->deadline_ms = job->deadline_ms;
  r->declines = job->declines;
  snprintf(r->video, sizeof(r->video), "%s", job->video_id);
  snprintf(r->lang, sizeof(r->lang), "%s", job->lang);
  r->player_len = job->player_len;
  if (job->player_len > 0) snprintf(r->player, sizeof(r->player), "%.*s", (int)job->player_len, job->player);
  if (job->browse_len > 0) snprintf(r->browse, sizeof(r->browse), "%.*s", (int)job->browse_len, job->browse);
  if (f->send_fails > 0) {
    f->send_fails--;
    return -1;
  }
  return 0;
}
static void on_ready(void *ctx, uint64_t fetcher, void *token) {
  struct rec *r = add(ctx, A_READY);
  r->fetcher = fetcher;
  r->token = token;
}
static void on_drop(void *ctx, void *token) { add(ctx, A_DROP)->token = token; }
static void on_close(void *ctx, uint64_t fetcher) { add(ctx, A_CLOSE)->fetcher = fetcher; }
static void on_get(void *ctx, uint64_t job_id, const char *video, const char *key) {
  (void)key;
  struct rec *r = add(ctx, A_GET);
  r->job_id = job_id;
  snprintf(r->video, sizeof(r->video), "%s", video);
}
static void on_claim(void *ctx, uint64_t job_id, const char *video, const char *key, uint64_t ttl_ms) {
  (void)key;
  struct rec *r = add(ctx, A_CLAIM);
  r->job_id = job_id;
  r->ttl_ms = ttl_ms;
  snprintf(r->video, sizeof(r->video), "%s", video);
}
static void on_put(void *ctx, const char *video, const char *key, const struct proto_result *res, uint64_t ttl_ms) {
  struct fx *f = ctx;
  snprintf(f->last_put_key, sizeof(f->last_put_key), "%s", key);
  struct rec *r = add(ctx, A_PUT);
  r->outcome = res->outcome;
  r->ttl_ms = ttl_ms;
  snprintf(r->video, sizeof(r->video), "%s", video);
}
static void on_release(void *ctx, uint64_t job_id, const char *video, const char *key) {
  (void)key;
  struct rec *r = add(ctx, A_RELEASE);
  r->job_id = job_id;
  snprintf(r->video, sizeof(r->video), "%s", video);
}

static void on_renew(void *ctx, uint64_t job_id, const char *video, const char *key, uint64_t ttl_ms) {
  (void)key;
  struct rec *r = add(ctx, A_RENEW);
  r->job_id = job_id;
  r->ttl_ms = ttl_ms;
  snprintf(r->video, sizeof(r->video), "%s", video);
}

static void start(struct fx *f, bool redis) {
  char err[256];
  assert_int_equal(config_load(&f->cfg, err, sizeof(err)), 0);
  f->cfg.job_timeout_ms = 5000;
  f->cfg.speech_timeout_ms = 60000;
  f->cfg.speech_fallback = true;
  f->cfg.speech_max_concurrent = 1;
  f->cfg.cache_ttl_s = 600;
  f->cfg.negative_ttl_s = 60;
  f->cfg.cache_max_mb = 16;
  f->cfg.jobs_max_fetchers = 3;
  struct core_ops ops = {.ctx = f,
                         .answer = on_answer,
                         .send_job = on_send_job,
                         .send_ready = on_ready,
                         .drop_token = on_drop,
                         .close_fetcher = on_close};
  if (redis) {
    ops.redis_get = on_get;
    ops.redis_claim = on_claim;
    ops.redis_put = on_put;
    ops.redis_release = on_release;
    ops.redis_renew = on_renew;
  }
  f->core = core_new(&f->cfg, &ops);
  assert_non_null(f->core);
}

static int setup(void **state) {
  static struct fx f;
  memset(&f, 0, sizeof(f));
  *state = &f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;
  core_free(f->core);
  return 0;
}

/* The next action recorded, which must be act. */
static struct rec *next(struct fx *f, enum act act) {
  if (f->seen >= f->n) fail_msg("no action %d recorded (%zu seen)", act, f->seen);
  struct rec *r = &f->rec[f->seen++];
  if (r->act != act) fail_msg("action %zu is %d, not %d", f->seen - 1, r->act, act);
  return r;
}
static void none(struct fx *f) {
  if (f->seen != f->n) fail_msg("unexpected action %d", f->rec[f->seen].act);
}

static struct proto_job request(const char *video) {
  struct proto_job j;
  memset(&j, 0, sizeof(j));
  snprintf(j.video_id, sizeof(j.video_id), "%s", video);
  snprintf(j.lang, sizeof(j.lang), "en");
  snprintf(j.request_id, sizeof(j.request_id), "req-%s", video);
  j.kind = PROTO_KIND_CAPTIONS;
  return j;
}

static struct proto_result result(uint64_t job_id, uint8_t outcome, const char *body) {
  struct proto_result r;
  memset(&r, 0, sizeof(r));
  r.job_id = job_id;
  r.outcome = outcome;
  r.source = PROTO_SOURCE_CAPTIONS;
  snprintf(r.lang, sizeof(r.lang), "en");
  r.body = body;
  r.body_len = body != NULL ? (uint32_t)strlen(body) : 0;
  return r;
}

#define TOKEN(n) ((void *)(uintptr_t)(0x1000 + (n)))

static void ready(struct fx *f, uint64_t now, uint64_t fetcher, int token) {
  core_fetcher_msg(f->core, now, fetcher, TOKEN(token), CORE_READY, 0, NULL);
}
static void deliver(struct fx *f, uint64_t now, uint64_t fetcher, int token, const struct proto_result *res) {
  core_fetcher_msg(f->core, now, fetcher, TOKEN(token), CORE_RESULT, 0, res);
}
static struct dispatcher_stats stats(struct fx *f) {
  struct dispatcher_stats st;
  core_stats(f->core, &st);
  return st;
}

static void test_a_job_is_coalesced_assigned_answered_to_all_and_cached(void **state) {
  struct fx *f = *state;
  start(f, false);
  struct proto_job a = request("vidAAAAAAA1");
  core_request(f->core, T0, &f->w[0], &a);
  assert_int_equal(core_tick(f->core, T0, 1000), T0 + 1000); /* no fetcher: nothing due before the idle wake */
  none(f);
  core_request(f->core, T0 + 10, &f->w[1], &a);
  core_fetcher_added(f->core, T0 + 20, 7);
  ready(f, T0 + 30, 7, 1);
  core_tick(f->core, T0 + 30, 1000);
  struct rec *r = next(f, A_JOB);
  assert_int_equal(r->fetcher, 7);
  assert_ptr_equal(r->token, TOKEN(1));
  assert_string_equal(r->video, "vidAAAAAAA1");
  assert_int_equal(r->kind, PROTO_KIND_CAPTIONS);
  assert_int_equal(r->deadline_ms, 5000 - 30);
  uint64_t job = r->job_id;
  none(f);

  struct proto_result res = result(job, PROTO_OK, BODY_OK);
  deliver(f, T0 + 500, 7, 2, &res);
  r = next(f, A_ANSWER);
  assert_ptr_equal(r->w, &f->w[0]);
  assert_int_equal(r->outcome, PROTO_OK);
  assert_int_equal(r->cache_ms, 600000);
  assert_ptr_equal(next(f, A_ANSWER)->w, &f->w[1]);
  none(f);

  /* A hit, with the lifetime left; the fetcher is idle again and gets nothing. */
  core_request(f->core, T0 + 1500, &f->w[2], &a);
  r = next(f, A_ANSWER);
  assert_int_equal(r->outcome, PROTO_OK);
  assert_int_equal(r->cache_ms, 600000 - 1000);
  core_tick(f->core, T0 + 1500, 1000);
  none(f);
  struct dispatcher_stats st = stats(f);
  assert_int_equal(st.requests, 3);
  assert_int_equal(st.cache_hits, 1);
  assert_int_equal(st.cache_misses, 2);
  assert_int_equal(st.coalesced, 1);
  assert_int_equal(st.jobs_created, 1);
  assert_int_equal(st.outcome_ok, 1);
  assert_int_equal(st.fetchers_idle, 1);
}

static void test_deadlines_fail_queued_and_running_jobs(void **state) {
  struct fx *f = *state;
  start(f, false);
  struct proto_job a = request("vidAAAAAAA1"), b = request("vidBBBBBBB2");
  core_request(f->core, T0, &f->w[0], &a);
  /* The next wake is the queued job's deadline. */
  assert_int_equal(core_tick(f->core, T0 + 1, 60000), T0 + 5000);
  none(f);
  core_tick(f->core, T0 + 5000, 60000);
  /* Waited to its deadline (with no fetcher, nothing could tell sooner): shed, 503 with Retry-After, never a 500. */
  struct rec *r = next(f, A_ANSWER);
  assert_int_equal(r->outcome, PROTO_OVERLOADED);
  assert_int_equal(proto_outcome_status(r->outcome), 503);
  assert_int_equal(r->retry_after_s, CORE_SHED_MIN_RETRY_S);
  assert_string_equal(r->detail, "queue_timeout");
  assert_int_equal(r->cache_ms, 0);
  assert_int_equal(stats(f).shed_deadline, 1);

  core_request(f->core, T0 + 6000, &f->w[1], &b);
  ready(f, T0 + 6000, 3, 1);
  core_tick(f->core, T0 + 6000, 60000);
  uint64_t job = next(f, A_JOB)->job_id;
  /* Running: failed at its deadline plus the grace for a late result. */
  assert_int_equal(core_tick(f->core, T0 + 6001, 60000), T0 + 11000 + VTS_DISPATCH_RESULT_GRACE_MS);
  core_tick(f->core, T0 + 11000 + VTS_DISPATCH_RESULT_GRACE_MS, 60000);
  r = next(f, A_ANSWER);
  assert_ptr_equal(r->w, &f->w[1]);
  assert_string_equal(r->detail, "job_timeout");
  /* Its result, late, is dropped; the fetcher is idle again. */
  struct proto_result res = result(job, PROTO_OK, BODY_OK);
  deliver(f, T0 + 13000, 3, 2, &res);
  none(f);
  struct dispatcher_stats st = stats(f);
  assert_int_equal(st.queue_timeouts, 1);
  assert_int_equal(st.run_timeouts, 1);
  assert_int_equal(st.late_results, 1);
  assert_int_equal(st.fetchers_idle, 1);
  /* Nor was it kept: the same video asked again is a new job, given to that fetcher. */
  core_request(f->core, T0 + 13001, &f->w[2], &b);
  core_tick(f->core, T0 + 13001, 60000);
  r = next(f, A_JOB);
  assert_int_equal(r->fetcher, 3);
  assert_ptr_equal(r->token, TOKEN(2));
  assert_int_not_equal(r->job_id, job);
  none(f);
}

static void test_a_lost_fetcher_fails_its_job_and_a_decline_goes_first_in_line(void **state) {
  struct fx *f = *state;
  start(f, false);
  struct proto_job a = request("vidAAAAAAA1"), b = request("vidBBBBBBB2");
  core_request(f->core, T0, &f->w[0], &a);
  core_request(f->core, T0, &f->w[1], &b);
  ready(f, T0, 1, 1);
  core_tick(f->core, T0, 1000);
  struct rec *r = next(f, A_JOB);
  assert_string_equal(r->video, "vidAAAAAAA1");
  core_fetcher_gone(f->core, T0 + 5, 1);
  r = next(f, A_ANSWER);
  assert_ptr_equal(r->w, &f->w[0]);
  assert_string_equal(r->detail, "fetcher_lost");

  ready(f, T0 + 10, 2, 2);
  core_tick(f->core, T0 + 10, 1000);
  uint64_t job = next(f, A_JOB)->job_id;
  /* Busy elsewhere: given back unrun, acknowledged with READY, and the next idle fetcher gets it. */
  core_fetcher_msg(f->core, T0 + 20, 2, TOKEN(3), CORE_DECLINE, job, NULL);
  r = next(f, A_READY);
  assert_int_equal(r->fetcher, 2);
  assert_ptr_equal(r->token, TOKEN(3));
  ready(f, T0 + 30, 4, 4);
  core_tick(f->core, T0 + 30, 1000);
  r = next(f, A_JOB);
  assert_int_equal(r->fetcher, 4);
  assert_int_equal(r->job_id, job);
  none(f);
  /* Messages of the lost connection are refused from now on. */
  ready(f, T0 + 40, 1, 5);
  assert_ptr_equal(next(f, A_DROP)->token, TOKEN(5));
  struct dispatcher_stats st = stats(f);
  assert_int_equal(st.fetcher_lost, 1);
  assert_int_equal(st.jobs_declined, 1);
  assert_int_equal(st.jobs_in_flight, 1);
}

/* Starts the core, asks for vidAAAAAAA1 (waiter 0) and gives it to fetcher 1: returns the record of that job. */
static struct rec *assign_one(struct fx *f) {
  start(f, false);
  struct proto_job a = request("vidAAAAAAA1");
  core_request(f->core, T0, &f->w[0], &a);
  ready(f, T0, 1, 1);
  core_tick(f->core, T0, 1000);
  return next(f, A_JOB);
}

/* A job given back for want of budget goes on, first in line, carrying the count; one given back as busy does not. */
static void test_a_budget_decline_is_counted_in_the_job(void **state) {
  struct fx *f = *state;
  struct rec *r = assign_one(f);
  uint64_t job = r->job_id;
  assert_int_equal(r->declines, 0);
  core_fetcher_msg(f->core, T0 + 10, 1, TOKEN(2), CORE_DECLINE_BUDGET, job, NULL);
  assert_ptr_equal(next(f, A_READY)->token, TOKEN(2));
  ready(f, T0 + 20, 1, 3);
  core_tick(f->core, T0 + 20, 1000);
  r = next(f, A_JOB);
  assert_int_equal(r->job_id, job);
  assert_int_equal(r->declines, 1);
  core_fetcher_msg(f->core, T0 + 30, 1, TOKEN(4), CORE_DECLINE, job, NULL);
  assert_ptr_equal(next(f, A_READY)->token, TOKEN(4));
  core_fetcher_msg(f->core, T0 + 40, 1, TOKEN(5), CORE_READY, 0, NULL);
  core_tick(f->core, T0 + 40, 1000);
  r = next(f, A_JOB);
  assert_int_equal(r->job_id, job);
  assert_int_equal(r->declines, 1);
  /* The deadline stays the job's own: 40 ms of its 5 s went by. */
  assert_int_equal(r->deadline_ms, 5000 - 40);
  none(f);
  assert_int_equal(stats(f).jobs_declined, 2);
}

static void test_no_captions_becomes_a_speech_job_within_its_concurrency(void **state) {
  struct fx *f = *state;
  start(f, false);
  struct proto_job a = request("vidAAAAAAA1"), b = request("vidBBBBBBB2");
  core_request(f->core, T0, &f->w[0], &a);
  core_request(f->core, T0, &f->w[1], &b);
  ready(f, T0, 1, 1);
  ready(f, T0, 2, 2);
  core_tick(f->core, T0, 1000);
  uint64_t ja = next(f, A_JOB)->job_id, jb = next(f, A_JOB)->job_id;
  struct proto_result none_a = result(ja, PROTO_NO_CAPTIONS, NULL), none_b = result(jb, PROTO_NO_CAPTIONS, NULL);
  deliver(f, T0 + 100, 1, 3, &none_a);
  deliver(f, T0 + 100, 2, 4, &none_b);
  core_tick(f->core, T0 + 100, 1000);
  /* One speech job at a time: the second waits for the first. */
  struct rec *r = next(f, A_JOB);
  assert_int_equal(r->kind, PROTO_KIND_SPEECH);
  assert_int_equal(r->job_id, ja);
  assert_int_equal(r->deadline_ms, 60000);
  none(f);
  struct proto_result ok = result(ja, PROTO_OK, BODY_OK);
  deliver(f, T0 + 200, 1, 5, &ok);
  assert_int_equal(next(f, A_ANSWER)->outcome, PROTO_OK);
  core_tick(f->core, T0 + 200, 1000);
  r = next(f, A_JOB);
  assert_int_equal(r->kind, PROTO_KIND_SPEECH);
  assert_int_equal(r->job_id, jb);
  assert_int_equal(stats(f).speech_jobs, 2);
}

static void test_not_available_is_kept_for_the_negative_lifetime_and_a_failure_not_at_all(void **state) {
  struct fx *f = *state;
  start(f, false);
  f->cfg.speech_fallback = false; /* read by the core at each result */
  struct proto_job a = request("vidAAAAAAA1"), b = request("vidBBBBBBB2"), c = request("vidCCCCCCC3");
  core_request(f->core, T0, &f->w[0], &a);
  core_request(f->core, T0, &f->w[1], &b);
  core_request(f->core, T0, &f->w[2], &c);
  ready(f, T0, 1, 1);
  ready(f, T0, 2, 2);
  ready(f, T0, 3, 3);
  core_tick(f->core, T0, 1000);
  uint64_t ja = next(f, A_JOB)->job_id, jb = next(f, A_JOB)->job_id, jc = next(f, A_JOB)->job_id;
  struct proto_result gone = result(ja, PROTO_NOT_AVAILABLE, NULL), no_captions = result(jb, PROTO_NO_CAPTIONS, NULL),
                      failed = result(jc, PROTO_UPSTREAM_FAILED, NULL);
  deliver(f, T0 + 100, 1, 4, &gone);
  struct rec *r = next(f, A_ANSWER);
  assert_int_equal(r->outcome, PROTO_NOT_AVAILABLE);
  assert_int_equal(r->cache_ms, 60000);
  /* Without speech, a video without captions is not available, kept as long. */
  deliver(f, T0 + 100, 2, 5, &no_captions);
  r = next(f, A_ANSWER);
  assert_int_equal(r->outcome, PROTO_NOT_AVAILABLE);
  assert_int_equal(r->cache_ms, 60000);
  deliver(f, T0 + 100, 3, 6, &failed);
  r = next(f, A_ANSWER);
  assert_int_equal(r->outcome, PROTO_UPSTREAM_FAILED);
  assert_int_equal(r->cache_ms, 0);
  none(f);

  /* Within the negative lifetime both are answered from the cache with what is left; the failure is asked again. */
  core_request(f->core, T0 + 60099, &f->w[3], &a);
  r = next(f, A_ANSWER);
  assert_int_equal(r->outcome, PROTO_NOT_AVAILABLE);
  assert_int_equal(r->cache_ms, 1);
  core_request(f->core, T0 + 60099, &f->w[4], &b);
  assert_int_equal(next(f, A_ANSWER)->cache_ms, 1);
  core_request(f->core, T0 + 60099, &f->w[5], &c);
  core_tick(f->core, T0 + 60099, 1000);
  r = next(f, A_JOB);
  assert_string_equal(r->video, "vidCCCCCCC3");
  assert_int_not_equal(r->job_id, jc);
  none(f);
  /* At its end the entry is gone: the video is asked of a fetcher again. */
  core_request(f->core, T0 + 60100, &f->w[6], &a);
  core_tick(f->core, T0 + 60100, 1000);
  assert_string_equal(next(f, A_JOB)->video, "vidAAAAAAA1");
  none(f);
  struct dispatcher_stats st = stats(f);
  assert_int_equal(st.outcome_not_available, 2);
  assert_int_equal(st.outcome_upstream_failed, 1);
  assert_int_equal(st.cache_hits, 2);
  assert_int_equal(st.speech_jobs, 0);
}

static void test_captions_jobs_go_before_speech_jobs(void **state) {
  struct fx *f = *state;
  start(f, false);
  struct proto_job a = request("vidAAAAAAA1"), b = request("vidBBBBBBB2");
  core_request(f->core, T0, &f->w[0], &a);
  ready(f, T0, 1, 1);
  core_tick(f->core, T0, 1000);
  uint64_t ja = next(f, A_JOB)->job_id;
  core_request(f->core, T0 + 10, &f->w[1], &b); /* queued: the only fetcher is busy */
  core_tick(f->core, T0 + 10, 1000);
  none(f);
  /* A comes back without captions and becomes a speech job; its fetcher is idle again and gets B first. */
  struct proto_result no_captions = result(ja, PROTO_NO_CAPTIONS, NULL);
  deliver(f, T0 + 20, 1, 2, &no_captions);
  core_tick(f->core, T0 + 20, 1000);
  struct rec *r = next(f, A_JOB);
  assert_string_equal(r->video, "vidBBBBBBB2");
  assert_int_equal(r->kind, PROTO_KIND_CAPTIONS);
  assert_ptr_equal(r->token, TOKEN(2));
  uint64_t jb = r->job_id;
  none(f);
  struct proto_result ok = result(jb, PROTO_OK, BODY_OK);
  deliver(f, T0 + 30, 1, 3, &ok);
  assert_ptr_equal(next(f, A_ANSWER)->w, &f->w[1]);
  core_tick(f->core, T0 + 30, 1000);
  r = next(f, A_JOB);
  assert_int_equal(r->job_id, ja);
  assert_int_equal(r->kind, PROTO_KIND_SPEECH);
  assert_ptr_equal(r->token, TOKEN(3));
  none(f);
}

static void test_a_leaving_fetcher_is_acknowledged_given_nothing_and_forgotten(void **state) {
  struct fx *f = *state;
  start(f, false);
  struct proto_job a = request("vidAAAAAAA1"), b = request("vidBBBBBBB2");
  core_request(f->core, T0, &f->w[0], &a);
  core_request(f->core, T0, &f->w[1], &b);
  ready(f, T0, 1, 1);
  core_tick(f->core, T0, 1000);
  uint64_t ja = next(f, A_JOB)->job_id;
  /* Its last result is answered, then acknowledged with READY, and the queued B is not given to it. */
  struct proto_result ok = result(ja, PROTO_OK, BODY_OK);
  core_fetcher_msg(f->core, T0 + 10, 1, TOKEN(2), CORE_RESULT_LAST, 0, &ok);
  core_tick(f->core, T0 + 10, 1000);
  assert_ptr_equal(next(f, A_ANSWER)->w, &f->w[0]);
  struct rec *r = next(f, A_READY);
  assert_int_equal(r->fetcher, 1);
  assert_ptr_equal(r->token, TOKEN(2));
  none(f);
  /* Forgotten: asking again, even with no other fetcher in line, gets it nothing; its request is dropped. */
  ready(f, T0 + 20, 1, 3);
  assert_ptr_equal(next(f, A_DROP)->token, TOKEN(3));
  core_tick(f->core, T0 + 20, 1000);
  none(f);
  ready(f, T0 + 30, 2, 4);
  core_tick(f->core, T0 + 30, 1000);
  r = next(f, A_JOB);
  assert_int_equal(r->fetcher, 2);
  assert_string_equal(r->video, "vidBBBBBBB2");
  /* Its connection dropping fails nothing. */
  core_fetcher_gone(f->core, T0 + 40, 1);
  none(f);
  struct dispatcher_stats st = stats(f);
  assert_int_equal(st.fetcher_lost, 0);
  assert_int_equal(st.jobs_in_flight, 1);
  assert_int_equal(st.fetchers_connected, 1);
}

static void test_a_body_that_is_not_a_transcript_fails_and_is_not_cached(void **state) {
  struct fx *f = *state;
  uint64_t job = assign_one(f)->job_id;
  struct proto_job a = request("vidAAAAAAA1");
  struct proto_result bad = result(job, PROTO_OK, "{\"videoId\":\"vidAAAAAAA1\"}");
  deliver(f, T0 + 1, 1, 2, &bad);
  struct rec *r = next(f, A_ANSWER);
  assert_int_equal(r->outcome, PROTO_INTERNAL);
  assert_string_equal(r->detail, "bad_result");
  core_request(f->core, T0 + 2, &f->w[1], &a);
  core_tick(f->core, T0 + 2, 1000);
  assert_int_not_equal(next(f, A_JOB)->job_id, job); /* asked again: nothing was kept */
  assert_int_equal(stats(f).results_refused, 1);
}

static void test_connections_beyond_the_cap_and_protocol_errors_are_closed(void **state) {
  struct fx *f = *state;
  start(f, false);
  for (uint64_t id = 1; id <= 4; id++) core_fetcher_added(f->core, T0, id);
  assert_int_equal(next(f, A_CLOSE)->fetcher, 4);
  ready(f, T0, 4, 1);
  assert_ptr_equal(next(f, A_DROP)->token, TOKEN(1));

  struct proto_job a = request("vidAAAAAAA1");
  core_request(f->core, T0, &f->w[0], &a);
  ready(f, T0, 1, 2);
  core_tick(f->core, T0, 1000);
  uint64_t job = next(f, A_JOB)->job_id;
  struct proto_result other = result(job + 99, PROTO_OK, BODY_OK);
  deliver(f, T0 + 1, 1, 3, &other);
  assert_ptr_equal(next(f, A_DROP)->token, TOKEN(3));
  assert_string_equal(next(f, A_ANSWER)->detail, "protocol_error");
  assert_int_equal(next(f, A_CLOSE)->fetcher, 1);
  core_fetcher_msg(f->core, T0 + 2, 2, TOKEN(4), CORE_MALFORMED, 0, NULL);
  assert_ptr_equal(next(f, A_DROP)->token, TOKEN(4));
  assert_int_equal(next(f, A_CLOSE)->fetcher, 2);
  /* A job that cannot be sent stays first in line; that fetcher is dropped. */
  core_request(f->core, T0 + 3, &f->w[1], &a);
  ready(f, T0 + 3, 3, 5);
  f->send_fails = 1;
  core_tick(f->core, T0 + 3, 1000);
  assert_int_equal(next(f, A_JOB)->fetcher, 3);
  assert_int_equal(next(f, A_CLOSE)->fetcher, 3);
  ready(f, T0 + 4, 5, 6);
  core_tick(f->core, T0 + 4, 1000);
  assert_int_equal(next(f, A_JOB)->fetcher, 5);
  struct dispatcher_stats st = stats(f);
  assert_int_equal(st.fetchers_refused, 1);
  assert_int_equal(st.protocol_errors, 2);
  assert_int_equal(st.fetchers_connected, 1);
  /* Dead connections are forgotten after their tombstone. */
  core_tick(f->core, T0 + VTS_DISPATCH_PIPE_TOMBSTONE_MS + 10, 100000);
  ready(f, T0 + VTS_DISPATCH_PIPE_TOMBSTONE_MS + 20, 4, 7);
  assert_int_equal(stats(f).fetchers_connected, 2); /* id 4 is new again, and idle */
}

static void test_a_bad_request_and_a_full_table_are_answered_at_once(void **state) {
  struct fx *f = *state;
  start(f, false);
  core_request(f->core, T0, &f->w[0], NULL);
  struct rec *r = next(f, A_ANSWER);
  assert_int_equal(r->outcome, PROTO_INTERNAL);
  assert_string_equal(r->detail, "bad_request");
  static struct core_waiter many[VTS_DISPATCH_MAX_JOBS];
  for (int i = 0; i < VTS_DISPATCH_MAX_JOBS; i++) {
    struct proto_job j = request("vid00000000");
    snprintf(j.video_id, sizeof(j.video_id), "v%010d", i);
    core_request(f->core, T0, &many[i], &j);
  }
  none(f);
  struct proto_job one = request("vidAAAAAAA1");
  core_request(f->core, T0, &f->w[1], &one);
  assert_string_equal(next(f, A_ANSWER)->detail, "queue_full");
  assert_int_equal(stats(f).rejected_full, 1);
  assert_int_equal(stats(f).jobs_queued, VTS_DISPATCH_MAX_JOBS);
}

/* ---- with Redis: lookups and claims ---- */

static void test_a_won_claim_runs_here_writes_redis_then_releases(void **state) {
  struct fx *f = *state;
  start(f, true);
  struct proto_job a = request("vidAAAAAAA1");
  core_request(f->core, T0, &f->w[0], &a);
  uint64_t job = next(f, A_GET)->job_id;
  core_request(f->core, T0 + 1, &f->w[1], &a); /* joins the lookup */
  none(f);
  core_redis_got(f->core, T0 + 3, job, -ENOENT, NULL, 0);
  struct rec *r = next(f, A_CLAIM);
  assert_int_equal(r->job_id, job);
  assert_int_equal(r->ttl_ms, CORE_CLAIM_TTL_MS); /* short: renewed while the job lives */
  core_redis_claimed(f->core, T0 + 5, job, 1);
  ready(f, T0 + 5, 1, 1);
  core_tick(f->core, T0 + 5, 1000);
  assert_int_equal(next(f, A_JOB)->job_id, job);
  struct proto_result ok = result(job, PROTO_OK, BODY_OK);
  deliver(f, T0 + 100, 1, 2, &ok);
  r = next(f, A_PUT);
  assert_int_equal(r->outcome, PROTO_OK);
  assert_int_equal(r->ttl_ms, 600000);
  assert_int_equal(next(f, A_RELEASE)->job_id, job); /* after the result is in Redis */
  assert_ptr_equal(next(f, A_ANSWER)->w, &f->w[0]);
  assert_ptr_equal(next(f, A_ANSWER)->w, &f->w[1]);
  none(f);
  assert_int_equal(stats(f).claims_won, 1);
}

static void test_a_lost_claim_waits_and_is_answered_from_redis(void **state) {
  struct fx *f = *state;
  start(f, true);
  struct proto_job a = request("vidAAAAAAA1");
  core_request(f->core, T0, &f->w[0], &a);
  uint64_t job = next(f, A_GET)->job_id;
  core_redis_got(f->core, T0 + 1, job, -ENOENT, NULL, 0);
  next(f, A_CLAIM);
  core_redis_claimed(f->core, T0 + 2, job, 0);
  ready(f, T0 + 2, 1, 1); /* an idle fetcher gets nothing: the job is another gateway's */
  assert_int_equal(core_tick(f->core, T0 + 2, 1000), T0 + 2 + CORE_CLAIM_POLL_MS);
  none(f);
  core_tick(f->core, T0 + 2 + CORE_CLAIM_POLL_MS, 1000);
  assert_int_equal(next(f, A_GET)->job_id, job);
  /* Still no result when it looked, but there is one when it claims: it reads it instead of fetching. */
  core_redis_got(f->core, T0 + 53, job, -ENOENT, NULL, 0);
  next(f, A_CLAIM);
  core_redis_claimed(f->core, T0 + 55, job, 2);
  assert_int_equal(next(f, A_GET)->job_id, job);
  struct proto_result hit = result(0, PROTO_OK, BODY_OK);
  core_redis_got(f->core, T0 + 60, job, 0, &hit, 300000);
  struct rec *r = next(f, A_ANSWER);
  assert_int_equal(r->outcome, PROTO_OK);
  assert_int_equal(r->cache_ms, 300000);
  none(f);
  /* Kept here for its lifetime left. */
  core_request(f->core, T0 + 1060, &f->w[1], &a);
  r = next(f, A_ANSWER);
  assert_int_equal(r->cache_ms, 300000 - 1000);
  struct dispatcher_stats st = stats(f);
  assert_int_equal(st.claims_waited, 1);
  assert_int_equal(st.redis_hits, 1);
  assert_int_equal(st.claims_won, 0);
  assert_int_equal(st.jobs_waiting, 0);
}

static void test_a_claim_gone_without_a_result_is_taken_over(void **state) {
  struct fx *f = *state;
  start(f, true);
  struct proto_job a = request("vidAAAAAAA1");
  core_request(f->core, T0, &f->w[0], &a);
  uint64_t job = next(f, A_GET)->job_id;
  core_redis_got(f->core, T0, job, -ENOENT, NULL, 0);
  next(f, A_CLAIM);
  core_redis_claimed(f->core, T0, job, 0);
  core_tick(f->core, T0 + CORE_CLAIM_POLL_MS, 1000);
  next(f, A_GET);
  core_redis_got(f->core, T0 + CORE_CLAIM_POLL_MS, job, -ENOENT, NULL, 0);
  assert_int_equal(next(f, A_CLAIM)->ttl_ms, CORE_CLAIM_TTL_MS);
  core_redis_claimed(f->core, T0 + CORE_CLAIM_POLL_MS, job, 1);
  ready(f, T0 + 60, 1, 1);
  core_tick(f->core, T0 + 60, 1000);
  assert_int_equal(next(f, A_JOB)->job_id, job);
  assert_int_equal(stats(f).claim_takeovers, 1);
  /* A failed job releases its claim at once, and writes nothing. */
  core_fetcher_gone(f->core, T0 + 70, 1);
  assert_int_equal(next(f, A_RELEASE)->job_id, job);
  assert_string_equal(next(f, A_ANSWER)->detail, "fetcher_lost");
  none(f);
}

static void test_redis_faults_never_hold_a_job_back(void **state) {
  struct fx *f = *state;
  start(f, true);
  struct proto_job a = request("vidAAAAAAA1"), b = request("vidBBBBBBB2"), c = request("vidCCCCCCC3");
  core_request(f->core, T0, &f->w[0], &a);
  core_request(f->core, T0, &f->w[1], &b);
  core_request(f->core, T0, &f->w[2], &c);
  uint64_t ja = next(f, A_GET)->job_id, jb = next(f, A_GET)->job_id, jc = next(f, A_GET)->job_id;
  core_redis_got(f->core, T0 + 1, ja, -EIO, NULL, 0); /* no lookup: run here, unclaimed */
  core_redis_got(f->core, T0 + 1, jb, -ENOENT, NULL, 0);
  next(f, A_CLAIM);
  core_redis_claimed(f->core, T0 + 2, jb, -EIO); /* no claim: run here too */
  ready(f, T0 + 2, 1, 1);
  ready(f, T0 + 2, 2, 2);
  core_tick(f->core, T0 + 2, 1000);
  assert_int_equal(next(f, A_JOB)->job_id, ja);
  assert_int_equal(next(f, A_JOB)->job_id, jb);
  struct proto_result ok = result(ja, PROTO_OK, BODY_OK);
  deliver(f, T0 + 3, 1, 3, &ok);
  next(f, A_PUT); /* shared if Redis takes it, never released: it was never claimed */
  next(f, A_ANSWER);
  none(f);
  /* A lookup that never answers ends at the job's deadline. */
  core_tick(f->core, T0 + 5000, 1000);
  struct rec *r = next(f, A_ANSWER);
  assert_ptr_equal(r->w, &f->w[2]);
  assert_string_equal(r->detail, "queue_timeout");
  core_redis_got(f->core, T0 + 5001, jc, -ENOENT, NULL, 0); /* too late: for no job */
  none(f);
}

/*
 * What a fetcher learnt of a video's player reply is kept beside the cache for the lifetime it gave, handed with the
 * video's next jobs (another language, a translation, its tracks), never with another video's, never to a worker.
 */
static void test_a_player_summary_is_handed_with_the_videos_next_jobs_for_its_lifetime(void **state) {
  struct fx *f = *state;
  start(f, false);
  static const char summary[] =
      "{\"playabilityStatus\":{\"status\":\"OK\"},\"videoDetails\":{\"videoId\":\"vidAAAAAAA1\"},\"captions\":{"
      "\"playerCaptionsTracklistRenderer\":{\"captionTracks\":[],\"audioTracks\":[{\"defaultCaptionTrackIndex\":-1}],"
      "\"defaultAudioTrackIndex\":0,\"translationLanguages\":[]}}}";
  struct proto_job a = request("vidAAAAAAA1");
  core_request(f->core, T0, &f->w[0], &a);
  ready(f, T0, 7, 1);
  core_tick(f->core, T0, 1000);
  struct rec *r = next(f, A_JOB);
  assert_int_equal(r->player_len, 0); /* nothing known of the video yet */
  struct proto_result res = result(r->job_id, PROTO_OK, BODY_OK);
  res.player = summary;
  res.player_len = sizeof(summary) - 1;
  res.player_ttl_ms = 2000;
  deliver(f, T0 + 100, 7, 2, &res);
  r = next(f, A_ANSWER);
  assert_int_equal(r->outcome, PROTO_OK);
  assert_int_equal(r->player_len, 0);
  none(f);

  /* Another language and the tracks of the video: each job carries it. */
  struct proto_job b = request("vidAAAAAAA1");
  snprintf(b.lang, sizeof(b.lang), "fr");
  struct proto_job t = request("vidAAAAAAA1");
  t.kind = PROTO_KIND_TRACKS;
  struct proto_job *next_jobs[] = {&b, &t};
  for (int i = 0; i < 2; i++) {
    core_request(f->core, T0 + 200, &f->w[1], next_jobs[i]);
    core_tick(f->core, T0 + 200, 1000);
    r = next(f, A_JOB);
    assert_int_equal(r->player_len, sizeof(summary) - 1);
    assert_string_equal(r->player, summary);
    res = result(r->job_id, PROTO_OK,
                 next_jobs[i]->kind == PROTO_KIND_TRACKS ? "{\"tracks\":[],\"translationLanguages\":[]}" : BODY_OK);
    deliver(f, T0 + 300, 7, 3 + i, &res);
    assert_int_equal(next(f, A_ANSWER)->outcome, PROTO_OK);
    none(f);
  }

  /* Another video: nothing of it. */
  struct proto_job c = request("vidBBBBBBB2");
  core_request(f->core, T0 + 400, &f->w[2], &c);
  core_tick(f->core, T0 + 400, 1000);
  r = next(f, A_JOB);
  assert_int_equal(r->player_len, 0);
  res = result(r->job_id, PROTO_OK, BODY_OK);
  deliver(f, T0 + 500, 7, 5, &res);
  next(f, A_ANSWER);

  /* A summary that is not one is never kept nor handed on. */
  struct proto_job e = request("vidCCCCCCC3");
  core_request(f->core, T0 + 600, &f->w[2], &e);
  core_tick(f->core, T0 + 600, 1000);
  r = next(f, A_JOB);
  res = result(r->job_id, PROTO_OK, BODY_OK);
  res.player = "{\"playabilityStatus\":{\"status\":\"OK\"}}";
  res.player_len = (uint32_t)strlen(res.player);
  res.player_ttl_ms = 2000;
  deliver(f, T0 + 700, 7, 6, &res);
  next(f, A_ANSWER);
  snprintf(e.lang, sizeof(e.lang), "fr");
  core_request(f->core, T0 + 800, &f->w[2], &e);
  core_tick(f->core, T0 + 800, 1000);
  r = next(f, A_JOB);
  assert_int_equal(r->player_len, 0);
  res = result(r->job_id, PROTO_OK, BODY_OK);
  deliver(f, T0 + 900, 7, 7, &res);
  next(f, A_ANSWER);

  /* Past the lifetime the fetcher gave it (2 s from T0 + 100): the next job asks the platform again. */
  struct proto_job d = request("vidAAAAAAA1");
  snprintf(d.lang, sizeof(d.lang), "de");
  core_request(f->core, T0 + 2100, &f->w[3], &d);
  core_tick(f->core, T0 + 2100, 1000);
  r = next(f, A_JOB);
  assert_int_equal(r->player_len, 0);
  none(f);
}

/*
 * A summary of four tracks: en (manual), en (asr), pt-BR, de; the default track is the one at default_index, and the
 * one at po_index (-1: none) needs a PO token (exp=xpe in its URL).
 */
static void four_tracks(char *out, size_t cap, const char *video, int default_index, int po_index) {
  static const char *const tracks[][2] = {{"en", ""}, {"en", "asr"}, {"pt-BR", ""}, {"de", ""}};
  size_t n = (size_t)snprintf(out, cap,
                              "{\"playabilityStatus\":{\"status\":\"OK\"},\"videoDetails\":{\"videoId\":\"%s\"},"
                              "\"captions\":{\"playerCaptionsTracklistRenderer\":{\"captionTracks\":[",
                              video);
  for (int i = 0; i < 4; i++)
    n += (size_t)snprintf(
        out + n, cap - n,
        "%s{\"baseUrl\":\"https://example.test/api/timedtext?v=%s&lang=%s%s\",\"languageCode\":\"%s\","
        "\"name\":{\"simpleText\":\"x\"},\"kind\":\"%s\",\"isTranslatable\":true}",
        i > 0 ? "," : "", video, tracks[i][0], i == po_index ? "&exp=xpe" : "", tracks[i][0], tracks[i][1]);
  snprintf(out + n, cap - n,
           "],\"audioTracks\":[{\"defaultCaptionTrackIndex\":%d}],\"defaultAudioTrackIndex\":0,"
           "\"translationLanguages\":[]}}}",
           default_index);
}

/*
 * Runs the job of a request for lang of video, which the core must send asking ask to the idle fetcher 7, and answers
 * it with summary (the fetcher's message token).
 */
static void fetch_as(struct fx *f, uint64_t now, const char *video, const char *lang, const char *ask,
                     const char *summary, int token) {
  struct proto_job a = request(video);
  snprintf(a.lang, sizeof(a.lang), "%s", lang);
  core_request(f->core, now, &f->w[0], &a);
  core_tick(f->core, now, 1000);
  struct rec *r = next(f, A_JOB);
  assert_string_equal(r->lang, ask);
  struct proto_result res = result(r->job_id, PROTO_OK, BODY_OK);
  res.player = summary;
  res.player_len = summary != NULL ? (uint32_t)strlen(summary) : 0;
  res.player_ttl_ms = summary != NULL ? 60000 : 0;
  deliver(f, now + 1, 7, token, &res);
  assert_int_equal(next(f, A_ANSWER)->outcome, PROTO_OK);
  none(f);
}

/*
 * With the video's player summary at hand, a language the video lacks, or another spelling of a track's language,
 * is asked as the language of the track it would be served: answered from that entry when the cache holds it (no job),
 * else one job in that language. A default track that asking its own language would not choose (an asr track beside
 * a manual one of its language) leaves the request as it came.
 */
static void test_a_language_the_video_lacks_is_asked_as_its_served_track(void **state) {
  struct fx *f = *state;
  start(f, false);
  char summary[2048];
  four_tracks(summary, sizeof(summary), "vidLANG0001", 3, -1);
  ready(f, T0, 7, 1);
  fetch_as(f, T0, "vidLANG0001", "de", "de", summary, 2);
  uint64_t jobs = stats(f).jobs_created;

  static const char *const served_de[] = {"xx", "yyy", "de-AT", "zz-ZZ", ""};
  for (size_t i = 0; i < sizeof(served_de) / sizeof(served_de[0]); i++) {
    struct proto_job b = request("vidLANG0001");
    snprintf(b.lang, sizeof(b.lang), "%s", served_de[i]);
    core_request(f->core, T0 + 10, &f->w[1], &b);
    assert_int_equal(next(f, A_ANSWER)->outcome, PROTO_OK);
    none(f);
  }
  assert_int_equal(stats(f).jobs_created, jobs);

  /* Not held yet: one job, in the served track's language, which later spellings share. */
  fetch_as(f, T0 + 20, "vidLANG0001", "pt", "pt-BR", NULL, 3);
  fetch_as(f, T0 + 30, "vidLANG0001", "en-ZZ", "en", NULL, 4);
  struct proto_job c = request("vidLANG0001");
  snprintf(c.lang, sizeof(c.lang), "pt-PT");
  core_request(f->core, T0 + 40, &f->w[1], &c);
  assert_int_equal(next(f, A_ANSWER)->outcome, PROTO_OK);
  none(f);

  /* Asked first as "xx", before the tracks were known: "de", the language served, holds the answer too. */
  four_tracks(summary, sizeof(summary), "vidLANG0003", 3, -1);
  struct proto_job d = request("vidLANG0003");
  snprintf(d.lang, sizeof(d.lang), "xx");
  core_request(f->core, T0 + 42, &f->w[0], &d);
  core_tick(f->core, T0 + 42, 1000);
  struct rec *r = next(f, A_JOB);
  assert_string_equal(r->lang, "xx");
  struct proto_result res = result(r->job_id, PROTO_OK, BODY_OK);
  snprintf(res.lang, sizeof(res.lang), "de");
  res.player = summary;
  res.player_len = (uint32_t)strlen(summary);
  res.player_ttl_ms = 60000;
  deliver(f, T0 + 43, 7, 5, &res);
  assert_int_equal(next(f, A_ANSWER)->outcome, PROTO_OK);
  snprintf(d.lang, sizeof(d.lang), "de");
  core_request(f->core, T0 + 44, &f->w[1], &d);
  assert_int_equal(next(f, A_ANSWER)->outcome, PROTO_OK);
  none(f);

  /*
   * The default track is the asr one: "en" would choose the manual track, so "xx" is asked as the asr track's own
   * spelling, and "yyy" next is answered from what that fetch left.
   */
  four_tracks(summary, sizeof(summary), "vidLANG0002", 1, -1);
  fetch_as(f, T0 + 50, "vidLANG0002", "de", "de", summary, 6);
  fetch_as(f, T0 + 60, "vidLANG0002", "xx", "en" TRACKS_ASR_SUFFIX, NULL, 7);
  struct proto_job y = request("vidLANG0002");
  snprintf(y.lang, sizeof(y.lang), "yyy");
  core_request(f->core, T0 + 65, &f->w[1], &y);
  assert_int_equal(next(f, A_ANSWER)->outcome, PROTO_OK);
  none(f);

  /*
   * The default track (en) needs a PO token: a fetcher with a provider serves "xx" from it, one without from the first
   * other manual track; not knowing which, "xx" goes as it came. "de-AT" is "de" to both.
   */
  four_tracks(summary, sizeof(summary), "vidLANG0004", 0, 0);
  fetch_as(f, T0 + 70, "vidLANG0004", "de", "de", summary, 8);
  struct proto_job e = request("vidLANG0004");
  snprintf(e.lang, sizeof(e.lang), "de-AT");
  core_request(f->core, T0 + 75, &f->w[1], &e);
  assert_int_equal(next(f, A_ANSWER)->outcome, PROTO_OK);
  none(f);
  fetch_as(f, T0 + 80, "vidLANG0004", "xx", "xx", NULL, 9);
}

/*
 * A claim is short and renewed while its job is queued or runs, so a claimant that dies stops renewing and the others
 * take over within CORE_CLAIM_TTL_MS; the renewals end with the job.
 */
static void test_a_won_claim_is_renewed_while_its_job_lives_and_no_longer(void **state) {
  struct fx *f = *state;
  start(f, true);
  struct proto_job a = request("vidRENEW001");
  core_request(f->core, T0, &f->w[0], &a);
  uint64_t job = next(f, A_GET)->job_id;
  core_redis_got(f->core, T0, job, -ENOENT, NULL, 0);
  assert_int_equal(next(f, A_CLAIM)->ttl_ms, CORE_CLAIM_TTL_MS);
  core_redis_claimed(f->core, T0, job, 1);
  /* Queued (no fetcher yet): renewed when due, and the core asks to be woken for it. */
  assert_int_equal(core_tick(f->core, T0, 5000), T0 + CORE_CLAIM_RENEW_MS);
  none(f);
  core_tick(f->core, T0 + CORE_CLAIM_RENEW_MS, 5000);
  struct rec *r = next(f, A_RENEW);
  assert_int_equal(r->job_id, job);
  assert_int_equal(r->ttl_ms, CORE_CLAIM_TTL_MS);
  none(f);
  ready(f, T0 + 1500, 1, 1);
  core_tick(f->core, T0 + 1500, 5000);
  assert_int_equal(next(f, A_JOB)->job_id, job);
  /* Running: renewed every CORE_CLAIM_RENEW_MS. */
  core_tick(f->core, T0 + 2 * CORE_CLAIM_RENEW_MS, 5000);
  assert_int_equal(next(f, A_RENEW)->job_id, job);
  core_tick(f->core, T0 + 2 * CORE_CLAIM_RENEW_MS + 10, 5000);
  none(f);
  core_tick(f->core, T0 + 3 * CORE_CLAIM_RENEW_MS, 5000);
  assert_int_equal(next(f, A_RENEW)->job_id, job);
  struct proto_result ok = result(job, PROTO_OK, BODY_OK);
  deliver(f, T0 + 3100, 1, 2, &ok);
  next(f, A_PUT);
  next(f, A_RELEASE);
  next(f, A_ANSWER);
  core_tick(f->core, T0 + 10 * CORE_CLAIM_RENEW_MS, 5000);
  none(f);
}

/* A waiter whose claimant went silent takes the video over once the claim lapses: seconds, not the job deadline. */
static void test_a_waiter_takes_over_a_silent_claimant_within_the_claim_ttl(void **state) {
  struct fx *f = *state;
  start(f, true);
  f->cfg.job_timeout_ms = 30000; /* the core reads its limits from cfg: the deadline is far */
  struct proto_job a = request("vidSILENT01");
  core_request(f->core, T0, &f->w[0], &a);
  uint64_t job = next(f, A_GET)->job_id;
  core_redis_got(f->core, T0, job, -ENOENT, NULL, 0);
  next(f, A_CLAIM);
  core_redis_claimed(f->core, T0, job, 0); /* held by a gateway that is then killed */
  uint64_t now = T0, took = 0;
  /* Redis holds the dead claim for CORE_CLAIM_TTL_MS from its last renewal (at T0 at the latest): polls find it. */
  while (took == 0 && now < T0 + 10000) {
    uint64_t wake = core_tick(f->core, now, 1000);
    if (f->seen < f->n) {
      next(f, A_GET);
      core_redis_got(f->core, now, job, -ENOENT, NULL, 0);
      next(f, A_CLAIM);
      core_redis_claimed(f->core, now, job, now >= T0 + CORE_CLAIM_TTL_MS ? 1 : 0);
      if (now >= T0 + CORE_CLAIM_TTL_MS) took = now;
      none(f);
      f->n = f->seen = 0; /* a poll every CORE_CLAIM_POLL_MS: only the last ones matter */
      continue;
    }
    now = wake;
  }
  assert_true(took >= T0 + CORE_CLAIM_TTL_MS && took <= T0 + CORE_CLAIM_TTL_MS + CORE_CLAIM_POLL_MS);
  ready(f, now, 1, 1);
  core_tick(f->core, now, 1000);
  struct rec *r = next(f, A_JOB);
  assert_int_equal(r->job_id, job);
  assert_int_equal(stats(f).claim_takeovers, 1);
}

/* Spellings of one language are one key; a spelling served another's track shares that track's entry. */
static void test_spellings_are_one_key_and_share_the_served_track(void **state) {
  struct fx *f = *state;
  start(f, false);
  core_fetcher_added(f->core, T0, 7);
  ready(f, T0, 7, 1);
  struct proto_job a = request("vidSPELL001");
  snprintf(a.lang, sizeof(a.lang), "en-us");
  core_request(f->core, T0, &f->w[0], &a);
  snprintf(a.lang, sizeof(a.lang), "en-US");
  core_request(f->core, T0, &f->w[1], &a); /* the same key: coalesced */
  core_tick(f->core, T0, 1000);
  struct rec *r = next(f, A_JOB);
  struct proto_result res = result(r->job_id, PROTO_OK, BODY_OK);
  snprintf(res.lang, sizeof(res.lang), "en-US");
  deliver(f, T0 + 100, 7, 2, &res);
  assert_int_equal(next(f, A_ANSWER)->outcome, PROTO_OK);
  assert_int_equal(next(f, A_ANSWER)->outcome, PROTO_OK);
  snprintf(a.lang, sizeof(a.lang), "en-Us");
  core_request(f->core, T0 + 200, &f->w[2], &a);
  assert_int_equal(next(f, A_ANSWER)->outcome, PROTO_OK); /* a hit */
  none(f);
  /* An unknown language served the same track: one more small entry, the body shared. */
  snprintf(a.lang, sizeof(a.lang), "xx");
  core_request(f->core, T0 + 300, &f->w[3], &a);
  core_tick(f->core, T0 + 300, 1000);
  r = next(f, A_JOB);
  res.job_id = r->job_id;
  deliver(f, T0 + 400, 7, 3, &res);
  assert_int_equal(next(f, A_ANSWER)->outcome, PROTO_OK);
  none(f);
  struct dispatcher_stats st = stats(f);
  assert_int_equal(st.jobs_created, 2);
  assert_int_equal(st.coalesced, 1);
  assert_int_equal(st.cache_hits, 1);
  assert_int_equal(st.cache_entries, 3); /* the track, and the keys "en-US" and "xx" aliasing it */
}

/* A video that cannot be played is one entry: every language and kind of it is answered from it, no job. */
static void test_a_video_that_cannot_be_played_answers_every_key_of_it(void **state) {
  struct fx *f = *state;
  start(f, true);
  struct proto_job a = request("vidGONE0001");
  core_request(f->core, T0, &f->w[0], &a);
  struct rec *r = next(f, A_GET);
  core_redis_got(f->core, T0 + 1, r->job_id, -ENOENT, NULL, 0);
  r = next(f, A_CLAIM);
  core_redis_claimed(f->core, T0 + 2, r->job_id, 1);
  core_fetcher_added(f->core, T0 + 3, 7);
  ready(f, T0 + 3, 7, 1);
  core_tick(f->core, T0 + 3, 1000);
  r = next(f, A_JOB);
  struct proto_result res = result(r->job_id, PROTO_NOT_AVAILABLE, NULL);
  res.reason = PROTO_REASON_NOT_PLAYABLE;
  res.source = PROTO_SOURCE_NONE;
  deliver(f, T0 + 100, 7, 2, &res);
  r = next(f, A_PUT);
  assert_int_equal(r->outcome, PROTO_NOT_AVAILABLE);
  assert_string_equal(f->last_put_key, PROTO_GONE_KEY);
  next(f, A_RELEASE);
  assert_int_equal(next(f, A_ANSWER)->outcome, PROTO_NOT_AVAILABLE);
  none(f);
  static const char *const langs[] = {"fr", "de-AT", ""};
  for (int i = 0; i < 3; i++) {
    snprintf(a.lang, sizeof(a.lang), "%s", langs[i]);
    core_request(f->core, T0 + 200, &f->w[1], &a);
    r = next(f, A_ANSWER);
    assert_int_equal(r->outcome, PROTO_NOT_AVAILABLE);
    assert_int_equal(r->cache_ms, 60000 - 100);
  }
  a.kind = PROTO_KIND_TRACKS;
  core_request(f->core, T0 + 200, &f->w[1], &a);
  assert_int_equal(next(f, A_ANSWER)->outcome, PROTO_NOT_AVAILABLE);
  none(f);
  assert_int_equal(stats(f).jobs_created, 1);
}

/*
 * A browse page is asked as it comes: each request is a job of its own (no coalescing), it asks Redis nothing (no
 * lookup, no claim, no write), its answer is kept nowhere (cache lifetime 0), and the job holds its own copy of the
 * target (the request's message is freed once the request is handed over).
 */
static void test_a_browse_job_is_neither_coalesced_nor_cached_nor_claimed(void **state) {
  struct fx *f = *state;
  start(f, true);
  char target[16];
  snprintf(target, sizeof(target), "tok-%s", "one");
  struct proto_job b;
  memset(&b, 0, sizeof(b));
  b.kind = PROTO_KIND_BROWSE;
  b.browse_what = PROTO_BROWSE_CONTINUATION;
  b.browse = target;
  b.browse_len = (uint32_t)strlen(target);
  snprintf(b.request_id, sizeof(b.request_id), "req-browse");
  core_request(f->core, T0, &f->w[0], &b);
  core_request(f->core, T0, &f->w[1], &b);
  memset(target, 'x', sizeof(target)); /* the worker's message is gone */
  core_fetcher_added(f->core, T0, 7);
  core_fetcher_added(f->core, T0, 8);
  ready(f, T0 + 1, 7, 1);
  ready(f, T0 + 1, 8, 2);
  core_tick(f->core, T0 + 1, 1000);
  struct rec *r = next(f, A_JOB);
  assert_int_equal(r->kind, PROTO_KIND_BROWSE);
  assert_string_equal(r->browse, "tok-one");
  assert_string_equal(r->video, "");
  assert_int_equal(r->player_len, 0);
  uint64_t first = r->job_id;
  r = next(f, A_JOB);
  assert_string_equal(r->browse, "tok-one");
  assert_true(r->job_id != first);
  none(f);
  struct proto_result res = result(first, PROTO_OK, "next\nabcDEF12_-x\n");
  res.source = PROTO_SOURCE_NONE;
  deliver(f, T0 + 100, 7, 3, &res);
  r = next(f, A_ANSWER);
  assert_ptr_equal(r->w, &f->w[0]);
  assert_int_equal(r->outcome, PROTO_OK);
  assert_int_equal(r->cache_ms, 0);
  none(f);
  /* Asked again: a fetcher reads it again. */
  snprintf(target, sizeof(target), "tok-one");
  core_request(f->core, T0 + 200, &f->w[2], &b);
  core_tick(f->core, T0 + 200, 1000);
  r = next(f, A_JOB);
  assert_int_equal(r->fetcher, 7);
  assert_string_equal(r->browse, "tok-one");
  none(f);
  /* A body that is not a browse page is refused as any other kind's would be. */
  res = result(r->job_id, PROTO_OK, BODY_OK);
  deliver(f, T0 + 300, 7, 4, &res);
  r = next(f, A_ANSWER);
  assert_int_equal(r->outcome, PROTO_INTERNAL);
  assert_string_equal(r->detail, "bad_result");
  assert_int_equal(stats(f).cache_hits, 0);
}

/* A webhook try (the shell's own): with Redis on, it asks Redis nothing, joins no other try, is never cached. */
static void test_a_webhook_try_is_queued_at_once_never_coalesced_or_cached(void **state) {
  struct fx *f = *state;
  start(f, true);
  static const char url[] = "https://hooks.example/in";
  struct proto_job h;
  memset(&h, 0, sizeof(h));
  h.kind = PROTO_KIND_WEBHOOK;
  h.hook_url = url;
  h.hook_url_len = sizeof(url) - 1;
  snprintf(h.request_id, sizeof(h.request_id), "jtest-hook-1");
  /* Only the shell's own requests may be webhook tries: a worker's is refused at once. */
  core_request(f->core, T0, &f->w[3], &h);
  struct rec *refused = next(f, A_ANSWER);
  assert_ptr_equal(refused->w, &f->w[3]);
  assert_int_equal(refused->outcome, PROTO_INTERNAL);
  assert_string_equal(refused->detail, "bad_request");
  f->w[0].internal = f->w[1].internal = f->w[2].internal = 2;
  core_request(f->core, T0, &f->w[0], &h);
  core_request(f->core, T0, &f->w[1], &h);
  none(f); /* no Redis lookup or claim */
  assert_int_equal(stats(f).jobs_queued, 2);
  core_fetcher_added(f->core, T0, 1);
  core_fetcher_added(f->core, T0, 2);
  ready(f, T0, 1, 1);
  ready(f, T0, 2, 2);
  core_tick(f->core, T0, 1000);
  struct rec *a = next(f, A_JOB), *b = next(f, A_JOB);
  assert_int_equal(a->kind, PROTO_KIND_WEBHOOK);
  assert_int_equal(b->kind, PROTO_KIND_WEBHOOK);
  assert_string_equal(a->video, "");
  assert_int_equal(a->player_len, 0);
  assert_true(a->job_id != b->job_id);
  none(f);
  /* Delivered (the receiver's 204): answered, nothing written to Redis or kept. */
  struct proto_result ok = result(a->job_id, PROTO_OK, "204");
  ok.source = PROTO_SOURCE_WEBHOOK;
  deliver(f, T0 + 100, 1, 3, &ok);
  struct rec *r = next(f, A_ANSWER);
  assert_ptr_equal(r->w, &f->w[0]);
  assert_int_equal(r->outcome, PROTO_OK);
  assert_int_equal(r->cache_ms, 0);
  /* A failed try keeps its reason for the shell; a body not a 2xx status under OK is refused. */
  struct proto_result bad = result(b->job_id, PROTO_OK, "500");
  bad.source = PROTO_SOURCE_WEBHOOK;
  deliver(f, T0 + 100, 2, 4, &bad);
  r = next(f, A_ANSWER);
  assert_ptr_equal(r->w, &f->w[1]);
  assert_int_equal(r->outcome, PROTO_INTERNAL);
  assert_string_equal(r->detail, "bad_result");
  none(f);
  /* The same try again goes to a fetcher again. */
  core_request(f->core, T0 + 200, &f->w[2], &h);
  core_tick(f->core, T0 + 200, 1000);
  assert_int_equal(next(f, A_JOB)->kind, PROTO_KIND_WEBHOOK);
  none(f);
  assert_int_equal(stats(f).jobs_created, 0); /* not a video's job */
}

/* Fetchers 1 and 2 each run a job of 1 s: the core learns the time a job takes (no estimate before, no shedding). */
/* Two fetchers that each ran one job taking ms: the recent time a job takes. */
static void learn_jobs_taking(struct fx *f, uint64_t ms) {
  struct proto_job a = request("vidAAAAAAA1"), b = request("vidBBBBBBB2");
  core_request(f->core, T0, &f->w[14], &a);
  core_request(f->core, T0, &f->w[15], &b);
  ready(f, T0, 1, 1);
  ready(f, T0, 2, 2);
  core_tick(f->core, T0, 60000);
  uint64_t ja = next(f, A_JOB)->job_id, jb = next(f, A_JOB)->job_id;
  struct proto_result ra = result(ja, PROTO_OK, BODY_OK), rb = result(jb, PROTO_OK, BODY_OK);
  deliver(f, T0 + ms, 1, 3, &ra);
  deliver(f, T0 + ms, 2, 4, &rb);
  next(f, A_ANSWER);
  next(f, A_ANSWER);
  none(f);
}

/*
 * After a spell of slow platform answers (two jobs that took almost their whole 5 s deadline), the recent time a job
 * takes says a new job would end after its deadline; but a fetcher is free now, so the request is handed to it, never
 * shed: shedding it would shed every later request too, since the estimate learns only from jobs that run.
 */
static void test_a_request_an_idle_fetcher_can_take_is_never_shed(void **state) {
  struct fx *f = *state;
  start(f, false);
  learn_jobs_taking(f, 4900);
  struct proto_job q = request("vid00000000");
  core_request(f->core, T0 + 6000, &f->w[0], &q);
  core_tick(f->core, T0 + 6000, 60000);
  struct rec *r = next(f, A_JOB);
  assert_string_equal(r->video, "vid00000000");
  none(f);
  assert_int_equal(stats(f).shed_arrival, 0);
}

static const char *const VIDS[] = {"vid00000000", "vid11111111", "vid22222222", "vid33333333", "vid44444444",
                                   "vid55555555", "vid66666666", "vid77777777", "vid88888888", "vid99999999",
                                   "vidxxxxxxxx", "vidyyyyyyyy", "vidzzzzzzzz"};

/*
 * Two fetchers, 1 s a job, a 5 s deadline: eight requests can be served in time (each place ends 1 s after the one two
 * ahead, with a margin of an eighth of a job), the next ones are answered at once, 503 with a Retry-After of their
 * lateness. A cached answer and a request joining a running job are never shed. When jobs slow down, those still
 * queued that can no longer be served in time are shed as soon as that is clear.
 */
static void test_a_request_the_queue_cannot_serve_in_time_is_shed_at_once(void **state) {
  struct fx *f = *state;
  start(f, false);
  learn_jobs_taking(f, 1000);
  uint64_t now = T0 + 1000;
  for (int i = 0; i < 12; i++) {
    struct proto_job q = request(VIDS[i]);
    core_request(f->core, now, &f->w[i], &q);
  }
  none(f);
  core_tick(f->core, now, 60000);
  /* Place 7 ends at now + 4.125 s, place 8 would end at 5.125 s: the four left for it are shed, Retry-After 1 s. */
  for (int i = 8; i < 12; i++) {
    struct rec *r = next(f, A_ANSWER);
    assert_ptr_equal(r->w, &f->w[i]);
    assert_int_equal(r->outcome, PROTO_OVERLOADED);
    assert_string_equal(r->detail, "expected_wait");
    assert_int_equal(r->retry_after_s, 1);
    assert_int_equal(r->cache_ms, 0);
  }
  struct rec *r = next(f, A_JOB);
  assert_string_equal(r->video, VIDS[0]);
  uint64_t j0 = r->job_id;
  r = next(f, A_JOB);
  assert_string_equal(r->video, VIDS[1]);
  uint64_t j1 = r->job_id;
  none(f);
  struct dispatcher_stats st = stats(f);
  assert_int_equal(st.shed_arrival, 4);
  assert_int_equal(st.shed_queued + st.shed_deadline + st.shed_batch, 0);
  assert_int_equal(st.jobs_queued, 6);

  /* Never shed: a cached answer, and a request that joins a running job (however long the queue behind it). */
  struct proto_job a = request("vidAAAAAAA1"), v0 = request(VIDS[0]);
  core_request(f->core, now + 1, &f->w[12], &a);
  r = next(f, A_ANSWER);
  assert_ptr_equal(r->w, &f->w[12]);
  assert_int_equal(r->outcome, PROTO_OK);
  core_request(f->core, now + 1, &f->w[13], &v0);
  core_tick(f->core, now + 1, 60000);
  none(f);

  /* The platform slows down: both jobs take 1.5 s; the average becomes 1.218 s, its margin 0.374 s. */
  struct proto_result r0 = result(j0, PROTO_OK, BODY_OK), r1 = result(j1, PROTO_OK, BODY_OK);
  deliver(f, now + 1500, 1, 5, &r0);
  assert_ptr_equal(next(f, A_ANSWER)->w, &f->w[0]);
  assert_ptr_equal(next(f, A_ANSWER)->w, &f->w[13]);
  deliver(f, now + 1500, 2, 6, &r1);
  assert_ptr_equal(next(f, A_ANSWER)->w, &f->w[1]);
  core_tick(f->core, now + 1500, 60000);
  /* Deadline now + 5 s: places 2 and 3 end at now + 4.31 s, places 4 and 5 at 5.528 s: shed now, not at 5 s. */
  for (int i = 6; i < 8; i++) {
    r = next(f, A_ANSWER);
    assert_ptr_equal(r->w, &f->w[i]);
    assert_int_equal(r->outcome, PROTO_OVERLOADED);
    assert_int_equal(r->retry_after_s, 1);
  }
  assert_string_equal(next(f, A_JOB)->video, VIDS[2]);
  assert_string_equal(next(f, A_JOB)->video, VIDS[3]);
  none(f);
  st = stats(f);
  assert_int_equal(st.shed_arrival, 4);
  assert_int_equal(st.shed_queued, 2);
  assert_int_equal(st.outcome_internal, 0);
  assert_int_equal(st.jobs_queued, 2);
}

/*
 * The jobs only batch items wait on go behind every worker's request, whatever came first, and yield (503, put back
 * by their runner) before a worker's request is shed.
 */
static void test_batch_items_yield_before_a_request_is_shed(void **state) {
  struct fx *f = *state;
  start(f, false);
  learn_jobs_taking(f, 1000);
  uint64_t now = T0 + 1000;
  /* Fetcher 2 leaves: one fetcher, 1 s a job, a 5 s deadline. */
  core_fetcher_gone(f->core, now, 2);
  next(f, A_DROP);
  f->w[0].internal = 1;
  f->w[1].internal = 1;
  for (int i = 0; i < 8; i++) {
    struct proto_job q = request(VIDS[i]);
    core_request(f->core, now, &f->w[i], &q);
  }
  core_tick(f->core, now, 60000);
  /* Four requests fit (place 3 ends at now + 4.125 s) ahead of the two items; the fifth and sixth do not: they are
   * shed, and the items behind them yield. */
  for (int i = 6; i < 8; i++) {
    struct rec *r = next(f, A_ANSWER);
    assert_ptr_equal(r->w, &f->w[i]);
    assert_int_equal(r->outcome, PROTO_OVERLOADED);
  }
  struct rec *r = next(f, A_ANSWER);
  assert_ptr_equal(r->w, &f->w[0]);
  assert_int_equal(r->outcome, PROTO_OVERLOADED);
  assert_int_equal(r->retry_after_s, 1);
  assert_ptr_equal(next(f, A_ANSWER)->w, &f->w[1]);
  assert_string_equal(next(f, A_JOB)->video, VIDS[2]);
  none(f);
  struct dispatcher_stats st = stats(f);
  assert_int_equal(st.shed_batch, 2);
  assert_int_equal(st.shed_arrival, 2);
  assert_int_equal(st.jobs_queued, 3);
}

/* A fetcher cannot answer for the dispatcher's queue: its 503 outcome is refused as a bad result. */
static void test_a_fetchers_overloaded_outcome_is_refused(void **state) {
  struct fx *f = *state;
  start(f, false);
  struct proto_job a = request("vidAAAAAAA1");
  core_request(f->core, T0, &f->w[0], &a);
  ready(f, T0, 1, 1);
  core_tick(f->core, T0, 60000);
  struct proto_result res = result(next(f, A_JOB)->job_id, PROTO_OVERLOADED, NULL);
  deliver(f, T0 + 10, 1, 2, &res);
  struct rec *r = next(f, A_ANSWER);
  assert_int_equal(r->outcome, PROTO_INTERNAL);
  assert_string_equal(r->detail, "bad_result");
  assert_int_equal(stats(f).results_refused, 1);
}

/* r is a 304 of etag from the cache, without a body, with the time left of an answer cached at T0 + 100 (600 s). */
static void assert_cached_304(const struct rec *r, const char *etag) {
  assert_int_equal(r->outcome, PROTO_OK);
  assert_int_equal(r->notmod, 1);
  assert_string_equal(r->etag, etag);
  assert_int_equal(r->body_len, 0);
  assert_int_equal(r->cache_ms, 600000 - 100);
}

/*
 * A revalidation of an answer the cache holds is a 304 decided here, whichever worker asks: If-None-Match naming the
 * ETag of any form of it (as a worker spells them) gets that ETag and no body; any other gets the body. A job that
 * fetched is never a 304.
 */
static void test_a_revalidation_the_cache_holds_is_a_304_without_its_body(void **state) {
  struct fx *f = *state;
  start(f, false);
  struct entity *ent = entity_new(BODY_OK, strlen(BODY_OK), 0);
  assert_non_null(ent);
  char plain[ENTITY_ETAG_BYTES], gz[ENTITY_ETAG_BYTES], inm[3 * ENTITY_ETAG_BYTES];
  entity_etag(ent, ENTITY_IDENTITY, plain);
  entity_etag(ent, ENTITY_GZIP, gz);
  entity_unref(ent);
  struct proto_job a = request("vidAAAAAAA1");
  a.inm = plain;
  a.inm_len = (uint32_t)strlen(plain);
  core_request(f->core, T0, &f->w[0], &a);
  ready(f, T0, 1, 1);
  core_tick(f->core, T0, 60000);
  struct proto_result res = result(next(f, A_JOB)->job_id, PROTO_OK, BODY_OK);
  deliver(f, T0 + 100, 1, 2, &res);
  struct rec *r = next(f, A_ANSWER);
  assert_int_equal(r->notmod, 0); /* fetched: a 200 whatever its If-None-Match */
  assert_int_equal(r->body_len, strlen(BODY_OK));

  /* Cached: the gzip form's ETag in a list, weak or not, is a 304 of that ETag. */
  snprintf(inm, sizeof(inm), "\"other\", W/%s", gz);
  a.inm = inm;
  a.inm_len = (uint32_t)strlen(inm);
  core_request(f->core, T0 + 200, &f->w[1], &a);
  assert_cached_304(next(f, A_ANSWER), gz);
  /* Another validator, or "*", or none: the body. */
  const char *others[] = {"\"0123456789abcdef0123456789abcdef\"", "*", ""};
  for (int i = 0; i < 3; i++) {
    a.inm = others[i];
    a.inm_len = (uint32_t)strlen(others[i]);
    core_request(f->core, T0 + 300, &f->w[2], &a);
    r = next(f, A_ANSWER);
    assert_int_equal(r->notmod, 0);
    assert_int_equal(r->body_len, strlen(BODY_OK));
  }
  none(f);
  assert_int_equal(stats(f).not_modified, 1);
}

/*
 * A worker's refresh of a transcript it holds is answered from the cache (a 304 of the ETag it names), and never
 * becomes a job: with nothing cached, it is answered "not_cached" at once and nothing goes to a fetcher.
 */
static void test_a_refresh_is_answered_from_the_cache_or_not_at_all(void **state) {
  struct fx *f = *state;
  start(f, false);
  struct entity *ent = entity_new(BODY_OK, strlen(BODY_OK), 0);
  assert_non_null(ent);
  char plain[ENTITY_ETAG_BYTES];
  entity_etag(ent, ENTITY_IDENTITY, plain);
  entity_unref(ent);
  struct proto_job a = request("vidAAAAAAA1");
  a.inm = plain;
  a.inm_len = (uint32_t)strlen(plain);
  a.refresh = 1;
  ready(f, T0, 1, 1);
  core_request(f->core, T0, &f->w[0], &a);
  struct rec *r = next(f, A_ANSWER);
  assert_int_equal(r->outcome, PROTO_INTERNAL);
  assert_string_equal(r->detail, "not_cached");
  assert_int_equal(r->cache_ms, 0);
  core_tick(f->core, T0, 60000);
  none(f); /* no job, no fetch */
  assert_int_equal(stats(f).cache_misses, 0);

  struct proto_job plainreq = request("vidAAAAAAA1");
  core_request(f->core, T0 + 10, &f->w[1], &plainreq);
  core_tick(f->core, T0 + 10, 60000);
  struct proto_result res = result(next(f, A_JOB)->job_id, PROTO_OK, BODY_OK);
  deliver(f, T0 + 100, 1, 2, &res);
  assert_int_equal(next(f, A_ANSWER)->notmod, 0);
  core_request(f->core, T0 + 200, &f->w[2], &a);
  assert_cached_304(next(f, A_ANSWER), plain);
  none(f);
  assert_int_equal(stats(f).not_modified, 1);
}

/* Without an estimate (no job ended yet), a batch item queued behind a newer request still ends at its own deadline. */
static void test_a_batch_item_behind_a_request_is_shed_at_its_own_deadline(void **state) {
  struct fx *f = *state;
  start(f, false);
  struct proto_job item = request("vidAAAAAAA1"), req = request("vidBBBBBBB2");
  f->w[0].internal = 1;
  core_request(f->core, T0, &f->w[0], &item);
  core_request(f->core, T0 + 1000, &f->w[1], &req);
  /* The request went ahead of the item; the next wake is still the item's deadline. */
  assert_int_equal(core_tick(f->core, T0 + 1000, 60000), T0 + 5000);
  core_tick(f->core, T0 + 5000, 60000);
  struct rec *r = next(f, A_ANSWER);
  assert_ptr_equal(r->w, &f->w[0]);
  assert_int_equal(r->outcome, PROTO_OVERLOADED);
  none(f);
  assert_int_equal(stats(f).shed_batch, 1);
  core_tick(f->core, T0 + 6000, 60000);
  r = next(f, A_ANSWER);
  assert_ptr_equal(r->w, &f->w[1]);
  assert_int_equal(stats(f).shed_deadline, 1);
}

int main(void) {
  log_init("test", LOG_ERROR); /* the core's job lines are not what these tests read */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_a_job_is_coalesced_assigned_answered_to_all_and_cached, setup, teardown),
      cmocka_unit_test_setup_teardown(test_deadlines_fail_queued_and_running_jobs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_request_the_queue_cannot_serve_in_time_is_shed_at_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_request_an_idle_fetcher_can_take_is_never_shed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_batch_items_yield_before_a_request_is_shed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_fetchers_overloaded_outcome_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_batch_item_behind_a_request_is_shed_at_its_own_deadline, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_revalidation_the_cache_holds_is_a_304_without_its_body, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_refresh_is_answered_from_the_cache_or_not_at_all, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_language_the_video_lacks_is_asked_as_its_served_track, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_player_summary_is_handed_with_the_videos_next_jobs_for_its_lifetime, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_lost_fetcher_fails_its_job_and_a_decline_goes_first_in_line, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_budget_decline_is_counted_in_the_job, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_captions_becomes_a_speech_job_within_its_concurrency, setup, teardown),
      cmocka_unit_test_setup_teardown(test_not_available_is_kept_for_the_negative_lifetime_and_a_failure_not_at_all,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_captions_jobs_go_before_speech_jobs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_leaving_fetcher_is_acknowledged_given_nothing_and_forgotten, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_body_that_is_not_a_transcript_fails_and_is_not_cached, setup, teardown),
      cmocka_unit_test_setup_teardown(test_connections_beyond_the_cap_and_protocol_errors_are_closed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_bad_request_and_a_full_table_are_answered_at_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_won_claim_runs_here_writes_redis_then_releases, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_lost_claim_waits_and_is_answered_from_redis, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_claim_gone_without_a_result_is_taken_over, setup, teardown),
      cmocka_unit_test_setup_teardown(test_redis_faults_never_hold_a_job_back, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_won_claim_is_renewed_while_its_job_lives_and_no_longer, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_waiter_takes_over_a_silent_claimant_within_the_claim_ttl, setup, teardown),
      cmocka_unit_test_setup_teardown(test_spellings_are_one_key_and_share_the_served_track, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_video_that_cannot_be_played_answers_every_key_of_it, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_browse_job_is_neither_coalesced_nor_cached_nor_claimed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_webhook_try_is_queued_at_once_never_coalesced_or_cached, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
