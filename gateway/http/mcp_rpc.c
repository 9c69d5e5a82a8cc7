#include "gateway/http/mcp_rpc.h"

#include <inttypes.h>
#include <string.h>

#include "common/buf.h"

int mcp_rpc_result(struct http_request *req, const char *id, const char *extra_headers, const char *result,
                   size_t len) {
  struct buf b = BUF_INIT;
  int rv = buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"id\":");
  rv |= buf_puts(&b, id);
  rv |= buf_puts(&b, ",\"result\":");
  rv |= buf_append(&b, result, len);
  rv |= buf_puts(&b, "}");
  if (rv != 0) {
    buf_free(&b);
    return mcp_rpc_error(req, 500, id, MCP_RPC_INTERNAL_ERROR, "Out of memory.");
  }
  size_t n = 0;
  char *body = buf_steal(&b, &n);
  return http_respond(req, 200, extra_headers, body, n, body);
}

/* Built as http_respond_error_msg builds a REST error: alike in shape, the two bodies and their fallbacks differ. */
int mcp_rpc_error(struct http_request *req, int status, const char *id, int code, const char *message) {
  struct buf b = BUF_INIT;
  int rv = buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"id\":");
  rv |= buf_puts(&b, id != NULL ? id : "null");
  rv |= buf_printf(&b, ",\"error\":{\"code\":%d,\"message\":\"", code);
  rv |= buf_json_escape(&b, message, strlen(message));
  rv |= buf_puts(&b, "\"}}");
  if (rv != 0) {
    buf_free(&b);
    return http_respond_error(req, API_ERR_SERVICE_UNAVAILABLE, NULL);
  }
  size_t n = 0;
  char *body = buf_steal(&b, &n);
  return http_respond(req, status, NULL, body, n, body);
}

int mcp_rpc_refuse_args(struct http_request *req, const char *id, const char *bad) {
  return mcp_rpc_error(req, 200, id, MCP_RPC_INVALID_PARAMS, bad);
}

int mcp_rpc_tool_result(struct http_request *req, const char *id, const char *extra_headers, const char *text,
                        size_t text_len, const char *structured, size_t structured_len, int is_error) {
  struct buf b = BUF_INIT;
  int rv = buf_puts(&b, "{\"content\":[{\"type\":\"text\",\"text\":\"");
  rv |= buf_json_escape(&b, text, text_len);
  rv |= buf_puts(&b, "\"}]");
  if (structured != NULL) {
    rv |= buf_puts(&b, ",\"structuredContent\":");
    rv |= buf_append(&b, structured, structured_len);
  }
  rv |= buf_puts(&b, is_error ? ",\"isError\":true}" : ",\"isError\":false}");
  if (rv != 0) {
    buf_free(&b);
    return mcp_rpc_error(req, 500, id, MCP_RPC_INTERNAL_ERROR, "Out of memory.");
  }
  rv = mcp_rpc_result(req, id, extra_headers, b.data, b.len);
  buf_free(&b);
  return rv;
}

int mcp_rpc_tool_error(struct http_request *req, const char *id, const char *extra_headers, enum api_error e,
                       const char *message, int64_t retry_after_s) {
  const struct api_error_info *info = api_error_get(e);
  const char *m = message != NULL ? message : info->message;
  struct buf b = BUF_INIT;
  int rv = buf_puts(&b, "{\"error\":{\"code\":\"");
  rv |= buf_json_escape(&b, info->code, strlen(info->code));
  rv |= buf_puts(&b, "\",\"message\":\"");
  rv |= buf_json_escape(&b, m, strlen(m));
  rv |= buf_printf(&b, "\",\"status\":%d,\"retry_after_s\":", info->status);
  rv |= retry_after_s > 0 ? buf_printf(&b, "%" PRId64, retry_after_s) : buf_puts(&b, "null");
  rv |= buf_puts(&b, "}}");
  if (rv != 0) {
    buf_free(&b);
    return mcp_rpc_error(req, 500, id, MCP_RPC_INTERNAL_ERROR, "Out of memory.");
  }
  rv = mcp_rpc_tool_result(req, id, extra_headers, b.data, b.len, NULL, 0, 1);
  buf_free(&b);
  return rv;
}
