/*
 * Fuzzes the gateway<->fetcher message decoders and the browse body's reader: any bytes are rejected or decoded, and
 * re-encode identically.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct proto_job job;
  struct proto_result res;
  struct buf b = BUF_INIT;
  if (proto_decode_job(data, size, &job) == 0) {
    if (proto_encode_job(&b, &job) != 0 || b.len != size || memcmp(b.data, data, size) != 0) abort();
  }
  buf_reset(&b);
  if (proto_decode_result(data, size, &res) == 0) {
    /* RESULT and RESULT_LAST share one layout: re-encode with the type the message had. */
    int rv = proto_peek_type(data, size) == PROTO_RESULT_LAST ? proto_encode_result_last(&b, &res)
                                                              : proto_encode_result(&b, &res);
    if (rv != 0 || b.len != size || memcmp(b.data, data, size) != 0) abort();
  }
  buf_reset(&b);
  uint64_t declined;
  uint8_t why;
  if (proto_decode_decline(data, size, &declined, &why) == 0) {
    if (proto_encode_decline(&b, declined, why) != 0 || b.len != size || memcmp(b.data, data, size) != 0) abort();
  }
  buf_reset(&b);
  struct proto_browse_page page;
  if (proto_browse_read((const char *)data, size, &page) == 0) {
    char token[VTS_MAX_BROWSE_TOKEN_BYTES + 1];
    memcpy(token, page.token, page.token_len);
    token[page.token_len] = '\0';
    char(*ids)[VTS_VIDEO_ID_LEN + 1] = calloc(page.n + 1, sizeof(*ids));
    if (ids == NULL) abort();
    for (size_t i = 0; i < page.n; i++) memcpy(ids[i], page.ids + i * (VTS_VIDEO_ID_LEN + 1), VTS_VIDEO_ID_LEN);
    if (proto_browse_body(&b, token, (const char(*)[VTS_VIDEO_ID_LEN + 1]) ids, page.n) != 0 || b.len != size ||
        memcmp(b.data, data, size) != 0)
      abort();
    free(ids);
  }
  buf_free(&b);
  return 0;
}
