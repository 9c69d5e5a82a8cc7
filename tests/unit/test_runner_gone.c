/*
 * Unit tests of the runner's gone keys (gateway/dispatcher/gone.h): found by name among many, dropped when back; the
 * runner's skip list with more gone keys than it holds, and a webhook try of a key revoked while it was taken, against
 * a real SQLite job store and key file.
 */
#include <setjmp.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/config.h"
#include "common/util.h"
#include "gateway/dispatcher/core.h"
#include "gateway/dispatcher/fair.h"
#include "gateway/dispatcher/gone.h"
#include "gateway/dispatcher/hooks.h"
#include "gateway/dispatcher/runner.h"
#include "gateway/jobs/jobstore.h"

#define MANY 5000

static void name_of(int i, char *out, size_t len) { snprintf(out, len, "key-%05d", i); }

/* back() of gone_drop_if: the names that end in a 7 (every tenth key) are active in the file again. */
static int ends_in_7(const char *name, void *arg) {
  int *calls = arg;
  (*calls)++;
  return name[strlen(name) - 1] == '7';
}

/* A set of MANY gone keys, key-00000 onwards, each made (arg: its index) as set wants. */
static struct gone *many_gone(void (*set)(struct gone_key *k, int i)) {
  struct gone *g = gone_new();
  assert_non_null(g);
  char name[32];
  for (int i = 0; i < MANY; i++) {
    name_of(i, name, sizeof(name));
    assert_int_equal(gone_add(g, name), 0);
    if (set != NULL) set(gone_find(g, name), i);
  }
  return g;
}

static void test_gone_keys_are_found_by_name_among_many(void **state) {
  (void)state;
  struct gone *g = many_gone(NULL);
  char name[32];
  /* A key counted twice has one record. */
  assert_int_equal(gone_add(g, "key-00042"), 0);
  assert_int_equal(gone_count(g), MANY);
  for (int i = 0; i < MANY; i++) {
    name_of(i, name, sizeof(name));
    struct gone_key *k = gone_find(g, name);
    assert_non_null(k);
    assert_string_equal(k->name, name);
    assert_int_equal(k->state, GONE_RUNNING);
    assert_ptr_equal(gone_at(g, (size_t)i), k); /* in the order they were added */
  }
  assert_null(gone_find(g, "key-05000"));
  assert_null(gone_find(g, "key-0000"));
  assert_null(gone_find(g, "other"));
  assert_null(gone_find(g, ""));
  assert_null(gone_at(g, MANY));
  /* A name longer than a key's is none, found or added. */
  char longer[KEYS_MAX_NAME + 2];
  memset(longer, 'a', sizeof(longer) - 1);
  longer[sizeof(longer) - 1] = '\0';
  assert_null(gone_find(g, longer));
  assert_int_equal(gone_add(g, longer), -EINVAL);
  assert_int_equal(gone_count(g), MANY);
  gone_free(g);
}

static void state_by_index(struct gone_key *k, int i) {
  k->state = i % 3 == 0 ? GONE_STOPPED : i % 3 == 1 ? GONE_STOPPING : GONE_RUNNING;
}

static void test_a_key_back_is_dropped_and_the_others_keep_their_state(void **state) {
  (void)state;
  struct gone *g = many_gone(state_by_index);
  char name[32];
  int calls = 0;
  assert_int_equal(gone_drop_if(g, ends_in_7, &calls), MANY / 10);
  assert_int_equal(calls, MANY);
  assert_int_equal(gone_count(g), MANY - MANY / 10);
  size_t at = 0;
  for (int i = 0; i < MANY; i++) {
    name_of(i, name, sizeof(name));
    struct gone_key *k = gone_find(g, name);
    if (i % 10 == 7) {
      assert_null(k);
      continue;
    }
    assert_non_null(k);
    assert_int_equal(k->state, i % 3 == 0 ? GONE_STOPPED : i % 3 == 1 ? GONE_STOPPING : GONE_RUNNING);
    assert_ptr_equal(gone_at(g, at++), k); /* the others keep their order */
  }
  /* Nothing back: nothing dropped. */
  calls = 0;
  assert_int_equal(gone_drop_if(g, ends_in_7, &calls), 0);
  /* Gone again: a new record, its jobs to be stopped again. */
  assert_int_equal(gone_add(g, "key-00017"), 0);
  assert_int_equal(gone_find(g, "key-00017")->state, GONE_RUNNING);
  assert_ptr_equal(gone_at(g, MANY - MANY / 10), gone_find(g, "key-00017"));
  assert_int_equal(gone_find(g, "key-00018")->state, GONE_STOPPED);
  assert_int_equal(gone_find(g, "key-00016")->state, GONE_STOPPING);
  gone_free(g);
}

static void no_answer(void *ctx, struct core_waiter *waiters, const struct proto_result *res, uint64_t cache_ms) {
  (void)ctx, (void)waiters, (void)res, (void)cache_ms;
}
static int no_send(void *ctx, uint64_t fetcher, void *token, const struct proto_job *job) {
  (void)ctx, (void)fetcher, (void)token, (void)job;
  return 0;
}
static void no_ready(void *ctx, uint64_t fetcher, void *token) { (void)ctx, (void)fetcher, (void)token; }
static void no_drop(void *ctx, void *token) { (void)ctx, (void)token; }
static void no_close(void *ctx, uint64_t fetcher) { (void)ctx, (void)fetcher; }
static void no_kick(void *arg) { (void)arg; }

/* A core whose acts do nothing but send, which sends a job to a fetcher. */
static struct core *quiet_core(const struct vts_config *cfg,
                               int (*send)(void *ctx, uint64_t fetcher, void *token, const struct proto_job *job)) {
  struct core_ops ops = {
      .answer = no_answer, .send_job = send, .send_ready = no_ready, .drop_token = no_drop, .close_fetcher = no_close};
  struct core *core = core_new(cfg, &ops);
  assert_non_null(core);
  return core;
}

/* A temporary directory made from the template dir, and the defaults with their state and key file in it. */
static void dir_config(char *dir, struct vts_config *cfg) {
  assert_non_null(mkdtemp(dir));
  char err[256];
  assert_int_equal(config_load(cfg, err, sizeof(err)), 0);
  snprintf(cfg->state_dir, sizeof(cfg->state_dir), "%s", dir);
  snprintf(cfg->keys_file, sizeof(cfg->keys_file), "%s/keys.db", dir);
}

static void remove_dir(const char *dir) {
  char cmd[64];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/*
 * 300 keys revoked in the key file, more than a take's list holds of them, and one active key at its share (no
 * fetcher: no slot for anyone): the list names that key before the revoked ones, and RUNNER_SKIP_GONE_MAX of those.
 */
static void test_a_key_at_its_share_is_passed_over_beside_many_revoked_keys(void **state) {
  (void)state;
  enum { REVOKED = 300 };
  char dir[] = "/tmp/vts-gone.XXXXXX";
  struct vts_config cfg;
  dir_config(dir, &cfg);
  FILE *fp = fopen(cfg.keys_file, "w");
  assert_non_null(fp);
  char name[32], digest[65];
  for (int i = 0; i <= REVOKED; i++) {
    if (i < REVOKED)
      name_of(i, name, sizeof(name));
    else
      snprintf(name, sizeof(name), "busy");
    util_sha256_hex(name, strlen(name), digest);
    fprintf(fp, "%s\t%s\t%s\t0\t0\t0\n", name, digest, i < REVOKED ? "revoked" : "active");
  }
  assert_int_equal(fclose(fp), 0);
  struct core *core = quiet_core(&cfg, no_send);
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct runner *r = runner_new(&cfg, NULL, core, &loop, no_kick, NULL);
  assert_non_null(r);
  uint64_t now = util_now_ms();
  runner_pump(r, now); /* reads the key file: every revoked key is gone */
  assert_int_equal(fair_seen(runner_fair(r), now, "busy", 1), 0);
  static const char *out[RUNNER_SKIP_MAX];
  size_t n = runner_skip(r, now, 0, out, RUNNER_SKIP_MAX);
  assert_int_equal(n, 1 + RUNNER_SKIP_GONE_MAX);
  assert_string_equal(out[0], "busy");
  for (size_t i = 1; i < n; i++) {
    name_of((int)i - 1, name, sizeof(name));
    assert_string_equal(out[i], name);
  }
  /* A list with room for one name only: that key's. */
  assert_int_equal(runner_skip(r, now, 0, out, 1), 1);
  assert_string_equal(out[0], "busy");
  runner_free(r);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
  core_free(core);
  remove_dir(dir);
}

/* Writes the key file of cfg: the named keys, each in the state given ("active" or "revoked"), stamped at mtime_s. */
static void write_keys(const struct vts_config *cfg, const char *const *names, const char *const *states, int n,
                       time_t mtime_s) {
  FILE *fp = fopen(cfg->keys_file, "w");
  assert_non_null(fp);
  char digest[65];
  for (int i = 0; i < n; i++) {
    util_sha256_hex(names[i], strlen(names[i]), digest);
    fprintf(fp, "%s\t%s\t%s\t0\t0\t0\n", names[i], digest, states[i]);
  }
  assert_int_equal(fclose(fp), 0);
  /* A stamp of its own, so that the runner's look at the file sees it changed whatever the clock's grain. */
  const struct timespec times[2] = {{mtime_s, 0}, {mtime_s, 0}};
  assert_int_equal(utimensat(AT_FDCWD, cfg->keys_file, times, 0), 0);
}

static int sends;
static int count_send(void *ctx, uint64_t fetcher, void *token, const struct proto_job *job) {
  (void)ctx, (void)fetcher, (void)token, (void)job;
  sends++;
  return 0;
}

/*
 * A webhook try the store hands over for a key revoked while the take was asked for (the key file read meanwhile; or
 * a key past the revoked ones a take passes over) is never sent: its delivery is given up in the store, counted given
 * up, and the key's jobs are stopped, as the stop of a revoked key gives up its other deliveries.
 */
static void test_a_try_of_a_key_revoked_while_taken_is_given_up_unsent(void **state) {
  (void)state;
  char dir[] = "/tmp/vts-gone.XXXXXX";
  struct vts_config cfg;
  dir_config(dir, &cfg);
  char err[256];
  const char *names[] = {"hooked"}, *active[] = {"active"}, *revoked[] = {"revoked"};
  write_keys(&cfg, names, active, 1, 1000000000);
  /* A job of the key that ended (cancelled with nothing running), its message recorded and due. */
  struct jobstore *js;
  assert_int_equal(jobstore_open_config(&cfg, VTS_JOBS_REDIS_TIMEOUT_MS, &js, err, sizeof(err)), 0);
  const struct jobstore_spec spec = {.key_id = "hooked",
                                     .language = "",
                                     .translate = "",
                                     .format = "json",
                                     .webhook_url = "https://hooks.example/in",
                                     .webhook_secret = "whsec_c2VjcmV0",
                                     .source = "video_ids"};
  const char ids[1][VTS_VIDEO_ID_LEN + 1] = {"dQw4w9WgXcQ"};
  char job[JOBSTORE_ID_LEN + 1];
  int64_t made = util_wall_ms() - 1000;
  size_t n;
  assert_int_equal(jobstore_create(js, &spec, ids, 1, made, job), 0);
  assert_int_equal(jobstore_cancel(js, "hooked", job, made, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(jobstore_hook_add(js, job, "{}", 2, made), 0);
  jobstore_close(js);
  /* One fetcher connected and idle: room for one piece of batch work. */
  struct core *core = quiet_core(&cfg, count_send);
  uint64_t now = util_now_ms();
  core_fetcher_added(core, now, 7);
  core_fetcher_msg(core, now, 7, (void *)(uintptr_t)0x1001, CORE_READY, 0, NULL);
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct runner *r = runner_new(&cfg, NULL, core, &loop, no_kick, NULL);
  assert_non_null(r);
  struct hooks *h = hooks_new(&cfg, core, r);
  assert_non_null(h);
  runner_pump(r, now); /* reads the key file: the key is active */
  sends = 0;
  hooks_pump(h, now); /* the take is in the store's queue */
  /* Revoked now, read before the take is answered: the key's stop is queued behind the take. */
  write_keys(&cfg, names, revoked, 1, 1000000001);
  runner_pump(r, now + RUNNER_KEYS_POLL_MS);
  assert_int_equal(runner_key_gone(r, "hooked"), 1);
  struct dispatcher_stats st = {0};
  for (int i = 0; i < 500 && st.webhooks_given_up == 0 && sends == 0; i++) {
    usleep(10000); /* poll interval: until the store's thread has answered the take */
    uv_run(&loop, UV_RUN_NOWAIT);
    core_tick(core, util_now_ms(), 1000); /* as the dispatcher's turn: a try started goes to the idle fetcher */
    hooks_stats(h, &st);
  }
  assert_int_equal(sends, 0);
  assert_int_equal(st.webhooks_given_up, 1);
  assert_int_equal(st.webhooks_delivered + st.webhooks_failed, 0);
  runner_free(r); /* makes every call still queued: the try's end and the key's stop */
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
  hooks_free(h);
  core_free(core);
  /* Given up in the store: no try of it is ever due again. */
  assert_int_equal(jobstore_open_config(&cfg, VTS_JOBS_REDIS_TIMEOUT_MS, &js, err, sizeof(err)), 0);
  struct jobstore_hook hk;
  assert_int_equal(jobstore_hook_take(js, made + VTS_WEBHOOK_RETRY_WINDOW_MS * 2, 1000, &hk), -EAGAIN);
  jobstore_close(js);
  remove_dir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gone_keys_are_found_by_name_among_many),
      cmocka_unit_test(test_a_key_back_is_dropped_and_the_others_keep_their_state),
      cmocka_unit_test(test_a_key_at_its_share_is_passed_over_beside_many_revoked_keys),
      cmocka_unit_test(test_a_try_of_a_key_revoked_while_taken_is_given_up_unsent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
