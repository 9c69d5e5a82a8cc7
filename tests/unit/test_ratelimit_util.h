/* Helpers shared by the rate-limit test programs: collecting decisions, running a loop for a while. */
#ifndef VTS_TEST_RATELIMIT_UTIL_H
#define VTS_TEST_RATELIMIT_UTIL_H

#include <stdint.h>
#include <uv.h>

#include "gateway/limits/ratelimit.h"

/* The decisions one or more checks produced. */
struct answers {
  int n;
  struct rl_decision last;
  int outcomes[4];
};

static inline void on_decision(void *arg, const struct rl_decision *d) {
  struct answers *a = arg;
  a->n++;
  a->last = *d;
  a->outcomes[d->outcome]++;
}

static inline void on_wake(uv_timer_t *t) { uv_stop(t->loop); }

/* Runs the loop for ms, whatever else keeps it alive or not (the limiter's own timers do not). */
static inline void run_for_ms(uv_loop_t *loop, uint64_t ms) {
  uv_timer_t wake;
  uv_timer_init(loop, &wake);
  uv_timer_start(&wake, on_wake, ms, 0);
  uv_run(loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&wake, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
}

#endif
