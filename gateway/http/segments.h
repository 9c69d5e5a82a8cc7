/*
 * A transcript body read into its segments, for the answers cut from it: the pages of the get_transcript tool, the
 * matches of search_transcript and the chunks of format=chunks. Each segment keeps its times as the body writes them
 * (the number's own digits), so a page or a chunk repeats them to the digit and joined pages are the body's segments.
 */
#ifndef VTS_SEGMENTS_H
#define VTS_SEGMENTS_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* The longest number text kept for a time ("12345.678" and room). */
#define SEGMENTS_TIME_BYTES 24

struct segments_item {
  size_t text_at; /* the text's bytes in segments_doc.pool, decoded (UTF-8), not NUL-terminated */
  size_t text_len;
  char start[SEGMENTS_TIME_BYTES]; /* the number as the body writes it */
  char duration[SEGMENTS_TIME_BYTES];
  int64_t start_ms;
  int64_t end_ms; /* start + duration */
};

struct segments_doc {
  char language[32];
  char source[16];
  struct segments_item *seg;
  size_t n;
  struct buf pool; /* every segment's text, one after another */
};

/* The body's own strings the reader hands on. */
enum segments_member { SEGMENTS_LANGUAGE = 1, SEGMENTS_SOURCE, SEGMENTS_TEXT };

/*
 * One segment as the reader met it. What it lacks is marked: has_text 0, a time's ms -1. A time's digits (when the
 * sink asks for them) are kept as the body writes them, cut to fit; its len is the whole number's, so a caller that
 * keeps the digits can refuse one too long. text (not NUL-terminated) lasts only for the call.
 */
struct segments_seen {
  const char *text;
  size_t text_len;
  int has_text;
  int64_t start_ms, duration_ms;
  char start[SEGMENTS_TIME_BYTES], duration[SEGMENTS_TIME_BYTES];
  size_t start_len, duration_len;
};

/*
 * What a reading of a body does with it: member for the body's language, source and text (may be NULL), segment for
 * each segment in order, once it has ended (may be NULL), with the times' digits when digits is set (a rendering
 * wants only the milliseconds). Each returns 0, or -errno to stop the reading with it.
 */
struct segments_sink {
  int (*member)(void *ctx, enum segments_member m, const char *s, size_t len);
  int (*segment)(void *ctx, const struct segments_seen *seg);
  int digits;
};

/*
 * Reads the transcript body json (len bytes) with yajl's event parser, as it streams: an object whose segments member
 * is an array of objects, each read for its text, start and duration (times as bodycheck_seconds_ms reads them), no
 * nesting deeper. The one reader of a cached body, for the rendered formats and for segments_read. Returns 0,
 * -EPROTO when it is not a transcript body, -ENOMEM, or the first error a sink's call returned.
 */
int segments_scan(const char *json, size_t len, const struct segments_sink *sink, void *ctx);

/*
 * Reads the transcript body json (len bytes, the fetcher's serialisation: language, source, text, segments) into doc
 * with yajl's event parser (no tree). Returns 0, -EPROTO when it is not a transcript body, or -ENOMEM; doc is empty
 * on failure. Free it with segments_free.
 */
int segments_read(const char *json, size_t len, struct segments_doc *doc);
void segments_free(struct segments_doc *doc);

/* The text of segment i. */
static inline const char *segments_text(const struct segments_doc *doc, size_t i) {
  return doc->pool.data + doc->seg[i].text_at;
}

/* The number of characters (UTF-8 code points) of s. */
size_t segments_chars(const char *s, size_t len);

/* "[h:mm:ss] " or "[m:ss] " for a time in ms, as a line of the text format starts; writes a NUL, returns the length. */
size_t segments_stamp(int64_t ms, char out[24]);

/*
 * The characters segment i takes in a page of format text ("[m:ss] text\n") or segments (its JSON object and a
 * comma), which max_chars bounds.
 */
size_t segments_cost(const struct segments_doc *doc, size_t i, int as_text);

/*
 * The end (exclusive) of the page that starts at segment from: whole segments whose cost adds up to at most max_chars,
 * and at least one (a segment longer than max_chars is a page of its own). from < doc->n.
 */
size_t segments_page_end(const struct segments_doc *doc, size_t from, size_t max_chars, int as_text);

#endif
