/*
 * The memory limiter's own cost per request: ratelimit_check on the shared-memory table, as a worker calls it, for
 * one hot key and for many keys. Prints nanoseconds per call (median of 5 runs); compare with the time a cache-hit
 * request costs (1 / rps per core, from tests/bench/run.sh) to get the limiter's share.
 *   build/bin/bench_ratelimit [CALLS]
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "common/config.h"
#include "common/util.h"
#include "gateway/limits/ratelimit.h"

#define RUNS 5
#define NKEYS 1000

static void on_decision(void *arg, const struct rl_decision *d) { *(int *)arg += d->outcome == RL_ALLOW; }

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double run(struct ratelimit *rl, struct key_entry *keys, int nkeys, long calls) {
  int allowed = 0;
  double t0 = now_ns();
  for (long i = 0; i < calls; i++) ratelimit_check(rl, &keys[i % nkeys], on_decision, &allowed);
  double ns = (now_ns() - t0) / (double)calls;
  if (allowed != calls) fprintf(stderr, "warning: %d of %ld allowed\n", allowed, calls);
  return ns;
}

/* Removes dir and the files in it (the limiter writes only files there). */
static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d != NULL) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      char path[1024];
      snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
      unlink(path);
    }
    closedir(d);
  }
  rmdir(dir);
}

int main(int argc, char **argv) {
  long calls = argc > 1 ? strtol(argv[1], NULL, 10) : 2000000;
  static struct vts_config cfg;
  char err[256];
  /* The state folder (quota snapshots) is the run's own, under TMPDIR, and removed at the end. */
  const char *tmp = getenv("TMPDIR");
  char dir[512];
  snprintf(dir, sizeof(dir), "%s/vts-bench-rl.XXXXXX", tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  if (mkdtemp(dir) == NULL) return 1;
  setenv("VTS_STATE_DIR", dir, 1);
  unsetenv("VTS_REDIS_URL");
  struct ratelimit_shared *shared = NULL;
  if (config_load(&cfg, err, sizeof(err)) != 0 || ratelimit_shared_new(&cfg, &shared, err, sizeof(err)) != 0) {
    fprintf(stderr, "setup failed: %s\n", err);
    return 1;
  }
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct ratelimit *rl = ratelimit_new(&loop, &cfg, shared);
  if (rl == NULL) return 1;
  static struct key_entry keys[NKEYS];
  for (int i = 0; i < NKEYS; i++) {
    snprintf(keys[i].name, sizeof(keys[i].name), "k%d", i);
    char plain[32];
    snprintf(plain, sizeof(plain), "key-%d", i);
    util_sha256_hex(plain, strlen(plain), keys[i].digest);
    keys[i].active = 1;
    keys[i].rate = 1000000000;
    keys[i].window_s = 3600;
    keys[i].quota = 1000000000000LL;
  }
  double one[RUNS], many[RUNS];
  for (int r = 0; r < RUNS; r++) {
    one[r] = run(rl, keys, 1, calls);
    many[r] = run(rl, keys, NKEYS, calls);
  }
  qsort(one, RUNS, sizeof(double), cmp);
  qsort(many, RUNS, sizeof(double), cmp);
  printf("memory limiter: %.0f ns per check (one key), %.0f ns per check (%d keys); median of %d x %ld calls\n",
         one[RUNS / 2], many[RUNS / 2], NKEYS, RUNS, calls);
  ratelimit_free(rl);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  ratelimit_shared_free(shared);
  remove_dir(dir);
  return 0;
}
