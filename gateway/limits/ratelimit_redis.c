#include "gateway/limits/ratelimit_redis.h"

#include <errno.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"

#define SCRIPT_ARGC 10 /* EVALSHA sha numkeys key key arg arg arg arg arg */

/*
 * Window and month in one atomic step. KEYS[1] counts the window, KEYS[2] the month; both carry the key's hash tag,
 * so they live in one Cluster slot. ARGV: limit, window TTL, quota, month TTL (seconds), and 1 when the request
 * counts in the window only (RL_CHECK_WINDOW_ONLY: the month is read, never checked nor counted), else 0. The quota is
 * checked first and nothing is counted unless both admit (see ratelimit.h). Each counter expires on its own once its
 * period is over, so Redis holds only live windows and months. Returns {code, window count, month count}: code 0
 * admitted, 1 window full, 2 month exhausted.
 */
static const char script[] =
    "local w = tonumber(redis.call('GET', KEYS[1]) or '0')\n"
    "local q = tonumber(redis.call('GET', KEYS[2]) or '0')\n"
    "if q >= tonumber(ARGV[3]) and ARGV[5] ~= '1' then return {2, w, q} end\n"
    "if w >= tonumber(ARGV[1]) then return {1, w, q} end\n"
    "w = redis.call('INCR', KEYS[1])\n"
    "if w == 1 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end\n"
    "if ARGV[5] == '1' then return {0, w, q} end\n"
    "q = redis.call('INCR', KEYS[2])\n"
    "if q == 1 then redis.call('EXPIRE', KEYS[2], ARGV[4]) end\n"
    "return {0, w, q}\n";

struct rlredis {
  uv_loop_t *loop;
  struct redis_addr addr;
  redisAsyncContext *ac; /* NULL while disconnected */
  bool ready;            /* the script is loaded on this connection */
  bool stalled;          /* a command timed out and no reply has come since */
  bool closing;
  bool down_logged;      /* one warning per outage, not one per reconnect attempt */
  uv_timer_t conn_timer; /* disconnected: reconnect backoff; connecting: ready deadline; stalled: stall deadline */
  uint64_t backoff_ms;
  /*
   * Every check waiting for its reply, oldest first. All share one command timeout, so this is also the order of
   * their deadlines: one timer, armed for the oldest, serves them all (a timer per check cost as much as the check).
   */
  struct rlreq *oldest, *newest;
  uv_timer_t deadline_timer;
  int refs; /* the two timers and every live request: the struct is freed with the last */
  char sha[41];
  uint64_t timeouts, errors, noscript, connects;
};

/*
 * One check in flight, pipelined with the others on the connection: hiredis queues every command issued during a
 * loop turn and writes them together, and matches the replies in order. Freed once hiredis has handed back its
 * callback.
 */
struct rlreq {
  struct rlredis *r;
  rlredis_cb cb;
  void *arg;
  struct rlreq *older, *newer; /* in the deadline list while undecided */
  uint64_t deadline_ms;        /* on the loop's clock */
  bool decided;                /* cb called: a reply coming later is dropped */
  bool in_redis;               /* hiredis holds a callback with this request */
  bool tried_eval;             /* NOSCRIPT was answered once already */
  char keys[2][96];
  char nums[5][24];
};

static void conn_start(struct rlredis *r);
static void on_reply(redisAsyncContext *c, void *reply, void *privdata);

static void rlredis_unref(struct rlredis *r) {
  if (--r->refs == 0) free(r);
}

static void req_release(struct rlreq *q) {
  if (q->in_redis) return;
  struct rlredis *r = q->r;
  free(q);
  rlredis_unref(r);
}

/* Answers q, once: takes it off the deadline list, then calls back (q stays valid until hiredis lets go of it). */
static void req_decide(struct rlreq *q, int status, const struct rlredis_result *res) {
  if (q->decided) return;
  q->decided = true;
  struct rlredis *r = q->r;
  if (q->older != NULL)
    q->older->newer = q->newer;
  else
    r->oldest = q->newer;
  if (q->newer != NULL)
    q->newer->older = q->older;
  else
    r->newest = q->older;
  q->older = q->newer = NULL;
  q->cb(q->arg, status, res);
}

static void log_down(struct rlredis *r, const char *why) {
  if (r->down_logged) return;
  r->down_logged = true;
  log_msg(LOG_WARN, "redis unavailable", "error", why, NULL);
}

static void on_reconnect_timer(uv_timer_t *t) { conn_start(t->data); }

static void schedule_reconnect(struct rlredis *r) {
  if (r->closing) return;
  uv_timer_start(&r->conn_timer, on_reconnect_timer, r->backoff_ms, 0);
  r->backoff_ms = r->backoff_ms * 2 < VTS_REDIS_RECONNECT_MAX_MS ? r->backoff_ms * 2 : VTS_REDIS_RECONNECT_MAX_MS;
}

/* Frees the connection now; its pending requests are called back with a NULL reply (a fault) before it returns. */
static void conn_drop(struct rlredis *r) {
  redisAsyncContext *ac = r->ac;
  r->ac = NULL;
  r->ready = false;
  r->stalled = false;
  /* Clearing r->ac first tells on_disconnect this is our doing, not an outage to redial. */
  if (ac != NULL) redisAsyncFree(ac);
}

/* Any reply proves the connection is alive: end a stall. */
static void conn_alive(struct rlredis *r) {
  if (!r->stalled) return;
  r->stalled = false;
  /* Not ready yet: the timer is the ready deadline, which still holds. */
  if (r->ready) uv_timer_stop(&r->conn_timer);
}

/* The stall or ready deadline passed: the connection is of no use. */
static void on_deadline_timer(uv_timer_t *t) {
  struct rlredis *r = t->data;
  if (r->ac == NULL || (r->ready && !r->stalled)) return;
  log_down(r, r->ready ? "no reply (frozen or unreachable server)" : "connection not ready in time");
  conn_drop(r);
  schedule_reconnect(r);
}

static void conn_stalled(struct rlredis *r) {
  if (r->stalled || r->ac == NULL || r->closing) return;
  r->stalled = true;
  /* While connecting, the shorter ready deadline already runs. */
  if (r->ready) uv_timer_start(&r->conn_timer, on_deadline_timer, VTS_REDIS_STALL_MS, 0);
}

static void on_setup_reply(redisAsyncContext *c, void *reply, void *privdata) {
  struct rlredis *r = privdata;
  redisReply *rep = reply;
  if (rep == NULL) return; /* the connection went; its disconnect handling redials */
  conn_alive(r);
  if (rep->type == REDIS_REPLY_ERROR) {
    log_down(r, rep->str);
    if (c == r->ac) {
      /* A wrong database or a refused script makes the connection useless: drop it (hiredis frees it after this
       * callback returns) and try again later. */
      r->ac = NULL;
      r->ready = false;
      r->stalled = false;
      redisAsyncFree(c);
      schedule_reconnect(r);
    }
    return;
  }
  if (rep->type == REDIS_REPLY_STRING) {
    /* SCRIPT LOAD answered: the connection is ready. */
    r->ready = true;
    if (!r->stalled) uv_timer_stop(&r->conn_timer);
    r->connects++;
    r->backoff_ms = VTS_REDIS_RECONNECT_MIN_MS;
    if (r->down_logged) log_msg(LOG_INFO, "redis connected", NULL);
    r->down_logged = false;
  }
}

static void on_connect(const redisAsyncContext *c, int status) {
  struct rlredis *r = c->data;
  if (status == REDIS_OK || c != r->ac) return;
  /* hiredis frees the context after this returns, calling back its pending commands with NULL. */
  r->ac = NULL;
  r->ready = false;
  r->stalled = false;
  log_down(r, c->errstr);
  schedule_reconnect(r);
}

static void on_disconnect(const redisAsyncContext *c, int status) {
  (void)status;
  struct rlredis *r = c->data;
  if (c != r->ac) return;
  r->ac = NULL;
  r->ready = false;
  r->stalled = false;
  uv_timer_stop(&r->conn_timer);
  log_down(r, c->errstr[0] != '\0' ? c->errstr : "connection closed");
  schedule_reconnect(r);
}

static void conn_start(struct rlredis *r) {
  char err[256];
  redisAsyncContext *ac =
      redis_conn_open_async(r->loop, &r->addr, r, on_connect, on_disconnect, on_setup_reply, r, err, sizeof(err));
  if (ac == NULL) {
    log_down(r, err);
    schedule_reconnect(r);
    return;
  }
  r->ac = ac;
  r->ready = false;
  r->stalled = false;
  uv_timer_start(&r->conn_timer, on_deadline_timer, VTS_REDIS_CONNECT_TIMEOUT_MS, 0);
  /* Queued behind the connection's own preparation and ahead of any check issued meanwhile, so the very first
   * EVALSHA already finds the script. */
  redisAsyncCommand(ac, on_setup_reply, r, "SCRIPT LOAD %s", script);
}

static int req_send(struct rlreq *q, redisAsyncContext *ac, bool eval) {
  const char *argv[SCRIPT_ARGC] = {eval ? "EVAL" : "EVALSHA",
                                   eval ? script : q->r->sha,
                                   "2",
                                   q->keys[0],
                                   q->keys[1],
                                   q->nums[0],
                                   q->nums[1],
                                   q->nums[2],
                                   q->nums[3],
                                   q->nums[4]};
  return redisAsyncCommandArgv(ac, on_reply, q, SCRIPT_ARGC, argv, NULL) == REDIS_OK ? 0 : -EIO;
}

static int parse_result(const redisReply *rep, struct rlredis_result *out) {
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 3) return -EPROTO;
  for (size_t i = 0; i < 3; i++) {
    if (rep->element[i]->type != REDIS_REPLY_INTEGER) return -EPROTO;
  }
  static const enum rl_outcome codes[] = {RL_ALLOW, RL_LIMITED, RL_QUOTA};
  long long code = rep->element[0]->integer;
  if (code < 0 || code > 2) return -EPROTO;
  out->outcome = codes[code];
  out->window_used = rep->element[1]->integer;
  out->quota_used = rep->element[2]->integer;
  return 0;
}

static void on_reply(redisAsyncContext *c, void *reply, void *privdata) {
  struct rlreq *q = privdata;
  struct rlredis *r = q->r;
  redisReply *rep = reply;
  q->in_redis = false;
  if (rep != NULL) conn_alive(r);
  if (!q->decided) {
    struct rlredis_result res;
    if (rep == NULL) {
      r->errors++;
      req_decide(q, -ENOTCONN, NULL);
    } else if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOSCRIPT", 8) == 0 && !q->tried_eval) {
      /* The server lost its script cache (a restart, SCRIPT FLUSH): send the script itself, within the same
       * deadline. EVAL caches it again for the next EVALSHA. */
      r->noscript++;
      q->tried_eval = true;
      if (req_send(q, c, true) == 0) {
        q->in_redis = true;
        return;
      }
      r->errors++;
      req_decide(q, -EIO, NULL);
    } else if (parse_result(rep, &res) == 0) {
      req_decide(q, 0, &res);
    } else {
      r->errors++;
      req_decide(q, -EPROTO, NULL);
    }
  }
  req_release(q);
}

/* The oldest check's deadline: every check past its own is decided as a timeout, then the timer waits for the next. */
static void on_deadline(uv_timer_t *t) {
  struct rlredis *r = t->data;
  uint64_t now = uv_now(r->loop);
  while (r->oldest != NULL && r->oldest->deadline_ms <= now) {
    r->timeouts++;
    conn_stalled(r);
    req_decide(r->oldest, -ETIMEDOUT, NULL);
  }
  if (r->oldest != NULL) uv_timer_start(&r->deadline_timer, on_deadline, r->oldest->deadline_ms - now, 0);
}

int rlredis_check(struct rlredis *r, const char *digest, const struct rl_limits *lim, int64_t now, rlredis_cb cb,
                  void *arg) {
  if (r->closing) return -ECANCELED;
  if (r->ac == NULL) return -ENOTCONN;
  if (r->stalled) return -ETIMEDOUT;
  struct rlreq *q = calloc(1, sizeof(*q));
  if (q == NULL) return -ENOMEM;
  q->r = r;
  q->cb = cb;
  q->arg = arg;
  int64_t month = rlcalc_month_index(now);
  /* The hash tag is the first 64 bits of the key's digest: never the key, never its name. */
  snprintf(q->keys[0], sizeof(q->keys[0]), "vts:rl:{%.16s}:w:%lld:%lld", digest, (long long)lim->window_s,
           (long long)rlcalc_window_index(now, lim->window_s));
  snprintf(q->keys[1], sizeof(q->keys[1]), "vts:rl:{%.16s}:q:%lld", digest, (long long)rlcalc_month_yyyymm(month));
  snprintf(q->nums[0], sizeof(q->nums[0]), "%lld", (long long)lim->rate);
  /* The window counter is created during its window, so its length plus a second outlives the window. */
  snprintf(q->nums[1], sizeof(q->nums[1]), "%lld", (long long)(lim->window_s + 1));
  snprintf(q->nums[2], sizeof(q->nums[2]), "%lld", (long long)lim->quota);
  snprintf(q->nums[3], sizeof(q->nums[3]), "%lld",
           (long long)(rlcalc_month_start(month + 1) - now + VTS_REDIS_QUOTA_TTL_MARGIN_S));
  snprintf(q->nums[4], sizeof(q->nums[4]), "%d", lim->window_only ? 1 : 0);

  r->refs++;
  if (req_send(q, r->ac, false) != 0) {
    r->errors++;
    req_release(q); /* the caller answers this one itself */
    return -EIO;
  }
  q->in_redis = true;
  /* The loop's cached clock may be stale after a long callback: the 50 ms count from now. */
  uv_update_time(r->loop);
  q->deadline_ms = uv_now(r->loop) + VTS_REDIS_COMMAND_TIMEOUT_MS;
  q->older = r->newest;
  if (r->newest != NULL)
    r->newest->newer = q;
  else
    r->oldest = q;
  r->newest = q;
  /* An armed timer waits for an older check, whose deadline comes first; it re-arms for the rest. */
  if (!uv_is_active((uv_handle_t *)&r->deadline_timer))
    uv_timer_start(&r->deadline_timer, on_deadline, VTS_REDIS_COMMAND_TIMEOUT_MS, 0);
  return 0;
}

static void timer_closed(uv_handle_t *h) { rlredis_unref(h->data); }

struct rlredis *rlredis_new(uv_loop_t *loop, const struct redis_addr *addr) {
  struct rlredis *r = calloc(1, sizeof(*r));
  if (r == NULL) return NULL;
  r->loop = loop;
  r->addr = *addr;
  r->backoff_ms = VTS_REDIS_RECONNECT_MIN_MS;
  r->refs = 1;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;
  if (EVP_Digest(script, strlen(script), md, &mdlen, EVP_sha1(), NULL) != 1 || mdlen != 20) {
    free(r);
    return NULL;
  }
  for (unsigned int i = 0; i < mdlen; i++) snprintf(r->sha + 2 * i, 3, "%02x", md[i]);
  uv_timer_init(loop, &r->conn_timer);
  r->conn_timer.data = r;
  uv_timer_init(loop, &r->deadline_timer);
  r->deadline_timer.data = r;
  r->refs++;
  conn_start(r);
  return r;
}

void rlredis_free(struct rlredis *r) {
  if (r == NULL) return;
  r->closing = true;
  conn_drop(r);
  uv_close((uv_handle_t *)&r->conn_timer, timer_closed);
  uv_close((uv_handle_t *)&r->deadline_timer, timer_closed);
}

void rlredis_stats(const struct rlredis *r, struct ratelimit_stats *out) {
  out->redis_timeouts += r->timeouts;
  out->redis_errors += r->errors;
  out->redis_noscript += r->noscript;
  out->redis_connects += r->connects;
}
