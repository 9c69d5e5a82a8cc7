/*
 * The transcript endpoint's query string: percent-decoding, '+', empty and repeated parameters, and the 400 rules
 * in the order of ARCHITECTURE.md: ambiguous_request, ambiguous_language, invalid_video_id, invalid_video_url,
 * invalid_language. translate is a language too: a repeat is ambiguous_language (after language and lang), a
 * malformed one invalid_language (after language and lang). Then format (bad_request). A repeated parameter is
 * ambiguous. Unknown parameters are ignored.
 */
#ifndef VTS_QUERY_H
#define VTS_QUERY_H

#include <stddef.h>

#include "gateway/http/errors.h"
#include "gateway/http/render.h"

struct transcript_query {
  char video_id[12];  /* resolved id: from video_id, or parsed out of video_url */
  char lang[16];      /* requested language, "" when none */
  char translate[16]; /* language to translate the track into, "" when none */
  int format_given;   /* format was in the query (else the Accept header decides) */
  enum render_format format;
  /* format=chunks (format is then RENDER_JSON): the chunks' size and overlap in characters (chunks.h). */
  int chunks;
  size_t chunk_chars;
  size_t chunk_overlap;
  int chapters; /* GET /v1/video/metadata with include=chapters */
};

/*
 * Parses qs (len bytes, without the '?'; not NUL-terminated; NULL with len 0 is an empty query). Returns API_OK with
 * q filled (video_url already resolved to its id), or the first api_error that applies with q->video_id and q->lang
 * empty. Allocates nothing.
 */
enum api_error query_parse_transcript(const char *qs, size_t len, struct transcript_query *q);

/*
 * The same for GET /v1/video/tracks and GET /v1/video/metadata, which take video_id or video_url under the same rules
 * and nothing else: language, lang and format are unknown parameters there, and ignored.
 */
enum api_error query_parse_tracks(const char *qs, size_t len, struct transcript_query *q);

/*
 * The same for GET /v1/video/metadata, which also takes include: a comma-separated list of what to add to the
 * metadata, whose one value is "chapters" (q->chapters). A repeated include, or one naming anything else (an empty
 * value included), is API_ERR_INVALID_INCLUDE, after the video's errors.
 */
enum api_error query_parse_metadata(const char *qs, size_t len, struct transcript_query *q);

#endif
