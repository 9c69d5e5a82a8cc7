/* Stand-in until the query module lands: accepts only video_id=<11 chars> alone. */
#include "gateway/query.h"

#include <string.h>

int query_language_valid(const char *s, size_t len) { (void)s; return len >= 2 && len <= 3; }
int query_video_id_valid(const char *s, size_t len) { (void)s; return len == 11; }

enum api_error query_parse_transcript(const char *qs, size_t len, struct transcript_query *q) {
  memset(q, 0, sizeof(*q));
  if (len != 20 || strncmp(qs, "video_id=", 9) != 0) return API_ERR_AMBIGUOUS_REQUEST;
  memcpy(q->video_id, qs + 9, 11);
  return API_OK;
}
