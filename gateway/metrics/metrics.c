#include "gateway/metrics/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "proto/proto.h"

static struct metrics_shm *shm;
static struct metrics_worker *self;

static const int statuses[] = METRICS_STATUSES;
#define NSTATUS_LISTED ((int)(sizeof(statuses) / sizeof(statuses[0])))
static const double buckets_s[METRICS_NBUCKETS - 1] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                       0.1,    0.25,  0.5,    1,     2.5,  10};
static const char *const route_names[MR__COUNT] = {"/health",  "/openapi.json",    "/v1/video/transcript",
                                                   "/metrics", "/v1/video/tracks", "other"};
static const char *const upstream_names[MU__COUNT] = {
    "ok",       "no_captions", "not_available", "http_429",        "recaptcha",   "bot_check",
    "http_5xx", "timeout",     "consent",       "po_token",        "malformed",   "internal",
    "other",    "network",     "rationed",      "client_outdated", "wrong_video", "translation_throttled"};

int metrics_init(void) {
  void *p = mmap(NULL, sizeof(struct metrics_shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return -errno;
  memset(p, 0, sizeof(struct metrics_shm));
  shm = p;
  return 0;
}

struct metrics_shm *metrics_shared(void) {
  return shm;
}

void metrics_set_worker(int index) {
  self = (shm != NULL && index >= 0 && index < METRICS_MAX_WORKERS) ? &shm->workers[index] : NULL;
}

enum metrics_route metrics_route_of(const char *path, size_t len) {
  for (int r = 0; r < MR_OTHER; r++) {
    if (strlen(route_names[r]) == len && memcmp(route_names[r], path, len) == 0) return (enum metrics_route)r;
  }
  return MR_OTHER;
}

static int status_index(int status) {
  for (int i = 0; i < NSTATUS_LISTED; i++)
    if (statuses[i] == status) return i;
  return NSTATUS_LISTED;
}

void metrics_request(enum metrics_route route, int status, uint64_t dur_us) {
  if (self == NULL || route < 0 || route >= MR__COUNT) return;
  atomic_fetch_add_explicit(&self->requests[route][status_index(status)], 1, memory_order_relaxed);
  int b = 0;
  while (b < METRICS_NBUCKETS - 1 && (double)dur_us / 1e6 > buckets_s[b]) b++;
  atomic_fetch_add_explicit(&self->latency_bucket[route][b], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&self->latency_sum_us[route], dur_us, memory_order_relaxed);
}

void metrics_connections(int delta) {
  if (self) atomic_fetch_add_explicit(&self->connections_open, delta, memory_order_relaxed);
}

void metrics_ratelimit_store_error(int fell_back) {
  if (self == NULL) return;
  atomic_fetch_add_explicit(&self->ratelimit_store_errors, 1, memory_order_relaxed);
  if (fell_back) atomic_fetch_add_explicit(&self->ratelimit_fallbacks, 1, memory_order_relaxed);
}

void metrics_quota_refund(void) {
  if (self) atomic_fetch_add_explicit(&self->quota_refunds, 1, memory_order_relaxed);
}

void metrics_keys_loaded(int64_t now_s) {
  if (self) atomic_store_explicit(&self->keys_loaded_s, now_s, memory_order_relaxed);
}

void metrics_keys_reload_failed(void) {
  if (shm) atomic_fetch_add_explicit(&shm->master.keys_reload_failures, 1, memory_order_relaxed);
}

/* The oldest key file load among the workers that loaded one: how stale the keys in service may be. */
static int64_t oldest_keys_load(void) {
  int64_t oldest = 0;
  for (int w = 0; w < METRICS_MAX_WORKERS; w++) {
    int64_t t = atomic_load_explicit(&shm->workers[w].keys_loaded_s, memory_order_relaxed);
    if (t != 0 && (oldest == 0 || t < oldest)) oldest = t;
  }
  return oldest;
}

void metrics_l1_hit(void) {
  if (self) atomic_fetch_add_explicit(&self->l1_cache_hits, 1, memory_order_relaxed);
}

int metrics_upstream_kind(int outcome, int reason) {
  switch (outcome) {
    case PROTO_OK:
      return MU_OK;
    case PROTO_NO_CAPTIONS:
      return MU_NO_CAPTIONS;
    case PROTO_NOT_AVAILABLE:
      return MU_NOT_AVAILABLE;
    case PROTO_INTERNAL:
      return MU_INTERNAL;
    default:
      break;
  }
  static const struct {
    int reason, kind;
  } map[] = {{PROTO_REASON_HTTP_429, MU_HTTP_429},
             {PROTO_REASON_RECAPTCHA, MU_RECAPTCHA},
             {PROTO_REASON_BOT_CHECK, MU_BOT_CHECK},
             {PROTO_REASON_HTTP_5XX, MU_HTTP_5XX},
             {PROTO_REASON_TIMEOUT, MU_TIMEOUT},
             {PROTO_REASON_CONSENT, MU_CONSENT},
             {PROTO_REASON_PO_TOKEN, MU_PO_TOKEN},
             {PROTO_REASON_MALFORMED, MU_MALFORMED},
             {PROTO_REASON_NETWORK, MU_NETWORK},
             {PROTO_REASON_RATIONED, MU_RATIONED},
             {PROTO_REASON_CLIENT_OUTDATED, MU_CLIENT_OUTDATED},
             {PROTO_REASON_WRONG_VIDEO, MU_WRONG_VIDEO},
             {PROTO_REASON_TRANSLATION_THROTTLED, MU_TRANSLATION_THROTTLED}};
  for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
    if (map[i].reason == reason) return map[i].kind;
  return MU_OTHER;
}

/* The row of a client name: found, newly published (the dispatcher is the only writer), or the "other" row. */
static int client_row(struct metrics_attempts *a, const char *name) {
  int n = atomic_load_explicit(&a->nclients, memory_order_acquire);
  for (int i = 0; i < n; i++)
    if (strcmp(a->client_names[i], name) == 0) return i;
  /* A name becomes a label value: only the characters profile names may have (a peer could send anything). */
  size_t len = strlen(name);
  if (n == METRICS_MAX_CLIENTS || len == 0 || len >= sizeof(a->client_names[0]) ||
      strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") != len)
    return METRICS_MAX_CLIENTS;
  snprintf(a->client_names[n], sizeof(a->client_names[n]), "%s", name);
  atomic_store_explicit(&a->nclients, n + 1, memory_order_release);
  return n;
}

static void count_attempt(_Atomic uint64_t *row, uint8_t result) {
  atomic_fetch_add_explicit(&row[MA_ATTEMPTS], 1, memory_order_relaxed);
  if (result == PROTO_ATTEMPT_BLOCKED) atomic_fetch_add_explicit(&row[MA_BLOCKS], 1, memory_order_relaxed);
  if (result == PROTO_ATTEMPT_OK) atomic_fetch_add_explicit(&row[MA_SUCCESSES], 1, memory_order_relaxed);
}

void metrics_upstream(const struct proto_result *res) {
  if (shm == NULL) return;
  struct metrics_dispatcher *d = &shm->dispatcher;
  atomic_fetch_add_explicit(&d->upstream[metrics_upstream_kind(res->outcome, res->reason)], 1, memory_order_relaxed);
  for (uint8_t i = 0; i < res->nattempts && i < PROTO_MAX_ATTEMPTS; i++) {
    const struct proto_attempt *at = &res->attempts[i];
    if (at->proxy < METRICS_MAX_PROXIES) count_attempt(d->attempts.proxy[at->proxy], at->result);
    count_attempt(d->attempts.client[client_row(&d->attempts, at->client)], at->result);
  }
}

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

static uint64_t sum_workers(size_t offset) {
  uint64_t total = 0;
  for (int w = 0; w < METRICS_MAX_WORKERS; w++) {
    const char *base = (const char *)&shm->workers[w];
    total += atomic_load_explicit((_Atomic uint64_t *)(uintptr_t)(base + offset), memory_order_relaxed);
  }
  return total;
}

static int family(struct buf *out, const char *name, const char *type, const char *help) {
  return buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static int render_http(struct buf *out) {
  int rv = family(out, "vts_http_requests_total", "counter", "HTTP requests answered, by route and status.");
  for (int r = 0; rv == 0 && r < MR__COUNT; r++) {
    for (int s = 0; rv == 0 && s <= NSTATUS_LISTED; s++) {
      uint64_t n = sum_workers(offsetof(struct metrics_worker, requests) +
                               ((size_t)r * METRICS_NSTATUS + (size_t)s) * sizeof(_Atomic uint64_t));
      if (n == 0) continue;
      char code[8];
      if (s < NSTATUS_LISTED)
        snprintf(code, sizeof(code), "%d", statuses[s]);
      else
        memcpy(code, "other", 6);
      rv = buf_printf(out, "vts_http_requests_total{route=\"%s\",status=\"%s\"} %llu\n", route_names[r], code,
                      (unsigned long long)n);
    }
  }
  if (rv == 0)
    rv = family(out, "vts_http_request_duration_seconds", "histogram", "Time from request parsed to response queued.");
  for (int r = 0; rv == 0 && r < MR__COUNT; r++) {
    uint64_t cum = 0;
    for (int b = 0; rv == 0 && b < METRICS_NBUCKETS; b++) {
      cum += sum_workers(offsetof(struct metrics_worker, latency_bucket) +
                         ((size_t)r * METRICS_NBUCKETS + (size_t)b) * sizeof(_Atomic uint64_t));
      if (b < METRICS_NBUCKETS - 1)
        rv = buf_printf(out, "vts_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n", route_names[r],
                        buckets_s[b], (unsigned long long)cum);
      else
        rv = buf_printf(out, "vts_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
                        route_names[r], (unsigned long long)cum);
    }
    uint64_t sum_us =
        sum_workers(offsetof(struct metrics_worker, latency_sum_us) + (size_t)r * sizeof(_Atomic uint64_t));
    if (rv == 0)
      rv = buf_printf(out,
                      "vts_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n"
                      "vts_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
                      route_names[r], (double)sum_us / 1e6, route_names[r], (unsigned long long)cum);
  }
  return rv;
}

/*
 * Player attempts by proxy and by client. A proxy is named by its position in VTS_UPSTREAM_PROXY ("0" for none),
 * never by its URL, which may hold credentials. Only rows that saw an attempt are listed.
 */
static int render_attempts(struct buf *out, const struct metrics_attempts *a) {
  static const char *const what[MA__COUNT] = {"attempts", "blocks", "successes"};
  static const char *const help[MA__COUNT] = {
      "Player attempts",
      "Player attempts met by a block (429, recaptcha, bot check, 403 on captions)",
      "Player attempts that returned the transcript",
  };
  int rv = 0;
  int nclients = atomic_load_explicit(&a->nclients, memory_order_acquire);
  for (int w = 0; rv == 0 && w < MA__COUNT; w++) {
    char name[64], text[160];
    snprintf(name, sizeof(name), "vts_upstream_proxy_%s_total", what[w]);
    snprintf(text, sizeof(text), "%s, by proxy (its 1-based position in VTS_UPSTREAM_PROXY, 0 for none).", help[w]);
    rv = family(out, name, "counter", text);
    for (int p = 0; rv == 0 && p < METRICS_MAX_PROXIES; p++) {
      if (LOAD(a->proxy[p][MA_ATTEMPTS]) == 0) continue;
      rv = buf_printf(out, "%s{proxy=\"%d\"} %llu\n", name, p, (unsigned long long)LOAD(a->proxy[p][w]));
    }
    snprintf(name, sizeof(name), "vts_upstream_client_%s_total", what[w]);
    snprintf(text, sizeof(text), "%s, by client profile.", help[w]);
    if (rv == 0) rv = family(out, name, "counter", text);
    for (int c = 0; rv == 0 && c <= METRICS_MAX_CLIENTS; c++) {
      if ((c < METRICS_MAX_CLIENTS && c >= nclients) || LOAD(a->client[c][MA_ATTEMPTS]) == 0) continue;
      rv = buf_printf(out, "%s{client=\"%s\"} %llu\n", name, c < METRICS_MAX_CLIENTS ? a->client_names[c] : "other",
                      (unsigned long long)LOAD(a->client[c][w]));
    }
  }
  return rv;
}

/* A metric family with one unlabelled sample. */
struct scalar {
  const char *name, *type, *help;
  long long value;
};

int metrics_render(struct buf *out) {
  if (shm == NULL) return 0;
  const struct metrics_dispatcher *d = &shm->dispatcher;
  int64_t conns = 0;
  for (int w = 0; w < METRICS_MAX_WORKERS; w++) conns += LOAD(shm->workers[w].connections_open);
  const struct scalar scalars[] = {
      {"vts_http_connections_open", "gauge", "Client connections open.", (long long)conns},
      {"vts_cache_hits_total", "counter", "Transcript cache hits (dispatcher cache).", (long long)LOAD(d->cache_hits)},
      {"vts_cache_l1_hits_total", "counter", "Transcript cache hits in a worker's own cache.",
       (long long)sum_workers(offsetof(struct metrics_worker, l1_cache_hits))},
      {"vts_cache_misses_total", "counter", "Transcript cache misses.", (long long)LOAD(d->cache_misses)},
      {"vts_cache_bytes", "gauge", "Bytes held by the dispatcher cache.", (long long)LOAD(d->cache_bytes)},
      {"vts_cache_entries", "gauge", "Entries in the dispatcher cache.", (long long)LOAD(d->cache_entries)},
      {"vts_coalesced_requests_total", "counter", "Requests that joined a job already running.",
       (long long)LOAD(d->coalesced)},
      {"vts_jobs_queued", "gauge", "Jobs waiting for an idle fetcher.", (long long)LOAD(d->jobs_queued)},
      {"vts_jobs_in_flight", "gauge", "Jobs held by fetchers.", (long long)LOAD(d->jobs_in_flight)},
      {"vts_speech_jobs_in_flight", "gauge", "Speech jobs held by fetchers (part of vts_jobs_in_flight).",
       (long long)LOAD(d->speech_in_flight)},
      {"vts_fetchers_connected", "gauge", "Fetcher processes connected to the dispatcher.",
       (long long)LOAD(d->fetchers_connected)},
      {"vts_fetchers_idle", "gauge", "Connected fetchers waiting for a job.", (long long)LOAD(d->fetchers_idle)},
      {"vts_fetchers_lost_total", "counter", "Fetcher connections that dropped while holding a job.",
       (long long)LOAD(d->fetchers_lost_with_job)},
      {"vts_job_deadline_expired_total", "counter", "Jobs failed at their deadline.",
       (long long)LOAD(d->job_deadline_expired)},
      {"vts_dispatch_jobs_declined_total", "counter",
       "Jobs a busy fetcher gave back unrun; each went first in line for another fetcher.",
       (long long)LOAD(d->jobs_declined)},
      {"vts_dispatch_results_refused_total", "counter",
       "Fetcher results refused because their body was not what the job asked for (the job failed, nothing cached).",
       (long long)LOAD(d->results_refused)},
      {"vts_dispatch_fetchers_refused_total", "counter",
       "Fetcher connections closed at once because VTS_JOBS_MAX_FETCHERS were connected.",
       (long long)LOAD(d->fetchers_refused)},
      {"vts_dispatch_rejected_full_total", "counter", "Requests refused because the dispatcher's job table was full.",
       (long long)LOAD(d->rejected_full)},
      {"vts_dispatch_protocol_errors_total", "counter", "Malformed or out-of-order messages on the jobs link.",
       (long long)LOAD(d->protocol_errors)},
      {"vts_dispatch_redis_hits_total", "counter", "Jobs answered from the transcript cache in Redis.",
       (long long)LOAD(d->redis_hits)},
      {"vts_dispatch_claims_won_total", "counter", "Jobs this gateway fetched for every gateway (claim won in Redis).",
       (long long)LOAD(d->claims_won)},
      {"vts_dispatch_claims_waited_total", "counter", "Jobs that waited on another gateway's claim.",
       (long long)LOAD(d->claims_waited)},
      {"vts_dispatch_claim_takeovers_total", "counter",
       "Jobs fetched here because the gateway holding the claim went away without a result.",
       (long long)LOAD(d->claim_takeovers)},
      {"vts_jobs_waiting", "gauge", "Jobs asking Redis or waiting on another gateway's claim.",
       (long long)LOAD(d->jobs_waiting)},
      {"vts_ratelimit_store_errors_total", "counter", "Rate-limit store (Redis) errors and timeouts.",
       (long long)sum_workers(offsetof(struct metrics_worker, ratelimit_store_errors))},
      {"vts_ratelimit_fallbacks_total", "counter",
       "Requests limited in memory because the store was unavailable (fail-open).",
       (long long)sum_workers(offsetof(struct metrics_worker, ratelimit_fallbacks))},
      {"vts_ratelimit_quota_refunds_total", "counter",
       "Monthly quota units given back because the answer was not a 200 with a transcript.",
       (long long)sum_workers(offsetof(struct metrics_worker, quota_refunds))},
      {"vts_keys_reload_failures_total", "counter",
       "Key file loads that failed, keeping the keys in service (counted by every process that tried).",
       (long long)LOAD(shm->master.keys_reload_failures)},
      {"vts_keys_loaded_timestamp_seconds", "gauge", "Unix time of the oldest key file load among the workers.",
       (long long)oldest_keys_load()},
      {"vts_worker_restarts_total", "counter", "HTTP workers restarted by the master.",
       (long long)LOAD(shm->master.worker_restarts)},
      {"vts_dispatcher_restarts_total", "counter", "Dispatcher restarts by the master.",
       (long long)LOAD(shm->master.dispatcher_restarts)},
  };
  int rv = render_http(out);
  for (size_t i = 0; rv == 0 && i < sizeof(scalars) / sizeof(scalars[0]); i++) {
    rv = family(out, scalars[i].name, scalars[i].type, scalars[i].help);
    if (rv == 0) rv = buf_printf(out, "%s %lld\n", scalars[i].name, scalars[i].value);
  }
  if (rv == 0) rv = family(out, "vts_jobs_total", "counter", "Jobs started, by kind.");
  if (rv == 0)
    rv = buf_printf(out, "vts_jobs_total{kind=\"captions\"} %llu\nvts_jobs_total{kind=\"speech\"} %llu\n",
                    (unsigned long long)LOAD(d->jobs_total[PROTO_KIND_CAPTIONS]),
                    (unsigned long long)LOAD(d->jobs_total[PROTO_KIND_SPEECH]));
  if (rv == 0) rv = family(out, "vts_upstream_outcomes_total", "counter", "Fetcher job outcomes, by kind.");
  for (int i = 0; rv == 0 && i < MU__COUNT; i++)
    rv = buf_printf(out, "vts_upstream_outcomes_total{kind=\"%s\"} %llu\n", upstream_names[i],
                    (unsigned long long)LOAD(d->upstream[i]));
  if (rv == 0) rv = render_attempts(out, &d->attempts);
  return rv;
}
