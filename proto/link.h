/*
 * The jobs link between a dispatcher and its fetchers as a transport: the URLs it takes (VTS_JOBS_URL, tcp:// or
 * tls+tcp://) and its mutual TLS. Over tls+tcp both ends present a certificate signed by the CA of VTS_JOBS_TLS_CA and
 * require the same of the peer, so a process without one can neither take a job nor deliver a result: its handshake
 * fails before nng makes a connection of it. Plain tcp:// authenticates nobody; it is for one host.
 */
#ifndef VTS_LINK_H
#define VTS_LINK_H

#include <stdbool.h>
#include <stddef.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "common/config.h"

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
 * Checks that the files of VTS_JOBS_TLS_CA, VTS_JOBS_TLS_CERT and VTS_JOBS_TLS_KEY can be read and hold PEM, without
 * starting nng (the gateway's master calls it before it forks). Returns 0, or a negative error with a one-line
 * message naming the variable in err.
 */
int link_tls_check(const struct vts_config *cfg, char *err, size_t errlen);

/*
 * Makes the TLS configuration of one end of the link from the three files: server for the dispatcher's listener,
 * client for a fetcher's dialer; peer verification is required either way. server_name, when not NULL, is the name the
 * dispatcher's certificate must carry (a fetcher passes the host name of its URL; a numeric address is not checked,
 * as the TLS library reads no address from a certificate). The caller owns *out (nng_tls_config_free). Returns 0, or
 * a negative error with a message naming the variable in err.
 */
int link_tls_config(const struct vts_config *cfg, bool server, const char *server_name, nng_tls_config **out, char *err,
                    size_t errlen);

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
 * nng 1.5.2 can hang for good in nng_close or nng_aio_stop (a race in its reaper: nanomsg/nng#1543, fixed in 1.8). A
 * stopping process must not hang with it: call this as its teardown begins, and past timeout_ms a detached thread logs
 * msg and ends the process with status.
 */
void link_teardown_watchdog(int timeout_ms, int status, const char *msg);

#endif
