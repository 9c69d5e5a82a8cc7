#include "gateway/redis/redis_session.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"

void redis_backoff_init(struct redis_backoff *b, uint64_t min_ms, uint64_t max_ms) {
  b->min_ms = min_ms;
  b->max_ms = max_ms > min_ms ? max_ms : min_ms;
  b->next_ms = b->min_ms;
}

uint64_t redis_backoff_next(struct redis_backoff *b) {
  uint64_t wait = b->next_ms;
  b->next_ms = wait <= b->max_ms / 2 ? wait * 2 : b->max_ms;
  return wait;
}

void redis_backoff_reset(struct redis_backoff *b) { b->next_ms = b->min_ms; }

void redis_session_init(struct redis_session *s, const char *user, const struct redis_addr *addr, uint64_t min_ms,
                        uint64_t max_ms) {
  memset(s, 0, sizeof(*s));
  s->user = user;
  s->addr = *addr;
  redis_backoff_init(&s->backoff, min_ms, max_ms);
}

uint64_t redis_session_down(struct redis_session *s, const char *why, uint64_t now_ms) {
  if (!s->down_logged || strncmp(s->down_why, why, sizeof(s->down_why) - 1) != 0) {
    s->down_logged = true;
    /* Kept to compare with the next reason only: its start is enough. */
    snprintf(s->down_why, sizeof(s->down_why), "%.*s", (int)sizeof(s->down_why) - 1, why);
    log_msg(LOG_WARN, "redis unavailable", "user", s->user, "error", why, NULL);
  }
  uint64_t wait = redis_backoff_next(&s->backoff);
  s->retry_at_ms = now_ms + wait;
  return wait;
}

void redis_session_up(struct redis_session *s) {
  redis_backoff_reset(&s->backoff);
  s->retry_at_ms = 0;
  if (s->down_logged) log_msg(LOG_INFO, "redis available again", "user", s->user, NULL);
  s->down_logged = false;
}

bool redis_session_may_try(const struct redis_session *s, uint64_t now_ms) { return now_ms >= s->retry_at_ms; }

redisAsyncContext *redis_session_open_async(struct redis_session *s, uv_loop_t *loop, void *data,
                                            redisConnectCallback *on_connect, redisDisconnectCallback *on_disconnect,
                                            redisCallbackFn *setup_cb, void *setup_arg, char *err, size_t errlen) {
  return redis_conn_open_async(loop, &s->addr, data, on_connect, on_disconnect, setup_cb, setup_arg, err, errlen);
}

redisContext *redis_session_open_sync(struct redis_session *s, int timeout_ms, char *err, size_t errlen) {
  return redis_conn_open_sync(&s->addr, timeout_ms, err, errlen);
}
