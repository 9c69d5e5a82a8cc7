/*
 * An LRU cache of job results keyed by (video id, job key: proto_job_key, the requested language for a plain
 * transcript), bounded in bytes, with a TTL per entry.
 * The dispatcher holds the shared cache every worker goes through; each worker holds a small one in front of it.
 *
 * What is cached follows ARCHITECTURE.md "Outcomes": a 200 (PROTO_OK) for ok_ttl_ms, a 404 (PROTO_NOT_AVAILABLE,
 * and PROTO_NO_CAPTIONS stored as PROTO_NOT_AVAILABLE) for negative_ttl_ms, a 5xx never. A TTL of 0 disables that
 * kind. An entry costs sizeof its record plus its entity (gateway/cache/entity.h: the body and any compressed forms,
 * shared by reference with whoever is writing it); the least recently used entries make room for a new one.
 * Not thread-safe: one owner thread.
 */
#ifndef VTS_CACHE_H
#define VTS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/cache/entity.h"
#include "proto/proto.h"

struct cache;

struct cache_limits {
  size_t max_bytes;         /* bodies plus per-entry overhead; 0 disables the cache */
  uint64_t ok_ttl_ms;       /* lifetime of a PROTO_OK entry */
  uint64_t negative_ttl_ms; /* lifetime of a PROTO_NOT_AVAILABLE entry */
  /*
   * An expired entry stays (still a miss) until it is replaced or the byte bound pushes it out, so that
   * cache_lookup_stale can hand its entity back: a worker's L1 then reuses a body's compressed forms when the same
   * answer comes back after the entry expired, instead of making them again on its loop.
   */
  int keep_expired;
};

/* A monotonic millisecond clock; tests inject their own. */
typedef uint64_t (*cache_clock_fn)(void);

struct cache_stats {
  uint64_t entries;
  uint64_t bytes;
  uint64_t evictions; /* entries dropped to make room, not by expiry */
};

/* Creates an empty cache. now_ms may be NULL for util_now_ms. Returns NULL when out of memory. */
struct cache *cache_new(const struct cache_limits *limits, cache_clock_fn now_ms);
void cache_free(struct cache *c);

/*
 * Stores a copy of res (its body, outcome, source and lang) for (video_id, lang), replacing any entry for that key.
 * The entry lives for the outcome's TTL, shortened to max_ttl_ms (UINT64_MAX for no cap); *ttl_ms (may be NULL)
 * receives the lifetime given. Returns 0; -EINVAL when the outcome is never cached or its TTL is 0; -E2BIG when the
 * entry alone exceeds the byte bound; -ENOMEM.
 */
int cache_put(struct cache *c, const char *video_id, const char *lang, const struct proto_result *res,
              uint64_t max_ttl_ms, uint64_t *ttl_ms);
/*
 * As cache_put, with the body already made into ent (res->body is ignored): the cache takes a reference of its own
 * on success and the caller keeps its own. Same returns.
 */
int cache_put_entity(struct cache *c, const char *video_id, const char *lang, const struct proto_result *res,
                     struct entity *ent, uint64_t max_ttl_ms, uint64_t *ttl_ms);

/*
 * Looks (video_id, lang) up and marks it most recently used. On a hit fills res (job_id 0, detail "cache"; res->body
 * borrowed, valid until the next call that changes the cache) and *ttl_left_ms (may be NULL). An expired entry is
 * removed and missed. Returns 0, or -ENOENT.
 */
int cache_get(struct cache *c, const char *video_id, const char *lang, struct proto_result *res, uint64_t *ttl_left_ms);
/* As cache_get; on a hit *ent (may be NULL) also receives a new reference to the entry's entity (release it). */
int cache_lookup(struct cache *c, const char *video_id, const char *lang, struct proto_result *res,
                 uint64_t *ttl_left_ms, struct entity **ent);

/*
 * As cache_lookup, and an expired entry that is kept (keep_expired) is found too, without being marked as used: returns
 * 0 for a live entry, -ESTALE for an expired one (res and *ent filled alike; *ttl_left_ms 0, and *ended_ms, when not
 * NULL, how long ago it ended), or -ENOENT.
 */
int cache_lookup_stale(struct cache *c, const char *video_id, const char *lang, struct proto_result *res,
                       uint64_t *ttl_left_ms, uint64_t *ended_ms, struct entity **ent);

/* Drops the entry of (video_id, lang), live or expired, if there is one: whether there was. */
bool cache_remove(struct cache *c, const char *video_id, const char *lang);

void cache_get_stats(const struct cache *c, struct cache_stats *out);

/*
 * Hash of a (video_id, lang) key, shared with the dispatcher's job table so both agree on key identity. Keyed with
 * random bytes drawn by each process on its first call: the same key hashes alike within a process only.
 */
uint64_t cache_key_hash(const char *video_id, const char *lang);

#endif
