/*
 * A worker's small cache of hot answers (L1, VTS_L1_CACHE_*) in front of its link to the dispatcher, and the policy
 * of what it keeps: an answer the dispatcher says may be kept (its cache_ms), never longer than the shared entry
 * lives, with its entity (the compressed forms and ETag) made once and shared by every hit; a transcript's validator
 * goes to the ETag store for as long as the shared entry lives. Loop thread only.
 */
#ifndef VTS_L1CACHE_H
#define VTS_L1CACHE_H

#include <stdbool.h>

#include "gateway/cache/entity.h"
#include "proto/proto.h"

struct l1cache;

/* A new L1 with its ETag store (the worker makes one at its start), or NULL when memory ran out. */
struct l1cache *l1cache_new(void);
/* Frees both (NULL is fine); references handed out stay valid. */
void l1cache_free(struct l1cache *l1);
/*
 * The answer L1 holds for (video_id, key: proto_job_key): 0 with hit filled (its body borrowed from *ent) and *ent a
 * new reference that keeps the body alive even if L1 drops the entry; -ENOENT when it holds none. *refresh says
 * whether it is time to ask the dispatcher whether its answer still holds (l1cache_renew): a transcript whose entry
 * ends within VTS_L1_REFRESH_AHEAD_MS while the shared entry lives on. A transcript whose entry ended less than
 * VTS_L1_CACHE_TTL_MS ago while the shared entry lives on is -ESTALE, filled as a hit with *refresh true: it may
 * answer while a refresh is out (l1cache_forget when that refresh does not renew it), or be taken as a miss.
 */
int l1cache_lookup(struct l1cache *l1, const char *video_id, const char *key, struct proto_result *hit,
                   struct entity **ent, bool *refresh);
/*
 * Drops L1's entry for (video_id, key), live or ended: a refresh found the dispatcher no longer holds that answer.
 * Whether there was one.
 */
bool l1cache_forget(struct l1cache *l1, const char *video_id, const char *key);
/*
 * The dispatcher answered a refresh of (video_id, key) with a 304 (res->notmod) naming res->etag: when L1 still
 * holds that answer (live or expired), it is kept again for res->cache_ms. Returns 0, or -ENOENT when L1 holds no
 * such answer.
 */
int l1cache_renew(struct l1cache *l1, const char *video_id, const char *key, const struct proto_result *res);
/*
 * The entity of res, the dispatcher's answer for (video_id, key), as a new reference (NULL when memory ran out): the
 * one L1 already holds when it has exactly this answer (when an entry expires under load, every request in flight
 * misses it and each reply comes back with the same body), even if that entry expired (kept again for res->cache_ms:
 * its forms are not made anew at each expiry of a hot answer), else a new one, kept in L1 for res->cache_ms, its
 * validator in the ETag store when res is a PROTO_OK.
 */
struct entity *l1cache_answer(struct l1cache *l1, const char *video_id, const char *key,
                              const struct proto_result *res);
/*
 * What this worker knows of a PROTO_OK answer for (video_id, key), without a job: a new reference to its entity
 * when L1 holds it, else to its validator from the ETag store; NULL when neither is there.
 */
struct entity *l1cache_known(struct l1cache *l1, const char *video_id, const char *key);

#endif
