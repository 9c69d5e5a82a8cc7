/* Fuzzes the gateway<->fetcher message decoders: any bytes are rejected or decoded, and re-encode identically. */
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
  buf_free(&b);
  return 0;
}
