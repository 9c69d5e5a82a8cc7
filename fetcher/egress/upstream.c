#include "fetcher/egress/upstream.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/netaddr.h"
#include "common/util.h"
#include "fetcher/egress/pace.h"
#include "fetcher/egress/transport.h"
#include "proto/proto.h"

/* The platform's own hosts. Anything else is refused, whatever a reply or a redirect says. */
#define PLATFORM_HOST "www.youtube.com"
#define CONSENT_HOST "consent.youtube.com"

/*
 * The platform's other hosts: each is itself in production and the configured origin when that is a loopback one
 * (tests), where the request then carries the host it was meant for in its Host header. The API hosts are those a
 * client profile's player call may name (upstream_api_host).
 */
static const struct {
  const char *host;
  int api;
} other_hosts[] = {
    {CONSENT_HOST, 0},
    {"youtubei.googleapis.com", 1},
    {"m.youtube.com", 1},
    {"music.youtube.com", 1},
};

/* The entry of other_hosts that host names (case aside), or -1. */
static int other_host(const char *host) {
  for (size_t i = 0; i < sizeof(other_hosts) / sizeof(other_hosts[0]); i++)
    if (strcasecmp(host, other_hosts[i].host) == 0) return (int)i;
  return -1;
}

int upstream_api_host(const char *host) {
  int i = other_host(host);
  return strcmp(host, PLATFORM_HOST) == 0 || (i >= 0 && other_hosts[i].api && strcmp(host, other_hosts[i].host) == 0);
}

/*
 * Health of one egress (a proxy, or the direct route), shared by every child of a fetcher (mapped before fork) and
 * updated with atomics: blocks in a row, and the rest a blocked egress takes. Any reply that is not a block ends the
 * row and the doubling, and a rest. Translations (tlang) rest apart: the platform throttles them far harder than
 * the rest, so a throttled translation rests the translations through that egress, not the egress.
 */
struct proxy_health {
  _Atomic uint32_t blocks_in_row;
  _Atomic uint64_t rest_until_ms; /* util_now_ms clock; 0: not resting */
  _Atomic uint64_t rest_since_ms;
  _Atomic uint64_t rest_ms;     /* length of the last rest: the next one doubles it */
  _Atomic uint64_t tl_until_ms; /* translations rest until then (util_now_ms clock); 0: not resting */
  _Atomic uint64_t tl_rest_ms;  /* length of the translations' last rest: the next one in a row doubles it */
};

struct upstream_health {
  _Atomic uint32_t next; /* where the next job starts looking, so children spread over the proxies */
  struct proxy_health p[VTS_UPSTREAM_MAX_PROXIES];
  struct proxy_health direct; /* the direct route, the egress when no proxy is configured */
};

static struct upstream_health *shared_health;

/* The direct route (0) and every proxy (1..16): the egresses a budget belongs to, by position. */
#define UPSTREAM_EGRESSES (VTS_UPSTREAM_MAX_PROXIES + 1)

/* The budgets of every egress, shared like health: one fetcher process (all its children) spends from one bucket. */
struct upstream_pace {
  struct pace_bucket bucket[UPSTREAM_EGRESSES];
};

static struct upstream_pace *shared_pace;

int upstream_health_share(void) {
  void *p = mmap(NULL, sizeof(struct upstream_health), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return -errno;
  memset(p, 0, sizeof(struct upstream_health));
  shared_health = p;
  p = mmap(NULL, sizeof(struct upstream_pace), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return -errno;
  memset(p, 0, sizeof(struct upstream_pace));
  shared_pace = p;
  return 0;
}

struct upstream {
  struct transport t;
  char origin[CONFIG_STR_MAX]; /* scheme://host[:port] of VTS_UPSTREAM_URL */
  char host[256];              /* its host, lowercase, without brackets */
  int loopback;                /* the upstream is a loopback host: every platform host maps onto it */
  char *proxies[VTS_UPSTREAM_MAX_PROXIES];
  size_t nproxies;
  const char *egress_var;         /* the variable the proxies came from, NULL for none (direct) */
  struct upstream_health *health; /* shared by a fetcher's children, or this process's own */
  int own_health;
  uint64_t rest_base_ms; /* VTS_PROXY_REST_MS */
  uint32_t tried;        /* proxies used by the current job, one bit each */
  int egress;            /* index of the current job's proxy, -1 for none */
  const char *job_proxy; /* the proxy of the current job, NULL for none */
  uint64_t deadline_ms;
  const char *request_id;
  /* Budgets (pace.h), by egress position: the rule of each, and this process's waits and declines not yet reported. */
  struct upstream_pace *pace; /* shared by a fetcher's children, or this process's own */
  int own_pace;
  struct pace_rule rule[UPSTREAM_EGRESSES];
  int rotating[UPSTREAM_EGRESSES]; /* a rotating proxy: a new connection, and a new address, for every request */
  uint32_t waits[UPSTREAM_EGRESSES];
  uint32_t declines[UPSTREAM_EGRESSES];
};

#define ROTATING_PREFIX "rotating+"

/*
 * The options after a proxy URL: ";rate=N" (requests an hour, 0 unpaced) and ";burst=N", each at most once. A
 * rotating proxy without a rate is unpaced; any other proxy takes VTS_EGRESS_RATE and VTS_EGRESS_BURST for what it
 * does not say. Returns 0, or -EINVAL with err naming the entry (never its value, which may hold credentials).
 */
static int parse_proxy_options(struct upstream *u, const char *var, size_t pos, const char *opts,
                               const struct vts_config *cfg, char *err, size_t errlen) {
  int64_t rate = u->rotating[pos] ? 0 : cfg->egress_rate, burst = cfg->egress_burst;
  int have_rate = 0, have_burst = 0;
  while (*opts == ';') {
    opts++;
    size_t n = strcspn(opts, ";");
    int is_rate = strncmp(opts, "rate=", 5) == 0, is_burst = strncmp(opts, "burst=", 6) == 0;
    size_t skip = is_rate ? 5 : 6;
    int64_t *v = is_rate ? &rate : &burst;
    int *seen = is_rate ? &have_rate : &have_burst;
    if ((!is_rate && !is_burst) || *seen || n <= skip ||
        util_parse_i64_n(opts + skip, n - skip, is_rate ? 0 : 1, is_rate ? PACE_MAX_PER_HOUR : PACE_MAX_BURST, v) !=
            0) {
      snprintf(err, errlen,
               "%s: invalid value: entry %zu: expected options ;rate=N (0 to %d requests an hour) "
               "and ;burst=N (1 to %d), each at most once",
               var, pos, PACE_MAX_PER_HOUR, PACE_MAX_BURST);
      return -EINVAL;
    }
    *seen = 1;
    opts += n;
  }
  return pace_rule_make(rate, burst, &u->rule[pos]);
}

/*
 * The proxy list of variable var. VTS_UPSTREAM_PROXY's entries (ours) may start with rotating+ and end with options;
 * a standard proxy variable's value is one plain URL, paced by VTS_EGRESS_RATE and VTS_EGRESS_BURST.
 */
static int parse_proxies(struct upstream *u, const char *var, int ours, const char *list, const struct vts_config *cfg,
                         char *err, size_t errlen) {
  const char *p = list;
  while (*p != '\0') {
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    if (n == 0 || u->nproxies == VTS_UPSTREAM_MAX_PROXIES) {
      snprintf(err, errlen, "%s: invalid value: expected 1 to %d comma-separated proxy URLs", var,
               VTS_UPSTREAM_MAX_PROXIES);
      return -EINVAL;
    }
    char *proxy = strndup(p, n);
    if (proxy == NULL) return -ENOMEM;
    u->proxies[u->nproxies++] = proxy;
    size_t pos = u->nproxies;
    if (ours && strncmp(proxy, ROTATING_PREFIX, strlen(ROTATING_PREFIX)) == 0) {
      u->rotating[pos] = 1;
      memmove(proxy, proxy + strlen(ROTATING_PREFIX), strlen(proxy + strlen(ROTATING_PREFIX)) + 1);
    }
    if (strncmp(proxy, "http://", 7) != 0 && strncmp(proxy, "https://", 8) != 0 &&
        strncmp(proxy, "socks5://", 9) != 0 && strncmp(proxy, "socks5h://", 10) != 0) {
      /* The value may hold credentials: name the variable, not the value. */
      snprintf(err, errlen, "%s: invalid value: entry %zu is not an http://, https://, socks5:// or socks5h:// URL%s",
               var, u->nproxies, ours ? " (optionally after rotating+)" : "");
      return -EINVAL;
    }
    /* What follows the URL is ours: curl is given the URL alone. */
    char *opts = ours ? strchr(proxy, ';') : NULL;
    int rv = parse_proxy_options(u, var, pos, opts ? opts : "", cfg, err, errlen);
    if (rv != 0) return rv;
    if (opts != NULL) *opts = '\0';
    p = comma ? comma + 1 : p + n;
    if (comma != NULL && *p == '\0') {
      snprintf(err, errlen, "%s: invalid value: empty entry", var);
      return -EINVAL;
    }
  }
  return 0;
}

/* Whether host is named by the NO_PROXY list (comma- or space-separated: "*", a host, a domain and its subdomains). */
static int no_proxy_names(const char *list, const char *host) {
  size_t hlen = strlen(host);
  for (const char *p = list; *p != '\0';) {
    p += strspn(p, ", \t");
    size_t n = strcspn(p, ", \t");
    const char *e = p;
    size_t elen = n;
    if (elen > 0 && e[0] == '.') {
      e++;
      elen--;
    }
    const char *colon = memchr(e, ':', elen);
    if (colon != NULL && memchr(colon + 1, ':', elen - (size_t)(colon + 1 - e)) == NULL) elen = (size_t)(colon - e);
    if (elen == 1 && e[0] == '*') return 1;
    if (elen > 0 && elen <= hlen && strncasecmp(host + hlen - elen, e, elen) == 0 &&
        (elen == hlen || host[hlen - elen - 1] == '.'))
      return 1;
    p += n;
  }
  return 0;
}

/*
 * The standard proxy variables, read as curl and most tools read them, for when VTS_UPSTREAM_PROXY is unset:
 * https_proxy or HTTPS_PROXY for an https:// platform, http_proxy for an http:// one (lowercase only, as curl does:
 * HTTP_PROXY may come from a CGI request's Proxy header), then all_proxy or ALL_PROXY; none when NO_PROXY or no_proxy
 * names the platform's host. The transport sets each request's proxy itself, so curl's own reading of them is off.
 * Returns the value (a borrowed pointer into the environment) and its variable's name in var, or NULL.
 */
static const char *standard_proxy(const char *scheme, const char *host, const char **var) {
  static const char *const https_vars[] = {"https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"};
  static const char *const http_vars[] = {"http_proxy", "all_proxy", "ALL_PROXY"};
  int https = strcmp(scheme, "https") == 0;
  const char *const *vars = https ? https_vars : http_vars;
  size_t nvars = https ? sizeof(https_vars) / sizeof(https_vars[0]) : sizeof(http_vars) / sizeof(http_vars[0]);
  const char *val = NULL;
  for (size_t i = 0; i < nvars && val == NULL; i++) {
    val = getenv(vars[i]);
    if (val != NULL && val[0] == '\0') val = NULL;
    if (val != NULL) *var = vars[i];
  }
  if (val == NULL) return NULL;
  const char *no_proxy = getenv("no_proxy");
  if (no_proxy == NULL || no_proxy[0] == '\0') no_proxy = getenv("NO_PROXY");
  if (no_proxy != NULL && no_proxy_names(no_proxy, host)) return NULL;
  return val;
}

static int upstream_new_handle(const struct vts_config *cfg, struct upstream **out, int with_curl, char *err,
                               size_t errlen) {
  struct upstream *u = calloc(1, sizeof(*u));
  if (u == NULL) return -ENOMEM;
  int rv = -EINVAL;
  char scheme[16], port[16];
  if (transport_url_parts(cfg->upstream_url, scheme, sizeof(scheme), u->host, sizeof(u->host), port, sizeof(port)) !=
      0) {
    snprintf(err, errlen, "VTS_UPSTREAM_URL: invalid value: expected an http(s) URL");
    goto fail;
  }
  u->loopback = netaddr_is_loopback(u->host);
  if (transport_scheme_allowed(scheme, u->host) != 0) {
    snprintf(err, errlen, "VTS_UPSTREAM_URL: invalid value: expected https://, or http:// on a loopback host");
    goto fail;
  }
  const char *path = strstr(cfg->upstream_url, "://") + 3;
  path += strcspn(path, "/?#");
  if (*path != '\0' && strcmp(path, "/") != 0) {
    snprintf(err, errlen, "VTS_UPSTREAM_URL: invalid value: expected an origin without a path");
    goto fail;
  }
  int is_v6 = strchr(u->host, ':') != NULL;
  snprintf(u->origin, sizeof(u->origin), "%s://%s%s%s%s%s", scheme, is_v6 ? "[" : "", u->host, is_v6 ? "]" : "",
           port[0] ? ":" : "", port);
  u->egress_var = "VTS_UPSTREAM_PROXY";
  if (cfg->upstream_proxy[0] != '\0') {
    rv = parse_proxies(u, u->egress_var, 1, cfg->upstream_proxy, cfg, err, errlen);
  } else {
    const char *std = standard_proxy(scheme, u->host, &u->egress_var);
    char with_scheme[CONFIG_STR_MAX];
    /* As curl reads these, a value without a scheme is an http:// proxy. */
    if (std != NULL && strstr(std, "://") == NULL) {
      snprintf(with_scheme, sizeof(with_scheme), "http://%s", std);
      std = with_scheme;
    }
    if (std == NULL) {
      u->egress_var = NULL;
      rv = 0;
    } else if (strchr(std, ',') != NULL) {
      snprintf(err, errlen, "%s: invalid value: expected one proxy URL", u->egress_var);
      rv = -EINVAL;
    } else {
      rv = parse_proxies(u, u->egress_var, 0, std, cfg, err, errlen);
    }
  }
  if (rv != 0) goto fail;
  if (pace_rule_make(cfg->egress_rate, cfg->egress_burst, &u->rule[0]) != 0) {
    snprintf(err, errlen, "VTS_EGRESS_RATE: invalid value: expected 0 to %d requests an hour", PACE_MAX_PER_HOUR);
    rv = -EINVAL;
    goto fail;
  }

  rv = -ENOMEM;
  u->egress = -1;
  u->rest_base_ms = (uint64_t)cfg->proxy_rest_ms;
  if (!with_curl) {
    *out = u;
    return 0;
  }
  u->health = shared_health;
  if (u->health == NULL) {
    u->health = calloc(1, sizeof(*u->health));
    if (u->health == NULL) goto fail;
    u->own_health = 1;
  }
  u->pace = shared_pace;
  if (u->pace == NULL) {
    u->pace = calloc(1, sizeof(*u->pace));
    if (u->pace == NULL) goto fail;
    u->own_pace = 1;
  }
  if (transport_init(&u->t) != 0) goto fail;
  /* The cookie engine keeps what the platform sets (a consent answer, a visitor id) for the rest of the job. */
  curl_easy_setopt(u->t.curl, CURLOPT_COOKIEFILE, "");
  *out = u;
  return 0;
fail:
  upstream_free(u);
  return rv;
}

int upstream_config_check(const struct vts_config *cfg, char *err, size_t errlen) {
  struct upstream *u = NULL;
  int rv = upstream_new_handle(cfg, &u, 0, err, errlen);
  upstream_free(u);
  return rv;
}

int upstream_egress_describe(const struct vts_config *cfg, char *out, size_t outlen) {
  struct upstream *u = NULL;
  char err[256];
  int rv = upstream_new_handle(cfg, &u, 0, err, sizeof(err));
  if (rv != 0) return rv;
  size_t used = (size_t)snprintf(out, outlen, "%s", u->nproxies == 0 ? "direct" : u->egress_var);
  for (size_t i = 0; i < u->nproxies && used < outlen; i++) {
    /* scheme://host:port only: the userinfo may hold credentials. */
    const char *p = u->proxies[i];
    const char *rest = strstr(p, "://") + 3;
    const char *at = strchr(rest, '@');
    const char *hostport = at != NULL && at < rest + strcspn(rest, "/") ? at + 1 : rest;
    used += (size_t)snprintf(out + used, outlen - used, "%s%.*s%.*s", i == 0 ? " " : ",", (int)(rest - p), p,
                             (int)strcspn(hostport, "/"), hostport);
  }
  upstream_free(u);
  return 0;
}

int upstream_new(const struct vts_config *cfg, struct upstream **out, char *err, size_t errlen) {
  return upstream_new_handle(cfg, out, 1, err, errlen);
}

void upstream_free(struct upstream *u) {
  if (u == NULL) return;
  transport_cleanup(&u->t);
  for (size_t i = 0; i < u->nproxies; i++) free(u->proxies[i]);
  if (u->own_health) free(u->health);
  if (u->own_pace) free(u->pace);
  free(u);
}

/* ---- egress budgets (pace.h) ---- */

static uint64_t now_us(void) { return util_now_ms() * 1000; }

static struct pace_bucket *bucket(struct upstream *u, int pos) { return &u->pace->bucket[pos]; }

/* Whether proxy i is resting now (then it is chosen only when every proxy rests). */
static int egress_resting(const struct upstream *u, size_t i, uint64_t now_ms) {
  return atomic_load_explicit(&u->health->p[i].rest_until_ms, memory_order_relaxed) > now_ms;
}

/*
 * Among the proxies a job has not tried and that do not rest, the one whose budget holds a unit soonest, i itself
 * when it holds one now: the health choice stands unless its budget is spent and another's is not. Returns an index.
 */
static int prefer_budget(struct upstream *u, int i) {
  if (i < 0) return i;
  uint64_t t = now_us();
  uint64_t best_wait = pace_wait_us(bucket(u, i + 1), &u->rule[i + 1], t);
  int best = i;
  for (size_t k = 0; k < u->nproxies && best_wait > 0; k++) {
    if ((u->tried & (1u << k)) || egress_resting(u, k, t / 1000)) continue;
    uint64_t w = pace_wait_us(bucket(u, (int)k + 1), &u->rule[k + 1], t);
    if (w < best_wait) {
      best_wait = w;
      best = (int)k;
    }
  }
  return best;
}

/*
 * Spends one unit of the current egress's budget before a platform request (transport_req.admit: every hop of a
 * redirect is a request). A spent budget is waited for while the unit comes before the job's deadline, counted once
 * per request; past the deadline, -EAGAIN (the log line says when the unit comes; upstream_budget_wait_ms, when the
 * first egress the job could use holds one).
 */
static int spend_budget(void *ctx) {
  struct upstream *u = ctx;
  int pos = u->egress + 1;
  int waited = 0;
  for (;;) {
    uint64_t t = now_us(), wait;
    if (pace_take(bucket(u, pos), &u->rule[pos], t, &wait) == 0) return 0;
    uint64_t wait_ms = (wait + 999) / 1000;
    int past = t / 1000 + wait_ms >= u->deadline_ms;
    char egress[16], ms[24];
    snprintf(egress, sizeof(egress), "%d", pos);
    snprintf(ms, sizeof(ms), "%llu", (unsigned long long)wait_ms);
    if (past) {
      log_msg(LOG_INFO, "egress budget spent past the deadline", "request_id", u->request_id, "=proxy", egress,
              "=wait_ms", ms, NULL);
      return -EAGAIN;
    }
    if (!waited) {
      u->waits[pos]++;
      log_msg(LOG_INFO, "waiting for the egress budget", "request_id", u->request_id, "=proxy", egress, "=wait_ms", ms,
              NULL);
    }
    waited = 1;
    /* Another child may take the unit first: then the loop waits for the next one, still within the deadline. */
    struct timespec ts = {.tv_sec = (time_t)(wait / 1000000), .tv_nsec = (long)(wait % 1000000) * 1000L};
    nanosleep(&ts, NULL);
  }
}

/* The positions a job of this process can go out through: every proxy, or the direct route when there is none. */
static void egress_span(const struct upstream *u, int *first, int *last) {
  *first = u->nproxies > 0 ? 1 : 0;
  *last = (int)u->nproxies;
}

uint64_t upstream_budget_wait_ms(struct upstream *u) {
  int first, last;
  egress_span(u, &first, &last);
  uint64_t t = now_us(), best = UINT64_MAX;
  for (int pos = first; pos <= last; pos++) {
    uint64_t w = pace_wait_us(bucket(u, pos), &u->rule[pos], t);
    if (w < best) best = w;
  }
  return (best + 999) / 1000;
}

void upstream_budget_declined(struct upstream *u) {
  int first, last;
  egress_span(u, &first, &last);
  for (int pos = first; pos <= last; pos++) u->declines[pos]++;
}

size_t upstream_budget_report(struct upstream *u, struct proto_egress *out) {
  int first, last;
  egress_span(u, &first, &last);
  uint64_t t = now_us();
  size_t n = 0;
  for (int pos = first; pos <= last; pos++) {
    if (pace_unpaced(&u->rule[pos])) continue;
    out[n++] = (struct proto_egress){.egress = (uint8_t)pos,
                                     .left = pace_left(bucket(u, pos), &u->rule[pos], t),
                                     .waits = u->waits[pos],
                                     .declines = u->declines[pos]};
    u->waits[pos] = 0;
    u->declines[pos] = 0;
  }
  return n;
}

/* Uses proxy i (or none for -1) from now on: a proxy change is a new connection and a new identity (no cookies). */
static void use_egress(struct upstream *u, int i) {
  u->egress = i;
  u->job_proxy = i >= 0 ? u->proxies[i] : NULL;
  if (i >= 0) u->tried |= 1u << i;
  curl_easy_setopt(u->t.curl, CURLOPT_COOKIELIST, "ALL");
}

/*
 * The proxy for the next attempt among those the job has not tried: the first that is not resting, in an order that
 * starts at a shared counter; when all of those rest, the one resting the longest. Returns its index, or -1.
 */
static int choose_egress(struct upstream *u) {
  uint64_t now = util_now_ms();
  uint32_t start = atomic_fetch_add_explicit(&u->health->next, 1, memory_order_relaxed);
  int best = -1;
  uint64_t best_since = UINT64_MAX;
  for (size_t k = 0; k < u->nproxies; k++) {
    size_t i = (start + k) % u->nproxies;
    if (u->tried & (1u << i)) continue;
    const struct proxy_health *h = &u->health->p[i];
    if (atomic_load_explicit(&h->rest_until_ms, memory_order_relaxed) <= now) return (int)i;
    uint64_t since = atomic_load_explicit(&h->rest_since_ms, memory_order_relaxed);
    if (since < best_since) {
      best_since = since;
      best = (int)i;
    }
  }
  return best;
}

void upstream_begin_job(struct upstream *u, uint64_t deadline_ms, const char *request_id) {
  u->deadline_ms = deadline_ms;
  u->request_id = request_id;
  u->tried = 0;
  /* A job must not see the cookies of another (a consent answer, a visitor id): each job starts clean. */
  use_egress(u, u->nproxies > 0 ? prefer_budget(u, choose_egress(u)) : -1);
}

int upstream_next_egress(struct upstream *u) {
  /* A rotating proxy's next request goes out on a new connection, from another address: the job stays with it. */
  if (u->egress >= 0 && u->rotating[u->egress + 1]) {
    use_egress(u, u->egress);
    return 0;
  }
  int i = u->nproxies > 1 ? prefer_budget(u, choose_egress(u)) : -1;
  if (i < 0) return -ENOENT;
  use_egress(u, i);
  return 0;
}

int upstream_use_egress(struct upstream *u, int index) {
  if (index < 0 || (size_t)index > u->nproxies) return -EINVAL;
  use_egress(u, index - 1);
  return 0;
}

size_t upstream_proxy_count(const struct upstream *u) { return u->nproxies; }

int upstream_has_next_egress(const struct upstream *u) {
  if (u->egress >= 0 && u->rotating[u->egress + 1]) return 1;
  for (size_t i = 0; i < u->nproxies; i++)
    if (!(u->tried & (1u << i))) return 1;
  return 0;
}

/* The health of the current job's egress: a proxy's, or the direct route's. */
static struct proxy_health *job_health(struct upstream *u) {
  return u->egress >= 0 ? &u->health->p[u->egress] : &u->health->direct;
}

/* Whether the current job's egress is a rotating proxy: many addresses behind one URL, never rested as one. */
static int job_rotating(const struct upstream *u) { return u->egress >= 0 && u->rotating[u->egress + 1]; }

/* The next length of a rest that doubles in a row: the base first, then twice the last, up to the cap. */
static uint64_t next_rest(const struct upstream *u, uint64_t last) {
  uint64_t cap = u->rest_base_ms * VTS_PROXY_REST_MAX_FACTOR;
  return last == 0 ? u->rest_base_ms : (last * 2 > cap ? cap : last * 2);
}

void upstream_egress_report(struct upstream *u, int blocked) {
  /* A block through a rotating proxy was one of its addresses, not a reason to rest them all. */
  if (job_rotating(u)) return;
  struct proxy_health *h = job_health(u);
  if (!blocked) {
    atomic_store_explicit(&h->blocks_in_row, 0, memory_order_relaxed);
    atomic_store_explicit(&h->rest_ms, 0, memory_order_relaxed);
    /* It served: whatever rest it was in is over (it was tried because every egress rested). */
    atomic_store_explicit(&h->rest_until_ms, 0, memory_order_relaxed);
    return;
  }
  uint32_t row = atomic_fetch_add_explicit(&h->blocks_in_row, 1, memory_order_relaxed) + 1;
  if (row < VTS_PROXY_BLOCKS_TO_REST) return;
  uint64_t now = util_now_ms();
  uint64_t len = next_rest(u, atomic_load_explicit(&h->rest_ms, memory_order_relaxed));
  atomic_store_explicit(&h->rest_ms, len, memory_order_relaxed);
  atomic_store_explicit(&h->rest_since_ms, now, memory_order_relaxed);
  atomic_store_explicit(&h->rest_until_ms, now + len, memory_order_relaxed);
  char proxy[16], rest[24], blocks[16];
  snprintf(proxy, sizeof(proxy), "%d", u->egress + 1);
  snprintf(rest, sizeof(rest), "%llu", (unsigned long long)len);
  snprintf(blocks, sizeof(blocks), "%u", row);
  log_msg(LOG_WARN, "proxy resting after blocks", "request_id", u->request_id, "=proxy", proxy, "=blocks_in_row",
          blocks, "=rest_ms", rest, NULL);
}

/*
 * The egresses a job may use are the proxies, or the direct route when none is configured. How long until the first
 * of them is back from its rest (of the egress, or of its translations): 0 when one is not resting.
 */
static uint64_t first_back_ms(const struct upstream *u, int translations) {
  uint64_t now = util_now_ms(), first = UINT64_MAX;
  size_t n = u->nproxies > 0 ? u->nproxies : 1;
  for (size_t i = 0; i < n; i++) {
    const struct proxy_health *h = u->nproxies > 0 ? &u->health->p[i] : &u->health->direct;
    uint64_t t = atomic_load_explicit(translations ? &h->tl_until_ms : &h->rest_until_ms, memory_order_relaxed);
    if (t <= now) return 0;
    if (t - now < first) first = t - now;
  }
  return first;
}

uint64_t upstream_rest_left_ms(const struct upstream *u) { return first_back_ms(u, 0); }

uint64_t upstream_translation_rest_left_ms(const struct upstream *u) { return first_back_ms(u, 1); }

/* As upstream_egress_report, on the translation rests: alike in shape, each its own rests and cause. */
void upstream_translation_report(struct upstream *u, int throttled) {
  /* The next translation through a rotating proxy goes out from another address: nothing to rest. */
  if (job_rotating(u)) return;
  struct proxy_health *h = job_health(u);
  if (!throttled) {
    atomic_store_explicit(&h->tl_rest_ms, 0, memory_order_relaxed);
    atomic_store_explicit(&h->tl_until_ms, 0, memory_order_relaxed);
    return;
  }
  /* One throttle rests translations at once: the platform says plainly that it will not translate for a while. */
  uint64_t len = next_rest(u, atomic_load_explicit(&h->tl_rest_ms, memory_order_relaxed));
  atomic_store_explicit(&h->tl_rest_ms, len, memory_order_relaxed);
  atomic_store_explicit(&h->tl_until_ms, util_now_ms() + len, memory_order_relaxed);
  char proxy[16], rest[24];
  snprintf(proxy, sizeof(proxy), "%d", u->egress + 1);
  snprintf(rest, sizeof(rest), "%llu", (unsigned long long)len);
  log_msg(LOG_WARN, "translations resting after a throttle", "request_id", u->request_id, "=proxy", proxy, "=rest_ms",
          rest, NULL);
}

int upstream_translation_egress(struct upstream *u) {
  if (upstream_translation_rest_left_ms(u) > 0) return -EAGAIN;
  uint64_t now = util_now_ms();
  if (atomic_load_explicit(&job_health(u)->tl_until_ms, memory_order_relaxed) <= now) return 0;
  /* Another proxy whose translations do not rest, one not resting itself first; the job has used none yet. */
  int pick = -1;
  for (size_t i = 0; i < u->nproxies; i++) {
    const struct proxy_health *h = &u->health->p[i];
    if (atomic_load_explicit(&h->tl_until_ms, memory_order_relaxed) > now) continue;
    if (pick < 0 || atomic_load_explicit(&h->rest_until_ms, memory_order_relaxed) <= now) pick = (int)i;
    if (atomic_load_explicit(&h->rest_until_ms, memory_order_relaxed) <= now) break;
  }
  if (pick < 0 || u->egress < 0) return -EAGAIN;
  u->tried &= ~(1u << u->egress);
  use_egress(u, pick);
  return 0;
}

const char *upstream_job_proxy(const struct upstream *u) { return u->job_proxy; }

int upstream_job_proxy_index(const struct upstream *u) { return u->egress + 1; }

uint64_t upstream_job_deadline(const struct upstream *u) { return u->deadline_ms; }

int upstream_map_url(const struct upstream *u, const char *url, struct buf *out) {
  CURLU *h = curl_url();
  if (h == NULL) return -ENOMEM;
  int rv = -EINVAL;
  char *scheme = NULL, *host = NULL, *path = NULL, *query = NULL;
  /* A path alone is resolved against the origin; curl parses the absolute form for us otherwise. */
  if (curl_url_set(h, CURLUPART_URL, u->origin, 0) != CURLUE_OK) goto fail;
  if (curl_url_set(h, CURLUPART_URL, url, 0) != CURLUE_OK) goto fail;
  if (curl_url_get(h, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) goto fail;
  if (curl_url_get(h, CURLUPART_HOST, &host, 0) != CURLUE_OK) goto fail;
  if (curl_url_get(h, CURLUPART_PATH, &path, 0) != CURLUE_OK) goto fail;
  if (curl_url_get(h, CURLUPART_QUERY, &query, 0) != CURLUE_OK) query = NULL;

  rv = -EPERM;
  if (strcmp(scheme, "https") != 0 && strcmp(scheme, "http") != 0) goto fail;
  int other = other_host(host);
  if (strcasecmp(host, u->host) == 0 || strcasecmp(host, PLATFORM_HOST) == 0) {
    rv = buf_puts(out, u->origin);
  } else if (other >= 0) {
    /* A test upstream serves every platform host; in production each is itself. */
    rv = u->loopback ? buf_puts(out, u->origin) : buf_printf(out, "https://%s", other_hosts[other].host);
  } else {
    goto fail;
  }
  if (rv == 0) rv = buf_puts(out, path);
  if (rv == 0 && query != NULL) rv = buf_printf(out, "?%s", query);
fail:
  curl_free(scheme);
  curl_free(host);
  curl_free(path);
  curl_free(query);
  curl_url_cleanup(h);
  return rv;
}

/* A short stable name for an error of upstream_fetch, for result details and logs ("timeout", "too_large"...). */
static const char *upstream_strerror(int err) {
  switch (err) {
    case 0:
      return "ok";
    case -ETIMEDOUT:
      return "timeout";
    case -EFBIG:
      return "too_large";
    case -EPERM:
      return "bad_redirect";
    case -ELOOP:
      return "too_many_redirects";
    case -EBADMSG:
      return "truncated";
    case -ENOMEM:
      return "no_memory";
    case -ENETUNREACH:
      return "network";
    case -EAGAIN:
      return "egress_budget";
    default:
      return "transport";
  }
}

/* The platform's host policy for transport_fetch: every URL mapped onto the configured origin. */
static int platform_policy(const void *ctx, const char *url, struct buf *out) {
  return upstream_map_url(ctx, url, out);
}

/*
 * The Host header a request to a loopback upstream carries for another platform host it was meant for (tests see
 * which host a request named), written into out; "" otherwise.
 */
static void meant_host(const struct upstream *u, const char *url, char *out, size_t outlen) {
  char scheme[16], host[256], port[16];
  out[0] = '\0';
  if (!u->loopback || transport_url_parts(url, scheme, sizeof(scheme), host, sizeof(host), port, sizeof(port)) != 0)
    return;
  int other = other_host(host);
  if (other >= 0) snprintf(out, outlen, "Host: %s", other_hosts[other].host);
}

int upstream_fetch(struct upstream *u, const struct upstream_request *req, struct upstream_response *resp) {
  buf_reset(&resp->body);
  char host_header[64];
  const char *headers[UPSTREAM_MAX_HEADERS + 2];
  size_t nh = 0;
  meant_host(u, req->url, host_header, sizeof(host_header));
  for (const char *const *h = req->headers; h != NULL && *h != NULL && nh < UPSTREAM_MAX_HEADERS; h++)
    headers[nh++] = *h;
  if (host_header[0] != '\0') headers[nh++] = host_header;
  headers[nh] = NULL;
  struct transport_req tr = {
      .url = req->url,
      .post = req->method == UPSTREAM_POST,
      .body = req->body,
      .body_len = req->body_len,
      .headers = headers,
      .user_agent = req->user_agent,
      .cookie = req->cookie,
      .accept_encoding = "gzip",
      .proxy = u->job_proxy,
      .proxy_index = upstream_job_proxy_index(u),
      .fresh_connection = u->rotating[u->egress + 1],
      .admit = spend_budget,
      .admit_ctx = u,
      .deadline_ms = u->deadline_ms,
      .max_bytes = req->max_bytes,
      .request_id = u->request_id,
  };
  uint8_t reason = PROTO_REASON_NONE;
  int rv = transport_fetch(&u->t, &tr, platform_policy, u, VTS_UPSTREAM_MAX_REDIRECTS, &resp->body, &resp->status,
                           &reason, NULL);
  uint8_t outcome = rv == 0 ? PROTO_OK : rv == -ENOMEM ? PROTO_INTERNAL : PROTO_UPSTREAM_FAILED;
  fetch_outcome_set(&resp->outcome, outcome, reason, upstream_strerror(rv));
  return rv;
}
