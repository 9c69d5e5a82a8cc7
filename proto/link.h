/*
 * The jobs link between a dispatcher and its fetchers as a transport: the URLs it takes (VTS_JOBS_URL, tcp:// or
 * tls+tcp://) and its mutual TLS. Over tls+tcp both ends present a certificate signed by the CA of VTS_JOBS_TLS_CA and
 * require the same of the peer, so a process without one can neither take a job nor deliver a result: its handshake
 * fails before nng makes a connection of it. A certificate carries its role in extendedKeyUsage, serverAuth for a
 * gateway and clientAuth for a fetcher, and the TLS library refuses a peer whose certificate names another role, so a
 * fetcher's certificate cannot pose as a gateway's nor the reverse. As that library lets a certificate without the
 * extension pass for either role, each end refuses to start with a certificate that does not name its own role only.
 * Plain tcp:// authenticates nobody; it is for one host.
 */
#ifndef VTS_LINK_H
#define VTS_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "common/config.h"

/* An nng error code (a small positive number, or NNG_ESYSERR with an errno) as -errno: -EIO for nng's own others. */
int link_errno(int nng_rv);

/* True when url is a tls+tcp:// URL. */
bool link_url_tls(const char *url);
/* True when an entry of a comma-separated list of URLs is a tls+tcp:// URL. */
bool link_list_tls(const char *list);

/*
 * Splits a tcp:// or tls+tcp:// URL into its scheme ("tcp" or "tls+tcp"), host (without the brackets of an IPv6
 * address) and port (as text). Returns 0, or -EINVAL.
 */
int link_url_split(const char *url, const char **scheme, char *host, size_t hostlen, char *port, size_t portlen);

/*
 * True when the host of a tcp:// or tls+tcp:// URL is a loopback address or "localhost": only processes of this host
 * can reach a listener there.
 */
bool link_url_loopback(const char *url);

/*
 * Checks that the files of VTS_JOBS_TLS_CA, VTS_JOBS_TLS_CERT and VTS_JOBS_TLS_KEY can be read and hold PEM, and that
 * the certificate carries this end's role (server: a gateway's, extendedKeyUsage serverAuth; else a fetcher's,
 * clientAuth) and not the other's, without starting nng (the gateway's master calls it before it forks). Returns 0,
 * or a negative error with a one-line message naming the variable in err.
 */
int link_tls_check(const struct vts_config *cfg, bool server, char *err, size_t errlen);

/*
 * Makes the TLS configuration of one end of the link from the three files: server for the dispatcher's listener,
 * client for a fetcher's dialer; peer verification is required either way, and the certificate must carry this end's
 * role (as link_tls_check says). server_name, when not NULL, is the name the
 * dispatcher's certificate must carry (a fetcher passes the host name of its URL; a numeric address is not checked,
 * as the TLS library reads no address from a certificate). The caller owns *out (nng_tls_config_free). Returns 0, or
 * a negative error with a message naming the variable in err.
 */
int link_tls_config(const struct vts_config *cfg, bool server, const char *server_name, nng_tls_config **out, char *err,
                    size_t errlen);

/*
 * Reads the three files once and keeps them in memory for the life of the process: later configurations are made
 * from the copies, so a process confined afterwards (fetcher/process/sandbox.h) needs no access to the files, the
 * private key's above all. Returns 0, or a negative error with a message naming the variable in err.
 */
int link_tls_keep(const struct vts_config *cfg, char *err, size_t errlen);

/*
 * Applies the TLS configuration of cfg to a listener (server) of url when url is tls+tcp://, and does nothing for
 * tcp://. Returns 0, or a negative error with a message in err.
 */
int link_tls_listener(const struct vts_config *cfg, nng_listener l, const char *url, char *err, size_t errlen);
/*
 * The same for a dialer; name is the host name the dispatcher's certificate must carry (the host of VTS_JOBS_URL
 * before it was resolved to url's address), unchecked when it is a numeric address.
 */
int link_tls_dialer(const struct vts_config *cfg, nng_dialer d, const char *url, const char *name, char *err,
                    size_t errlen);

/*
 * The failed TLS handshakes of one listener or dialer of the link. nng refuses a peer inside its transport and makes
 * no connection of it, so the only trace is the listener's or dialer's "auth" statistic: a certificate this end
 * refused, a refusal of ours the peer told with an alert, or any other TLS error. A refusal of ours seen as a reset
 * (the refusing end closes with our flight unread) nng counts with every other reset, and it is left out. A listener
 * cannot tell the address a failure came from, so a gateway counts and logs per listener; a fetcher's dialer dials one
 * address.
 */
struct link_handshakes {
  uint64_t failed;       /* failures counted since the start */
  uint64_t untold;       /* failures no log line told yet */
  uint64_t next_line_ms; /* no line before this (util_now_ms) */
};

/* Reads nng's count of failed handshakes of a listener into *out. Returns 0, or -ENOENT when nng keeps none. */
int link_listener_handshake_failures(nng_listener l, uint64_t *out);
/* The same for a dialer. */
int link_dialer_handshake_failures(nng_dialer d, uint64_t *out);

/*
 * Takes the count read at now_ms and, when failures are not told yet and no line was written in the last
 * VTS_LINK_HANDSHAKE_LOG_MS, logs one warning for url: "failed" since the start, and "suppressed", the failures since
 * the previous line that had none of their own. Called every VTS_LINK_HANDSHAKE_POLL_MS, it tells a window's failures
 * as the window ends.
 */
void link_handshakes_note(struct link_handshakes *h, uint64_t count, uint64_t now_ms, const char *url);

/* Logs the failures no line told yet, whatever the time (a process that stops). */
void link_handshakes_flush(struct link_handshakes *h, const char *url);

/*
 * nng 1.5.2 can hang for good in nng_close or nng_aio_stop (a race in its reaper: nanomsg/nng#1543, fixed in 1.8). A
 * stopping process must not hang with it: call this as its teardown begins, and past timeout_ms a detached thread logs
 * msg and ends the process with status.
 */
void link_teardown_watchdog(int timeout_ms, int status, const char *msg);

#endif
