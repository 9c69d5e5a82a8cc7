/*
 * Unit tests of the runner's gone keys (gateway/dispatcher/gone.h): found by name among many, dropped when back; and
 * the runner's skip list with more gone keys than it holds, against a real SQLite job store and key file.
 */
#include <setjmp.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/config.h"
#include "common/util.h"
#include "gateway/dispatcher/core.h"
#include "gateway/dispatcher/fair.h"
#include "gateway/dispatcher/gone.h"
#include "gateway/dispatcher/runner.h"

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

/*
 * 300 keys revoked in the key file, more than a take's list holds of them, and one active key at its share (no
 * fetcher: no slot for anyone): the list names that key before the revoked ones, and RUNNER_SKIP_GONE_MAX of those.
 */
static void test_a_key_at_its_share_is_passed_over_beside_many_revoked_keys(void **state) {
  (void)state;
  enum { REVOKED = 300 };
  char dir[] = "/tmp/vts-gone.XXXXXX";
  assert_non_null(mkdtemp(dir));
  struct vts_config cfg;
  char err[256];
  assert_int_equal(config_load(&cfg, err, sizeof(err)), 0);
  snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", dir);
  snprintf(cfg.keys_file, sizeof(cfg.keys_file), "%s/keys.db", dir);
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
  struct core_ops ops = {.answer = no_answer,
                         .send_job = no_send,
                         .send_ready = no_ready,
                         .drop_token = no_drop,
                         .close_fetcher = no_close};
  struct core *core = core_new(&cfg, &ops);
  assert_non_null(core);
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
  char cmd[64];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gone_keys_are_found_by_name_among_many),
      cmocka_unit_test(test_a_key_back_is_dropped_and_the_others_keep_their_state),
      cmocka_unit_test(test_a_key_at_its_share_is_passed_over_beside_many_revoked_keys),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
