/*
 * Unit tests of the batch jobs' store, each backend on the real thing. Both backends (SQLite on real database files,
 * Redis on a real redis-server) pass the same cases: a job's life (create, take, done, failed, retry, cancel), pages
 * of items in order, a job seen only by its key, jobs taking turns, two handles (as two gateway processes) never
 * taking the same item. SQLite's own: a writer killed with SIGKILL losing nothing it committed, leases that run out,
 * expiry. Redis's own: an item's unit of the month counted once with its answer (and none past the quota), the items
 * of a silent runner claimed by another while a live runner's are not, an answer stored by both runners kept and
 * counted once, an ended job's keys expiring, a work stream deleted under a runner made again, a Redis that does not
 * answer failing fast, a Redis restarted under an idle connection reached again at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <sqlite3.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/test_skip.h"

#include "common/limits.h"
#include "gateway/jobs/jobstore.h"
#include "tests/unit/test_redis_server.h"

struct fixture {
  char dir[64];
  char path[96];
  struct jobstore *js;
  int port; /* Redis: its server */
  pid_t pid;
  struct vts_config cfg;
};

/* The SQLite store in dir (the configuration's store when no Redis is set: dir/jobs.db). */
static int open_in(const char *dir, struct jobstore **js, char *err, size_t errlen) {
  static struct vts_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", dir);
  return jobstore_open_config(&cfg, VTS_JOBS_REDIS_TIMEOUT_MS, js, err, errlen);
}

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof(*f));
  snprintf(f->dir, sizeof(f->dir), "/tmp/vts-jobstore.XXXXXX");
  if (!mkdtemp(f->dir)) return -1;
  snprintf(f->path, sizeof(f->path), "%s/jobs.db", f->dir);
  char err[256];
  if (open_in(f->dir, &f->js, err, sizeof(err)) != 0) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  jobstore_close(f->js);
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
  int rc = system(cmd);
  free(f);
  return rc == 0 ? 0 : -1;
}

static int setup_redis(void **state) {
  if (!test_redis_available()) TEST_SKIP("redis-server is not installed");
  struct fixture *f = calloc(1, sizeof(*f));
  f->port = test_free_port();
  f->pid = test_redis_start(f->port);
  snprintf(f->cfg.redis_url, sizeof(f->cfg.redis_url), "redis://127.0.0.1:%d", f->port);
  f->cfg.job_ttl_s = 60;
  char err[256];
  if (jobstore_open_config(&f->cfg, VTS_JOBS_REDIS_TIMEOUT_MS, &f->js, err, sizeof(err)) != 0) return -1;
  *state = f;
  return 0;
}

static int teardown_redis(void **state) {
  struct fixture *f = *state;
  jobstore_close(f->js);
  test_redis_stop(f->pid);
  free(f);
  return 0;
}

/* Another handle on the same store, as another gateway process has. */
static struct jobstore *other_handle(struct fixture *f) {
  struct jobstore *js = NULL;
  char err[256];
  if (f->pid > 0)
    assert_int_equal(jobstore_open_config(&f->cfg, VTS_JOBS_REDIS_TIMEOUT_MS, &js, err, sizeof(err)), 0);
  else
    assert_int_equal(open_in(f->dir, &js, err, sizeof(err)), 0);
  return js;
}

static const char ids[][VTS_VIDEO_ID_LEN + 1] = {"ourVideo001", "ourVideo002", "ourVideo003", "ourVideo004",
                                                 "ourVideo005"};

static const struct jobstore_spec spec_a = {.key_id = "keyA",
                                            .language = "en",
                                            .translate = "",
                                            .format = "json",
                                            .webhook_url = "",
                                            .webhook_secret = "",
                                            .source = "video_ids"};

static void make_job(struct jobstore *js, size_t n, int64_t now, char *id) {
  assert_int_equal(jobstore_create(js, &spec_a, ids, n, now, id), 0);
  assert_int_equal(strlen(id), JOBSTORE_ID_LEN);
}

/* Items collected by a walk, as "video_id:status[:body or code]" joined by spaces. */
struct seen {
  char text[1024];
};

static int collect(void *ctx, const struct jobstore_item *it) {
  struct seen *s = ctx;
  size_t n = strlen(s->text);
  snprintf(s->text + n, sizeof(s->text) - n, "%s%s:%s", n ? " " : "", it->video_id,
           jobstore_item_status_name(it->status));
  n = strlen(s->text);
  if (it->status == ITEM_DONE) snprintf(s->text + n, sizeof(s->text) - n, ":%.*s", (int)it->body_len, it->body);
  if (it->status == ITEM_FAILED)
    snprintf(s->text + n, sizeof(s->text) - n, ":%s:%s", it->error_code, it->error_message);
  return 0;
}

/*
 * The step of every read of a job's items: a page of key A's job id from after (at most limit, through fn: collect
 * or one like it) must read as text. Returns the cursor after it (0: the last page).
 */
static int64_t read_items(struct jobstore *js, const char *id, int64_t after, size_t limit, jobstore_item_fn fn,
                          const char *text) {
  struct seen s = {{0}};
  int64_t next = -1;
  assert_int_equal(jobstore_items(js, "keyA", id, after, limit, fn, &s, &next), 0);
  assert_string_equal(s.text, text);
  return next;
}

static void test_a_job_lives_through_its_items(void **state) {
  struct fixture *f = *state;
  char id[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 3, 1000, id);
  struct jobstore_job j;
  assert_int_equal(jobstore_get(f->js, "keyA", id, &j), 0);
  assert_string_equal(j.status, "queued");
  assert_int_equal(j.total, 3);
  assert_int_equal(j.counts[ITEM_QUEUED], 3);
  assert_int_equal(j.created_ms, 1000);
  assert_string_equal(j.language, "en");
  assert_string_equal(j.format, "json");

  struct jobstore_task t;
  assert_int_equal(jobstore_take(f->js, 2000, 60000, &t), 0);
  assert_string_equal(t.job_id, id);
  assert_int_equal(t.seq, 1);
  assert_string_equal(t.video_id, "ourVideo001");
  assert_string_equal(t.key_id, "keyA");
  assert_int_equal(t.created_ms, 1000); /* the job's age bounds how long a rationed item may wait */
  assert_int_equal(t.tries, 0);
  assert_int_equal(jobstore_done(f->js, id, t.seq, "{\"a\":1}", 7, 2100), 0);
  /* Done once: a second end of the same item is refused. */
  assert_int_equal(jobstore_done(f->js, id, t.seq, "{}", 2, 2100), -ENOENT);

  assert_int_equal(jobstore_take(f->js, 2200, 60000, &t), 0);
  assert_int_equal(t.seq, 2);
  assert_int_equal(jobstore_fail(f->js, id, t.seq, "transcript_not_available", "No transcript.", 2300), 0);

  /* A ration met: back in the queue, not before its time. */
  assert_int_equal(jobstore_take(f->js, 2400, 60000, &t), 0);
  assert_int_equal(t.seq, 3);
  assert_int_equal(jobstore_retry(f->js, id, t.seq, 5000, 2500), 0);
  assert_int_equal(jobstore_take(f->js, 4999, 60000, &t), -EAGAIN);
  assert_int_equal(jobstore_get(f->js, "keyA", id, &j), 0);
  assert_string_equal(j.status, "running");
  assert_int_equal(j.updated_ms, 2500);
  assert_int_equal(jobstore_take(f->js, 5000, 60000, &t), 0);
  assert_int_equal(t.seq, 3);
  assert_int_equal(t.tries, 1);
  assert_int_equal(jobstore_done(f->js, id, t.seq, "{\"c\":3}", 7, 5100), 0);

  assert_int_equal(jobstore_get(f->js, "keyA", id, &j), 0);
  assert_string_equal(j.status, "done");
  assert_int_equal(j.counts[ITEM_DONE], 2);
  assert_int_equal(j.counts[ITEM_FAILED], 1);
  assert_int_equal(read_items(f->js, id, 0, 100, collect,
                              "ourVideo001:done:{\"a\":1} ourVideo002:failed:transcript_not_available:No transcript. "
                              "ourVideo003:done:{\"c\":3}"),
                   0);
  size_t open = 9;
  assert_int_equal(jobstore_open_jobs(f->js, "keyA", &open), 0);
  assert_int_equal(open, 0);
}

static void test_items_page_in_order_with_a_cursor(void **state) {
  struct fixture *f = *state;
  char id[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 5, 1000, id);
  assert_int_equal(read_items(f->js, id, 0, 2, collect, "ourVideo001:queued ourVideo002:queued"), 2);
  assert_int_equal(read_items(f->js, id, 2, 2, collect, "ourVideo003:queued ourVideo004:queued"), 4);
  assert_int_equal(read_items(f->js, id, 4, 2, collect, "ourVideo005:queued"), 0);
  /* A page that ends exactly at the last item says so. */
  assert_int_equal(read_items(f->js, id, 3, 2, collect, "ourVideo004:queued ourVideo005:queued"), 0);
}

/* Takes items until the third, which does not fit the page. */
static int collect_two(void *ctx, const struct jobstore_item *it) {
  struct seen *s = ctx;
  if (it->seq == 3) return JOBSTORE_PAGE_FULL;
  return collect(s, it);
}

static void test_a_full_page_ends_before_the_item_that_does_not_fit(void **state) {
  struct fixture *f = *state;
  char id[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 5, 1000, id);
  assert_int_equal(read_items(f->js, id, 0, 100, collect_two, "ourVideo001:queued ourVideo002:queued"), 2);
  assert_int_equal(read_items(f->js, id, 2, 100, collect, "ourVideo003:queued ourVideo004:queued ourVideo005:queued"),
                   0);
}

static void test_a_job_is_seen_only_by_its_key(void **state) {
  struct fixture *f = *state;
  char id[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 2, 1000, id);
  struct jobstore_job j;
  assert_int_equal(jobstore_get(f->js, "keyB", id, &j), -ENOENT);
  assert_int_equal(jobstore_get(f->js, "keyA", "j000000000000000000000000", &j), -ENOENT);
  struct seen s = {{0}};
  int64_t next;
  assert_int_equal(jobstore_items(f->js, "keyB", id, 0, 10, collect, &s, &next), -ENOENT);
  assert_string_equal(s.text, "");
  size_t n = 7;
  assert_int_equal(jobstore_cancel(f->js, "keyB", id, 2000, &n), -ENOENT);
  assert_int_equal(n, 0);
  assert_int_equal(jobstore_get(f->js, "keyA", id, &j), 0);
  assert_string_equal(j.status, "queued");
  assert_int_equal(jobstore_open_jobs(f->js, "keyA", &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(jobstore_open_jobs(f->js, "keyB", &n), 0);
  assert_int_equal(n, 0);
}

/*
 * The step of the cancel cases: a job of n items, its first taken, cancelled at 1200; the items not started are
 * cancelled (counted in the answer and the job), the running one is left running.
 */
static void cancel_with_the_first_running(struct fixture *f, size_t n, char *id, struct jobstore_job *j) {
  make_job(f->js, n, 1000, id);
  struct jobstore_task t;
  assert_int_equal(jobstore_take(f->js, 1100, 60000, &t), 0);
  size_t cancelled = 7;
  assert_int_equal(jobstore_cancel(f->js, "keyA", id, 1200, &cancelled), 0);
  assert_int_equal(cancelled, n - 1);
  assert_int_equal(jobstore_get(f->js, "keyA", id, j), 0);
  assert_string_equal(j->status, "cancelled");
  assert_int_equal(j->counts[ITEM_CANCELLED], n - 1);
  assert_int_equal(j->counts[ITEM_RUNNING], 1);
}

static void test_cancel_stops_what_has_not_started(void **state) {
  struct fixture *f = *state;
  char id[JOBSTORE_ID_LEN + 1];
  struct jobstore_job j;
  cancel_with_the_first_running(f, 3, id, &j);
  /* Nothing more is taken; the running one still ends. */
  struct jobstore_task t;
  assert_int_equal(jobstore_take(f->js, 1300, 60000, &t), -EAGAIN);
  assert_int_equal(jobstore_done(f->js, id, 1, "{}", 2, 1400), 0);
  assert_int_equal(jobstore_get(f->js, "keyA", id, &j), 0);
  assert_string_equal(j.status, "cancelled");
  assert_int_equal(j.counts[ITEM_DONE], 1);
}

/* A job with no item left to start (its only one running) is cancelled all the same: nothing to count. */
static void test_cancelling_a_job_with_nothing_queued_marks_it_cancelled(void **state) {
  struct fixture *f = *state;
  char id[JOBSTORE_ID_LEN + 1];
  struct jobstore_job j;
  cancel_with_the_first_running(f, 1, id, &j);
  assert_int_equal(j.counts[ITEM_QUEUED], 0);
}

/* Cancelling an ended job changes nothing: it stays done, with its time, and nothing is counted cancelled. */
static void test_cancelling_an_ended_job_changes_nothing(void **state) {
  struct fixture *f = *state;
  char id[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 2, 1000, id);
  struct jobstore_task t;
  assert_int_equal(jobstore_take(f->js, 1100, 60000, &t), 0);
  assert_int_equal(jobstore_done(f->js, id, t.seq, "{}", 2, 1200), 0);
  assert_int_equal(jobstore_take(f->js, 1300, 60000, &t), 0);
  assert_int_equal(jobstore_fail(f->js, id, t.seq, "transcript_not_available", "None.", 1400), 0);
  struct jobstore_job j;
  assert_int_equal(jobstore_get(f->js, "keyA", id, &j), 0);
  assert_string_equal(j.status, "done");
  size_t n = 7;
  assert_int_equal(jobstore_cancel(f->js, "keyA", id, 5000, &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(jobstore_get(f->js, "keyA", id, &j), 0);
  assert_string_equal(j.status, "done");
  assert_int_equal(j.updated_ms, 1400);
  assert_int_equal(j.counts[ITEM_DONE], 1);
  assert_int_equal(j.counts[ITEM_FAILED], 1);
  assert_int_equal(j.counts[ITEM_CANCELLED], 0);
  /* Another key's ended job is still not found. */
  assert_int_equal(jobstore_cancel(f->js, "keyB", id, 5000, &n), -ENOENT);
}

static void test_jobs_are_taken_oldest_first(void **state) {
  struct fixture *f = *state;
  char older[JOBSTORE_ID_LEN + 1], newer[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 1, 1000, older);
  make_job(f->js, 1, 2000, newer);
  struct jobstore_task t;
  assert_int_equal(jobstore_take(f->js, 3000, 60000, &t), 0);
  assert_string_equal(t.job_id, older);
  assert_int_equal(jobstore_take(f->js, 3000, 60000, &t), 0);
  assert_string_equal(t.job_id, newer);
  assert_int_equal(jobstore_take(f->js, 3000, 60000, &t), -EAGAIN);
}

static void test_jobs_take_turns_so_a_long_job_does_not_starve_a_short_one(void **state) {
  struct fixture *f = *state;
  char big[JOBSTORE_ID_LEN + 1], small[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 5, 1000, big);
  struct jobstore_task t;
  assert_int_equal(jobstore_take(f->js, 1500, 60000, &t), 0);
  assert_string_equal(t.job_id, big);
  make_job(f->js, 2, 2000, small);
  /* The new job's first item goes next, then the jobs alternate, then the long one runs alone. */
  const char *order[] = {small, big, small, big, big};
  const int64_t seqs[] = {1, 2, 2, 3, 4};
  for (int i = 0; i < 5; i++) {
    assert_int_equal(jobstore_take(f->js, 3000, 60000, &t), 0);
    assert_string_equal(t.job_id, order[i]);
    assert_int_equal(t.seq, seqs[i]);
  }
  /* An item put back for later does not hold its job's turn: the other job's items go meanwhile. */
  char third[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 2, 4000, third);
  assert_int_equal(jobstore_take(f->js, 4100, 60000, &t), 0);
  assert_string_equal(t.job_id, third);
  assert_int_equal(jobstore_retry(f->js, third, t.seq, 9000, 4200), 0);
  assert_int_equal(jobstore_take(f->js, 4300, 60000, &t), 0);
  assert_string_equal(t.job_id, big);
  assert_int_equal(t.seq, 5);
  assert_int_equal(jobstore_take(f->js, 4300, 60000, &t), 0);
  assert_string_equal(t.job_id, third);
  assert_int_equal(t.seq, 2);
  assert_int_equal(jobstore_take(f->js, 4300, 60000, &t), -EAGAIN);
}

static void test_two_handles_never_take_the_same_item(void **state) {
  struct fixture *f = *state;
  char id[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 5, 1000, id);
  struct jobstore *other = other_handle(f);
  int taken[6] = {0};
  for (int i = 0; i < 5; i++) {
    struct jobstore_task t;
    assert_int_equal(jobstore_take(i % 2 ? other : f->js, 2000, 60000, &t), 0);
    assert_true(t.seq >= 1 && t.seq <= 5);
    assert_int_equal(taken[t.seq], 0);
    taken[t.seq] = 1;
  }
  struct jobstore_task t;
  assert_int_equal(jobstore_take(other, 2000, 60000, &t), -EAGAIN);
  jobstore_close(other);
}

static void test_a_killed_writer_loses_nothing_it_committed(void **state) {
  struct fixture *f = *state;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct jobstore *js;
    char err[256], id[JOBSTORE_ID_LEN + 1];
    if (open_in(f->dir, &js, err, sizeof(err)) != 0) _exit(2);
    if (jobstore_create(js, &spec_a, ids, 4, 1000, id) != 0) _exit(3);
    struct jobstore_task t;
    if (jobstore_take(js, 1100, 500, &t) != 0 || jobstore_done(js, id, t.seq, "{\"x\":1}", 7, 1200) != 0) _exit(4);
    if (jobstore_take(js, 1300, 500, &t) != 0) _exit(5);
    raise(SIGKILL); /* dies holding item 2 running, with no close */
    _exit(6);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  jobstore_close(f->js);
  char err[256];
  assert_int_equal(open_in(f->dir, &f->js, err, sizeof(err)), 0);
  struct jobstore_task t;
  /* Its running item comes back once the lease has passed, and no sooner. */
  assert_int_equal(jobstore_recover(f->js, 1700), 0);
  assert_int_equal(jobstore_take(f->js, 1700, 500, &t), 0);
  assert_int_equal(t.seq, 3);
  assert_int_equal(jobstore_recover(f->js, 1801), 1);
  assert_int_equal(jobstore_take(f->js, 1801, 500, &t), 0);
  assert_int_equal(t.seq, 2);
  assert_int_equal(t.tries, 1);
  struct jobstore_job j;
  assert_int_equal(jobstore_get(f->js, "keyA", t.job_id, &j), 0);
  assert_int_equal(j.total, 4);
  assert_int_equal(j.counts[ITEM_DONE], 1);
  assert_int_equal(j.counts[ITEM_RUNNING], 2);
  assert_int_equal(j.counts[ITEM_QUEUED], 1);
}

static void test_a_taker_whose_lease_ran_out_cannot_end_the_item(void **state) {
  struct fixture *f = *state;
  char id[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 1, 1000, id);
  struct jobstore_task first, second;
  assert_int_equal(jobstore_take(f->js, 1000, 100, &first), 0);
  assert_int_equal(jobstore_recover(f->js, 1200), 1);
  assert_int_equal(jobstore_take(f->js, 1200, 100, &second), 0);
  assert_int_equal(second.seq, first.seq);
  /* Both believe they hold it; the item is ended once. */
  assert_int_equal(jobstore_done(f->js, id, second.seq, "{}", 2, 1250), 0);
  assert_int_equal(jobstore_done(f->js, id, first.seq, "{}", 2, 1260), -ENOENT);
}

/* A large ended job goes in transactions of at most JOBSTORE_EXPIRE_BATCH items: no one holds the database long. */
static void test_a_large_job_expires_in_small_batches(void **state) {
  struct fixture *f = *state;
  enum { N = 2 * JOBSTORE_EXPIRE_BATCH + 7 };
  char(*many)[VTS_VIDEO_ID_LEN + 1] = calloc(N, sizeof(*many));
  assert_non_null(many);
  for (size_t i = 0; i < N; i++) snprintf(many[i], sizeof(many[i]), "big%08zu", i);
  char id[JOBSTORE_ID_LEN + 1];
  assert_int_equal(jobstore_create(f->js, &spec_a, (const char(*)[VTS_VIDEO_ID_LEN + 1]) many, N, 1000, id), 0);
  free(many);
  size_t n = 0, stored = 0;
  assert_int_equal(jobstore_cancel(f->js, "keyA", id, 2000, &n), 0);
  struct jobstore_job j;
  /* Two full batches leave the job with its last items; the third takes them and the job. */
  for (int batch = 0; batch < 2; batch++) {
    assert_int_equal(jobstore_expire(f->js, 60000, 20000), 1);
    assert_int_equal(jobstore_get(f->js, "keyA", id, &j), 0);
  }
  assert_int_equal(jobstore_expire(f->js, 60000, 20000), 1);
  assert_int_equal(jobstore_get(f->js, "keyA", id, &j), -ENOENT);
  assert_int_equal(jobstore_expire(f->js, 60000, 20000), 0);
  assert_int_equal(jobstore_stored_items(f->js, "keyA", &stored), 0);
  assert_int_equal(stored, 0);
}

static void test_old_jobs_expire_with_their_items(void **state) {
  struct fixture *f = *state;
  char old[JOBSTORE_ID_LEN + 1], young[JOBSTORE_ID_LEN + 1], waiting[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 2, 1000, old);
  make_job(f->js, 2, 1500, waiting);
  make_job(f->js, 2, 50000, young);
  size_t n = 0;
  assert_int_equal(jobstore_cancel(f->js, "keyA", old, 2000, &n), 0); /* ended */
  assert_int_equal(jobstore_expire(f->js, 60000, 20000), 1);          /* the old ended job, with its items */
  struct jobstore_job j;
  assert_int_equal(jobstore_get(f->js, "keyA", old, &j), -ENOENT);
  assert_int_equal(jobstore_get(f->js, "keyA", young, &j), 0);
  assert_int_equal(j.total, 2);
  /* An old job still waiting to run is kept: it has not ended. */
  assert_int_equal(jobstore_get(f->js, "keyA", waiting, &j), 0);
  assert_int_equal(j.counts[ITEM_QUEUED], 2);
}

static const struct jobstore_spec spec_hook = {.key_id = "keyA",
                                               .language = "",
                                               .translate = "",
                                               .format = "json",
                                               .webhook_url = "https://hooks.example/in",
                                               .webhook_secret = "whsec_c2VjcmV0",
                                               .source = "video_ids"};

/*
 * A key's name may be 64 characters (the key file's longest): the store gives it back whole with an item taken, a
 * page taken and a webhook owed, so the runner charges that key and the webhook's message is made for its job.
 */
static void test_a_key_of_the_longest_name_comes_back_whole(void **state) {
  struct fixture *f = *state;
  static const char longest[] = "k123456789012345678901234567890123456789012345678901234567890123";
  assert_int_equal(strlen(longest), 64);
  struct jobstore_spec spec = spec_hook;
  spec.key_id = longest;
  char id[JOBSTORE_ID_LEN + 1];
  assert_int_equal(jobstore_create(f->js, &spec, ids, 1, 1000, id), 0);
  struct jobstore_task t;
  assert_int_equal(jobstore_take(f->js, 1100, 60000, &t), 0);
  assert_string_equal(t.key_id, longest);
  assert_int_equal(jobstore_done(f->js, id, t.seq, "{}", 2, 1200), 0);
  char job[JOBSTORE_ID_LEN + 1], key[JOBSTORE_KEY_ID_MAX + 1];
  assert_int_equal(jobstore_hook_owed(f->js, job, key), 0);
  assert_string_equal(job, id);
  assert_string_equal(key, longest);
  struct jobstore_job j;
  assert_int_equal(jobstore_get(f->js, key, job, &j), 0);
  spec.continuation = "token-2";
  spec.max_items = 4;
  spec.webhook_url = "";
  assert_int_equal(jobstore_create(f->js, &spec, ids, 0, 1300, id), 0);
  struct jobstore_page pg;
  assert_int_equal(jobstore_take_page(f->js, 1400, 60000, &pg), 0);
  assert_string_equal(pg.key_id, longest);
}

/* A webhook is owed once its job ended, recorded once, taken when due, and ended delivered, again later or given up. */
/* A job without a webhook (plain) and one with (hooked, owing nothing while it runs), both run to their end. */
static void end_a_plain_and_a_hooked_job(struct jobstore *js, char *plain, char *hooked) {
  char job[JOBSTORE_ID_LEN + 1], key[JOBSTORE_KEY_ID_MAX + 1];
  make_job(js, 1, 1000, plain);
  assert_int_equal(jobstore_create(js, &spec_hook, ids, 2, 1001, hooked), 0);
  assert_int_equal(jobstore_hook_owed(js, job, key), -EAGAIN); /* running: not ended */
  struct jobstore_task t;
  for (int i = 0; i < 3; i++) {
    assert_int_equal(jobstore_take(js, 2000, 1000, &t), 0);
    assert_int_equal(jobstore_done(js, t.job_id, t.seq, "{}", 2, 2000), 0);
  }
}

/*
 * hooked (a job of spec_hook that has ended) owes its webhook until the delivery is recorded (the first record stays);
 * the delivery is due at once, taken with a lease (taken again as the second try when it runs out), put back by its
 * taker for later, and taken as the third try.
 */
static void hook_owed_then_tried_three_times(struct jobstore *js, const char *hooked) {
  char job[JOBSTORE_ID_LEN + 1], key[JOBSTORE_KEY_ID_MAX + 1];
  assert_int_equal(jobstore_hook_owed(js, job, key), 0);
  assert_string_equal(job, hooked);
  assert_string_equal(key, "keyA");
  assert_int_equal(jobstore_hook_add(js, hooked, "{\"a\":1}", 7, 3000), 0);
  assert_int_equal(jobstore_hook_add(js, hooked, "{\"b\":2}", 7, 3500), 0); /* the first stays */
  assert_int_equal(jobstore_hook_owed(js, job, key), -EAGAIN);
  struct jobstore_hook h;
  assert_int_equal(jobstore_hook_take(js, 2999, 500, &h), -EAGAIN); /* not due yet */
  assert_int_equal(jobstore_hook_take(js, 3000, 500, &h), 0);
  assert_string_equal(h.job_id, hooked);
  assert_string_equal(h.url, "https://hooks.example/in");
  assert_string_equal(h.secret, "whsec_c2VjcmV0");
  assert_int_equal(h.attempt, 1);
  assert_int_equal(h.made_ms, 3000);
  assert_int_equal(h.body_len, 7);
  assert_memory_equal(h.body, "{\"a\":1}", 7);
  /* Taken: held back for its lease, then taken again (its taker died) as the second try. */
  assert_int_equal(jobstore_hook_take(js, 3499, 500, &h), -EAGAIN);
  assert_int_equal(jobstore_hook_take(js, 3500, 500, &h), 0);
  assert_int_equal(h.attempt, 2);
  assert_int_equal(jobstore_hook_end(js, hooked, HOOK_PENDING, 9000, 503), 0);
  assert_int_equal(jobstore_hook_take(js, 8999, 500, &h), -EAGAIN);
  assert_int_equal(jobstore_hook_take(js, 9000, 500, &h), 0);
  assert_int_equal(h.attempt, 3);
}

static void test_a_webhook_is_owed_when_its_job_ends_and_kept_until_delivered(void **state) {
  struct fixture *f = *state;
  char plain[JOBSTORE_ID_LEN + 1], hooked[JOBSTORE_ID_LEN + 1], job[JOBSTORE_ID_LEN + 1], key[JOBSTORE_KEY_ID_MAX + 1];
  end_a_plain_and_a_hooked_job(f->js, plain, hooked);
  /* The job without a webhook owes nothing; the other owes one message until it is recorded. */
  hook_owed_then_tried_three_times(f->js, hooked);
  struct jobstore_hook h;
  /* A pending delivery keeps its job from expiring; a delivered one does not. */
  assert_int_equal(jobstore_expire(f->js, 100000, 1000), 1); /* the plain job only */
  struct jobstore_job j;
  assert_int_equal(jobstore_get(f->js, "keyA", hooked, &j), 0);
  assert_int_equal(jobstore_hook_end(f->js, hooked, HOOK_DELIVERED, 0, 204), 0);
  assert_int_equal(jobstore_hook_end(f->js, hooked, HOOK_GIVEN_UP, 0, 0), -ENOENT); /* ended already */
  assert_int_equal(jobstore_hook_take(f->js, 100000, 500, &h), -EAGAIN);
  assert_int_equal(jobstore_expire(f->js, 100000, 1000), 1);
  assert_int_equal(jobstore_get(f->js, "keyA", hooked, &j), -ENOENT);
  assert_int_equal(jobstore_hook_owed(f->js, job, key), -EAGAIN);
  assert_int_equal(jobstore_hook_add(f->js, hooked, "x", VTS_WEBHOOK_MAX_PAYLOAD_BYTES + 1, 1), -EINVAL);
}

/* An ended job that owes a message not yet recorded is not expired either. */
static void test_a_job_owing_a_webhook_is_not_expired(void **state) {
  struct fixture *f = *state;
  char hooked[JOBSTORE_ID_LEN + 1];
  assert_int_equal(jobstore_create(f->js, &spec_hook, ids, 1, 1000, hooked), 0);
  size_t n = 0;
  assert_int_equal(jobstore_cancel(f->js, "keyA", hooked, 2000, &n), 0);
  assert_int_equal(jobstore_expire(f->js, 100000, 1000), 0);
  char job[JOBSTORE_ID_LEN + 1], key[JOBSTORE_KEY_ID_MAX + 1];
  assert_int_equal(jobstore_hook_owed(f->js, job, key), 0);
  assert_string_equal(job, hooked);
}

static void test_bad_input_is_refused(void **state) {
  struct fixture *f = *state;
  char id[JOBSTORE_ID_LEN + 1];
  assert_int_equal(jobstore_create(f->js, &spec_a, ids, 0, 1000, id), -EINVAL);
  struct jobstore *js = NULL;
  char err[256] = "";
  /* A state directory that is a file: refused, naming it and why. */
  char file[sizeof(f->dir) + 8], why[sizeof(file) + 32];
  snprintf(file, sizeof(file), "%s/file", f->dir);
  snprintf(why, sizeof(why), "%s: %s", file, strerror(ENOTDIR));
  FILE *fp = fopen(file, "w");
  assert_non_null(fp);
  fclose(fp);
  assert_int_equal(open_in(file, &js, err, sizeof(err)), -ENOTDIR);
  assert_null(js);
  assert_string_equal(err, why);
}

/*
 * The cap of a key's open jobs is checked in the step that makes the job: a create past it makes nothing, whatever
 * the caller counted before (a list's POST counts before its first page is read, and others may create meanwhile).
 */
static void test_a_create_past_the_keys_open_jobs_makes_nothing(void **state) {
  struct fixture *f = *state;
  struct jobstore_spec spec = spec_a;
  spec.max_open = 2;
  char id[JOBSTORE_ID_LEN + 1], id2[JOBSTORE_ID_LEN + 1], id3[JOBSTORE_ID_LEN + 1];
  assert_int_equal(jobstore_create(f->js, &spec, ids, 1, 1000, id), 0);
  spec.source = "playlist:PLours"; /* a list's job still reading its pages is open with no item queued */
  spec.continuation = "token-2";
  spec.max_items = 4;
  assert_int_equal(jobstore_create(f->js, &spec, ids, 0, 1001, id2), 0);
  assert_int_equal(jobstore_create(f->js, &spec, ids, 2, 1002, id3), -EDQUOT);
  spec.continuation = NULL;
  assert_int_equal(jobstore_create(f->js, &spec, ids, 1, 1003, id3), -EDQUOT);
  size_t open = 0;
  assert_int_equal(jobstore_open_jobs(f->js, "keyA", &open), 0);
  assert_int_equal(open, 2);
  struct jobstore_job j;
  assert_int_equal(jobstore_get(f->js, "keyA", id3, &j), -ENOENT);
  /* The cap is per key, and a cancelled job frees its place. */
  struct jobstore_spec other = spec_a;
  other.key_id = "keyB";
  other.max_open = 2;
  assert_int_equal(jobstore_create(f->js, &other, ids, 1, 1004, id3), 0);
  size_t n = 0;
  assert_int_equal(jobstore_cancel(f->js, "keyA", id, 1005, &n), 0);
  assert_int_equal(jobstore_create(f->js, &spec, ids, 1, 1006, id3), 0);
  assert_int_equal(jobstore_create(f->js, &spec, ids, 1, 1007, id), -EDQUOT);
}

/* A playlist's job: its first page made it; each next page appends the ids it does not hold yet, up to max_items. */
static void test_pages_of_a_list_grow_the_job_until_the_last(void **state) {
  struct fixture *f = *state;
  struct jobstore_spec spec = spec_a;
  spec.source = "playlist:PLours";
  spec.continuation = "token-2";
  spec.max_items = 4;
  char id[JOBSTORE_ID_LEN + 1];
  assert_int_equal(jobstore_create(f->js, &spec, ids, 2, 1000, id), 0);
  struct jobstore_job j;
  assert_int_equal(jobstore_get(f->js, "keyA", id, &j), 0);
  assert_int_equal(j.total, 2);
  assert_true(j.more);
  assert_string_equal(j.status, "queued");
  size_t open = 0;
  assert_int_equal(jobstore_open_jobs(f->js, "keyA", &open), 0);
  assert_int_equal(open, 1);

  /* Both items end: the list still has a page to read, so the job is running, not done. */
  struct jobstore_task t;
  for (int i = 0; i < 2; i++) {
    assert_int_equal(jobstore_take(f->js, 1000, 60000, &t), 0);
    assert_int_equal(jobstore_fail(f->js, t.job_id, t.seq, "transcript_not_available", "m", 1001), 0);
  }
  assert_int_equal(jobstore_get(f->js, "keyA", id, &j), 0);
  assert_string_equal(j.status, "running");
  assert_int_equal(jobstore_expire(f->js, 10000000, 1), 0); /* not ended: kept */

  /* The page is taken once; a second taker finds nothing while the lease lasts. */
  struct jobstore_page pg;
  assert_int_equal(jobstore_take_page(f->js, 2000, 60000, &pg), 0);
  assert_string_equal(pg.job_id, id);
  assert_string_equal(pg.token, "token-2");
  assert_string_equal(pg.key_id, "keyA");
  assert_int_equal(pg.tries, 0);
  assert_int_equal(jobstore_take_page(f->js, 2000, 60000, &pg), -EAGAIN);
  /* Its taker dies: the lease runs out and the same continuation is read again. */
  assert_int_equal(jobstore_recover(f->js, 70000), 0);
  assert_int_equal(jobstore_take_page(f->js, 70000, 60000, &pg), 0);
  assert_string_equal(pg.token, "token-2");
  assert_int_equal(pg.tries, 1);

  /* The next page repeats a held id and one of its own: each is folded; its new ids follow in order. */
  static const char page2[][VTS_VIDEO_ID_LEN + 1] = {"ourVideo002", "ourVideo003", "ourVideo003", "ourVideo004"};
  size_t added = 0;
  assert_int_equal(jobstore_page_done(f->js, id, page2, 4, "token-3", 70001, &added), 0);
  assert_int_equal(added, 2);
  assert_int_equal(jobstore_page_done(f->js, id, page2, 4, "token-3", 70001, &added), -ENOENT); /* not taken */
  assert_int_equal(jobstore_get(f->js, "keyA", id, &j), 0);
  assert_int_equal(j.total, 4);
  read_items(f->js, id, 0, 10, collect,
             "ourVideo001:failed:transcript_not_available:m ourVideo002:failed:transcript_not_available:m "
             "ourVideo003:queued ourVideo004:queued");
  /* The job holds max_items: the list ends though the page named another. */
  assert_false(j.more);
  assert_int_equal(jobstore_take_page(f->js, 80000, 60000, &pg), -EAGAIN);
}

/* A page met a ration: back, not before its time; a page's last read (no token) ends the list; cancel drops it. */
static void test_a_page_given_back_waits_and_cancel_drops_the_list(void **state) {
  struct fixture *f = *state;
  struct jobstore_spec spec = spec_a;
  spec.continuation = "t1";
  spec.max_items = 100;
  char id[JOBSTORE_ID_LEN + 1], id2[JOBSTORE_ID_LEN + 1];
  assert_int_equal(jobstore_create(f->js, &spec, ids, 0, 1000, id), 0); /* an empty first page that goes on */
  assert_int_equal(jobstore_create(f->js, &spec, ids, 1, 1001, id2), 0);
  struct jobstore_page pg;
  assert_int_equal(jobstore_take_page(f->js, 2000, 60000, &pg), 0);
  assert_string_equal(pg.job_id, id); /* the older job first */
  assert_int_equal(jobstore_page_retry(f->js, id, 5000, 2000), 0);
  assert_int_equal(jobstore_take_page(f->js, 2001, 60000, &pg), 0);
  assert_string_equal(pg.job_id, id2);
  assert_int_equal(jobstore_take_page(f->js, 4999, 60000, &pg), -EAGAIN);
  assert_int_equal(jobstore_take_page(f->js, 5000, 60000, &pg), 0);
  assert_string_equal(pg.job_id, id);
  size_t added = 0;
  assert_int_equal(jobstore_page_done(f->js, id, ids + 2, 3, "", 5001, &added), 0);
  assert_int_equal(added, 3);
  struct jobstore_job j;
  assert_int_equal(jobstore_get(f->js, "keyA", id, &j), 0);
  assert_false(j.more);
  assert_int_equal(j.total, 3);
  size_t n = 0;
  assert_int_equal(jobstore_cancel(f->js, "keyA", id2, 6000, &n), 0);
  assert_int_equal(jobstore_get(f->js, "keyA", id2, &j), 0);
  assert_false(j.more);
  assert_string_equal(j.status, "cancelled");
  assert_int_equal(jobstore_page_done(f->js, id2, ids, 1, "t2", 6001, &added), -ENOENT);
  /* No continuation and no video: nothing to make. */
  spec.continuation = "";
  assert_int_equal(jobstore_create(f->js, &spec, ids, 0, 7000, id), -EINVAL);
}

/* A playlist's job with a webhook owes it only once its list is read to the end, not when its first items end. */
static void test_a_list_job_owes_its_webhook_after_its_last_page(void **state) {
  struct fixture *f = *state;
  struct jobstore_spec spec = spec_hook;
  spec.continuation = "t1";
  spec.max_items = 10;
  char id[JOBSTORE_ID_LEN + 1], job[JOBSTORE_ID_LEN + 1], key[JOBSTORE_KEY_ID_MAX + 1];
  assert_int_equal(jobstore_create(f->js, &spec, ids, 1, 1000, id), 0);
  struct jobstore_task t;
  assert_int_equal(jobstore_take(f->js, 1000, 1000, &t), 0);
  assert_int_equal(jobstore_done(f->js, t.job_id, t.seq, "{}", 2, 1001), 0);
  assert_int_equal(jobstore_hook_owed(f->js, job, key), -EAGAIN); /* its list goes on */
  assert_int_equal(jobstore_expire(f->js, 10000000, 1), 0);       /* nor is it expired */
  struct jobstore_page pg;
  size_t added = 0;
  assert_int_equal(jobstore_take_page(f->js, 2000, 1000, &pg), 0);
  assert_int_equal(jobstore_page_done(f->js, id, ids + 1, 1, "", 2001, &added), 0);
  assert_int_equal(added, 1);
  assert_int_equal(jobstore_hook_owed(f->js, job, key), -EAGAIN); /* its new item is queued */
  assert_int_equal(jobstore_take(f->js, 3000, 1000, &t), 0);
  assert_int_equal(jobstore_done(f->js, t.job_id, t.seq, "{}", 2, 3001), 0);
  assert_int_equal(jobstore_hook_owed(f->js, job, key), 0);
  assert_string_equal(job, id);
}

/* The value of a Redis string key as a number (0 when missing). */
static long long redis_num(int port, const char *cmd) {
  redisContext *c = test_redis_sync(port);
  assert_non_null(c);
  redisReply *r = redisCommand(c, cmd);
  assert_non_null(r);
  long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
  freeReplyObject(r);
  redisFree(c);
  return v;
}

/* The bytes Redis has sent its clients so far (INFO stats: total_net_output_bytes). */
static long long redis_sent(int port) {
  redisContext *c = test_redis_sync(port);
  assert_non_null(c);
  redisReply *r = redisCommand(c, "INFO stats");
  assert_non_null(r);
  assert_int_equal(r->type, REDIS_REPLY_STRING);
  const char *at = strstr(r->str, "total_net_output_bytes:");
  assert_non_null(at);
  long long v = atoll(at + strlen("total_net_output_bytes:"));
  freeReplyObject(r);
  redisFree(c);
  return v;
}

/* A walk that takes items until their answers pass full bytes, as the API's page does. */
struct big_walk {
  size_t full, bytes, n;
  int64_t last_seq;
  int in_order;
};

static int big_item(void *ctx, const struct jobstore_item *it) {
  struct big_walk *w = ctx;
  if (w->n > 0 && w->bytes >= w->full) return JOBSTORE_PAGE_FULL;
  if (it->seq != w->last_seq + 1 || it->status != ITEM_DONE || it->body_len != 100000) w->in_order = 0;
  w->last_seq = it->seq;
  w->bytes += it->body_len;
  w->n++;
  return 0;
}

/*
 * A page of items is read in bounded memory: a page that stops at its size (a few large answers) reads from Redis
 * about what it holds, not every answer of the limit asked for.
 */
static void test_a_page_of_large_answers_reads_only_about_what_it_holds(void **state) {
  struct fixture *f = *state;
  enum { N = 150, BODY = 100000 };
  static char big_ids[N][VTS_VIDEO_ID_LEN + 1];
  for (int i = 0; i < N; i++) snprintf(big_ids[i], sizeof(big_ids[i]), "bigVideo%03d", i);
  char id[JOBSTORE_ID_LEN + 1];
  assert_int_equal(jobstore_create(f->js, &spec_a, (const char(*)[VTS_VIDEO_ID_LEN + 1]) big_ids, N, 1000, id), 0);
  /* Answers that do not compress: each costs Redis its whole size. */
  char *body = malloc(BODY);
  assert_non_null(body);
  uint32_t x = 12345;
  for (int i = 0; i < BODY; i++) {
    x = x * 1103515245u + 12345u;
    body[i] = (char)('a' + (x >> 16) % 26);
  }
  for (int i = 0; i < N; i++) {
    struct jobstore_task t;
    assert_int_equal(jobstore_take(f->js, 2000, 60000, &t), 0);
    body[0] = (char)('a' + i % 26);
    assert_int_equal(jobstore_done(f->js, t.job_id, t.seq, body, BODY, 2001), 0);
  }
  free(body);
  /* A page full past 1 MB: about 10 answers, not the 150 the limit would allow. */
  struct big_walk w = {.full = 1000000, .in_order = 1};
  int64_t next = 0;
  long long before = redis_sent(f->port);
  assert_int_equal(jobstore_items(f->js, "keyA", id, 0, 1000, big_item, &w, &next), 0);
  long long sent = redis_sent(f->port) - before;
  assert_int_equal(w.n, 10);
  assert_int_equal(next, 10);
  assert_true(w.in_order);
  assert_true(sent < 5000000);
  /* The rest, read on, each page in order from where the last ended. */
  size_t total = w.n;
  while (next != 0) {
    w.n = 0;
    w.bytes = 0;
    assert_int_equal(jobstore_items(f->js, "keyA", id, next, 1000, big_item, &w, &next), 0);
    total += w.n;
  }
  assert_int_equal(total, N);
  assert_int_equal(w.last_seq, N);
  assert_true(w.in_order);
}

static void test_a_unit_is_counted_with_the_answer_and_none_past_the_quota(void **state) {
  struct fixture *f = *state;
  char id[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 3, 1000, id);
  struct jobstore_charge c = {.counter = "vts:rl:{0123456789abcdef}:q:202611",
                              .quota = 2,
                              .ttl_s = 3600,
                              .quota_code = "quota_exceeded",
                              .quota_message = "Used up."};
  assert_true(jobstore_charges(f->js));
  struct jobstore_task t;
  for (int i = 0; i < 3; i++) {
    assert_int_equal(jobstore_take(f->js, 2000, 60000, &t), 0);
    enum jobstore_charged outcome;
    assert_int_equal(jobstore_done_charged(f->js, id, t.seq, "{}", 2, &c, 2100, &outcome), 0);
    assert_int_equal(outcome, i < 2 ? JOBSTORE_CHARGED_KEPT : JOBSTORE_CHARGED_QUOTA_FAILED);
  }
  assert_int_equal(redis_num(f->port, "GET vts:rl:{0123456789abcdef}:q:202611"), 2);
  long long ttl = redis_num(f->port, "TTL vts:rl:{0123456789abcdef}:q:202611");
  assert_true(ttl > 3500 && ttl <= 3600);
  read_items(f->js, id, 0, 10, collect,
             "ourVideo001:done:{} ourVideo002:done:{} ourVideo003:failed:quota_exceeded:Used up.");
}

/* An item's unit held before its platform request: once per item, none past the quota, given back once. */
static void test_a_unit_is_reserved_once_an_item_none_past_the_quota_and_given_back_once(void **state) {
  struct fixture *f = *state;
  char id[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 3, 1000, id);
  struct jobstore_charge c = {.counter = "vts:rl:{00112233445566aa}:q:202611", .quota = 2, .ttl_s = 3600};
  enum jobstore_reserved got = JOBSTORE_RESERVED_USED_UP;
  assert_int_equal(jobstore_reserve(f->js, id, 1, &c, &got), 0);
  assert_int_equal(got, JOBSTORE_RESERVED_HELD);
  /* Held already (a runner that claimed the item from a dead one): held, and not counted again. */
  got = JOBSTORE_RESERVED_USED_UP;
  assert_int_equal(jobstore_reserve(f->js, id, 1, &c, &got), 0);
  assert_int_equal(got, JOBSTORE_RESERVED_HELD);
  assert_int_equal(jobstore_reserve(f->js, id, 2, &c, &got), 0);
  assert_int_equal(got, JOBSTORE_RESERVED_HELD);
  assert_int_equal(redis_num(f->port, "GET vts:rl:{00112233445566aa}:q:202611"), 2);
  assert_int_equal(jobstore_reserve(f->js, id, 3, &c, &got), 0);
  assert_int_equal(got, JOBSTORE_RESERVED_USED_UP);
  assert_int_equal(redis_num(f->port, "GET vts:rl:{00112233445566aa}:q:202611"), 2);
  /* Given back once, however often it is asked. */
  assert_int_equal(jobstore_unreserve(f->js, id, 1, &c), 0);
  assert_int_equal(jobstore_unreserve(f->js, id, 1, &c), 0);
  assert_int_equal(redis_num(f->port, "GET vts:rl:{00112233445566aa}:q:202611"), 1);
  assert_int_equal(jobstore_reserve(f->js, "jnosuchjob0000000000", 1, &c, &got), -ENOENT);
}

/* SQLite holds no month counter (the limiter's shared table does): the runner charges there instead. */
static void test_a_store_without_the_months_counters_reserves_nothing(void **state) {
  struct fixture *f = *state;
  char id[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 1, 1000, id);
  struct jobstore_charge c = {.counter = "unused", .quota = 2, .ttl_s = 3600};
  enum jobstore_reserved got = JOBSTORE_RESERVED_HELD;
  assert_false(jobstore_charges(f->js));
  assert_int_equal(jobstore_reserve(f->js, id, 1, &c, &got), -ENOTSUP);
  assert_int_equal(jobstore_unreserve(f->js, id, 1, &c), -ENOTSUP);
}

static void test_a_silent_runners_item_is_claimed_once_and_its_answer_counted_once(void **state) {
  struct fixture *f = *state;
  struct jobstore *other = other_handle(f);
  char id[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 2, 1000, id);
  struct jobstore_task t1, t2;
  /* Before the first take: the item's idle time, which Redis counts from its delivery, starts after this. */
  uint64_t taken_at = util_now_ms();
  assert_int_equal(jobstore_take(f->js, 2000, 60000, &t1), 0);
  assert_int_equal(jobstore_take(other, 2000, 60000, &t2), 0);
  assert_int_equal(t2.seq, 2);
  /* Only the other runner renews its item: the first one's goes to the other after JOBSTORE_CLAIM_IDLE_MS. */
  uint64_t deadline = util_now_ms() + JOBSTORE_CLAIM_IDLE_MS + 3000;
  int claimed = 0;
  while (!claimed && util_now_ms() < deadline) {
    assert_int_equal(jobstore_keepalive(other, 3000), 0);
    struct jobstore_task t;
    int rv = jobstore_take(other, 3000, 60000, &t);
    if (rv == 0) {
      assert_int_equal(t.seq, 1); /* never the other's own item 2, which it keeps fresh */
      assert_int_equal(t.tries, 1);
      claimed = 1;
    } else {
      assert_int_equal(rv, -EAGAIN);
      usleep(100000); /* poll interval: take again until the claim, within the deadline */
    }
  }
  assert_true(claimed);
  assert_true(util_now_ms() >= taken_at + JOBSTORE_CLAIM_IDLE_MS); /* not before the idle time */
  struct jobstore_charge c = {.counter = "vts:rl:{fedcba9876543210}:q:202611",
                              .quota = 10,
                              .ttl_s = 3600,
                              .quota_code = "quota_exceeded",
                              .quota_message = "Used up."};
  /* Both runners answer item 1: the first answer is kept and counted, the second changes nothing. */
  enum jobstore_charged outcome = JOBSTORE_CHARGED_QUOTA_FAILED;
  assert_int_equal(jobstore_done_charged(other, id, 1, "{\"x\":1}", 7, &c, 4000, &outcome), 0);
  assert_int_equal(outcome, JOBSTORE_CHARGED_KEPT);
  assert_int_equal(jobstore_done_charged(f->js, id, 1, "{\"y\":2}", 7, &c, 4100, NULL), -ENOENT);
  outcome = JOBSTORE_CHARGED_QUOTA_FAILED;
  assert_int_equal(jobstore_done_charged(other, id, 2, "{\"z\":3}", 7, &c, 4200, &outcome), 0);
  assert_int_equal(outcome, JOBSTORE_CHARGED_KEPT);
  assert_int_equal(redis_num(f->port, "GET vts:rl:{fedcba9876543210}:q:202611"), 2);
  read_items(f->js, id, 0, 10, collect, "ourVideo001:done:{\"x\":1} ourVideo002:done:{\"z\":3}");
  assert_int_equal(redis_num(f->port, "XLEN vts:jobs:work"), 0);
  jobstore_close(other);
}

static void test_a_redis_that_does_not_answer_fails_fast_and_is_used_again_once_back(void **state) {
  struct fixture *f = *state;
  char id[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 1, 1000, id);
  /* The work stream deleted under a connected runner: one take fails, the next makes it again and takes. */
  test_redis_command(f->port, "DEL vts:jobs:work");
  struct jobstore_task t;
  assert_int_equal(jobstore_take(f->js, 2000, 60000, &t), -EIO);
  assert_int_equal(jobstore_take(f->js, 2000, 60000, &t), 0);
  assert_string_equal(t.job_id, id);
  kill(f->pid, SIGSTOP);
  struct jobstore_job j;
  uint64_t t0 = util_now_ms();
  assert_int_equal(jobstore_get(f->js, "keyA", id, &j), -EIO);
  assert_true(util_now_ms() - t0 < VTS_JOBS_REDIS_TIMEOUT_MS + 200);
  /* Down: the next calls answer at once, without waiting for Redis again. */
  t0 = util_now_ms();
  assert_int_equal(jobstore_get(f->js, "keyA", id, &j), -EIO);
  assert_true(util_now_ms() - t0 < 50);
  kill(f->pid, SIGCONT);
  uint64_t deadline = util_now_ms() + VTS_JOBS_REDIS_RETRY_MS + 2000;
  int rv = -EIO;
  while (rv != 0 && util_now_ms() < deadline) {
    rv = jobstore_get(f->js, "keyA", id, &j);
    if (rv != 0) usleep(50000); /* poll interval: until the retry time has come, within the deadline */
  }
  assert_int_equal(rv, 0);
  assert_string_equal(j.status, "running");
}

static void test_an_ended_jobs_keys_expire_and_the_stream_keeps_nothing_of_it(void **state) {
  struct fixture *f = *state;
  assert_string_equal(jobstore_backend(f->js), "redis");
  char id[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 1, 1000, id);
  char cmd[96];
  snprintf(cmd, sizeof(cmd), "PTTL vts:job:%s", id);
  assert_int_equal(redis_num(f->port, cmd), -1); /* open: kept */
  struct jobstore_task t;
  assert_int_equal(jobstore_take(f->js, 2000, 60000, &t), 0);
  assert_int_equal(redis_num(f->port, "XLEN vts:jobs:work"), 1);
  assert_int_equal(jobstore_done(f->js, id, t.seq, "{}", 2, 2100), 0);
  assert_int_equal(redis_num(f->port, "XLEN vts:jobs:work"), 0);
  const char *suffix[] = {"", ":it", ":res"};
  for (int i = 0; i < 3; i++) {
    snprintf(cmd, sizeof(cmd), "PTTL vts:job:%s%s", id, suffix[i]);
    long long ttl = redis_num(f->port, cmd);
    assert_true(ttl > 55000 && ttl <= 60000);
  }
  snprintf(cmd, sizeof(cmd), "SISMEMBER vts:jobs:open:keyA %s", id);
  assert_int_equal(redis_num(f->port, cmd), 0);
}

static void test_a_redis_restarted_under_an_idle_connection_is_reached_again_at_once(void **state) {
  struct fixture *f = *state;
  char id[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 1, 1000, id);
  struct jobstore_job j;
  assert_int_equal(jobstore_get(f->js, "keyA", id, &j), 0);
  test_redis_stop(f->pid);
  f->pid = test_redis_start(f->port); /* empty: it kept nothing */
  assert_int_equal(jobstore_get(f->js, "keyA", id, &j), -ENOENT);
  make_job(f->js, 2, 2000, id);
  struct jobstore_task t;
  assert_int_equal(jobstore_take(f->js, 3000, 60000, &t), 0); /* the work stream and its group are made again */
  assert_string_equal(t.job_id, id);
}

static void test_a_webhook_is_owed_when_its_job_ends_and_its_job_kept_until_delivered(void **state) {
  struct fixture *f = *state;
  char plain[JOBSTORE_ID_LEN + 1], hooked[JOBSTORE_ID_LEN + 1], cancelled[JOBSTORE_ID_LEN + 1];
  char job[JOBSTORE_ID_LEN + 1], key[JOBSTORE_KEY_ID_MAX + 1], cmd[96];
  end_a_plain_and_a_hooked_job(f->js, plain, hooked);
  /* The job without a webhook ended and expires; the other owes one message and is kept until it is delivered. */
  snprintf(cmd, sizeof(cmd), "PTTL vts:job:%s", plain);
  assert_true(redis_num(f->port, cmd) > 0);
  snprintf(cmd, sizeof(cmd), "PTTL vts:job:%s:it", hooked);
  assert_int_equal(redis_num(f->port, cmd), -1);
  hook_owed_then_tried_three_times(f->js, hooked);
  struct jobstore_hook h;
  assert_int_equal(redis_num(f->port, cmd), -1); /* pending: kept */
  assert_int_equal(jobstore_hook_end(f->js, hooked, HOOK_DELIVERED, 0, 204), 0);
  assert_int_equal(jobstore_hook_end(f->js, hooked, HOOK_GIVEN_UP, 0, 0), -ENOENT); /* ended already */
  assert_int_equal(jobstore_hook_take(f->js, 100000, 500, &h), -EAGAIN);
  long long ttl = redis_num(f->port, cmd);
  assert_true(ttl > 55000 && ttl <= 60000); /* delivered: the job expires now */
  assert_int_equal(jobstore_hook_owed(f->js, job, key), -EAGAIN);
  /* A cancelled job owes its webhook too, and is kept for it. */
  assert_int_equal(jobstore_create(f->js, &spec_hook, ids, 1, 4000, cancelled), 0);
  size_t n = 0;
  assert_int_equal(jobstore_cancel(f->js, "keyA", cancelled, 4100, &n), 0);
  assert_int_equal(jobstore_hook_owed(f->js, job, key), 0);
  assert_string_equal(job, cancelled);
  snprintf(cmd, sizeof(cmd), "PTTL vts:job:%s", cancelled);
  assert_int_equal(redis_num(f->port, cmd), -1);
}

/* A take passes over the keys it is told (those at their share, or revoked): their work waits, in its order. */
static void test_a_take_passes_over_the_keys_it_is_told(void **state) {
  struct fixture *f = *state;
  char a[JOBSTORE_ID_LEN + 1], b[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 2, 1000, a);
  struct jobstore_spec spec = spec_a;
  spec.key_id = "keyB";
  assert_int_equal(jobstore_create(f->js, &spec, ids + 2, 1, 1001, b), 0);
  const char *only_a[] = {"keyA"}, *both[] = {"keyA", "keyB"};
  struct jobstore_skip skip_a = {only_a, 1}, skip_both = {both, 2};
  struct jobstore_task t;
  assert_int_equal(jobstore_take_skip(f->js, 2000, 60000, &skip_both, &t), -EAGAIN);
  assert_int_equal(jobstore_take_skip(f->js, 2000, 60000, &skip_a, &t), 0);
  assert_string_equal(t.job_id, b);
  assert_string_equal(t.key_id, "keyB");
  assert_int_equal(jobstore_take_skip(f->js, 2000, 60000, &skip_a, &t), -EAGAIN);
  /* keyA's items, in their order, once nothing passes them over. */
  assert_int_equal(jobstore_take_skip(f->js, 2000, 60000, NULL, &t), 0);
  assert_string_equal(t.video_id, "ourVideo001");
  /* An item put back (a ration) is passed over too while its key is. */
  assert_int_equal(jobstore_retry(f->js, t.job_id, t.seq, 2500, 2001), 0);
  assert_int_equal(jobstore_take_skip(f->js, 3000, 60000, &skip_a, &t), -EAGAIN);
  assert_int_equal(jobstore_take_skip(f->js, 3000, 60000, NULL, &t), 0);
  assert_string_equal(t.video_id, "ourVideo001");
}

/* A webhook try is taken with its key, and passed over while its key is (a key with a try in flight, or revoked). */
static void test_a_webhook_try_passes_over_the_keys_it_is_told(void **state) {
  struct fixture *f = *state;
  char plain[JOBSTORE_ID_LEN + 1], hooked[JOBSTORE_ID_LEN + 1], job[JOBSTORE_ID_LEN + 1], key[JOBSTORE_KEY_ID_MAX + 1];
  end_a_plain_and_a_hooked_job(f->js, plain, hooked);
  assert_int_equal(jobstore_hook_owed(f->js, job, key), 0);
  assert_int_equal(jobstore_hook_add(f->js, hooked, "{}", 2, 3000), 0);
  const char *only_a[] = {"keyA"}, *only_b[] = {"keyB"};
  struct jobstore_skip skip_a = {only_a, 1}, skip_b = {only_b, 1};
  struct jobstore_hook h;
  assert_int_equal(jobstore_hook_take_skip(f->js, 3000, 500, &skip_a, &h), -EAGAIN);
  assert_int_equal(jobstore_hook_take_skip(f->js, 3000, 500, &skip_b, &h), 0);
  assert_string_equal(h.job_id, hooked);
  assert_string_equal(h.key_id, "keyA");
  assert_int_equal(h.attempt, 1);
}

/* A list read within bounds stops at a page that adds no id, or at its max pages, and says why; a page is numbered. */
static void test_a_bounded_list_stops_and_says_why(void **state) {
  struct fixture *f = *state;
  struct jobstore_spec spec = spec_a;
  spec.source = "playlist:PLours";
  spec.continuation = "t2";
  spec.max_items = 100;
  char pages[JOBSTORE_ID_LEN + 1], same[JOBSTORE_ID_LEN + 1];
  assert_int_equal(jobstore_create(f->js, &spec, ids, 2, 1000, same), 0);
  assert_int_equal(jobstore_create(f->js, &spec, ids, 1, 1001, pages), 0);
  struct jobstore_page pg;
  size_t added = 0;
  struct jobstore_job j;
  /* The older job's page 2 holds only ids it has: it stops there. */
  assert_int_equal(jobstore_take_page(f->js, 2000, 60000, &pg), 0);
  assert_string_equal(pg.job_id, same);
  assert_int_equal(pg.read, 1);
  assert_int_equal(jobstore_page_end(f->js, same, ids, 2, "t3", pg.read + 1, 3, NULL, 2001, &added), 0);
  assert_int_equal(added, 0);
  assert_int_equal(jobstore_get(f->js, "keyA", same, &j), 0);
  assert_false(j.more);
  assert_string_equal(j.stop_reason, JOBSTORE_STOP_NO_NEW_IDS);
  /* A take that passes over keyA finds no page. */
  const char *pass_b[] = {"keyB"}, *pass_a[] = {"keyA"};
  struct jobstore_skip skip_b = {pass_b, 1}, skip_a = {pass_a, 1};
  assert_int_equal(jobstore_take_page_skip(f->js, 2002, 60000, &skip_a, &pg), -EAGAIN);
  assert_int_equal(jobstore_take_page_skip(f->js, 2002, 60000, &skip_b, &pg), 0);
  assert_string_equal(pg.job_id, pages);
  assert_int_equal(pg.read, 1);
  /* Page 2 of at most 3 adds an id: the list goes on. */
  assert_int_equal(jobstore_page_end(f->js, pages, ids + 1, 1, "t3", pg.read + 1, 3, NULL, 2003, &added), 0);
  assert_int_equal(added, 1);
  assert_int_equal(jobstore_get(f->js, "keyA", pages, &j), 0);
  assert_true(j.more);
  assert_string_equal(j.stop_reason, "");
  /* Page 3 is its last allowed: it stops though the page names a next one. */
  assert_int_equal(jobstore_take_page(f->js, 2004, 60000, &pg), 0);
  assert_string_equal(pg.job_id, pages);
  assert_int_equal(pg.read, 2);
  assert_int_equal(jobstore_page_end(f->js, pages, ids + 2, 1, "t4", pg.read + 1, 3, NULL, 2005, &added), 0);
  assert_int_equal(added, 1);
  assert_int_equal(jobstore_get(f->js, "keyA", pages, &j), 0);
  assert_false(j.more);
  assert_int_equal(j.total, 3);
  assert_string_equal(j.stop_reason, JOBSTORE_STOP_MAX_PAGES);
  assert_int_equal(jobstore_take_page(f->js, 2006, 60000, &pg), -EAGAIN);
  /* A list the runner ends (its page failed) says so; the last page of a list (no next) says nothing. */
  char failed[JOBSTORE_ID_LEN + 1], whole[JOBSTORE_ID_LEN + 1];
  assert_int_equal(jobstore_create(f->js, &spec, ids, 1, 3000, failed), 0);
  assert_int_equal(jobstore_take_page(f->js, 3001, 60000, &pg), 0);
  assert_int_equal(
      jobstore_page_end(f->js, failed, NULL, 0, "", pg.read + 1, 3, JOBSTORE_STOP_PAGE_FAILED, 3002, &added), 0);
  assert_int_equal(jobstore_get(f->js, "keyA", failed, &j), 0);
  assert_string_equal(j.stop_reason, JOBSTORE_STOP_PAGE_FAILED);
  assert_int_equal(jobstore_create(f->js, &spec, ids, 1, 4000, whole), 0);
  assert_int_equal(jobstore_take_page(f->js, 4001, 60000, &pg), 0);
  assert_int_equal(jobstore_page_end(f->js, whole, ids + 3, 1, "", pg.read + 1, 3, NULL, 4002, &added), 0);
  assert_int_equal(jobstore_get(f->js, "keyA", whole, &j), 0);
  assert_false(j.more);
  assert_string_equal(j.stop_reason, "");
}

/* A revoked key: its jobs with work left are cancelled with the reason, lists and webhooks end; others run on. */
static void test_a_revoked_keys_jobs_stop_and_owe_no_webhook(void **state) {
  struct fixture *f = *state;
  struct jobstore_spec list = spec_hook;
  list.continuation = "t2";
  list.max_items = 100;
  char hooked[JOBSTORE_ID_LEN + 1], listed[JOBSTORE_ID_LEN + 1], ended[JOBSTORE_ID_LEN + 1], other[JOBSTORE_ID_LEN + 1];
  /* An ended job whose delivery is pending. */
  assert_int_equal(jobstore_create(f->js, &spec_hook, ids, 1, 1000, ended), 0);
  struct jobstore_task t;
  assert_int_equal(jobstore_take(f->js, 1000, 60000, &t), 0);
  assert_int_equal(jobstore_fail(f->js, t.job_id, t.seq, "transcript_not_available", "m", 1001), 0);
  char job[JOBSTORE_ID_LEN + 1], key[JOBSTORE_KEY_ID_MAX + 1];
  assert_int_equal(jobstore_hook_owed(f->js, job, key), 0);
  assert_int_equal(jobstore_hook_add(f->js, ended, "{}", 2, 1002), 0);
  /* A job of 3 items, one running; a list job; another key's job. */
  assert_int_equal(jobstore_create(f->js, &spec_hook, ids, 3, 2000, hooked), 0);
  assert_int_equal(jobstore_create(f->js, &list, ids, 1, 2001, listed), 0);
  struct jobstore_spec spec_b = spec_a;
  spec_b.key_id = "keyB";
  assert_int_equal(jobstore_create(f->js, &spec_b, ids, 1, 2002, other), 0);
  assert_int_equal(jobstore_take(f->js, 3000, 60000, &t), 0);
  assert_string_equal(t.job_id, hooked);

  assert_int_equal(jobstore_stop_key(f->js, "keyA", JOBSTORE_STOP_KEY_REVOKED, 4000), 2);
  struct jobstore_job j;
  assert_int_equal(jobstore_get(f->js, "keyA", hooked, &j), 0);
  assert_string_equal(j.status, "cancelled");
  assert_string_equal(j.stop_reason, "key_revoked");
  assert_int_equal(j.counts[ITEM_CANCELLED], 2);
  assert_int_equal(j.counts[ITEM_RUNNING], 1);
  assert_int_equal(jobstore_get(f->js, "keyA", listed, &j), 0);
  assert_string_equal(j.stop_reason, "key_revoked");
  assert_false(j.more);
  assert_int_equal(jobstore_get(f->js, "keyA", ended, &j), 0);
  assert_string_equal(j.stop_reason, ""); /* it had ended: only its delivery is given up */
  /* Nothing of keyA is taken again: no item, no page, no webhook try, now or once its running item ends. */
  struct jobstore_page pg;
  struct jobstore_hook h;
  assert_int_equal(jobstore_take_page(f->js, 5000, 60000, &pg), -EAGAIN);
  assert_int_equal(jobstore_hook_take(f->js, 5000, 60000, &h), -EAGAIN);
  assert_int_equal(jobstore_fail(f->js, t.job_id, t.seq, "key_revoked", "revoked", 5001), 0);
  assert_int_equal(jobstore_hook_owed(f->js, job, key), -EAGAIN);
  assert_int_equal(jobstore_hook_take(f->js, 6000, 60000, &h), -EAGAIN);
  assert_int_equal(jobstore_take(f->js, 6000, 60000, &t), 0);
  assert_string_equal(t.job_id, other);
  assert_int_equal(jobstore_take(f->js, 6000, 60000, &t), -EAGAIN);
  /* Stopped again: nothing left to stop. */
  assert_int_equal(jobstore_stop_key(f->js, "keyA", JOBSTORE_STOP_KEY_REVOKED, 7000), 0);
}

/*
 * Another writer holding the database (another gateway process in a long write): a take (its transaction's begin) and
 * a recovery (a statement of its own) wait SQLite's busy timeout and fail with -EIO, reads go on, and the same handle,
 * whose statements are prepared once and kept, serves every call again once the writer lets go, each with the
 * parameters of its own call.
 */
static void test_a_store_held_by_another_writer_fails_then_serves_again(void **state) {
  struct fixture *f = *state;
  char id[JOBSTORE_ID_LEN + 1];
  make_job(f->js, 2, 1000, id);
  struct jobstore_task t;
  assert_int_equal(jobstore_take(f->js, 2000, 60000, &t), 0);
  assert_int_equal(t.seq, 1);
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
  struct jobstore_task held;
  assert_int_equal(jobstore_take(f->js, 3000, 60000, &held), -EIO);
  assert_int_equal(jobstore_recover(f->js, 100000), -EIO);
  struct jobstore_job j;
  assert_int_equal(jobstore_get(f->js, "keyA", id, &j), 0);
  assert_int_equal(j.counts[ITEM_RUNNING], 1);
  assert_int_equal(j.counts[ITEM_QUEUED], 1);
  assert_int_equal(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_close(db), SQLITE_OK);
  assert_int_equal(jobstore_done(f->js, id, t.seq, "{\"x\":1}", 7, 3100), 0);
  assert_int_equal(jobstore_take(f->js, 3200, 500, &t), 0);
  assert_int_equal(t.seq, 2);
  assert_string_equal(t.video_id, "ourVideo002");
  assert_int_equal(t.tries, 0);
  /* Its lease (3700) has passed at 3701 and not at 3699: the recovery's parameter is this call's. */
  assert_int_equal(jobstore_recover(f->js, 3699), 0);
  assert_int_equal(jobstore_recover(f->js, 3701), 1);
  read_items(f->js, id, 0, 10, collect, "ourVideo001:done:{\"x\":1} ourVideo002:queued");
}

/* A case on SQLite, and one on Redis (named so). */
#define ON_SQLITE(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
#define ON_REDIS(f) \
  { #f " (redis)", f, setup_redis, teardown_redis, NULL }
#define ON_BOTH(f) ON_SQLITE(f), ON_REDIS(f)

int main(void) {
  const struct CMUnitTest tests[] = {
      ON_BOTH(test_a_job_lives_through_its_items),
      ON_BOTH(test_items_page_in_order_with_a_cursor),
      ON_BOTH(test_a_full_page_ends_before_the_item_that_does_not_fit),
      ON_BOTH(test_a_job_is_seen_only_by_its_key),
      ON_BOTH(test_cancel_stops_what_has_not_started),
      ON_BOTH(test_cancelling_a_job_with_nothing_queued_marks_it_cancelled),
      ON_BOTH(test_cancelling_an_ended_job_changes_nothing),
      ON_BOTH(test_jobs_are_taken_oldest_first),
      ON_BOTH(test_jobs_take_turns_so_a_long_job_does_not_starve_a_short_one),
      ON_BOTH(test_two_handles_never_take_the_same_item),
      ON_SQLITE(test_a_killed_writer_loses_nothing_it_committed),
      ON_SQLITE(test_a_taker_whose_lease_ran_out_cannot_end_the_item),
      ON_SQLITE(test_a_store_held_by_another_writer_fails_then_serves_again),
      ON_SQLITE(test_old_jobs_expire_with_their_items),
      ON_SQLITE(test_a_large_job_expires_in_small_batches),
      ON_SQLITE(test_bad_input_is_refused),
      ON_SQLITE(test_a_webhook_is_owed_when_its_job_ends_and_kept_until_delivered),
      ON_BOTH(test_a_key_of_the_longest_name_comes_back_whole),
      ON_SQLITE(test_a_job_owing_a_webhook_is_not_expired),
      ON_BOTH(test_a_create_past_the_keys_open_jobs_makes_nothing),
      ON_BOTH(test_pages_of_a_list_grow_the_job_until_the_last),
      ON_BOTH(test_a_page_given_back_waits_and_cancel_drops_the_list),
      ON_BOTH(test_a_list_job_owes_its_webhook_after_its_last_page),
      ON_REDIS(test_a_page_of_large_answers_reads_only_about_what_it_holds),
      ON_REDIS(test_a_unit_is_counted_with_the_answer_and_none_past_the_quota),
      ON_REDIS(test_a_unit_is_reserved_once_an_item_none_past_the_quota_and_given_back_once),
      ON_SQLITE(test_a_store_without_the_months_counters_reserves_nothing),
      ON_REDIS(test_a_silent_runners_item_is_claimed_once_and_its_answer_counted_once),
      ON_REDIS(test_an_ended_jobs_keys_expire_and_the_stream_keeps_nothing_of_it),
      ON_REDIS(test_a_redis_that_does_not_answer_fails_fast_and_is_used_again_once_back),
      ON_REDIS(test_a_redis_restarted_under_an_idle_connection_is_reached_again_at_once),
      ON_REDIS(test_a_webhook_is_owed_when_its_job_ends_and_its_job_kept_until_delivered),
      ON_BOTH(test_a_take_passes_over_the_keys_it_is_told),
      ON_BOTH(test_a_webhook_try_passes_over_the_keys_it_is_told),
      ON_BOTH(test_a_bounded_list_stops_and_says_why),
      ON_BOTH(test_a_revoked_keys_jobs_stop_and_owe_no_webhook),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
