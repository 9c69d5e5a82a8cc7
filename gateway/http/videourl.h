/*
 * video_url -> video id by parsing alone (never fetched). Hosts compared exactly: youtube.com, www./m./music.
 * youtube.com, youtu.be, youtube-nocookie.com (and www.); schemes http and https; forms watch?v=, youtu.be/ID,
 * /shorts/ID, /live/ID, /embed/ID, /v/ID, /e/ID. Playlists, channels, clips, lookalike hosts and other schemes fail.
 */
#ifndef VTS_VIDEOURL_H
#define VTS_VIDEOURL_H

#include <stddef.h>

/* Writes the 11-character id and a NUL into id. Returns 0, or -EINVAL. */
int videourl_parse(const char *url, size_t len, char id[12]);

#endif
