/*
 * The course of one job (ARCHITECTURE.md, request step 10), whatever its kind (captions, tracks, metadata, speech, or
 * browse: a playlist's or channel's page): the player endpoint for each configured client profile in turn (the
 * requests built by fetcher/platform/client.h), the watch page only for a client that needs what it holds (API key,
 * visitor data) with its consent wall and recaptcha page, playability, then captions (track choice, the timedtext body
 * as json3), the track list, the video's details or the speech fallback, and the final public JSON; a browse job reads
 * its page instead (course_fetch_browse). A refusal another client may not share (not playable for this client, no
 * usable track, an empty or unparsable reply, a refused caption URL) moves to the next client; a block of our address
 * (429, recaptcha, bot check, 403 on captions, no connection) moves the job to another proxy. Every problem ends as an
 * outcome of proto.h with its typed reason and a short detail; nothing upstream reaches a client.
 */
#ifndef VTS_COURSE_H
#define VTS_COURSE_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/config.h"
#include "fetcher/egress/upstream.h"
#include "fetcher/platform/profiles.h"
#include "proto/proto.h"

struct course;

/*
 * Creates the client flow; up stays owned by the caller and must outlive it. Reads VTS_CLIENT_PROFILES and resolves
 * VTS_INNERTUBE_CLIENTS against it; with VTS_POT_PROVIDER_URL, a track that needs a PO token is fetched with one from
 * that provider (fetcher/platform/potoken.h). Returns 0, -EINVAL (err names the variable and what is wrong) or -ENOMEM.
 */
int course_new(const struct vts_config *cfg, struct upstream *up, struct course **out, char *err, size_t errlen);
void course_free(struct course *it);

/*
 * Checks VTS_CLIENT_PROFILES, VTS_INNERTUBE_CLIENTS and VTS_POT_PROVIDER_URL as course_new would, creating nothing that
 * lasts (a supervisor checks before forking). Returns 0, -EINVAL (err) or -ENOMEM.
 */
int course_config_check(const struct vts_config *cfg, char *err, size_t errlen);

/*
 * Re-reads VTS_CLIENT_PROFILES when the file changed (call before each job). A file that is refused, or that no
 * longer defines a client VTS_INNERTUBE_CLIENTS names, is logged once and the clients in force stay.
 */
void course_refresh_profiles(struct course *it);

/* The configured clients, in order. */
size_t course_client_count(const struct course *it);
const struct client_profile *course_client_at(const struct course *it, size_t i);

struct course_result {
  uint8_t outcome;               /* enum proto_outcome */
  char lang[PROTO_MAX_LANG + 1]; /* language of the returned track ("" unless PROTO_OK) */
  char detail[64];               /* short reason for logs: "http_429", "recaptcha", "no_captions"... */
  uint8_t reason;                /* enum proto_reason */
  uint8_t nattempts;             /* player attempts, by client and proxy, for the counters */
  struct proto_attempt attempts[PROTO_MAX_ATTEMPTS];
  uint32_t retry_after_s; /* a 502's Retry-After: every egress rests (or translations do) for that long; 0 for none */
  struct buf body;        /* PROTO_OK: the final public JSON; owned by the caller, buf_free it */
  struct buf player;      /* the summary of the job's latest playable player reply (see proto_result); buf_free it */
  uint32_t player_ttl_ms; /* how long the summary may be reused, 0: not at all */
  uint8_t pot_failures;   /* requests to the PO-token provider that gave no token (VTS_POT_PROVIDER_URL) */
};

/*
 * Runs the captions flow for video_id (11 checked characters) and the requested lang ("" for none). With translate
 * not "", the chosen track is fetched translated into it by the platform (tlang), and the answer's language is
 * translate; PROTO_NOT_AVAILABLE when that track is not translatable or the platform does not offer translate. The
 * caller has started the job on the upstream (upstream_begin_job), which bounds its time. Never fails: res says
 * what happened.
 */
void course_fetch_captions(struct course *it, const char *video_id, const char *lang, const char *translate,
                           const char *request_id, const char *player, size_t player_len, struct course_result *res);

/*
 * With player (player_len bytes, a summary of the video's player reply handed by the dispatcher, see proto_result),
 * the captions and tracks jobs use it instead of a player request; a caption URL of it that answers 403 or 404 is
 * fetched once more after a fresh player reply, as is a summary that cannot be read.
 *
 * Runs a tracks job for video_id: the same clients in turn; the first playable reply's caption tracks and translation
 * languages become the public tracks body (player_tracks_json), empty lists when it has none. Refusals as for
 * captions.
 */
void course_fetch_tracks(struct course *it, const char *video_id, const char *request_id, const char *player,
                         size_t player_len, struct course_result *res);

/*
 * Runs a metadata job for video_id, as a tracks job: the first playable reply's video details (title, channel,
 * length...) become the public metadata body (player_metadata_json); a summary handed serves it without a request.
 */
void course_fetch_metadata(struct course *it, const char *video_id, const char *request_id, const char *player,
                           size_t player_len, struct course_result *res);

/*
 * A metadata job that includes the chapters (PROTO_INCLUDE_CHAPTERS): the metadata body as course_fetch_metadata's,
 * with a "chapters" member read from one watch-next request (fetcher/platform/chapters.h) after the player reply (or
 * the summary handed); a failure of that request is the job's.
 */
void course_fetch_chapters(struct course *it, const char *video_id, const char *request_id, const char *player,
                           size_t player_len, struct course_result *res);

/*
 * Runs a speech job for video_id: the same clients in turn; a playable reply's audio goes to the speech pipeline
 * (fetcher/speech/speech.h) through the job's proxy, and the result is the final public JSON with source "speech".
 * Outcomes as speech_transcribe_via's, or the player's refusals as for captions.
 */
void course_fetch_speech(struct course *it, const char *video_id, const char *request_id, struct course_result *res);

/*
 * Runs a browse job (PROTO_KIND_BROWSE): one page of what (enum proto_browse_what) target names: a playlist's first
 * page (asked with the continuation the platform's web client builds for it), a channel's videos tab, or the page a
 * continuation token names. It goes as the WEB client through the same egress as a player request (the route, its
 * budget, its rests; a block moves it to another route). OK: res->body is a browse body (proto_browse_body) with the
 * page's ids in order and its continuation. A playlist or channel the platform says cannot be read (an ERROR alert
 * instead of videos, or a first page refused with 400 or 404) is PROTO_NOT_AVAILABLE with the reason of its case
 * (playlist missing, private or unviewable; channel missing or removed).
 */
void course_fetch_browse(struct course *it, uint8_t what, const char *target, const char *request_id,
                         struct course_result *res);

/*
 * One try of client number client (in the configured order) for video_id on the egress the caller chose
 * (upstream_use_egress), with no fall-through and no other proxy: what --probe reports. res as for captions.
 */
void course_probe(struct course *it, size_t client, const char *video_id, struct course_result *res);

#endif
