/*
 * The rate limiter's facade over the backends' table (see ratelimit_backend.h): it makes the shared table, opens the
 * first row of RATELIMIT_BACKENDS the configuration selects, and does what every backend shares (a key's limits, the
 * counters, a refund's bookkeeping, a batch item's unit of the month); it names no backend.
 */
#include "gateway/limits/ratelimit.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/limits.h"
#include "common/util.h"
#include "gateway/limits/ratelimit_backend.h"
#include "gateway/limits/ratelimit_memory.h"
#include "gateway/metrics/metrics.h"

#define RATELIMIT_BACKEND_ROW(name) &ratelimit_##name##_ops,
static const struct rl_backend_ops *const backends[] = {RATELIMIT_BACKENDS(RATELIMIT_BACKEND_ROW)};
#undef RATELIMIT_BACKEND_ROW

/*
 * What the master makes before fork and every process it forks inherits: the shared table (the memory backend's
 * counts, Redis's fallback) and the backend chosen for it. A worker's limiter carries both in its handle from
 * ratelimit_new on, and its checks and refunds read them there; only what runs outside any limiter reads them here
 * (the master's snapshot, a batch item's unit of the dispatcher's runner: ratelimit_charge_month and its refund).
 * File-scope because the master makes it before fork and each child inherits it in place; a handle would be handed
 * from the master to worker_main and the dispatcher's runner, and ratelimit_refund(NULL, ...) would take it (issue 30).
 */
static struct {
  struct rlmem_table *table;
  const struct rl_backend_ops *ops;
} shared;

/* The first backend the configuration selects; the table's last row is always selected. */
static const struct rl_backend_ops *selected(const struct vts_config *cfg) {
  size_t n = sizeof(backends) / sizeof(backends[0]);
  for (size_t i = 0; i + 1 < n; i++)
    if (backends[i]->selected(cfg)) return backends[i];
  return backends[n - 1];
}

const char *ratelimit_provider(const struct vts_config *cfg) { return selected(cfg)->name; }

void ratelimit_shm_free(void) {
  rlmem_destroy(shared.table);
  shared.table = NULL;
  shared.ops = NULL;
}

int ratelimit_shm_init(const struct vts_config *cfg, char *err, size_t errlen) {
  ratelimit_shm_free();
  struct rlmem_table *t = rlmem_create(VTS_RATELIMIT_SLOTS);
  if (t == NULL) {
    int rv = -errno;
    snprintf(err, errlen, "rate limit: cannot map the shared table: %s", strerror(errno));
    return rv;
  }
  const struct rl_backend_ops *ops = selected(cfg);
  int rv = ops->init != NULL ? ops->init(cfg, t, err, errlen) : 0;
  if (rv != 0) {
    rlmem_destroy(t);
    return rv;
  }
  shared.table = t;
  shared.ops = ops;
  return 0;
}

int ratelimit_snapshot_now(const struct vts_config *cfg) {
  if (shared.table == NULL || shared.ops->save == NULL) return 0;
  return shared.ops->save(cfg, shared.table);
}

struct ratelimit *ratelimit_new(uv_loop_t *loop, const struct vts_config *cfg) {
  if (shared.table == NULL) return NULL; /* ratelimit_shm_init did not run */
  return shared.ops->open(loop, cfg, shared.table);
}

void ratelimit_free(struct ratelimit *rl) {
  if (rl != NULL) rl->ops->close(rl);
}

/* ratelimit_check, or with spend false ratelimit_check_unspent. */
static void check(struct ratelimit *rl, const struct key_entry *key, bool spend, rl_cb cb, void *arg) {
  struct rl_limits lim;
  rlcalc_limits(key, &rl->cfg, &lim);
  rl->stats.checks++;
  rl->ops->check(rl, key->digest, &lim, spend, cb, arg);
}

void ratelimit_check(struct ratelimit *rl, const struct key_entry *key, rl_cb cb, void *arg) {
  check(rl, key, true, cb, arg);
}

void ratelimit_check_unspent(struct ratelimit *rl, const struct key_entry *key, rl_cb cb, void *arg) {
  check(rl, key, false, cb, arg);
}

int ratelimit_charge_month(const struct vts_config *cfg, const struct key_entry *key, struct rl_decision *unit,
                           enum rl_charge *outcome) {
  if (shared.table == NULL) return -ENODEV;
  struct rl_limits lim;
  rlcalc_limits(key, cfg, &lim);
  int64_t month = 0;
  int rv = rlmem_charge_month(shared.table, key->digest, lim.quota, util_wall_s(), &month, outcome);
  if (rv != 0) return rv;
  memset(unit, 0, sizeof(*unit));
  if (*outcome == RL_CHARGE_TAKEN) rlcalc_reserved(unit, RL_STORE_TABLE, key->digest, month);
  return 0;
}

int ratelimit_month_counter(const struct vts_config *cfg, const struct key_entry *key, int64_t now, char *name,
                            size_t cap, int64_t *quota, int64_t *ttl_s) {
  const struct rl_backend_ops *ops = selected(cfg);
  if (ops->month_counter == NULL) return -ENODEV;
  struct rl_limits lim;
  rlcalc_limits(key, cfg, &lim);
  int rv = ops->month_counter(key->digest, rlcalc_month_index(now), now, name, cap, ttl_s);
  if (rv == 0) *quota = lim.quota;
  return rv;
}

void ratelimit_refund(struct ratelimit *rl, struct rl_decision *d) {
  enum rl_store in = d->reserved_in;
  d->reserved_in = RL_STORE_NONE;
  if (in == RL_STORE_TABLE) {
    /* Taken outside any check: no limiter counted it, and none counts its return. */
    if (shared.table != NULL) rlmem_refund(shared.table, d->digest, d->reserved_month);
    return;
  }
  if (rl == NULL || in == RL_STORE_NONE) return;
  rl->stats.refunds++;
  metrics_quota_refund();
  rl->ops->refund(rl, in, d->digest, d->reserved_month);
}

void ratelimit_stats(const struct ratelimit *rl, struct ratelimit_stats *out) {
  *out = rl->stats;
  if (rl->ops->stats != NULL) rl->ops->stats(rl, out);
}
