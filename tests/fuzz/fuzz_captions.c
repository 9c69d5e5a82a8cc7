/* Fuzzes the caption parsers (json3, srv3, srv1) and the transcript serialiser on whatever they accept. */
#include <stdint.h>
#include <stdlib.h>

#include "fetcher/captions/captions.h"
#include "fetcher/captions/transcript.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct segment_list sl;
  if (captions_parse((const char *)data, size, &sl) == 0) {
    struct buf out = BUF_INIT;
    (void)transcript_serialize(&sl, "en", "captions", &out);
    buf_free(&out);
    segment_list_free(&sl);
  }
  return 0;
}
