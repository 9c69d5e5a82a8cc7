/*
 * The transcript cache in Redis, shared by every gateway that names the same VTS_REDIS_CACHE_URL (VTS_REDIS_URL when
 * unset), and the claims that make one gateway fetch a video for all of them. The dispatcher keeps its memory cache
 * in front: a miss there asks Redis, and a finished job is written to both. Same rules as the memory cache: 200s for
 * VTS_CACHE_TTL_S, 404s for VTS_NEGATIVE_TTL_S, 5xx never. A transcript is stored once per served track (its track
 * key, proto_track_key) and each job key it answers holds a small alias of it; a video that cannot be played is one
 * entry (PROTO_GONE_KEY) that answers every key of it. Every value read passes the check a fetcher's result passes.
 * A claim lives CORE_CLAIM_TTL_MS and its holder renews it while the job runs.
 *
 * Asynchronous, on the dispatcher's libuv loop (hiredis' async API through gateway/redis/redis_conn.h): commands are
 * pipelined on one connection and a callback is never called from inside the call that started it. Redis is a cache
 * here, never a dependency: a command unanswered within VTS_RCACHE_COMMAND_TIMEOUT_MS fails (with every command behind
 * it: the connection is dropped), and after a failure Redis is skipped for VTS_RCACHE_RETRY_MS before a reconnect is
 * tried. A slow Redis delays only the requests that wait for it.
 */
#ifndef VTS_RCACHE_H
#define VTS_RCACHE_H

#include <stdint.h>
#include <uv.h>

#include "common/config.h"
#include "proto/proto.h"

struct rcache;

/* A lookup's answer: 0 with res (body borrowed for the call) and its lifetime left, -ENOENT a miss, -EIO a fault. */
typedef void (*rcache_get_cb)(void *arg, uint64_t tag, int status, const struct proto_result *res,
                              uint64_t ttl_left_ms);
/* A claim's answer: 1 won, 0 held by another, 2 not claimed because the result is there now, -EIO a fault. */
typedef void (*rcache_claim_cb)(void *arg, uint64_t tag, int status);

/*
 * The cache of cfg->redis_url on loop, or NULL when none is configured (or it does not parse). Connects on first use.
 * get_cb and claim_cb answer every lookup and claim with arg and the caller's tag.
 */
struct rcache *rcache_new(uv_loop_t *loop, const struct vts_config *cfg, rcache_get_cb get_cb, rcache_claim_cb claim_cb,
                          void *arg);
/* Drops the connection without calling back again; the memory goes once the loop has closed its handles. */
void rcache_close(struct rcache *rc);

/*
 * Looks up (video_id, key): the video's "cannot be played" entry first (answered with the reason it was stored with,
 * PROTO_REASON_NOT_PLAYABLE or the case its reply said), then the key's value, an alias followed to its entry. A value
 * that is not ours to trust is a miss, and deleted.
 */
void rcache_get(struct rcache *rc, uint64_t tag, const char *video_id, const char *key);

/*
 * Stores res (PROTO_OK or PROTO_NOT_AVAILABLE only) for ttl_ms: a transcript under its track key with an alias under
 * key, anything else under key (PROTO_GONE_KEY for a video that cannot be played). Returns 0 once sent, -EINVAL for
 * another outcome, or -EIO while Redis is away.
 */
int rcache_put(struct rcache *rc, const char *video_id, const char *key, const struct proto_result *res,
               uint64_t ttl_ms);

/* Claims (video_id, key) for ttl_ms in this gateway's name and tag's, unless its result is cached (in one step). */
void rcache_claim(struct rcache *rc, uint64_t tag, const char *video_id, const char *key, uint64_t ttl_ms);
/* Extends that claim to ttl_ms from now if it is still ours, or takes it again if it lapsed and is free. */
void rcache_renew(struct rcache *rc, uint64_t tag, const char *video_id, const char *key, uint64_t ttl_ms);
/* Releases that claim if it is still ours (held by this gateway for tag). */
void rcache_release(struct rcache *rc, uint64_t tag, const char *video_id, const char *key);

#endif
