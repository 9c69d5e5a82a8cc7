/*
 * A fetcher's links to every dispatcher it serves. VTS_JOBS_URL is a comma-separated list; each host name is resolved
 * (again every VTS_JOBS_RESOLVE_S), and each address is one dispatcher with a req0 socket of its own, so gateways that
 * come and go behind a name are picked up and dropped.
 *
 * The process still runs one job at a time: it offers itself (a READY, or the RESULT of its last job) to every
 * dispatcher at once; the first job to arrive is run, and any other that arrives before that job's result was sent is
 * given straight back (a PROTO_DECLINE, answered with a READY), so the dispatcher hands it to another idle fetcher.
 * The declines happen on nng's threads, while the job runs. A dispatcher that goes away costs only the job it gave;
 * its socket keeps redialing it and offers itself again once it is back.
 *
 * The process logs "fetcher ready" once its first link is made, after its TLS handshake: a fetcher whose handshakes
 * all fail (another CA, a certificate of the wrong role) never does; it logs its failed handshakes instead, each
 * dialed address at most once every VTS_LINK_HANDSHAKE_LOG_MS with how many it left out, and the rest as it stops.
 */
#ifndef VTS_PEERS_H
#define VTS_PEERS_H

#include <stddef.h>

#include "common/config.h"
#include "proto/proto.h"

struct peers;

/* Where the process stands after a call of the loop: it serves on, or it was asked to stop (peers_stop). */
enum peers_state { PEERS_SERVING = 0, PEERS_STOPPING = 1 };

/*
 * Makes the links of cfg->jobs_url: the TLS settings are tried once (a bad one fails here), names are resolved, each
 * address is dialed in the background and offered a READY. Returns 0, or a negative error with a message in err.
 */
int peers_new(const struct vts_config *cfg, struct peers **out, char *err, size_t errlen);

/*
 * Waits for the next job from any dispatcher, re-resolving the names on schedule meanwhile. Returns PEERS_SERVING with
 * *job filled (the process is busy from then on: later jobs are declined), or PEERS_STOPPING once peers_stop was
 * called. job->player borrows memory of ps, valid until the next call.
 */
enum peers_state peers_wait_job(struct peers *ps, struct proto_job *job);

/*
 * Sends the result of the job peers_wait_job returned to the dispatcher that gave it, and offers the process to every
 * dispatcher again. After peers_stop the result is a RESULT_LAST instead, and this waits (VTS_FETCHER_STOP_LINGER_MS at
 * most) for its acknowledgement. res->body may be replaced by an internal failure when the result cannot travel.
 * Returns PEERS_STOPPING when the process is stopping (the caller leaves its loop), else PEERS_SERVING.
 */
enum peers_state peers_finish(struct peers *ps, struct proto_result *res);

/*
 * Gives the job peers_wait_job returned back to the dispatcher that gave it, unrun, because every egress of this
 * process spent its budget (a DECLINE that the dispatcher counts in the job), and offers the process to every
 * dispatcher again. Returns PEERS_STOPPING when the process is stopping (the caller leaves its loop), else
 * PEERS_SERVING.
 */
enum peers_state peers_give_back(struct peers *ps, const struct proto_job *job);

/* Asks the loop to stop: an idle wait returns at once, a job in progress finishes first. Safe from any thread. */
void peers_stop(struct peers *ps);

/* Closes every link (after the declines still in flight were acknowledged, briefly) and frees ps. */
void peers_free(struct peers *ps);

#endif
