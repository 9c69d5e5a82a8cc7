/*
 * The budget of one egress (the direct route or one proxy): a token bucket of platform requests, VTS_EGRESS_RATE an
 * hour with room for VTS_EGRESS_BURST at once, kept as one number so that every child of a fetcher can spend from it
 * in shared memory with a compare-and-swap and no lock. The number is the bucket's "theoretical arrival time" (the
 * generic cell rate algorithm): the instant at which the bucket would be full again. Taking a unit moves it one
 * interval later; a unit is refused when that would put it more than a burst of intervals past now. The arithmetic
 * takes the clock as an argument (util_now_ms on CLOCK_MONOTONIC, in microseconds), so tests set time by hand.
 */
#ifndef VTS_PACE_H
#define VTS_PACE_H

#include <stdatomic.h>
#include <stdint.h>

#define PACE_US_PER_HOUR 3600000000ull

/* How an egress is paced: interval_us 0 means unpaced (every request admitted). */
struct pace_rule {
  uint64_t interval_us; /* one unit comes back every interval */
  uint32_t burst;       /* units the bucket holds when full */
};

/* One egress's bucket: zero-initialised it is full. Lives in memory shared by a fetcher's children. */
struct pace_bucket {
  _Atomic uint64_t full_at_us; /* when the bucket is full again; at or before now: it is full */
};

/*
 * Makes the rule of per_hour requests an hour with burst units at once. per_hour 0 is unpaced. Returns 0, or -EINVAL
 * for a negative rate, a rate above PACE_MAX_PER_HOUR, or a burst below 1 or above PACE_MAX_BURST.
 */
#define PACE_MAX_PER_HOUR 3600000 /* one a millisecond */
#define PACE_MAX_BURST 100000
int pace_rule_make(int64_t per_hour, int64_t burst, struct pace_rule *out);

/* Whether r admits every request. */
int pace_unpaced(const struct pace_rule *r);

/*
 * Takes one unit at now_us. Returns 0, or -EAGAIN with *wait_us the time until one is due (the bucket is unchanged).
 * Never admits more than burst units at once nor, over any span t, more than burst + t / interval.
 */
int pace_take(struct pace_bucket *b, const struct pace_rule *r, uint64_t now_us, uint64_t *wait_us);

/* Whole units the bucket holds at now_us (burst when unpaced). */
uint32_t pace_left(struct pace_bucket *b, const struct pace_rule *r, uint64_t now_us);

/* Microseconds from now_us until the bucket holds a unit: 0 when it holds one now. */
uint64_t pace_wait_us(struct pace_bucket *b, const struct pace_rule *r, uint64_t now_us);

#endif
