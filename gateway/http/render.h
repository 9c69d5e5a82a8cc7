/*
 * The transcript in the formats a client may ask for: JSON (the body as cached, untouched), plain text, SubRip and
 * WebVTT. The other formats are rendered by the worker from the cached JSON body, so a cache hit stays a hit
 * whatever the format, and the fetcher and the caches know only one body.
 */
#ifndef VTS_RENDER_H
#define VTS_RENDER_H

#include <stddef.h>

#include "common/buf.h"

enum render_format { RENDER_JSON = 0, RENDER_TEXT, RENDER_SRT, RENDER_VTT };

/* The values of the format parameter, as listed in the 400 message: "json, text, srt, vtt". */
#define RENDER_FORMAT_NAMES "json, text, srt, vtt"

/* The format named s (len bytes, not NUL-terminated; exact, lower case). Returns 0, or -EINVAL for another name. */
int render_format_from_name(const char *s, size_t len, enum render_format *out);

/*
 * The format an Accept header value asks for: the media range of highest quality among text/plain,
 * application/x-subrip, text/vtt and application/json, where a wildcard counts as JSON; the first listed wins a tie.
 * JSON when nothing there names one of them (or accept is NULL).
 */
enum render_format render_format_from_accept(const char *accept, size_t len);

/* The Content-Type of an answer in format f. */
const char *render_content_type(enum render_format f);

/*
 * Appends the transcript body json (len bytes, the fetcher's serialisation) rendered as f to out: RENDER_TEXT is the
 * body's text; RENDER_SRT and RENDER_VTT hold one cue per segment with a non-empty text, times to the millisecond.
 * Not for RENDER_JSON (the body is the answer). Returns 0, -EPROTO when json is not a transcript body, -EINVAL for
 * RENDER_JSON, or -ENOMEM; out is left as it was on failure.
 */
int render_transcript(enum render_format f, const char *json, size_t len, struct buf *out);

#endif
