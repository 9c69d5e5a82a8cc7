/* The public transcript body of SPEC 2.1, serialised once (yajl_gen, UTF-8 validated) in the fetcher. */
#ifndef VTS_TRANSCRIPT_H
#define VTS_TRANSCRIPT_H

#include "common/buf.h"
#include "fetcher/captions/captions.h"

/*
 * Appends {"language":..,"source":..,"text":..,"segments":[{"text":..,"start":..,"duration":..}]} to out; text is
 * the segments joined by single spaces. source is "captions" or "speech". start and duration are printed rounded
 * to milliseconds without trailing zeros (1.2, 0, 3.239). Returns 0, -EILSEQ for invalid UTF-8, -EINVAL for a time
 * that is negative, not finite or absurd, -E2BIG past VTS_MAX_TRANSCRIPT_BYTES, or -ENOMEM; on error out is left
 * as it was.
 */
int transcript_serialize(const struct segment_list *sl, const char *lang, const char *source, struct buf *out);

#endif
