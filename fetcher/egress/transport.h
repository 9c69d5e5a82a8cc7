/*
 * The one HTTP transport of the fetcher. Every upstream call (the platform's pages and API, caption URLs, audio
 * downloads, the speech engine) is one transport_perform: the same curl setup (no signals, TLS verified, redirects
 * never followed by curl, http and https only), the same URL rule (https, or plain http to a loopback host), the
 * proxy the caller names and never one from the environment, a body cap that aborts the transfer, the caller's
 * deadline, one typed reason (proto.h) for every failure, and one log line per failed transfer that carries curl's
 * own error text. Redirects are followed by transport_fetch, every hop through the caller's host policy (which hosts
 * a URL may name, and where it is sent).
 */
#ifndef VTS_TRANSPORT_H
#define VTS_TRANSPORT_H

#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/buf.h"

struct transport {
  CURL *curl;
  char errbuf[CURL_ERROR_SIZE]; /* curl's text for the last failure */
};

struct transport_req {
  const char *url;             /* absolute, already checked against the caller's host policy */
  int post;                    /* POST body/body_len, or the multipart form mime; else GET */
  const char *body;            /* POST only */
  size_t body_len;             /* POST only */
  curl_mime *mime;             /* a multipart POST, or NULL */
  const char *const *headers;  /* NULL-terminated "Name: value" list, or NULL */
  const char *user_agent;      /* NULL: none */
  const char *cookie;          /* "NAME=value", or NULL */
  const char *range;           /* "first-last", or NULL */
  const char *accept_encoding; /* "gzip" to ask for it (decoded for the caller), or NULL */
  const char *proxy;           /* proxy URL, or NULL for a direct connection */
  int proxy_index;             /* 1-based position of proxy in VTS_UPSTREAM_PROXY, 0 for none: the log names this */
  uint64_t deadline_ms;        /* util_now_ms clock: the transfer ends by then */
  size_t max_bytes;            /* body cap in decoded bytes: past it the transfer is aborted */
  const char *request_id;      /* tags the log line, or NULL */
  int operator_url;            /* the URL is the operator's own setting (the speech engine): plain http allowed */
  int fresh_connection;        /* a new connection, closed after this transfer (a rotating proxy's new address) */
  /* Called before every hop of transport_fetch (a budget to spend): a negative return ends the fetch with it. */
  int (*admit)(void *ctx);
  void *admit_ctx;
  /*
   * When set: each address a connection is about to be made to (whatever the name resolved to, at the moment of
   * connecting, so a name re-pointed meanwhile is judged by where it leads now) is given to it first, and a non-zero
   * return refuses it: the transfer fails -EACCES (reason refused). The scheme rule is then the caller's.
   */
  int (*connect_check)(void *ctx, const struct sockaddr *addr);
  void *connect_ctx;
};

/* Creates the handle with the settings every transfer shares. Returns 0, or -ENOMEM. */
int transport_init(struct transport *t);
void transport_cleanup(struct transport *t);

/*
 * Performs one request (no redirect is followed) and appends the body to out, at most req->max_bytes. Any HTTP
 * status is a success (*status says which; *reason is PROTO_REASON_NONE). The URL must pass
 * transport_scheme_allowed unless req->operator_url. Returns 0; -ETIMEDOUT (deadline);
 * -EFBIG (past the cap); -EBADMSG (truncated or undecodable body); -ENETUNREACH (DNS, connect, TLS, proxy: nothing
 * reached the server); -EIO (another transfer failure); -ENOMEM; -EPERM when the URL breaks the scheme rule. *reason
 * is the typed reason of the failure; -EACCES when req->connect_check refused every address. A failure is logged at
 * info with target (host and path), status, duration, reason, proxy index and curl's error text (proxy credentials
 * removed).
 */
int transport_perform(struct transport *t, const struct transport_req *req, struct buf *out, long *status,
                      uint8_t *reason);

/*
 * A host policy: appends to out the URL to request for url (absolute; a policy may map it onto another origin).
 * Returns 0, -EPERM for a URL it refuses, -EINVAL for a malformed one, or -ENOMEM.
 */
typedef int (*transport_policy)(const void *ctx, const char *url, struct buf *out);

/*
 * req->url through policy, then transport_perform; a 3xx reply with a Location is followed through the policy again,
 * at most max_redirects times (301, 302 and 303 turn a POST into a GET, as browsers do; 307 and 308 repeat it). The
 * body of a redirect is dropped. When final_url is given, the URL of the last hop is left in it (reset first).
 * Returns as transport_perform, the policy's error for req->url, -EPERM for a Location the policy refuses and -ELOOP
 * past max_redirects (*reason PROTO_REASON_REFUSED for both), or req->admit's error (-EAGAIN: *reason
 * PROTO_REASON_BUDGET).
 */
int transport_fetch(struct transport *t, const struct transport_req *req, transport_policy policy, const void *ctx,
                    int max_redirects, struct buf *out, long *status, uint8_t *reason, struct buf *final_url);

/* The value of header name in the last reply (borrowed until the next transfer), or NULL. */
const char *transport_header(struct transport *t, const char *name);

/*
 * Splits an absolute URL into lowercased scheme and host (without brackets) and its port ("" when none).
 * Returns 0, -EINVAL for a malformed URL or a part too long, or -ENOMEM.
 */
int transport_url_parts(const char *url, char *scheme, size_t scheme_len, char *host, size_t host_len, char *port,
                        size_t port_len);

/* The scheme rule of every transfer: https, or http to a loopback host (netaddr_is_loopback). Returns 0, or -EPERM. */
int transport_scheme_allowed(const char *scheme, const char *host);

/* The reason (enum proto_reason) an errno of transport_perform stands for. */
uint8_t transport_reason(int err);

#endif
