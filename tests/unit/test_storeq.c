/*
 * Unit tests of the job store's thread (gateway/jobs/storeq.c) on a real SQLite store: calls answered in the order
 * they were made, work on the store's thread and done on the loop's, a close with calls still queued running every
 * one of them, a queue that refuses calls once closing, and an open that fails leaving nothing behind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "gateway/jobs/storeq.h"

#define CALLS 500

struct fixture {
  char dir[64];
  struct vts_config cfg;
  uv_loop_t loop;
  struct storeq *q;
  pthread_t loop_thread;
};

/* One call's record: what the thread saw and what the loop saw. */
struct probe {
  struct fixture *f;
  int index;
  int work_rv;
  size_t open_jobs;
  bool work_on_loop_thread;
  bool done_on_loop_thread;
  int *done_order; /* the loop appends index here */
  int *done_count;
};

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof(*f));
  snprintf(f->dir, sizeof(f->dir), "/tmp/vts-storeq.XXXXXX");
  if (!mkdtemp(f->dir)) return -1;
  snprintf(f->cfg.state_dir, sizeof(f->cfg.state_dir), "%s", f->dir);
  uv_loop_init(&f->loop);
  f->loop_thread = pthread_self();
  char err[256];
  if (storeq_open(&f->loop, &f->cfg, VTS_JOBS_REDIS_TIMEOUT_MS, &f->q, err, sizeof(err)) != 0) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  storeq_close(f->q);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  int rv = uv_loop_close(&f->loop);
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
  int rc = system(cmd);
  free(f);
  return rv == 0 && rc == 0 ? 0 : -1;
}

static void probe_work(struct jobstore *js, void *arg) {
  struct probe *p = arg;
  p->work_on_loop_thread = pthread_equal(pthread_self(), p->f->loop_thread);
  p->work_rv = jobstore_open_jobs(js, "k1", &p->open_jobs);
}

static void probe_done(void *arg) {
  struct probe *p = arg;
  p->done_on_loop_thread = pthread_equal(pthread_self(), p->f->loop_thread);
  p->done_order[(*p->done_count)++] = p->index;
}

/* Queues CALLS probes; the caller runs or closes the queue. */
static struct probe *queue_probes(struct fixture *f, int *order, int *count) {
  struct probe *p = calloc(CALLS, sizeof(*p));
  for (int i = 0; i < CALLS; i++) {
    p[i] = (struct probe){.f = f, .index = i, .work_rv = 1, .done_order = order, .done_count = count};
    assert_int_equal(storeq_call(f->q, probe_work, probe_done, &p[i]), 0);
  }
  return p;
}

static void assert_all_answered_in_order(const struct probe *p, const int *order, int count) {
  assert_int_equal(count, CALLS);
  for (int i = 0; i < CALLS; i++) {
    assert_int_equal(order[i], i);
    assert_int_equal(p[i].work_rv, 0);
    assert_int_equal(p[i].open_jobs, 0);
    assert_false(p[i].work_on_loop_thread);
    assert_true(p[i].done_on_loop_thread);
  }
}

static void test_calls_are_answered_in_order_with_done_on_the_loop(void **state) {
  struct fixture *f = *state;
  int order[CALLS], count = 0;
  struct probe *p = queue_probes(f, order, &count);
  assert_int_equal(storeq_depth(f->q), CALLS);
  while (count < CALLS) uv_run(&f->loop, UV_RUN_ONCE);
  assert_all_answered_in_order(p, order, count);
  assert_int_equal(storeq_depth(f->q), 0);
  free(p);
}

/* A job made by one call is seen by the next: the calls share the thread's one handle, in order. */
struct made {
  char id[JOBSTORE_ID_LEN + 1];
  int create_rv, get_rv;
  struct jobstore_job job;
  int steps;
};

static void create_work(struct jobstore *js, void *arg) {
  struct made *m = arg;
  struct jobstore_spec spec = {.key_id = "k1",
                               .language = "en",
                               .translate = "",
                               .format = "json",
                               .webhook_url = "",
                               .webhook_secret = "",
                               .source = "video_ids",
                               .max_open = 10,
                               .max_stored = 100};
  const char ids[2][VTS_VIDEO_ID_LEN + 1] = {"dQw4w9WgXcQ", "9bZkp7q19f0"};
  m->create_rv = jobstore_create(js, &spec, ids, 2, 1000, m->id);
}

static void get_work(struct jobstore *js, void *arg) {
  struct made *m = arg;
  m->get_rv = jobstore_get(js, "k1", m->id, &m->job);
}

static void count_done(void *arg) { ((struct made *)arg)->steps++; }

static void test_a_call_sees_what_the_call_before_it_wrote(void **state) {
  struct fixture *f = *state;
  struct made m = {.create_rv = 1, .get_rv = 1};
  assert_int_equal(storeq_call(f->q, create_work, count_done, &m), 0);
  assert_int_equal(storeq_call(f->q, get_work, count_done, &m), 0);
  while (m.steps < 2) uv_run(&f->loop, UV_RUN_ONCE);
  assert_int_equal(m.create_rv, 0);
  assert_int_equal(m.get_rv, 0);
  assert_string_equal(m.job.id, m.id);
  assert_int_equal(m.job.total, 2);
  assert_string_equal(jobstore_backend(storeq_store(f->q)), "sqlite");
}

/* Closing with every call still queued: each runs on the thread and has its done before the close returns. */
static void test_close_runs_every_queued_call_then_refuses_more(void **state) {
  struct fixture *f = *state;
  int order[CALLS], count = 0;
  struct probe *p = queue_probes(f, order, &count);
  storeq_close(f->q);
  assert_all_answered_in_order(p, order, count);
  assert_int_equal(storeq_call(f->q, probe_work, probe_done, NULL), -ESHUTDOWN);
  storeq_close(f->q);
  f->q = NULL;
  free(p);
}

/* A done that makes another call while the queue closes is refused, and nothing of it runs. */
struct chain {
  struct storeq *q;
  int second_rv;
  int dones;
};

static void nothing_work(struct jobstore *js, void *arg) {
  (void)js;
  (void)arg;
}

static void chain_done(void *arg) {
  struct chain *c = arg;
  c->dones++;
  c->second_rv = storeq_call(c->q, nothing_work, chain_done, c);
}

static void test_a_call_made_during_close_is_refused(void **state) {
  struct fixture *f = *state;
  struct chain c = {.q = f->q, .second_rv = 1};
  assert_int_equal(storeq_call(f->q, nothing_work, chain_done, &c), 0);
  storeq_close(f->q);
  f->q = NULL;
  assert_int_equal(c.dones, 1);
  assert_int_equal(c.second_rv, -ESHUTDOWN);
}

static void test_an_open_that_fails_says_why_and_leaves_nothing(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct vts_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  /* A state directory that cannot be made: its parent is a file. */
  snprintf(cfg.state_dir, sizeof(cfg.state_dir), "/dev/null/vts");
  struct storeq *q = NULL;
  char err[256] = "";
  int rv = storeq_open(&loop, &cfg, VTS_JOBS_REDIS_TIMEOUT_MS, &q, err, sizeof(err));
  assert_true(rv < 0);
  assert_null(q);
  assert_non_null(strstr(err, "/dev/null/vts"));
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_calls_are_answered_in_order_with_done_on_the_loop, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_call_sees_what_the_call_before_it_wrote, setup, teardown),
      cmocka_unit_test_setup_teardown(test_close_runs_every_queued_call_then_refuses_more, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_call_made_during_close_is_refused, setup, teardown),
      cmocka_unit_test(test_an_open_that_fails_says_why_and_leaves_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
