/*
 * GET /v1/video/transcript?format=chunks: the transcript cut for a retrieval index. A chunk is a run of whole
 * segments whose text (their texts joined by one space, as the transcript's text is) holds at most chunk_chars
 * characters (a segment longer than that is a chunk of its own); the next chunk starts with the last whole segments
 * of the one before whose text holds at most chunk_overlap characters (never all of them, so every chunk moves on).
 * Each chunk says its segments (first_segment, end_segment), so the chunks without their overlaps are the transcript.
 * A video with chapters is cut at them too: a segment belongs to the chapter it starts in, a chunk never holds
 * segments of two chapters, and a chapter's first chunk starts at its first segment (no overlap from the one before).
 */
#ifndef VTS_CHUNKS_H
#define VTS_CHUNKS_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define CHUNKS_MIN_CHARS 200
#define CHUNKS_MAX_CHARS 20000
#define CHUNKS_DEFAULT_CHARS 2000
#define CHUNKS_DEFAULT_OVERLAP 200

/*
 * Appends the chunks answer of the transcript body json (len bytes) to out: {"language", "source", "chunk_chars",
 * "chunk_overlap", "chunks": [{"index", "start", "end", "first_segment", "end_segment", "text"}]}. chars and
 * overlap are within the bounds above (overlap at most chars / 2). cuts holds the starts of the video's chapters in ms,
 * ascending (ncuts 0, cuts NULL allowed, for a video without chapters). Returns 0, -EPROTO when json is not a
 * transcript body, or -ENOMEM; out is left as it was on failure.
 */
int chunks_render(const char *json, size_t len, size_t chars, size_t overlap, const int64_t *cuts, size_t ncuts,
                  struct buf *out);

#endif
