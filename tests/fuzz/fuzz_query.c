/*
 * Fuzzes the transcript, tracks and metadata query parsers: never crashes, an accepted query always yields a valid id
 * and language, the tracks parser accepts whatever the transcript parser does (it reads fewer parameters), and the
 * metadata parser refuses only what the tracks parser refuses or an include, and asks the chapters only when
 * accepting.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/ident.h"
#include "gateway/http/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct transcript_query q;
  int transcript_ok = query_parse_transcript((const char *)data, size, &q) == API_OK;
  if (transcript_ok) {
    if (!ident_video_id_valid(q.video_id, strlen(q.video_id))) abort();
    if (q.lang[0] != '\0' && !ident_language_valid(q.lang, strlen(q.lang))) abort();
  }
  enum api_error tracks = query_parse_tracks((const char *)data, size, &q);
  if (tracks == API_OK) {
    if (!ident_video_id_valid(q.video_id, strlen(q.video_id)) || q.lang[0] != '\0' || q.format_given) abort();
  } else if (transcript_ok) {
    abort();
  }
  enum api_error metadata = query_parse_metadata((const char *)data, size, &q);
  if (metadata != tracks && (tracks != API_OK || metadata != API_ERR_INVALID_INCLUDE)) abort();
  if (metadata != API_OK && q.chapters) abort();
  return 0;
}
