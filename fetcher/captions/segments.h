/*
 * A transcript's timed segments, filled by the caption parsers and by the speech engines alike: one list, one cap
 * (VTS_MAX_SEGMENTS) and one error for it, so every producer and the serialiser agree on what a segment is.
 */
#ifndef VTS_SEGMENTS_H
#define VTS_SEGMENTS_H

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

/*
 * Appends a segment, taking ownership of text (freed here on failure). A negative duration is stored as 0. Returns 0,
 * -E2BIG when the list already holds VTS_MAX_SEGMENTS, or -ENOMEM.
 */
int segment_list_push(struct segment_list *sl, char *text, double start, double duration);
/*
 * Appends a copy of text[0, len) with surrounding whitespace trimmed; nothing is appended (and 0 returned) when that
 * leaves it empty. Returns what segment_list_push returns.
 */
int segment_list_append(struct segment_list *sl, const char *text, size_t len, double start, double duration);
/*
 * Groups timed words into speech segments people can read, and appends them to out: words is a list whose items are
 * single words in time order (start, duration). A pause of at least gap_s between two words ends a segment; a run
 * longer than VTS_MAX_SPEECH_SEGMENT_S is cut at the longest pause inside it (the one nearest the run's middle among
 * equals), again until no piece is longer; a single word longer than that is shortened to it. Segments stay in
 * order and inside [0, audio_s] (audio_s <= 0: the audio's length is unknown, no upper clamp). Returns what
 * segment_list_push returns.
 */
int segment_list_group_words(struct segment_list *out, const struct segment_list *words, double gap_s, double audio_s);

/* Frees every segment and empties the list (it may be reused). */
void segment_list_free(struct segment_list *sl);

#endif
