/*
 * A batch job's status object, the one JSON both GET /v1/jobs/{id} answers (gateway/http/jobs_api.c) and a job's
 * webhook carries (gateway/dispatcher/hooks.c): id, status, total, counts by item status, created, updated, format,
 * and language and translate when the job names them.
 */
#ifndef VTS_JOBJSON_H
#define VTS_JOBJSON_H

#include <stdint.h>

#include "common/buf.h"
#include "gateway/jobs/jobstore.h"

/* Appends ,"name":"<RFC 3339 time of ms>". Returns 0 or -ENOMEM. */
int jobjson_time(struct buf *b, const char *name, int64_t ms);

/*
 * Appends j's status object to b; type, when not NULL, is its first member (the webhook's "type", in the Standard
 * Webhooks convention: "job.done" or "job.cancelled"). Returns 0 or -ENOMEM.
 */
int jobjson_status(struct buf *b, const struct jobstore_job *j, const char *type);

#endif
