/*
 * Proof-of-origin (PO) tokens from a provider speaking the bgutil HTTP protocol (VTS_POT_PROVIDER_URL): the token the
 * platform wants on a caption URL whose exp list names xpe or xpv. One request, POST <base>/get_pot with
 * {"content_binding":"<video id>"}; the reply {"poToken","contentBinding","expiresAt"} (an RFC 3339 date), or
 * {"error"} with a failure status. A fetcher process keeps each token it got, by its content binding, until shortly
 * before its expiry (VTS_POT_CACHE_SLOTS of them), so the tracks and jobs of one video cost the provider one request.
 *
 * The provider is asked within its own deadline (VTS_POT_TIMEOUT_MS) inside the job's. A provider that is down, slow,
 * refuses or answers out of shape gives no token: the caller goes on as without one. The provider URL may hold
 * credentials (user:password@, a secret in its query): they go to the provider and nowhere else, never into a log
 * line, which names the provider by its scheme, host and port only.
 */
#ifndef VTS_POTOKEN_H
#define VTS_POTOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/limits.h"
#include "fetcher/egress/outcome.h"

#define POTOKEN_MAX_BINDING 63 /* bytes of a content binding (a video id is 11) */

struct potoken;

/*
 * Creates the provider client for url (VTS_POT_PROVIDER_URL), asked within timeout_ms a request; nothing is
 * connected yet. Returns 0, -EINVAL (err names the variable and what is wrong, never the URL's credentials) or
 * -ENOMEM.
 */
int potoken_new(const char *url, uint64_t timeout_ms, struct potoken **out, char *err, size_t errlen);
void potoken_free(struct potoken *p);

/*
 * The provider's request URL for base (an http or https URL with a host and no fragment): its path with "/get_pot"
 * appended (a trailing "/" of base dropped), its credentials and query kept, into out; and its origin for logs
 * (scheme://host[:port], nothing else) into origin. Returns 0, -EINVAL for any other base, or -ENOMEM.
 */
int potoken_request_url(const char *base, struct buf *out, char *origin, size_t originlen);

/*
 * Reads a provider's reply body to a request for binding: the token (base64url characters, at most
 * VTS_POT_MAX_TOKEN_BYTES) into token (tokenlen bytes with the NUL) and its expiry in wall-clock milliseconds into
 * *expires_ms (-1 when the reply names none). Returns 0; -EACCES for a reply that says why it refuses ({"error"});
 * -EPROTO for one out of shape (not one JSON object, no poToken, a token of other characters or too long, an
 * unreadable expiresAt, or a contentBinding other than binding).
 */
int potoken_parse_reply(const char *body, size_t len, const char *binding, char *token, size_t tokenlen,
                        int64_t *expires_ms);

/*
 * How long a token received at wall-clock now_wall_ms, expiring at expires_ms (-1: unsaid), is kept: until
 * VTS_POT_EXPIRY_MARGIN_MS before its expiry, VTS_POT_MAX_LIFETIME_S at most; 0 when it is not kept (used once).
 */
uint64_t potoken_keep_ms(int64_t expires_ms, int64_t now_wall_ms);

/*
 * A token bound to binding (the video id, POTOKEN_MAX_BINDING bytes at most) into token (tokenlen bytes): the kept
 * one while it lives, else the provider's, asked by deadline_ms (util_now_ms clock) or the provider's own timeout,
 * whichever comes first; request_id tags the log lines. Returns 0; -EIO when the provider gave no token, with o set
 * (PROTO_UPSTREAM_FAILED, reason po_token, detail pot_timeout, pot_unreachable, pot_refused, pot_malformed or
 * pot_expired) and a warning logged; -ENOMEM or -EINVAL (a binding too long) with o set to an internal failure.
 */
int potoken_get(struct potoken *p, const char *binding, uint64_t deadline_ms, const char *request_id, char *token,
                size_t tokenlen, struct fetch_outcome *o);

/*
 * Forgets the kept token of binding when it is token (the platform refused it: it is no use for the rest of its
 * lifetime), so that the next request for binding asks the provider again. A token kept since then stays.
 */
void potoken_forget(struct potoken *p, const char *binding, const char *token);

#endif
