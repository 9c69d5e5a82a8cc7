/*
 * The memory provider: a fixed-capacity open-addressing table in MAP_SHARED memory, created by the master before
 * fork and shared by every worker. Each slot packs a key's window (end second and admitted count) into one 64-bit
 * word and its month (index and used count) into another; both change only by compare-and-swap, so workers never
 * lock and exactly `limit` requests pass per window. Monthly usage is snapshotted to a file and restored at start.
 * A slot whose key's window and month are both over is taken over by the next new key that probes it; when a new
 * key's probe window holds no such slot and no free one, it takes the slot whose key was decided least recently.
 */
#ifndef VTS_RATELIMIT_MEMORY_H
#define VTS_RATELIMIT_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/limits/ratelimit_calc.h"

#define RLMEM_SNAPSHOT_FILE "quota.snapshot"

struct rlmem_table;

/* Maps a zeroed table of nslots (a power of two) that children forked later share. Returns NULL with errno set. */
struct rlmem_table *rlmem_create(uint32_t nslots);
/* Unmaps t (in this process only: forked children keep their mapping). */
void rlmem_destroy(struct rlmem_table *t);
/*
 * Decides one request of the key with this SHA-256 hex digest at wall second now, into d. Counts the request in the
 * window whatever the outcome; reserves a quota unit only when admitting (d->reserved_month is then its month).
 * Returns 0, or -ENOSPC when the key is new and other processes kept taking the slots it tried (never in practice).
 */
int rlmem_check(struct rlmem_table *t, const char *digest, const struct rl_limits *lim, int64_t now,
                struct rl_decision *d);
/*
 * The same for a request that will spend no unit of the month (a revalidation answered 304): counted in the window,
 * refused as rlmem_check would refuse it (a month used up included), and admitted without reserving a unit.
 */
int rlmem_check_unspent(struct rlmem_table *t, const char *digest, const struct rl_limits *lim, int64_t now,
                        struct rl_decision *d);
/*
 * Takes one unit of the month of the key, counting nothing in the window: a batch job's item answered with a
 * transcript (the job's request counted in the window once). Returns 0 with what happened in *outcome (taken: its
 * month in *month), or -ENOSPC as rlmem_check.
 */
int rlmem_charge_month(struct rlmem_table *t, const char *digest, int64_t quota, int64_t now, int64_t *month,
                       enum rl_charge *outcome);
/*
 * The redis provider's fail-open fallback while Redis cannot answer, with gateways sharing the key (the live gateways
 * Redis last counted, at least 1): decides as rlmem_check, but admits at most this gateway's share of what the key
 * had left when this gateway's fallback began deciding it, in the window and in the month: the count then, plus
 * (limit - count then) / gateways, rounded down. The gateways together admit no more than what was left. d's limits
 * are the key's; its remaining counts are of the share. rlmem_mirror (Redis answering) ends the shared period.
 */
int rlmem_check_share(struct rlmem_table *t, const char *digest, const struct rl_limits *lim, int64_t now,
                      uint32_t gateways, struct rl_decision *d);
/* Gives back one quota unit of the key in month (a month index), unless that month is over or holds no unit. */
void rlmem_refund(struct rlmem_table *t, const char *digest, int64_t month);
/*
 * The table's decision of one check into d, for the memory backend and Redis's fail-open fallback: rlmem_check,
 * rlmem_check_unspent (spend false) or, with more than one gateway sharing the key, rlmem_check_share; an admitted
 * spending check records its unit as reserved in the table (RL_STORE_MEMORY). A key with no slot left is
 * RL_UNAVAILABLE, counted in stats->table_full: refusing is truthful ("cannot count"), admitting uncounted would not
 * be.
 */
void rlmem_decide(struct rlmem_table *t, const char *digest, const struct rl_limits *lim, int64_t now, bool spend,
                  uint32_t gateways, struct rl_decision *d, struct ratelimit_stats *stats);
/*
 * The redis provider's fail-open fallback decided d for the key: records what it counted (the request in d's
 * window, the unit reserved when d admitted and spent: a check that spends nothing of the month owes none of it) as
 * owed to Redis, apart from what Redis itself counted.
 */
void rlmem_owed_add(struct rlmem_table *t, const char *digest, const struct rl_decision *d, bool spent);
/* Gives back a unit reserved by the fallback in month: from the count and from what is owed to Redis. */
void rlmem_owed_refund(struct rlmem_table *t, const char *digest, int64_t month);
/*
 * What is owed to Redis for the key in the window ending at window_end and in month, into out (-1: nothing, also
 * when Redis already answered a call that carried these counts: see rlmem_owed_acked).
 */
void rlmem_owed_read(struct rlmem_table *t, const char *digest, int64_t window_end, int64_t month, int64_t now,
                     struct rl_owed *out);
/* Redis answered a call that carried the key's owed counts numbered seq: it holds them, or newer ones. */
void rlmem_owed_acked(struct rlmem_table *t, const char *digest, uint64_t seq);
/*
 * Raises the key's counts for the window and month of second now to at least these values. The redis provider
 * calls it with every answer so that a fallback to this table continues from what Redis counted.
 */
void rlmem_mirror(struct rlmem_table *t, const char *digest, const struct rl_limits *lim, int64_t now,
                  int64_t window_used, int64_t quota_used);

/*
 * Writes every key's usage of the month of second now to dir/quota.snapshot: a temporary file, fsync, rename, so a
 * crash leaves the old or the new snapshot, never a torn one. Returns 0 or -errno.
 */
int rlmem_snapshot_write(struct rlmem_table *t, const char *dir, int64_t now);
/*
 * Loads dir/quota.snapshot into t, keeping only the usage of the month of second now (a snapshot of a past month is
 * ignored). A missing file is no usage. Returns 0, or -errno with one line naming VTS_STATE_DIR in err.
 */
int rlmem_snapshot_restore(struct rlmem_table *t, const char *dir, int64_t now, char *err, size_t errlen);
/*
 * Claims the right to write a snapshot when one is due: usage changed since the last one, the last one started at
 * least VTS_RATELIMIT_SNAPSHOT_INTERVAL_MS ago (now_ms: monotonic, shared by all processes of the host) unless
 * at_exit is set, and no living process is writing one. On true, *gen is what the caller passes to
 * rlmem_snapshot_end.
 */
bool rlmem_snapshot_begin(struct rlmem_table *t, uint64_t now_ms, bool at_exit, uint64_t *gen);
/* Releases the claim; ok says whether the snapshot of generation gen was written. */
void rlmem_snapshot_end(struct rlmem_table *t, uint64_t gen, bool ok);

#endif
