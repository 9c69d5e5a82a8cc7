/*
 * The platform's browse replies for a playlist or a channel's videos: the video ids of one page in order, the token
 * of the next page, and the refusal a page carries instead of videos ("The playlist does not exist.", a removed
 * channel). One reader for the three places the platform puts a video list (a playlist's playlistVideoListRenderer,
 * a channel tab's richGridRenderer, and the continuationItems of a continuation reply), and for the three item shapes
 * it has used (playlistVideoRenderer, richItemRenderer.content.videoRenderer, and lockupViewModel with its
 * contentType). A continuationItemRenderer counts only as an element of a video list: the platform also puts one
 * beside the list (another shelf), which is not the next page of videos.
 */
#ifndef VTS_BROWSE_H
#define VTS_BROWSE_H

#include <stddef.h>

#include "common/buf.h"
#include "common/limits.h"
#include "fetcher/platform/profiles.h"

#define BROWSE_MAX_TOKEN VTS_MAX_BROWSE_TOKEN_BYTES /* a longer continuation token is refused (-EPROTO) */
#define BROWSE_MAX_PAGE_VIDEOS 1000                 /* more videos in one page is not the platform's shape (-EPROTO) */

struct browse_page {
  char (*video_ids)[VTS_VIDEO_ID_LEN + 1]; /* in the page's order, each a checked video id */
  size_t nvideos;
  size_t cap;
  int has_list;                            /* the reply held a video list, even an empty one */
  char continuation[BROWSE_MAX_TOKEN + 1]; /* the next page's token, "" at the end of the list */
  char error[256];                         /* the text of an ERROR alert, "" when none */
};

/*
 * Reads one browse or continuation reply into out (which the caller frees with browse_page_free, also on failure).
 * Videos whose id is not a valid video id, items of other kinds (shorts, channels, playlists) and duplicate ids of
 * one page are left out. Returns 0, -EPROTO (not one JSON object in the platform's shape, a token too long, too many
 * videos) or -ENOMEM.
 */
int browse_parse(const char *body, size_t len, struct browse_page *out);
void browse_page_free(struct browse_page *p);

/*
 * The browse request's JSON body for client c: the first page of browse_id with params (either may be NULL), or,
 * with continuation not NULL, the page it names. Returns 0 or -ENOMEM.
 */
int browse_request_body(const struct client_profile *c, const char *browse_id, const char *params,
                        const char *continuation, struct buf *out);

/*
 * The browse id of a playlist ("VL" + id), or of a channel's uploads read as a playlist ("VLUU" + the channel id
 * after its "UC"). Returns 0, or -EINVAL when the id does not fit out or a channel id does not start with "UC".
 */
int browse_playlist_id(const char *playlist_id, char *out, size_t outlen);
int browse_uploads_id(const char *channel_id, char *out, size_t outlen);

/*
 * The continuation token of a playlist's first page, as the platform's web client builds it (base64url of a small
 * protobuf naming "VL" + the id with the "show unavailable videos" parameter, its padding percent-encoded), asked
 * instead of a browse of "VL" + the id: that browse answers the playlist's header without its videos. Returns 0,
 * -EINVAL (an id longer than VTS_PLAYLIST_ID_MAX) or -ENOMEM.
 */
int browse_playlist_token(const char *playlist_id, struct buf *out);

/* The params of a browse of a channel id that ask for its videos tab. */
#define BROWSE_VIDEOS_TAB_PARAMS "EgZ2aWRlb3PyBgQKAjoA"

#endif
