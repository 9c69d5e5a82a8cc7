/*
 * The batch jobs' routes of a worker: POST /v1/jobs (a JSON body of video_ids, checked member by member, duplicates
 * folded; 202 with Location), GET and DELETE /v1/jobs/{id}, GET /v1/jobs/{id}/items (paged from the store, in the
 * job's order). Each takes the key (401), then the short window once, never a unit of the month: the runner charges
 * the month for each item answered with a transcript. A job is visible only to the key that made it; any other key
 * gets 404. The state is the job store (gateway/jobs/jobstore.h) in VTS_STATE_DIR/jobs.db, opened by the worker on
 * its first jobs request.
 */
#ifndef VTS_JOBS_API_H
#define VTS_JOBS_API_H

#include "gateway/http/appctx.h"
#include "gateway/http/http.h"

void handle_jobs_create(struct handlers_ctx *ctx, struct http_request *req);
/* GET (and HEAD) shows the job; DELETE cancels its items not started, then shows it. */
void handle_job(struct handlers_ctx *ctx, struct http_request *req);
void handle_job_items(struct handlers_ctx *ctx, struct http_request *req);
/* GET (and HEAD) /v1/usage: the key's own use (its month, its short window, its open jobs, its stored items). */
void handle_usage(struct handlers_ctx *ctx, struct http_request *req);

/* The worker's job store, opened on first use; NULL when it cannot be opened (logged). */
struct jobstore *jobs_api_store(struct handlers_ctx *ctx);

#endif
