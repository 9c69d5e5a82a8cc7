/*
 * The batch jobs' runner, in the dispatcher: takes the queued items of the job store (gateway/jobs/jobstore.h) and
 * hands each to the core as a request of its own (a core_waiter marked internal), so an item goes through the same
 * cache, coalescing, claims and fetchers as a synchronous request. It keeps fetchers free for those:
 *
 *   an item starts only while no request waits in the core's queue beyond the idle fetchers (queued < idle), and at
 *   most VTS_JOBS_FETCHER_SHARE percent of the connected fetchers hold items at once (at least one item when a
 *   fetcher is connected and the share is not 0), so the rest always serve synchronous requests at once.
 *
 * Paid before spent: an item holds one unit of the month of the job's key before the platform is asked, where the
 * synchronous endpoint reserves the key's month: the limiter's shared table (ratelimit_charge_month), or with
 * VTS_REDIS_URL the key's month counter in Redis (jobstore_reserve). With no unit left the item fails quota_exceeded
 * and no platform request is made; an item answered with a transcript keeps its unit and the transcript's JSON (the
 * store compresses it; the items endpoint renders the job's format); an item that ends without one (a failure, a
 * ration's retry, a cancel meanwhile) gives its unit back. A counter that cannot answer is not a month used up: the
 * item is put back for RUNNER_CHARGE_RETRY_MS. A 404 fails transcript_not_available, a 500
 * transcript_fetch_failed, a 502 upstream_transcript_failed, except a 502 for a ration (one carrying Retry-After, or of
 * reason egress_budget or rationed): the item goes back to the queue, not to be taken before that time
 * (RUNNER_RATION_RETRY_MS when it names none), as long as that is within VTS_JOB_MAX_AGE_S of its job's making; a
 * 503 (shed: the item yielded to synchronous requests in the dispatcher's queue) goes back the same way for its
 * Retry-After, and past that age fails service_unavailable. Taking
 * an item leases it for the job's deadline and more; one gateway owns a VTS_STATE_DIR, so at start its runner puts back
 * every item left running (a gateway killed mid-job resumes it). With Redis the items in hand are renewed every
 * JOBSTORE_KEEPALIVE_MS and a dead gateway's are claimed by any runner after JOBSTORE_CLAIM_IDLE_MS. Ended jobs are
 * deleted VTS_JOB_TTL_S after their last change, a small batch at a time.
 *
 * No store call runs on the dispatcher's loop: each is made on the store's thread (gateway/jobs/storeq.h) and its
 * answer comes back to the loop, where every decision is made (the fair shares, the room, the unit). One take is in
 * flight at a time, with its reservation; a renewal, an expiry batch and a stop of a revoked key's jobs at most one
 * each; the writes of ended work are as many as the work in flight, and no take is made while RUNNER_STORE_DEPTH_MAX
 * calls wait. So a slow or frozen store holds only batch work, never the synchronous requests of the same loop.
 *
 * A playlist's or channel's job keeps the continuation of its list's next page in the store: the runner takes it
 * (leased like an item, looked for before an item every other take, within the same room) and hands the core a browse
 * job of it; the page's ids are appended to the job with the next continuation in one transaction (jobstore_page_done),
 * so a gateway killed mid-list reads the same page again on restart and holds each video once. A page that meets a
 * ration goes back as an item does; any other failure is tried RUNNER_PAGE_TRIES times, then ends the list with what
 * the job holds.
 */
#ifndef VTS_DISPATCH_RUNNER_H
#define VTS_DISPATCH_RUNNER_H

#include <stdint.h>

#include <uv.h>

#include "common/config.h"
#include "gateway/dispatcher/core.h"
#include "gateway/dispatcher/fair.h"
#include "gateway/jobs/jobstore.h"
#include "gateway/limits/ratelimit.h"
#include "proto/proto.h"

/* An item met a ration that named no time: tried again after this long (the budgets refill over minutes). */
#define RUNNER_RATION_RETRY_MS 30000
/* An item whose unit of the month could not be counted (the counter's store did not answer): tried again after this. */
#define RUNNER_CHARGE_RETRY_MS 5000
/*
 * With nothing to take, the store is asked again after RUNNER_POLL_MS, on its own thread (storeq.h), and after twice
 * as long at each take that finds nothing, up to RUNNER_IDLE_POLL_MS. A take that finds work, and a job made on this
 * gateway (runner_wake), bring it back to RUNNER_POLL_MS. So a job made on another gateway sharing the store starts
 * here within about RUNNER_IDLE_POLL_MS, and an idle runner costs a store round trip or two that often: the loop and
 * the store's thread share their cores with the workers, and every wake-up of theirs delays the answers there.
 */
#define RUNNER_POLL_MS 50
#define RUNNER_IDLE_POLL_MS 1000
/* The wait after a look at the store that found nothing, the last wait ms: twice that, at most RUNNER_IDLE_POLL_MS. */
uint64_t runner_idle_wait(uint64_t ms);
/*
 * How often at most the key file is looked at for changes (its revoked keys, weights and months): at a pump, so an
 * idle runner looks once a RUNNER_IDLE_POLL_MS, and its next take still goes by what the file says then.
 */
#define RUNNER_KEYS_POLL_MS 500
/* Store calls queued at most before another take: a store that does not answer holds the ended work's writes only. */
#define RUNNER_STORE_DEPTH_MAX 64
/*
 * Keys a take passes over at most: every key fair_skip names (it remembers FAIR_MAX_KEYS), so that none past the
 * bound takes more than its share while another key waits; then up to RUNNER_SKIP_GONE_MAX revoked or removed keys.
 * An item or a page of a gone key past those is not started either: the take that finds it ends it key_revoked.
 */
#define RUNNER_SKIP_GONE_MAX 256
#define RUNNER_SKIP_MAX (FAIR_MAX_KEYS + RUNNER_SKIP_GONE_MAX)

/* How many items may start now (pure): the rule above. */
uint64_t runner_room(uint64_t connected, uint64_t idle, uint64_t queued, uint64_t in_flight, int64_t share_pct);

/* What an item's answer makes of it (pure). */
enum runner_verdict { RUNNER_DONE, RUNNER_FAIL, RUNNER_RETRY };
struct runner_outcome {
  enum runner_verdict verdict;
  const char *code;      /* RUNNER_FAIL: the synchronous endpoint's code */
  const char *message;   /* and its message */
  int64_t not_before_ms; /* RUNNER_RETRY: wall clock */
};
/* res's outcome for an item of a job made at created_ms, at wall time now_ms, with max_age_ms. */
void runner_judge(const struct proto_result *res, int64_t now_ms, int64_t created_ms, int64_t max_age_ms,
                  struct runner_outcome *out);

struct runner;

/*
 * Opens the store the configuration names on a thread of its own (storeq.h, answering on loop) and puts back the
 * items left running. Its items' units of the month are taken from the rate limiter's table of limits (borrowed;
 * NULL: none can be, each such item is tried again later). kick(kick_arg) asks for a runner_pump soon (a store call
 * answered: more may start). NULL when it cannot (logged).
 */
struct runner *runner_new(const struct vts_config *cfg, const struct ratelimit_shared *limits, struct core *core,
                          uv_loop_t *loop, void (*kick)(void *), void *kick_arg);
/*
 * Gives back the units of the items in hand, then closes the store's queue: every call still queued is made (the
 * webhooks' too: free the hooks after this), their answers start nothing. Call it before the core is freed.
 */
void runner_free(struct runner *r);
/* The runner's store queue (borrowed, valid until runner_free), for the webhooks of its jobs (hooks.h). */
struct storeq *runner_storeq(struct runner *r);
/* Asks for a pump soon, as a store call of the runner's does when it is answered (nothing while closing). */
void runner_kick(struct runner *r);
/* A job was made on this gateway: the next take is due now, and the store is asked often again (RUNNER_POLL_MS). */
void runner_wake(struct runner *r);
/* Whether runner_free has begun: a store call answered now starts nothing. */
int runner_closing(const struct runner *r);
/* Sets the runner's gauges of st (store_calls: its store queue's depth); NULL sets none. */
void runner_stats(const struct runner *r, struct dispatcher_stats *st);
/* The shares of batch work between keys (fair.h), which the webhook tries count in too (borrowed). */
struct fair *runner_fair(struct runner *r);
/* The batch slots now: VTS_JOBS_FETCHER_SHARE percent of the connected fetchers, at least 1 (0 with none or 0 %). */
uint64_t runner_cap(struct runner *r);
/* The egresses of a fetcher (the direct route and each VTS_UPSTREAM_PROXY entry): what the egress budget spans. */
uint64_t runner_egresses(const struct vts_config *cfg);
/*
 * The keys whose batch work is passed over now, into out (borrowed names, valid until the runner's next call), at
 * most max (RUNNER_SKIP_MAX holds them all): those fair_skip names (ahead: also those ahead in turns), then up to
 * RUNNER_SKIP_GONE_MAX of the revoked and removed keys. Returns how many.
 */
size_t runner_skip(struct runner *r, uint64_t now, int ahead, const char **out, size_t max);
/*
 * The keys a take passes over, copied for the store's thread (which reads them while the loop's own change): n names,
 * and the list (jobstore_skip) pointing at them.
 */
struct runner_skipped {
  char (*names)[JOBSTORE_KEY_ID_MAX + 1];
  const char **keys;
  size_t n;
};
/*
 * Fills s (what it held freed) with the nfirst names of first, then runner_skip's (ahead as there). Returns 0, or
 * -ENOMEM (s then holds none).
 */
int runner_skipped_fill(struct runner *r, uint64_t now, int ahead, const char *const *first, size_t nfirst,
                        struct runner_skipped *s);
void runner_skipped_free(struct runner_skipped *s);
/* Whether key is absent from the key file or not active there. */
int runner_key_gone(const struct runner *r, const char *key);
/*
 * Whether the work of key just taken from the store must not start, its key gone (runner_key_gone) since the take was
 * asked for: then the key is counted among the gone ones, and its jobs are stopped at the next pump. 0 without a key
 * file read yet, or when the key cannot be counted (no memory): the work starts, as before the key went.
 */
int runner_gone_found(struct runner *r, const char *key);
/* key's weight in the key file, its share of batch work against the others' (fair.h): 1 for a key it does not hold. */
uint32_t runner_key_weight(const struct runner *r, const char *key);
/*
 * Starts what may start now (the core's gauges decide) and expires old jobs now and then. Returns the monotonic time
 * it wants to be called again by at the latest.
 */
uint64_t runner_pump(struct runner *r, uint64_t now);
/*
 * Only renews the items in hand (jobstore_keepalive), starting none: while the dispatcher drains, so that another
 * gateway does not claim the items still running here. Returns when it wants to be called again by at the latest.
 */
uint64_t runner_hold(struct runner *r, uint64_t now);
/* The answer of an internal waiter (the shell's answer action hands it over); res borrowed for the call. */
void runner_answer(struct runner *r, struct core_waiter *w, const struct proto_result *res);

#endif
