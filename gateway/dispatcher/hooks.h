/*
 * The webhooks of batch jobs, in the dispatcher. A job with a webhook_url that ended (done, or cancelled with nothing
 * running) owes one message: its status object as GET /v1/jobs/{id} shows it, with "type" first ("job.done" or
 * "job.cancelled", the Standard Webhooks payload convention), recorded once in the job store with the id
 * "msg_<job id>", so that every try sends the same body under the same webhook-id. Each try is signed here (a fresh
 * webhook-timestamp, webhook-signature v1 over "id.timestamp.body" with the job's secret, common/whsig.h) and handed
 * to a fetcher as a PROTO_KIND_WEBHOOK job through the core: the POST to the client's URL runs in the fetcher tier,
 * which never sees the secret.
 *
 * A try is delivered when the receiver answers 2xx. After failed try n the next is due VTS_WEBHOOK_RETRY_MS * 2^(n-1)
 * later, as long as that is within VTS_WEBHOOK_RETRY_WINDOW_MS (a day) of the message's making; else the delivery is
 * given up. The store keeps the tries made and the time of the next one, so a restarted gateway goes on where the last
 * one stopped (a try in flight when it stopped is made again HOOKS_LEASE_MS after it began). Every try is logged (job
 * id, attempt, outcome, the receiver's HTTP status, reason; never the secret or the body) and counted in
 * vts_webhook_deliveries_total by outcome. A try starts only into a fetcher idle now with no request waiting, within
 * the batch share (runner.h: a try holds one of its slots, counted in its key's share, fair.h), and at most one try
 * of a key is in flight at once, so a receiver that never answers holds one slot of its own key's share for one try's
 * VTS_WEBHOOK_TIMEOUT_MS at most and delays only that key's deliveries. A revoked key's deliveries are given up: by
 * the store when the runner stops the key, and here for a try the store hands out of a key gone meanwhile (or past
 * the revoked keys a take passes over), which is never sent.
 */
#ifndef VTS_DISPATCH_HOOKS_H
#define VTS_DISPATCH_HOOKS_H

#include <stdint.h>

#include "common/config.h"
#include "gateway/dispatcher/core.h"
#include "gateway/dispatcher/runner.h"
#include "gateway/jobs/jobstore.h"
#include "proto/proto.h"

#define HOOKS_WAITER 2 /* core_waiter.internal of a webhook try (a batch item's is 1) */
/*
 * Ended jobs that owe a message are looked for after HOOKS_SCAN_MS, and tries due (or a fetcher free for one) after
 * HOOKS_POLL_MS. Each look that finds nothing doubles its wait, up to RUNNER_IDLE_POLL_MS; one that finds something,
 * and a job made on this gateway (hooks_wake), bring it back. An idle gateway's store is not asked ten times a second.
 */
#define HOOKS_SCAN_MS 250
#define HOOKS_POLL_MS 100
#define HOOKS_MAX_IN_FLIGHT 4                           /* tries held by fetchers at once */
#define HOOKS_LEASE_MS (VTS_WEBHOOK_TIMEOUT_MS + 30000) /* a try not ended by then (its gateway died) is made again */

/*
 * When the try after failed try number attempt (from 1) is due, for a message made at made_ms, a first delay of
 * retry_ms, at wall time now_ms (pure). Returns 1 with *next_ms, or 0 when none is: the delivery is given up.
 */
int hooks_next_try(int attempt, int64_t retry_ms, int64_t made_ms, int64_t now_ms, int64_t *next_ms);

struct hooks;

/*
 * The webhooks of the jobs of runner's store, run through core within runner's batch share (borrowed: the runner
 * outlives the hooks). NULL without memory.
 */
struct hooks *hooks_new(const struct vts_config *cfg, struct core *core, struct runner *runner);
/* Frees the tries the core never answered (the dispatcher stopping): their leases bring them back at the next start. */
void hooks_free(struct hooks *h);
/* Records the messages owed and starts the tries due that may start now. Returns when it wants to be called again. */
uint64_t hooks_pump(struct hooks *h, uint64_t now);
/* A job was made on this gateway: its message may soon be owed, so the next looks are due now and often again. */
void hooks_wake(struct hooks *h);
/* The answer of a try (a waiter with internal HOOKS_WAITER); res borrowed for the call. */
void hooks_answer(struct hooks *h, struct core_waiter *w, const struct proto_result *res);
/* Sets the webhook counters of st (webhooks_*): the core counts none of them. */
void hooks_stats(const struct hooks *h, struct dispatcher_stats *st);

#endif
