/*
 * A video's chapters, read from the platform's watch-next reply (POST /youtubei/v1/next): the list of the panel
 * whose panelIdentifier is "engagement-panel-macro-markers-description-chapters", each item's title and start
 * second (onTap.watchEndpoint.startTimeSeconds). The panel is found by its identifier, never by its place among the
 * reply's panels, and another panel's markers (key moments, the description's cards) are never chapters.
 */
#ifndef VTS_CHAPTERS_H
#define VTS_CHAPTERS_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "fetcher/platform/profiles.h"

#define CHAPTERS_MAX 512       /* chapters kept of one video; a reply with more is not in the platform's shape */
#define CHAPTERS_TITLE_MAX 300 /* bytes of a title kept; a longer one is cut at a character's start */
#define CHAPTERS_NEXT_PATH "/youtubei/v1/next"

struct chapter {
  char title[CHAPTERS_TITLE_MAX + 1];
  int64_t start_s;
};

struct chapter_list {
  struct chapter *items; /* in the reply's order, each start later than the one before */
  size_t n;
};

/*
 * Reads a watch-next reply into out (freed with chapters_free, also on failure). A reply without the chapters panel
 * is a video without chapters (n 0). An item without a title or a start, or whose start is not after the previous
 * one's, is left out. Returns 0, -EPROTO (not one JSON object within the caps, or more than CHAPTERS_MAX chapters)
 * or -ENOMEM.
 */
int chapters_parse(const char *body, size_t len, struct chapter_list *out);
void chapters_free(struct chapter_list *l);

/*
 * Appends the chapters as the public JSON array [{"title","start","end"}], whole seconds: a chapter ends where the
 * next starts, the last at the video's length (length_s; when the length is unknown, -1, or not after its start,
 * the last ends at its start). Returns 0 or -ENOMEM.
 */
int chapters_json(const struct chapter_list *l, int64_t length_s, struct buf *out);

/*
 * The watch-next request's JSON body for client c (the web client's context, hl=en): videoId with the content checks
 * accepted. Returns 0 or -ENOMEM.
 */
int chapters_next_body(const struct client_profile *c, const char *video_id, struct buf *out);

#endif
