/*
 * What a fetcher's result must be before the dispatcher caches or serves it. A fetcher is a separate program on
 * another host; whatever it sends is checked here, whoever it is, so no bytes reach a client or the cache as a
 * transcript (or a track list) unless they have that answer's public shape.
 */
#ifndef VTS_BODYCHECK_H
#define VTS_BODYCHECK_H

#include <stddef.h>
#include <stdint.h>

/*
 * Checks that body (len bytes) is one transcript response as the API defines it: a JSON object with exactly the
 * string "language", "source" ("captions" or "speech"), the string "text" and "segments", an array of objects with
 * exactly the string "text" and the numbers "start" and "duration" (each a time bodycheck_seconds_ms reads); valid
 * UTF-8, no other keys, nothing after it, at most VTS_MAX_TRANSCRIPT_BYTES. Returns 0, -E2BIG (too large) or -EINVAL;
 * *why (when not NULL) is set to a short static reason for the log ("too_large", "not_json", "not_a_transcript").
 */
int bodycheck_transcript(const char *body, size_t len, const char **why);

/*
 * The same for a track list (GET /v1/video/tracks): exactly "tracks", an array of objects with exactly the strings
 * "language" and "name", "kind" ("manual" or "asr") and the boolean "translatable", and "translationLanguages", an
 * array of objects with exactly the strings "language" and "name". *why is "not_a_track_list" for another shape.
 */
int bodycheck_tracks(const char *body, size_t len, const char **why);

/*
 * The same for the public metadata of a video (GET /v1/video/metadata): exactly "videoId" (string), "title",
 * "channelId", "channelName", "publishDate" and "description" (string or null), "lengthSeconds" and "viewCount" (a
 * whole number or null), "isLive" and "isLiveContent" (booleans), "keywords" and "captionLanguages" (arrays of
 * strings) and "thumbnails" (an array of objects with exactly "url", "width" and "height"); and "chapters" (an array of
 * objects with exactly the string "title" and the whole numbers "start" and "end") in the body of a job that included
 * them. *why is "not_metadata".
 */
int bodycheck_metadata(const char *body, size_t len, const char **why);

/*
 * The same for a player summary a fetcher sends with its result (see proto_result): exactly "playabilityStatus"
 * ({"status":"OK"}), "videoDetails" ({"videoId"}, and those of "title", "channelId", "author",
 * "shortDescription", "lengthSeconds", "viewCount" (strings), "isLive", "isLiveContent", "keywords" (strings) and
 * "thumbnail" {"thumbnails": objects of "url", "width", "height"} the reply had), "microformat"
 * ({"playerMicroformatRenderer": {"publishDate"}}, when the reply had it) and "captions"
 * ({"playerCaptionsTracklistRenderer": "captionTracks" (objects of the strings "baseUrl", "languageCode", "kind" ("" or
 * "asr"), "name" {"simpleText"} and the boolean "isTranslatable"), "audioTracks" (objects of the number
 * "defaultCaptionTrackIndex"), the number "defaultAudioTrackIndex" and "translationLanguages" (objects of
 * "languageCode" and "languageName"
 * {"simpleText"})}), at most VTS_MAX_PLAYER_SUMMARY_BYTES. *why is "not_a_player_summary" for another shape.
 */
int bodycheck_player(const char *body, size_t len, const char **why);

/* A delivered webhook's answer (PROTO_KIND_WEBHOOK, outcome OK): the receiver's 2xx status, three digits. */
int bodycheck_webhook(const char *body, size_t len, const char **why);

/*
 * The one check of a body about to be cached or served as the answer of a job of this kind (enum proto_kind: a track
 * list for PROTO_KIND_TRACKS, metadata for PROTO_KIND_METADATA, a 2xx status for PROTO_KIND_WEBHOOK, a browse body
 * (proto_browse_read) for PROTO_KIND_BROWSE, a transcript otherwise), whoever produced it: a
 * fetcher's result, or an entry read from Redis. Same returns as above.
 */
int bodycheck_result(uint8_t kind, const char *body, size_t len, const char **why);

/*
 * Milliseconds of the JSON number s[0, len) read as seconds from its digits: an integer part of at most
 * BODYCHECK_MAX_SECONDS and a fraction rounded half up to three digits. The renderers of SubRip and WebVTT read a
 * segment's times with it, and bodycheck_transcript refuses a body with a time it refuses, so a transcript that was
 * served as JSON can always be rendered. Returns 0, or -EPROTO for a negative, exponent or out-of-range number.
 */
int bodycheck_seconds_ms(const char *s, size_t len, int64_t *ms);

/* Seconds past this are not a transcript's times (the fetcher's serialiser refuses them too). */
#define BODYCHECK_MAX_SECONDS 1000000000LL

#endif
