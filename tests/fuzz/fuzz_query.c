/* Fuzzes the transcript query parser: never crashes, and an accepted query always yields a valid id and language. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/ident.h"
#include "gateway/http/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct transcript_query q;
  if (query_parse_transcript((const char *)data, size, &q) == API_OK) {
    if (!ident_video_id_valid(q.video_id, strlen(q.video_id))) abort();
    if (q.lang[0] != '\0' && !ident_language_valid(q.lang, strlen(q.lang))) abort();
  }
  return 0;
}
