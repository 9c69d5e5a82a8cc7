#include "fetcher/egress/upstream.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "fetcher/egress/transport.h"

/* The platform's own hosts. Anything else is refused, whatever a reply or a redirect says. */
#define PLATFORM_HOST "www.youtube.com"
#define CONSENT_HOST "consent.youtube.com"

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

int upstream_health_share(void) {
  void *p = mmap(NULL, sizeof(struct upstream_health), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return -errno;
  memset(p, 0, sizeof(struct upstream_health));
  shared_health = p;
  return 0;
}

struct upstream {
  struct transport t;
  char origin[CONFIG_STR_MAX]; /* scheme://host[:port] of VTS_UPSTREAM_URL */
  char host[256];              /* its host, lowercase, without brackets */
  int loopback;                /* the upstream is a loopback host: every platform host maps onto it */
  char *proxies[VTS_UPSTREAM_MAX_PROXIES];
  size_t nproxies;
  struct upstream_health *health; /* shared by a fetcher's children, or this process's own */
  int own_health;
  uint64_t rest_base_ms; /* VTS_PROXY_REST_MS */
  uint32_t tried;        /* proxies used by the current job, one bit each */
  int egress;            /* index of the current job's proxy, -1 for none */
  const char *job_proxy; /* the proxy of the current job, NULL for none */
  uint64_t deadline_ms;
  const char *request_id;
};

static int parse_proxies(struct upstream *u, const char *list, char *err, size_t errlen) {
  const char *p = list;
  while (*p != '\0') {
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    if (n == 0 || u->nproxies == VTS_UPSTREAM_MAX_PROXIES) {
      snprintf(err, errlen, "VTS_UPSTREAM_PROXY: invalid value: expected 1 to %d comma-separated proxy URLs",
               VTS_UPSTREAM_MAX_PROXIES);
      return -EINVAL;
    }
    char *proxy = strndup(p, n);
    if (proxy == NULL) return -ENOMEM;
    u->proxies[u->nproxies++] = proxy;
    if (strncmp(proxy, "http://", 7) != 0 && strncmp(proxy, "https://", 8) != 0 &&
        strncmp(proxy, "socks5://", 9) != 0 && strncmp(proxy, "socks5h://", 10) != 0) {
      /* The value may hold credentials: name the variable, not the value. */
      snprintf(err, errlen,
               "VTS_UPSTREAM_PROXY: invalid value: entry %zu is not an http://, https://, socks5:// "
               "or socks5h:// URL",
               u->nproxies);
      return -EINVAL;
    }
    p = comma ? comma + 1 : p + n;
    if (comma != NULL && *p == '\0') {
      snprintf(err, errlen, "VTS_UPSTREAM_PROXY: invalid value: empty entry");
      return -EINVAL;
    }
  }
  return 0;
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
  u->loopback = transport_host_is_loopback(u->host);
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
  rv = parse_proxies(u, cfg->upstream_proxy, err, errlen);
  if (rv != 0) goto fail;

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

int upstream_new(const struct vts_config *cfg, struct upstream **out, char *err, size_t errlen) {
  return upstream_new_handle(cfg, out, 1, err, errlen);
}

void upstream_free(struct upstream *u) {
  if (u == NULL) return;
  transport_cleanup(&u->t);
  for (size_t i = 0; i < u->nproxies; i++) free(u->proxies[i]);
  if (u->own_health) free(u->health);
  free(u);
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
  use_egress(u, u->nproxies > 0 ? choose_egress(u) : -1);
}

int upstream_next_egress(struct upstream *u) {
  int i = u->nproxies > 1 ? choose_egress(u) : -1;
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

/* The health of the current job's egress: a proxy's, or the direct route's. */
static struct proxy_health *job_health(struct upstream *u) {
  return u->egress >= 0 ? &u->health->p[u->egress] : &u->health->direct;
}

/* The next length of a rest that doubles in a row: the base first, then twice the last, up to the cap. */
static uint64_t next_rest(const struct upstream *u, uint64_t last) {
  uint64_t cap = u->rest_base_ms * VTS_PROXY_REST_MAX_FACTOR;
  return last == 0 ? u->rest_base_ms : (last * 2 > cap ? cap : last * 2);
}

void upstream_egress_report(struct upstream *u, int blocked) {
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

void upstream_translation_report(struct upstream *u, int throttled) {
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
  const char *origin;
  if (strcasecmp(host, u->host) == 0 || strcasecmp(host, PLATFORM_HOST) == 0) {
    origin = u->origin;
  } else if (strcasecmp(host, CONSENT_HOST) == 0) {
    /* A test upstream serves the consent host too; in production the consent host is itself. */
    origin = u->loopback ? u->origin : "https://" CONSENT_HOST;
  } else {
    goto fail;
  }
  rv = buf_puts(out, origin);
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

const char *upstream_strerror(int err) {
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
    default:
      return "transport";
  }
}

/* The platform's host policy for transport_fetch: every URL mapped onto the configured origin. */
static int platform_policy(const void *ctx, const char *url, struct buf *out) {
  return upstream_map_url(ctx, url, out);
}

int upstream_fetch(struct upstream *u, const struct upstream_request *req, struct upstream_response *resp) {
  buf_reset(&resp->body);
  struct transport_req tr = {
      .url = req->url,
      .post = req->method == UPSTREAM_POST,
      .body = req->body,
      .body_len = req->body_len,
      .headers = req->headers,
      .user_agent = req->user_agent,
      .cookie = req->cookie,
      .accept_encoding = "gzip",
      .proxy = u->job_proxy,
      .proxy_index = upstream_job_proxy_index(u),
      .deadline_ms = u->deadline_ms,
      .max_bytes = req->max_bytes,
      .request_id = u->request_id,
  };
  return transport_fetch(&u->t, &tr, platform_policy, u, VTS_UPSTREAM_MAX_REDIRECTS, &resp->body, &resp->status,
                         &resp->reason, NULL);
}
