/*
 * The tools of the MCP endpoint, one row of a table each (name, description, input and output schema, the job it
 * runs and how its answer is cut for a model): get_transcript, search_transcript, get_video_metadata and
 * list_caption_tracks, and the job tools, rows whose steps are their own (mcp_jobs.h). A tool call goes the way of the
 * REST request it stands for: the same key, the short window, the month's unit (given back unless the answer carries
 * what was asked), the dispatcher and its caches. A refusal of the limiter or of the platform is a tool result with
 * isError, carrying the REST error's code, message and retry seconds; malformed arguments are JSON-RPC's -32602.
 *
 * A transcript costs one unit of the month per cache life, however many pages of it are read: the first page is
 * charged as a REST request is, and its next_cursor carries, signed with a secret of the key file (keystore_secret)
 * and bound to the key, the transcript's ETag and the end of the cache life that unit paid for; a page asked with
 * that cursor before then is counted in the short window only (as a REST revalidation answered 304 is). No state is
 * kept between calls: any gateway of a fleet serves any page.
 */
#ifndef VTS_MCP_TOOLS_H
#define VTS_MCP_TOOLS_H

#include <yajl/yajl_tree.h>

#include "common/buf.h"
#include "gateway/http/appctx.h"
#include "gateway/http/http.h"

/* Appends the tools/list result ({"tools":[...]}) to out. Returns 0 or -ENOMEM. */
int mcp_tools_list(struct buf *out);

/*
 * Runs tools/call of the tool named name with arguments args (an object, or NULL for none) for key, answering req
 * (id: the request's id as JSON text) now or once its work is done. Returns 0 (answered or under way), -ENOENT for
 * an unknown tool (not answered: the caller answers -32602).
 */
int mcp_tools_call(struct handlers_ctx *ctx, struct http_request *req, const struct key_entry *key, const char *id,
                   const char *name, yajl_val args);

#endif
