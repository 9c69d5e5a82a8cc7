#include "gateway/metrics/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "proto/proto.h"

static struct metrics_shm *shm;
static struct metrics_worker *self;
static const struct metrics_http_family *http_family;
static const struct metrics_counter_family *counter_family;

static const double buckets_s[METRICS_NBUCKETS - 1] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                       0.1,    0.25,  0.5,    1,     2.5,  10};
/*
 * From a turn that costs a request or two up to one that stalls every connection of the process for 100 ms, with a
 * bound at 1, 2, 5, 10, 20 and 50 ms so that a stall can be told against a bound of 10 ms (expiry) or 50 ms (a store
 * call's timeout).
 */
static const double turn_buckets_s[METRICS_TURN_NBUCKETS - 1] = {0.0001, 0.00025, 0.0005, 0.001, 0.002,
                                                                 0.005,  0.01,    0.02,   0.05,  0.1};
static const char *const upstream_names[MU__COUNT] = {
#define UPSTREAM_NAME_(id, label) [MU_##id] = label,
    METRICS_UPSTREAM_KINDS(UPSTREAM_NAME_)
#undef UPSTREAM_NAME_
};

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

void metrics_register_http(const struct metrics_http_family *f) { http_family = f; }

void metrics_register_counters(const struct metrics_counter_family *f) { counter_family = f; }

int64_t metrics_fetchers_connected(void) {
  if (shm == NULL) return -1;
  if (counter_family == NULL) return 0;
  return (int64_t)atomic_load_explicit(&shm->dispatcher.counters[counter_family->fetchers_connected],
                                       memory_order_relaxed);
}

void metrics_set_worker(int index) {
  self = (shm != NULL && index >= 0 && index < METRICS_MAX_WORKERS) ? &shm->workers[index] : NULL;
}

void metrics_request(int route, int status, uint64_t dur_us) {
  if (self == NULL || http_family == NULL || route < 0 || route >= http_family->nroutes) return;
  atomic_fetch_add_explicit(&self->requests[route][http_family->status_index(status)], 1, memory_order_relaxed);
  int b = 0;
  while (b < METRICS_NBUCKETS - 1 && (double)dur_us / 1e6 > buckets_s[b]) b++;
  atomic_fetch_add_explicit(&self->latency_bucket[route][b], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&self->latency_sum_us[route], dur_us, memory_order_relaxed);
}

void metrics_connections(int delta) {
  if (self) atomic_fetch_add_explicit(&self->connections_open, delta, memory_order_relaxed);
}

void metrics_worker_gone(int index) {
  if (shm == NULL || index < 0 || index >= METRICS_MAX_WORKERS) return;
  /* Its counters stay (they count what happened); a gauge of a dead process would drift forever. */
  atomic_store_explicit(&shm->workers[index].connections_open, 0, memory_order_relaxed);
  atomic_store_explicit(&shm->workers[index].keys_loaded_s, 0, memory_order_relaxed);
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

void metrics_l1_wait(void) {
  if (self) atomic_fetch_add_explicit(&self->l1_cache_waits, 1, memory_order_relaxed);
}

void metrics_l1_refresh(void) {
  if (self) atomic_fetch_add_explicit(&self->l1_cache_refreshes, 1, memory_order_relaxed);
}

void metrics_l1_drop(void) {
  if (self) atomic_fetch_add_explicit(&self->l1_cache_drops, 1, memory_order_relaxed);
}

static void count_turn(_Atomic uint64_t *bucket, _Atomic uint64_t *sum_us, uint64_t us) {
  int b = 0;
  while (b < METRICS_TURN_NBUCKETS - 1 && (double)us / 1e6 > turn_buckets_s[b]) b++;
  atomic_fetch_add_explicit(&bucket[b], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(sum_us, us, memory_order_relaxed);
}

bool metrics_turn_end(struct metrics_turn *t, uv_loop_t *loop, uint64_t *busy_ns) {
  uint64_t now = uv_hrtime(), idle = uv_metrics_idle_time(loop);
  bool first = t->end_ns == 0;
  if (!first) {
    uint64_t took = now - t->end_ns, waited = idle - t->idle_ns;
    *busy_ns = took > waited ? took - waited : 0;
  }
  t->end_ns = now;
  t->idle_ns = idle;
  return !first;
}

bool metrics_turn_unresolved(uint64_t busy_us) { return !((double)busy_us / 1e6 > turn_buckets_s[0]); }

void metrics_loop_turn(uint64_t busy_us) {
  if (self != NULL) count_turn(self->loop_turn_bucket, &self->loop_turn_sum_us, busy_us);
}

void metrics_dispatcher_loop_turn(uint64_t busy_us, uint64_t own_us) {
  if (shm == NULL) return;
  struct metrics_dispatcher *d = &shm->dispatcher;
  count_turn(d->loop_turn_bucket, &d->loop_turn_sum_us, busy_us);
  count_turn(d->loop_turn_own_bucket, &d->loop_turn_own_sum_us, own_us);
}

/* The outcome's kind, from its row in proto.h; BY_REASON: the kind of the reason's row. */
#define MU_BY_REASON (-1)

/* The kind a job's outcome (enum proto_outcome) and reason (enum proto_reason) are counted under. */
static int upstream_kind(int outcome, int reason) {
  int kind;
  switch (outcome) {
#define OUTCOME_KIND_(id, value, status, k) \
  case PROTO_##id:                          \
    kind = MU_##k;                          \
    break;
    PROTO_OUTCOMES(OUTCOME_KIND_)
#undef OUTCOME_KIND_
    default:
      kind = MU_BY_REASON;
      break;
  }
  /* A video that cannot be played is counted apart by the case its reply named, when it named one. */
  if (kind == MU_NOT_AVAILABLE && reason != PROTO_REASON_NOT_PLAYABLE && proto_reason_gone((uint8_t)reason))
    kind = MU_BY_REASON;
  if (kind != MU_BY_REASON) return kind;
  switch (reason) {
#define REASON_KIND_(id, name, k) \
  case PROTO_REASON_##id:         \
    return MU_##k;
    PROTO_REASONS(REASON_KIND_)
#undef REASON_KIND_
    default:
      return MU_OTHER;
  }
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

static void count_egress(struct metrics_egress *m, const struct proto_result *res) {
  for (uint8_t i = 0; i < res->negress && i < PROTO_MAX_EGRESS; i++) {
    const struct proto_egress *e = &res->egress[i];
    if (e->egress >= METRICS_MAX_PROXIES) continue;
    atomic_store_explicit(&m->left[e->egress], e->left, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->waits[e->egress], e->waits, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->declines[e->egress], e->declines, memory_order_relaxed);
    atomic_store_explicit(&m->reported[e->egress], 1, memory_order_release);
  }
}

void metrics_upstream(const struct proto_result *res) {
  if (shm == NULL) return;
  struct metrics_dispatcher *d = &shm->dispatcher;
  atomic_fetch_add_explicit(&d->upstream[upstream_kind(res->outcome, res->reason)], 1, memory_order_relaxed);
  for (uint8_t i = 0; i < res->nattempts && i < PROTO_MAX_ATTEMPTS; i++) {
    const struct proto_attempt *at = &res->attempts[i];
    if (at->proxy < METRICS_MAX_PROXIES) count_attempt(d->attempts.proxy[at->proxy], at->result);
    count_attempt(d->attempts.client[client_row(&d->attempts, at->client)], at->result);
  }
  count_egress(&d->egress, res);
  atomic_fetch_add_explicit(&d->pot_failures, res->pot_failures, memory_order_relaxed);
  atomic_store_explicit(&d->sandbox, METRICS_SANDBOX_REPORTED | res->sandbox, memory_order_relaxed);
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
  const struct metrics_http_family *f = http_family;
  int nroutes = f != NULL ? f->nroutes : 0;
  int rv = family(out, "vts_http_requests_total", "counter", "HTTP requests answered, by route and status.");
  for (int r = 0; rv == 0 && r < nroutes; r++) {
    for (int s = 0; rv == 0 && s <= f->nstatus; s++) {
      uint64_t n = sum_workers(offsetof(struct metrics_worker, requests) +
                               ((size_t)r * (METRICS_MAX_STATUSES + 1) + (size_t)s) * sizeof(_Atomic uint64_t));
      if (n == 0) continue;
      char code[8];
      if (s < f->nstatus)
        snprintf(code, sizeof(code), "%d", f->status_code(s));
      else
        memcpy(code, "other", 6);
      rv = buf_printf(out, "vts_http_requests_total{route=\"%s\",status=\"%s\"} %llu\n", f->route_label(r), code,
                      (unsigned long long)n);
    }
  }
  if (rv == 0)
    rv = family(out, "vts_http_request_duration_seconds", "histogram", "Time from request parsed to response queued.");
  for (int r = 0; rv == 0 && r < nroutes; r++) {
    uint64_t cum = 0;
    for (int b = 0; rv == 0 && b < METRICS_NBUCKETS; b++) {
      cum += sum_workers(offsetof(struct metrics_worker, latency_bucket) +
                         ((size_t)r * METRICS_NBUCKETS + (size_t)b) * sizeof(_Atomic uint64_t));
      if (b < METRICS_NBUCKETS - 1)
        rv = buf_printf(out, "vts_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
                        f->route_label(r), buckets_s[b], (unsigned long long)cum);
      else
        rv = buf_printf(out, "vts_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
                        f->route_label(r), (unsigned long long)cum);
    }
    uint64_t sum_us =
        sum_workers(offsetof(struct metrics_worker, latency_sum_us) + (size_t)r * sizeof(_Atomic uint64_t));
    if (rv == 0)
      rv = buf_printf(out,
                      "vts_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n"
                      "vts_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
                      f->route_label(r), (double)sum_us / 1e6, f->route_label(r), (unsigned long long)cum);
  }
  return rv;
}

/* A loop-turn histogram: bucket[b] turns in bucket b (not cumulative), their sum in microseconds. */
static int render_turns(struct buf *out, const char *name, const char *help, const uint64_t *bucket, uint64_t sum_us) {
  int rv = family(out, name, "histogram", help);
  uint64_t cum = 0;
  for (int b = 0; rv == 0 && b < METRICS_TURN_NBUCKETS; b++) {
    cum += bucket[b];
    if (b < METRICS_TURN_NBUCKETS - 1)
      rv = buf_printf(out, "%s_bucket{le=\"%g\"} %llu\n", name, turn_buckets_s[b], (unsigned long long)cum);
    else
      rv = buf_printf(out, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
  }
  if (rv == 0)
    rv = buf_printf(out, "%s_sum %.6f\n%s_count %llu\n", name, (double)sum_us / 1e6, name, (unsigned long long)cum);
  return rv;
}

/*
 * The loop turns of the workers (summed) and of the dispatcher: the long ones are stalls every connection of the
 * process waited through. The dispatcher's are also counted less the time its thread waited for a core, which a busy
 * machine lengthens, so that a long turn of its own (its work, or a call it blocked in) can be told from the load.
 */
static int render_loop_turns(struct buf *out) {
  const struct metrics_dispatcher *d = &shm->dispatcher;
  uint64_t workers[METRICS_TURN_NBUCKETS], wall[METRICS_TURN_NBUCKETS], own[METRICS_TURN_NBUCKETS];
  for (int b = 0; b < METRICS_TURN_NBUCKETS; b++) {
    workers[b] = sum_workers(offsetof(struct metrics_worker, loop_turn_bucket) + (size_t)b * sizeof(_Atomic uint64_t));
    wall[b] = LOAD(d->loop_turn_bucket[b]);
    own[b] = LOAD(d->loop_turn_own_bucket[b]);
  }
  int rv = render_turns(out, "vts_worker_loop_turn_seconds",
                        "Time a worker's event loop spent between two waits for events (its callbacks, timers, and any "
                        "time it was kept off the CPU meanwhile).",
                        workers, sum_workers(offsetof(struct metrics_worker, loop_turn_sum_us)));
  if (rv == 0)
    rv = render_turns(out, "vts_dispatcher_loop_turn_seconds",
                      "Time the dispatcher's event loop spent between two waits for events (its callbacks, timers, "
                      "any call that blocked it, and any time it was kept off the CPU meanwhile).",
                      wall, LOAD(d->loop_turn_sum_us));
  if (rv == 0)
    rv = render_turns(out, "vts_dispatcher_loop_turn_own_seconds",
                      "The dispatcher's loop turns less the time its thread waited for a core (runnable, not running): "
                      "its own work and any call it blocked in, without what a busy machine's other processes took.",
                      own, LOAD(d->loop_turn_own_sum_us));
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

/*
 * The egresses' budgets, by egress (its position: 0 the direct route, n entry n of VTS_UPSTREAM_PROXY; never its URL).
 * Only egresses a fetcher reported as paced are listed.
 */
static int render_egress(struct buf *out, const struct metrics_egress *m) {
  static const struct {
    const char *name, *type, *help;
  } fam[3] = {
      {"vts_egress_budget_left", "gauge",
       "Platform requests the egress's budget holds, as its fetcher last reported, by egress (0 direct, n proxy n)."},
      {"vts_egress_budget_waits_total", "counter", "Platform requests that waited for the egress's budget."},
      {"vts_egress_budget_declines_total", "counter",
       "Jobs a fetcher gave back to a dispatcher because the egress's budget was spent."},
  };
  int rv = 0;
  for (int f = 0; rv == 0 && f < 3; f++) {
    rv = family(out, fam[f].name, fam[f].type, fam[f].help);
    for (int e = 0; rv == 0 && e < METRICS_MAX_PROXIES; e++) {
      if (!atomic_load_explicit(&m->reported[e], memory_order_acquire)) continue;
      long long v = f == 0   ? (long long)LOAD(m->left[e])
                    : f == 1 ? (long long)LOAD(m->waits[e])
                             : (long long)LOAD(m->declines[e]);
      rv = buf_printf(out, "%s{egress=\"%d\"} %lld\n", fam[f].name, e, v);
    }
  }
  return rv;
}

/* The sandbox layers of the fetcher that sent the latest result (none listed before a first result). */
static int render_sandbox(struct buf *out, uint32_t sandbox) {
  static const char *const names[] = {
#define SANDBOX_NAME_(id, name) [PROTO_SANDBOX_##id] = name,
      PROTO_SANDBOX_LAYERS(SANDBOX_NAME_)
#undef SANDBOX_NAME_
  };
  int rv = family(out, "vts_fetcher_sandbox_layer", "gauge",
                  "1 when the layer of the sandbox (VTS_SANDBOX) was in force in the fetcher that sent the latest "
                  "result, by layer.");
  for (int i = 0; rv == 0 && (sandbox & METRICS_SANDBOX_REPORTED) && i < PROTO_SANDBOX__COUNT; i++)
    rv = buf_printf(out, "vts_fetcher_sandbox_layer{layer=\"%s\"} %u\n", names[i], (sandbox >> i) & 1u);
  return rv;
}

/* A metric family with one unlabelled sample. */
struct scalar {
  const char *name, *type, *help;
  long long value;
};

/* The dispatcher's counters with a metric name, each family's HELP and TYPE once, before its first row. */
static int render_dispatcher(struct buf *out, const struct metrics_dispatcher *d) {
  int rv = 0;
  const char *family_name = NULL;
  int n = counter_family != NULL ? counter_family->ncounters : 0;
  for (int i = 0; rv == 0 && i < n; i++) {
    const struct metrics_counter *row = &counter_family->rows[i];
    const char *name = row->metric;
    if (name == NULL) continue;
    if (family_name == NULL || strcmp(family_name, name) != 0) rv = family(out, name, row->type, row->help);
    family_name = name;
    const char *labels = row->labels;
    if (rv == 0)
      rv = buf_printf(out, "%s%s%s%s %llu\n", name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "",
                      (unsigned long long)LOAD(d->counters[i]));
  }
  return rv;
}

int metrics_render(struct buf *out) {
  if (shm == NULL) return 0;
  const struct metrics_dispatcher *d = &shm->dispatcher;
  int64_t conns = 0;
  for (int w = 0; w < METRICS_MAX_WORKERS; w++) conns += LOAD(shm->workers[w].connections_open);
  const struct scalar scalars[] = {
      {"vts_http_connections_open", "gauge", "Client connections open.", (long long)conns},
      {"vts_cache_l1_hits_total", "counter", "Transcript cache hits in a worker's own cache.",
       (long long)sum_workers(offsetof(struct metrics_worker, l1_cache_hits))},
      {"vts_cache_l1_waits_total", "counter",
       "Transcript requests a worker answered from the same answer it was already waiting for from the dispatcher.",
       (long long)sum_workers(offsetof(struct metrics_worker, l1_cache_waits))},
      {"vts_cache_l1_refreshes_total", "counter",
       "Refreshes a worker sent the dispatcher of a hot transcript in its own cache before that copy ended.",
       (long long)sum_workers(offsetof(struct metrics_worker, l1_cache_refreshes))},
      {"vts_cache_l1_drops_total", "counter",
       "Copies a worker dropped from its own cache because their refresh found the dispatcher no longer held them "
       "or failed.",
       (long long)sum_workers(offsetof(struct metrics_worker, l1_cache_drops))},
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
      {"vts_pot_provider_failures_total", "counter",
       "Requests to the PO-token provider (VTS_POT_PROVIDER_URL) that gave no token: down, slow, refusing or out of "
       "shape.",
       (long long)LOAD(d->pot_failures)},
  };
  int rv = render_http(out);
  if (rv == 0) rv = render_loop_turns(out);
  for (size_t i = 0; rv == 0 && i < sizeof(scalars) / sizeof(scalars[0]); i++) {
    rv = family(out, scalars[i].name, scalars[i].type, scalars[i].help);
    if (rv == 0) rv = buf_printf(out, "%s %lld\n", scalars[i].name, scalars[i].value);
  }
  if (rv == 0) rv = render_dispatcher(out, d);
  if (rv == 0) rv = family(out, "vts_upstream_outcomes_total", "counter", "Fetcher job outcomes, by kind.");
  for (int i = 0; rv == 0 && i < MU__COUNT; i++)
    rv = buf_printf(out, "vts_upstream_outcomes_total{kind=\"%s\"} %llu\n", upstream_names[i],
                    (unsigned long long)LOAD(d->upstream[i]));
  if (rv == 0) rv = render_attempts(out, &d->attempts);
  if (rv == 0) rv = render_egress(out, &d->egress);
  if (rv == 0) rv = render_sandbox(out, LOAD(d->sandbox));
  return rv;
}
