#include "gateway/limits/ratelimit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/metrics/metrics.h"
#include "gateway/limits/ratelimit_calc.h"
#include "gateway/limits/ratelimit_memory.h"
#include "gateway/limits/ratelimit_redis.h"

/*
 * Mapped by ratelimit_shm_init in the master and inherited by every worker it forks: the one limiter of the memory
 * provider, and the fallback of the redis provider.
 */
static struct rlmem_table *rl_table;
/* Resolved once by the master, so that no worker ever blocks on a name lookup (hiredis resolves synchronously). */
static struct redis_addr rl_redis_addr;
/* Made by the master with the table: one identity per gateway run for the fallback counts it owes Redis. */
static char rl_gateway_id[RLREDIS_GATEWAY_ID_BYTES];

struct ratelimit {
  uv_loop_t *loop;
  struct vts_config cfg; /* a copy: the caller's may go before the last pending check */
  struct rlredis *redis; /* NULL for the memory provider */
  uv_timer_t snap_timer; /* memory provider: offers a snapshot every VTS_RATELIMIT_SNAPSHOT_INTERVAL_MS */
  bool snap_timer_on;
  uv_work_t snap_work; /* the snapshot is written on the threadpool: fsync must not stall the loop */
  bool snap_busy;
  bool snap_failed_logged;
  uint64_t snap_gen;
  int snap_rv;
  int refs; /* 1 for the owner, plus the snapshot timer, a snapshot in progress and each check waiting on Redis */
  bool closing;
  struct ratelimit_stats stats;
};

/* One check waiting for Redis: what a fallback needs, copied from the key entry (which a reload may free). */
struct rl_pending {
  struct ratelimit *rl;
  rl_cb cb;
  void *arg;
  char digest[65];
  struct rl_limits lim;
  int64_t now; /* the second the check was sent at: its month names the Redis counter a unit was reserved in */
  bool spend;  /* the check reserves a unit of the month (ratelimit_check), or only reads it (the unspent one) */
};

const char *ratelimit_provider(const struct vts_config *cfg) { return cfg->redis_url[0] != '\0' ? "redis" : "memory"; }

/* mkdir -p: the state directory may be several levels below an existing one. */
static int make_dirs(const char *path) {
  char buf[PATH_MAX];
  size_t len = strlen(path);
  if (len == 0 || len >= sizeof(buf)) return -ENAMETOOLONG;
  memcpy(buf, path, len + 1);
  for (size_t i = 1; i <= len; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    char saved = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, 0700) != 0 && errno != EEXIST) return -errno;
    buf[i] = saved;
  }
  struct stat st;
  if (stat(path, &st) != 0) return -errno;
  return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* Creating a file is the only honest test of writability (access() ignores read-only mounts and is moot as root). */
static int probe_writable(const char *dir) {
  char path[PATH_MAX];
  int n = snprintf(path, sizeof(path), "%s/.vts-write-probe.%ld", dir, (long)getpid());
  if (n < 0 || (size_t)n >= sizeof(path)) return -ENAMETOOLONG;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  close(fd);
  unlink(path);
  return 0;
}

void ratelimit_shm_free(void) {
  rlmem_destroy(rl_table);
  rl_table = NULL;
}

int ratelimit_shm_init(const struct vts_config *cfg, char *err, size_t errlen) {
  ratelimit_shm_free();
  int rv;
  struct rlmem_table *t = rlmem_create(VTS_RATELIMIT_SLOTS);
  if (t == NULL) {
    rv = -errno;
    snprintf(err, errlen, "rate limit: cannot map the shared table: %s", strerror(errno));
    return rv;
  }
  if (cfg->redis_url[0] != '\0') {
    /* Redis holds the quota; the table is only the fallback, so the state directory is not used. */
    rv = redis_conn_resolve(cfg->redis_url, &rl_redis_addr, err, errlen);
    if (rv != 0) goto fail;
    /* A new identity per run: the table, and so what a past run's fallback counted, does not survive a restart. */
    rv = util_random_hex(rl_gateway_id, (RLREDIS_GATEWAY_ID_BYTES - 1) / 2);
    if (rv != 0) {
      snprintf(err, errlen, "rate limit: no random bytes for the gateway's id: %s", strerror(-rv));
      goto fail;
    }
  } else {
    rv = make_dirs(cfg->state_dir);
    if (rv == 0) rv = probe_writable(cfg->state_dir);
    if (rv != 0) {
      snprintf(err, errlen, "VTS_STATE_DIR: %s is not a writable directory: %s", cfg->state_dir, strerror(-rv));
      goto fail;
    }
    rv = rlmem_snapshot_restore(t, cfg->state_dir, util_wall_s(), err, errlen);
    if (rv != 0) goto fail;
  }
  rl_table = t;
  return 0;

fail:
  rlmem_destroy(t);
  return rv;
}

int ratelimit_snapshot_now(const struct vts_config *cfg) {
  if (rl_table == NULL || cfg->redis_url[0] != '\0') return 0;
  return rlmem_snapshot_write(rl_table, cfg->state_dir, util_wall_s());
}

static void rl_unref(struct ratelimit *rl) {
  if (--rl->refs == 0) free(rl);
}

static void snap_timer_closed(uv_handle_t *h) { rl_unref(h->data); }

/* Runs on a threadpool thread: touches only the shared table (atomics) and the file system. */
static void snap_work(uv_work_t *w) {
  struct ratelimit *rl = w->data;
  rl->snap_rv = rlmem_snapshot_write(rl_table, rl->cfg.state_dir, util_wall_s());
}

static void snap_done(uv_work_t *w, int status) {
  struct ratelimit *rl = w->data;
  bool ok = status == 0 && rl->snap_rv == 0;
  rlmem_snapshot_end(rl_table, rl->snap_gen, ok);
  if (!ok && !rl->snap_failed_logged) {
    log_msg(LOG_ERROR, "quota snapshot failed", "path", rl->cfg.state_dir, "error",
            strerror(status != 0 ? -status : -rl->snap_rv), NULL);
  }
  rl->snap_failed_logged = !ok;
  rl->snap_busy = false;
  rl_unref(rl);
}

/*
 * Every worker offers; the table lets one process at a time write, at most once per interval and only when usage
 * changed, so no worker is special and a dead one is not missed.
 */
static void on_snap_timer(uv_timer_t *t) {
  struct ratelimit *rl = t->data;
  if (rl->snap_busy || rl->closing) return;
  if (!rlmem_snapshot_begin(rl_table, util_now_ms(), false, &rl->snap_gen)) return;
  rl->snap_busy = true;
  rl->refs++;
  if (uv_queue_work(rl->loop, &rl->snap_work, snap_work, snap_done) != 0) {
    rlmem_snapshot_end(rl_table, rl->snap_gen, false);
    rl->snap_busy = false;
    rl->refs--;
  }
}

struct ratelimit *ratelimit_new(uv_loop_t *loop, const struct vts_config *cfg) {
  if (rl_table == NULL) return NULL; /* ratelimit_shm_init did not run */
  struct ratelimit *rl = calloc(1, sizeof(*rl));
  if (rl == NULL) return NULL;
  rl->loop = loop;
  rl->cfg = *cfg;
  rl->refs = 1;
  rl->snap_work.data = rl;
  if (cfg->redis_url[0] != '\0') {
    rl->redis = rlredis_new(loop, &rl_redis_addr, rl_gateway_id);
    if (rl->redis == NULL) {
      free(rl);
      return NULL;
    }
    return rl;
  }
  uv_timer_init(loop, &rl->snap_timer);
  rl->snap_timer.data = rl;
  uv_timer_start(&rl->snap_timer, on_snap_timer, VTS_RATELIMIT_SNAPSHOT_INTERVAL_MS,
                 VTS_RATELIMIT_SNAPSHOT_INTERVAL_MS);
  /* The snapshot timer alone must not keep a draining worker's loop alive. */
  uv_unref((uv_handle_t *)&rl->snap_timer);
  rl->snap_timer_on = true;
  rl->refs++;
  return rl;
}

/*
 * A worker leaving writes what changed since the last snapshot, synchronously: the master's final
 * ratelimit_snapshot_now covers a clean shutdown, this also covers a worker stopped on its own.
 */
static void snapshot_at_exit(struct ratelimit *rl) {
  uint64_t gen;
  if (rl->snap_busy || !rlmem_snapshot_begin(rl_table, util_now_ms(), true, &gen)) return;
  int rv = rlmem_snapshot_write(rl_table, rl->cfg.state_dir, util_wall_s());
  rlmem_snapshot_end(rl_table, gen, rv == 0);
  if (rv != 0) log_msg(LOG_ERROR, "quota snapshot failed", "path", rl->cfg.state_dir, "error", strerror(-rv), NULL);
}

void ratelimit_free(struct ratelimit *rl) {
  if (rl == NULL) return;
  if (rl->snap_timer_on) snapshot_at_exit(rl);
  rl->closing = true;
  if (rl->redis != NULL) rlredis_free(rl->redis);
  rl->redis = NULL;
  if (rl->snap_timer_on) uv_close((uv_handle_t *)&rl->snap_timer, snap_timer_closed);
  rl->snap_timer_on = false;
  rl_unref(rl);
}

static void count(struct ratelimit *rl, const struct rl_decision *d) {
  switch (d->outcome) {
    case RL_ALLOW:
      rl->stats.allowed++;
      break;
    case RL_LIMITED:
      rl->stats.limited++;
      break;
    case RL_QUOTA:
      rl->stats.quota_exceeded++;
      break;
    case RL_UNAVAILABLE:
      rl->stats.unavailable++;
      break;
  }
}

/* Records where an admitted request's month unit was reserved, for ratelimit_refund. */
static void reserved(struct rl_decision *d, enum rl_store in, const char *digest, int64_t month) {
  d->reserved_in = in;
  d->reserved_month = month;
  util_copy_str(d->digest, sizeof(d->digest), digest);
}

/*
 * The shared-memory limiter: the memory provider itself, and the redis provider's fail-open fallback. spend: the
 * request may spend a unit of the month (else see rlmem_check_unspent).
 */
static void decide_memory(struct ratelimit *rl, const char *digest, const struct rl_limits *lim, int64_t now,
                          bool spend, uint32_t gateways, struct rl_decision *d) {
  int rv = !spend         ? rlmem_check_unspent(rl_table, digest, lim, now, d)
           : gateways > 1 ? rlmem_check_share(rl_table, digest, lim, now, gateways, d)
                          : rlmem_check(rl_table, digest, lim, now, d);
  if (rv == 0) {
    if (spend && d->outcome == RL_ALLOW) reserved(d, RL_STORE_MEMORY, digest, d->reserved_month);
    return;
  }
  /* No slot left for a new key: refusing is truthful ("cannot count"), admitting uncounted would not be. */
  rl->stats.table_full++;
  rlcalc_decision(d, RL_UNAVAILABLE, lim, now, 0, 0);
}

/* Redis could not answer: never a 429 for that. */
static void decide_fault(struct ratelimit *rl, const char *digest, const struct rl_limits *lim, bool spend,
                         struct rl_decision *d) {
  int64_t now = util_wall_s();
  /* Every request Redis could not decide is one store error; fail-open, it is also one fallback. */
  metrics_ratelimit_store_error(!rl->cfg.rate_limit_fail_closed);
  if (rl->cfg.rate_limit_fail_closed) {
    rlcalc_decision(d, RL_UNAVAILABLE, lim, now, 0, 0);
    return;
  }
  rl->stats.fallbacks++;
  /* Every gateway that shares the key falls back too: each admits its share of what the key had left. */
  decide_memory(rl, digest, lim, now, spend, rlredis_gateways(rl->redis), d);
  if (d->outcome == RL_UNAVAILABLE) return;
  /* What the fallback counted is owed to Redis, which adds it with the key's next answer (once: see the script). */
  rlmem_owe(rl_table, digest, d, spend);
  if (d->reserved_in != RL_STORE_NONE) d->reserved_in = RL_STORE_FALLBACK;
}

static void on_redis_result(void *arg, int status, const struct rlredis_result *res) {
  struct rl_pending *p = arg;
  struct ratelimit *rl = p->rl;
  struct rl_decision d;
  if (status == 0) {
    int64_t now = util_wall_s();
    rlcalc_decision(&d, res->outcome, &p->lim, now, res->window_used, res->quota_used);
    if (d.outcome == RL_ALLOW && p->spend) reserved(&d, RL_STORE_REDIS, p->digest, rlcalc_month_index(p->now));
    /* Keep the fallback table as far as Redis counted, so a fail-open outage continues from there. */
    rlmem_mirror(rl_table, p->digest, &p->lim, now, res->window_used, res->quota_used);
    /* Redis holds the owed counts the deciding call carried: no need to send them again. */
    if (res->owed_seq != 0) rlmem_owed_told(rl_table, p->digest, res->owed_seq);
  } else {
    decide_fault(rl, p->digest, &p->lim, p->spend, &d);
  }
  count(rl, &d);
  p->cb(p->arg, &d);
  free(p);
  rl_unref(rl);
}

/* ratelimit_check, or with spend false ratelimit_check_unspent. */
static void check(struct ratelimit *rl, const struct key_entry *key, bool spend, rl_cb cb, void *arg) {
  struct rl_limits lim;
  struct rl_decision d;
  rlcalc_limits(key, &rl->cfg, &lim);
  rl->stats.checks++;
  if (rl->redis != NULL) {
    struct rl_pending *p = malloc(sizeof(*p));
    if (p != NULL) {
      p->rl = rl;
      p->cb = cb;
      p->arg = arg;
      memcpy(p->digest, key->digest, sizeof(p->digest));
      p->lim = lim;
      p->now = util_wall_s();
      p->spend = spend;
      struct rl_owed owed;
      rlmem_owed(rl_table, key->digest, rlcalc_window_reset(p->now, lim.window_s), rlcalc_month_index(p->now), p->now,
                 &owed);
      rl->refs++;
      if (rlredis_check(rl->redis, key->digest, &lim, p->now, &owed, spend, on_redis_result, p) == 0) return;
      rl->refs--;
      free(p);
    }
    decide_fault(rl, key->digest, &lim, spend, &d);
  } else {
    decide_memory(rl, key->digest, &lim, util_wall_s(), spend, 1, &d);
  }
  count(rl, &d);
  cb(arg, &d);
}

int ratelimit_charge_month(const struct vts_config *cfg, const struct key_entry *key, int64_t *month,
                           enum rl_charge *outcome) {
  if (rl_table == NULL) return -ENODEV;
  struct rl_limits lim;
  rlcalc_limits(key, cfg, &lim);
  /* The table answers 1 (taken), 0 (used up) or a negative errno. */
  int rv = rlmem_charge_month(rl_table, key->digest, lim.quota, util_wall_s(), month);
  if (rv < 0) return rv;
  *outcome = rv > 0 ? RL_CHARGE_TAKEN : RL_CHARGE_QUOTA_USED_UP;
  return 0;
}

int ratelimit_month_counter(const struct vts_config *cfg, const struct key_entry *key, int64_t now, char *name,
                            size_t cap, int64_t *quota, int64_t *ttl_s) {
  if (cfg->redis_url[0] == '\0') return -ENODEV;
  if (cap < RLREDIS_KEY_BYTES) return -ENOSPC;
  struct rl_limits lim;
  rlcalc_limits(key, cfg, &lim);
  int64_t month = rlcalc_month_index(now);
  rlredis_month_key(name, key->digest, month);
  *quota = lim.quota;
  *ttl_s = rlredis_month_ttl(month, now);
  return 0;
}

void ratelimit_give_back(const struct key_entry *key, int64_t month) {
  if (rl_table != NULL) rlmem_refund(rl_table, key->digest, month);
}

void ratelimit_check(struct ratelimit *rl, const struct key_entry *key, rl_cb cb, void *arg) {
  check(rl, key, true, cb, arg);
}

void ratelimit_check_unspent(struct ratelimit *rl, const struct key_entry *key, rl_cb cb, void *arg) {
  check(rl, key, false, cb, arg);
}

void ratelimit_refund(struct ratelimit *rl, struct rl_decision *d) {
  enum rl_store in = d->reserved_in;
  d->reserved_in = RL_STORE_NONE;
  if (rl == NULL || in == RL_STORE_NONE) return;
  rl->stats.refunds++;
  metrics_quota_refund();
  if (in == RL_STORE_FALLBACK) {
    /* Reserved while Redis could not answer: the unit is no longer owed to Redis either. */
    rlmem_owe_refund(rl_table, d->digest, d->reserved_month);
    return;
  }
  /* With redis the table mirrors what Redis counted: it gives the unit back too, so a fallback starts right. */
  rlmem_refund(rl_table, d->digest, d->reserved_month);
  if (in == RL_STORE_REDIS && rl->redis != NULL) rlredis_refund(rl->redis, d->digest, d->reserved_month);
}

void ratelimit_stats(const struct ratelimit *rl, struct ratelimit_stats *out) {
  *out = rl->stats;
  if (rl->redis != NULL) rlredis_stats(rl->redis, out);
}
