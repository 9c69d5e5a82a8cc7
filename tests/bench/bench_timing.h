/*
 * What the in-process benchmarks of tests/bench share: a millisecond clock, the ordering of samples for medians, and
 * reading the iteration count from the command line.
 */
#ifndef VTS_BENCH_TIMING_H
#define VTS_BENCH_TIMING_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "common/util.h"

#define BENCH_DEFAULT_ITERATIONS 200
#define BENCH_MAX_ITERATIONS 100000

static inline double bench_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* qsort's comparison of doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The iterations of argv[1] (default BENCH_DEFAULT_ITERATIONS). Returns 0, or -1 after printing the usage. */
static inline int bench_iterations(int argc, char **argv, int64_t *iterations) {
  *iterations = BENCH_DEFAULT_ITERATIONS;
  if (argc > 1 && util_parse_i64(argv[1], 1, BENCH_MAX_ITERATIONS, iterations) < 0) {
    fprintf(stderr, "usage: %s [iterations 1..%d]\n", argv[0], BENCH_MAX_ITERATIONS);
    return -1;
  }
  return 0;
}

#endif
