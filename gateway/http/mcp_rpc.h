/*
 * The JSON-RPC 2.0 answers of POST /mcp: a result, or an error object with the standard codes. Shared by the
 * transport (mcp.c) and the tools (mcp_tools.c), which answer later, once a tool's work is done.
 */
#ifndef VTS_MCP_RPC_H
#define VTS_MCP_RPC_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/http/errors.h"
#include "gateway/http/http.h"

/* The standard codes of JSON-RPC 2.0. */
#define MCP_RPC_PARSE_ERROR (-32700)
#define MCP_RPC_INVALID_REQUEST (-32600)
#define MCP_RPC_METHOD_NOT_FOUND (-32601)
#define MCP_RPC_INVALID_PARAMS (-32602)
#define MCP_RPC_INTERNAL_ERROR (-32603)

/* The longest request id kept, as its JSON text (a string with its quotes, or a number). */
#define MCP_ID_BYTES 160

/*
 * Answers 200 {"jsonrpc":"2.0","id":<id>,"result":<result>}: id and result are JSON texts (id as the request wrote
 * it). extra_headers as for http_respond.
 */
int mcp_rpc_result(struct http_request *req, const char *id, const char *extra_headers, const char *result, size_t len);
/* Answers status with a JSON-RPC error object; id NULL is null (a message whose id could not be read). */
int mcp_rpc_error(struct http_request *req, int status, const char *id, int code, const char *message);

/*
 * Refuses a tools/call whose arguments bad names: 200 with -32602, as the caller's to fix. The tool frees what it made
 * for the call itself. Returns what mcp_rpc_error returns.
 */
int mcp_rpc_refuse_args(struct http_request *req, const char *id, const char *bad);

/*
 * Answers a tools/call with its result: text (JSON-escaped here) as its one text content, structured (JSON text) as
 * structuredContent (NULL: none), and isError.
 */
int mcp_rpc_tool_result(struct http_request *req, const char *id, const char *extra_headers, const char *text,
                        size_t text_len, const char *structured, size_t structured_len, int is_error);
/*
 * The isError result of the REST error e, so that a model reads what to do: {"error":{code, message (NULL: e's own),
 * status, retry_after_s (seconds, or null)}} as its text.
 */
int mcp_rpc_tool_error(struct http_request *req, const char *id, const char *extra_headers, enum api_error e,
                       const char *message, int64_t retry_after_s);

#endif
