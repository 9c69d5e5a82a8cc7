/*
 * One session with Redis per user of it (the rate limiter, the transcript cache, the job store): where Redis is,
 * the one place a connection is opened (async on a loop, or blocking for a caller that waits for each reply), the
 * one backoff policy between attempts, and the one "down" and "back" log line, both naming the user:
 *
 *   {"level":"warn","msg":"redis unavailable","user":"cache","error":"Connection refused"}
 *   {"level":"info","msg":"redis available again","user":"cache"}
 *
 * The down line is written once per outage and reason (a slow start, then a wrong password, are two reasons), not
 * once per attempt; the back line only after a down line. What a connection is used for, its readiness (a script
 * loaded, a stream group made) and its commands stay with its user, which tells the session when Redis could not be
 * used (redis_session_down) and when a connection is ready (redis_session_up).
 */
#ifndef VTS_REDIS_SESSION_H
#define VTS_REDIS_SESSION_H

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "gateway/redis/redis_conn.h"

/*
 * The backoff policy: after each failure in a row the wait doubles, from min_ms up to max_ms (min_ms == max_ms: a
 * fixed wait); a ready connection starts it again from min_ms. No clock: the caller adds the wait to its own.
 */
struct redis_backoff {
  uint64_t min_ms;
  uint64_t max_ms;
  uint64_t next_ms; /* the wait after the next failure */
};

void redis_backoff_init(struct redis_backoff *b, uint64_t min_ms, uint64_t max_ms);
/* One more failure: returns the wait before the next attempt, and doubles the one after it (up to max_ms). */
uint64_t redis_backoff_next(struct redis_backoff *b);
/* A connection is ready: the next failure waits min_ms again. */
void redis_backoff_reset(struct redis_backoff *b);

/* Room for the start of a reason, to tell a new reason from the one already logged. */
#define REDIS_SESSION_WHY_BYTES 128

struct redis_session {
  const char *user; /* "limiter", "cache", "jobs": a static string named in the log lines */
  struct redis_addr addr;
  struct redis_backoff backoff;
  uint64_t retry_at_ms; /* after a failure: no new connection before this (monotonic, util_now_ms) */
  bool down_logged;     /* a down line is written and no back line since */
  char down_why[REDIS_SESSION_WHY_BYTES];
};

/* A session of user with Redis at addr (copied), its backoff from min_ms doubling to max_ms. Connects nothing. */
void redis_session_init(struct redis_session *s, const char *user, const struct redis_addr *addr, uint64_t min_ms,
                        uint64_t max_ms);
/*
 * Redis could not be used, for why (a connect refused, a reply not there in time, a login refused): writes the down
 * line unless this outage already said this reason, and sets retry_at_ms to now_ms plus the next wait of the backoff,
 * which it returns (for a user that arms a timer instead of checking redis_session_may_try).
 */
uint64_t redis_session_down(struct redis_session *s, const char *why, uint64_t now_ms);
/* A connection is ready for its user: the back line after a down line, and the backoff starts again. */
void redis_session_up(struct redis_session *s);
/* Whether a new connection may be tried at now_ms (the wait after the last failure is over). */
bool redis_session_may_try(const struct redis_session *s, uint64_t now_ms);

/*
 * The one place a connection to Redis is opened: async on loop, as redis_conn_open_async (AUTH and SELECT queued
 * first, answered to setup_cb). Returns the context, or NULL with a short reason in err for the caller's
 * redis_session_down.
 */
redisAsyncContext *redis_session_open_async(struct redis_session *s, uv_loop_t *loop, void *data,
                                            redisConnectCallback *on_connect, redisDisconnectCallback *on_disconnect,
                                            redisCallbackFn *setup_cb, void *setup_arg, char *err, size_t errlen);
/*
 * The same, blocking: prepared (AUTH, SELECT), each connect and reply bounded by timeout_ms. The caller asks
 * redis_session_may_try first.
 */
redisContext *redis_session_open_sync(struct redis_session *s, int timeout_ms, char *err, size_t errlen);

#endif
