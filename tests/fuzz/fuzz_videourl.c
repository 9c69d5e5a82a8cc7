/* Fuzzes video_url parsing: never crashes, and an accepted URL always yields an 11-character id. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/ident.h"
#include "gateway/http/videourl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char id[12];
  if (videourl_parse((const char *)data, size, id) == 0 && !ident_video_id_valid(id, strlen(id))) abort();
  return 0;
}
