/*
 * The dispatcher core's own cost per event: a realistic mix driven in-process, as the shell drives it. Each round,
 * 8 idle fetchers take 8 new jobs; every job is asked for by 4 requests (1 new, 3 coalesced); each fetcher answers
 * with a transcript (which every waiter gets and the cache keeps), then 4 more requests hit the cache; a tick
 * follows every batch. Counts events (requests, fetcher messages, ticks) and prints nanoseconds per event (median of
 * 5 runs). Log lines are off (their cost is the logger's, measured with the access log in tests/bench/run.sh).
 *   build/bin/bench_dispatch_core [ROUNDS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/config.h"
#include "common/log.h"
#include "gateway/dispatcher/core.h"
#include "tests/bench/bench_timing.h"

#define RUNS 5
#define FETCHERS 8
#define WAITERS 4
#define BODY "{\"language\":\"en\",\"source\":\"captions\",\"text\":\"hello\",\"segments\":[]}"

static uint64_t sent_job[FETCHERS + 1];

static void on_answer(void *ctx, struct core_waiter *w, const struct proto_result *res, uint64_t cache_ms) {
  (void)ctx, (void)w, (void)res, (void)cache_ms;
}
static int on_send_job(void *ctx, uint64_t fetcher, void *token, const struct proto_job *job) {
  (void)ctx, (void)token;
  sent_job[fetcher] = job->job_id;
  return 0;
}
static void on_ready(void *ctx, uint64_t fetcher, void *token) { (void)ctx, (void)fetcher, (void)token; }
static void on_drop(void *ctx, void *token) { (void)ctx, (void)token; }
static void on_close(void *ctx, uint64_t fetcher) { (void)ctx, (void)fetcher; }

static double run(const struct vts_config *cfg, long rounds) {
  struct core_ops ops = {.answer = on_answer,
                         .send_job = on_send_job,
                         .send_ready = on_ready,
                         .drop_token = on_drop,
                         .close_fetcher = on_close};
  struct core *c = core_new(cfg, &ops);
  if (c == NULL) exit(1);
  static struct core_waiter w[FETCHERS * WAITERS * 2];
  struct proto_job req;
  memset(&req, 0, sizeof(req));
  snprintf(req.lang, sizeof(req.lang), "en");
  snprintf(req.request_id, sizeof(req.request_id), "bench");
  struct proto_result res;
  memset(&res, 0, sizeof(res));
  res.outcome = PROTO_OK;
  res.source = PROTO_SOURCE_CAPTIONS;
  snprintf(res.lang, sizeof(res.lang), "en");
  res.body = BODY;
  res.body_len = sizeof(BODY) - 1;
  uint64_t now = 1000000, events = 0;
  for (uint64_t f = 1; f <= FETCHERS; f++) {
    core_fetcher_added(c, now, f);
    core_fetcher_msg(c, now, f, (void *)f, CORE_READY, 0, NULL);
    events += 2;
  }
  double t0 = bench_now_ms();
  for (long r = 0; r < rounds; r++) {
    now++;
    for (int j = 0; j < FETCHERS; j++) {
      snprintf(req.video_id, sizeof(req.video_id), "v%02d%08u", j % 100, (unsigned)(r % 100000000));
      for (int k = 0; k < WAITERS; k++) core_request(c, now, &w[j * WAITERS + k], &req);
    }
    core_tick(c, now, 1000);
    for (uint64_t f = 1; f <= FETCHERS; f++) {
      res.job_id = sent_job[f];
      core_fetcher_msg(c, now, f, (void *)f, CORE_RESULT, 0, &res);
    }
    for (int j = 0; j < FETCHERS; j++) {
      snprintf(req.video_id, sizeof(req.video_id), "v%02d%08u", j % 100, (unsigned)(r % 100000000));
      for (int k = 0; k < WAITERS; k++) core_request(c, now, &w[FETCHERS * WAITERS + j * WAITERS + k], &req);
    }
    core_tick(c, now, 1000);
    events += FETCHERS * WAITERS * 2 + FETCHERS + 2;
  }
  double ns = (bench_now_ms() - t0) * 1e6 / (double)events;
  core_free(c);
  return ns;
}

int main(int argc, char **argv) {
  long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 20000;
  static struct vts_config cfg;
  char err[256];
  if (rounds < 1 || config_load(&cfg, err, sizeof(err)) != 0) {
    fprintf(stderr, "usage: %s [ROUNDS]\n", argv[0]);
    return 1;
  }
  log_init("bench", LOG_ERROR);
  double ns[RUNS];
  for (int i = 0; i < RUNS; i++) ns[i] = run(&cfg, rounds);
  qsort(ns, RUNS, sizeof(ns[0]), bench_cmp_double);
  printf("dispatcher core: %.0f ns an event (median of %d runs, %ld rounds of %d jobs, %d requests each)\n",
         ns[RUNS / 2], RUNS, rounds, FETCHERS, WAITERS * 2);
  return 0;
}
