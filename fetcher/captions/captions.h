/*
 * Caption bodies of /api/timedtext in three shapes: json3, srv3 and srv1 XML, detected from the bytes.
 * Entities decoded (twice for ASR text that arrives double-escaped), tags stripped, empty cues dropped,
 * window/style events and line-break appends skipped. Times in seconds.
 *
 * Decisions (see fetcher/readers/textclean.h for the text rules):
 * - Invalid UTF-8 in cue text becomes U+FFFD, in all three shapes: one bad byte must not cost a whole transcript.
 * - json3 text is taken as it is (it is JSON, not markup): no entity decoding, no tag stripping.
 * - A time that is not a plain non-negative decimal (sign, exponent, empty, past 10^12 ms) refuses the body:
 *   such a body is not a caption track, and guessing would publish wrong times. A missing time counts as 0.
 * - XML is scanned strictly (fetcher/readers/xmlscan.h): DOCTYPE, CDATA, mismatched tags and unknown roots are
 * refused.
 * - More than VTS_MAX_SEGMENTS cues, or a body over VTS_MAX_UPSTREAM_BODY_BYTES, is -EPROTO.
 */
#ifndef VTS_CAPTIONS_H
#define VTS_CAPTIONS_H

#include <stddef.h>

#include "fetcher/captions/segments.h"

/* Parses body. Returns 0 (possibly with zero segments), or -EPROTO for an unparsable or oversize body. */
int captions_parse(const char *body, size_t len, struct segment_list *out);

#endif
