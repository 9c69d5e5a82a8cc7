/*
 * What a backend of the rate limiter is given and fills, as the job store's backends see jobstore_backend.h and never
 * its facade: what the master makes before fork and the worker's limiter, each the first member of a backend's own
 * struct, the table of operations, and the table of backends. The facade (ratelimit.c) opens the first row the
 * configuration selects and names no backend; a backend includes this header (and the shared table's,
 * ratelimit_memory.h), never ratelimit.h, so there is no circle.
 */
#ifndef VTS_RATELIMIT_BACKEND_H
#define VTS_RATELIMIT_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/config.h"
#include "gateway/limits/ratelimit_calc.h"

/*
 * Bumped when an operation's signature or meaning changes (2: the backend's own shared state, shared_size, came).
 * Nothing reads it while every backend is built in, as with JOBSTORE_OPS_VERSION: a backend brought in from outside
 * would be refused where the facade takes its row (selected, in ratelimit.c) if its .version were another.
 */
#define RL_BACKEND_OPS_VERSION 2

struct rl_backend_ops;
struct rlmem_table; /* the shared table (ratelimit_memory.h), which every backend is handed */

/*
 * What the master makes before fork and lends to every child it forks (ratelimit_shared_new): the first member of
 * each backend's own struct of ops->shared_size bytes, filled by the facade before the backend's init fills the rest.
 */
struct ratelimit_shared {
  const struct rl_backend_ops *ops;
  struct rlmem_table *table; /* the shared table: the memory backend's counts, Redis's fallback */
};

/*
 * A worker's limiter: the first member of each backend's own struct, filled by the backend's open. The runner's
 * (ratelimit_new_months) is a bare one on a row of the facade's own, which decides no check.
 */
struct ratelimit {
  const struct rl_backend_ops *ops;
  uv_loop_t *loop;
  struct vts_config cfg;     /* a copy: the caller's may go before the last pending check */
  struct rlmem_table *table; /* the shared table the master made (its ratelimit_shared's) */
  struct ratelimit_stats stats;
};

struct rl_backend_ops {
  int version;        /* RL_BACKEND_OPS_VERSION */
  const char *name;   /* "memory", "redis": /health's provider */
  size_t shared_size; /* the size of the backend's struct that begins with struct ratelimit_shared */
  /* Whether the configuration asks for this backend; the table's last row is always selected. */
  int (*selected)(const struct vts_config *cfg);
  /*
   * Master, before fork, with s zeroed and its base (ops, the shared table) filled: what the backend prepares once for
   * every process into the table or the rest of s (a state directory and the month's snapshot, a Redis address).
   * Returns 0, or -errno with one line naming the variable in err.
   */
  int (*init)(const struct vts_config *cfg, struct ratelimit_shared *s, char *err, size_t errlen);
  /* Master, at exit: writes what must outlive the process now (NULL: nothing). Returns 0 or -errno. */
  int (*save)(const struct vts_config *cfg, const struct ratelimit_shared *s);
  /* Worker, after fork: its limiter on loop over what the master made, base fields filled. NULL on failure. */
  struct ratelimit *(*open)(uv_loop_t *loop, const struct vts_config *cfg, const struct ratelimit_shared *s);
  /* Closes connections and timers; checks still waiting are decided before it returns (see ratelimit_free). */
  void (*close)(struct ratelimit *rl);
  /*
   * Decides one check of the key with this digest under lim (spend false: the check reserves no unit of the month)
   * and calls cb exactly once, maybe before it returns, after counting the decision in rl->stats (rlcalc_count).
   */
  void (*check)(struct ratelimit *rl, const char *digest, const struct rl_limits *lim, bool spend, rl_cb cb, void *arg);
  /*
   * Gives back one unit of the key's month reserved in store `in` (never RL_STORE_NONE nor RL_STORE_TABLE, which the
   * facade gives back itself); NULL: the limiter reserves nothing outside the shared table.
   */
  void (*refund)(struct ratelimit *rl, enum rl_store in, const char *digest, int64_t month);
  /*
   * Where the key's units of month are counted outside this process, as ratelimit_month_counter says (NULL: the
   * shared table counts them). Returns 0 or -ENOSPC.
   */
  int (*month_counter)(const char *digest, int64_t month, int64_t now, char *name, size_t cap, int64_t *ttl_s);
  /* Adds the backend's own counters to out (NULL: none). */
  void (*stats)(const struct ratelimit *rl, struct ratelimit_stats *out);
};

/*
 * The backends, in the order they are tried: each is ratelimit_<name>_ops in ratelimit_<name>.c, whose .name is
 * "<name>". Redis with VTS_REDIS_URL; memory otherwise (it is always selected).
 */
#define RATELIMIT_BACKENDS(X) \
  X(redis)                    \
  X(memory)

#define RATELIMIT_BACKEND_DECLARE(name) extern const struct rl_backend_ops ratelimit_##name##_ops;
RATELIMIT_BACKENDS(RATELIMIT_BACKEND_DECLARE)
#undef RATELIMIT_BACKEND_DECLARE

#endif
