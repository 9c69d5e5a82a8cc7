/*
 * The rate limiter's facade over the backends' table (see ratelimit_backend.h): it makes what the master shares (the
 * table and what the backend prepares before fork), opens the first row of RATELIMIT_BACKENDS the configuration
 * selects, and does what every backend shares (a key's limits, the counters, a refund's bookkeeping, a batch item's
 * unit of the month); it names no backend.
 */
#include "gateway/limits/ratelimit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/util.h"
#include "gateway/limits/ratelimit_backend.h"
#include "gateway/limits/ratelimit_memory.h"
#include "gateway/metrics/metrics.h"

#define RATELIMIT_BACKEND_ROW(name) &ratelimit_##name##_ops,
static const struct rl_backend_ops *const backends[] = {RATELIMIT_BACKENDS(RATELIMIT_BACKEND_ROW)};
#undef RATELIMIT_BACKEND_ROW

/* The first backend the configuration selects; the table's last row is always selected. */
static const struct rl_backend_ops *selected(const struct vts_config *cfg) {
  size_t n = sizeof(backends) / sizeof(backends[0]);
  for (size_t i = 0; i + 1 < n; i++)
    if (backends[i]->selected(cfg)) return backends[i];
  return backends[n - 1];
}

const char *ratelimit_provider(const struct vts_config *cfg) { return selected(cfg)->name; }

void ratelimit_shared_free(struct ratelimit_shared *s) {
  if (s == NULL) return;
  rlmem_destroy(s->table);
  free(s);
}

int ratelimit_shared_new(const struct vts_config *cfg, struct ratelimit_shared **out, char *err, size_t errlen) {
  const struct rl_backend_ops *ops = selected(cfg);
  struct ratelimit_shared *s = calloc(1, ops->shared_size);
  if (s == NULL) {
    snprintf(err, errlen, "rate limit: no memory for the shared state");
    return -ENOMEM;
  }
  s->ops = ops;
  s->table = rlmem_create(VTS_RATELIMIT_SLOTS);
  if (s->table == NULL) {
    int rv = -errno;
    snprintf(err, errlen, "rate limit: cannot map the shared table: %s", strerror(errno));
    free(s);
    return rv;
  }
  int rv = ops->init != NULL ? ops->init(cfg, s, err, errlen) : 0;
  if (rv != 0) {
    ratelimit_shared_free(s);
    return rv;
  }
  *out = s;
  return 0;
}

int ratelimit_snapshot_now(const struct ratelimit_shared *s, const struct vts_config *cfg) {
  if (s->ops->save == NULL) return 0;
  return s->ops->save(cfg, s);
}

struct ratelimit *ratelimit_new(uv_loop_t *loop, const struct vts_config *cfg, const struct ratelimit_shared *s) {
  return s->ops->open(loop, cfg, s);
}

/* The runner's months: no window to check, so no answer but "unavailable". */
static void months_check(struct ratelimit *rl, const char *digest, const struct rl_limits *lim, bool spend, rl_cb cb,
                         void *arg) {
  (void)rl, (void)digest, (void)spend;
  struct rl_decision d;
  rlcalc_decision(&d, RL_UNAVAILABLE, lim, util_wall_s(), 0, 0);
  cb(arg, &d);
}

/* Nothing pending and no connection: the limiter is its only memory. */
static void months_close(struct ratelimit *rl) { free(rl); }

/*
 * The runner's limiter (ratelimit_new_months): a row of its own, in no table of backends, that only lends the shared
 * table to ratelimit_charge_month. It reserves nothing outside that table, so it has no refund of its own.
 */
static const struct rl_backend_ops months_ops = {
    .version = RL_BACKEND_OPS_VERSION,
    .name = "months",
    .close = months_close,
    .check = months_check,
};

struct ratelimit *ratelimit_new_months(const struct vts_config *cfg, const struct ratelimit_shared *s) {
  struct ratelimit *rl = calloc(1, sizeof(*rl));
  if (rl == NULL) return NULL;
  rl->ops = &months_ops;
  rl->cfg = *cfg;
  rl->table = s->table;
  return rl;
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

int ratelimit_charge_month(struct ratelimit *rl, const struct key_entry *key, struct rl_decision *unit,
                           enum rl_charge *outcome) {
  if (rl == NULL) return -ENODEV;
  struct rl_limits lim;
  rlcalc_limits(key, &rl->cfg, &lim);
  int64_t month = 0;
  int rv = rlmem_charge_month(rl->table, key->digest, lim.quota, util_wall_s(), &month, outcome);
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
  if (rl == NULL || in == RL_STORE_NONE) return;
  if (in == RL_STORE_TABLE) {
    /* Taken outside any check: no check counted it, and no counter counts its return. */
    rlmem_refund(rl->table, d->digest, d->reserved_month);
    return;
  }
  if (rl->ops->refund == NULL) return; /* a limiter that reserves nothing outside the table: nothing to give back */
  rl->stats.refunds++;
  metrics_quota_refund();
  rl->ops->refund(rl, in, d->digest, d->reserved_month);
}

void ratelimit_stats(const struct ratelimit *rl, struct ratelimit_stats *out) {
  *out = rl->stats;
  if (rl->ops->stats != NULL) rl->ops->stats(rl, out);
}
