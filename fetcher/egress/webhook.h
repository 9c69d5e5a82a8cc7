/*
 * The delivery of a batch job's webhook (a PROTO_KIND_WEBHOOK job): one POST of the message the gateway signed, to
 * the client's URL, from the fetcher tier, where a hostile receiver reaches nothing of the gateway's. The rules, each
 * checked here whatever the gateway checked before:
 *
 *   - every address connected to is public, or inside VTS_WEBHOOK_ALLOW; plain http only to an address inside it.
 *     The check runs when curl opens the socket, on the address it connects to, so a name that resolves to a
 *     loopback or private address (or is re-pointed there after the gateway's check) is refused;
 *   - no redirect is followed: a 3xx is a failed try;
 *   - one try lasts VTS_WEBHOOK_TIMEOUT_MS at most (and never past the job's deadline), on a new connection;
 *   - the receiver's answer body is read up to VTS_WEBHOOK_MAX_REPLY_BYTES and ignored.
 *
 * Any 2xx is delivered.
 */
#ifndef VTS_WEBHOOK_H
#define VTS_WEBHOOK_H

#include <stdint.h>

#include "common/buf.h"
#include "common/config.h"
#include "common/netaddr.h"
#include "fetcher/egress/outcome.h"
#include "proto/proto.h"

struct webhook;

/* Parses VTS_WEBHOOK_ALLOW and makes the transfer handle. Returns 0, -EINVAL (err says why) or -ENOMEM. */
int webhook_new(const struct vts_config *cfg, struct webhook **out, char *err, size_t errlen);
void webhook_free(struct webhook *w);

/*
 * POSTs job's delivery by deadline_ms (util_now_ms clock). out is PROTO_OK for a 2xx, else PROTO_UPSTREAM_FAILED with
 * its reason (refused: an address or scheme not allowed, or a redirect; http_5xx, http_other, network, timeout) and a
 * detail ("http_503", "redirect_302", "address_refused"...). The receiver's status, in decimal, is appended to status
 * ("" when it gave none).
 */
void webhook_deliver(struct webhook *w, const struct proto_job *job, uint64_t deadline_ms, struct fetch_outcome *out,
                     struct buf *status);

/* Whether sa may be connected to for a URL of this scheme (https or not) under allow (pure; the connect check). */
int webhook_address_allowed(const struct netaddr_allow *allow, int https, const struct sockaddr *sa);

#endif
