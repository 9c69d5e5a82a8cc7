/*
 * The platform client's HTTP side: one transport (transport.h) reused across jobs (connection reuse), talking only
 * to the platform. Every URL given to it is mapped onto the configured VTS_UPSTREAM_URL origin (so tests can point the
 * platform elsewhere); redirects are followed by hand, at most VTS_UPSTREAM_MAX_REDIRECTS, and only to platform
 * hosts. HTTPS only, except plain http to a loopback upstream (tests). Bodies are capped; the total time of every
 * transfer is bounded by the job's deadline. Logs carry host and path at most, never queries or bodies.
 */
#ifndef VTS_UPSTREAM_H
#define VTS_UPSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/config.h"
#include "fetcher/egress/outcome.h"
#include "proto/proto.h"

struct upstream;

enum upstream_method { UPSTREAM_GET = 0, UPSTREAM_POST };

#define UPSTREAM_MAX_HEADERS 24 /* headers of one request; more are not sent */

struct upstream_request {
  enum upstream_method method;
  const char *url;  /* absolute on a platform host, or a path; sent to the configured origin */
  const char *body; /* POST only */
  size_t body_len;
  const char *user_agent;     /* NULL: none */
  const char *const *headers; /* NULL-terminated list of "Name: value", or NULL */
  const char *cookie;         /* "NAME=value" added to this request, or NULL */
  size_t max_bytes;           /* body cap (decoded bytes) */
};

struct upstream_response {
  long status; /* HTTP status of the last hop */
  /*
   * How the transfer ended, whatever the status: PROTO_OK (reason none, detail "ok") when it completed; else
   * PROTO_UPSTREAM_FAILED, or PROTO_INTERNAL out of memory, with the typed reason of the failure (transport.h) and a
   * short stable detail ("timeout", "too_large", "bad_redirect", "too_many_redirects", "truncated", "no_memory",
   * "network", "egress_budget", "transport").
   */
  struct fetch_outcome outcome;
  struct buf body; /* owned by the caller: buf_free it */
};

/*
 * Checks VTS_UPSTREAM_URL and VTS_UPSTREAM_PROXY (or, when it is unset, the standard proxy variables: https_proxy,
 * HTTPS_PROXY, http_proxy for an http:// platform, all_proxy, ALL_PROXY, with NO_PROXY / no_proxy) without creating
 * anything (a supervisor checks before forking). Returns 0, or -EINVAL with a one-line message naming the variable in
 * err.
 */
int upstream_config_check(const struct vts_config *cfg, char *err, size_t errlen);

/*
 * Says which egress the platform's requests take, for the log at start: "direct", or the variable the proxies come
 * from (VTS_UPSTREAM_PROXY, or https_proxy and the other standard proxy variables when it is unset) and the proxies
 * as scheme://host:port, never their credentials ("https_proxy http://proxy.example:3128"). Returns 0, or -EINVAL.
 */
int upstream_egress_describe(const struct vts_config *cfg, char *out, size_t outlen);

/*
 * Creates the client from cfg (VTS_UPSTREAM_URL, VTS_UPSTREAM_PROXY). Returns 0, -EINVAL with a one-line message
 * naming the variable in err, or -ENOMEM. Call curl_global_init before.
 */
int upstream_new(const struct vts_config *cfg, struct upstream **out, char *err, size_t errlen);
void upstream_free(struct upstream *u);

/*
 * Maps the proxies' health into memory shared with the children forked after it (a fetcher with --workers), so that
 * a proxy found blocked by one child rests for all. Without it each process keeps its own. Returns 0 or -errno.
 */
int upstream_health_share(void);

/*
 * Starts a job: every transfer until the next call ends by deadline_ms (util_now_ms clock); a proxy is chosen
 * (healthy ones first, spread over the list; when all rest, the one resting longest); cookies of the previous job
 * are dropped. request_id (borrowed, kept until the next call) tags logs.
 */
void upstream_begin_job(struct upstream *u, uint64_t deadline_ms, const char *request_id);

/*
 * Moves the job to another proxy it has not used (a new connection, no cookies), chosen as upstream_begin_job does.
 * Returns 0, or -ENOENT when none is left (fewer than two proxies, or all used).
 */
int upstream_next_egress(struct upstream *u);

/* Uses proxy index (1-based, 0 for none) for the rest of the job, whatever its health (the probe). 0 or -EINVAL. */
int upstream_use_egress(struct upstream *u, int index);

/*
 * Whether upstream_next_egress has somewhere to go: a proxy the job has not used, or the same rotating proxy (a new
 * connection is a new address).
 */
int upstream_has_next_egress(const struct upstream *u);

/* The number of proxies in VTS_UPSTREAM_PROXY. */
size_t upstream_proxy_count(const struct upstream *u);

/*
 * Reports how the current egress (its proxy, or the direct route) fared in this job: blocked (429, recaptcha, bot
 * check, the platform's ration, a reply for another video, 403 on captions, or no connection), or served.
 * VTS_PROXY_BLOCKS_TO_REST blocks in a row send it to rest for VTS_PROXY_REST_MS, doubling at each further block up to
 * VTS_PROXY_REST_MAX_FACTOR times; a served job ends the row and the rest. A rotating proxy is never rested.
 */
void upstream_egress_report(struct upstream *u, int blocked);

/*
 * When every egress a job may use (the proxies, or the direct route without them) rests: the ms until the first
 * comes back (a 502's Retry-After). 0 when one does not rest.
 */
uint64_t upstream_rest_left_ms(const struct upstream *u);

/*
 * Reports how a translated caption track (tlang) fared through the current egress: throttled (429 or an empty body)
 * rests translations through that egress at once, for VTS_PROXY_REST_MS doubling at each further throttle in a row
 * (up to VTS_PROXY_REST_MAX_FACTOR times); served ends the row and the rest. The egress itself is not rested, nor
 * are a rotating proxy's translations (its next request goes out from another address).
 */
void upstream_translation_report(struct upstream *u, int throttled);

/* The same as upstream_rest_left_ms for translations: every egress's translations rest, until the first is back. */
uint64_t upstream_translation_rest_left_ms(const struct upstream *u);

/*
 * For a job that asks for a translation, before its first request: keeps its egress when translations do not rest
 * there, else moves it to a proxy whose translations do not (one not resting itself first). Returns 0, or -EAGAIN
 * when translations rest through every egress (upstream_translation_rest_left_ms says until when).
 */
int upstream_translation_egress(struct upstream *u);

/*
 * Performs one request, following allowed redirects. Any HTTP status is a success (resp->status says which).
 * Returns 0; -ETIMEDOUT when the deadline passed; -EFBIG past max_bytes; -EPERM for a URL or a redirect off the
 * platform hosts; -ELOOP for too many redirects; -EBADMSG for a truncated or undecodable body; -ENETUNREACH when
 * nothing reached the platform (DNS, connect, TLS, proxy); -EIO for another transport failure; -EAGAIN when the
 * egress's budget holds no unit before the deadline (nothing was sent); -ENOMEM.
 * resp->outcome says what the transfer's end means for the job. resp->body holds what arrived (possibly partial) in
 * every case.
 */
int upstream_fetch(struct upstream *u, const struct upstream_request *req, struct upstream_response *resp);

/*
 * Maps url (absolute on the upstream host, www.youtube.com, or a path) onto the configured origin and appends the
 * result to out. The platform's other hosts (consent.youtube.com, and the API hosts of upstream_api_host) are
 * themselves, or the configured origin when it is a loopback one (tests), where the request then carries the host it
 * named in its Host header. Returns 0, -EPERM for another host or scheme, -EINVAL for a malformed URL, or -ENOMEM.
 */
int upstream_map_url(const struct upstream *u, const char *url, struct buf *out);

/*
 * Whether host (as written, lowercase) is a platform host a client profile's player call may name: www.youtube.com,
 * youtubei.googleapis.com, m.youtube.com or music.youtube.com.
 */
int upstream_api_host(const char *host);

/* The proxy chosen for the current job (borrowed), or NULL when none is configured. */
const char *upstream_job_proxy(const struct upstream *u);
/* The 1-based position of the current job's proxy in VTS_UPSTREAM_PROXY, 0 for none (logs and metrics name it). */
int upstream_job_proxy_index(const struct upstream *u);
/* The current job's deadline (util_now_ms clock). */
uint64_t upstream_job_deadline(const struct upstream *u);

/*
 * Budgets. Every egress (the direct route, each proxy) spends one unit of its budget on every platform request
 * (VTS_EGRESS_RATE an hour, VTS_EGRESS_BURST at once, or the ";rate=N;burst=N" of its VTS_UPSTREAM_PROXY entry; a
 * rotating+ proxy is unpaced unless it says a rate). The budgets live with the proxies' health: shared by a fetcher's
 * children after upstream_health_share. A request whose egress has no unit waits for one if it comes before the
 * job's deadline; else upstream_fetch fails with -EAGAIN (reason PROTO_REASON_BUDGET) and nothing is sent.
 */

/* Milliseconds until the first egress a job could use holds a unit (0: one holds one now): a Retry-After. */
uint64_t upstream_budget_wait_ms(struct upstream *u);

/* Counts a job given back to its dispatcher for want of budget, against every egress the job could have used. */
void upstream_budget_declined(struct upstream *u);

/*
 * Writes the state of every paced egress of this process into out (PROTO_MAX_EGRESS entries at most): the units
 * left now, and the waits and declines of this process since the previous call, which are reset. Returns the count.
 */
size_t upstream_budget_report(struct upstream *u, struct proto_egress *out);

#endif
