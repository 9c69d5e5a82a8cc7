/*
 * The job tools of the MCP endpoint, so that an agent can index a playlist or a channel: start_transcript_job (the
 * members of POST /v1/jobs as its arguments) and get_transcript_job (the job's status and a page of its items within
 * max_chars, with a cursor). Each runs the jobs API's own steps (jobs_api_ask) under the batch rules: the key's
 * short window counted once a call and no unit of the month (a job's items pay theirs one by one), a new job refused
 * when the month is spent. A refusal is a tool result with isError carrying the REST error's code, message and retry
 * seconds; a 400 of the REST API (a malformed member) is JSON-RPC's -32602 with its message.
 */
#ifndef VTS_MCP_JOBS_H
#define VTS_MCP_JOBS_H

#include <yajl/yajl_tree.h>

#include "gateway/http/appctx.h"
#include "gateway/http/http.h"

/* The schemas of the two tools' arguments and results, for their rows in the tools' table. */
#define MCP_JOBS_START_INPUT                                                                                      \
  "{\"type\":\"object\",\"properties\":{\"video_ids\":{\"type\":\"array\",\"minItems\":1,\"items\":{\"type\":"    \
  "\"string\"},\"description\":\"Video ids or URLs (duplicates folded).\"},\"playlist_id\":{\"type\":\"string\"," \
  "\"description\":\"A playlist's id (PL...): its videos, read in the background.\"},\"channel_id\":{\"type\":"   \
  "\"string\",\"description\":\"A channel's id (UC and 22 characters): its uploads.\"},\"limit\":{\"type\":"      \
  "\"integer\",\"minimum\":1,\"description\":\"The most videos the job takes.\"},\"language\":{\"type\":"         \
  "\"string\"},\"translate\":{\"type\":\"string\"},\"format\":{\"type\":\"string\",\"enum\":[\"json\",\"text\","  \
  "\"srt\",\"vtt\"],\"default\":\"json\",\"description\":\"How each transcript is given in the items.\"},"        \
  "\"webhook_url\":{\"type\":\"string\",\"description\":\"An https URL told when the job ends.\"}},"              \
  "\"additionalProperties\":false}"
#define MCP_JOBS_START_OUTPUT                                                                                     \
  "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},\"status\":{\"type\":\"string\"},\"total\":" \
  "{\"type\":\"integer\"},\"created\":{\"type\":\"string\"},\"quota_remaining\":{\"type\":\"integer\"},"          \
  "\"webhook_secret\":{\"type\":\"string\"}},\"required\":[\"id\",\"status\",\"total\",\"created\","              \
  "\"quota_remaining\"]}"
#define MCP_JOBS_GET_INPUT                                                                                   \
  "{\"type\":\"object\",\"properties\":{\"job_id\":{\"type\":\"string\",\"description\":\"The id "           \
  "start_transcript_job gave.\"},\"max_chars\":{\"type\":\"integer\",\"minimum\":1000,\"maximum\":100000,"   \
  "\"default\":20000,\"description\":\"The most characters the page of items takes (at least one item).\"}," \
  "\"cursor\":{\"type\":\"string\",\"description\":\"next_cursor of the page before; absent for the first "  \
  "page.\"}},\"required\":[\"job_id\"],\"additionalProperties\":false}"
#define MCP_JOBS_GET_OUTPUT                                                                                         \
  "{\"type\":\"object\",\"properties\":{\"job\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"}," \
  "\"status\":{\"type\":\"string\",\"enum\":[\"queued\",\"running\",\"done\",\"cancelled\"]},\"total\":{\"type\":"  \
  "\"integer\"},\"counts\":{\"type\":\"object\"},\"created\":{\"type\":\"string\"},\"updated\":{\"type\":"          \
  "\"string\"},\"format\":{\"type\":\"string\"},\"stop_reason\":{\"type\":\"string\"}},\"required\":[\"id\","       \
  "\"status\",\"total\",\"counts\"]},\"items\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{" \
  "\"video_id\":{\"type\":\"string\"},\"status\":{\"type\":\"string\"},\"transcript\":{},\"error\":{\"type\":"      \
  "\"object\"}},\"required\":[\"video_id\",\"status\"]}},\"next_cursor\":{\"type\":[\"string\",\"null\"]}},"        \
  "\"required\":[\"job\",\"items\",\"next_cursor\"]}"

/*
 * Runs start_transcript_job or get_transcript_job with arguments args (an object, or NULL) for key, answering req (id:
 * the request's id as JSON text) now or once the job store answered. Returns 0 (answered or under way).
 */
int mcp_jobs_start(struct handlers_ctx *ctx, struct http_request *req, const struct key_entry *key, const char *id,
                   yajl_val args);
int mcp_jobs_get(struct handlers_ctx *ctx, struct http_request *req, const struct key_entry *key, const char *id,
                 yajl_val args);

#endif
