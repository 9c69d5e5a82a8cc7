/*
 * The platform client flow of one captions job (ARCHITECTURE.md, request step 4): the player endpoint for each
 * configured client profile in turn, the watch page only for a client that needs what it holds (API key, visitor
 * data) with its consent wall and recaptcha page, playability, track choice, the timedtext body as json3, and the
 * final public JSON. A refusal another client may not share (not playable for this client, no usable track, an empty
 * or unparsable reply, a refused caption URL) moves to the next client; a block of our address (429, recaptcha, bot
 * check, 403 on captions, no connection) moves the job to another proxy. Every problem ends as an outcome of proto.h
 * with its typed reason and a short detail; nothing upstream reaches a client.
 */
#ifndef VTS_INNERTUBE_H
#define VTS_INNERTUBE_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/config.h"
#include "fetcher/platform/profiles.h"
#include "fetcher/platform/upstream.h"
#include "proto/proto.h"

/* What a watch page holds for us. */
struct innertube_page {
  int consent_wall;       /* the page is the consent wall (a form posting to consent.youtube.com) */
  char consent_v[128];    /* the wall's "v" field, "" when missing or unusable */
  int recaptcha;          /* the "unusual traffic" page with a g-recaptcha form */
  char api_key[128];      /* INNERTUBE_API_KEY, "" when absent */
  char visitor_data[512]; /* VISITOR_DATA / visitorData, "" when absent */
};

/* Scans a watch page. Values are kept only when made of safe characters (they travel in URLs and JSON). */
void innertube_page_scan(const char *html, size_t len, struct innertube_page *out);

/*
 * Builds the timedtext URL of a caption track: baseUrl mapped onto the upstream origin (see upstream_map_url; only
 * the /api/timedtext path is accepted), any fmt parameter replaced by fmt=json3, and any tlang by tlang=<tlang> when
 * tlang is not "" (the platform's translation of the track; tlang is a checked language code). Returns 0, -EPERM,
 * -EINVAL or -ENOMEM.
 */
int innertube_timedtext_url(const struct upstream *up, const char *base_url, const char *tlang, struct buf *out);

struct innertube;

/*
 * Creates the client flow; up stays owned by the caller and must outlive it. Reads VTS_CLIENT_PROFILES and resolves
 * VTS_INNERTUBE_CLIENTS against it. Returns 0, -EINVAL (err names the variable and what is wrong) or -ENOMEM.
 */
int innertube_new(const struct vts_config *cfg, struct upstream *up, struct innertube **out, char *err, size_t errlen);
void innertube_free(struct innertube *it);

/*
 * Checks VTS_CLIENT_PROFILES and VTS_INNERTUBE_CLIENTS as innertube_new would, creating nothing that lasts (a
 * supervisor checks before forking). Returns 0, -EINVAL (err) or -ENOMEM.
 */
int innertube_config_check(const struct vts_config *cfg, char *err, size_t errlen);

/*
 * Re-reads VTS_CLIENT_PROFILES when the file changed (call before each job). A file that is refused, or that no
 * longer defines a client VTS_INNERTUBE_CLIENTS names, is logged once and the clients in force stay.
 */
void innertube_refresh_profiles(struct innertube *it);

/* The configured clients, in order. */
size_t innertube_client_count(const struct innertube *it);
const struct client_profile *innertube_client_at(const struct innertube *it, size_t i);

struct innertube_result {
  uint8_t outcome;               /* enum proto_outcome */
  char lang[PROTO_MAX_LANG + 1]; /* language of the returned track ("" unless PROTO_OK) */
  char detail[64];               /* short reason for logs: "http_429", "recaptcha", "no_captions"... */
  uint8_t reason;                /* enum proto_reason */
  uint8_t nattempts;             /* player attempts, by client and proxy, for the counters */
  struct proto_attempt attempts[PROTO_MAX_ATTEMPTS];
  struct buf body; /* PROTO_OK: the final public JSON; owned by the caller, buf_free it */
};

/*
 * Runs the captions flow for video_id (11 checked characters) and the requested lang ("" for none). With translate
 * not "", the chosen track is fetched translated into it by the platform (tlang), and the answer's language is
 * translate; PROTO_NOT_AVAILABLE when that track is not translatable or the platform does not offer translate. The
 * caller has started the job on the upstream (upstream_begin_job), which bounds its time. Never fails: res says
 * what happened.
 */
void innertube_fetch_captions(struct innertube *it, const char *video_id, const char *lang, const char *translate,
                              const char *request_id, struct innertube_result *res);

/*
 * Runs a tracks job for video_id: the same clients in turn; the first playable reply's caption tracks and translation
 * languages become the public tracks body (player_tracks_json), empty lists when it has none. Refusals as for
 * captions.
 */
void innertube_fetch_tracks(struct innertube *it, const char *video_id, const char *request_id,
                            struct innertube_result *res);

/*
 * Runs a speech job for video_id: the same clients in turn; a playable reply's audio goes to the speech pipeline
 * (fetcher/speech/speech.h) through the job's proxy, and the result is the final public JSON with source "speech".
 * Outcomes as speech_transcribe_via's, or the player's refusals as for captions.
 */
void innertube_fetch_speech(struct innertube *it, const char *video_id, const char *request_id,
                            struct innertube_result *res);

/*
 * One try of client number client (in the configured order) for video_id on the egress the caller chose
 * (upstream_use_egress), with no fall-through and no other proxy: what --probe reports. res as for captions.
 */
void innertube_probe(struct innertube *it, size_t client, const char *video_id, struct innertube_result *res);

#endif
