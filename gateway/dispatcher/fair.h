/*
 * Fair shares of batch work between API keys, with no I/O and no clock (the time goes in): the ledger the runner
 * (runner.h) and the webhook sender (hooks.h) consult before they start a piece of batch work (an item, a page of a
 * list, a webhook try) and tell when it ends.
 *
 * The keys sharing are those with batch work waiting or running: a key is among them while it holds work, and for
 * FAIR_LINGER_MS after a take last found work of it. Between them, by their weights (1 unless the key file says
 * otherwise), go two things:
 *
 *   the batch slots (cap: VTS_JOBS_FETCHER_SHARE percent of the connected fetchers): a key may always hold its whole
 *   share, cap * weight / (sum of the sharing keys' weights) rounded down; the slots the rounding leaves over go, one
 *   start at a time, to the least served key waiting, so a key holds more than its exact share only while no key
 *   served less waits (and the keys hold at most cap in all);
 *
 *   the batch egress budget (per_hour platform requests an hour with burst at once: VTS_JOBS_FETCHER_SHARE percent
 *   of the fetchers' VTS_EGRESS_RATE and VTS_EGRESS_BURST over every egress, so the rest stays for synchronous
 *   requests): a key's batch work spends at most its share of it. Each key has a bucket of its own (the generic cell
 *   rate algorithm of fetcher/egress/pace.h, at its share's rate); a piece of work ends by spending the platform
 *   requests it made from its key's bucket, whatever its outcome (a 404, a refusal, a page), and the key starts
 *   nothing more while its bucket is more than its share of the burst in debt. With one key sharing, its share is
 *   the whole batch budget.
 *
 * Turns: between keys under their shares, the one served least goes first (start-time fair queueing by slot time:
 * what a key was served is the time its pieces of work held their slots, counted while they hold them, plus a
 * hundredth of a millisecond for each start, over its weight), so a key whose pieces hold a slot 50 times longer (a
 * webhook try waiting on its receiver) starts 50 times less often; a key that comes back after a pause starts level
 * with the others, not with a credit. The caller asks fair_skip for the keys a take passes over now and the store
 * hands out the rest in its own order (round robin of the jobs), so a key's jobs take turns within the key's share.
 */
#ifndef VTS_DISPATCH_FAIR_H
#define VTS_DISPATCH_FAIR_H

#include <stddef.h>
#include <stdint.h>

/* A key whose work a take last found this long ago stops sharing, unless it holds some. */
#define FAIR_LINGER_MS 1000
#define FAIR_MAX_KEYS 4096 /* keys remembered at once; past it the longest idle is forgotten */

struct fair_limits {
  uint64_t per_hour; /* platform requests an hour batch work may spend in all; 0: no egress share (unpaced) */
  uint64_t burst;    /* of those, at once */
};

struct fair;

struct fair *fair_new(const struct fair_limits *lim);
void fair_free(struct fair *f);

/* A take found work of key (its weight, 1 or more): it shares from now on. Returns 0, or -ENOMEM. */
int fair_seen(struct fair *f, uint64_t now, const char *key, uint32_t weight);
/* A take that passed over none of the keys seen found nothing of key: it has nothing waiting now. */
void fair_idle(struct fair *f, const char *key);
/* A take passing over the n keys of skip found nothing: every other key has nothing waiting now. */
void fair_idle_but(struct fair *f, const char *const *skip, size_t n);

/* Whether key may start one more piece of batch work now, cap being the batch slots in all: 1 or 0. */
int fair_may_start(struct fair *f, uint64_t now, const char *key, uint64_t cap);
/* key started a piece of work. Returns 0, or -ENOMEM. */
int fair_started(struct fair *f, uint64_t now, const char *key, uint32_t weight);
/* One of key's pieces of work ended, having made requests platform requests: spent from key's share. */
void fair_ended(struct fair *f, uint64_t now, const char *key, uint32_t requests);

/*
 * The keys a take passes over now, into out (borrowed names, valid until the next call that changes f), at most max:
 * those that may not start (fair_may_start) and, when ahead is set, those served more than the least served key that
 * may start (whose turn it is). Returns how many: FAIR_MAX_KEYS at most, the keys it remembers.
 */
size_t fair_skip(struct fair *f, uint64_t now, uint64_t cap, int ahead, const char **out, size_t max);

/* Pieces of work held by key now, and by every key. */
uint64_t fair_held(const struct fair *f, const char *key);
uint64_t fair_held_all(const struct fair *f);
/* Keys sharing now. */
size_t fair_sharing(struct fair *f, uint64_t now);

#endif
