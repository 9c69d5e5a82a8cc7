/*
 * POST /mcp: the Model Context Protocol over Streamable HTTP (revisions 2025-11-25, 2025-06-18 and 2025-03-26), JSON
 * answers only. One JSON-RPC 2.0 message a request (a batch array is refused, as 2025-06-18 says): initialize, ping,
 * tools/list and tools/call answered with a JSON body; a notification or a response from the client answered 202
 * with no body. No session: every request carries all it needs, so any gateway of a fleet serves any of them.
 *
 * Before the message is read, in this order: an Origin the operator did not list (VTS_MCP_ALLOWED_ORIGINS) is 403
 * (the transport's guard against DNS rebinding; a request without Origin, as a program sends, passes); no valid
 * key (Authorization: Bearer <key>, or x-api-key) is 401 with WWW-Authenticate: Bearer; an Accept that refuses
 * application/json is 406; a body that is not application/json is 415; an MCP-Protocol-Version this server does not
 * speak is 400. These answers carry the REST Error body.
 */
#ifndef VTS_MCP_H
#define VTS_MCP_H

#include "gateway/http/appctx.h"
#include "gateway/http/http.h"

/* The handler of the /mcp route (routes.h). */
void mcp_handle(struct handlers_ctx *ctx, struct http_request *req);

#endif
