/*
 * The platform client flow of one captions job (ARCHITECTURE.md, request step 4): the player endpoint for each
 * configured client in turn, the watch page only for a client that needs what it holds (API key, visitor data) with
 * its consent wall and recaptcha page, playability, track choice, the timedtext body as json3, and the final public
 * JSON. Every problem ends as an outcome of proto.h with a short detail; nothing upstream reaches a client.
 */
#ifndef VTS_INNERTUBE_H
#define VTS_INNERTUBE_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/config.h"
#include "fetcher/platform/upstream.h"
#include "proto/proto.h"

struct innertube_client {
  int kind;         /* index into the built-in table of client kinds */
  char name[32];    /* clientName, e.g. "ANDROID" */
  char version[32]; /* clientVersion, e.g. "20.10.38" */
};

/*
 * Parses VTS_INNERTUBE_CLIENTS ("NAME:VERSION,NAME:VERSION"): known client names only, versions of digits and dots,
 * no repeated entry, at most max. Returns 0 and the count in *n, or -EINVAL with a one-line message in err.
 */
int innertube_clients_parse(const char *spec, struct innertube_client *out, size_t max, size_t *n, char *err,
                            size_t errlen);

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
 * the /api/timedtext path is accepted), any fmt parameter replaced by fmt=json3. Returns 0, -EPERM, -EINVAL or -ENOMEM.
 */
int innertube_timedtext_url(const struct upstream *up, const char *base_url, struct buf *out);

struct innertube;

/* Creates the client flow; up stays owned by the caller and must outlive it. Returns 0, -EINVAL (err) or -ENOMEM. */
int innertube_new(const struct vts_config *cfg, struct upstream *up, struct innertube **out, char *err, size_t errlen);
void innertube_free(struct innertube *it);

struct innertube_result {
  uint8_t outcome;               /* enum proto_outcome */
  char lang[PROTO_MAX_LANG + 1]; /* language of the returned track ("" unless PROTO_OK) */
  char detail[64];               /* short reason for logs: "http_429", "recaptcha", "no_captions"... */
  struct buf body;               /* PROTO_OK: the final public JSON; owned by the caller, buf_free it */
};

/*
 * Runs the captions flow for video_id (11 checked characters) and the requested lang ("" for none). The caller has
 * started the job on the upstream (upstream_begin_job), which bounds its time. Never fails: res says what happened.
 */
void innertube_fetch_captions(struct innertube *it, const char *video_id, const char *lang, const char *request_id,
                              struct innertube_result *res);

/*
 * Runs a speech job for video_id: the same clients in turn; a playable reply's audio goes to the speech pipeline
 * (fetcher/speech/speech.h) through the job's proxy, and the result is the final public JSON with source "speech".
 * Outcomes as speech_transcribe_via's, or the player's refusals as for captions.
 */
void innertube_fetch_speech(struct innertube *it, const char *video_id, const char *request_id,
                            struct innertube_result *res);

#endif
