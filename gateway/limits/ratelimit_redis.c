/*
 * Over 800 lines: the limiter's Redis client, whose connection states (stall, ready), check script, leases and owed
 * counts share one struct and its references, and below it the Redis backend of the limiter (its row of
 * RATELIMIT_BACKENDS), whose fallback decides what that client could not.
 */
#include "gateway/limits/ratelimit_redis.h"

#include <errno.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/limits/ratelimit_backend.h"
#include "gateway/limits/ratelimit_memory.h"
#include "gateway/metrics/metrics.h"

#define SCRIPT_KEYS 5
#define SCRIPT_NUMKEYS "5" /* SCRIPT_KEYS, as EVAL reads it */
#define SCRIPT_ARGS 11
#define SCRIPT_ARGC (3 + SCRIPT_KEYS + SCRIPT_ARGS) /* EVALSHA sha numkeys KEYS... ARGV... */

/*
 * Window and month in one atomic step, for n checks of one key at once (the checks a worker gathered while the key's
 * previous call was out), decided as n checks in a row would be, and a lease of up to k more units. KEYS[1] counts
 * the window and KEYS[2] the month, every gateway's fail-open fallback counts included; KEYS[3] and KEYS[4] hold, per
 * gateway, what its fallback counted in them while Redis could not answer; KEYS[5] holds the window's counts a lease
 * gave back from below the window's top (give_back_script), which the next checks take first, lowest first, so that
 * every count of the window is one request's. All carry the key's hash tag, so they live in one Cluster slot. ARGV:
 * limit, window TTL, quota, month TTL (seconds), this gateway's id, what its fallback counted in the window and the
 * month (-1: nothing to say, 0: nothing left), n, the number of those counts (struct rl_owed), k, and spend: 1 for
 * checks that reserve a unit of the month, 0 for checks that only read it (a jobs request: counted in the window,
 * refused when the month is used up, and never a unit reserved and given back, so a reader of the month never sees a
 * request's passing unit).
 *
 * A gateway sends its fallback's whole count for the period, which the script stores under the gateway's id with its
 * number (HSET, not INCRBY) and adds to the counter as the difference from what was stored: a count sent twice, or by
 * a command that timed out but ran late, is counted once, and an older count arriving after a newer one (two workers'
 * connections, a thawed Redis) is ignored. A gateway says nothing once Redis answered a call that carried its counts,
 * so the usual call is two INCRBYs. The window counts every request; the month is checked first and a unit is
 * reserved only when both admit (see ratelimit.h): the month takes the n units and gives back those refused, in the
 * same atomic step. When all n are admitted, up to k more units are reserved in both (a lease: at most a sixteenth
 * of what is left of either). Each key expires on its own once its period is over. Returns {window count before,
 * month count before, admitted, leased, the counts given back that the first checks took}: the first `admitted`
 * checks pass; check i (from 1) saw the i-th count taken back, or, past the m taken back, window count before + i - m;
 * the others are refused for the month when month count before + admitted reached the quota, else for the window
 * (batch_result); the lease's units follow the n checks in both counts. A count given back at or above the window's
 * count (left by a gateway of an older layout, which lowered the count instead) is dropped, not taken.
 */
static const char script[] =
    "local function owed(key, n, ttl)\n"
    "  if n < 0 then return 0 end\n"
    "  local seq, was = tonumber(ARGV[9]), redis.call('HMGET', key, ARGV[5], ARGV[5] .. ':seq')\n"
    "  if seq <= tonumber(was[2] or '0') then return 0 end\n"
    "  redis.call('HSET', key, ARGV[5], n, ARGV[5] .. ':seq', seq)\n"
    "  redis.call('EXPIRE', key, ttl)\n"
    "  return n - tonumber(was[1] or '0')\n"
    "end\n"
    "local n, k, spend = tonumber(ARGV[8]), tonumber(ARGV[10]), tonumber(ARGV[11])\n"
    "local limit, quota = tonumber(ARGV[1]), tonumber(ARGV[3])\n"
    "local back = {}\n"
    "if n > 0 then\n"
    "  local got = redis.call('ZPOPMIN', KEYS[5], n)\n"
    "  if #got > 0 then\n"
    "    local top = tonumber(redis.call('GET', KEYS[1]) or '0')\n"
    "    for i = 2, #got, 2 do\n"
    "      local c = tonumber(got[i])\n"
    "      if c < top then back[#back + 1] = c end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "local m = #back\n"
    "local dw = n - m + owed(KEYS[3], tonumber(ARGV[6]), ARGV[2])\n"
    "local dq = spend * n + owed(KEYS[4], tonumber(ARGV[7]), ARGV[4])\n"
    "local w = redis.call('INCRBY', KEYS[1], dw)\n"
    "if w == dw then redis.call('EXPIRE', KEYS[1], ARGV[2]) end\n"
    "local q\n"
    "if dq ~= 0 then\n"
    "  q = redis.call('INCRBY', KEYS[2], dq)\n"
    "  if q == dq then redis.call('EXPIRE', KEYS[2], ARGV[4]) end\n"
    "else\n"
    "  q = tonumber(redis.call('GET', KEYS[2]) or '0')\n"
    "end\n"
    "w = w - (n - m)\n"
    "q = q - spend * n\n"
    "local a = 0\n"
    "while a < m and back[a + 1] <= limit do a = a + 1 end\n"
    "if a == m then a = m + math.max(0, math.min(n - m, limit - w)) end\n"
    "if spend == 1 then a = math.min(a, quota - q) elseif q >= quota then a = 0 end\n"
    "if a < 0 then a = 0 end\n"
    "local e = 0\n"
    "if spend == 1 and a == n and k > 0 then\n"
    "  e = math.min(k, math.floor((limit - w - (n - m)) / 16), math.floor((quota - q - n) / 16))\n"
    "  if e < 0 then e = 0 end\n"
    "end\n"
    "if e > 0 then redis.call('INCRBY', KEYS[1], e) end\n"
    "if spend == 1 and a + e ~= n then redis.call('INCRBY', KEYS[2], a + e - n) end\n"
    "return {w, q, a, e, unpack(back)}\n";

/*
 * Gives back a lease's unused units: ARGV[1] of them to the month KEYS[2] (its count is the key's total, lowered as
 * far as it holds), and to the window KEYS[1] its runs, newest first, each as its units left and the window count of
 * its last unit (ARGV[2], ARGV[3], then the next older run). The window's counts are each one request's: a run that
 * is the top of the window's count lowers it (and so do counts given back before that are then the top), while a run
 * below the top, with other requests counted after it, goes to the set KEYS[3] (expiring with the window), whose
 * counts the next checks take first (see script). A run above the count (a window gone and made again) is left.
 */
static const char give_back_script[] =
    "local n = tonumber(ARGV[1])\n"
    "local v = tonumber(redis.call('GET', KEYS[2]) or '0')\n"
    "if v > 0 then redis.call('DECRBY', KEYS[2], math.min(v, n)) end\n"
    "local w = tonumber(redis.call('GET', KEYS[1]) or '0')\n"
    "local was = w\n"
    "for i = 2, #ARGV - 1, 2 do\n"
    "  local left, last = tonumber(ARGV[i]), tonumber(ARGV[i + 1])\n"
    "  if w == last then\n"
    "    w = w - left\n"
    "    while true do\n"
    "      local t = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')\n"
    "      if #t == 0 or tonumber(t[2]) ~= w then break end\n"
    "      redis.call('ZREM', KEYS[3], t[1])\n"
    "      w = w - 1\n"
    "    end\n"
    "  elseif w > last then\n"
    "    for c = last - left + 1, last do redis.call('ZADD', KEYS[3], c, c) end\n"
    "    local ttl = redis.call('PTTL', KEYS[1])\n"
    "    if ttl > 0 then redis.call('PEXPIRE', KEYS[3], ttl) end\n"
    "  end\n"
    "end\n"
    "if w < was then redis.call('DECRBY', KEYS[1], was - w) end\n"
    "return 0\n";

/* Gives one reserved unit of the month KEYS[1] back; a month that expired or holds nothing is left alone. */
static const char refund_script[] =
    "if tonumber(redis.call('GET', KEYS[1]) or '0') > 0 then\n"
    "  return redis.call('DECR', KEYS[1])\n"
    "end\n"
    "return 0\n";

#define SENT_BUCKETS 256

struct rlredis {
  uv_loop_t *loop;
  struct redis_session session; /* where Redis is, the reconnect backoff, the down and back lines */
  char gateway_id[RLREDIS_GATEWAY_ID_BYTES];
  redisAsyncContext *ac; /* NULL while disconnected */
  bool ready;            /* the script is loaded on this connection */
  bool stalled;          /* a command timed out and no reply has come since */
  bool closing;
  uv_timer_t conn_timer; /* disconnected: reconnect backoff; connecting: ready deadline; stalled: stall deadline */
  uv_prepare_t flush;    /* sends the checks gathered this loop turn, before the loop waits */
  bool flush_open;
  struct rlreq *open, *open_last;     /* gathering checks, oldest first: one per key unless full */
  struct rlreq *sent[SENT_BUCKETS];   /* sent and not yet decided, by key: at most one per key at a time */
  struct lease *leases[SENT_BUCKETS]; /* by key, as sent */
  uv_timer_t sweep;                   /* gives back the leases left unused */
  char server_id[41];                 /* the run_id of the server this connection reached, "" until known */
  struct lease *orphans;              /* leases held when a connection to server orphans_of was lost */
  char orphans_of[41];
  int refs; /* conn_timer, sweep, flush and every live request: the struct is freed with the last */
  char sha[41];
  uint64_t timeouts, errors, noscript, connects, leased;
  uint32_t gateways; /* live gateways Redis counted at the last heartbeat (1 until known) */
  unsigned sweeps;   /* sweeps since the last heartbeat */
};

/*
 * The gateways' heartbeats: one sorted set of gateway ids by the wall-clock millisecond of their last beat (the hosts'
 * clocks agree to well within VTS_GATEWAY_HEARTBEAT_TTL_MS under NTP), gone with the last gateway.
 */
#define HEARTBEAT_KEY "vts:gateways"

/*
 * Units one script call reserved: the last of them made Redis's window and month counts end_w and end_q, so the unit
 * given out with `left` of them held saw end_w - left + 1 and end_q - left + 1 (each unit its own count).
 */
struct lease_run {
  int64_t left, end_w, end_q;
};

/* Runs a lease holds at most: a call's units reserved while older ones are still held, with other counts (its own
 * checks', other workers') between them, are a run of their own; a call's units beyond this go back at once. */
#define LEASE_RUNS 4

/*
 * Units of a key that Redis reserved for this worker in one window and month (see ratelimit_redis.h), given out to
 * the key's checks without a round trip, oldest run first.
 */
struct lease {
  struct lease *next; /* in r->leases[bucket] */
  char digest[65];
  int64_t window_s, window_index, month, rate, quota;
  struct lease_run run[LEASE_RUNS]; /* each with a unit held at least */
  unsigned runs;
  int64_t want; /* units the next call for the key asks for */
  bool used;    /* a unit given out since the last sweep */
  bool starved; /* used up while the next lease was on its way: want doubled once for that */
};

/* One check's caller. */
struct rlwaiter {
  rlredis_cb cb;
  void *arg;
};

/*
 * One script call: the checks of one key made in one loop turn (up to RLREDIS_BATCH_MAX), sent together before the
 * loop next waits. Freed once hiredis has handed back its callback and its timer has closed.
 */
struct rlreq {
  struct rlredis *r;
  struct rlreq *next_open;             /* in r->open until sent */
  struct rlreq *next_sent, *prev_sent; /* in r->sent while sent and not decided */
  bool sent;
  unsigned bucket; /* of r->sent: from the key */
  struct rlwaiter *w;
  size_t n, cap;
  /* What a check must share to join: its key (the digest), window, month and limits. */
  char digest[65];
  int64_t window_s, window_index, month, rate, quota;
  struct rl_owed owed;
  uv_timer_t timer;
  bool decided;       /* cb called: a reply coming later is dropped */
  bool in_redis;      /* hiredis holds a callback with this request */
  bool timer_open;    /* the timer's close callback has not run yet */
  bool tried_eval;    /* NOSCRIPT was answered once already */
  bool spend;         /* its checks reserve a unit of the month (else they only read it: no lease either) */
  int64_t lease_want; /* units the key's lease asks for (half used, or used up); may be a call with no check */
  char keys[SCRIPT_KEYS][RLREDIS_KEY_BYTES];
  char nums[SCRIPT_ARGS][24];
  size_t lens[SCRIPT_KEYS + SCRIPT_ARGS]; /* of keys, then of nums */
};

#define RLREDIS_BATCH_MAX 256

/* What the check script answered (see script): its four counts, and the window's counts given back that its first
 * checks took. */
struct script_reply {
  int64_t window, month, admitted, leased;
  size_t taken;
  int64_t back[RLREDIS_BATCH_MAX];
};

static void conn_start(struct rlredis *r);
static void leases_resolve(struct rlredis *r);
static void on_reply(redisAsyncContext *c, void *reply, void *privdata);
static void on_flush(uv_prepare_t *h);

static void rlredis_unref(struct rlredis *r) {
  if (--r->refs == 0) free(r);
}

static void req_release(struct rlreq *q) {
  if (q->in_redis || q->timer_open) return;
  struct rlredis *r = q->r;
  free(q->w);
  free(q);
  rlredis_unref(r);
}

static void req_timer_closed(uv_handle_t *h) {
  struct rlreq *q = h->data;
  q->timer_open = false;
  req_release(q);
}

/*
 * What check i (from 0) of a batch gets, from the script's answer: as if the checks had been made one after another,
 * the first ones with the counts given back that they took.
 */
static void batch_result(const struct rlreq *q, size_t i, const struct script_reply *reply,
                         struct rlredis_result *out) {
  int64_t k = (int64_t)i + 1, q0 = reply->month, admitted = reply->admitted;
  int64_t spent = q->spend ? admitted : 0; /* checks that only read the month leave it as it was */
  out->owed_seq = q->owed.seq;
  out->window_used = i < reply->taken ? reply->back[i] : reply->window + k - (int64_t)reply->taken;
  if (k <= admitted) {
    out->outcome = RL_ALLOW;
    out->quota_used = q->spend ? q0 + k : q0;
    return;
  }
  out->outcome = q0 + spent >= q->quota ? RL_QUOTA : RL_LIMITED;
  out->quota_used = q0 + spent;
}

static void lease_add(struct rlredis *r, const struct rlreq *q, const struct script_reply *reply);

/*
 * Answers every check of q, once and in order: closes its timer, keeps the lease Redis reserved, then calls back (q
 * stays valid until the close callback). reply: the script's answer, or NULL with a fault status.
 */
static void req_decide(struct rlreq *q, int status, const struct script_reply *reply) {
  if (q->decided) return;
  q->decided = true;
  if (q->sent) {
    struct rlredis *r = q->r;
    if (q->prev_sent != NULL)
      q->prev_sent->next_sent = q->next_sent;
    else
      r->sent[q->bucket] = q->next_sent;
    if (q->next_sent != NULL) q->next_sent->prev_sent = q->prev_sent;
    /* Checks of this key may be waiting for this call: they go before the loop next waits. */
    if (r->open != NULL && r->flush_open) uv_prepare_start(&r->flush, on_flush);
  }
  if (q->timer_open) uv_close((uv_handle_t *)&q->timer, req_timer_closed);
  if (reply != NULL && reply->leased > 0) lease_add(q->r, q, reply);
  for (size_t i = 0; i < q->n; i++) {
    if (reply == NULL) {
      q->w[i].cb(q->w[i].arg, status, NULL);
      continue;
    }
    struct rlredis_result res;
    batch_result(q, i, reply, &res);
    q->w[i].cb(q->w[i].arg, 0, &res);
  }
}

static void on_reconnect_timer(uv_timer_t *t) { conn_start(t->data); }

/* Redis could not be used, for why: the session says so (once per outage and reason) and names the wait. */
static void schedule_reconnect(struct rlredis *r, const char *why) {
  if (r->closing) return;
  uint64_t wait = redis_session_down(&r->session, why, util_now_ms());
  uv_timer_start(&r->conn_timer, on_reconnect_timer, wait, 0);
}

/*
 * The connection is gone: the units its leases hold stay reserved in the server. They are kept aside, with the
 * server's run_id, until the next connection is ready (leases_resolve): if it reaches the same server process, whose
 * counts still hold them, they go back; a server that restarted (maybe from a snapshot older than the lease) or
 * another one (a failover) may not hold them, and giving them back there would take other requests' counts, so they
 * are forgotten and stay counted where they are, the safe side. A server whose run_id is not known (INFO refused)
 * gets nothing back.
 */
static void leases_orphan(struct rlredis *r) {
  for (unsigned b = 0; b < SENT_BUCKETS; b++) {
    while (r->leases[b] != NULL) {
      struct lease *l = r->leases[b];
      r->leases[b] = l->next;
      bool keep =
          l->runs > 0 && r->server_id[0] != '\0' && (r->orphans == NULL || strcmp(r->orphans_of, r->server_id) == 0);
      if (!keep) {
        free(l);
        continue;
      }
      if (r->orphans == NULL) memcpy(r->orphans_of, r->server_id, sizeof(r->orphans_of));
      l->next = r->orphans;
      r->orphans = l;
    }
  }
}

/* Frees the connection now; its pending requests are called back with a NULL reply (a fault) before it returns. */
static void conn_drop(struct rlredis *r) {
  leases_orphan(r);
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
  const char *why = r->ready ? "no reply (frozen or unreachable server)" : "connection not ready in time";
  conn_drop(r);
  schedule_reconnect(r, why);
}

static void conn_stalled(struct rlredis *r) {
  if (r->stalled || r->ac == NULL || r->closing) return;
  r->stalled = true;
  /* While connecting, the shorter ready deadline already runs. */
  if (r->ready) uv_timer_start(&r->conn_timer, on_deadline_timer, VTS_REDIS_STALL_MS, 0);
}

/* EXEC answered the heartbeat: the last of its replies is the count of live gateways. */
static void on_heartbeat(redisAsyncContext *c, void *reply, void *privdata) {
  (void)c;
  struct rlredis *r = privdata;
  redisReply *rep = reply;
  if (rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 4) {
    const redisReply *n = rep->element[3];
    if (n->type == REDIS_REPLY_INTEGER && n->integer >= 1 && n->integer <= UINT32_MAX &&
        (uint32_t)n->integer != r->gateways) {
      r->gateways = (uint32_t)n->integer;
      char count[16];
      snprintf(count, sizeof(count), "%u", r->gateways);
      log_msg(LOG_INFO, "gateways sharing the rate limits", "=gateways", count, NULL);
    }
  }
  rlredis_unref(r);
}

/*
 * Announces this gateway and forgets those silent for VTS_GATEWAY_HEARTBEAT_TTL_MS, in one transaction whose answer
 * is how many share the keys: kept for a fallback to divide by. Plain commands, so that scripts count only checks.
 */
static void heartbeat(struct rlredis *r) {
  r->sweeps = 0;
  if (r->ac == NULL || !r->ready || r->stalled || r->closing) return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  redisAsyncContext *ac = r->ac;
  if (redisAsyncCommand(ac, NULL, NULL, "MULTI") != REDIS_OK) return;
  redisAsyncCommand(ac, NULL, NULL, "ZADD %s %lld %s", HEARTBEAT_KEY, now, r->gateway_id);
  redisAsyncCommand(ac, NULL, NULL, "ZREMRANGEBYSCORE %s -inf %lld", HEARTBEAT_KEY, now - VTS_GATEWAY_HEARTBEAT_TTL_MS);
  redisAsyncCommand(ac, NULL, NULL, "PEXPIRE %s %d", HEARTBEAT_KEY, VTS_GATEWAY_HEARTBEAT_TTL_MS);
  redisAsyncCommand(ac, NULL, NULL, "ZCARD %s", HEARTBEAT_KEY);
  if (redisAsyncCommand(ac, on_heartbeat, r, "EXEC") == REDIS_OK) r->refs++;
}

static void on_setup_reply(redisAsyncContext *c, void *reply, void *privdata) {
  struct rlredis *r = privdata;
  redisReply *rep = reply;
  if (rep == NULL) return; /* the connection went; its disconnect handling redials */
  conn_alive(r);
  if (rep->type == REDIS_REPLY_ERROR) {
    if (c == r->ac) {
      /* A wrong database or a refused script makes the connection useless: drop it (hiredis frees it after this
       * callback returns) and try again later. */
      r->ac = NULL;
      r->ready = false;
      r->stalled = false;
      schedule_reconnect(r, rep->str);
      redisAsyncFree(c);
    }
    return;
  }
  if (rep->type == REDIS_REPLY_STRING) {
    /* SCRIPT LOAD answered: the connection is ready. */
    r->ready = true;
    leases_resolve(r);
    if (!r->stalled) uv_timer_stop(&r->conn_timer);
    r->connects++;
    redis_session_up(&r->session);
    heartbeat(r);
  }
}

/* INFO server answered: the run_id of the process this connection reached (an error, say an ACL refusal, leaves it
 * unknown; the connection serves as well). */
static void on_server_info(redisAsyncContext *c, void *reply, void *privdata) {
  struct rlredis *r = privdata;
  const redisReply *rep = reply;
  if (rep == NULL || c != r->ac || rep->type != REDIS_REPLY_STRING) return;
  const char *at = strstr(rep->str, "\nrun_id:");
  if (at == NULL) return;
  at += sizeof("\nrun_id:") - 1;
  size_t n = strspn(at, "0123456789abcdef");
  if (n != sizeof(r->server_id) - 1) return;
  memcpy(r->server_id, at, n);
  r->server_id[n] = '\0';
}

static void on_connect(const redisAsyncContext *c, int status) {
  struct rlredis *r = c->data;
  if (status == REDIS_OK || c != r->ac) return;
  /* hiredis frees the context after this returns, calling back its pending commands with NULL. */
  r->ac = NULL;
  r->ready = false;
  r->stalled = false;
  schedule_reconnect(r, c->errstr);
}

static void on_disconnect(const redisAsyncContext *c, int status) {
  (void)status;
  struct rlredis *r = c->data;
  if (c != r->ac) return;
  leases_orphan(r);
  r->ac = NULL;
  r->ready = false;
  r->stalled = false;
  uv_timer_stop(&r->conn_timer);
  schedule_reconnect(r, c->errstr[0] != '\0' ? c->errstr : "connection closed");
}

static void conn_start(struct rlredis *r) {
  char err[256];
  redisAsyncContext *ac =
      redis_session_open_async(&r->session, r->loop, r, on_connect, on_disconnect, on_setup_reply, r, err, sizeof(err));
  if (ac == NULL) {
    schedule_reconnect(r, err);
    return;
  }
  r->ac = ac;
  r->ready = false;
  r->stalled = false;
  r->server_id[0] = '\0';
  uv_timer_start(&r->conn_timer, on_deadline_timer, VTS_REDIS_CONNECT_TIMEOUT_MS, 0);
  /* Queued behind the connection's own preparation and ahead of any check issued meanwhile: which server this is
   * (known before the connection is ready, for the leases a lost connection left), then the script, so the very
   * first EVALSHA already finds it. */
  redisAsyncCommand(ac, on_server_info, r, "INFO server");
  redisAsyncCommand(ac, on_setup_reply, r, "SCRIPT LOAD %s", script);
}

static int req_send(struct rlreq *q, redisAsyncContext *ac, bool eval) {
  const char *argv[SCRIPT_ARGC] = {eval ? "EVAL" : "EVALSHA", eval ? script : q->r->sha, SCRIPT_NUMKEYS};
  size_t lens[SCRIPT_ARGC] = {eval ? 4 : 7, eval ? sizeof(script) - 1 : sizeof(q->r->sha) - 1, 1};
  for (int i = 0; i < SCRIPT_KEYS; i++) argv[3 + i] = q->keys[i];
  for (int i = 0; i < SCRIPT_ARGS; i++) argv[3 + SCRIPT_KEYS + i] = q->nums[i];
  memcpy(lens + 3, q->lens, sizeof(q->lens));
  return redisAsyncCommandArgv(ac, on_reply, q, SCRIPT_ARGC, argv, lens) == REDIS_OK ? 0 : -EIO;
}

/* The units a call asks to lease: as many as it carries checks when they gathered (two or more), or as asked. */
static int64_t lease_asked(const struct rlreq *q) {
  if (!q->spend) return 0;
  int64_t k = q->n >= 2 ? (int64_t)q->n : 0;
  if (q->lease_want > k) k = q->lease_want;
  return k < VTS_REDIS_LEASE_MAX ? k : VTS_REDIS_LEASE_MAX;
}

static int parse_result(const struct rlreq *q, const redisReply *rep, struct script_reply *out) {
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 4 || rep->elements > 4 + q->n) return -EPROTO;
  for (size_t i = 0; i < rep->elements; i++)
    if (rep->element[i]->type != REDIS_REPLY_INTEGER) return -EPROTO;
  out->window = rep->element[0]->integer;
  out->month = rep->element[1]->integer;
  out->admitted = rep->element[2]->integer;
  out->leased = rep->element[3]->integer;
  out->taken = rep->elements - 4;
  for (size_t i = 0; i < out->taken; i++) out->back[i] = rep->element[4 + i]->integer;
  if (out->admitted < 0 || out->admitted > (int64_t)q->n || out->leased < 0 || out->leased > lease_asked(q))
    return -EPROTO;
  return 0;
}

static void on_reply(redisAsyncContext *c, void *reply, void *privdata) {
  struct rlreq *q = privdata;
  struct rlredis *r = q->r;
  redisReply *rep = reply;
  q->in_redis = false;
  if (rep != NULL) conn_alive(r);
  if (!q->decided) {
    struct script_reply res;
    if (rep == NULL) {
      r->errors += q->n;
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
      r->errors += q->n;
      req_decide(q, -EIO, NULL);
    } else if (parse_result(q, rep, &res) == 0) {
      req_decide(q, 0, &res);
    } else {
      r->errors += q->n;
      req_decide(q, -EPROTO, NULL);
    }
  }
  req_release(q);
}

static void on_req_timeout(uv_timer_t *t) {
  struct rlreq *q = t->data;
  q->r->timeouts += q->n;
  conn_stalled(q->r);
  req_decide(q, -ETIMEDOUT, NULL);
}

static void put_i64(struct strb *b, int64_t v) {
  if (v < 0) strb_put(b, "-", 1);
  strb_u64(b, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
}

/*
 * The names of a key's counters (suffix ""), of its fallback counts (":owed") and of a window's counts given back
 * below its top (":back"), for a window (its length and index) and for a month; each returns the name's length (they
 * fit RLREDIS_KEY_BYTES: a 16-byte tag, two numbers, a short suffix). The hash tag is the first 64 bits of the key's
 * digest: never the key, never its name.
 */
static size_t window_key(char out[RLREDIS_KEY_BYTES], const char *digest, int64_t window_s, int64_t window_index,
                         const char *suffix) {
  struct strb b = strb_init(out, RLREDIS_KEY_BYTES);
  strb_put(&b, "vts:rl:{", 8);
  strb_put(&b, digest, 16);
  strb_put(&b, "}:w:", 4);
  put_i64(&b, window_s);
  strb_put(&b, ":", 1);
  put_i64(&b, window_index);
  strb_puts(&b, suffix);
  return b.len;
}

static size_t month_key(char out[RLREDIS_KEY_BYTES], const char *digest, int64_t month, const char *suffix) {
  struct strb b = strb_init(out, RLREDIS_KEY_BYTES);
  strb_put(&b, "vts:rl:{", 8);
  strb_put(&b, digest, 16);
  strb_put(&b, "}:q:", 4);
  put_i64(&b, rlcalc_month_yyyymm(month));
  strb_puts(&b, suffix);
  return b.len;
}

size_t rlredis_month_key(char out[RLREDIS_KEY_BYTES], const char *digest, int64_t month) {
  return month_key(out, digest, month, "");
}

int64_t rlredis_month_ttl(int64_t month, int64_t now) {
  return rlcalc_month_start(month + 1) - now + VTS_REDIS_QUOTA_TTL_MARGIN_S;
}

/* Argument i of q's script call: v in decimal. */
static void set_num(struct rlreq *q, int i, int64_t v) {
  struct strb b = strb_init(q->nums[i], sizeof(q->nums[i]));
  put_i64(&b, v);
  q->lens[SCRIPT_KEYS + i] = b.len;
}

/* Sends q (its timer starts now), or answers its checks with the fault. */
static void req_send_batch(struct rlreq *q) {
  struct rlredis *r = q->r;
  set_num(q, 5, q->owed.window);
  set_num(q, 6, q->owed.quota);
  set_num(q, 7, (int64_t)q->n);
  set_num(q, 8, (int64_t)q->owed.seq);
  set_num(q, 9, lease_asked(q));
  set_num(q, 10, q->spend ? 1 : 0);
  uv_timer_init(r->loop, &q->timer);
  q->timer.data = q;
  q->timer_open = true;
  q->sent = true;
  q->next_sent = r->sent[q->bucket];
  if (q->next_sent != NULL) q->next_sent->prev_sent = q;
  r->sent[q->bucket] = q;
  int status = r->closing || r->ac == NULL ? -ENOTCONN : r->stalled ? -ETIMEDOUT : req_send(q, r->ac, false);
  if (status != 0) {
    if (status == -EIO) r->errors += q->n; /* no connection or a stalled one is no command error */
    req_decide(q, status, NULL);
    return;
  }
  q->in_redis = true;
  /* The loop's cached clock may be stale after a long callback: the deadline counts from now. */
  uv_update_time(r->loop);
  uv_timer_start(&q->timer, on_req_timeout, VTS_REDIS_COMMAND_TIMEOUT_MS, 0);
}

/* The r->sent bucket of a key's digest: a hash of its first eight bytes. */
static unsigned sent_bucket(const char digest[65]) {
  uint64_t h = 0;
  memcpy(&h, digest, sizeof(h));
  return (unsigned)((h * 0x9e3779b97f4a7c15ULL) >> 56) % SENT_BUCKETS;
}

/* Whether a call for the key with this digest (in r->sent[bucket]) is out and not yet answered. */
static bool key_in_flight(const struct rlredis *r, unsigned bucket, const char digest[65]) {
  for (const struct rlreq *o = r->sent[bucket]; o != NULL; o = o->next_sent)
    if (memcmp(o->digest, digest, 65) == 0) return true;
  return false;
}

static void open_append(struct rlredis *r, struct rlreq *q) {
  q->next_open = NULL;
  if (r->open_last != NULL)
    r->open_last->next_open = q;
  else
    r->open = q;
  r->open_last = q;
}

/*
 * Sends the gathered checks, oldest first. A key with a call still out waits for its answer (the checks gathered
 * meanwhile go as one call then: under load a key makes one call per round trip, not one per loop turn), unless all
 * (closing: everything is answered now). Checks added by the callbacks of failed sends go in a further pass.
 */
static void flush_open_batches(struct rlredis *r, bool all) {
  for (;;) {
    struct rlreq *list = r->open, *go = NULL, **go_last = &go;
    r->open = r->open_last = NULL;
    while (list != NULL) {
      struct rlreq *q = list;
      list = q->next_open;
      if (!all && key_in_flight(r, q->bucket, q->digest)) {
        open_append(r, q);
        continue;
      }
      q->next_open = NULL;
      *go_last = q;
      go_last = &q->next_open;
    }
    if (go == NULL) break;
    while (go != NULL) {
      struct rlreq *q = go;
      go = q->next_open;
      q->next_open = NULL;
      req_send_batch(q); /* its timer (and hiredis, once sent) hold it from here: freed when both let go */
    }
  }
  /* Out before the loop waits, rather than on the next writable event. */
  if (r->ac != NULL && r->ready && !r->closing) redis_conn_write_now(r->ac);
}

/* Before the loop waits. */
static void on_flush(uv_prepare_t *h) {
  struct rlredis *r = h->data;
  uv_prepare_stop(h);
  flush_open_batches(r, false);
}

/* The batch this turn already holds for the same key, counters and limits, or NULL. */
static struct rlreq *open_batch(struct rlredis *r, const char *digest, const struct rl_limits *lim,
                                int64_t window_index, int64_t month, bool spend) {
  for (struct rlreq *q = r->open; q != NULL; q = q->next_open) {
    if (q->n < RLREDIS_BATCH_MAX && q->spend == spend && q->window_index == window_index && q->month == month &&
        q->window_s == lim->window_s && q->rate == lim->rate && q->quota == lim->quota &&
        strcmp(q->digest, digest) == 0)
      return q;
  }
  return NULL;
}

static int req_add(struct rlreq *q, rlredis_cb cb, void *arg) {
  if (q->n == q->cap) {
    size_t cap = q->cap ? 2 * q->cap : 4;
    struct rlwaiter *w = realloc(q->w, cap * sizeof(*w));
    if (w == NULL) return -ENOMEM;
    q->w = w;
    q->cap = cap;
  }
  q->w[q->n++] = (struct rlwaiter){cb, arg};
  return 0;
}

/* A new call for the key with this digest, gathering checks from now on (in r->open), or NULL when out of memory. */
static struct rlreq *batch_new(struct rlredis *r, const char *digest, const struct rl_limits *lim, int64_t now,
                               int64_t window_index, int64_t month, bool spend) {
  struct rlreq *q = calloc(1, sizeof(*q));
  if (q == NULL) return NULL;
  q->r = r;
  q->spend = spend;
  util_copy_str(q->digest, sizeof(q->digest), digest);
  q->bucket = sent_bucket(q->digest);
  q->window_s = lim->window_s;
  q->window_index = window_index;
  q->month = month;
  q->rate = lim->rate;
  q->quota = lim->quota;
  q->lens[0] = window_key(q->keys[0], digest, lim->window_s, window_index, "");
  q->lens[1] = month_key(q->keys[1], digest, month, "");
  q->lens[2] = window_key(q->keys[2], digest, lim->window_s, window_index, ":owed");
  q->lens[3] = month_key(q->keys[3], digest, month, ":owed");
  q->lens[4] = window_key(q->keys[4], digest, lim->window_s, window_index, ":back");
  set_num(q, 0, lim->rate);
  /* The window counter is created during its window, so its length plus a second outlives the window. */
  set_num(q, 1, lim->window_s + 1);
  set_num(q, 2, lim->quota);
  set_num(q, 3, rlredis_month_ttl(month, now));
  q->lens[SCRIPT_KEYS + 4] = util_copy_str(q->nums[4], sizeof(q->nums[4]), r->gateway_id);
  q->owed = (struct rl_owed){-1, -1, 0};
  r->refs++;
  open_append(r, q);
  uv_prepare_start(&r->flush, on_flush);
  return q;
}

/* ---- leases ---- */

static struct lease *lease_find(struct rlredis *r, unsigned bucket, const char *digest) {
  for (struct lease *l = r->leases[bucket]; l != NULL; l = l->next)
    if (memcmp(l->digest, digest, sizeof(l->digest)) == 0) return l;
  return NULL;
}

static bool lease_fits(const struct lease *l, const struct rl_limits *lim, int64_t window_index, int64_t month) {
  return l->window_index == window_index && l->month == month && l->window_s == lim->window_s && l->rate == lim->rate &&
         l->quota == lim->quota;
}

/* The units held in runs. */
static int64_t runs_held(const struct lease_run *run, unsigned runs) {
  int64_t n = 0;
  for (unsigned i = 0; i < runs; i++) n += run[i].left;
  return n;
}

#define GIVE_BACK_ARGC (7 + 2 * LEASE_RUNS) /* EVAL script 3 KEYS... units, then each run's left and end_w */

/* Gives the units of the lease's runs (oldest first) back to Redis (give_back_script), without awaiting a reply
 * (units Redis does not take back stay counted, the safe side). */
static void units_give_back(struct rlredis *r, const struct lease *l, const struct lease_run *run, unsigned runs) {
  int64_t n = runs_held(run, runs);
  if (n <= 0 || r->ac == NULL || !r->ready) return;
  char keys[3][RLREDIS_KEY_BYTES], nums[1 + 2 * LEASE_RUNS][24];
  const char *argv[GIVE_BACK_ARGC] = {"EVAL", give_back_script, "3", keys[0], keys[1], keys[2], nums[0]};
  size_t lens[GIVE_BACK_ARGC] = {4, sizeof(give_back_script) - 1, 1};
  lens[3] = window_key(keys[0], l->digest, l->window_s, l->window_index, "");
  lens[4] = month_key(keys[1], l->digest, l->month, "");
  lens[5] = window_key(keys[2], l->digest, l->window_s, l->window_index, ":back");
  lens[6] = util_u64_dec((uint64_t)n, nums[0]);
  int argc = 7;
  for (unsigned i = runs; i-- > 0;) { /* newest first: the top of the window's count goes back first */
    if (run[i].left <= 0) continue;
    char *left = nums[argc - 6], *end = nums[argc - 5];
    lens[argc] = util_u64_dec((uint64_t)run[i].left, left);
    argv[argc++] = left;
    lens[argc] = util_u64_dec((uint64_t)run[i].end_w, end);
    argv[argc++] = end;
  }
  if (redisAsyncCommandArgv(r->ac, NULL, NULL, argc, argv, lens) != REDIS_OK) r->errors++;
}

/* The units the lease holds, in all its runs. */
static int64_t lease_held(const struct lease *l) { return runs_held(l->run, l->runs); }

/* Gives every unit the lease holds back. */
static void lease_give_back(struct rlredis *r, struct lease *l) {
  units_give_back(r, l, l->run, l->runs);
  l->runs = 0;
}

/* The lease's oldest run is given out: the next one is first. */
static void lease_shift(struct lease *l) {
  memmove(&l->run[0], &l->run[1], (l->runs - 1) * sizeof(l->run[0]));
  l->runs--;
}

/* Frees the leases a lost connection left, their units given back first when give_back. */
static void orphans_free(struct rlredis *r, bool give_back) {
  while (r->orphans != NULL) {
    struct lease *l = r->orphans;
    r->orphans = l->next;
    if (give_back) lease_give_back(r, l);
    free(l);
  }
}

/* The connection is ready: the leases the lost one left go back if it reached the same server (see leases_orphan). */
static void leases_resolve(struct rlredis *r) {
  orphans_free(r, r->server_id[0] != '\0' && strcmp(r->orphans_of, r->server_id) == 0);
}

/* Takes the lease out of its bucket and frees it, its unused units given back. */
static void lease_drop(struct rlredis *r, unsigned bucket, struct lease *l) {
  struct lease **at = &r->leases[bucket];
  while (*at != l) at = &(*at)->next;
  *at = l->next;
  lease_give_back(r, l);
  free(l);
}

/* Moves the lease to another window, month or limits: what it held goes back; how much to ask for stays. */
static void lease_move(struct rlredis *r, struct lease *l, const struct rl_limits *lim, int64_t window_index,
                       int64_t month) {
  lease_give_back(r, l);
  l->window_s = lim->window_s;
  l->window_index = window_index;
  l->month = month;
  l->rate = lim->rate;
  l->quota = lim->quota;
}

/* Keeps the units q's call reserved beyond its checks (reply->leased > 0). */
static void lease_add(struct rlredis *r, const struct rlreq *q, const struct script_reply *reply) {
  struct lease *l = lease_find(r, q->bucket, q->digest);
  struct rl_limits lim = {q->rate, q->window_s, q->quota};
  if (l == NULL) {
    l = calloc(1, sizeof(*l));
    if (l == NULL) return; /* the units stay counted in Redis until their window and month end */
    memcpy(l->digest, q->digest, sizeof(l->digest));
    l->next = r->leases[q->bucket];
    r->leases[q->bucket] = l;
    lease_move(r, l, &lim, q->window_index, q->month);
  } else if (!lease_fits(l, &lim, q->window_index, q->month)) {
    lease_move(r, l, &lim, q->window_index, q->month);
  }
  /* After the call's own checks: the window counted those that took no count given back, the month the admitted. */
  struct lease_run run = {reply->leased, reply->window + (int64_t)(q->n - reply->taken) + reply->leased,
                          reply->month + reply->admitted + reply->leased};
  if (l->runs < LEASE_RUNS)
    l->run[l->runs++] = run;
  else
    units_give_back(r, l, &run, 1); /* rather than a fifth run: each unit held keeps a count of its own */
  if (lease_asked(q) > l->want) l->want = lease_asked(q);
  l->used = true;
  l->starved = false;
}

/* Every VTS_REDIS_LEASE_IDLE_MS: a lease not used since the last sweep goes back. */
static void on_sweep(uv_timer_t *t) {
  struct rlredis *r = t->data;
  for (unsigned b = 0; b < SENT_BUCKETS; b++) {
    struct lease *l = r->leases[b];
    while (l != NULL) {
      struct lease *next = l->next;
      if (!l->used)
        lease_drop(r, b, l);
      else
        l->used = false;
      l = next;
    }
  }
  if (++r->sweeps * VTS_REDIS_LEASE_IDLE_MS >= VTS_GATEWAY_HEARTBEAT_MS) heartbeat(r);
  if (r->ac != NULL && r->ready && !r->closing) redis_conn_write_now(r->ac);
}

/*
 * Admits one check from the key's lease, if it holds a unit for this window and month, and asks for the next lease
 * once half of this one is used. Returns whether it admitted (cb was called); when not, *want is what the key's next
 * call should ask for: a lease used up before the next one came asks for twice as much.
 */
static bool lease_take(struct rlredis *r, unsigned bucket, const char *digest, const struct rl_limits *lim, int64_t now,
                       int64_t window_index, int64_t month, const struct rl_owed *owed, rlredis_cb cb, void *arg,
                       int64_t *want) {
  *want = 0;
  struct lease *l = lease_find(r, bucket, digest);
  if (l == NULL) return false;
  if (!lease_fits(l, lim, window_index, month)) lease_move(r, l, lim, window_index, month);
  if (l->runs == 0) {
    if (!l->starved && key_in_flight(r, bucket, digest)) {
      l->starved = true;
      l->want = 2 * l->want < VTS_REDIS_LEASE_MAX ? 2 * l->want : VTS_REDIS_LEASE_MAX;
    }
    *want = l->want;
    return false;
  }
  struct lease_run *run = &l->run[0];
  struct rlredis_result res = {RL_ALLOW, run->end_w - run->left + 1, run->end_q - run->left + 1, 0};
  if (--run->left == 0) lease_shift(l);
  l->used = true;
  r->leased++;
  if (lease_held(l) * 2 <= l->want && !key_in_flight(r, bucket, digest)) {
    struct rlreq *q = open_batch(r, digest, lim, window_index, month, true);
    if (q == NULL) q = batch_new(r, digest, lim, now, window_index, month, true);
    if (q != NULL) {
      q->lease_want = l->want;
      if (owed->seq >= q->owed.seq) q->owed = *owed;
    }
  }
  cb(arg, 0, &res);
  return true;
}

int rlredis_check(struct rlredis *r, const char *digest, const struct rl_limits *lim, int64_t now,
                  const struct rl_owed *owed, bool spend, rlredis_cb cb, void *arg) {
  if (r->closing) return -ECANCELED;
  if (r->ac == NULL) return -ENOTCONN;
  /*
   * After an outage, checks wait for a ready connection rather than queue on one still being set up: a frozen
   * server accepts the connection and would run the queued checks when it thaws, after the fallback has counted
   * them (counted twice). Only the very first connection queues, so a starting gateway answers from Redis.
   */
  if (!r->ready && r->connects > 0) return -ENOTCONN;
  if (r->stalled) return -ETIMEDOUT;
  int64_t month = rlcalc_month_index(now), window_index = rlcalc_window_index(now, lim->window_s);
  unsigned bucket = sent_bucket(digest);
  int64_t want = 0;
  /* A lease's units are reserved in the month too: a check that spends none goes to Redis itself. */
  if (spend && lease_take(r, bucket, digest, lim, now, window_index, month, owed, cb, arg, &want)) return 0;
  struct rlreq *q = open_batch(r, digest, lim, window_index, month, spend);
  if (q == NULL) {
    q = batch_new(r, digest, lim, now, window_index, month, spend);
    if (q == NULL) return -ENOMEM;
  }
  if (want > q->lease_want) q->lease_want = want;
  if (req_add(q, cb, arg) != 0) return -ENOMEM;
  /* The fallback's whole count for the period: the newest one says all that the older ones said. */
  if (owed->seq >= q->owed.seq) q->owed = *owed;
  return 0;
}

int rlredis_refund(struct rlredis *r, const char *digest, int64_t month) {
  if (r->closing) return -ECANCELED;
  if (r->ac == NULL) return -ENOTCONN;
  char key[RLREDIS_KEY_BYTES];
  month_key(key, digest, month, "");
  const char *argv[] = {"EVAL", refund_script, "1", key};
  /* No reply is awaited: a refund that Redis never runs leaves the unit counted, the safe side for the service. */
  if (redisAsyncCommandArgv(r->ac, NULL, NULL, 4, argv, NULL) != REDIS_OK) {
    r->errors++;
    return -EIO;
  }
  return 0;
}

static void conn_timer_closed(uv_handle_t *h) { rlredis_unref(h->data); }

struct rlredis *rlredis_new(uv_loop_t *loop, const struct redis_addr *addr, const char *gateway_id) {
  struct rlredis *r = calloc(1, sizeof(*r));
  if (r == NULL) return NULL;
  r->loop = loop;
  redis_session_init(&r->session, "limiter", addr, VTS_REDIS_RECONNECT_MIN_MS, VTS_REDIS_RECONNECT_MAX_MS);
  snprintf(r->gateway_id, sizeof(r->gateway_id), "%s", gateway_id);
  r->gateways = 1;
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
  uv_prepare_init(loop, &r->flush);
  r->flush.data = r;
  r->flush_open = true;
  r->refs++; /* the flush handle */
  uv_timer_init(loop, &r->sweep);
  r->sweep.data = r;
  uv_timer_start(&r->sweep, on_sweep, VTS_REDIS_LEASE_IDLE_MS, VTS_REDIS_LEASE_IDLE_MS);
  uv_unref((uv_handle_t *)&r->sweep); /* the sweep alone must not keep a draining worker's loop alive */
  r->refs++;
  conn_start(r);
  return r;
}

void rlredis_free(struct rlredis *r) {
  if (r == NULL) return;
  /* Unused leases go back while the connection is there to take them. */
  for (unsigned b = 0; b < SENT_BUCKETS; b++)
    while (r->leases[b] != NULL) lease_drop(r, b, r->leases[b]);
  if (r->ac != NULL && r->ready) redis_conn_write_now(r->ac);
  r->closing = true;
  conn_drop(r);
  orphans_free(r, false); /* a lost connection's: no server to take them now */
  /* Checks gathered but not sent: answered now, as the connection's own are. */
  flush_open_batches(r, true);
  uv_close((uv_handle_t *)&r->conn_timer, conn_timer_closed);
  uv_close((uv_handle_t *)&r->sweep, conn_timer_closed);
  if (r->flush_open) {
    r->flush_open = false;
    uv_close((uv_handle_t *)&r->flush, conn_timer_closed);
  }
}

uint32_t rlredis_gateways(const struct rlredis *r) { return r != NULL ? r->gateways : 1; }

void rlredis_stats(const struct rlredis *r, struct ratelimit_stats *out) {
  out->redis_timeouts += r->timeouts;
  out->redis_errors += r->errors;
  out->redis_noscript += r->noscript;
  out->redis_connects += r->connects;
  out->redis_leased += r->leased;
}

/*
 * The redis backend: every check goes to Redis through this worker's rlredis, and what Redis cannot answer is decided
 * by the shared table, fail-open, or refused, fail-closed (see ratelimit.h).
 */
struct rlredis_limiter {
  struct ratelimit base;
  struct rlredis *redis; /* NULL once closing */
  int refs;              /* 1 for the owner, plus each check waiting on Redis */
};

/* One check waiting for Redis: what a fallback needs, copied from the key entry (which a reload may free). */
struct rl_pending {
  struct rlredis_limiter *l;
  rl_cb cb;
  void *arg;
  char digest[65];
  struct rl_limits lim;
  int64_t now; /* the second the check was sent at: its month names the Redis counter a unit was reserved in */
  bool spend;  /* the check reserves a unit of the month, or only reads it */
};

/* What the master prepares for the redis backend before fork, beside the shared table. */
struct rlredis_shared {
  struct ratelimit_shared base;
  /* Resolved once by the master, so that no worker ever blocks on a name lookup (hiredis resolves synchronously). */
  struct redis_addr at;
  /* One identity per gateway run for the fallback counts it owes Redis. */
  char gateway_id[RLREDIS_GATEWAY_ID_BYTES];
};

static int redis_selected(const struct vts_config *cfg) { return cfg->redis_url[0] != '\0'; }

/* Redis holds the quota; the table is only the fallback, so the state directory is not used. */
static int redis_init(const struct vts_config *cfg, struct ratelimit_shared *s, char *err, size_t errlen) {
  struct rlredis_shared *rs = (struct rlredis_shared *)s;
  int rv = redis_conn_resolve(cfg->redis_url, &rs->at, err, errlen);
  if (rv != 0) return rv;
  /* A new identity per run: the table, and so what a past run's fallback counted, does not survive a restart. */
  rv = util_random_hex(rs->gateway_id, (RLREDIS_GATEWAY_ID_BYTES - 1) / 2);
  if (rv != 0) snprintf(err, errlen, "rate limit: no random bytes for the gateway's id: %s", strerror(-rv));
  return rv;
}

static void limiter_unref(struct rlredis_limiter *l) {
  if (--l->refs == 0) free(l);
}

static struct ratelimit *redis_open(uv_loop_t *loop, const struct vts_config *cfg, const struct ratelimit_shared *s) {
  const struct rlredis_shared *rs = (const struct rlredis_shared *)s;
  struct rlredis_limiter *l = calloc(1, sizeof(*l));
  if (l == NULL) return NULL;
  l->base.ops = &ratelimit_redis_ops;
  l->base.loop = loop;
  l->base.cfg = *cfg;
  l->base.table = s->table;
  l->refs = 1;
  l->redis = rlredis_new(loop, &rs->at, rs->gateway_id);
  if (l->redis == NULL) {
    free(l);
    return NULL;
  }
  return &l->base;
}

static void redis_close(struct ratelimit *rl) {
  struct rlredis_limiter *l = (struct rlredis_limiter *)rl;
  /* Checks still waiting are decided inside, and may still ask how many gateways share their key. */
  rlredis_free(l->redis);
  l->redis = NULL;
  limiter_unref(l);
}

/* Redis could not answer: never a 429 for that. */
static void decide_fault(struct rlredis_limiter *l, const char *digest, const struct rl_limits *lim, bool spend,
                         struct rl_decision *d) {
  struct ratelimit *rl = &l->base;
  int64_t now = util_wall_s();
  /* Every request Redis could not decide is one store error; fail-open, it is also one fallback. */
  metrics_ratelimit_store_error(!rl->cfg.rate_limit_fail_closed);
  if (rl->cfg.rate_limit_fail_closed) {
    rlcalc_decision(d, RL_UNAVAILABLE, lim, now, 0, 0);
    return;
  }
  rl->stats.fallbacks++;
  /* Every gateway that shares the key falls back too: each admits its share of what the key had left. */
  rlmem_decide(rl->table, digest, lim, now, spend, rlredis_gateways(l->redis), d, &rl->stats);
  if (d->outcome == RL_UNAVAILABLE) return;
  /* What the fallback counted is owed to Redis, which adds it with the key's next answer (once: see the script). */
  rlmem_owed_add(rl->table, digest, d, spend);
  if (d->reserved_in != RL_STORE_NONE) d->reserved_in = RL_STORE_FALLBACK;
}

static void on_redis_result(void *arg, int status, const struct rlredis_result *res) {
  struct rl_pending *p = arg;
  struct rlredis_limiter *l = p->l;
  struct ratelimit *rl = &l->base;
  struct rl_decision d;
  if (status == 0) {
    int64_t now = util_wall_s();
    rlcalc_decision(&d, res->outcome, &p->lim, now, res->window_used, res->quota_used);
    if (d.outcome == RL_ALLOW && p->spend) rlcalc_reserved(&d, RL_STORE_REDIS, p->digest, rlcalc_month_index(p->now));
    /* Keep the fallback table as far as Redis counted, so a fail-open outage continues from there. */
    rlmem_mirror(rl->table, p->digest, &p->lim, now, res->window_used, res->quota_used);
    /* Redis holds the owed counts the deciding call carried: no need to send them again. */
    if (res->owed_seq != 0) rlmem_owed_acked(rl->table, p->digest, res->owed_seq);
  } else {
    decide_fault(l, p->digest, &p->lim, p->spend, &d);
  }
  rlcalc_count(&rl->stats, &d);
  p->cb(p->arg, &d);
  free(p);
  limiter_unref(l);
}

static void redis_check(struct ratelimit *rl, const char *digest, const struct rl_limits *lim, bool spend, rl_cb cb,
                        void *arg) {
  struct rlredis_limiter *l = (struct rlredis_limiter *)rl;
  struct rl_decision d;
  struct rl_pending *p = malloc(sizeof(*p));
  if (p != NULL) {
    p->l = l;
    p->cb = cb;
    p->arg = arg;
    util_copy_str(p->digest, sizeof(p->digest), digest);
    p->lim = *lim;
    p->now = util_wall_s();
    p->spend = spend;
    struct rl_owed owed;
    rlmem_owed_read(rl->table, digest, rlcalc_window_reset(p->now, lim->window_s), rlcalc_month_index(p->now), p->now,
                    &owed);
    l->refs++;
    if (rlredis_check(l->redis, digest, lim, p->now, &owed, spend, on_redis_result, p) == 0) return;
    l->refs--;
    free(p);
  }
  decide_fault(l, digest, lim, spend, &d);
  rlcalc_count(&rl->stats, &d);
  cb(arg, &d);
}

static void redis_refund(struct ratelimit *rl, enum rl_store in, const char *digest, int64_t month) {
  struct rlredis_limiter *l = (struct rlredis_limiter *)rl;
  if (in == RL_STORE_FALLBACK) {
    /* Reserved while Redis could not answer: the unit is no longer owed to Redis either. */
    rlmem_owed_refund(rl->table, digest, month);
    return;
  }
  /* The table mirrors what Redis counted: it gives the unit back too, so a fallback starts right. */
  rlmem_refund(rl->table, digest, month);
  if (in == RL_STORE_REDIS && l->redis != NULL) rlredis_refund(l->redis, digest, month);
}

static int redis_month_counter(const char *digest, int64_t month, int64_t now, char *name, size_t cap, int64_t *ttl_s) {
  if (cap < RLREDIS_KEY_BYTES) return -ENOSPC;
  rlredis_month_key(name, digest, month);
  *ttl_s = rlredis_month_ttl(month, now);
  return 0;
}

static void redis_stats(const struct ratelimit *rl, struct ratelimit_stats *out) {
  const struct rlredis_limiter *l = (const struct rlredis_limiter *)rl;
  if (l->redis != NULL) rlredis_stats(l->redis, out);
}

const struct rl_backend_ops ratelimit_redis_ops = {
    .version = RL_BACKEND_OPS_VERSION,
    .name = "redis",
    .shared_size = sizeof(struct rlredis_shared),
    .selected = redis_selected,
    .init = redis_init,
    .open = redis_open,
    .close = redis_close,
    .check = redis_check,
    .refund = redis_refund,
    .month_counter = redis_month_counter,
    .stats = redis_stats,
};
