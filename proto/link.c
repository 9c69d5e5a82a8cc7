#include "proto/link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/netaddr.h"

int link_errno(int nng_rv) {
  if ((nng_rv & NNG_ESYSERR) != 0) return -(nng_rv & ~NNG_ESYSERR);
  switch (nng_rv) {
    case NNG_ENOMEM:
      return -ENOMEM;
    case NNG_EINVAL:
    case NNG_EADDRINVAL:
      return -EINVAL;
    case NNG_EADDRINUSE:
      return -EADDRINUSE;
    case NNG_EPERM:
      return -EPERM;
    case NNG_ENOTSUP:
      return -ENOTSUP;
    default:
      return -EIO;
  }
}

bool link_url_tls(const char *url) { return strncmp(url, "tls+tcp://", 10) == 0; }

bool link_list_tls(const char *list) {
  for (const char *p = list;; p++) {
    if (link_url_tls(p)) return true;
    p = strchr(p, ',');
    if (p == NULL) return false;
  }
}

int link_url_split(const char *url, const char **scheme, char *host, size_t hostlen, char *port, size_t portlen) {
  bool tls = link_url_tls(url);
  const char *hp = tls ? url + 10 : strncmp(url, "tcp://", 6) == 0 ? url + 6 : NULL;
  if (hp == NULL) return -EINVAL;
  char hostport[256];
  int p;
  if (config_parse_listen(hp, hostport, sizeof(hostport), &p) != 0) return -EINVAL;
  size_t n = strlen(hostport);
  const char *h = hostport;
  if (n >= 2 && hostport[0] == '[' && hostport[n - 1] == ']') {
    h = hostport + 1;
    n -= 2;
  }
  if (n >= hostlen || snprintf(port, portlen, "%d", p) >= (int)portlen) return -EINVAL;
  memcpy(host, h, n);
  host[n] = '\0';
  *scheme = tls ? "tls+tcp" : "tcp";
  return 0;
}

/* The host of a tcp:// or tls+tcp:// URL. Returns 0, or -EINVAL. */
static int url_host(const char *url, char *host, size_t hostlen) {
  const char *scheme;
  char port[8];
  return link_url_split(url, &scheme, host, hostlen, port, sizeof(port));
}

static bool numeric_host(const char *host) {
  struct in_addr a4;
  struct in6_addr a6;
  return inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1;
}

bool link_url_loopback(const char *url) {
  char host[256];
  return url_host(url, host, sizeof(host)) == 0 && netaddr_is_loopback(host);
}

/* The three files and the variables that name them, in the order a message names them. */
struct tls_file {
  const char *var;
  const char *path;
};

static void tls_files(const struct vts_config *cfg, struct tls_file out[3]) {
  out[0] = (struct tls_file){"VTS_JOBS_TLS_CA", cfg->jobs_tls_ca};
  out[1] = (struct tls_file){"VTS_JOBS_TLS_CERT", cfg->jobs_tls_cert};
  out[2] = (struct tls_file){"VTS_JOBS_TLS_KEY", cfg->jobs_tls_key};
}

/*
 * The files as link_tls_keep read them, by path: a confined fetcher reads no file of the link once it runs jobs, yet
 * makes a dialer (with its TLS configuration) for each dispatcher its URL resolves to later.
 */
static struct {
  char path[3][CONFIG_STR_MAX];
  struct buf pem[3];
} kept;

static int read_kept(const char *path, struct buf *b) {
  for (int i = 0; i < 3; i++) {
    if (kept.pem[i].len == 0 || strcmp(kept.path[i], path) != 0) continue;
    buf_reset(b);
    int rv = buf_append(b, kept.pem[i].data, kept.pem[i].len);
    if (rv == 0) rv = buf_append(b, "", 1);
    if (rv == 0) b->len--;
    return rv;
  }
  return buf_read_file(b, path, VTS_MAX_TLS_FILE_BYTES);
}

/* Reads one PEM file whole into b (NUL-terminated). Returns 0, or a negative error with a message in err. */
static int read_pem(const struct tls_file *f, struct buf *b, char *err, size_t errlen) {
  if (f->path[0] == '\0') {
    snprintf(err, errlen, "%s: required with a tls+tcp:// VTS_JOBS_URL", f->var);
    return -EINVAL;
  }
  int rv = read_kept(f->path, b);
  if (rv == -EFBIG) {
    snprintf(err, errlen, "%s: %.200s is larger than %d bytes", f->var, f->path, VTS_MAX_TLS_FILE_BYTES);
    return rv;
  }
  if (rv != 0) {
    snprintf(err, errlen, "%s: cannot read %.200s: %s", f->var, f->path, strerror(-rv));
    return rv;
  }
  if (b->len == 0 || strstr(b->data, "-----BEGIN ") == NULL) {
    snprintf(err, errlen, "%s: %.200s holds no PEM block", f->var, f->path);
    return -EINVAL;
  }
  return 0;
}

/* A private key should not linger in freed memory. */
static void wipe(struct buf *b) {
  if (b->data != NULL) explicit_bzero(b->data, b->cap);
  buf_free(b);
}

/*
 * Whether the first certificate of cert (the PEM of f) carries the role of this end (server: a gateway) in its
 * extendedKeyUsage, and not the other's. The TLS library checks a peer's role only when the extension is there, and
 * nng shows no peer certificate to check it after the handshake; so a certificate without the extension, or with
 * both roles (anyExtendedKeyUsage included), is refused here, by its holder, before it can stand for either role.
 */
static int check_role(const struct tls_file *f, const struct buf *cert, bool server, char *err, size_t errlen) {
  BIO *bio = BIO_new_mem_buf(cert->data, (int)cert->len);
  X509 *x = bio != NULL ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
  BIO_free(bio);
  if (x == NULL) {
    snprintf(err, errlen, "%s: %.200s holds no certificate", f->var, f->path);
    return -EINVAL;
  }
  bool has = (X509_get_extension_flags(x) & EXFLAG_XKUSAGE) != 0;
  uint32_t usage = X509_get_extended_key_usage(x);
  X509_free(x);
  uint32_t mine = server ? XKU_SSL_SERVER : XKU_SSL_CLIENT, other = server ? XKU_SSL_CLIENT : XKU_SSL_SERVER;
  if (has && (usage & mine) != 0 && (usage & (other | XKU_ANYEKU)) == 0) return 0;
  snprintf(err, errlen,
           "%s: %.200s is not a %s certificate: its extendedKeyUsage must name %s and not %s (make it as "
           "docs/REFERENCE.md shows)",
           f->var, f->path, server ? "gateway's" : "fetcher's", server ? "serverAuth" : "clientAuth",
           server ? "clientAuth" : "serverAuth");
  return -EINVAL;
}

int link_tls_check(const struct vts_config *cfg, bool server, char *err, size_t errlen) {
  struct tls_file files[3];
  tls_files(cfg, files);
  int rv = 0;
  for (int i = 0; i < 3 && rv == 0; i++) {
    struct buf b = BUF_INIT;
    rv = read_pem(&files[i], &b, err, errlen);
    if (rv == 0 && i == 1) rv = check_role(&files[i], &b, server, err, errlen);
    wipe(&b);
  }
  return rv;
}

int link_tls_keep(const struct vts_config *cfg, char *err, size_t errlen) {
  struct tls_file files[3];
  tls_files(cfg, files);
  for (int i = 0; i < 3; i++) {
    int rv = read_pem(&files[i], &kept.pem[i], err, errlen);
    if (rv != 0) return rv;
    snprintf(kept.path[i], sizeof(kept.path[i]), "%s", files[i].path);
  }
  return 0;
}

int link_tls_config(const struct vts_config *cfg, bool server, const char *server_name, nng_tls_config **out, char *err,
                    size_t errlen) {
  struct tls_file files[3];
  tls_files(cfg, files);
  struct buf pem[3] = {BUF_INIT, BUF_INIT, BUF_INIT};
  nng_tls_config *tc = NULL;
  int rv = 0;
  for (int i = 0; i < 3 && rv == 0; i++) rv = read_pem(&files[i], &pem[i], err, errlen);
  if (rv == 0) rv = check_role(&files[1], &pem[1], server, err, errlen);
  if (rv != 0) goto done;

  const char *what = "VTS_JOBS_TLS_CA";
  int nrv = nng_tls_config_alloc(&tc, server ? NNG_TLS_MODE_SERVER : NNG_TLS_MODE_CLIENT);
  if (nrv == 0) nrv = nng_tls_config_auth_mode(tc, NNG_TLS_AUTH_MODE_REQUIRED);
  if (nrv == 0) nrv = nng_tls_config_version(tc, NNG_TLS_1_2, NNG_TLS_1_3);
  if (nrv == 0) nrv = nng_tls_config_ca_chain(tc, pem[0].data, NULL);
  if (nrv == 0) {
    what = "VTS_JOBS_TLS_CERT and VTS_JOBS_TLS_KEY";
    nrv = nng_tls_config_own_cert(tc, pem[1].data, pem[2].data, NULL);
  }
  if (nrv == 0 && server_name != NULL) {
    what = "VTS_JOBS_URL";
    nrv = nng_tls_config_server_name(tc, server_name);
  }
  if (nrv != 0) {
    snprintf(err, errlen, "%s: not usable for TLS: %s", what, nng_strerror(nrv));
    rv = -EINVAL;
    if (tc != NULL) nng_tls_config_free(tc);
    goto done;
  }
  *out = tc;

done:
  for (int i = 0; i < 3; i++) wipe(&pem[i]);
  return rv;
}

/* Drops our hold on tc after a listener or dialer took its own (nrv: how that went). */
static int hand_over(nng_tls_config *tc, int nrv, const char *to, char *err, size_t errlen) {
  nng_tls_config_free(tc);
  if (nrv == 0) return 0;
  snprintf(err, errlen, "VTS_JOBS_URL: cannot set TLS on the %s: %s", to, nng_strerror(nrv));
  return -EINVAL;
}

int link_tls_listener(const struct vts_config *cfg, nng_listener l, const char *url, char *err, size_t errlen) {
  if (!link_url_tls(url)) return 0;
  nng_tls_config *tc;
  int rv = link_tls_config(cfg, true, NULL, &tc, err, errlen);
  if (rv != 0) return rv;
  return hand_over(tc, nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, tc), "listener", err, errlen);
}

int link_tls_dialer(const struct vts_config *cfg, nng_dialer d, const char *url, const char *name, char *err,
                    size_t errlen) {
  if (!link_url_tls(url)) return 0;
  char host[256];
  if (name == NULL) {
    if (url_host(url, host, sizeof(host)) != 0) {
      snprintf(err, errlen, "VTS_JOBS_URL: invalid value \"%.64s\"", url);
      return -EINVAL;
    }
    name = host;
  }
  nng_tls_config *tc;
  int rv = link_tls_config(cfg, false, numeric_host(name) ? NULL : name, &tc, err, errlen);
  if (rv != 0) return rv;
  return hand_over(tc, nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, tc), "dialer", err, errlen);
}

/* The "auth" statistic under the tree of one listener or dialer (found by find), or -ENOENT. */
static int auth_failures(nng_stat *(*find)(nng_stat *, void *), void *which, uint64_t *out) {
  nng_stat *all;
  if (nng_stats_get(&all) != 0) return -ENOENT;
  nng_stat *mine = find(all, which);
  nng_stat *auth = mine != NULL ? nng_stat_find(mine, "auth") : NULL;
  int rv = -ENOENT;
  if (auth != NULL) {
    *out = nng_stat_value(auth);
    rv = 0;
  }
  nng_stats_free(all);
  return rv;
}

static nng_stat *find_listener(nng_stat *all, void *which) {
  return nng_stat_find_listener(all, *(nng_listener *)which);
}

static nng_stat *find_dialer(nng_stat *all, void *which) { return nng_stat_find_dialer(all, *(nng_dialer *)which); }

int link_listener_handshake_failures(nng_listener l, uint64_t *out) { return auth_failures(find_listener, &l, out); }

int link_dialer_handshake_failures(nng_dialer d, uint64_t *out) { return auth_failures(find_dialer, &d, out); }

static void handshakes_line(struct link_handshakes *h, const char *url) {
  char failed[24], suppressed[24];
  snprintf(failed, sizeof(failed), "%llu", (unsigned long long)h->failed);
  snprintf(suppressed, sizeof(suppressed), "%llu", (unsigned long long)(h->untold - 1));
  log_msg(LOG_WARN, "jobs link handshake failed: a certificate was refused by one end, or TLS failed", "url", url,
          "=failed", failed, "=suppressed", suppressed, NULL);
  h->untold = 0;
}

void link_handshakes_note(struct link_handshakes *h, uint64_t count, uint64_t now_ms, const char *url) {
  if (count > h->failed) {
    h->untold += count - h->failed;
    h->failed = count;
  }
  /* Failures held back by the window are told as it ends, whether more came or not. */
  if (h->untold == 0 || now_ms < h->next_line_ms) return;
  handshakes_line(h, url);
  h->next_line_ms = now_ms + VTS_LINK_HANDSHAKE_LOG_MS;
}

void link_handshakes_flush(struct link_handshakes *h, const char *url) {
  if (h->untold > 0) handshakes_line(h, url);
}

/* One watchdog per process: its settings live in static storage, so nothing is left to free (or leak) at exit. */
static struct {
  int timeout_ms;
  int status;
  const char *msg;
} teardown;

static void *teardown_watchdog(void *arg) {
  (void)arg;
  struct timespec ts = {teardown.timeout_ms / 1000, (long)(teardown.timeout_ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) continue;
  log_msg(LOG_WARN, teardown.msg, NULL);
  _exit(teardown.status);
}

void link_teardown_watchdog(int timeout_ms, int status, const char *msg) {
  teardown.timeout_ms = timeout_ms;
  teardown.status = status;
  teardown.msg = msg;
  pthread_t tid;
  if (pthread_create(&tid, NULL, teardown_watchdog, NULL) == 0) pthread_detach(tid);
}
