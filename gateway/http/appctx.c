/* What every handler of a worker shares (see appctx.h). */
#include "gateway/http/appctx.h"

#include "common/util.h"
#include "gateway/http/errors.h"

const struct key_entry *appctx_authorize(struct handlers_ctx *ctx, struct http_request *req) {
  const struct key_entry *key = NULL;
  if (req->key_state == HTTP_KEY_PRESENT) key = keystore_lookup(ctx->keys, req->api_key, req->api_key_len);
  if (key == NULL) {
    http_respond_error(req, API_ERR_UNAUTHORIZED, NULL);
    return NULL;
  }
  util_copy_str(req->key_id, sizeof(req->key_id), key->name);
  return key;
}
