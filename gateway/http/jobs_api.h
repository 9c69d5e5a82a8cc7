/*
 * The batch jobs' routes of a worker: POST /v1/jobs (a JSON body of video_ids, checked member by member, duplicates
 * folded; 202 with Location), GET and DELETE /v1/jobs/{id}, GET /v1/jobs/{id}/items (paged from the store, in the
 * job's order). Each takes the key (401), then the short window once, never a unit of the month: the runner charges
 * the month for each item answered with a transcript. A job is visible only to the key that made it; any other key
 * gets 404. The state is the job store (gateway/jobs/jobstore.h) in VTS_STATE_DIR/jobs.db, opened by the worker on
 * its first jobs request on a thread of its own (gateway/jobs/storeq.h): no store call runs on the worker's loop. Each
 * answer goes through a sink (jobsink.h): the connection's, or a tool's.
 */
#ifndef VTS_JOBS_API_H
#define VTS_JOBS_API_H

#include <stddef.h>

#include "gateway/http/appctx.h"
#include "gateway/http/http.h"
#include "gateway/http/jobsink.h"

/* What a jobs request does. */
enum jobs_op { JOBS_CREATE, JOBS_GET, JOBS_CANCEL, JOBS_ITEMS, JOBS_USAGE };

void handle_jobs_create(struct handlers_ctx *ctx, struct http_request *req);
/* GET (and HEAD) shows the job; DELETE cancels its items not started, then shows it. */
void handle_job(struct handlers_ctx *ctx, struct http_request *req);
void handle_job_items(struct handlers_ctx *ctx, struct http_request *req);
/* GET (and HEAD) /v1/usage: the key's own use (its month, its short window, its open jobs, its stored items). */
void handle_usage(struct handlers_ctx *ctx, struct http_request *req);

/*
 * A jobs request of another front (an MCP tool) whose key and short window it checked itself. Every pointer is the
 * caller's and stays valid until the sink is ended.
 */
struct jobs_ask {
  enum jobs_op op;
  const char *job_id; /* JOBS_GET, JOBS_CANCEL, JOBS_ITEMS */
  const char *body;   /* JOBS_CREATE: a job request's JSON, as POST /v1/jobs takes it */
  size_t body_len;
  const char *query; /* JOBS_ITEMS: "cursor=...&limit=..." as GET /v1/jobs/{id}/items takes it; NULL for none */
  size_t query_len;
  size_t page_bytes; /* JOBS_ITEMS: 0, or the most bytes a page takes (it holds its first item whatever its size) */
  const char *request_id;
  const struct rl_decision *decided; /* the check the caller made (it gives back the unit that held, if any) */
};

/* The refusal the batch rules give for op under the limiter's decision d, or API_OK. */
enum api_error jobs_api_refusal(const struct rl_decision *d, enum jobs_op op);

/*
 * Runs a for key as the REST route would once its window passed (the same checks, store calls and answers), answering
 * into sink, then ending it: both maybe before this returns, or later on the loop.
 */
void jobs_api_ask(struct handlers_ctx *ctx, const struct key_entry *key, const struct jobs_ask *a,
                  struct jobsink *sink);

/*
 * The worker's job store on a thread of its own (storeq.h), opened on first use; NULL when the store cannot be opened
 * (logged). Every store call of the jobs API runs there, so that a slow or frozen store delays only jobs requests.
 */
struct storeq *jobs_api_queue(struct handlers_ctx *ctx);

#endif
