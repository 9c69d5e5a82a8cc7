/*
 * The transcript cache in Redis, shared by every gateway that names the same VTS_REDIS_URL. The dispatcher keeps its
 * memory cache in front: a miss there asks Redis, and a finished job is written to both. Same rules as the memory
 * cache: 200s for VTS_CACHE_TTL_S, 404s for VTS_NEGATIVE_TTL_S, 5xx never.
 *
 * Redis is a cache here, never a dependency: every command has VTS_REDIS_COMMAND_TIMEOUT_MS (hiredis' socket timeout),
 * and after a failure the cache is skipped for VTS_RCACHE_RETRY_MS before a reconnect is tried, so a frozen or dead
 * Redis costs at most one 50 ms wait per second and the service goes on from the memory cache and the fetchers.
 */
#ifndef VTS_RCACHE_H
#define VTS_RCACHE_H

#include <stdint.h>

#include "common/config.h"
#include "proto/proto.h"

struct rcache;

/* The cache of cfg->redis_url, or NULL when none is configured (or it does not parse). Connects on first use. */
struct rcache *rcache_new(const struct vts_config *cfg);
void rcache_free(struct rcache *rc);

/*
 * Looks up (video_id, lang). Returns 0 on a hit with res filled (res->body borrowed until the next rcache call) and
 * *ttl_left_ms; -ENOENT on a miss; -EIO when Redis could not answer in time.
 */
int rcache_get(struct rcache *rc, const char *video_id, const char *lang, struct proto_result *res,
               uint64_t *ttl_left_ms);

/* Stores res (PROTO_OK or PROTO_NOT_AVAILABLE only) for ttl_ms. Returns 0, -EINVAL for another outcome, or -EIO. */
int rcache_put(struct rcache *rc, const char *video_id, const char *lang, const struct proto_result *res,
               uint64_t ttl_ms);

#endif
