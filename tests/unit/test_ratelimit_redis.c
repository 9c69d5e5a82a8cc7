/*
 * The redis provider against a real redis-server that each test starts on a free port and kills at teardown: the
 * script's exactness across processes, the checks of one loop turn decided in one call as they would be one by one,
 * a busy key's leases (taken, used without a round trip, given back when idle, at the window's end and after a lost
 * connection to the same server only; never past the limit), the fallback's counts written back once, NOSCRIPT
 * recovery, fail-closed and fail-open when Redis is stopped or frozen, reconnection after a restart. Skipped, with a
 * message, when redis-server is not installed.
 */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/test_skip.h"

#include "common/limits.h"
#include "common/util.h"
#include "gateway/limits/ratelimit.h"
#include "gateway/limits/ratelimit_calc.h"
#include "tests/unit/test_ratelimit_util.h"
#include "tests/unit/test_redis_server.h"

/* Scheduling slack on a loaded 2-core machine (and under ASan) on top of the 50 ms command timeout. */
#define TIMEOUT_MARGIN_MS 100
/* A hung test must not hang ctest, nor leave a redis-server behind. */
#define TEST_PROGRAM_DEADLINE_S 180

struct fx {
  pid_t redis;
  int port;
  struct vts_config cfg;
  uv_loop_t loop;
  struct ratelimit_shared *shared;
  struct ratelimit *rl;
  struct key_entry key;
};

static void redis_start(struct fx *f) { f->redis = test_redis_start(f->port); }

static void redis_stop(struct fx *f) {
  test_redis_stop(f->redis);
  f->redis = 0;
}

static void redis_command(struct fx *f, const char *cmd) { test_redis_command(f->port, cmd); }

static void new_limiter(struct fx *f) {
  char err[512] = "";
  if (ratelimit_shared_new(&f->cfg, &f->shared, err, sizeof(err)) != 0) fail_msg("%s", err);
  assert_int_equal(uv_loop_init(&f->loop), 0);
  f->rl = ratelimit_new(&f->loop, &f->cfg, f->shared);
  assert_non_null(f->rl);
}

static void free_limiter(struct fx *f) {
  if (f->rl == NULL) return;
  ratelimit_free(f->rl);
  f->rl = NULL;
  assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&f->loop), 0);
}

/* Sets up Redis, a fresh key of `rate` per hour and the test's fail mode; keeps clear of a window boundary. */
static void start(struct fx *f, int64_t rate, bool fail_closed) {
  f->port = test_free_port();
  redis_start(f);
  f->cfg.rate_limit = 60;
  f->cfg.rate_window_s = 3600;
  f->cfg.monthly_quota = 1000000;
  f->cfg.rate_limit_fail_closed = fail_closed;
  snprintf(f->cfg.redis_url, sizeof(f->cfg.redis_url), "redis://127.0.0.1:%d", f->port);
  snprintf(f->key.name, sizeof(f->key.name), "test");
  assert_int_equal(util_random_hex(f->key.digest, 32), 0);
  f->key.active = 1;
  f->key.rate = rate;
  while (util_wall_s() % 3600 > 3590) sleep(1); /* the wait is the test: the window is wall-clock time */
  new_limiter(f);
}

static int setup(void **state) {
  if (!test_redis_available()) {
    print_message("redis-server is not installed: skipping the redis provider tests\n");
    *state = NULL;
    return 0;
  }
  struct fx *f = calloc(1, sizeof(*f));
  *state = f;
  return f != NULL ? 0 : -1;
}

static int teardown(void **state) {
  struct fx *f = *state;
  if (f == NULL) return 0;
  free_limiter(f);
  ratelimit_shared_free(f->shared);
  redis_stop(f);
  free(f);
  return 0;
}

#define FX()                                                 \
  struct fx *f = *state;                                     \
  if (f == NULL) TEST_SKIP("redis-server is not installed"); \
  do {                                                       \
  } while (0)

/* One check, waited for; *ms is how long the decision took. */
static struct rl_decision check(struct fx *f, uint64_t *ms) {
  struct answers a = {0};
  uint64_t t0 = util_now_ms();
  ratelimit_check(f->rl, &f->key, on_decision, &a);
  while (a.n == 0) uv_run(&f->loop, UV_RUN_ONCE);
  if (ms != NULL) *ms = util_now_ms() - t0;
  assert_int_equal(a.n, 1);
  return a.last;
}

/* Checks every 20 ms until Redis admits again, for at most max_ms; returns the last decision, *ms the time taken. */
static struct rl_decision check_until_allowed(struct fx *f, uint64_t max_ms, uint64_t *ms) {
  uint64_t t0 = util_now_ms();
  struct rl_decision d = check(f, NULL);
  while (d.outcome != RL_ALLOW && util_now_ms() - t0 < max_ms) {
    run_for_ms(&f->loop, 20);
    d = check(f, NULL);
  }
  *ms = util_now_ms() - t0;
  return d;
}

/* Freezes Redis (SIGSTOP) and checks once: the decision must come when the command timeout expires. */
static struct rl_decision check_frozen(struct fx *f) {
  kill(f->redis, SIGSTOP);
  uint64_t ms;
  struct rl_decision d = check(f, &ms);
  if (ms + 5 < VTS_REDIS_COMMAND_TIMEOUT_MS || ms > VTS_REDIS_COMMAND_TIMEOUT_MS + TIMEOUT_MARGIN_MS) {
    fail_msg("frozen Redis decided after %llu ms, expected about %d", (unsigned long long)ms,
             VTS_REDIS_COMMAND_TIMEOUT_MS);
  }
  return d;
}

static struct ratelimit_stats stats(struct fx *f) {
  struct ratelimit_stats st;
  ratelimit_stats(f->rl, &st);
  return st;
}

#define PROCS 4
#define CHECKS_PER_PROC 30

/* What the workers of run_workers decided: counts by outcome, and how many were admitted from a lease. */
struct worker_counts {
  _Atomic int outcomes[4];
  _Atomic int leased;
};

/*
 * PROCS workers, each its own process with its own loop and connection, making `rounds` rounds of `per_round`
 * checks of f's key at once (each round waited for); returns what they decided, in shared memory (munmap it).
 */
static struct worker_counts *run_workers(struct fx *f, int rounds, int per_round) {
  struct worker_counts *counts = mmap(NULL, sizeof(*counts), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(counts != MAP_FAILED);
  pid_t pids[PROCS];
  for (int p = 0; p < PROCS; p++) {
    pids[p] = fork();
    assert_true(pids[p] >= 0);
    if (pids[p] == 0) {
      uv_loop_t loop;
      uv_loop_init(&loop);
      struct ratelimit *rl = ratelimit_new(&loop, &f->cfg, f->shared);
      if (rl == NULL) _exit(1);
      /* Connected first (the script loaded), so that no check is decided by the connection's ready deadline. */
      struct ratelimit_stats st = {0};
      uint64_t until = util_now_ms() + 5000;
      while (st.redis_connects == 0 && util_now_ms() < until) {
        run_for_ms(&loop, 5);
        ratelimit_stats(rl, &st);
      }
      struct answers a = {0};
      for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < per_round; i++) ratelimit_check(rl, &f->key, on_decision, &a);
        while (a.n < (round + 1) * per_round) uv_run(&loop, UV_RUN_ONCE);
      }
      for (int o = 0; o < 4; o++) atomic_fetch_add(&counts->outcomes[o], a.outcomes[o]);
      ratelimit_stats(rl, &st);
      atomic_fetch_add(&counts->leased, (int)st.redis_leased);
      ratelimit_free(rl);
      uv_run(&loop, UV_RUN_DEFAULT);
      _exit(0);
    }
  }
  for (int p = 0; p < PROCS; p++) {
    int status;
    assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return counts;
}

static void test_script_admits_exactly_limit_across_processes(void **state) {
  FX();
  start(f, 37, true);
  assert_string_equal(ratelimit_provider(&f->cfg), "redis");
  /* This process's connection gets ready now: left unserved while the workers run, it would pass its deadline. */
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW);
  /* Each worker sends all its checks at once. */
  struct worker_counts *c = run_workers(f, 1, CHECKS_PER_PROC);
  _Atomic int *counts = c->outcomes;
  assert_int_equal(counts[RL_UNAVAILABLE], 0);
  assert_int_equal(counts[RL_ALLOW], 36);
  assert_int_equal(counts[RL_LIMITED], PROCS * CHECKS_PER_PROC - 36);
  munmap(c, sizeof(*c));
  /* And this process, a fifth worker, is refused too, with exact headers. */
  struct rl_decision d = check(f, NULL);
  assert_int_equal(d.outcome, RL_LIMITED);
  assert_int_equal(d.limit, 37);
  assert_int_equal(d.remaining, 0);
  assert_int_equal(d.reset, rlcalc_window_reset(util_wall_s(), 3600));
  assert_int_equal(d.retry_after, d.reset - util_wall_s()); /* the whole seconds left of the window */
}

static void test_quota_exhaustion_in_redis_answers_quota(void **state) {
  FX();
  start(f, 100, true);
  f->key.quota = 2;
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW);
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW);
  struct rl_decision d = check(f, NULL);
  assert_int_equal(d.outcome, RL_QUOTA);
  assert_int_equal(d.remaining, 97); /* the window's remainder: the refused request counted in it */
  assert_int_equal(d.retry_after, 0);
  assert_int_equal(d.quota_remaining, 0);
  assert_int_equal(d.reserved_in, RL_STORE_NONE);
  /* The refused request reserved no unit of the month: 1000 - 3 remain once the quota is raised. */
  f->key.quota = 1000;
  d = check(f, NULL);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(d.remaining, 96);
  assert_int_equal(d.quota_remaining, 997);
  assert_int_equal(d.reserved_in, RL_STORE_REDIS);
  /* A refund gives the month's unit back in Redis, once. */
  ratelimit_refund(f->rl, &d);
  assert_int_equal(d.reserved_in, RL_STORE_NONE);
  ratelimit_refund(f->rl, &d);
  d = check(f, NULL);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(d.remaining, 95);
  assert_int_equal(d.quota_remaining, 997);
  assert_int_equal(stats(f).refunds, 1);
}

/* Decisions in the order they came. */
struct seq {
  int n;
  struct rl_decision d[16];
};

static void on_seq(void *arg, const struct rl_decision *d) {
  struct seq *s = arg;
  if (s->n < 16) s->d[s->n] = *d;
  s->n++;
}

/* How many times Redis has run a command (a script's own calls included), from INFO commandstats. */
static long command_calls(struct fx *f, const char *command) {
  redisContext *c = test_redis_sync(f->port);
  assert_non_null(c);
  redisReply *r = redisCommand(c, "INFO commandstats");
  assert_non_null(r);
  assert_int_equal(r->type, REDIS_REPLY_STRING);
  char name[64];
  snprintf(name, sizeof(name), "cmdstat_%s:calls=", command);
  const char *at = strstr(r->str, name);
  long calls = at != NULL ? strtol(at + strlen(name), NULL, 10) : 0;
  freeReplyObject(r);
  redisFree(c);
  return calls;
}

/* How many script calls Redis has run (EVALSHA and EVAL). */
static long script_calls(struct fx *f) { return command_calls(f, "evalsha") + command_calls(f, "eval"); }

/* n checks made in one loop turn; waits for all their decisions. */
static void checks_at_once(struct fx *f, int n, struct seq *s) {
  memset(s, 0, sizeof(*s));
  for (int i = 0; i < n; i++) ratelimit_check(f->rl, &f->key, on_seq, s);
  while (s->n < n) uv_run(&f->loop, UV_RUN_ONCE);
  assert_int_equal(s->n, n);
}

static void test_checks_of_one_turn_are_one_script_call_decided_in_order(void **state) {
  FX();
  start(f, 5, true);
  f->key.quota = 8;
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW); /* connected; 1 of the window and of the month used */
  long calls = script_calls(f);
  struct seq s;
  checks_at_once(f, 9, &s);
  assert_int_equal(script_calls(f), calls + 1);
  /* As nine checks in a row: four more fit the window of 5, the rest are refused for the window. */
  for (int i = 0; i < 9; i++) {
    const struct rl_decision *d = &s.d[i];
    if (i < 4) {
      assert_int_equal(d->outcome, RL_ALLOW);
      assert_int_equal(d->remaining, 3 - i);
      assert_int_equal(d->quota_remaining, 6 - i);
      assert_int_equal(d->reserved_in, RL_STORE_REDIS);
    } else {
      assert_int_equal(d->outcome, RL_LIMITED);
      assert_int_equal(d->remaining, 0);
      assert_int_equal(d->quota_remaining, 3);
      assert_int_equal(d->reserved_in, RL_STORE_NONE);
    }
  }
  /* A wider window (other limits: another call), the month nearly used: three fit the quota, then the month says no. */
  f->key.rate = 100;
  calls = script_calls(f);
  checks_at_once(f, 6, &s);
  assert_int_equal(script_calls(f), calls + 1);
  for (int i = 0; i < 6; i++) {
    const struct rl_decision *d = &s.d[i];
    assert_int_equal(d->remaining, 100 - (10 + i + 1));
    assert_int_equal(d->outcome, i < 3 ? RL_ALLOW : RL_QUOTA);
    assert_int_equal(d->quota_remaining, i < 3 ? 2 - i : 0);
  }
  /* Checks of two keys in one turn: two calls, each key counted on its own. */
  struct key_entry other = f->key;
  assert_int_equal(util_random_hex(other.digest, 32), 0);
  other.quota = 1000;
  calls = script_calls(f);
  struct seq a, b;
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  for (int i = 0; i < 3; i++) {
    ratelimit_check(f->rl, &f->key, on_seq, &a);
    ratelimit_check(f->rl, &other, on_seq, &b);
  }
  while (a.n < 3 || b.n < 3) uv_run(&f->loop, UV_RUN_ONCE);
  assert_int_equal(script_calls(f), calls + 2);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(a.d[i].outcome, RL_QUOTA);
    assert_int_equal(b.d[i].outcome, RL_ALLOW);
    assert_int_equal(b.d[i].remaining, 100 - (i + 1));
    assert_int_equal(b.d[i].quota_remaining, 1000 - (i + 1));
  }
}

static void test_checks_made_while_their_key_has_a_call_out_go_as_one_call_after_its_answer(void **state) {
  FX();
  start(f, 10, true);
  f->key.quota = 1000;
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW); /* connected; 1 of the window used */
  long calls = script_calls(f);
  struct seq s;
  memset(&s, 0, sizeof(s));
  /* Redis held still: the first check's call goes out and stays unanswered while three more turns pass. */
  kill(f->redis, SIGSTOP);
  ratelimit_check(f->rl, &f->key, on_seq, &s);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  for (int i = 0; i < 3; i++) {
    ratelimit_check(f->rl, &f->key, on_seq, &s);
    uv_run(&f->loop, UV_RUN_NOWAIT);
  }
  assert_int_equal(s.n, 0);
  kill(f->redis, SIGCONT);
  while (s.n < 4) uv_run(&f->loop, UV_RUN_ONCE);
  /* Two calls: the first check's, then the three that waited for it; decided in the order they were made. */
  assert_int_equal(script_calls(f), calls + 2);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(s.d[i].outcome, RL_ALLOW);
    assert_int_equal(s.d[i].remaining, 10 - (i + 2));
    assert_int_equal(s.d[i].quota_remaining, 1000 - (i + 2));
  }
}

static void test_noscript_after_script_flush_is_recovered_with_eval(void **state) {
  FX();
  start(f, 10, true);
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW);
  redis_command(f, "SCRIPT FLUSH");
  struct rl_decision d = check(f, NULL);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(d.remaining, 8);
  assert_int_equal(stats(f).redis_noscript, 1);
  /* EVAL cached the script again: no second NOSCRIPT. */
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW);
  assert_int_equal(stats(f).redis_noscript, 1);
  assert_int_equal(stats(f).fallbacks, 0);
}

/* The count Redis holds under a key name (0 when there is none). */
static long long redis_count(struct fx *f, const char *name) {
  redisContext *c = test_redis_sync(f->port);
  assert_non_null(c);
  redisReply *r = redisCommand(c, "GET %s", name);
  assert_non_null(r);
  long long v = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
  freeReplyObject(r);
  redisFree(c);
  return v;
}

/* The names of the Redis counters of the key's current window (its own length, or the default) and month. */
static void key_names(struct fx *f, const struct key_entry *key, char window[128], char month[128]) {
  int64_t now = util_wall_s(), window_s = key->window_s > 0 ? key->window_s : f->cfg.rate_window_s;
  snprintf(window, 128, "vts:rl:{%.16s}:w:%lld:%lld", key->digest, (long long)window_s,
           (long long)rlcalc_window_index(now, window_s));
  snprintf(month, 128, "vts:rl:{%.16s}:q:%lld", key->digest, (long long)rlcalc_month_yyyymm(rlcalc_month_index(now)));
}

/* Redis's counts of the key's current window and month. */
static void key_counts(struct fx *f, const struct key_entry *key, long long *window, long long *month) {
  char wname[128], mname[128];
  key_names(f, key, wname, mname);
  *window = redis_count(f, wname);
  *month = redis_count(f, mname);
}

/* One check (the connection ready), then n at once: Redis must then count want in the window and the month. */
static void checks_then_counts(struct fx *f, int n, long long want) {
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW);
  struct seq s;
  checks_at_once(f, n, &s);
  long long window, month;
  key_counts(f, &f->key, &window, &month);
  assert_int_equal(window, want);
  assert_int_equal(month, want);
}

static void test_a_busy_key_is_admitted_from_a_lease_which_goes_back_when_idle(void **state) {
  FX();
  start(f, 1000, true);
  f->key.quota = 100000;
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW); /* connected; 1 used */
  long calls = script_calls(f);
  struct seq s;
  /* Eight checks gathered in one call: it also reserves eight more units (far from the limits) for this worker. */
  checks_at_once(f, 8, &s);
  assert_int_equal(script_calls(f), calls + 1);
  assert_int_equal(s.d[7].remaining, 1000 - 9);
  long long window, month;
  key_counts(f, &f->key, &window, &month);
  assert_int_equal(window, 9 + 8);
  assert_int_equal(month, 9 + 8);
  /* The next eight are admitted at once from the lease, each with the count of the unit it took. */
  for (int i = 0; i < 8; i++) {
    struct answers a = {0};
    ratelimit_check(f->rl, &f->key, on_decision, &a);
    assert_int_equal(a.n, 1); /* decided before ratelimit_check returned: no round trip */
    assert_int_equal(a.last.outcome, RL_ALLOW);
    assert_int_equal(a.last.remaining, 1000 - (10 + i));
    assert_int_equal(a.last.quota_remaining, 100000 - (10 + i));
    assert_int_equal(a.last.reserved_in, RL_STORE_REDIS);
  }
  assert_int_equal(stats(f).redis_leased, 8);
  assert_int_equal(script_calls(f), calls + 1);
  /* Used up: the next check goes to Redis, with the call the half-used lease asked for, which leases again. */
  struct rl_decision d = check(f, NULL);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(d.remaining, 1000 - 18);
  assert_int_equal(script_calls(f), calls + 2);
  key_counts(f, &f->key, &window, &month);
  assert_int_equal(window, 18 + 8);
  /* Unused for VTS_REDIS_LEASE_IDLE_MS, the lease goes back: Redis counts exactly what was admitted. */
  run_for_ms(&f->loop, 3 * VTS_REDIS_LEASE_IDLE_MS);
  key_counts(f, &f->key, &window, &month);
  assert_int_equal(window, 18);
  assert_int_equal(month, 18);
  d = check(f, NULL);
  assert_int_equal(d.remaining, 1000 - 19);
  assert_int_equal(stats(f).redis_leased, 8);
}

/*
 * A check with f's connection ready, then eight at once, which lease eight more units: Redis counts 17 in the window
 * and the month while the worker holds 8 of them.
 */
static void lease_eight(struct fx *f) {
  f->key.quota = 100000;
  checks_then_counts(f, 8, 17);
}

/* How many of the window's counts a lease gave back below its top wait in Redis for the key's next checks. */
static long long counts_given_back(struct fx *f) {
  char wname[128], mname[128], back[160];
  key_names(f, &f->key, wname, mname);
  snprintf(back, sizeof(back), "%s:back", wname);
  redisContext *c = test_redis_sync(f->port);
  assert_non_null(c);
  redisReply *r = redisCommand(c, "ZCARD %s", back);
  assert_non_null(r);
  assert_int_equal(r->type, REDIS_REPLY_INTEGER);
  long long n = r->integer;
  freeReplyObject(r);
  redisFree(c);
  return n;
}

/* Another gateway's requests: n more in the key's window and month. */
static void counted_elsewhere(struct fx *f, int n) {
  char wname[128], mname[128], cmd[300];
  key_names(f, &f->key, wname, mname);
  snprintf(cmd, sizeof(cmd), "INCRBY %s %d", wname, n);
  redis_command(f, cmd);
  snprintf(cmd, sizeof(cmd), "INCRBY %s %d", mname, n);
  redis_command(f, cmd);
}

/* One check that the key's lease decides at once (no round trip): its window and month counts as remaining. */
static struct rl_decision check_from_lease(struct fx *f) {
  struct answers a = {0};
  ratelimit_check(f->rl, &f->key, on_decision, &a);
  assert_int_equal(a.n, 1); /* decided before ratelimit_check returned */
  assert_int_equal(a.last.outcome, RL_ALLOW);
  return a.last;
}

/*
 * The next lease comes while the key's lease still holds units, and other counts lie between the two (another
 * gateway's three): each unit given out reports the count it made in Redis, the older lease's first, and never a
 * count another request saw.
 */
static void test_a_lease_topped_up_while_held_gives_each_unit_its_own_count(void **state) {
  FX();
  start(f, 1000, true);
  lease_eight(f); /* 1..9, and a lease of 10..17 */
  /* Four from the lease: 10..13; the fourth leaves it half used, which asks for the next lease. */
  for (int i = 0; i < 4; i++) assert_int_equal(check_from_lease(f).remaining, 1000 - (10 + i));
  counted_elsewhere(f, 3); /* another gateway's three (18..20), before that call runs */
  /* The call runs (the next lease: 21..28), and its answer is read: a check of another key, sent after it on the
   * same connection, is answered after it. */
  long long window = 0, month = 0;
  for (int i = 0; i < 400 && window != 28; i++) {
    run_for_ms(&f->loop, 5);
    key_counts(f, &f->key, &window, &month);
  }
  assert_int_equal(window, 28);
  assert_int_equal(month, 28);
  struct key_entry other = f->key;
  assert_int_equal(util_random_hex(other.digest, 32), 0);
  struct answers after = {0};
  ratelimit_check(f->rl, &other, on_decision, &after);
  while (after.n == 0) uv_run(&f->loop, UV_RUN_ONCE);
  assert_int_equal(after.last.outcome, RL_ALLOW);
  /* The first lease's last four, then the next lease's eight: each its own count, in the window and the month. */
  static const int counts[] = {14, 15, 16, 17, 21, 22, 23, 24, 25, 26, 27, 28};
  for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
    struct rl_decision d = check_from_lease(f);
    assert_int_equal(d.remaining, 1000 - counts[i]);
    assert_int_equal(d.quota_remaining, 100000 - counts[i]);
  }
  assert_int_equal(stats(f).redis_leased, 16);
}

/*
 * A lease goes back unused while other requests were counted after it (another gateway's three): the window's count
 * stays, for those requests saw it, and the units' own counts are the next checks' first, lowest first, so that no
 * two requests of the window see the same count (lowering the count would give the next request one already seen).
 * The month is the key's total, and is lowered.
 */
static void test_a_lease_given_back_below_the_top_gives_its_counts_to_the_next_checks(void **state) {
  FX();
  start(f, 1000, true);
  lease_eight(f);          /* 1..9, and a lease of 10..17 */
  counted_elsewhere(f, 3); /* 18..20 */
  run_for_ms(&f->loop, 3 * VTS_REDIS_LEASE_IDLE_MS);
  long long window, month;
  key_counts(f, &f->key, &window, &month);
  assert_int_equal(window, 20);
  assert_int_equal(month, 12);
  assert_int_equal(counts_given_back(f), 8);
  assert_int_equal(check(f, NULL).remaining, 1000 - 10);
  /* Eight at once: the seven counts left, then the window's next; and a lease from the top (22..29). */
  struct seq s;
  checks_at_once(f, 8, &s);
  for (int i = 0; i < 7; i++) assert_int_equal(s.d[i].remaining, 1000 - (11 + i));
  assert_int_equal(s.d[7].remaining, 1000 - 21);
  assert_int_equal(counts_given_back(f), 0);
  key_counts(f, &f->key, &window, &month);
  assert_int_equal(window, 29);
  /* That lease is the top: it lowers the count as it goes back. */
  run_for_ms(&f->loop, 3 * VTS_REDIS_LEASE_IDLE_MS);
  key_counts(f, &f->key, &window, &month);
  assert_int_equal(window, 21);
  assert_int_equal(month, 21);
  assert_int_equal(check(f, NULL).remaining, 1000 - 22);
}

/*
 * A lease of two runs goes back, the newer the top of the window, and between them counts another gateway's lease
 * gave back meanwhile (18..20, put in Redis by hand): the newer run lowers the count, then those counts, then the
 * older run, now the top too. The window then counts exactly the requests that had a count.
 */
static void test_a_lease_given_back_at_the_top_takes_the_counts_given_back_below_it(void **state) {
  FX();
  start(f, 1000, true);
  lease_eight(f); /* 1..9, and a lease of 10..17 */
  for (int i = 0; i < 4; i++) assert_int_equal(check_from_lease(f).remaining, 1000 - (10 + i)); /* asks for 21..28 */
  counted_elsewhere(f, 3);
  char wname[128], mname[128], cmd[300];
  key_names(f, &f->key, wname, mname);
  snprintf(cmd, sizeof(cmd), "ZADD %s:back 18 18 19 19 20 20", wname);
  redis_command(f, cmd);
  long long window = 0, month = 0;
  for (int i = 0; i < 400 && window != 28; i++) {
    run_for_ms(&f->loop, 5);
    key_counts(f, &f->key, &window, &month);
  }
  assert_int_equal(window, 28);
  run_for_ms(&f->loop, 3 * VTS_REDIS_LEASE_IDLE_MS);
  key_counts(f, &f->key, &window, &month);
  assert_int_equal(window, 13);
  assert_int_equal(month, 28 - 12);
  assert_int_equal(counts_given_back(f), 0);
  assert_int_equal(check(f, NULL).remaining, 1000 - 14);
}

#define LEASE_ROUNDS 5
#define LEASE_ROUND_CHECKS 100

/*
 * Four workers, each making five rounds of a hundred checks at once of a key of 1000 an hour: leases are taken, used
 * and given back, and still no more than 1000 are admitted; once the workers are gone Redis counts every request in
 * the window and exactly the admitted ones in the month (no unit left reserved).
 */
static void test_leases_across_processes_never_admit_past_the_limit_and_all_go_back(void **state) {
  FX();
  start(f, 1000, true);
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW);
  struct worker_counts *c = run_workers(f, LEASE_ROUNDS, LEASE_ROUND_CHECKS);
  _Atomic int *counts = c->outcomes;
  int total = PROCS * LEASE_ROUNDS * LEASE_ROUND_CHECKS;
  assert_int_equal(counts[RL_UNAVAILABLE], 0);
  assert_int_equal(counts[RL_ALLOW] + counts[RL_LIMITED], total);
  assert_true(counts[RL_ALLOW] <= 999); /* the parent took one */
  assert_true(c->leased > 0);           /* leases were used */
  /* Every lease went back with its worker: the window holds every request, the month every admitted one. */
  long long window, month;
  key_counts(f, &f->key, &window, &month);
  assert_int_equal(window, total + 1);
  assert_int_equal(month, counts[RL_ALLOW] + 1);
  munmap(c, sizeof(*c));
}

/* Near its limits a key gets no lease: five checks at once with 20 left of the window lease nothing. */
static void test_a_key_near_its_limit_gets_no_lease(void **state) {
  FX();
  start(f, 20, true);
  checks_then_counts(f, 5, 6);
  long calls = script_calls(f);
  assert_int_equal(check(f, NULL).remaining, 20 - 7);
  assert_int_equal(script_calls(f), calls + 1);
  assert_int_equal(stats(f).redis_leased, 0);
}

/* Waits until the next window of window_s seconds begins: running loop, or with loop NULL standing still (no timer
 * of the limiter runs meanwhile). */
static void wait_for_next_window(uv_loop_t *loop, int64_t window_s) {
  int64_t w = rlcalc_window_index(util_wall_s(), window_s);
  while (rlcalc_window_index(util_wall_s(), window_s) == w) {
    if (loop != NULL)
      run_for_ms(loop, 5);
    else
      usleep(5000); /* the wait is the test: the next window of the wall clock */
  }
}

/*
 * A lease belongs to its window: the first check in the next window gives back what the lease held (before its own
 * call, on the same connection), then is decided and leases again in the new window.
 */
static void test_a_lease_goes_back_when_its_window_ends(void **state) {
  FX();
  start(f, 1000, true);
  f->key.window_s = 2;
  wait_for_next_window(&f->loop, 2); /* the lease and its checks early in one window */
  lease_eight(f);
  wait_for_next_window(NULL, 2); /* no sweep has run: the lease is still held */
  struct rl_decision d = check(f, NULL);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(d.remaining, 1000 - 1);
  long long window, month;
  key_counts(f, &f->key, &window, &month);
  assert_int_equal(window, 1 + 8);    /* the check and the new window's lease */
  assert_int_equal(month, 9 + 1 + 8); /* the old lease's 8 went back; the check and the new lease's 8 */
}

/* Runs f's loop until the limiter has made its second connection and the loop has run max_ms more. */
static void run_until_reconnected(struct fx *f, uint64_t max_ms) {
  uint64_t until = util_now_ms() + 3000;
  while (stats(f).redis_connects < 2 && util_now_ms() < until) run_for_ms(&f->loop, 5);
  assert_int_equal(stats(f).redis_connects, 2);
  run_for_ms(&f->loop, max_ms);
}

/* Redis's counts of f's key must become want in both the window and the month within a second. */
static void assert_counts_become(struct fx *f, long long want) {
  long long window, month;
  uint64_t until = util_now_ms() + 1000;
  do {
    run_for_ms(&f->loop, 10);
    key_counts(f, &f->key, &window, &month);
  } while ((window != want || month != want) && util_now_ms() < until);
  assert_int_equal(window, want);
  assert_int_equal(month, want);
}

/* A connection lost while it held a lease (killed by the server): the next one, to the same server, gives it back. */
static void test_a_lease_of_a_lost_connection_goes_back_to_the_same_server(void **state) {
  FX();
  start(f, 1000, true);
  lease_eight(f);
  redis_command(f, "CLIENT KILL TYPE normal"); /* every client but the one that asks */
  run_until_reconnected(f, 0);
  assert_counts_become(f, 9);
  assert_int_equal(check(f, NULL).remaining, 1000 - 10);
}

/*
 * A server that restarted may not hold what the lost connection leased (here it holds other counts): nothing is given
 * back to it, and its counts stay as they are.
 */
static void test_a_lease_of_a_lost_connection_is_not_given_back_to_a_restarted_server(void **state) {
  FX();
  start(f, 1000, true);
  lease_eight(f);
  redis_stop(f);
  run_for_ms(&f->loop, 50); /* the connection is seen lost */
  redis_start(f);           /* same port, a new process */
  char wname[128], mname[128], cmd[300];
  key_names(f, &f->key, wname, mname);
  snprintf(cmd, sizeof(cmd), "MSET %s 40 %s 40", wname, mname);
  redis_command(f, cmd);
  run_until_reconnected(f, 3 * VTS_REDIS_LEASE_IDLE_MS);
  assert_counts_become(f, 40);
  assert_int_equal(check(f, NULL).remaining, 1000 - 41);
}

/*
 * A server that refuses INFO serves checks as well, but which server it is stays unknown: a lease of a connection lost
 * there is not given back (it stays counted).
 */
static void test_a_server_that_refuses_info_serves_and_keeps_a_lost_lease_counted(void **state) {
  FX();
  start(f, 1000, true);
  redis_command(f, "ACL SETUSER default -info");
  lease_eight(f);
  redis_command(f, "CLIENT KILL TYPE normal");
  run_until_reconnected(f, 3 * VTS_REDIS_LEASE_IDLE_MS);
  assert_counts_become(f, 17);
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW);
}

/* The hash of the gateways' fallback counts for the key's current month. */
static void owed_hash(struct fx *f, char *out, size_t cap) {
  snprintf(out, cap, "vts:rl:{%.16s}:q:%lld:owed", f->key.digest,
           (long long)rlcalc_month_yyyymm(rlcalc_month_index(util_wall_s())));
}

/*
 * This gateway's name in that hash, as Redis holds it: the one field without a ':' (its count; "<name>:seq" is its
 * number). The test runs one gateway, so the hash has one such field once a fallback was reported.
 */
static void this_gateway(struct fx *f, char *out, size_t cap) {
  char cmd[256], hash[128];
  owed_hash(f, hash, sizeof(hash));
  snprintf(cmd, sizeof(cmd), "HKEYS %s", hash);
  redisContext *c = test_redis_sync(f->port);
  assert_non_null(c);
  redisReply *r = redisCommand(c, cmd);
  assert_non_null(r);
  assert_int_equal(r->type, REDIS_REPLY_ARRAY);
  int found = 0;
  for (size_t i = 0; i < r->elements; i++) {
    if (strchr(r->element[i]->str, ':') != NULL) continue;
    snprintf(out, cap, "%s", r->element[i]->str);
    found++;
  }
  freeReplyObject(r);
  redisFree(c);
  if (found != 1) fail_msg("%s: %d gateway fields, expected one", hash, found);
}

/* A field of the hash of this gateway's fallback counts for the key's current month, as a number (-1: none). */
static long long month_fallback_field(struct fx *f, const char *suffix) {
  char cmd[320], hash[128], gw[64];
  owed_hash(f, hash, sizeof(hash));
  this_gateway(f, gw, sizeof(gw));
  snprintf(cmd, sizeof(cmd), "HGET %s %s%s", hash, gw, suffix);
  redisContext *c = test_redis_sync(f->port);
  assert_non_null(c);
  redisReply *r = redisCommand(c, cmd);
  assert_non_null(r);
  long long v = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : -1;
  freeReplyObject(r);
  redisFree(c);
  return v;
}

/* Sets this gateway's stored fallback count of the key's month and its number, as a newer statement would have. */
static void set_month_fallback(struct fx *f, long long count, long long seq) {
  char cmd[320], hash[128], gw[64];
  owed_hash(f, hash, sizeof(hash));
  this_gateway(f, gw, sizeof(gw));
  snprintf(cmd, sizeof(cmd), "HSET %s %s %lld %s:seq %lld", hash, gw, count, gw, seq);
  redis_command(f, cmd);
}

/* Redis frozen: two checks fall back (the first after the command timeout, the second at once); then thawed. */
static void fall_back_twice(struct fx *f) {
  assert_int_equal(check_frozen(f).outcome, RL_ALLOW);
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW);
  assert_int_equal(stats(f).fallbacks, 2);
  kill(f->redis, SIGCONT);
}

/* Checks every 20 ms, for at most 3 s, until a check is admitted by Redis itself (not by the fallback). */
static void check_until_redis_admits(struct fx *f) {
  uint64_t t0 = util_now_ms();
  while (check(f, NULL).reserved_in != RL_STORE_REDIS) {
    if (util_now_ms() - t0 > 3000) fail_msg("Redis did not answer again within 3 s");
    run_for_ms(&f->loop, 20);
  }
}

static void test_fallback_counts_are_written_back_once_and_a_late_older_statement_is_ignored(void **state) {
  FX();
  start(f, 100, false);
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW);
  fall_back_twice(f);
  check_until_redis_admits(f);
  /* Written back with the first answer: every unit the fallback admitted (two, and any admitted while the connection
   * was being redialled), under this gateway's id, numbered. */
  assert_true(stats(f).fallbacks >= 2);
  assert_int_equal(month_fallback_field(f, ""), stats(f).fallbacks);
  long long seq = month_fallback_field(f, ":seq");
  assert_true(seq > 0);
  /* Redis answered a call that carried them: the checks that follow say nothing more (no HSET, no HMGET). */
  long hset = command_calls(f, "hset"), hmget = command_calls(f, "hmget");
  for (int i = 0; i < 5; i++) assert_int_equal(check(f, NULL).outcome, RL_ALLOW);
  assert_int_equal(command_calls(f, "hset"), hset);
  assert_int_equal(command_calls(f, "hmget"), hmget);
  /* A newer statement is already stored (another worker's, say): this gateway's next, older one changes nothing. */
  set_month_fallback(f, 7, seq + 1000);
  struct ratelimit_stats before = stats(f);
  assert_int_equal(check_frozen(f).outcome, RL_ALLOW);
  assert_int_equal(stats(f).fallbacks, before.fallbacks + 1);
  kill(f->redis, SIGCONT);
  check_until_redis_admits(f);
  assert_true(command_calls(f, "hmget") > hmget);   /* the statement was sent ... */
  assert_int_equal(month_fallback_field(f, ""), 7); /* ... and ignored */
  assert_int_equal(month_fallback_field(f, ":seq"), seq + 1000);
}

static void test_stopped_redis_fail_closed_answers_unavailable_at_once(void **state) {
  FX();
  start(f, 10, true);
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW);
  redis_stop(f);
  for (int i = 0; i < 5; i++) {
    uint64_t ms;
    struct rl_decision d = check(f, &ms);
    assert_int_equal(d.outcome, RL_UNAVAILABLE);
    assert_int_equal(d.retry_after, VTS_RATELIMIT_UNAVAILABLE_RETRY_S);
    assert_int_equal(d.limit, 10);
    assert_int_equal(d.remaining, 0);
    if (ms >= 100) fail_msg("decision took %llu ms with Redis stopped", (unsigned long long)ms);
  }
  assert_int_equal(stats(f).fallbacks, 0);
  assert_int_equal(stats(f).unavailable, 5);
}

static void test_stopped_redis_fail_open_continues_from_redis_counts(void **state) {
  FX();
  start(f, 5, false);
  for (int i = 0; i < 3; i++) assert_int_equal(check(f, NULL).outcome, RL_ALLOW);
  redis_stop(f);
  struct rl_decision d = check(f, NULL);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(d.remaining, 1);
  d = check(f, NULL);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(d.remaining, 0);
  d = check(f, NULL);
  assert_int_equal(d.outcome, RL_LIMITED);
  assert_true(d.retry_after >= 1);
  assert_int_equal(stats(f).fallbacks, 3);
}

static void test_frozen_redis_is_decided_within_the_command_timeout(void **state) {
  FX();
  start(f, 10, true);
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW);
  struct rl_decision d = check_frozen(f);
  assert_int_equal(d.outcome, RL_UNAVAILABLE);
  assert_int_equal(d.retry_after, VTS_RATELIMIT_UNAVAILABLE_RETRY_S);
  assert_int_equal(stats(f).redis_timeouts, 1);
  uint64_t ms;
  /* The connection is known to be stalled: the next request does not wait again. */
  d = check(f, &ms);
  assert_int_equal(d.outcome, RL_UNAVAILABLE);
  if (ms >= VTS_REDIS_COMMAND_TIMEOUT_MS) fail_msg("second request waited %llu ms", (unsigned long long)ms);
  /* Thawed, the late reply is dropped safely and Redis answers again. */
  kill(f->redis, SIGCONT);
  d = check_until_allowed(f, 2000, &ms);
  assert_int_equal(d.outcome, RL_ALLOW);
}

static void test_frozen_redis_fail_open_falls_back_within_the_timeout(void **state) {
  FX();
  start(f, 10, false);
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW);
  struct rl_decision d = check_frozen(f);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(d.remaining, 8);
  assert_int_equal(stats(f).fallbacks, 1);
  uint64_t ms;
  /* A stall of VTS_REDIS_STALL_MS drops and redials the connection; nothing hangs meanwhile. */
  run_for_ms(&f->loop, VTS_REDIS_STALL_MS + 200);
  d = check(f, &ms);
  assert_int_equal(d.outcome, RL_ALLOW);
  if (ms > VTS_REDIS_COMMAND_TIMEOUT_MS + TIMEOUT_MARGIN_MS) fail_msg("fallback took %llu ms", (unsigned long long)ms);
}

static void test_reconnects_within_one_second_after_a_restart(void **state) {
  FX();
  start(f, 10, true);
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW);
  redis_stop(f);
  assert_int_equal(check(f, NULL).outcome, RL_UNAVAILABLE);
  run_for_ms(&f->loop, 1500); /* let the backoff grow to its ceiling */
  redis_start(f);             /* same port, empty data and script cache */
  uint64_t ms;
  struct rl_decision d = check_until_allowed(f, 1500, &ms);
  assert_int_equal(d.outcome, RL_ALLOW);
  if (ms > 1000) fail_msg("answers from Redis again after %llu ms", (unsigned long long)ms);
  assert_int_equal(d.remaining, 9); /* the new server's own count */
  assert_true(stats(f).redis_connects >= 2);
}

static void test_check_pending_at_free_is_answered_before_free_returns(void **state) {
  FX();
  start(f, 10, true);
  assert_int_equal(check(f, NULL).outcome, RL_ALLOW);
  kill(f->redis, SIGSTOP);
  struct answers a = {0};
  ratelimit_check(f->rl, &f->key, on_decision, &a);
  assert_int_equal(a.n, 0);
  ratelimit_free(f->rl);
  f->rl = NULL;
  assert_int_equal(a.n, 1);
  assert_int_equal(a.last.outcome, RL_UNAVAILABLE);
  assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&f->loop), 0);
}

static void test_redis_down_at_start_is_a_fault_not_a_hang(void **state) {
  FX();
  f->port = test_free_port();
  f->cfg.rate_limit = 5;
  f->cfg.rate_window_s = 3600;
  f->cfg.monthly_quota = 100;
  f->cfg.rate_limit_fail_closed = false;
  snprintf(f->cfg.redis_url, sizeof(f->cfg.redis_url), "redis://127.0.0.1:%d", f->port);
  assert_int_equal(util_random_hex(f->key.digest, 32), 0);
  while (util_wall_s() % 3600 > 3590) sleep(1); /* the wait is the test: the window is wall-clock time */
  new_limiter(f);
  uint64_t ms;
  struct rl_decision d = check(f, &ms);
  assert_int_equal(d.outcome, RL_ALLOW);
  assert_int_equal(d.remaining, 4);
  if (ms > VTS_REDIS_COMMAND_TIMEOUT_MS + TIMEOUT_MARGIN_MS) fail_msg("took %llu ms", (unsigned long long)ms);
  assert_int_equal(stats(f).fallbacks, 1);
}

static void on_deadline(int sig) {
  (void)sig;
  static const char msg[] = "test_ratelimit_redis: deadline passed, giving up\n";
  if (test_redis_running > 0) {
    kill(test_redis_running, SIGCONT);
    kill(test_redis_running, SIGKILL);
  }
  (void)!write(2, msg, sizeof(msg) - 1);
  _exit(1);
}

int main(void) {
  /* hiredis writes with write(2): a connection Redis closed must be an error, not a fatal SIGPIPE. */
  signal(SIGPIPE, SIG_IGN);
  signal(SIGALRM, on_deadline);
  alarm(TEST_PROGRAM_DEADLINE_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_script_admits_exactly_limit_across_processes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_quota_exhaustion_in_redis_answers_quota, setup, teardown),
      cmocka_unit_test_setup_teardown(test_checks_of_one_turn_are_one_script_call_decided_in_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_checks_made_while_their_key_has_a_call_out_go_as_one_call_after_its_answer,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_noscript_after_script_flush_is_recovered_with_eval, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fallback_counts_are_written_back_once_and_a_late_older_statement_is_ignored,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_busy_key_is_admitted_from_a_lease_which_goes_back_when_idle, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_lease_topped_up_while_held_gives_each_unit_its_own_count, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_lease_given_back_below_the_top_gives_its_counts_to_the_next_checks, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_lease_given_back_at_the_top_takes_the_counts_given_back_below_it, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_key_near_its_limit_gets_no_lease, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_lease_goes_back_when_its_window_ends, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_lease_of_a_lost_connection_goes_back_to_the_same_server, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_lease_of_a_lost_connection_is_not_given_back_to_a_restarted_server, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_server_that_refuses_info_serves_and_keeps_a_lost_lease_counted, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_leases_across_processes_never_admit_past_the_limit_and_all_go_back, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_stopped_redis_fail_closed_answers_unavailable_at_once, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stopped_redis_fail_open_continues_from_redis_counts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_frozen_redis_is_decided_within_the_command_timeout, setup, teardown),
      cmocka_unit_test_setup_teardown(test_frozen_redis_fail_open_falls_back_within_the_timeout, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reconnects_within_one_second_after_a_restart, setup, teardown),
      cmocka_unit_test_setup_teardown(test_check_pending_at_free_is_answered_before_free_returns, setup, teardown),
      cmocka_unit_test_setup_teardown(test_redis_down_at_start_is_a_fault_not_a_hang, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
