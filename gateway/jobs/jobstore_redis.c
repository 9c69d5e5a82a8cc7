/* Over 800 lines: each operation's Lua script stands beside the C that calls it, and all share the key layout. */
/*
 * Batch jobs in Redis (see jobstore.h and docs/ARCHITECTURE.md "Batch jobs in Redis"). Every operation is one command
 * or one Lua script, so each is atomic and costs one round trip:
 *
 *   vts:job:<id>          hash: the job (key, options, created, updated, total, cancelled), its counts by item status
 *                         (nq, nr, nd, nf, nc) and next, the first item not yet handed to the stream
 *   vts:job:<id>:it       hash: item seq -> its status digit and video id; a running item adds its stream entry, a
 *                         failed one its code and message (tab-separated)
 *   vts:job:<id>:res      hash: item seq -> its answer, 8 hex digits of its size then the zlib stream
 *   vts:jobs:open:<key>   set: the key's jobs with items queued or running (VTS_JOBS_MAX_OPEN)
 *   vts:jobs:rr           sorted set: the jobs with items not yet handed out, by turn (round-robin, see take)
 *   vts:jobs:turn         the last turn given
 *   vts:jobs:later        sorted set: "<id>|<seq>" of items put back (a ration), by the time they are due
 *   vts:jobs:pages        sorted set: the jobs with a page of their list to read, by the time it is due
 *   vts:jobs:hooks:owed   set: the ended jobs owing a webhook with no delivery recorded yet
 *   vts:jobs:hooks        sorted set: the jobs whose delivery is pending, by the time it is due (taken: its lease)
 *   vts:jobs:work         stream with the consumer group "runners": an entry (j, s) is an item handed to a runner;
 *                         it is acknowledged and deleted when the item's end is stored, so the stream holds only the
 *                         items in hand, and its pending list says who holds each and since when
 *
 * A take is one script: an entry idle past JOBSTORE_CLAIM_IDLE_MS (its runner died or froze) is claimed first
 * (XAUTOCLAIM); else an item due again from vts:jobs:later; else the next item of the job whose turn it is, added to
 * the stream; then XREADGROUP hands it to this consumer. A runner renews its entries every JOBSTORE_KEEPALIVE_MS
 * (XCLAIM to itself, only those still its own), so a live runner's items are never claimed. The end of an item (its
 * answer, a failure, a put back) is one script that stores it only while the item is running, with the month's unit
 * when charged, and acknowledges the entry in the same step: stored twice, or by a runner whose entry was claimed
 * meanwhile, it is stored once and counted once. When a job has no item queued or running, its keys expire after
 * VTS_JOB_TTL_S. The scripts name keys they compute, so this layout is for one Redis server (not a Cluster).
 */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/jobs/jobstore_backend.h"
#include "gateway/redis/redis_session.h"

#define WORK_STREAM "vts:jobs:work"
#define WORK_GROUP "runners"
/* An item's entry id and the job's size fit here: "<ms>-<n>". */
#define ENTRY_BYTES 48
/* A script's SHA1 in hex, as SCRIPT LOAD answers it. */
#define SHA_HEX 40
/* Items per HMGET or HSET inside a script: Lua's unpack stays far below its stack limit. */
#define SCRIPT_CHUNK 1000

/* An item this handle took and has not ended: its stream entry, renewed by keepalive, acknowledged at its end. */
struct taken {
  char job_id[JOBSTORE_ID_LEN + 1];
  int64_t seq;
  char entry[ENTRY_BYTES];
};

/*
 * Every script, by name: each is loaded on every new connection and then run by its SHA1 (EVALSHA), so a call sends
 * its arguments and not its text. S_<name> runs <name>_script.
 */
#define SCRIPTS(X) \
  X(create)        \
  X(items)         \
  X(cancel)        \
  X(stored)        \
  X(take)          \
  X(end)           \
  X(take_page)     \
  X(page_done)     \
  X(page_retry)    \
  X(hook_owed)     \
  X(hook_add)      \
  X(hook_take)     \
  X(hook_end)      \
  X(stop_key)      \
  X(keepalive)     \
  X(reserve)       \
  X(unreserve)
#define SCRIPT_ENUM(name) S_##name,
enum script { SCRIPTS(SCRIPT_ENUM) SCRIPT__COUNT };

struct jsredis {
  struct redis_session session; /* where Redis is, the wait after a failure, the down and back lines */
  redisContext *c;              /* NULL while down */
  int64_t ttl_ms;               /* an ended job's keys live this long */
  int timeout_ms;               /* the longest a connect or a reply is waited for */
  char consumer[24];            /* this handle's name in the group */
  struct taken *taken;
  size_t ntaken, cap;
  char sha[SCRIPT__COUNT][SHA_HEX + 1]; /* each script's SHA1 as the connection's SCRIPT LOAD answered it */
};

/* What every script shares: the names, the end of a job, the acknowledgement of an entry. */
#define LUA_PRELUDE                                                                                 \
  "local W, G = '" WORK_STREAM "', '" WORK_GROUP                                                    \
  "'\n"                                                                                             \
  "local function jk(j) return 'vts:job:' .. j end\n"                                               \
  "local function unwork(e)\n"                                                                      \
  "  if e and e ~= '' then redis.call('XACK', W, G, e); redis.call('XDEL', W, e) end\n"             \
  "end\n"                                                                                           \
  "local function now_ms()\n"                                                                       \
  "  local t = redis.call('TIME')\n"                                                                \
  "  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"                            \
  "end\n"                                                                                           \
  "local function kept(key) return 'vts:jobs:kept:' .. key end\n"                                   \
  "local function stored(key)\n"                                                                    \
  "  local n, z, h = 'vts:jobs:n:' .. key, kept(key), 'vts:jobs:sizes:' .. key\n"                   \
  "  for _, g in ipairs(redis.call('ZRANGEBYSCORE', z, '-inf', now_ms(), 'LIMIT', 0, 100)) do\n"    \
  "    local t = redis.call('PTTL', jk(g))\n"                                                       \
  "    if t == -2 then\n"                                                                           \
  "      redis.call('DECRBY', n, tonumber(redis.call('HGET', h, g) or '0'))\n"                      \
  "      redis.call('HDEL', h, g)\n"                                                                \
  "      redis.call('ZREM', z, g)\n"                                                                \
  "    else\n"                                                                                      \
  "      redis.call('ZADD', z, t < 0 and '+inf' or now_ms() + t, g)\n"                              \
  "    end\n"                                                                                       \
  "  end\n"                                                                                         \
  "  return tonumber(redis.call('GET', n) or '0')\n"                                                \
  "end\n"                                                                                           \
  "local function ended(j, ttl)\n"                                                                  \
  "  local k = jk(j)\n"                                                                             \
  "  local c = redis.call('HMGET', k, 'nq', 'nr', 'key', 'webhook_url', 'hook_state', 'cont')\n"    \
  "  if not c[3] or tonumber(c[1]) + tonumber(c[2]) > 0 or (c[6] and c[6] ~= '') then return end\n" \
  "  redis.call('SREM', 'vts:jobs:open:' .. c[3], j)\n"                                             \
  "  redis.call('ZREM', 'vts:jobs:rr', j)\n"                                                        \
  "  if c[4] and c[4] ~= '' and (not c[5] or c[5] == '0') then\n"                                   \
  "    if not c[5] then redis.call('SADD', 'vts:jobs:hooks:owed', j) end\n"                         \
  "    return\n"                                                                                    \
  "  end\n"                                                                                         \
  "  for _, x in ipairs({k, k .. ':it', k .. ':res'}) do redis.call('PEXPIRE', x, ttl) end\n"       \
  "  redis.call('ZADD', kept(c[3]), now_ms() + tonumber(ttl), j)\n"                                 \
  "end\n"

/*
 * ARGV: id, key, now, language, translate, format, webhook_url, webhook_secret, source, the continuation of its list's
 * next page ("" for none), the most items the job may hold, the most open jobs of the key and the most items its jobs
 * may keep (0: no cap), then the video ids. The number of items, or -1 (the key's open jobs are at the cap) or -2
 * (its jobs would keep too many items): nothing made.
 *
 * What a key's jobs keep is counted apart from the jobs, since an ended job's keys expire on their own:
 * vts:jobs:n:<key> the items, vts:jobs:sizes:<key> each job's items, vts:jobs:kept:<key> each job by when its keys
 * expire (+inf while open). Counting (stored) first forgets the jobs whose keys are gone, up to 100 a call.
 */
static const char create_script[] = LUA_PRELUDE
    "local j, n, cap, most = ARGV[1], #ARGV - 13, tonumber(ARGV[12]), tonumber(ARGV[13])\n"
    "if cap > 0 and redis.call('SCARD', 'vts:jobs:open:' .. ARGV[2]) >= cap then return -1 end\n"
    "if most > 0 and stored(ARGV[2]) + n > most then return -2 end\n"
    "local k = jk(j)\n"
    "redis.call('HSET', k, 'key', ARGV[2], 'created', ARGV[3], 'updated', ARGV[3], 'total', n, 'language', ARGV[4],\n"
    "  'translate', ARGV[5], 'format', ARGV[6], 'webhook_url', ARGV[7], 'webhook_secret', ARGV[8], 'source', ARGV[9],\n"
    "  'cancelled', 0, 'nq', n, 'nr', 0, 'nd', 0, 'nf', 0, 'nc', 0, 'next', 1)\n"
    "local a = {}\n"
    "for i = 1, n do\n"
    "  a[#a + 1] = i\n"
    "  a[#a + 1] = '0' .. ARGV[13 + i]\n"
    "  if #a >= 2 * 1000 or i == n then redis.call('HSET', k .. ':it', unpack(a)); a = {} end\n"
    "end\n"
    "redis.call('SADD', 'vts:jobs:open:' .. ARGV[2], j)\n"
    "redis.call('INCRBY', 'vts:jobs:n:' .. ARGV[2], n)\n"
    "redis.call('HSET', 'vts:jobs:sizes:' .. ARGV[2], j, n)\n"
    "redis.call('ZADD', kept(ARGV[2]), '+inf', j)\n"
    "if n > 0 then redis.call('ZADD', 'vts:jobs:rr', 0, j) end\n"
    "if ARGV[10] ~= '' then\n"
    "  redis.call('HSET', k, 'cont', ARGV[10], 'max', ARGV[11], 'please', 0, 'ptries', 0)\n"
    "  redis.call('ZADD', 'vts:jobs:pages', 0, j)\n"
    "end\n"
    "return n\n";

/* ARGV: id, key, after, limit. {more, statuses, answers}, or nil for another key's job or none. */
static const char items_script[] = LUA_PRELUDE
    "local k = jk(ARGV[1])\n"
    "local h = redis.call('HMGET', k, 'key', 'total')\n"
    "if h[1] ~= ARGV[2] then return nil end\n"
    "local after, total = tonumber(ARGV[3]), tonumber(h[2])\n"
    "local last = math.min(total, after + tonumber(ARGV[4]))\n"
    "if last <= after then return {0, {}, {}} end\n"
    "local f = {}\n"
    "for s = after + 1, last do f[#f + 1] = s end\n"
    "return {last < total and 1 or 0, redis.call('HMGET', k .. ':it', unpack(f)),\n"
    "  redis.call('HMGET', k .. ':res', unpack(f))}\n";

/*
 * ARGV: id, key, now, ttl. How many items were cancelled, or -1 for another key's job or none. An ended job (nothing
 * queued or running, no page of its list to read) is left as it is.
 */
static const char cancel_script[] = LUA_PRELUDE
    "local j = ARGV[1]\n"
    "local k = jk(j)\n"
    "local h = redis.call('HMGET', k, 'key', 'total', 'nq', 'nr', 'cont')\n"
    "if h[1] ~= ARGV[2] then return -1 end\n"
    "if tonumber(h[3]) + tonumber(h[4]) == 0 and (not h[5] or h[5] == '') then return 0 end\n"
    "local it, total, n = k .. ':it', tonumber(h[2]), 0\n"
    "for from = 1, total, 1000 do\n"
    "  local f = {}\n"
    "  for s = from, math.min(total, from + 999) do f[#f + 1] = s end\n"
    "  local v = redis.call('HMGET', it, unpack(f))\n"
    "  for i, x in ipairs(v) do\n"
    "    if x and x:sub(1, 1) == '0' then redis.call('HSET', it, f[i], '4' .. x:sub(2, 12)); n = n + 1 end\n"
    "  end\n"
    "end\n"
    "if n > 0 then\n"
    "  redis.call('HINCRBY', k, 'nq', -n)\n"
    "  redis.call('HINCRBY', k, 'nc', n)\n"
    "end\n"
    "redis.call('HSET', k, 'cancelled', 1, 'updated', ARGV[3])\n"
    "redis.call('ZREM', 'vts:jobs:rr', j)\n"
    "redis.call('HSET', k, 'cont', '', 'please', 0)\n"
    "redis.call('ZREM', 'vts:jobs:pages', j)\n"
    "ended(j, ARGV[4])\n"
    "return n\n";

/*
 * ARGV: now, consumer, idle, then the keys to pass over (jobstore_skip). The task {job, seq, video, key, language,
 * translate, format, created, entry, tries}
 * (tries: the item's earlier takes, counted in its field "t<seq>" when it is put back or claimed), or nil. The job
 * whose turn it is has the smallest turn in vts:jobs:rr; it hands out its next queued item and takes the turn after
 * every other job's (a new job's turn is 0: its first item goes next). Entries it finds for items no longer running
 * (cancelled, or ended by a runner that then lost its entry) are acknowledged and passed over.
 */
static const char take_script[] = LUA_PRELUDE
    "local now, C = ARGV[1], ARGV[2]\n"
    "local skip = {}\n"
    "for i = 4, #ARGV do skip[ARGV[i]] = true end\n"
    "local function hand(e, j, s)\n"
    "  local k = jk(j)\n"
    "  local it = k .. ':it'\n"
    "  local v = redis.call('HGET', it, s)\n"
    "  local st = v and v:sub(1, 1)\n"
    "  if st ~= '0' and st ~= '1' then unwork(e); return nil end\n"
    "  local tries = tonumber(redis.call('HGET', it, 't' .. s) or '0')\n"
    "  if st == '0' then\n"
    "    redis.call('HINCRBY', k, 'nq', -1)\n"
    "    redis.call('HINCRBY', k, 'nr', 1)\n"
    "  else\n"
    "    tries = redis.call('HINCRBY', it, 't' .. s, 1)\n"
    "  end\n"
    "  redis.call('HSET', it, s, '1' .. v:sub(2, 12) .. '\\t' .. e)\n"
    "  redis.call('HSET', k, 'updated', now)\n"
    "  local h = redis.call('HMGET', k, 'key', 'language', 'translate', 'format', 'created')\n"
    "  return {j, tostring(s), v:sub(2, 12), h[1], h[2], h[3], h[4], h[5], e, tries}\n"
    "end\n"
    "local c = redis.call('XAUTOCLAIM', W, G, C, ARGV[3], '0-0', 'COUNT', 1)\n"
    "for _, en in ipairs(c[2]) do\n"
    "  if en[2] then\n"
    "    local t = hand(en[1], en[2][2], en[2][4])\n"
    "    if t then return t end\n"
    "  end\n"
    "end\n"
    "local j, s\n"
    "local due, pick = redis.call('ZRANGEBYSCORE', 'vts:jobs:later', '-inf', now, 'LIMIT', 0, 64), nil\n"
    "for _, d in ipairs(due) do\n"
    "  local bar = d:find('|', 1, true)\n"
    "  if not skip[redis.call('HGET', jk(d:sub(1, bar - 1)), 'key') or ''] then pick = d; break end\n"
    "end\n"
    "if pick then\n"
    "  redis.call('ZREM', 'vts:jobs:later', pick)\n"
    "  local bar = pick:find('|', 1, true)\n"
    "  j, s = pick:sub(1, bar - 1), pick:sub(bar + 1)\n"
    "  local v = redis.call('HGET', jk(j) .. ':it', s)\n"
    "  if not v or v:sub(1, 1) ~= '0' then return nil end\n"
    "else\n"
    "  local from = 0\n"
    "  while true do\n"
    "    local r = redis.call('ZRANGE', 'vts:jobs:rr', from, from)\n"
    "    if #r == 0 then return nil end\n"
    "    local k = jk(r[1])\n"
    "    local h = redis.call('HMGET', k, 'next', 'total', 'cancelled', 'key')\n"
    "    local nx, total = tonumber(h[1] or '1'), tonumber(h[2] or '0')\n"
    "    while nx <= total do\n"
    "      local v = redis.call('HGET', k .. ':it', nx)\n"
    "      if v and v:sub(1, 1) == '0' then break end\n"
    "      nx = nx + 1\n"
    "    end\n"
    "    if nx > total or h[3] == '1' then\n"
    "      redis.call('ZREM', 'vts:jobs:rr', r[1])\n"
    "    elseif skip[h[4] or ''] then\n"
    "      from = from + 1\n"
    "    else\n"
    "      j, s = r[1], nx\n"
    "      redis.call('HSET', k, 'next', nx + 1)\n"
    "      if nx >= total then\n"
    "        redis.call('ZREM', 'vts:jobs:rr', j)\n"
    "      else\n"
    "        redis.call('ZADD', 'vts:jobs:rr', redis.call('INCR', 'vts:jobs:turn'), j)\n"
    "      end\n"
    "      break\n"
    "    end\n"
    "  end\n"
    "end\n"
    "redis.call('XADD', W, '*', 'j', j, 's', s)\n"
    "local rd = redis.call('XREADGROUP', 'GROUP', G, C, 'COUNT', 1, 'STREAMS', W, '>')\n"
    "local en = rd and rd[1][2][1]\n"
    "if not en then return nil end\n"
    "return hand(en[1], en[2][2], en[2][4])\n";

/*
 * The end of a running item. ARGV: id, seq, entry (this runner's, "" when unknown), now, ttl, mode ("d" done, "f"
 * failed, "r" put back), then for d: the answer, the counter ("" for none), the quota, the counter's lifetime, the
 * code and message of a month used up; for f: code, message; for r: the time it is due. Returns 1 (stored; for d,
 * counted), 0 (d: the month is used up, failed instead), -1 (not running: nothing stored, the entry acknowledged).
 */
static const char end_script[] = LUA_PRELUDE
    "local j, s, mode = ARGV[1], ARGV[2], ARGV[6]\n"
    "local k = jk(j)\n"
    "local it = k .. ':it'\n"
    "local v = redis.call('HGET', it, s)\n"
    "if not v or v:sub(1, 1) ~= '1' then unwork(ARGV[3]); return -1 end\n"
    "local tab = v:find('\\t', 1, true)\n"
    "local e = tab and v:sub(tab + 1) or ARGV[3]\n"
    "local vid, r = v:sub(2, 12), 1\n"
    "if mode == 'd' and ARGV[8] ~= '' then\n"
    "  if tonumber(redis.call('GET', ARGV[8]) or '0') >= tonumber(ARGV[9]) then\n"
    "    r = 0\n"
    "  elseif redis.call('INCR', ARGV[8]) == 1 then\n"
    "    redis.call('EXPIRE', ARGV[8], ARGV[10])\n"
    "  end\n"
    "end\n"
    "if mode == 'd' and r == 1 then\n"
    "  redis.call('HDEL', it, 'u' .. s)\n"
    "  redis.call('HSET', it, s, '2' .. vid)\n"
    "  redis.call('HSET', k .. ':res', s, ARGV[7])\n"
    "  redis.call('HINCRBY', k, 'nd', 1)\n"
    "elseif mode == 'r' then\n"
    "  redis.call('HSET', it, s, '0' .. vid)\n"
    "  redis.call('HINCRBY', k, 'nq', 1)\n"
    "  redis.call('ZADD', 'vts:jobs:later', ARGV[7], j .. '|' .. s)\n"
    "  redis.call('HINCRBY', it, 't' .. s, 1)\n"
    "else\n"
    "  local code, msg = ARGV[7], ARGV[8]\n"
    "  if mode == 'd' then code, msg = ARGV[11], ARGV[12] end\n"
    "  redis.call('HSET', it, s, '3' .. vid .. '\\t' .. code .. '\\t' .. msg)\n"
    "  redis.call('HINCRBY', k, 'nf', 1)\n"
    "end\n"
    "redis.call('HINCRBY', k, 'nr', -1)\n"
    "redis.call('HSET', k, 'updated', ARGV[4])\n"
    "unwork(e)\n"
    "if e ~= ARGV[3] then unwork(ARGV[3]) end\n"
    "ended(j, ARGV[5])\n"
    "return r\n";

/*
 * Playlists and channels (jobstore.h): a job whose list has pages still to read keeps the next one's continuation in
 * its hash (cont, with max, the most items it may hold; please, the end of a taken page's lease; ptries) and is in
 * vts:jobs:pages by the time the page is due (while taken, by the end of its lease: a reader that died loses it then).
 * A page read appends its ids the job does not hold yet, as queued items; the job does not end while cont is set.
 */
/*
 * ARGV: now, lease, then the keys to pass over. {job, token, tries, key, created, read} or nil. A job's pages read
 * (pread) count the first, read when it was made.
 */
static const char take_page_script[] = LUA_PRELUDE
    "local skip = {}\n"
    "for i = 3, #ARGV do skip[ARGV[i]] = true end\n"
    "local j, k, h\n"
    "for _, c in ipairs(redis.call('ZRANGEBYSCORE', 'vts:jobs:pages', '-inf', ARGV[1], 'LIMIT', 0, 64)) do\n"
    "  local x = redis.call('HMGET', jk(c), 'cont', 'ptries', 'key', 'created', 'cancelled', 'pread')\n"
    "  if not x[1] or x[1] == '' or x[5] == '1' then\n"
    "    redis.call('ZREM', 'vts:jobs:pages', c)\n"
    "  elseif not skip[x[3] or ''] then\n"
    "    j, k, h = c, jk(c), x\n"
    "    break\n"
    "  end\n"
    "end\n"
    "if not j then return nil end\n"
    "local lease = tonumber(ARGV[1]) + tonumber(ARGV[2])\n"
    "redis.call('ZADD', 'vts:jobs:pages', lease, j)\n"
    "redis.call('HSET', k, 'please', lease)\n"
    "redis.call('HINCRBY', k, 'ptries', 1)\n"
    "return {j, h[1], tonumber(h[2] or '0'), h[3], h[4], tonumber(h[6] or '1')}\n";

/*
 * ARGV: job, now, ttl, next ("" ends the list), read, max pages (0: no bound), the caller's reason for a list it ends
 * ("" for none), then the page's ids. {added} or -1 (not taken). A bounded list stops, with the job's stop reason,
 * at a page that added no id or once max pages are read.
 */
static const char page_done_script[] = LUA_PRELUDE
    "local j = ARGV[1]\n"
    "local k = jk(j)\n"
    "local it = k .. ':it'\n"
    "local h = redis.call('HMGET', k, 'please', 'max', 'total', 'cont', 'key')\n"
    "if not h[1] or h[1] == '0' or not h[4] or h[4] == '' then return -1 end\n"
    "local max, total = tonumber(h[2]), tonumber(h[3])\n"
    "local held = {}\n"
    "for _, v in ipairs(redis.call('HVALS', it)) do\n"
    "  if #v >= 12 then held[v:sub(2, 12)] = true end\n"
    "end\n"
    "local added, a = 0, {}\n"
    "for i = 8, #ARGV do\n"
    "  if total >= max then break end\n"
    "  local id = ARGV[i]\n"
    "  if not held[id] then\n"
    "    held[id] = true\n"
    "    total = total + 1\n"
    "    added = added + 1\n"
    "    a[#a + 1] = total\n"
    "    a[#a + 1] = '0' .. id\n"
    "    if #a >= 2000 then redis.call('HSET', it, unpack(a)); a = {} end\n"
    "  end\n"
    "end\n"
    "if #a > 0 then redis.call('HSET', it, unpack(a)) end\n"
    "redis.call('HSET', k, 'total', total, 'updated', ARGV[2], 'please', 0, 'ptries', 0)\n"
    "if added > 0 then\n"
    "  redis.call('HINCRBY', k, 'nq', added)\n"
    "  redis.call('INCRBY', 'vts:jobs:n:' .. h[5], added)\n"
    "  redis.call('HINCRBY', 'vts:jobs:sizes:' .. h[5], j, added)\n"
    "  redis.call('ZADD', 'vts:jobs:rr', 'NX', redis.call('INCR', 'vts:jobs:turn'), j)\n"
    "end\n"
    "local named, stop = ARGV[4] ~= '' and total < max, nil\n"
    "local bounded = tonumber(ARGV[6]) > 0\n"
    "if named and bounded and added == 0 then stop = '" JOBSTORE_STOP_NO_NEW_IDS
    "'\n"
    "elseif named and bounded and tonumber(ARGV[5]) >= tonumber(ARGV[6]) then stop = '" JOBSTORE_STOP_MAX_PAGES
    "'\n"
    "elseif not named and ARGV[7] ~= '' then stop = ARGV[7] end\n"
    "if stop then redis.call('HSET', k, 'stop', stop) end\n"
    "if not named or stop then\n"
    "  redis.call('HSET', k, 'cont', '')\n"
    "  redis.call('ZREM', 'vts:jobs:pages', j)\n"
    "  ended(j, ARGV[3])\n"
    "else\n"
    "  redis.call('HSET', k, 'cont', ARGV[4], 'pread', ARGV[5])\n"
    "  redis.call('ZADD', 'vts:jobs:pages', 0, j)\n"
    "end\n"
    "return added\n";

/* ARGV: job, not_before, now. 0, or -1 (not taken). */
static const char page_retry_script[] = LUA_PRELUDE
    "local k = jk(ARGV[1])\n"
    "local h = redis.call('HMGET', k, 'please', 'cont')\n"
    "if not h[1] or h[1] == '0' or not h[2] or h[2] == '' then return -1 end\n"
    "redis.call('HSET', k, 'please', 0, 'updated', ARGV[3])\n"
    "redis.call('ZADD', 'vts:jobs:pages', ARGV[2], ARGV[1])\n"
    "return 0\n";

/*
 * Webhooks (jobstore.h): a job that ends with a webhook_url and no delivery recorded joins vts:jobs:hooks:owed (and
 * its keys do not expire); its delivery lives in its hash (hook_state 0 pending, 1 delivered, 2 given up;
 * hook_attempts, hook_made, hook_body, hook_status), and a pending one is in vts:jobs:hooks by the time it is due
 * (while taken, by the end of its lease). A delivery that ends lets its job expire.
 */
/* ARGV: (none). {job, key} or nil. */
static const char hook_owed_script[] = LUA_PRELUDE
    "while true do\n"
    "  local j = redis.call('SRANDMEMBER', 'vts:jobs:hooks:owed')\n"
    "  if not j then return nil end\n"
    "  local h = redis.call('HMGET', jk(j), 'key', 'hook_state')\n"
    "  if h[1] and not h[2] then return {j, h[1]} end\n"
    "  redis.call('SREM', 'vts:jobs:hooks:owed', j)\n"
    "end\n";

/* ARGV: job, body, now. 0. */
static const char hook_add_script[] = LUA_PRELUDE
    "local k = jk(ARGV[1])\n"
    "redis.call('SREM', 'vts:jobs:hooks:owed', ARGV[1])\n"
    "if redis.call('EXISTS', k) == 0 or redis.call('HEXISTS', k, 'hook_state') == 1 then return 0 end\n"
    "redis.call('HSET', k, 'hook_state', 0, 'hook_attempts', 0, 'hook_made', ARGV[3], 'hook_body', ARGV[2],\n"
    "  'hook_status', 0)\n"
    "redis.call('ZADD', 'vts:jobs:hooks', ARGV[3], ARGV[1])\n"
    "return 0\n";

/* ARGV: now, lease, then the keys to pass over. {job, url, secret, attempt, made, body, key} or nil. */
static const char hook_take_script[] = LUA_PRELUDE
    "local skip = {}\n"
    "for i = 3, #ARGV do skip[ARGV[i]] = true end\n"
    "for _, j in ipairs(redis.call('ZRANGEBYSCORE', 'vts:jobs:hooks', '-inf', ARGV[1], 'LIMIT', 0, 64)) do\n"
    "  local k = jk(j)\n"
    "  local h = redis.call('HMGET', k, 'hook_state', 'webhook_url', 'webhook_secret', 'hook_made', 'hook_body', "
    "'key')\n"
    "  if h[1] ~= '0' then\n"
    "    redis.call('ZREM', 'vts:jobs:hooks', j)\n"
    "  elseif not skip[h[6] or ''] then\n"
    "    local n = redis.call('HINCRBY', k, 'hook_attempts', 1)\n"
    "    redis.call('ZADD', 'vts:jobs:hooks', tonumber(ARGV[1]) + tonumber(ARGV[2]), j)\n"
    "    return {j, h[2], h[3], n, h[4], h[5], h[6]}\n"
    "  end\n"
    "end\n"
    "return nil\n";

/*
 * ARGV: key, reason, now, ttl. How many jobs were stopped. Every open job of the key is cancelled with the reason (its
 * queued items cancelled, its list ended), and no delivery of its jobs is tried again: a pending one, an owed one and
 * one its running items would owe later are given up.
 */
static const char stop_key_script[] = LUA_PRELUDE
    "local key, n = ARGV[1], 0\n"
    "for _, j in ipairs(redis.call('SMEMBERS', 'vts:jobs:open:' .. key)) do\n"
    "  local k = jk(j)\n"
    "  local h = redis.call('HMGET', k, 'total', 'webhook_url', 'hook_state')\n"
    "  local it, total, c = k .. ':it', tonumber(h[1] or '0'), 0\n"
    "  for from = 1, total, 1000 do\n"
    "    local f = {}\n"
    "    for s = from, math.min(total, from + 999) do f[#f + 1] = s end\n"
    "    local v = redis.call('HMGET', it, unpack(f))\n"
    "    for i, x in ipairs(v) do\n"
    "      if x and x:sub(1, 1) == '0' then redis.call('HSET', it, f[i], '4' .. x:sub(2, 12)); c = c + 1 end\n"
    "    end\n"
    "  end\n"
    "  if c > 0 then\n"
    "    redis.call('HINCRBY', k, 'nq', -c)\n"
    "    redis.call('HINCRBY', k, 'nc', c)\n"
    "  end\n"
    "  redis.call('HSET', k, 'cancelled', 1, 'updated', ARGV[3], 'stop', ARGV[2], 'cont', '', 'please', 0)\n"
    "  if h[2] and h[2] ~= '' and (not h[3] or h[3] == '0') then redis.call('HSET', k, 'hook_state', 2) end\n"
    "  redis.call('ZREM', 'vts:jobs:rr', j)\n"
    "  redis.call('ZREM', 'vts:jobs:pages', j)\n"
    "  ended(j, ARGV[4])\n"
    "  n = n + 1\n"
    "end\n"
    "local function give_up(j)\n"
    "  local k = jk(j)\n"
    "  if redis.call('HGET', k, 'key') ~= key then return end\n"
    "  redis.call('HSET', k, 'hook_state', 2)\n"
    "  redis.call('ZREM', 'vts:jobs:hooks', j)\n"
    "  redis.call('SREM', 'vts:jobs:hooks:owed', j)\n"
    "  ended(j, ARGV[4])\n"
    "end\n"
    "for _, j in ipairs(redis.call('ZRANGE', 'vts:jobs:hooks', 0, -1)) do give_up(j) end\n"
    "for _, j in ipairs(redis.call('SMEMBERS', 'vts:jobs:hooks:owed')) do give_up(j) end\n"
    "return n\n";

/* ARGV: job, state, next, status, ttl. 0 or -1 (no pending delivery). */
static const char hook_end_script[] = LUA_PRELUDE
    "local j = ARGV[1]\n"
    "local k = jk(j)\n"
    "if redis.call('HGET', k, 'hook_state') ~= '0' then return -1 end\n"
    "redis.call('HSET', k, 'hook_state', ARGV[2], 'hook_status', ARGV[4])\n"
    "if ARGV[2] == '0' then\n"
    "  redis.call('ZADD', 'vts:jobs:hooks', ARGV[3], j)\n"
    "else\n"
    "  redis.call('ZREM', 'vts:jobs:hooks', j)\n"
    "  ended(j, ARGV[5])\n"
    "end\n"
    "return 0\n";

/* ARGV: consumer, then entries. Each still this consumer's is made fresh (its idle time 0). */
static const char keepalive_script[] = LUA_PRELUDE
    "for i = 2, #ARGV do\n"
    "  local p = redis.call('XPENDING', W, G, ARGV[i], ARGV[i], 1)\n"
    "  if p[1] and p[1][2] == ARGV[1] then redis.call('XCLAIM', W, G, ARGV[1], 0, ARGV[i], 'JUSTID') end\n"
    "end\n"
    "return 0\n";

/* ARGV: key. The items its jobs keep (expired ones pruned first, up to 100 a call). */
static const char stored_script[] = LUA_PRELUDE "return stored(ARGV[1])\n";

/*
 * An item's unit of the month, held before its platform request and marked on the item (field u<seq> of its job's
 * items), so that a runner that claims the item from a dead one finds it held and takes none more. ARGV: job id, seq,
 * the counter, the quota, the counter's lifetime. 1 (held), 0 (the month is used up), -1 (no such job).
 */
static const char reserve_script[] = LUA_PRELUDE
    "local k = jk(ARGV[1])\n"
    "if redis.call('EXISTS', k) == 0 then return -1 end\n"
    "local it, u = k .. ':it', 'u' .. ARGV[2]\n"
    "if redis.call('HEXISTS', it, u) == 1 then return 1 end\n"
    "if tonumber(redis.call('GET', ARGV[3]) or '0') >= tonumber(ARGV[4]) then return 0 end\n"
    "if redis.call('INCR', ARGV[3]) == 1 then redis.call('EXPIRE', ARGV[3], ARGV[5]) end\n"
    "redis.call('HSET', it, u, 1)\n"
    "return 1\n";

/* The item's held unit given back, once (a counter that expired or holds nothing is left alone). ARGV as above. */
static const char unreserve_script[] = LUA_PRELUDE
    "if redis.call('HDEL', jk(ARGV[1]) .. ':it', 'u' .. ARGV[2]) == 1 and\n"
    "   tonumber(redis.call('GET', ARGV[3]) or '0') > 0 then\n"
    "  redis.call('DECR', ARGV[3])\n"
    "end\n"
    "return 1\n";

#define SCRIPT_TEXT(name) [S_##name] = name##_script,
static const char *const script_text[] = {SCRIPTS(SCRIPT_TEXT)};

/*
 * Loads scripts from to to (excluded) on c, pipelined (one round trip), into sha. 0, or -EIO with err filled (c->err
 * set when the connection broke rather than Redis refusing).
 */
static int scripts_load(redisContext *c, char (*sha)[SHA_HEX + 1], enum script from, enum script to, char *err,
                        size_t errlen) {
  for (enum script s = from; s < to; s++) {
    const char *argv[] = {"SCRIPT", "LOAD", script_text[s]};
    if (redisAppendCommandArgv(c, 3, argv, NULL) != REDIS_OK) {
      snprintf(err, errlen, "%s", c->errstr);
      return -EIO;
    }
  }
  int rv = 0;
  for (enum script s = from; s < to; s++) {
    redisReply *rep = NULL;
    if (redisGetReply(c, (void **)&rep) != REDIS_OK) {
      snprintf(err, errlen, "%s", c->errstr);
      return -EIO;
    }
    if (rv == 0 && (rep->type != REDIS_REPLY_STRING || rep->len != SHA_HEX)) {
      snprintf(err, errlen, "%s", rep->type == REDIS_REPLY_ERROR ? rep->str : "SCRIPT LOAD answered no SHA1");
      rv = -EIO;
    }
    if (rv == 0) memcpy(sha[s], rep->str, SHA_HEX + 1);
    freeReplyObject(rep);
  }
  return rv;
}

/* The connection, (re)opened when it is down and the session's wait after the last failure is over; NULL otherwise. */
static redisContext *conn(struct jsredis *r) {
  if (r->c != NULL) return r->c;
  if (!redis_session_may_try(&r->session, util_now_ms())) return NULL;
  char err[256] = "";
  redisContext *c = redis_session_open_sync(&r->session, r->timeout_ms, err, sizeof(err));
  if (c != NULL) {
    /* The group exists from the first connection on; BUSYGROUP (made already) is the usual answer. */
    redisReply *rep = redisCommand(c, "XGROUP CREATE " WORK_STREAM " " WORK_GROUP " 0 MKSTREAM");
    int ok = rep != NULL && (rep->type != REDIS_REPLY_ERROR || strncmp(rep->str, "BUSYGROUP", 9) == 0);
    if (!ok) snprintf(err, sizeof(err), "%s", rep != NULL ? rep->str : c->errstr);
    freeReplyObject(rep);
    if (ok) ok = scripts_load(c, r->sha, 0, SCRIPT__COUNT, err, sizeof(err)) == 0;
    if (!ok) {
      redisFree(c);
      c = NULL;
    }
  }
  if (c == NULL) {
    redis_session_down(&r->session, err, util_now_ms());
    return NULL;
  }
  r->c = c;
  redis_session_up(&r->session);
  return c;
}

/* A reply that did not come (timeout, closed connection): the connection is dropped and not tried for a while. */
static void conn_lost(struct jsredis *r) {
  redis_session_down(&r->session, r->c != NULL ? r->c->errstr : "no connection", util_now_ms());
  redisFree(r->c);
  r->c = NULL;
}

/* One command sent: its reply (an error too), or NULL when Redis did not answer (the connection dropped). */
static redisReply *send_argv(struct jsredis *r, int argc, const char **argv, const size_t *lens) {
  redisContext *c = conn(r);
  if (c == NULL) return NULL;
  redisReply *rep = redisCommandArgv(c, argc, argv, lens);
  if (rep == NULL && (c->err == REDIS_ERR_EOF || (c->err == REDIS_ERR_IO && (errno == ECONNRESET || errno == EPIPE)))) {
    /* The server closed an idle connection (a restart, a timeout of its own): once more on a new one. Each call is
     * safe to repeat (a take repeated leaves its first item to be claimed; every end is stored once). */
    redisFree(r->c);
    r->c = NULL;
    c = conn(r);
    if (c == NULL) return NULL;
    rep = redisCommandArgv(c, argc, argv, lens);
  }
  if (rep == NULL) conn_lost(r);
  return rep;
}

/* An error Redis answered, logged and taken as no answer (the reply freed); any other reply as it is. */
static redisReply *refused(struct jsredis *r, redisReply *rep) {
  if (rep != NULL && rep->type == REDIS_REPLY_ERROR) {
    log_msg(LOG_ERROR, "job store: Redis refused a command", "error", rep->str, NULL);
    /* The stream or its group is gone (deleted, or a Redis restarted empty under us): the next call reconnects,
     * which makes them again. */
    if (strstr(rep->str, "NOGROUP") != NULL) {
      redisFree(r->c);
      r->c = NULL;
    }
    freeReplyObject(rep);
    return NULL;
  }
  return rep;
}

/* One command; NULL when Redis did not answer or answered an error (logged). The caller frees the reply. */
static redisReply *command(struct jsredis *r, int argc, const char **argv, const size_t *lens) {
  return refused(r, send_argv(r, argc, argv, lens));
}

/* EVALSHA's head before a script's arguments: the command, the SHA1, no keys (the scripts name the keys they use). */
#define SCRIPT_HEAD 3
/* Calls with up to this many words build them on the stack; longer ones (a job's ids, a skip list) allocate. */
#define SCRIPT_ARGC_STACK 16

/*
 * Script s run with its n arguments (lens NULL: each NUL-terminated), as command() answers: every script call goes
 * through here. A NOSCRIPT (Redis restarted empty, SCRIPT FLUSH, a failover to a replica that never loaded it) loads
 * the script again on the same connection and repeats the call once, so the caller sees the answer it would have had.
 */
static redisReply *script_call(struct jsredis *r, enum script s, int n, const char *const *args, const size_t *lens) {
  const char *stack_v[SCRIPT_ARGC_STACK];
  size_t stack_len[SCRIPT_ARGC_STACK];
  const char **v = stack_v;
  size_t *len = stack_len;
  int argc = SCRIPT_HEAD + n;
  if (argc > SCRIPT_ARGC_STACK) {
    v = calloc((size_t)argc, sizeof(*v));
    len = calloc((size_t)argc, sizeof(*len));
    if (v == NULL || len == NULL) {
      free(v);
      free(len);
      return NULL;
    }
  }
  /* The SHA1 is read when the command is sent, after conn() (re)loaded it on a new connection. */
  v[0] = "EVALSHA";
  len[0] = 7;
  v[1] = r->sha[s];
  len[1] = SHA_HEX;
  v[2] = "0";
  len[2] = 1;
  for (int i = 0; i < n; i++) {
    v[SCRIPT_HEAD + i] = args[i];
    len[SCRIPT_HEAD + i] = lens != NULL ? lens[i] : strlen(args[i]);
  }
  redisReply *rep = send_argv(r, argc, v, len);
  if (rep != NULL && rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOSCRIPT", 8) == 0) {
    freeReplyObject(rep);
    rep = NULL;
    char err[256] = "";
    if (scripts_load(r->c, r->sha, s, s + 1, err, sizeof(err)) == 0) {
      rep = send_argv(r, argc, v, len);
    } else if (r->c->err != 0) {
      conn_lost(r);
    } else {
      log_msg(LOG_ERROR, "job store: Redis refused a command", "error", err, NULL);
    }
  }
  if (v != stack_v) {
    free(v);
    free(len);
  }
  return refused(r, rep);
}

/* Arguments of one call, with their lengths. */
struct args {
  const char **v;
  size_t *len;
  int n, cap;
};

static int args_init(struct args *a, int cap) {
  a->v = calloc((size_t)cap, sizeof(*a->v));
  a->len = calloc((size_t)cap, sizeof(*a->len));
  a->n = 0;
  a->cap = cap;
  return a->v != NULL && a->len != NULL ? 0 : -ENOMEM;
}

static void args_free(struct args *a) {
  free(a->v);
  free(a->len);
}

static void arg_n(struct args *a, const void *p, size_t n) {
  if (a->n == a->cap) return; /* every caller sizes its array: never reached */
  a->v[a->n] = p;
  a->len[a->n++] = n;
}

static void arg(struct args *a, const char *s) { arg_n(a, s, strlen(s)); }

static void rs_close(void *self) {
  struct jsredis *r = self;
  redisFree(r->c);
  free(r->taken);
  free(r);
}

/* Where Redis is, resolved by the master before fork (rs_init). */
static struct redis_addr redis_at;
static char redis_at_url[CONFIG_STR_MAX]; /* the URL redis_at was resolved from, "" before */

static int rs_selected(const struct vts_config *cfg) { return cfg->redis_url[0] != '\0'; }

static int rs_init(const struct vts_config *cfg, char *err, size_t errlen) {
  redis_at_url[0] = '\0';
  int rv = redis_conn_resolve(cfg->redis_url, &redis_at, err, errlen);
  if (rv == 0) util_copy_str(redis_at_url, sizeof(redis_at_url), cfg->redis_url);
  return rv;
}

/* Not connected here: a Redis down at start is tried by the first call, and a worker starts regardless. */
static int rs_open(const struct vts_config *cfg, int timeout_ms, void **self, char *err, size_t errlen) {
  /* A process the master did not prepare (a test, a tool) resolves here. */
  if (strcmp(redis_at_url, cfg->redis_url) != 0) {
    int rv = rs_init(cfg, err, errlen);
    if (rv != 0) return rv;
  }
  struct jsredis *r = calloc(1, sizeof(*r));
  if (r == NULL) return -ENOMEM;
  /* Each failure waits VTS_JOBS_REDIS_RETRY_MS doubling to VTS_JOBS_REDIS_RETRY_MAX_MS: a long outage costs the
   * caller one bounded wait every few seconds, not every second. */
  redis_session_init(&r->session, "jobs", &redis_at, VTS_JOBS_REDIS_RETRY_MS, VTS_JOBS_REDIS_RETRY_MAX_MS);
  r->ttl_ms = cfg->job_ttl_s * 1000;
  r->timeout_ms = timeout_ms;
  char hex[17];
  int rv = util_random_hex(hex, 8);
  if (rv != 0) {
    snprintf(err, errlen, "no random bytes for the runner's name");
    free(r);
    return rv;
  }
  snprintf(r->consumer, sizeof(r->consumer), "r%s", hex);
  *self = r;
  return 0;
}

static int rs_create(void *self, const struct jobstore_spec *spec, const char (*video_ids)[VTS_VIDEO_ID_LEN + 1],
                     size_t n, int64_t now_ms, const char *job_id) {
  struct jsredis *r = self;
  struct args a;
  if (args_init(&a, 13 + (int)n) != 0) {
    args_free(&a);
    return -ENOMEM;
  }
  char now[24];
  snprintf(now, sizeof(now), "%" PRId64, now_ms);
  arg(&a, job_id);
  arg(&a, spec->key_id);
  arg(&a, now);
  arg(&a, spec->language);
  arg(&a, spec->translate);
  arg(&a, spec->format);
  arg(&a, spec->webhook_url);
  arg(&a, spec->webhook_secret);
  arg(&a, spec->source);
  char max[24];
  snprintf(max, sizeof(max), "%zu", spec->max_items);
  arg(&a, spec->continuation != NULL ? spec->continuation : "");
  arg(&a, max);
  char open_cap[24];
  snprintf(open_cap, sizeof(open_cap), "%zu", spec->max_open);
  arg(&a, open_cap);
  char stored_cap[24];
  snprintf(stored_cap, sizeof(stored_cap), "%zu", spec->max_stored);
  arg(&a, stored_cap);
  for (size_t i = 0; i < n; i++) arg_n(&a, video_ids[i], VTS_VIDEO_ID_LEN);
  redisReply *rep = script_call(r, S_create, a.n, a.v, a.len);
  args_free(&a);
  int rv = rep == NULL || rep->type != REDIS_REPLY_INTEGER ? -EIO
           : rep->integer == -2                            ? -ENOSPC
           : rep->integer < 0                              ? -EDQUOT
                                                           : 0;
  freeReplyObject(rep);
  return rv;
}

static int64_t num_of(const redisReply *e) {
  int64_t v = 0;
  if (e != NULL && e->type == REDIS_REPLY_STRING) util_parse_i64_n(e->str, e->len, INT64_MIN, INT64_MAX, &v);
  return v;
}

static void str_of(const redisReply *e, char *out, size_t cap) {
  snprintf(out, cap, "%.*s", e != NULL && e->type == REDIS_REPLY_STRING ? (int)e->len : 0,
           e != NULL && e->type == REDIS_REPLY_STRING ? e->str : "");
}

static int rs_get(void *self, const char *key_id, const char *job_id, struct jobstore_job *out) {
  struct jsredis *r = self;
  memset(out, 0, sizeof(*out));
  char k[JOBSTORE_ID_LEN + 16];
  snprintf(k, sizeof(k), "vts:job:%s", job_id);
  const char *argv[] = {"HMGET", k,          "key",       "cancelled", "created",     "updated",
                        "total", "language", "translate", "format",    "webhook_url", "webhook_secret",
                        "nq",    "nr",       "nd",        "nf",        "nc",          "cont",
                        "stop"};
  enum { N = sizeof(argv) / sizeof(argv[0]) };
  redisReply *rep = command(r, N, argv, NULL);
  if (rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements != N - 2) {
    freeReplyObject(rep);
    return -EIO;
  }
  redisReply **e = rep->element;
  if (e[0]->type != REDIS_REPLY_STRING || strlen(key_id) != e[0]->len || memcmp(e[0]->str, key_id, e[0]->len) != 0) {
    freeReplyObject(rep);
    return -ENOENT;
  }
  snprintf(out->id, sizeof(out->id), "%s", job_id);
  int cancelled = num_of(e[1]) != 0;
  out->created_ms = num_of(e[2]);
  out->updated_ms = num_of(e[3]);
  out->total = (size_t)num_of(e[4]);
  str_of(e[5], out->language, sizeof(out->language));
  str_of(e[6], out->translate, sizeof(out->translate));
  str_of(e[7], out->format, sizeof(out->format));
  str_of(e[8], out->webhook_url, sizeof(out->webhook_url));
  str_of(e[9], out->webhook_secret, sizeof(out->webhook_secret));
  for (int s = 0; s < ITEM__COUNT; s++) out->counts[s] = (size_t)num_of(e[10 + s]);
  out->more = e[15]->type == REDIS_REPLY_STRING && e[15]->len > 0;
  str_of(e[16], out->stop_reason, sizeof(out->stop_reason));
  freeReplyObject(rep);
  out->status = jobstore_job_status(out, cancelled);
  return 0;
}

/* One item of a page from its stored forms: "<status><video id>[\t<entry> | \t<code>\t<message>]" and its answer. */
static int item_call(int64_t seq, const redisReply *v, const redisReply *b, jobstore_item_fn fn, void *ctx) {
  if (v->type != REDIS_REPLY_STRING || v->len < 1 + VTS_VIDEO_ID_LEN) return -EBADMSG;
  struct jobstore_item it = {.seq = seq};
  memcpy(it.video_id, v->str + 1, VTS_VIDEO_ID_LEN);
  int s = v->str[0] - '0';
  it.status = s >= 0 && s < ITEM__COUNT ? (enum jobstore_item_status)s : ITEM_FAILED;
  char code[64] = "", message[256] = "";
  if (it.status == ITEM_FAILED && v->len > 1 + VTS_VIDEO_ID_LEN) {
    const char *p = v->str + 2 + VTS_VIDEO_ID_LEN, *end = v->str + v->len;
    const char *tab = memchr(p, '\t', (size_t)(end - p));
    if (tab != NULL) {
      snprintf(code, sizeof(code), "%.*s", (int)(tab - p), p);
      snprintf(message, sizeof(message), "%.*s", (int)(end - tab - 1), tab + 1);
      it.error_code = code;
      it.error_message = message;
    }
  }
  char *plain = NULL;
  if (it.status == ITEM_DONE) {
    int64_t len = 0;
    if (b->type != REDIS_REPLY_STRING || b->len < 8 || util_parse_i64_n(b->str, 8, 0, INT64_MAX, &len) != 0)
      return -EBADMSG;
    int rv = jobstore_inflate(b->str + 8, b->len - 8, len, &plain);
    if (rv != 0) return rv;
    it.body = plain;
    it.body_len = (size_t)len;
  }
  int rv = fn(ctx, &it);
  free(plain);
  return rv;
}

/*
 * One read of the items script: up to count items after from, walked into fn. Returns 0 with *last (the last item
 * walked), *more (items follow the ones read) and *full (fn found the page full: it ends before *last + 1), or an
 * error.
 */
static int items_chunk(struct jsredis *r, const char *key_id, const char *job_id, int64_t from, size_t count,
                       jobstore_item_fn fn, void *ctx, int64_t *last, int *more, int *full) {
  char after_s[24], count_s[24];
  snprintf(after_s, sizeof(after_s), "%" PRId64, from);
  snprintf(count_s, sizeof(count_s), "%zu", count);
  const char *argv[] = {job_id, key_id, after_s, count_s};
  redisReply *rep = script_call(r, S_items, 4, argv, NULL);
  if (rep == NULL) return -EIO;
  if (rep->type == REDIS_REPLY_NIL) {
    freeReplyObject(rep);
    return -ENOENT;
  }
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 3 || rep->element[1]->type != REDIS_REPLY_ARRAY ||
      rep->element[2]->type != REDIS_REPLY_ARRAY || rep->element[1]->elements != rep->element[2]->elements) {
    freeReplyObject(rep);
    return -EIO;
  }
  *more = rep->element[0]->type == REDIS_REPLY_INTEGER && rep->element[0]->integer == 1;
  const redisReply *vs = rep->element[1], *bs = rep->element[2];
  int rv = 0;
  *last = from;
  for (size_t i = 0; i < vs->elements; i++) {
    rv = item_call(from + 1 + (int64_t)i, vs->element[i], bs->element[i], fn, ctx);
    if (rv == JOBSTORE_PAGE_FULL) {
      *full = 1;
      rv = 0;
      break;
    }
    if (rv != 0) break;
    *last = from + 1 + (int64_t)i;
  }
  freeReplyObject(rep);
  return rv;
}

/*
 * A page in reads of RS_ITEMS_CHUNK items: a page stops at its size (VTS_MAX_JOBS_PAGE_BYTES), so that asking for the
 * whole limit at once would hold every answer of it in one reply, however few of them the page can take.
 */
#define RS_ITEMS_CHUNK 32

static int rs_items(void *self, const char *key_id, const char *job_id, int64_t after, size_t limit,
                    jobstore_item_fn fn, void *ctx, int64_t *next) {
  struct jsredis *r = self;
  *next = 0;
  int64_t last = after;
  size_t left = limit;
  while (left > 0) {
    size_t count = left < RS_ITEMS_CHUNK ? left : RS_ITEMS_CHUNK;
    int64_t from = last;
    int more = 0, full = 0;
    int rv = items_chunk(r, key_id, job_id, from, count, fn, ctx, &last, &more, &full);
    if (rv != 0) return rv;
    if (full) {
      *next = last; /* the page ends before the item that did not fit, which the next page begins with */
      return 0;
    }
    if (!more) return 0;
    left -= (size_t)(last - from);
  }
  *next = last;
  return 0;
}

static int rs_cancel(void *self, const char *key_id, const char *job_id, int64_t now_ms, size_t *n) {
  struct jsredis *r = self;
  *n = 0;
  char now[24], ttl[24];
  snprintf(now, sizeof(now), "%" PRId64, now_ms);
  snprintf(ttl, sizeof(ttl), "%" PRId64, r->ttl_ms);
  const char *argv[] = {job_id, key_id, now, ttl};
  redisReply *rep = script_call(r, S_cancel, 4, argv, NULL);
  int rv = rep == NULL || rep->type != REDIS_REPLY_INTEGER ? -EIO : rep->integer < 0 ? -ENOENT : 0;
  if (rv == 0) *n = (size_t)rep->integer;
  freeReplyObject(rep);
  return rv;
}

static int rs_stored_items(void *self, const char *key_id, size_t *n) {
  redisReply *rep = script_call(self, S_stored, 1, &key_id, NULL);
  int rv = rep != NULL && rep->type == REDIS_REPLY_INTEGER && rep->integer >= 0 ? 0 : -EIO;
  *n = rv == 0 ? (size_t)rep->integer : 0;
  freeReplyObject(rep);
  return rv;
}

static int rs_open_jobs(void *self, const char *key_id, size_t *n) {
  struct jsredis *r = self;
  char k[128];
  snprintf(k, sizeof(k), "vts:jobs:open:%s", key_id);
  const char *argv[] = {"SCARD", k};
  redisReply *rep = command(r, 2, argv, NULL);
  int rv = rep != NULL && rep->type == REDIS_REPLY_INTEGER ? 0 : -EIO;
  *n = rv == 0 ? (size_t)rep->integer : 0;
  freeReplyObject(rep);
  return rv;
}

/* Remembers an item taken, for keepalive and for its end. */
static int taken_add(struct jsredis *r, const struct jobstore_task *t, const char *entry) {
  if (r->ntaken == r->cap) {
    size_t cap = r->cap != 0 ? 2 * r->cap : 16;
    struct taken *grown = realloc(r->taken, cap * sizeof(*grown));
    if (grown == NULL) return -ENOMEM;
    r->taken = grown;
    r->cap = cap;
  }
  struct taken *k = &r->taken[r->ntaken++];
  snprintf(k->job_id, sizeof(k->job_id), "%s", t->job_id);
  k->seq = t->seq;
  snprintf(k->entry, sizeof(k->entry), "%s", entry);
  return 0;
}

/* Forgets an item taken, with its entry in entry ("" when this handle did not take it). */
static void taken_drop(struct jsredis *r, const char *job_id, int64_t seq, char entry[ENTRY_BYTES]) {
  entry[0] = '\0';
  for (size_t i = 0; i < r->ntaken; i++) {
    if (r->taken[i].seq == seq && strcmp(r->taken[i].job_id, job_id) == 0) {
      snprintf(entry, ENTRY_BYTES, "%s", r->taken[i].entry);
      r->taken[i] = r->taken[--r->ntaken];
      return;
    }
  }
}

/* The script's fixed arguments (a), then the names of skip. Returns its reply, or NULL (-ENOMEM in *rv). */
static redisReply *script_skip(struct jsredis *r, enum script script, const char *const *fixed, int nfixed,
                               const struct jobstore_skip *skip, int *rv) {
  size_t n = skip != NULL ? skip->n : 0;
  struct args a;
  if (args_init(&a, nfixed + (int)n) != 0) {
    args_free(&a);
    *rv = -ENOMEM;
    return NULL;
  }
  for (int i = 0; i < nfixed; i++) arg(&a, fixed[i]);
  for (size_t i = 0; i < n; i++) arg(&a, skip->keys[i]);
  redisReply *rep = script_call(r, script, a.n, a.v, a.len);
  args_free(&a);
  *rv = -EIO;
  return rep;
}

/* A leased take (a page, a hook): script runs with the time and the lease as its fixed arguments, then skip's names. */
static redisReply *script_leased(struct jsredis *r, enum script script, int64_t now_ms, int64_t lease_ms,
                                 const struct jobstore_skip *skip, int *rv) {
  char now[24], lease[24];
  snprintf(now, sizeof(now), "%" PRId64, now_ms);
  snprintf(lease, sizeof(lease), "%" PRId64, lease_ms);
  const char *fixed[] = {now, lease};
  return script_skip(r, script, fixed, 2, skip, rv);
}

static int rs_take(void *self, int64_t now_ms, int64_t lease_ms, const struct jobstore_skip *skip,
                   struct jobstore_task *out) {
  (void)lease_ms; /* a taker's hold is its entry, renewed by keepalive */
  struct jsredis *r = self;
  memset(out, 0, sizeof(*out));
  char now[24], idle[24];
  snprintf(now, sizeof(now), "%" PRId64, now_ms);
  snprintf(idle, sizeof(idle), "%d", JOBSTORE_CLAIM_IDLE_MS);
  const char *fixed[] = {now, r->consumer, idle};
  int failed = 0;
  redisReply *rep = script_skip(r, S_take, fixed, 3, skip, &failed);
  if (rep == NULL) return failed;
  if (rep->type == REDIS_REPLY_NIL) {
    freeReplyObject(rep);
    return -EAGAIN;
  }
  int rv = -EIO;
  if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 10) {
    redisReply **e = rep->element;
    str_of(e[0], out->job_id, sizeof(out->job_id));
    out->seq = num_of(e[1]);
    str_of(e[2], out->video_id, sizeof(out->video_id));
    str_of(e[3], out->key_id, sizeof(out->key_id));
    str_of(e[4], out->language, sizeof(out->language));
    str_of(e[5], out->translate, sizeof(out->translate));
    str_of(e[6], out->format, sizeof(out->format));
    out->created_ms = num_of(e[7]);
    out->tries = e[9]->type == REDIS_REPLY_INTEGER ? (int)e[9]->integer : 0;
    char entry[ENTRY_BYTES];
    str_of(e[8], entry, sizeof(entry));
    rv = out->seq > 0 && out->job_id[0] != '\0' ? taken_add(r, out, entry) : -EIO;
  }
  freeReplyObject(rep);
  return rv;
}

/* The end script with mode and its own arguments (up to 6). Returns its answer, or -EIO. */
static int end_item(struct jsredis *r, const char *job_id, int64_t seq, int64_t now_ms, const char *mode,
                    const char *const *more, const size_t *more_len, int nmore) {
  char entry[ENTRY_BYTES];
  /* Forgotten whatever happens: an end Redis did not store leaves the entry to be claimed again, here or elsewhere. */
  taken_drop(r, job_id, seq, entry);
  char s[24], now[24], ttl[24];
  snprintf(s, sizeof(s), "%" PRId64, seq);
  snprintf(now, sizeof(now), "%" PRId64, now_ms);
  snprintf(ttl, sizeof(ttl), "%" PRId64, r->ttl_ms);
  const char *argv[6 + 6] = {job_id, s, entry, now, ttl, mode};
  size_t lens[6 + 6];
  int argc = 6;
  for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
  for (int i = 0; i < nmore; i++) {
    argv[argc] = more[i];
    lens[argc++] = more_len != NULL ? more_len[i] : strlen(more[i]);
  }
  redisReply *rep = script_call(r, S_end, argc, argv, lens);
  int rv = rep != NULL && rep->type == REDIS_REPLY_INTEGER ? (int)rep->integer : -EIO;
  freeReplyObject(rep);
  return rv;
}

static int rs_done(void *self, const char *job_id, int64_t seq, const void *z, size_t zlen, size_t len,
                   const struct jobstore_charge *charge, int64_t now_ms) {
  struct jsredis *r = self;
  char *body = malloc(zlen + 8 + 1);
  if (body == NULL) return -ENOMEM;
  char head[9];
  snprintf(head, sizeof(head), "%08zu", len);
  memcpy(body, head, 8);
  memcpy(body + 8, z, zlen);
  char quota[24] = "0", ttl[24] = "0";
  if (charge != NULL) {
    snprintf(quota, sizeof(quota), "%" PRId64, charge->quota);
    snprintf(ttl, sizeof(ttl), "%" PRId64, charge->ttl_s);
  }
  const char *more[] = {body, charge != NULL ? charge->counter : "",    quota,
                        ttl,  charge != NULL ? charge->quota_code : "", charge != NULL ? charge->quota_message : ""};
  size_t more_len[6];
  more_len[0] = zlen + 8;
  for (int i = 1; i < 6; i++) more_len[i] = strlen(more[i]);
  int rv = end_item(r, job_id, seq, now_ms, "d", more, more_len, 6);
  free(body);
  if (rv == -1) return -ENOENT;
  if (charge == NULL && rv == 1) return 0;
  return rv;
}

static int rs_fail(void *self, const char *job_id, int64_t seq, const char *code, const char *message, int64_t now_ms) {
  const char *more[] = {code, message};
  int rv = end_item(self, job_id, seq, now_ms, "f", more, NULL, 2);
  return rv == 1 ? 0 : rv == -1 ? -ENOENT : rv;
}

static int rs_retry(void *self, const char *job_id, int64_t seq, int64_t not_before_ms, int64_t now_ms) {
  char due[24];
  snprintf(due, sizeof(due), "%" PRId64, not_before_ms);
  const char *more[] = {due};
  int rv = end_item(self, job_id, seq, now_ms, "r", more, NULL, 1);
  return rv == 1 ? 0 : rv == -1 ? -ENOENT : rv;
}

static int month_unit(struct jsredis *r, enum script script, const char *job_id, int64_t seq,
                      const struct jobstore_charge *c) {
  char s[24], quota[24], ttl[24];
  snprintf(s, sizeof(s), "%" PRId64, seq);
  snprintf(quota, sizeof(quota), "%" PRId64, c->quota);
  snprintf(ttl, sizeof(ttl), "%" PRId64, c->ttl_s);
  const char *argv[] = {job_id, s, c->counter, quota, ttl};
  redisReply *rep = script_call(r, script, 5, argv, NULL);
  int rv = rep != NULL && rep->type == REDIS_REPLY_INTEGER ? (int)rep->integer : -EIO;
  freeReplyObject(rep);
  return rv;
}

static int rs_reserve(void *self, const char *job_id, int64_t seq, const struct jobstore_charge *c) {
  int rv = month_unit(self, S_reserve, job_id, seq, c);
  return rv == -1 ? -ENOENT : rv;
}

static int rs_unreserve(void *self, const char *job_id, int64_t seq, const struct jobstore_charge *c) {
  int rv = month_unit(self, S_unreserve, job_id, seq, c);
  return rv < 0 ? rv : 0;
}

static int rs_keepalive(void *self, int64_t now_ms) {
  (void)now_ms;
  struct jsredis *r = self;
  if (r->ntaken == 0) return 0;
  struct args a;
  if (args_init(&a, 1 + (int)r->ntaken) != 0) {
    args_free(&a);
    return -ENOMEM;
  }
  arg(&a, r->consumer);
  for (size_t i = 0; i < r->ntaken; i++) arg(&a, r->taken[i].entry);
  redisReply *rep = script_call(r, S_keepalive, a.n, a.v, a.len);
  args_free(&a);
  int rv = rep != NULL ? 0 : -EIO;
  freeReplyObject(rep);
  return rv;
}

static int rs_take_page(void *self, int64_t now_ms, int64_t lease_ms, const struct jobstore_skip *skip,
                        struct jobstore_page *out) {
  struct jsredis *r = self;
  memset(out, 0, sizeof(*out));
  int failed = 0;
  redisReply *rep = script_leased(r, S_take_page, now_ms, lease_ms, skip, &failed);
  if (rep == NULL) return failed;
  int rv = rep->type == REDIS_REPLY_NIL ? -EAGAIN : -EIO;
  if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 6) {
    redisReply **e = rep->element;
    str_of(e[0], out->job_id, sizeof(out->job_id));
    str_of(e[1], out->token, sizeof(out->token));
    out->tries = e[2]->type == REDIS_REPLY_INTEGER ? (int)e[2]->integer : 0;
    str_of(e[3], out->key_id, sizeof(out->key_id));
    out->created_ms = num_of(e[4]);
    out->read = e[5]->type == REDIS_REPLY_INTEGER ? e[5]->integer : 1;
    rv = 0;
  }
  freeReplyObject(rep);
  return rv;
}

static int rs_page_done(void *self, const char *job_id, const char (*ids)[VTS_VIDEO_ID_LEN + 1], size_t n,
                        const char *next, int64_t read, int64_t max_pages, const char *why, int64_t now_ms,
                        size_t *added) {
  struct jsredis *r = self;
  *added = 0;
  struct args a;
  if (args_init(&a, 7 + (int)n) != 0) {
    args_free(&a);
    return -ENOMEM;
  }
  char now[24], ttl[24], read_s[24], max_s[24];
  snprintf(now, sizeof(now), "%" PRId64, now_ms);
  snprintf(ttl, sizeof(ttl), "%" PRId64, r->ttl_ms);
  snprintf(read_s, sizeof(read_s), "%" PRId64, read);
  snprintf(max_s, sizeof(max_s), "%" PRId64, max_pages);
  arg(&a, job_id);
  arg(&a, now);
  arg(&a, ttl);
  arg(&a, next != NULL ? next : "");
  arg(&a, read_s);
  arg(&a, max_s);
  arg(&a, why != NULL ? why : "");
  for (size_t i = 0; i < n; i++) arg_n(&a, ids[i], VTS_VIDEO_ID_LEN);
  redisReply *rep = script_call(r, S_page_done, a.n, a.v, a.len);
  args_free(&a);
  int rv = rep == NULL || rep->type != REDIS_REPLY_INTEGER ? -EIO : rep->integer < 0 ? -ENOENT : 0;
  if (rv == 0) *added = (size_t)rep->integer;
  freeReplyObject(rep);
  return rv;
}

static int rs_page_retry(void *self, const char *job_id, int64_t not_before_ms, int64_t now_ms) {
  char due[24], now[24];
  snprintf(due, sizeof(due), "%" PRId64, not_before_ms);
  snprintf(now, sizeof(now), "%" PRId64, now_ms);
  const char *argv[] = {job_id, due, now};
  redisReply *rep = script_call(self, S_page_retry, 3, argv, NULL);
  int rv = rep == NULL || rep->type != REDIS_REPLY_INTEGER ? -EIO : rep->integer < 0 ? -ENOENT : 0;
  freeReplyObject(rep);
  return rv;
}

static int rs_hook_owed(void *self, char job_id[JOBSTORE_ID_LEN + 1], char key_id[JOBSTORE_KEY_ID_MAX + 1]) {
  redisReply *rep = script_call(self, S_hook_owed, 0, NULL, NULL);
  if (rep == NULL) return -EIO;
  int rv = rep->type == REDIS_REPLY_NIL ? -EAGAIN : -EIO;
  if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2) {
    str_of(rep->element[0], job_id, JOBSTORE_ID_LEN + 1);
    str_of(rep->element[1], key_id, JOBSTORE_KEY_ID_MAX + 1);
    rv = 0;
  }
  freeReplyObject(rep);
  return rv;
}

static int rs_hook_add(void *self, const char *job_id, const char *body, size_t len, int64_t now_ms) {
  if (len > VTS_WEBHOOK_MAX_PAYLOAD_BYTES) return -EINVAL;
  char now[24];
  snprintf(now, sizeof(now), "%" PRId64, now_ms);
  const char *argv[] = {job_id, body, now};
  size_t lens[] = {strlen(job_id), len, strlen(now)};
  redisReply *rep = script_call(self, S_hook_add, 3, argv, lens);
  int rv = rep != NULL && rep->type == REDIS_REPLY_INTEGER ? 0 : -EIO;
  freeReplyObject(rep);
  return rv;
}

static int rs_hook_take(void *self, int64_t now_ms, int64_t lease_ms, const struct jobstore_skip *skip,
                        struct jobstore_hook *out) {
  memset(out, 0, sizeof(*out));
  int failed = 0;
  redisReply *rep = script_leased(self, S_hook_take, now_ms, lease_ms, skip, &failed);
  if (rep == NULL) return failed;
  int rv = rep->type == REDIS_REPLY_NIL ? -EAGAIN : -EIO;
  if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 7) {
    redisReply **e = rep->element;
    str_of(e[0], out->job_id, sizeof(out->job_id));
    str_of(e[1], out->url, sizeof(out->url));
    str_of(e[2], out->secret, sizeof(out->secret));
    out->attempt = e[3]->type == REDIS_REPLY_INTEGER ? (int)e[3]->integer : 1;
    out->made_ms = num_of(e[4]);
    size_t n = e[5]->type == REDIS_REPLY_STRING ? e[5]->len : 0;
    if (n > VTS_WEBHOOK_MAX_PAYLOAD_BYTES) n = VTS_WEBHOOK_MAX_PAYLOAD_BYTES;
    if (n > 0) memcpy(out->body, e[5]->str, n);
    out->body_len = n;
    str_of(e[6], out->key_id, sizeof(out->key_id));
    rv = 0;
  }
  freeReplyObject(rep);
  return rv;
}

static int rs_hook_end(void *self, const char *job_id, enum jobstore_hook_state state, int64_t next_ms,
                       int http_status) {
  struct jsredis *r = self;
  char st[8], next[24], status[16], ttl[24];
  snprintf(st, sizeof(st), "%d", (int)state);
  snprintf(next, sizeof(next), "%" PRId64, next_ms);
  snprintf(status, sizeof(status), "%d", http_status);
  snprintf(ttl, sizeof(ttl), "%" PRId64, r->ttl_ms);
  const char *argv[] = {job_id, st, next, status, ttl};
  redisReply *rep = script_call(r, S_hook_end, 5, argv, NULL);
  int rv = rep == NULL || rep->type != REDIS_REPLY_INTEGER ? -EIO : rep->integer < 0 ? -ENOENT : 0;
  freeReplyObject(rep);
  return rv;
}

static int rs_stop_key(void *self, const char *key_id, const char *why, int64_t now_ms) {
  struct jsredis *r = self;
  char now[24], ttl[24];
  snprintf(now, sizeof(now), "%" PRId64, now_ms);
  snprintf(ttl, sizeof(ttl), "%" PRId64, r->ttl_ms);
  const char *argv[] = {key_id, why, now, ttl};
  redisReply *rep = script_call(r, S_stop_key, 4, argv, NULL);
  int rv = rep != NULL && rep->type == REDIS_REPLY_INTEGER ? (int)rep->integer : -EIO;
  freeReplyObject(rep);
  return rv;
}

static const char *rs_taker(void *self) { return ((struct jsredis *)self)->consumer; }

const struct jobstore_ops jobstore_redis_ops = {
    .version = JOBSTORE_OPS_VERSION,
    .name = "redis",
    .charges = 1,
    .selected = rs_selected,
    .init = rs_init,
    .open = rs_open,
    .close = rs_close,
    .create = rs_create,
    .get = rs_get,
    .items = rs_items,
    .cancel = rs_cancel,
    .open_jobs = rs_open_jobs,
    .stored_items = rs_stored_items,
    .take = rs_take,
    .done = rs_done,
    .fail = rs_fail,
    .retry = rs_retry,
    .keepalive = rs_keepalive,
    .taker = rs_taker,
    .hook_owed = rs_hook_owed,
    .hook_add = rs_hook_add,
    .hook_take = rs_hook_take,
    .hook_end = rs_hook_end,
    .take_page = rs_take_page,
    .page_done = rs_page_done,
    .page_retry = rs_page_retry,
    .stop_key = rs_stop_key,
    .reserve = rs_reserve,
    .unreserve = rs_unreserve,
};
