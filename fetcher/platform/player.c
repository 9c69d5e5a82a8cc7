/*
 * Over 800 lines: the reader's path table and its callbacks (playability and its cases, tracks, audio formats,
 * details) fill one struct player_info, and the bodies written from it (tracks, metadata, the summary) stand beside
 * them, so that the names of the reply's members are in one file.
 *
 * The player reply, read with the bounded streaming JSON reader: a table names the few paths we want, everything
 * else is skipped unseen. Replies run to 300 KB of mostly irrelevant JSON, so no tree is built.
 */
#include "fetcher/platform/player.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/util.h"
#include "fetcher/readers/jsonstream.h"
#include "fetcher/readers/textclean.h"
#include "proto/tracks.h"

/* Containers we descend into. */
enum {
  N_PLAY = JSONSTREAM_ROOT + 1, /* playabilityStatus */
  N_SCREEN,                     /* .errorScreen */
  N_PEMR,                       /* .playerErrorMessageRenderer */
  N_SUBREASON,                  /* .subreason */
  N_SUBREASON_RUNS,             /* .subreason.runs */
  N_SUBREASON_RUN,              /* .subreason.runs[] */
  N_SCREEN_REASON,              /* .reason */
  N_SCREEN_REASON_RUNS,         /* .reason.runs */
  N_SCREEN_REASON_RUN,          /* .reason.runs[] */
  N_CAPTIONS,                   /* captions */
  N_TRACKLIST,                  /* .playerCaptionsTracklistRenderer */
  N_TRACKS,                     /* .captionTracks */
  N_TRACK,                      /* .captionTracks[] */
  N_AUDIO_TRACKS,               /* .audioTracks */
  N_AUDIO_TRACK,                /* .audioTracks[] */
  N_STREAMING,                  /* streamingData */
  N_FORMATS,                    /* .adaptiveFormats */
  N_FORMAT,                     /* .adaptiveFormats[] */
  N_FORMAT_AUDIO,               /* .adaptiveFormats[].audioTrack */
  N_TRACK_NAME,                 /* .captionTracks[].name */
  N_TRACK_NAME_RUNS,            /* .name.runs */
  N_TRACK_NAME_RUN,             /* .name.runs[] */
  N_TRANSLATIONS,               /* .translationLanguages */
  N_TRANSLATION,                /* .translationLanguages[] */
  N_TL_NAME,                    /* .translationLanguages[].languageName */
  N_TL_NAME_RUNS,               /* .languageName.runs */
  N_TL_NAME_RUN,                /* .languageName.runs[] */
  N_DETAILS,                    /* videoDetails */
  N_KEYWORDS,                   /* .keywords */
  N_THUMBNAIL,                  /* .thumbnail */
  N_THUMBS,                     /* .thumbnail.thumbnails */
  N_THUMB,                      /* .thumbnail.thumbnails[] */
  N_MICROFORMAT,                /* microformat */
  N_PMR,                        /* .playerMicroformatRenderer */
  N_WRAPPED,                    /* the wrapper's member that holds the player reply: read as the top level */
};

/* Keys we read. */
enum {
  F_NONE = 0,
  F_PLAYABILITY,
  F_STATUS,
  F_REASON,
  F_ERROR_SCREEN,
  F_PEMR,
  F_SUBREASON,
  F_RUNS,
  F_TEXT,
  F_SIMPLE_TEXT,
  F_CAPTIONS,
  F_TRACKLIST,
  F_CAPTION_TRACKS,
  F_AUDIO_TRACKS,
  F_DEFAULT_AUDIO_TRACK,
  F_DEFAULT_CAPTION_TRACK,
  F_BASE_URL,
  F_LANGUAGE,
  F_KIND,
  F_STREAMING,
  F_ADAPTIVE_FORMATS,
  F_ITAG,
  F_URL,
  F_MIME,
  F_CONTENT_LENGTH,
  F_BITRATE,
  F_DURATION,
  F_AUDIO_TRACK,
  F_AUDIO_IS_DEFAULT,
  F_NAME,
  F_IS_TRANSLATABLE,
  F_TRANSLATION_LANGUAGES,
  F_LANGUAGE_NAME,
  F_VIDEO_DETAILS,
  F_VIDEO_ID,
  F_TITLE,
  F_CHANNEL_ID,
  F_AUTHOR,
  F_LENGTH_SECONDS,
  F_IS_LIVE,
  F_IS_LIVE_CONTENT,
  F_VIEW_COUNT,
  F_SHORT_DESCRIPTION,
  F_KEYWORDS,
  F_THUMBNAIL,
  F_THUMBNAILS,
  F_WIDTH,
  F_HEIGHT,
  F_MICROFORMAT,
  F_PMR_RENDERER,
  F_PUBLISH_DATE,
  F_WRAP, /* the wrapper's member, at the top level of a wrapped reply */
};

/* The keys each kind of container reads: rows alike in shape with the browse table's, each reply its own keys. */
static const struct jsonstream_key keys[] = {
    {JSONSTREAM_ROOT, "playabilityStatus", F_PLAYABILITY},
    {JSONSTREAM_ROOT, "captions", F_CAPTIONS},
    {JSONSTREAM_ROOT, "streamingData", F_STREAMING},
    {JSONSTREAM_ROOT, "videoDetails", F_VIDEO_DETAILS},
    {N_DETAILS, "videoId", F_VIDEO_ID},
    {N_DETAILS, "title", F_TITLE},
    {N_DETAILS, "channelId", F_CHANNEL_ID},
    {N_DETAILS, "author", F_AUTHOR},
    {N_DETAILS, "lengthSeconds", F_LENGTH_SECONDS},
    {N_DETAILS, "isLive", F_IS_LIVE},
    {N_DETAILS, "isLiveContent", F_IS_LIVE_CONTENT},
    {N_DETAILS, "viewCount", F_VIEW_COUNT},
    {N_DETAILS, "shortDescription", F_SHORT_DESCRIPTION},
    {N_DETAILS, "keywords", F_KEYWORDS},
    {N_DETAILS, "thumbnail", F_THUMBNAIL},
    {N_THUMBNAIL, "thumbnails", F_THUMBNAILS},
    {N_THUMB, "url", F_URL},
    {N_THUMB, "width", F_WIDTH},
    {N_THUMB, "height", F_HEIGHT},
    {JSONSTREAM_ROOT, "microformat", F_MICROFORMAT},
    {N_MICROFORMAT, "playerMicroformatRenderer", F_PMR_RENDERER},
    {N_PMR, "publishDate", F_PUBLISH_DATE},
    {N_PLAY, "status", F_STATUS},
    {N_PLAY, "reason", F_REASON},
    {N_PLAY, "errorScreen", F_ERROR_SCREEN},
    {N_SCREEN, "playerErrorMessageRenderer", F_PEMR},
    {N_PEMR, "subreason", F_SUBREASON},
    {N_PEMR, "reason", F_REASON},
    {N_SUBREASON, "runs", F_RUNS},
    {N_SUBREASON, "simpleText", F_SIMPLE_TEXT},
    {N_SUBREASON_RUN, "text", F_TEXT},
    {N_SCREEN_REASON, "runs", F_RUNS},
    {N_SCREEN_REASON, "simpleText", F_SIMPLE_TEXT},
    {N_SCREEN_REASON_RUN, "text", F_TEXT},
    {N_CAPTIONS, "playerCaptionsTracklistRenderer", F_TRACKLIST},
    {N_TRACKLIST, "captionTracks", F_CAPTION_TRACKS},
    {N_TRACKLIST, "audioTracks", F_AUDIO_TRACKS},
    {N_TRACKLIST, "defaultAudioTrackIndex", F_DEFAULT_AUDIO_TRACK},
    {N_TRACK, "baseUrl", F_BASE_URL},
    {N_TRACK, "languageCode", F_LANGUAGE},
    {N_TRACK, "kind", F_KIND},
    {N_AUDIO_TRACK, "defaultCaptionTrackIndex", F_DEFAULT_CAPTION_TRACK},
    {N_STREAMING, "adaptiveFormats", F_ADAPTIVE_FORMATS},
    {N_FORMAT, "itag", F_ITAG},
    {N_FORMAT, "url", F_URL},
    {N_FORMAT, "mimeType", F_MIME},
    {N_FORMAT, "contentLength", F_CONTENT_LENGTH},
    {N_FORMAT, "bitrate", F_BITRATE},
    {N_FORMAT, "approxDurationMs", F_DURATION},
    {N_FORMAT, "audioTrack", F_AUDIO_TRACK},
    {N_FORMAT_AUDIO, "audioIsDefault", F_AUDIO_IS_DEFAULT},
    {N_TRACK, "name", F_NAME},
    {N_TRACK, "isTranslatable", F_IS_TRANSLATABLE},
    {N_TRACK_NAME, "runs", F_RUNS},
    {N_TRACK_NAME, "simpleText", F_SIMPLE_TEXT},
    {N_TRACK_NAME_RUN, "text", F_TEXT},
    {N_TRACKLIST, "translationLanguages", F_TRANSLATION_LANGUAGES},
    {N_TRANSLATION, "languageCode", F_LANGUAGE},
    {N_TRANSLATION, "languageName", F_LANGUAGE_NAME},
    {N_TL_NAME, "runs", F_RUNS},
    {N_TL_NAME, "simpleText", F_SIMPLE_TEXT},
    {N_TL_NAME_RUN, "text", F_TEXT},
};

/* The container a wanted field opens: {parent node, field, is_array, child node}. */
static const struct jsonstream_child children[] = {
    {JSONSTREAM_ROOT, F_PLAYABILITY, 0, N_PLAY},
    {JSONSTREAM_ROOT, F_VIDEO_DETAILS, 0, N_DETAILS},
    {N_DETAILS, F_KEYWORDS, 1, N_KEYWORDS},
    {N_DETAILS, F_THUMBNAIL, 0, N_THUMBNAIL},
    {N_THUMBNAIL, F_THUMBNAILS, 1, N_THUMBS},
    {N_THUMBS, JSONSTREAM_ITEM, 0, N_THUMB},
    {JSONSTREAM_ROOT, F_MICROFORMAT, 0, N_MICROFORMAT},
    {N_MICROFORMAT, F_PMR_RENDERER, 0, N_PMR},
    {N_PLAY, F_ERROR_SCREEN, 0, N_SCREEN},
    {N_SCREEN, F_PEMR, 0, N_PEMR},
    {N_PEMR, F_SUBREASON, 0, N_SUBREASON},
    {N_SUBREASON, F_RUNS, 1, N_SUBREASON_RUNS},
    {N_SUBREASON_RUNS, JSONSTREAM_ITEM, 0, N_SUBREASON_RUN},
    {N_PEMR, F_REASON, 0, N_SCREEN_REASON},
    {N_SCREEN_REASON, F_RUNS, 1, N_SCREEN_REASON_RUNS},
    {N_SCREEN_REASON_RUNS, JSONSTREAM_ITEM, 0, N_SCREEN_REASON_RUN},
    {JSONSTREAM_ROOT, F_CAPTIONS, 0, N_CAPTIONS},
    {N_CAPTIONS, F_TRACKLIST, 0, N_TRACKLIST},
    {N_TRACKLIST, F_CAPTION_TRACKS, 1, N_TRACKS},
    {N_TRACKS, JSONSTREAM_ITEM, 0, N_TRACK},
    {N_TRACKLIST, F_AUDIO_TRACKS, 1, N_AUDIO_TRACKS},
    {N_AUDIO_TRACKS, JSONSTREAM_ITEM, 0, N_AUDIO_TRACK},
    {JSONSTREAM_ROOT, F_STREAMING, 0, N_STREAMING},
    {N_STREAMING, F_ADAPTIVE_FORMATS, 1, N_FORMATS},
    {N_FORMATS, JSONSTREAM_ITEM, 0, N_FORMAT},
    {N_FORMAT, F_AUDIO_TRACK, 0, N_FORMAT_AUDIO},
    {N_TRACK, F_NAME, 0, N_TRACK_NAME},
    {N_TRACK_NAME, F_RUNS, 1, N_TRACK_NAME_RUNS},
    {N_TRACK_NAME_RUNS, JSONSTREAM_ITEM, 0, N_TRACK_NAME_RUN},
    {N_TRACKLIST, F_TRANSLATION_LANGUAGES, 1, N_TRANSLATIONS},
    {N_TRANSLATIONS, JSONSTREAM_ITEM, 0, N_TRANSLATION},
    {N_TRANSLATION, F_LANGUAGE_NAME, 0, N_TL_NAME},
    {N_TL_NAME, F_RUNS, 1, N_TL_NAME_RUNS},
    {N_TL_NAME_RUNS, JSONSTREAM_ITEM, 0, N_TL_NAME_RUN},
};

struct parse {
  struct player_info *out;
  const char *wrap; /* the member of the top level that holds the reply, NULL when the reply is the top level */
  int wrap_seen;    /* that member was opened (only its first occurrence is read) */
  char status[32];
  int has_status;
  struct buf top_reason;    /* playabilityStatus.reason as sent, for the phrases of reason_phrases */
  struct buf screen_reason; /* errorScreen reason text: the reason when the top-level one is missing */
  struct buf subreason;
  int bot_reason;         /* some reason text says "bot" */
  size_t upstream_tracks; /* captionTracks[] seen, kept or not */
  int *track_map;         /* upstream caption track index -> index in out->tracks, or -1 */
  size_t track_map_cap;
  struct caption_track track; /* the caption track being read */
  size_t tracks_cap;          /* allocated out->tracks */
  size_t audio_cap;           /* allocated out->audio */
  int *audio_default;         /* audioTracks[i].defaultCaptionTrackIndex, -1 when absent */
  size_t naudio_tracks, audio_default_cap;
  long long default_audio_track;  /* defaultAudioTrackIndex, -1 when absent */
  struct audio_format format;     /* the adaptive format being read */
  struct buf name;                /* the runs of the track or translation name being read */
  struct translation_language tl; /* the translation language being read */
  size_t translations_cap;        /* allocated out->translations */
  struct thumbnail thumb;         /* the thumbnail being read */
  size_t keywords_cap, thumbs_cap;
};

/* Bounds of the video details kept (struct video_details): bytes of each string, and counts of the lists. */
#define DETAILS_MAX_TEXT 1024
#define DETAILS_MAX_DESCRIPTION (16 * 1024)
#define DETAILS_MAX_KEYWORDS 64
#define DETAILS_MAX_KEYWORD 256
#define DETAILS_MAX_THUMBS 16

/* Grows *items (n used, *cap allocated, each size bytes) to hold one more. Returns 0, or -ENOMEM. */
static int grow(void **items, size_t n, size_t *cap, size_t size) {
  if (n < *cap) return 0;
  size_t ncap = *cap ? *cap * 2 : 8;
  void *p = realloc(*items, ncap * size);
  if (!p) return -ENOMEM;
  *items = p;
  *cap = ncap;
  return 0;
}

/* A URL or language code must be printable ASCII without spaces (and so without NULs from \u0000). */
static int is_token(const char *s, size_t len) {
  for (size_t i = 0; i < len; i++) {
    if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7F) return 0;
  }
  return len > 0;
}

static char *dup_token(const char *s, size_t len) {
  if (!is_token(s, len)) return NULL;
  char *p = malloc(len + 1);
  if (!p) return NULL;
  memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

/* Reads a whole non-negative integer written as a JSON number or a string ("4396078"). Returns 0, or -EINVAL. */
static int parse_count(const char *s, size_t len, int64_t max, int64_t *v) {
  return util_parse_i64_n(s, len, 0, max, v);
}

/* Whether text names a bot check: a word "bot" or "robot" (case-insensitive, plural allowed). */
static int mentions_bot(const char *s, size_t len) {
  size_t i = 0;
  while (i < len) {
    while (i < len && !((s[i] | 0x20) >= 'a' && (s[i] | 0x20) <= 'z')) i++;
    size_t w = i;
    while (i < len && (s[i] | 0x20) >= 'a' && (s[i] | 0x20) <= 'z') i++;
    size_t n = i - w;
    if (n && (s[i - 1] | 0x20) == 's') n--;
    if ((n == 3 && !strncasecmp(s + w, "bot", 3)) || (n == 5 && !strncasecmp(s + w, "robot", 5))) return 1;
  }
  return 0;
}

/*
 * The one table of the platform's reason texts that speak of us, not of the video: each a phrase looked for in the
 * reasons of a non-OK reply (top-level, error screen, subreason), letters compared without case and any apostrophe
 * (' or the typographic one the platform writes) read as "'". A new wording of the platform is a new row.
 */
static const struct {
  const char *phrase;
  enum playability play;
} reason_phrases[] = {
    {"content isn't available, try again later", PLAY_RATIONED},
    {"the page needs to be reloaded", PLAY_RATIONED},
    {"watch on the latest version of youtube", PLAY_CLIENT_OUTDATED},
    {"no longer supported on this application or device", PLAY_CLIENT_OUTDATED},
};

/*
 * The one table of the reason texts that say why a video cannot be played, read like reason_phrases (after it: a
 * phrase about us decides first). The first row found in any reason text is the case. A new wording is a new row.
 * Declared as reason_phrases is: two tables of their own, alike in shape.
 */
static const struct {
  const char *phrase;
  enum play_why why;
} why_phrases[] = {
    {"inappropriate for some users", PLAY_WHY_AGE_RESTRICTED},
    {"confirm your age", PLAY_WHY_AGE_RESTRICTED},
    {"age-restricted", PLAY_WHY_AGE_RESTRICTED},
    {"available to this channel's members", PLAY_WHY_MEMBERS_ONLY},
    {"members-only", PLAY_WHY_MEMBERS_ONLY},
    {"join this channel to get access", PLAY_WHY_MEMBERS_ONLY},
    {"this video is private", PLAY_WHY_PRIVATE},
    {"this is a private video", PLAY_WHY_PRIVATE},
    {"has been removed", PLAY_WHY_REMOVED},
    {"has been terminated", PLAY_WHY_REMOVED},
    {"is no longer available", PLAY_WHY_REMOVED},
    {"live event will begin", PLAY_WHY_LIVE_NOT_ARCHIVED},
    {"premieres in", PLAY_WHY_LIVE_NOT_ARCHIVED},
    {"premiere will begin", PLAY_WHY_LIVE_NOT_ARCHIVED},
    {"live stream recording is not available", PLAY_WHY_LIVE_NOT_ARCHIVED},
    {"not made this video available in your country", PLAY_WHY_GEO_RESTRICTED},
    {"not available in your country", PLAY_WHY_GEO_RESTRICTED},
};

/* Bytes of s at `at` that match the phrase character want (ASCII lowercase or "'"), or 0. */
static size_t phrase_char(const char *s, size_t len, size_t at, char want) {
  const unsigned char *u = (const unsigned char *)s + at;
  if (at >= len) return 0;
  /* U+2018 and U+2019, the typographic quotes, are E2 80 98 and E2 80 99 in UTF-8. */
  if (want == '\'' && len - at >= 3 && u[0] == 0xE2 && u[1] == 0x80 && (u[2] == 0x98 || u[2] == 0x99)) return 3;
  unsigned char c = u[0] >= 'A' && u[0] <= 'Z' ? (unsigned char)(u[0] | 0x20) : u[0];
  return c == (unsigned char)want ? 1 : 0;
}

static int holds_phrase(const char *s, size_t len, const char *phrase) {
  for (size_t i = 0; i < len; i++) {
    size_t at = i;
    const char *p = phrase;
    for (; *p != '\0'; p++) {
      size_t n = phrase_char(s, len, at, *p);
      if (n == 0) break;
      at += n;
    }
    if (*p == '\0') return 1;
  }
  return 0;
}

/* The playability a reason phrase of the table names in any of the reply's reason texts, or PLAY_OK for none. */
static enum playability phrase_playability(const struct parse *p) {
  const struct buf *texts[] = {&p->top_reason, &p->screen_reason, &p->subreason};
  for (size_t i = 0; i < sizeof(reason_phrases) / sizeof(reason_phrases[0]); i++) {
    for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
      if (texts[t]->len > 0 && holds_phrase(texts[t]->data, texts[t]->len, reason_phrases[i].phrase))
        return reason_phrases[i].play;
    }
  }
  return PLAY_OK;
}

/*
 * A copy of a string of the reply for the video details: NUL bytes (from \u0000) left out, cut past max bytes at the
 * start of a character. NULL only when out of memory.
 */
static char *dup_text(const char *s, size_t len, size_t max) {
  if (len > max) {
    len = max;
    while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80) len--; /* s[len] continues a character: cut before it */
  }
  char *p = malloc(len + 1);
  if (!p) return NULL;
  size_t n = 0;
  for (size_t i = 0; i < len; i++)
    if (s[i] != '\0') p[n++] = s[i];
  p[n] = '\0';
  return p;
}

/* Sets *dst to a copy of s (the previous value freed: a key sent twice keeps its last value). Returns 0 or -ENOMEM. */
static int set_text(char **dst, const char *s, size_t len, size_t max) {
  char *p = dup_text(s, len, max);
  if (!p) return -ENOMEM;
  free(*dst);
  *dst = p;
  return 0;
}

/* The case of a video the reply refuses (see enum play_why): a phrase of why_phrases, else what its status says. */
static enum play_why refusal_why(const struct parse *p, enum playability play) {
  if (play == PLAY_OK || play == PLAY_BOT_CHECK || play == PLAY_RATIONED || play == PLAY_CLIENT_OUTDATED)
    return PLAY_WHY_UNSAID;
  const struct buf *texts[] = {&p->top_reason, &p->screen_reason, &p->subreason};
  for (size_t i = 0; i < sizeof(why_phrases) / sizeof(why_phrases[0]); i++) {
    for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
      if (texts[t]->len > 0 && holds_phrase(texts[t]->data, texts[t]->len, why_phrases[i].phrase))
        return why_phrases[i].why;
    }
  }
  return play == PLAY_LIVE_OFFLINE ? PLAY_WHY_LIVE_NOT_ARCHIVED : PLAY_WHY_UNSAID;
}

static int player_key(void *ctx, int node, const char *key, size_t len) {
  const struct parse *p = ctx;
  /* A wrapped reply: of the top level only the wrapper's member is read, and what it holds is the reply. */
  if (p->wrap != NULL && node == JSONSTREAM_ROOT)
    return strlen(p->wrap) == len && memcmp(p->wrap, key, len) == 0 ? F_WRAP : F_NONE;
  if (node == N_WRAPPED) node = JSONSTREAM_ROOT;
  int field = jsonstream_key_field(keys, sizeof(keys) / sizeof(keys[0]), node, key, len);
  return field >= 0 ? field : F_NONE;
}

static void format_reset(struct audio_format *f) {
  free(f->url);
  memset(f, 0, sizeof(*f));
  f->content_length = -1;
  f->bitrate = -1;
  f->duration_ms = -1;
  f->is_default = 1; /* a format without audioTrack is the only audio there is */
}

static void track_reset(struct caption_track *t) {
  free(t->base_url);
  memset(t, 0, sizeof(*t));
}

static int player_open(void *ctx, int node, int field, int is_array) {
  struct parse *p = ctx;
  if (p->wrap != NULL && node == JSONSTREAM_ROOT) {
    if (field != F_WRAP || is_array || p->wrap_seen) return JSONSTREAM_SKIP;
    p->wrap_seen = 1;
    return N_WRAPPED;
  }
  if (node == N_WRAPPED) node = JSONSTREAM_ROOT;
  int child = jsonstream_child_node(children, sizeof(children) / sizeof(children[0]), node, field, is_array);
  if (child == N_TRACK) {
    track_reset(&p->track);
  } else if (child == N_FORMAT) {
    format_reset(&p->format);
  } else if (child == N_FORMAT_AUDIO) {
    p->format.is_default = 0; /* an audioTrack without audioIsDefault: true is not the default */
  } else if (child == N_TRACK_NAME || child == N_TL_NAME) {
    buf_reset(&p->name);
  } else if (child == N_TRANSLATION) {
    memset(&p->tl, 0, sizeof(p->tl));
  } else if (child == N_THUMB) {
    free(p->thumb.url);
    p->thumb = (struct thumbnail){.url = NULL, .width = -1, .height = -1};
  } else if (child == N_AUDIO_TRACK) {
    if (grow((void **)&p->audio_default, p->naudio_tracks, &p->audio_default_cap, sizeof(int)) < 0) return -ENOMEM;
    p->audio_default[p->naudio_tracks++] = -1;
  }
  return child;
}

static int close_track(struct parse *p) {
  struct player_info *pi = p->out;
  size_t upstream = p->upstream_tracks++;
  if (grow((void **)&p->track_map, upstream, &p->track_map_cap, sizeof(int)) < 0) return -ENOMEM;
  p->track_map[upstream] = -1;
  if (!p->track.base_url || !p->track.lang[0]) {
    track_reset(&p->track);
    return 0;
  }
  if (grow((void **)&pi->tracks, pi->ntracks, &p->tracks_cap, sizeof(*pi->tracks)) < 0) return -ENOMEM;
  /* exp=xpe and exp=xpv (also in a list) mark tracks the platform serves only with a proof-of-origin token. */
  p->track.po_token = tracks_url_wants_po_token(p->track.base_url);
  pi->tracks[pi->ntracks] = p->track;
  memset(&p->track, 0, sizeof(p->track)); /* ownership of base_url moved */
  p->track_map[upstream] = (int)pi->ntracks;
  pi->ntracks++;
  return 0;
}

static int close_format(struct parse *p) {
  struct player_info *pi = p->out;
  if (!p->format.url || strncmp(p->format.mime, "audio/", 6) != 0) {
    format_reset(&p->format);
    return 0;
  }
  if (grow((void **)&pi->audio, pi->naudio, &p->audio_cap, sizeof(*pi->audio)) < 0) return -ENOMEM;
  pi->audio[pi->naudio++] = p->format;
  memset(&p->format, 0, sizeof(p->format)); /* ownership of url moved */
  return 0;
}

static int close_translation(struct parse *p) {
  struct player_info *pi = p->out;
  if (!p->tl.lang[0]) return 0;
  if (grow((void **)&pi->translations, pi->ntranslations, &p->translations_cap, sizeof(*pi->translations)) < 0)
    return -ENOMEM;
  pi->translations[pi->ntranslations++] = p->tl;
  return 0;
}

static int close_thumb(struct parse *p) {
  struct video_details *d = &p->out->details;
  if (!p->thumb.url || p->thumb.width < 0 || p->thumb.height < 0 || d->nthumbs == DETAILS_MAX_THUMBS) return 0;
  if (grow((void **)&d->thumbs, d->nthumbs, &p->thumbs_cap, sizeof(*d->thumbs)) < 0) return -ENOMEM;
  d->thumbs[d->nthumbs++] = p->thumb;
  p->thumb.url = NULL; /* ownership moved */
  return 0;
}

static int player_close(void *ctx, int node) {
  struct parse *p = ctx;
  switch (node) {
    case N_THUMB:
      return close_thumb(p);
    case N_TRACK:
      return close_track(p);
    case N_FORMAT:
      return close_format(p);
    case N_TRANSLATION:
      return close_translation(p);
    case N_TRACK_NAME:
      textclean_copy(p->track.name, sizeof(p->track.name), p->name.data ? p->name.data : "", p->name.len);
      return 0;
    case N_TL_NAME:
      textclean_copy(p->tl.name, sizeof(p->tl.name), p->name.data ? p->name.data : "", p->name.len);
      return 0;
    default:
      return 0;
  }
}

/* Appends a run of text (bounded: these are for logs). */
static int add_text(struct buf *b, const char *s, size_t len) {
  if (b->len + len > 1024) return 0;
  return buf_append(b, s, len);
}

/* Copies a languageCode into dst (16 bytes) when it is a plain token that fits; else leaves dst empty. */
static void copy_lang(char dst[16], const char *s, size_t len) {
  dst[0] = '\0';
  if (is_token(s, len) && len < 16) {
    memcpy(dst, s, len);
    dst[len] = '\0';
  }
}

static int scalar_track(struct parse *p, int field, enum jsonstream_kind kind, const char *s, size_t len) {
  if (field == F_IS_TRANSLATABLE) {
    p->track.translatable = kind == JSONSTREAM_BOOL && len == 4;
    return 0;
  }
  if (kind != JSONSTREAM_STRING) return 0;
  if (field == F_BASE_URL) {
    free(p->track.base_url);
    p->track.base_url = dup_token(s, len); /* NULL for an unusable URL: the track is left out */
    if (!p->track.base_url && is_token(s, len)) return -ENOMEM;
  } else if (field == F_LANGUAGE) {
    copy_lang(p->track.lang, s, len);
  } else if (field == F_KIND) {
    p->track.is_asr = len == 3 && memcmp(s, "asr", 3) == 0;
  }
  return 0;
}

static int scalar_format(struct parse *p, int field, enum jsonstream_kind kind, const char *s, size_t len) {
  struct audio_format *f = &p->format;
  int64_t v;
  if (kind != JSONSTREAM_STRING && kind != JSONSTREAM_NUMBER) return 0;
  switch (field) {
    case F_URL:
      free(f->url);
      f->url = dup_token(s, len);
      if (!f->url && is_token(s, len)) return -ENOMEM;
      break;
    case F_MIME:
      f->mime[0] = '\0';
      if (kind == JSONSTREAM_STRING && len < sizeof(f->mime) && !memchr(s, '\0', len)) {
        memcpy(f->mime, s, len);
        f->mime[len] = '\0';
      }
      break;
    case F_ITAG:
      f->itag = parse_count(s, len, 100000, &v) == 0 ? (int)v : 0;
      break;
    case F_CONTENT_LENGTH:
      f->content_length = parse_count(s, len, INT64_MAX, &v) == 0 ? v : -1;
      break;
    case F_BITRATE:
      f->bitrate = parse_count(s, len, INT64_MAX, &v) == 0 ? v : -1;
      break;
    case F_DURATION:
      f->duration_ms = parse_count(s, len, INT64_MAX, &v) == 0 ? v : -1;
      break;
    default:
      break;
  }
  return 0;
}

static int scalar_details(struct parse *p, int field, enum jsonstream_kind kind, const char *s, size_t len) {
  struct video_details *d = &p->out->details;
  int64_t v;
  if (field == F_VIDEO_ID) {
    /* An id that is not a plain token, or too long, is kept as "": it matches no video asked for. */
    p->out->has_video_id = 1;
    p->out->video_id[0] = '\0';
    if (kind == JSONSTREAM_STRING && len < sizeof(p->out->video_id) && is_token(s, len)) {
      memcpy(p->out->video_id, s, len);
      p->out->video_id[len] = '\0';
    }
    return 0;
  }
  if (field == F_IS_LIVE || field == F_IS_LIVE_CONTENT) {
    *(field == F_IS_LIVE ? &d->is_live : &d->is_live_content) = kind == JSONSTREAM_BOOL && len == 4;
    return 0;
  }
  if (field == F_LENGTH_SECONDS || field == F_VIEW_COUNT) {
    if (kind == JSONSTREAM_STRING || kind == JSONSTREAM_NUMBER)
      *(field == F_LENGTH_SECONDS ? &d->length_s : &d->view_count) =
          parse_count(s, len, INT64_MAX / 2, &v) == 0 ? v : -1;
    return 0;
  }
  if (kind != JSONSTREAM_STRING) return 0;
  switch (field) {
    case F_TITLE:
      return set_text(&d->title, s, len, DETAILS_MAX_TEXT);
    case F_CHANNEL_ID:
      return set_text(&d->channel_id, s, len, DETAILS_MAX_TEXT);
    case F_AUTHOR:
      return set_text(&d->channel_name, s, len, DETAILS_MAX_TEXT);
    case F_SHORT_DESCRIPTION:
      return set_text(&d->description, s, len, DETAILS_MAX_DESCRIPTION);
    default:
      return 0;
  }
}

static int scalar_keyword(struct parse *p, enum jsonstream_kind kind, const char *s, size_t len) {
  struct video_details *d = &p->out->details;
  if (kind != JSONSTREAM_STRING || d->nkeywords == DETAILS_MAX_KEYWORDS) return 0;
  if (grow((void **)&d->keywords, d->nkeywords, &p->keywords_cap, sizeof(*d->keywords)) < 0) return -ENOMEM;
  char *k = dup_text(s, len, DETAILS_MAX_KEYWORD);
  if (!k) return -ENOMEM;
  d->keywords[d->nkeywords++] = k;
  return 0;
}

static int scalar_thumb(struct parse *p, int field, enum jsonstream_kind kind, const char *s, size_t len) {
  int64_t v;
  if (field == F_URL && kind == JSONSTREAM_STRING) {
    free(p->thumb.url);
    p->thumb.url = NULL; /* an unusable or overlong URL: the thumbnail is left out */
    if (len <= DETAILS_MAX_TEXT && is_token(s, len)) {
      p->thumb.url = dup_token(s, len);
      if (!p->thumb.url) return -ENOMEM;
    }
  } else if ((field == F_WIDTH || field == F_HEIGHT) && kind == JSONSTREAM_NUMBER) {
    *(field == F_WIDTH ? &p->thumb.width : &p->thumb.height) = parse_count(s, len, 1000000, &v) == 0 ? v : -1;
  }
  return 0;
}

static int player_scalar(void *ctx, int node, int field, enum jsonstream_kind kind, const char *s, size_t len) {
  struct parse *p = ctx;
  int64_t v;
  if (p->wrap != NULL && node == JSONSTREAM_ROOT) return 0;
  switch (node) {
    case N_PLAY:
      if (kind != JSONSTREAM_STRING) return 0;
      if (field == F_STATUS) {
        p->has_status = 1;
        p->status[0] = '\0';
        /* A status too long for the buffer is unknown, and unknown maps to PLAY_OTHER. */
        if (len < sizeof(p->status)) {
          memcpy(p->status, s, len);
          p->status[len] = '\0';
        }
      } else if (field == F_REASON) {
        textclean_copy(p->out->reason, sizeof(p->out->reason), s, len);
        p->bot_reason |= mentions_bot(s, len);
        buf_reset(&p->top_reason);
        return add_text(&p->top_reason, s, len);
      }
      return 0;
    case N_DETAILS:
      return scalar_details(p, field, kind, s, len);
    case N_KEYWORDS:
      return scalar_keyword(p, kind, s, len);
    case N_THUMB:
      return scalar_thumb(p, field, kind, s, len);
    case N_PMR:
      return field == F_PUBLISH_DATE && kind == JSONSTREAM_STRING
                 ? set_text(&p->out->details.publish_date, s, len, DETAILS_MAX_TEXT)
                 : 0;
    case N_SUBREASON:
    case N_SUBREASON_RUN:
      return kind == JSONSTREAM_STRING ? add_text(&p->subreason, s, len) : 0;
    case N_SCREEN_REASON:
    case N_SCREEN_REASON_RUN:
      if (kind != JSONSTREAM_STRING) return 0;
      p->bot_reason |= mentions_bot(s, len);
      return add_text(&p->screen_reason, s, len);
    case N_TRACK:
      return scalar_track(p, field, kind, s, len);
    case N_TRACK_NAME:
    case N_TRACK_NAME_RUN:
    case N_TL_NAME:
    case N_TL_NAME_RUN:
      return kind == JSONSTREAM_STRING && (field == F_TEXT || field == F_SIMPLE_TEXT) ? add_text(&p->name, s, len) : 0;
    case N_TRANSLATION:
      if (kind == JSONSTREAM_STRING && field == F_LANGUAGE) copy_lang(p->tl.lang, s, len);
      return 0;
    case N_TRACKLIST:
      if (field == F_DEFAULT_AUDIO_TRACK && parse_count(s, len, INT32_MAX, &v) == 0) p->default_audio_track = v;
      return 0;
    case N_AUDIO_TRACK:
      if (field == F_DEFAULT_CAPTION_TRACK && parse_count(s, len, INT32_MAX, &v) == 0)
        p->audio_default[p->naudio_tracks - 1] = (int)v;
      return 0;
    case N_FORMAT:
      return scalar_format(p, field, kind, s, len);
    case N_FORMAT_AUDIO:
      if (field == F_AUDIO_IS_DEFAULT) p->format.is_default = kind == JSONSTREAM_BOOL && len == 4;
      return 0;
    default:
      return 0;
  }
}

static const struct jsonstream_ops player_ops = {player_key, player_open, player_close, player_scalar};

static enum playability map_status(const struct parse *p) {
  if (strcmp(p->status, "OK") != 0) {
    enum playability phrase = phrase_playability(p);
    if (phrase != PLAY_OK) return phrase;
  }
  /* A table of names, as profiles.c has its own: alike in shape only. */
  static const struct {
    const char *status;
    enum playability play;
  } map[] = {{"OK", PLAY_OK},
             {"ERROR", PLAY_UNAVAILABLE},
             {"UNPLAYABLE", PLAY_UNPLAYABLE},
             {"LIVE_STREAM_OFFLINE", PLAY_LIVE_OFFLINE}};
  if (strcmp(p->status, "LOGIN_REQUIRED") == 0) return p->bot_reason ? PLAY_BOT_CHECK : PLAY_LOGIN_REQUIRED;
  for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
    if (strcmp(p->status, map[i].status) == 0) return map[i].play;
  }
  return PLAY_OTHER;
}

/*
 * The default caption track: that of the default audio track when it names one, else the first audio track that
 * does. The index counts upstream's captionTracks, some of which we may have left out.
 */
static int default_track(const struct parse *p) {
  int upstream = -1;
  if (p->default_audio_track >= 0 && (size_t)p->default_audio_track < p->naudio_tracks)
    upstream = p->audio_default[p->default_audio_track];
  for (size_t i = 0; upstream < 0 && i < p->naudio_tracks; i++) upstream = p->audio_default[i];
  if (upstream < 0 || (size_t)upstream >= p->upstream_tracks) return -1;
  return p->track_map[upstream];
}

int player_parse(const char *json, size_t len, struct player_info *out) {
  return player_parse_wrapped(json, len, "", out);
}

int player_parse_wrapped(const char *json, size_t len, const char *wrap, struct player_info *out) {
  memset(out, 0, sizeof(*out));
  out->default_track = -1;
  out->details.length_s = -1;
  out->details.view_count = -1;
  struct parse p = {.out = out,
                    .wrap = wrap[0] != '\0' ? wrap : NULL,
                    .top_reason = BUF_INIT,
                    .screen_reason = BUF_INIT,
                    .subreason = BUF_INIT,
                    .name = BUF_INIT,
                    .default_audio_track = -1};
  format_reset(&p.format);
  int rv = jsonstream_parse(json, len, 1, &player_ops, &p);
  /* A wrapped reply without its member (the reel call's answer for an id it does not know, "{}") is no reply. */
  if (rv == 0 && p.wrap != NULL && !p.wrap_seen) rv = -ENOENT;
  if (rv == 0 && !p.has_status) rv = -EPROTO;
  if (rv < 0) goto fail;
  out->playability = map_status(&p);
  out->why = refusal_why(&p, out->playability);
  if (!out->reason[0] && p.screen_reason.len)
    textclean_copy(out->reason, sizeof(out->reason), p.screen_reason.data, p.screen_reason.len);
  if (p.subreason.len) textclean_copy(out->subreason, sizeof(out->subreason), p.subreason.data, p.subreason.len);
  out->default_track = default_track(&p);
fail:
  free(p.thumb.url);
  track_reset(&p.track);
  free(p.format.url);
  free(p.track_map);
  free(p.audio_default);
  buf_free(&p.top_reason);
  buf_free(&p.screen_reason);
  buf_free(&p.subreason);
  buf_free(&p.name);
  if (rv < 0) {
    player_info_free(out);
    out->playability = PLAY_OTHER; /* never PLAY_OK for a reply that is not one */
    out->default_track = -1;
  }
  return rv;
}

static void details_free(struct video_details *d) {
  free(d->title);
  free(d->channel_id);
  free(d->channel_name);
  free(d->description);
  free(d->publish_date);
  for (size_t i = 0; i < d->nkeywords; i++) free(d->keywords[i]);
  free(d->keywords);
  for (size_t i = 0; i < d->nthumbs; i++) free(d->thumbs[i].url);
  free(d->thumbs);
  memset(d, 0, sizeof(*d));
  d->length_s = -1;
  d->view_count = -1;
}

void player_info_free(struct player_info *pi) {
  details_free(&pi->details);
  for (size_t i = 0; i < pi->ntracks; i++) free(pi->tracks[i].base_url);
  for (size_t i = 0; i < pi->naudio; i++) free(pi->audio[i].url);
  free(pi->tracks);
  free(pi->audio);
  free(pi->translations);
  pi->translations = NULL;
  pi->ntranslations = 0;
  pi->tracks = NULL;
  pi->ntracks = 0;
  pi->audio = NULL;
  pi->naudio = 0;
}

int player_is_for(const struct player_info *pi, const char *video_id) {
  return !pi->has_video_id || strcmp(pi->video_id, video_id) == 0;
}

/* Track i of a player_info, as tracks_choose reads it. */
static void track_get(const void *ctx, size_t i, const char **lang, int *is_asr, int *po_token) {
  const struct caption_track *t = &((const struct player_info *)ctx)->tracks[i];
  *lang = t->lang;
  *is_asr = t->is_asr;
  *po_token = t->po_token;
}

/* The same, every track usable: one that needs a PO token is chosen too. */
static void track_get_any(const void *ctx, size_t i, const char **lang, int *is_asr, int *po_token) {
  track_get(ctx, i, lang, is_asr, po_token);
  *po_token = 0;
}

int player_choose_track(const struct player_info *pi, const char *lang) {
  return tracks_choose(track_get, pi, pi->ntracks, pi->default_track, lang);
}

int player_choose_track_any(const struct player_info *pi, const char *lang) {
  return tracks_choose(track_get_any, pi, pi->ntracks, pi->default_track, lang);
}

const char *player_translation_code(const struct player_info *pi, const char *lang) {
  for (size_t i = 0; i < pi->ntranslations; i++) {
    if (strcasecmp(pi->translations[i].lang, lang) == 0) return pi->translations[i].lang;
  }
  return NULL;
}

/* The value of parameter name ("expire") in url's query as a whole number, or -1. */
static int64_t query_number(const char *url, const char *name) {
  size_t n = strlen(name);
  const char *q = strchr(url, '?');
  while (q) {
    q++;
    if (strncmp(q, name, n) == 0 && q[n] == '=') {
      int64_t v;
      size_t len = strcspn(q + n + 1, "&#");
      return util_parse_i64_n(q + n + 1, len, 0, INT64_MAX, &v) == 0 ? v : -1;
    }
    q = strchr(q, '&');
  }
  return -1;
}

int64_t player_tracks_expire_s(const struct player_info *pi) {
  int64_t first = 0;
  for (size_t i = 0; i < pi->ntracks; i++) {
    int64_t e = query_number(pi->tracks[i].base_url, "expire");
    if (e > 0 && (first == 0 || e < first)) first = e;
  }
  return first;
}

/* Appends "key":"value" (value JSON-escaped) with a leading comma unless first. */
static int put_member(struct buf *out, int first, const char *key, const char *value) {
  int rv = buf_printf(out, "%s\"%s\":\"", first ? "" : ",", key);
  if (rv == 0) rv = buf_json_escape(out, value, strlen(value));
  if (rv == 0) rv = buf_puts(out, "\"");
  return rv;
}

/*
 * The end of a JSON document appended to out from start on, after rv (0, or what an append returned): 0, or -E2BIG
 * past max bytes, or -ENOMEM; on failure out is left as it was before it.
 */
static int json_written(struct buf *out, size_t start, int rv, size_t max) {
  if (rv == 0 && out->len - start > max) rv = -E2BIG;
  if (rv == 0) return 0;
  out->len = start;
  if (out->data != NULL) out->data[out->len] = '\0';
  return rv == -E2BIG ? rv : -ENOMEM;
}

/* Appends "key":"value" (value JSON-escaped) with a leading comma, or "key":null for NULL value. */
static int put_nullable(struct buf *out, const char *key, const char *value) {
  return value ? put_member(out, 0, key, value) : buf_printf(out, ",\"%s\":null", key);
}

/* Appends the keywords as a JSON array of strings. */
static int put_keywords(struct buf *out, const struct video_details *d) {
  int rv = buf_puts(out, "[");
  for (size_t i = 0; rv == 0 && i < d->nkeywords; i++) {
    rv = buf_puts(out, i > 0 ? ",\"" : "\"");
    if (rv == 0) rv = buf_json_escape(out, d->keywords[i], strlen(d->keywords[i]));
    if (rv == 0) rv = buf_puts(out, "\"");
  }
  return rv == 0 ? buf_puts(out, "]") : rv;
}

/* Appends the thumbnails as a JSON array of {"url","width","height"}. */
static int put_thumbs(struct buf *out, const struct video_details *d) {
  int rv = buf_puts(out, "[");
  for (size_t i = 0; rv == 0 && i < d->nthumbs; i++) {
    rv = buf_puts(out, i > 0 ? ",{" : "{");
    if (rv == 0) rv = put_member(out, 1, "url", d->thumbs[i].url);
    if (rv == 0)
      rv = buf_printf(out, ",\"width\":%lld,\"height\":%lld}", (long long)d->thumbs[i].width,
                      (long long)d->thumbs[i].height);
  }
  return rv == 0 ? buf_puts(out, "]") : rv;
}

/* The video details in the platform's own shape, as members after videoDetails.videoId: only those the reply had. */
static int put_summary_details(struct buf *out, const struct video_details *d) {
  int rv = 0;
  const struct {
    const char *key;
    const char *value;
  } texts[] = {{"title", d->title},
               {"channelId", d->channel_id},
               {"author", d->channel_name},
               {"shortDescription", d->description}};
  for (size_t i = 0; rv == 0 && i < sizeof(texts) / sizeof(texts[0]); i++)
    if (texts[i].value) rv = put_member(out, 0, texts[i].key, texts[i].value);
  if (rv == 0 && d->length_s >= 0) rv = buf_printf(out, ",\"lengthSeconds\":\"%lld\"", (long long)d->length_s);
  if (rv == 0 && d->view_count >= 0) rv = buf_printf(out, ",\"viewCount\":\"%lld\"", (long long)d->view_count);
  if (rv == 0 && d->is_live) rv = buf_puts(out, ",\"isLive\":true");
  if (rv == 0) rv = buf_printf(out, ",\"isLiveContent\":%s", d->is_live_content ? "true" : "false");
  if (rv == 0) rv = buf_puts(out, ",\"keywords\":");
  if (rv == 0) rv = put_keywords(out, d);
  if (rv == 0) rv = buf_puts(out, ",\"thumbnail\":{\"thumbnails\":");
  if (rv == 0) rv = put_thumbs(out, d);
  if (rv == 0) rv = buf_puts(out, "}");
  return rv;
}

int player_summary_json(const struct player_info *pi, const char *video_id, struct buf *out) {
  size_t start = out->len;
  int rv = buf_puts(out, "{\"playabilityStatus\":{\"status\":\"OK\"},\"videoDetails\":{");
  if (rv == 0) rv = put_member(out, 1, "videoId", video_id);
  if (rv == 0) rv = put_summary_details(out, &pi->details);
  if (rv == 0 && pi->details.publish_date) {
    rv = buf_puts(out, "},\"microformat\":{\"playerMicroformatRenderer\":{");
    if (rv == 0) rv = put_member(out, 1, "publishDate", pi->details.publish_date);
    if (rv == 0) rv = buf_puts(out, "}");
  }
  if (rv == 0) rv = buf_puts(out, "},\"captions\":{\"playerCaptionsTracklistRenderer\":{\"captionTracks\":[");
  for (size_t i = 0; rv == 0 && i < pi->ntracks; i++) {
    const struct caption_track *t = &pi->tracks[i];
    rv = buf_puts(out, i > 0 ? ",{" : "{");
    if (rv == 0) rv = put_member(out, 1, "baseUrl", t->base_url);
    if (rv == 0) rv = put_member(out, 0, "languageCode", t->lang);
    if (rv == 0) rv = buf_puts(out, ",\"name\":{");
    if (rv == 0) rv = put_member(out, 1, "simpleText", t->name);
    if (rv == 0) rv = buf_puts(out, "}");
    if (rv == 0) rv = put_member(out, 0, "kind", t->is_asr ? "asr" : "");
    if (rv == 0) rv = buf_printf(out, ",\"isTranslatable\":%s}", t->translatable ? "true" : "false");
  }
  /* The default track as the platform names it: through the default audio track (-1, none, is read as absent). */
  if (rv == 0)
    rv = buf_printf(out, "],\"audioTracks\":[{\"defaultCaptionTrackIndex\":%d}],\"defaultAudioTrackIndex\":0",
                    pi->default_track);
  if (rv == 0) rv = buf_puts(out, ",\"translationLanguages\":[");
  for (size_t i = 0; rv == 0 && i < pi->ntranslations; i++) {
    rv = buf_puts(out, i > 0 ? ",{" : "{");
    if (rv == 0) rv = put_member(out, 1, "languageCode", pi->translations[i].lang);
    if (rv == 0) rv = buf_puts(out, ",\"languageName\":{");
    if (rv == 0) rv = put_member(out, 1, "simpleText", pi->translations[i].name);
    if (rv == 0) rv = buf_puts(out, "}}");
  }
  if (rv == 0) rv = buf_puts(out, "]}}}");
  return json_written(out, start, rv, VTS_MAX_PLAYER_SUMMARY_BYTES);
}

int player_tracks_json(const struct player_info *pi, struct buf *out) {
  size_t start = out->len;
  int rv = buf_puts(out, "{\"tracks\":[");
  for (size_t i = 0; rv == 0 && i < pi->ntracks; i++) {
    const struct caption_track *t = &pi->tracks[i];
    rv = buf_puts(out, i > 0 ? ",{" : "{");
    if (rv == 0) rv = put_member(out, 1, "language", t->lang);
    if (rv == 0) rv = put_member(out, 0, "name", t->name);
    if (rv == 0) rv = put_member(out, 0, "kind", t->is_asr ? "asr" : "manual");
    if (rv == 0) rv = buf_printf(out, ",\"translatable\":%s}", t->translatable ? "true" : "false");
  }
  if (rv == 0) rv = buf_puts(out, "],\"translationLanguages\":[");
  for (size_t i = 0; rv == 0 && i < pi->ntranslations; i++) {
    rv = buf_puts(out, i > 0 ? ",{" : "{");
    if (rv == 0) rv = put_member(out, 1, "language", pi->translations[i].lang);
    if (rv == 0) rv = put_member(out, 0, "name", pi->translations[i].name);
    if (rv == 0) rv = buf_puts(out, "}");
  }
  if (rv == 0) rv = buf_puts(out, "]}");
  return json_written(out, start, rv, VTS_MAX_TRANSCRIPT_BYTES);
}

/* Whether the caption track at index i is the first of its language. */
static int first_of_language(const struct player_info *pi, size_t i) {
  for (size_t j = 0; j < i; j++)
    if (strcmp(pi->tracks[j].lang, pi->tracks[i].lang) == 0) return 0;
  return 1;
}

/* Appends a count, or null when absent (-1). */
static int put_count(struct buf *out, const char *key, int64_t v) {
  return v >= 0 ? buf_printf(out, ",\"%s\":%lld", key, (long long)v) : buf_printf(out, ",\"%s\":null", key);
}

int player_metadata_json(const struct player_info *pi, const char *video_id, struct buf *out) {
  const struct video_details *d = &pi->details;
  size_t start = out->len;
  int rv = buf_puts(out, "{");
  if (rv == 0) rv = put_member(out, 1, "videoId", video_id);
  if (rv == 0) rv = put_nullable(out, "title", d->title);
  if (rv == 0) rv = put_nullable(out, "channelId", d->channel_id);
  if (rv == 0) rv = put_nullable(out, "channelName", d->channel_name);
  if (rv == 0) rv = put_count(out, "lengthSeconds", d->length_s);
  if (rv == 0)
    rv = buf_printf(out, ",\"isLive\":%s,\"isLiveContent\":%s", d->is_live ? "true" : "false",
                    d->is_live_content ? "true" : "false");
  if (rv == 0) rv = put_count(out, "viewCount", d->view_count);
  if (rv == 0) rv = put_nullable(out, "publishDate", d->publish_date);
  if (rv == 0) rv = put_nullable(out, "description", d->description);
  if (rv == 0) rv = buf_puts(out, ",\"keywords\":");
  if (rv == 0) rv = put_keywords(out, d);
  if (rv == 0) rv = buf_puts(out, ",\"thumbnails\":");
  if (rv == 0) rv = put_thumbs(out, d);
  if (rv == 0) rv = buf_puts(out, ",\"captionLanguages\":[");
  int first = 1;
  for (size_t i = 0; rv == 0 && i < pi->ntracks; i++) {
    if (!first_of_language(pi, i)) continue;
    rv = buf_puts(out, first ? "\"" : ",\"");
    if (rv == 0) rv = buf_json_escape(out, pi->tracks[i].lang, strlen(pi->tracks[i].lang));
    if (rv == 0) rv = buf_puts(out, "\"");
    first = 0;
  }
  if (rv == 0) rv = buf_puts(out, "]}");
  return json_written(out, start, rv, VTS_MAX_TRANSCRIPT_BYTES);
}
