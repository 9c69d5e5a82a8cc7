/*
 * The redis provider's store: one hiredis 0.14 async connection per worker on its libuv loop, one Lua script that
 * checks and counts window and month atomically. It reports what Redis said, or that it could not say; the Redis
 * backend below it in ratelimit_redis.c (ratelimit_redis_ops) turns a fault into 503 or a fallback.
 *
 * The checks of one key made in one loop turn go to Redis as one script call, sent before the loop next waits (a
 * libuv prepare handle), and are decided as the same checks one after another would be: under load a worker sends
 * one command for many requests instead of one each, and a lone request waits for nothing. Commands for different
 * keys are pipelined on the connection.
 *
 * A key busy enough that its checks gather (two or more in a call) also gets a lease: the call asks Redis to reserve
 * as many units again in the window and the month, at most a sixteenth of what is left of either (so a key near its
 * limits gets none, and is decided exactly as before). The worker admits the key's next checks from its lease at
 * once, without a round trip, and asks for the next lease when half is used. A lease is for one window and month:
 * what is left of it is given back to Redis when the window changes, when it was not used for VTS_REDIS_LEASE_IDLE_MS,
 * and when the worker closes. A lost connection's leases go back once the next connection is ready, if it reached
 * the same server process (INFO server's run_id); elsewhere they stay counted. A unit given back below the top of
 * the window's count keeps its count for the key's next check (each request of a window sees a count of its own).
 * So a key never gets more than its limits; while a worker holds unused units, another may be refused the last few of
 * them for up to VTS_REDIS_LEASE_IDLE_MS.
 *
 * hiredis 0.14 has no async timeouts, so every command has its own libuv timer (VTS_REDIS_COMMAND_TIMEOUT_MS): on
 * expiry its checks are answered as faults and the reply, if it ever comes, is dropped (the command stays
 * allocated until hiredis hands its callback back, which it always does: with the reply, or NULL when the
 * connection is freed). After one timeout the connection counts as stalled: requests are answered as faults at once
 * instead of each waiting 50 ms, until any reply arrives; a connection stalled for VTS_REDIS_STALL_MS is dropped and
 * redialled (a frozen server keeps the TCP connection open, and the libuv adapter ignores poll errors).
 * Reconnects back off from VTS_REDIS_RECONNECT_MIN_MS doubling to VTS_REDIS_RECONNECT_MAX_MS.
 */
#ifndef VTS_RATELIMIT_REDIS_H
#define VTS_RATELIMIT_REDIS_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "gateway/limits/ratelimit_calc.h"
#include "gateway/redis/redis_session.h"

/* What the script decided: outcome RL_ALLOW, RL_LIMITED or RL_QUOTA, and the counts after it. */
/* Room for one of our Redis key names. */
#define RLREDIS_KEY_BYTES 112
/* A gateway's id: 16 hex digits and a NUL. */
#define RLREDIS_GATEWAY_ID_BYTES 17

struct rlredis_result {
  enum rl_outcome outcome;
  int64_t window_used;
  int64_t quota_used;
  uint64_t owed_seq; /* the number of the owed counts the deciding call carried (0: none, or decided from a lease) */
};

/*
 * Called once per accepted rlredis_check on the loop thread: status 0 with res, or a negative errno (-ETIMEDOUT,
 * -ENOTCONN, -EPROTO, -EIO) with res NULL when Redis could not answer.
 */
typedef void (*rlredis_cb)(void *arg, int status, const struct rlredis_result *res);

struct rlredis;

/*
 * Starts connecting (commands issued meanwhile are sent once connected). gateway_id names this gateway's fallback
 * counts in Redis (see the script in ratelimit_redis.c). Returns NULL on allocation failure.
 */
struct rlredis *rlredis_new(uv_loop_t *loop, const struct redis_addr *addr, const char *gateway_id);
/*
 * Closes the connection and timers. Requests still waiting get their callback (-ENOTCONN) before it returns. The
 * memory goes when the last handle has closed: run the loop afterwards.
 */
void rlredis_free(struct rlredis *r);
/*
 * Sends one check of the key with this digest at second now, with what this gateway's fallback counted for the key
 * in the current window and month (owed), which Redis adds to its own counts. Returns 0 (cb will be called, before
 * this returns when the key's lease admits it), or a negative errno at once, without calling cb, when the store
 * cannot take it: -ENOTCONN (no connection, or none ready yet after an outage), -ETIMEDOUT (connection stalled),
 * -EIO, -ENOMEM, -ECANCELED (closing). spend false: the check only reads the month (refused when it is used up)
 * and reserves no unit of it, nor takes one from a lease; its result's quota_used is the month as it stands.
 */
int rlredis_check(struct rlredis *r, const char *digest, const struct rl_limits *lim, int64_t now,
                  const struct rl_owed *owed, bool spend, rlredis_cb cb, void *arg);
/*
 * Gives back one unit of the key's month (a month index) in Redis, without waiting for the reply. Returns 0 when
 * sent, or a negative errno (-ENOTCONN, -EIO, -ECANCELED) when it was not.
 */
int rlredis_refund(struct rlredis *r, const char *digest, int64_t month);
/*
 * The name of a key's month counter (the key's digest, a month index), the one every check and every batch item of
 * the key counts in, and the lifetime (seconds) a counter started at second now gets. Returns the name's length.
 */
size_t rlredis_month_key(char out[RLREDIS_KEY_BYTES], const char *digest, int64_t month);
int64_t rlredis_month_ttl(int64_t month, int64_t now);
/*
 * How many gateways share the keys' limits: every VTS_GATEWAY_HEARTBEAT_MS a connection announces its gateway in
 * Redis (a sorted set, "vts:gateways", of ids by the last beat; a gateway silent for VTS_GATEWAY_HEARTBEAT_TTL_MS is
 * no longer counted) and keeps the count Redis answers. While Redis cannot answer, the last count stands: the
 * fallback admits each key's share (rlmem_check_share). 1 until Redis has answered.
 */
uint32_t rlredis_gateways(const struct rlredis *r);
/* Adds this connection's counters to the redis_* fields of out. */
void rlredis_stats(const struct rlredis *r, struct ratelimit_stats *out);

#endif
