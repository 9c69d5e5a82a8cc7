#include "gateway/http/mcp.h"
#include "gateway/http/jsonshape.h"

#include <errno.h>
#include <string.h>
#include <strings.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "common/buf.h"
#include "common/util.h"
#include "gateway/http/errors.h"
#include "gateway/http/mcp_rpc.h"
#include "gateway/http/mcp_tools.h"

/* The revisions this server speaks, newest first: initialize offers the first when the client's is not here. */
static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};
#define MCP_NVERSIONS (sizeof(versions) / sizeof(versions[0]))

/* The deepest nesting a message may have: params.arguments and an argument's value. */
#define MCP_MAX_DEPTH 8

#define MCP_INSTRUCTIONS                                                                                             \
  "Transcripts of videos on the video platform. get_transcript returns a page of a transcript and a next_cursor to " \
  "read on; search_transcript finds where something is said; list_caption_tracks tells the languages; "              \
  "get_video_metadata the title, channel and description; start_transcript_job and get_transcript_job fetch many "   \
  "videos, a playlist or a channel in the background. Each transcript costs one unit of the monthly quota."

static const char *find_version(const char *s, size_t len) {
  for (size_t i = 0; i < MCP_NVERSIONS; i++)
    if (strlen(versions[i]) == len && memcmp(versions[i], s, len) == 0) return versions[i];
  return NULL;
}

static int is_ows(char c) { return c == ' ' || c == '\t'; }

/* Whether the comma-separated list (the operator's VTS_MCP_ALLOWED_ORIGINS) names origin, case-insensitively. */
static int origin_listed(const char *list, const char *origin, size_t len) {
  const char *p = list;
  while (*p != '\0') {
    const char *end = strchr(p, ',');
    size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
    const char *e = p;
    size_t en = n;
    while (en > 0 && is_ows(e[0])) e++, en--;
    while (en > 0 && is_ows(e[en - 1])) en--;
    if (en == len && strncasecmp(e, origin, len) == 0) return 1;
    if (end == NULL) break;
    p = end + 1;
  }
  return 0;
}

/* Whether an Accept value allows application/json: a range naming it, or a wildcard, without a q of zero. */
static int accepts_json(const char *accept, size_t len) {
  size_t i = 0;
  while (i < len) {
    size_t j = i;
    while (j < len && accept[j] != ',') j++;
    const char *r = accept + i;
    size_t rn = j - i;
    while (rn > 0 && is_ows(r[0])) r++, rn--;
    size_t type_len = 0;
    while (type_len < rn && r[type_len] != ';' && !is_ows(r[type_len])) type_len++;
    int named = (type_len == 16 && strncasecmp(r, "application/json", 16) == 0) ||
                (type_len == 13 && strncasecmp(r, "application/*", 13) == 0) ||
                (type_len == 3 && memcmp(r, "*/*", 3) == 0);
    if (named) {
      /* A q of zero ("q=0", "q=0.0") refuses it. */
      const char *q = NULL;
      for (size_t k = type_len; k + 2 < rn; k++)
        if ((r[k] == 'q' || r[k] == 'Q') && r[k + 1] == '=') q = r + k + 2;
      int zero = 0;
      if (q != NULL) {
        zero = 1;
        for (const char *x = q; x < r + rn && !is_ows(*x) && *x != ';'; x++)
          if (*x != '0' && *x != '.') zero = 0;
      }
      if (!zero) return 1;
    }
    i = j + 1;
  }
  return 0;
}

static int is_json_type(const struct http_request *req) {
  if (req->content_type == NULL || req->content_encoded) return 0;
  size_t n = req->content_type_len;
  const char *semi = memchr(req->content_type, ';', n);
  if (semi != NULL) n = (size_t)(semi - req->content_type);
  while (n > 0 && is_ows(req->content_type[n - 1])) n--;
  return n == 16 && strncasecmp(req->content_type, "application/json", 16) == 0;
}

/* The key of req from x-api-key or Authorization: Bearer (both given, they must be the same key); NULL when none. */
static const struct key_entry *find_key(struct handlers_ctx *ctx, struct http_request *req) {
  const char *key = NULL;
  size_t len = 0;
  if (req->key_state == HTTP_KEY_INVALID) return NULL;
  if (req->key_state == HTTP_KEY_PRESENT) {
    key = req->api_key;
    len = req->api_key_len;
  }
  if (req->authorization != NULL) {
    const char *a = req->authorization;
    size_t n = req->authorization_len;
    if (n <= 7 || strncasecmp(a, "Bearer ", 7) != 0) return NULL;
    a += 7;
    n -= 7;
    while (n > 0 && is_ows(a[0])) a++, n--;
    if (key != NULL && (len != n || memcmp(key, a, n) != 0)) return NULL;
    key = a;
    len = n;
  }
  if (key == NULL) return NULL;
  const struct key_entry *e = keystore_lookup(ctx->keys, key, len);
  if (e != NULL) util_copy_str(req->key_id, sizeof(req->key_id), e->name);
  return e;
}

/* The id of a request as JSON text into out: a string (re-encoded) or an integer; -EINVAL for another kind. */
static int read_id(yajl_val id, char out[MCP_ID_BYTES + 1]) {
  if (YAJL_IS_INTEGER(id)) {
    util_copy_str(out, MCP_ID_BYTES + 1, YAJL_GET_NUMBER(id));
    return 0;
  }
  const char *s = YAJL_IS_STRING(id) ? YAJL_GET_STRING(id) : NULL;
  if (s == NULL || strlen(s) > MCP_ID_BYTES / 2 - 2) return -EINVAL;
  struct buf b = BUF_INIT;
  int rv = buf_puts(&b, "\"") | buf_json_escape(&b, s, strlen(s)) | buf_puts(&b, "\"");
  if (rv != 0 || b.len > MCP_ID_BYTES) {
    buf_free(&b);
    return -EINVAL;
  }
  memcpy(out, b.data, b.len + 1);
  buf_free(&b);
  return 0;
}

/* The string of v, NULL when v is not one. */
static const char *string_of(yajl_val v) {
  const char *s = YAJL_IS_STRING(v) ? YAJL_GET_STRING(v) : NULL;
  return s;
}

static yajl_val member(yajl_val obj, const char *name) {
  if (!YAJL_IS_OBJECT(obj)) return NULL;
  for (size_t i = 0; i < obj->u.object.len; i++)
    if (strcmp(obj->u.object.keys[i], name) == 0) return obj->u.object.values[i];
  return NULL;
}

static void answer_initialize(struct http_request *req, const char *id, yajl_val params) {
  yajl_val asked = member(params, "protocolVersion");
  const char *asked_s = string_of(asked);
  const char *version = asked_s != NULL ? find_version(asked_s, strlen(asked_s)) : NULL;
  if (version == NULL) version = versions[0];
  struct buf b = BUF_INIT;
  int rv = buf_printf(&b,
                      "{\"protocolVersion\":\"%s\",\"capabilities\":{\"tools\":{\"listChanged\":false}},"
                      "\"serverInfo\":{\"name\":\"vts\",\"title\":\"Video transcripts\",\"version\":\"%s\"},"
                      "\"instructions\":\"" MCP_INSTRUCTIONS "\"}",
                      version, VTS_VERSION);
  if (rv != 0)
    mcp_rpc_error(req, 500, id, MCP_RPC_INTERNAL_ERROR, "Out of memory.");
  else
    mcp_rpc_result(req, id, NULL, b.data, b.len);
  buf_free(&b);
}

static void answer_tools_list(struct http_request *req, const char *id, yajl_val params) {
  yajl_val cursor = member(params, "cursor");
  if (cursor != NULL) {
    /* One page holds every tool: no cursor was ever given. */
    mcp_rpc_error(req, 200, id, MCP_RPC_INVALID_PARAMS, "cursor is not one this server gave.");
    return;
  }
  struct buf b = BUF_INIT;
  if (mcp_tools_list(&b) != 0)
    mcp_rpc_error(req, 500, id, MCP_RPC_INTERNAL_ERROR, "Out of memory.");
  else
    mcp_rpc_result(req, id, NULL, b.data, b.len);
  buf_free(&b);
}

static void answer_tools_call(struct handlers_ctx *ctx, struct http_request *req, const struct key_entry *key,
                              const char *id, yajl_val params) {
  const char *name = string_of(member(params, "name"));
  yajl_val args = member(params, "arguments");
  if (name == NULL || (args != NULL && !YAJL_IS_OBJECT(args))) {
    mcp_rpc_error(req, 200, id, MCP_RPC_INVALID_PARAMS, "tools/call needs params.name and an arguments object.");
    return;
  }
  if (mcp_tools_call(ctx, req, key, id, name, args) == -ENOENT)
    mcp_rpc_error(req, 200, id, MCP_RPC_INVALID_PARAMS, "Unknown tool: see tools/list.");
}

/* One JSON-RPC message (root, an object): a request answered here or by its tool, else 202. */
static void serve_message(struct handlers_ctx *ctx, struct http_request *req, const struct key_entry *key,
                          yajl_val root) {
  const char *jsonrpc = string_of(member(root, "jsonrpc"));
  yajl_val method = member(root, "method");
  yajl_val idv = member(root, "id");
  char id[MCP_ID_BYTES + 1];
  int has_id = idv != NULL && read_id(idv, id) == 0;
  if (jsonrpc == NULL || strcmp(jsonrpc, "2.0") != 0 || (idv != NULL && !has_id)) {
    mcp_rpc_error(req, 400, has_id ? id : NULL, MCP_RPC_INVALID_REQUEST,
                  "A message is a JSON-RPC 2.0 object with jsonrpc \"2.0\" and a string or integer id.");
    return;
  }
  if (method == NULL) {
    /* A response (to a request this server never sends) or a malformed message: nothing to answer. */
    if (has_id && (member(root, "result") != NULL || member(root, "error") != NULL)) {
      http_respond(req, 202, NULL, NULL, 0, NULL);
      return;
    }
    mcp_rpc_error(req, 400, has_id ? id : NULL, MCP_RPC_INVALID_REQUEST, "The message has no method.");
    return;
  }
  const char *m = string_of(method);
  if (m == NULL) {
    mcp_rpc_error(req, 400, has_id ? id : NULL, MCP_RPC_INVALID_REQUEST, "method must be a string.");
    return;
  }
  if (!has_id) {
    /* A notification (notifications/initialized, cancelled, ...): nothing to answer, no body. */
    http_respond(req, 202, NULL, NULL, 0, NULL);
    return;
  }
  yajl_val params = member(root, "params");
  if (params != NULL && !YAJL_IS_OBJECT(params)) {
    mcp_rpc_error(req, 200, id, MCP_RPC_INVALID_PARAMS, "params must be an object.");
    return;
  }
  if (strcmp(m, "initialize") == 0)
    answer_initialize(req, id, params);
  else if (strcmp(m, "ping") == 0)
    mcp_rpc_result(req, id, NULL, "{}", 2);
  else if (strcmp(m, "tools/list") == 0)
    answer_tools_list(req, id, params);
  else if (strcmp(m, "tools/call") == 0)
    answer_tools_call(ctx, req, key, id, params);
  else
    mcp_rpc_error(req, 200, id, MCP_RPC_METHOD_NOT_FOUND, "Method not found.");
}

void mcp_handle(struct handlers_ctx *ctx, struct http_request *req) {
  if (req->origin_bad ||
      (req->origin != NULL && !origin_listed(ctx->cfg->mcp_allowed_origins, req->origin, req->origin_len))) {
    http_respond_error(req, API_ERR_MCP_ORIGIN, NULL);
    return;
  }
  const struct key_entry *key = find_key(ctx, req);
  if (key == NULL) {
    http_respond_error(req, API_ERR_MCP_UNAUTHORIZED, "WWW-Authenticate: Bearer\r\n");
    return;
  }
  if (req->accept != NULL && !accepts_json(req->accept, req->accept_len)) {
    http_respond_error(req, API_ERR_MCP_NOT_ACCEPTABLE, NULL);
    return;
  }
  if (!is_json_type(req)) {
    http_respond_error(req, API_ERR_UNSUPPORTED_MEDIA_TYPE, NULL);
    return;
  }
  if (req->mcp_version_bad ||
      (req->mcp_version != NULL && find_version(req->mcp_version, req->mcp_version_len) == NULL)) {
    http_respond_error(req, API_ERR_MCP_VERSION, NULL);
    return;
  }
  const char *body = req->body;
  size_t len = req->body_len;
  size_t at = 0;
  while (at < len && (body[at] == ' ' || body[at] == '\t' || body[at] == '\r' || body[at] == '\n')) at++;
  if (at < len && body[at] == '[') {
    mcp_rpc_error(req, 400, NULL, MCP_RPC_INVALID_REQUEST, "Batches are not supported: send one message a request.");
    return;
  }
  char errbuf[128];
  yajl_val root = body != NULL && len > 0 && jsonshape_ok(body, len, MCP_MAX_DEPTH)
                      ? yajl_tree_parse(body, errbuf, sizeof(errbuf))
                      : NULL;
  if (root == NULL) {
    mcp_rpc_error(req, 400, NULL, MCP_RPC_PARSE_ERROR, "Parse error: the body is not JSON.");
    return;
  }
  if (!YAJL_IS_OBJECT(root))
    mcp_rpc_error(req, 400, NULL, MCP_RPC_INVALID_REQUEST, "A message is a JSON object.");
  else
    serve_message(ctx, req, key, root);
  yajl_tree_free(root);
}
