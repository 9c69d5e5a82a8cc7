/*
 * The HTTP client of the fetcher: one libcurl easy handle reused across jobs (connection reuse), talking only to the
 * platform. Every URL given to it is mapped onto the configured VTS_UPSTREAM_URL origin (so tests can point the
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

struct upstream;

enum upstream_method { UPSTREAM_GET = 0, UPSTREAM_POST };

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
  long status;     /* HTTP status of the last hop */
  struct buf body; /* owned by the caller: buf_free it */
};

/*
 * Checks VTS_UPSTREAM_URL and VTS_UPSTREAM_PROXY without creating anything (a supervisor checks before forking).
 * Returns 0, or -EINVAL with a one-line message naming the variable in err.
 */
int upstream_config_check(const struct vts_config *cfg, char *err, size_t errlen);

/*
 * Creates the client from cfg (VTS_UPSTREAM_URL, VTS_UPSTREAM_PROXY). Returns 0, -EINVAL with a one-line message
 * naming the variable in err, or -ENOMEM. Call curl_global_init before.
 */
int upstream_new(const struct vts_config *cfg, struct upstream **out, char *err, size_t errlen);
void upstream_free(struct upstream *u);

/*
 * Starts a job: every transfer until the next call ends by deadline_ms (util_now_ms clock); the next proxy of the
 * list is chosen; cookies of the previous job are dropped. request_id (borrowed, kept until the next call) tags logs.
 */
void upstream_begin_job(struct upstream *u, uint64_t deadline_ms, const char *request_id);

/*
 * Performs one request, following allowed redirects. Any HTTP status is a success (resp->status says which).
 * Returns 0; -ETIMEDOUT when the deadline passed; -EFBIG past max_bytes; -EPERM for a URL or a redirect off the
 * platform hosts; -ELOOP for too many redirects; -EBADMSG for a truncated or undecodable body; -EIO for another
 * transport failure; -ENOMEM. resp->body holds what arrived (possibly partial) in every case.
 */
int upstream_fetch(struct upstream *u, const struct upstream_request *req, struct upstream_response *resp);

/*
 * Maps url (absolute on the upstream host, www.youtube.com or consent.youtube.com, or a path) onto the configured
 * origin and appends the result to out. Returns 0, -EPERM for another host or scheme, -EINVAL for a malformed URL,
 * or -ENOMEM.
 */
int upstream_map_url(const struct upstream *u, const char *url, struct buf *out);

/* The proxy chosen for the current job (borrowed), or NULL when none is configured. */
const char *upstream_job_proxy(const struct upstream *u);
/* The current job's deadline (util_now_ms clock). */
uint64_t upstream_job_deadline(const struct upstream *u);

/* A short stable name for an error of upstream_fetch, for result details and logs ("timeout", "too_large"...). */
const char *upstream_strerror(int err);

#endif
