#include "fetcher/egress/pace.h"

#include <errno.h>

int pace_rule_make(int64_t per_hour, int64_t burst, struct pace_rule *out) {
  if (per_hour < 0 || per_hour > PACE_MAX_PER_HOUR || burst < 1 || burst > PACE_MAX_BURST) return -EINVAL;
  out->interval_us = per_hour == 0 ? 0 : PACE_US_PER_HOUR / (uint64_t)per_hour;
  out->burst = (uint32_t)burst;
  return 0;
}

int pace_unpaced(const struct pace_rule *r) { return r->interval_us == 0; }

/* The bucket's full instant, never in the past: a bucket that filled up long ago is full now, not fuller. */
static uint64_t full_at(struct pace_bucket *b, uint64_t now_us, uint64_t *seen) {
  *seen = atomic_load_explicit(&b->full_at_us, memory_order_acquire);
  return *seen > now_us ? *seen : now_us;
}

int pace_take(struct pace_bucket *b, const struct pace_rule *r, uint64_t now_us, uint64_t *wait_us) {
  *wait_us = 0;
  if (pace_unpaced(r)) return 0;
  uint64_t span = r->interval_us * r->burst; /* how far past now a full bucket's debt may reach */
  for (;;) {
    uint64_t seen;
    uint64_t next = full_at(b, now_us, &seen) + r->interval_us;
    if (next - now_us > span) {
      *wait_us = next - now_us - span;
      return -EAGAIN;
    }
    /* Another child may have taken a unit since the load: then the sum is done again on what it left. */
    if (atomic_compare_exchange_weak_explicit(&b->full_at_us, &seen, next, memory_order_acq_rel, memory_order_acquire))
      return 0;
  }
}

uint32_t pace_left(struct pace_bucket *b, const struct pace_rule *r, uint64_t now_us) {
  if (pace_unpaced(r)) return r->burst;
  uint64_t seen;
  uint64_t debt = full_at(b, now_us, &seen) - now_us;
  uint64_t span = r->interval_us * r->burst;
  return debt >= span ? 0 : (uint32_t)((span - debt) / r->interval_us);
}

uint64_t pace_wait_us(struct pace_bucket *b, const struct pace_rule *r, uint64_t now_us) {
  if (pace_unpaced(r)) return 0;
  uint64_t seen;
  uint64_t next = full_at(b, now_us, &seen) + r->interval_us;
  uint64_t span = r->interval_us * r->burst;
  return next - now_us > span ? next - now_us - span : 0;
}
