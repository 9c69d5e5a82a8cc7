/*
 * Caption bodies of /api/timedtext in three shapes: json3, srv3 and srv1 XML, detected from the bytes.
 * Entities decoded (twice for ASR text that arrives double-escaped), tags stripped, empty cues dropped,
 * window/style events and line-break appends skipped. Times in seconds.
 */
#ifndef VTS_CAPTIONS_H
#define VTS_CAPTIONS_H

#include <stddef.h>

struct segment {
  char *text; /* owned, UTF-8, no leading/trailing whitespace */
  double start;
  double duration;
};

struct segment_list {
  struct segment *items;
  size_t len;
  size_t cap;
};

/* Parses body. Returns 0 (possibly with zero segments), or -EPROTO for an unparsable or oversize body. */
int captions_parse(const char *body, size_t len, struct segment_list *out);
void segment_list_free(struct segment_list *sl);

#endif
