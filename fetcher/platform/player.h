/*
 * The player reply of POST /youtubei/v1/player: playability, caption tracks, the default track and audio formats.
 * Upstream JSON is hostile: size and depth are bounded (limits.h) and a malformed reply is an error, not a crash.
 */
#ifndef VTS_PLAYER_H
#define VTS_PLAYER_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

enum playability {
  PLAY_OK = 0,
  PLAY_LOGIN_REQUIRED, /* age-restricted, private, members-only: 404 */
  PLAY_BOT_CHECK,      /* "confirm you're not a bot" (LOGIN_REQUIRED with that reason): 502 */
  PLAY_UNAVAILABLE,    /* ERROR, removed, unavailable: 404 */
  PLAY_UNPLAYABLE,     /* UNPLAYABLE: 404 */
  PLAY_LIVE_OFFLINE,   /* LIVE_STREAM_OFFLINE: 404 */
  PLAY_OTHER,          /* any other non-OK status: 404 */
  /*
   * A non-OK status whose reason text is one of the platform's phrases about us rather than the video (the one table
   * of them is in player.c): its ration of our address ("This content isn't available, try again later."), a block
   * (502); and a client version it retired ("Watch on the latest version of YouTube."), the next client's turn.
   */
  PLAY_RATIONED,
  PLAY_CLIENT_OUTDATED,
};

/*
 * Why a video cannot be played, when the reply says so (its status, or a phrase of the table in player.c in its
 * reason texts); PLAY_WHY_UNSAID when it does not, and always for a playable reply or one refused for our sake.
 */
enum play_why {
  PLAY_WHY_UNSAID = 0,
  PLAY_WHY_AGE_RESTRICTED,
  PLAY_WHY_MEMBERS_ONLY,
  PLAY_WHY_PRIVATE,
  PLAY_WHY_REMOVED,
  PLAY_WHY_LIVE_NOT_ARCHIVED, /* LIVE_STREAM_OFFLINE, a premiere to come, a recording not yet available */
  PLAY_WHY_GEO_RESTRICTED,
};

struct caption_track {
  char *base_url;   /* owned; the timedtext URL of the track */
  char lang[16];    /* languageCode */
  char name[128];   /* name (its runs joined, or simpleText), cleaned; "" when absent */
  int is_asr;       /* kind == "asr" */
  int translatable; /* isTranslatable: the platform translates it (tlang) */
  int po_token;     /* the baseUrl's exp names xpe or xpv (alone or in a list): the track needs a PO token */
};

/* One of the languages the platform translates translatable tracks into (translationLanguages[]). */
struct translation_language {
  char lang[16];  /* languageCode */
  char name[128]; /* languageName, cleaned */
};

struct audio_format {
  char *url; /* owned; direct URL */
  int itag;
  int64_t content_length; /* bytes, -1 when absent */
  int64_t bitrate;        /* bits per second, -1 when absent */
  int64_t duration_ms;    /* approxDurationMs, -1 when absent */
  char mime[64];
  int is_default; /* audioTrack.audioIsDefault, or no audioTrack at all */
};

/* One image of the video (videoDetails.thumbnail.thumbnails[]), kept only with its url, width and height. */
struct thumbnail {
  char *url; /* owned */
  int64_t width, height;
};

/*
 * What the reply says of the video besides playing it: videoDetails, and microformat.playerMicroformatRenderer where
 * the reply carries it. Strings are owned, NULL when absent, cut (at a character's start) past their bounds in
 * player.c; numbers -1 when absent.
 */
struct video_details {
  char *title;
  char *channel_id;
  char *channel_name; /* author */
  char *description;  /* shortDescription */
  char *publish_date; /* microformat's publishDate */
  int64_t length_s;   /* lengthSeconds */
  int64_t view_count; /* viewCount */
  int is_live;        /* isLive: true; absent is false */
  int is_live_content;
  char **keywords; /* owned, each owned */
  size_t nkeywords;
  struct thumbnail *thumbs;
  size_t nthumbs;
};

struct player_info {
  enum playability playability;
  enum play_why why;   /* for a video that cannot be played (see enum play_why) */
  char video_id[16];   /* videoDetails.videoId, "" when absent (or not a plain id: see player_is_for) */
  int has_video_id;    /* the reply named a videoDetails.videoId */
  char reason[128];    /* the upstream reason, for logs only, never sent to clients */
  char subreason[128]; /* errorScreen.playerErrorMessageRenderer.subreason text, for logs only */
  struct caption_track *tracks;
  size_t ntracks;
  int default_track; /* index into tracks from audioTracks[].defaultCaptionTrackIndex, -1 when none */
  struct translation_language *translations; /* in the platform's order; those without a usable code left out */
  size_t ntranslations;
  struct audio_format *audio;
  size_t naudio;
  struct video_details details;
};

/*
 * Parses a player reply. Returns 0, or -EPROTO for a body that is not a player reply: not one JSON object, truncated,
 * too big, too deep, comments, invalid UTF-8, or no playabilityStatus.status. Only what the fields above need is
 * read; caption tracks without a baseUrl or a plain languageCode, and formats that are not audio with a direct
 * url, are left out. The caller frees out with player_info_free, also after an error.
 */
int player_parse(const char *json, size_t len, struct player_info *out);

/*
 * player_parse for a reply wrapped as the reel call's is ({"playerResponse": {...}}): the player reply is the value of
 * the top-level member wrap (nothing else of the top level is read); with wrap "", as player_parse. Returns as
 * player_parse, or -ENOENT for a well-formed object without that member.
 */
int player_parse_wrapped(const char *json, size_t len, const char *wrap, struct player_info *out);
void player_info_free(struct player_info *pi);

/*
 * Whether the reply is for video_id: it names no video, or exactly that one. The platform sometimes answers with the
 * reply of another video; nothing of such a reply may be used.
 */
int player_is_for(const struct player_info *pi, const char *video_id);

/*
 * Chooses a track by the rule of tracks_choose (proto/tracks.h), which the dispatcher applies to a player summary
 * too: the requested language exactly, manual before asr; then the same base language ("pt" for "pt-BR", and "pt-BR"
 * for "pt"); then the default track; then the first manual track; then the first. lang "" means no preference: the
 * default track. Tracks that need a PO token are skipped. Returns an index or -1.
 */
int player_choose_track(const struct player_info *pi, const char *lang);

/* The same choice with tracks that need a PO token as good as any other: for a caller that can get one. */
int player_choose_track_any(const struct player_info *pi, const char *lang);

/*
 * The platform's own code of the translation language lang among translationLanguages, compared without regard to
 * case ("zh-hant" finds "zh-Hant"): a pointer into pi, valid while pi is, or NULL when the platform does not offer it.
 */
const char *player_translation_code(const struct player_info *pi, const char *lang);

/*
 * Appends the summary of a playable reply for video_id to out: a minimal player reply of the same shape, which
 * player_parse reads back into the same playability, caption tracks (URLs, languages, names, kinds, translatable,
 * the default track), translation languages and video details; no audio formats. What a video's next jobs use instead
 * of a player request. Returns 0, -E2BIG past VTS_MAX_PLAYER_SUMMARY_BYTES, or -ENOMEM; out is left as it was on
 * failure.
 */
int player_summary_json(const struct player_info *pi, const char *video_id, struct buf *out);

/*
 * The earliest expire (unix seconds) among the caption tracks' URLs (their expire= parameter), 0 when none says:
 * after it the platform refuses them.
 */
int64_t player_tracks_expire_s(const struct player_info *pi);

/*
 * Appends the public body of GET /v1/video/tracks to out: {"tracks":[{"language","name","kind","translatable"}...],
 * "translationLanguages":[{"language","name"}...]}, in the platform's order, kind "manual" or "asr". Returns 0,
 * -E2BIG past VTS_MAX_TRANSCRIPT_BYTES, or -ENOMEM; out is left as it was on failure.
 */
int player_tracks_json(const struct player_info *pi, struct buf *out);

/*
 * Appends the public body of GET /v1/video/metadata for video_id to out: {"videoId","title","channelId",
 * "channelName","lengthSeconds","isLive","isLiveContent","viewCount","publishDate","description","keywords",
 * "thumbnails":[{"url","width","height"}],"captionLanguages"}, null for what the reply lacks; captionLanguages are the
 * caption tracks' languages, each once, in the platform's order. Returns 0, -E2BIG past VTS_MAX_TRANSCRIPT_BYTES, or
 * -ENOMEM; out is left as it was on failure.
 */
int player_metadata_json(const struct player_info *pi, const char *video_id, struct buf *out);

#endif
