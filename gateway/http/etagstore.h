/*
 * A worker's store of transcripts' validators: the ETags of an answer (entity_validator: no body), kept for as long
 * as the dispatcher keeps the transcript. The L1 cache keeps a body for seconds; a client revalidates minutes or
 * hours later, and this store still knows its ETag for a 304 before the limiter decides. Loop thread only.
 */
#ifndef VTS_ETAGSTORE_H
#define VTS_ETAGSTORE_H

#include <stdint.h>

#include "gateway/cache/entity.h"
#include "proto/proto.h"

struct etagstore;

/* A new store (VTS_L1_VALIDATOR_BYTES), or NULL when memory ran out. */
struct etagstore *etagstore_new(void);
/* Frees s (NULL is fine); references handed out stay valid. */
void etagstore_free(struct etagstore *s);
/*
 * Keeps the validator of ent, res's entity (a PROTO_OK answer), for (video_id, key: proto_job_key) for ttl_ms. A
 * validator that cannot be kept only costs that knowledge.
 */
void etagstore_keep(struct etagstore *s, const char *video_id, const char *key, const struct proto_result *res,
                    const struct entity *ent, uint64_t ttl_ms);
/* A new reference (release it) to the validator kept for (video_id, key), or NULL. */
struct entity *etagstore_lookup(struct etagstore *s, const char *video_id, const char *key);

#endif
