/*
 * The platform client's requests, built from a profile and what a watch page told: the watch page's values (API key,
 * visitor data, consent wall, recaptcha), the player request's body and user agent, and a caption track's timedtext
 * URL, each whole request (struct client_request: URL, method, body, user agent, headers) of the player, visitor,
 * browse, watch page and caption calls. Nothing here performs a request: the job's course (fetcher/course/course.h)
 * decides which to ask and sends them through egress.
 */
#ifndef VTS_CLIENT_H
#define VTS_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/limits.h"
#include "fetcher/egress/upstream.h"
#include "fetcher/platform/profiles.h"

#define CLIENT_VISITOR_DATA_MAX 1024 /* the platform issues visitor data of 580 bytes and more */

/* What a watch page holds for us. */
struct client_page {
  int consent_wall;                           /* the page is the consent wall (a form posting to consent.youtube.com) */
  char consent_v[128];                        /* the wall's "v" field, "" when missing or unusable */
  int recaptcha;                              /* the "unusual traffic" page with a g-recaptcha form */
  char api_key[128];                          /* INNERTUBE_API_KEY, "" when absent */
  char visitor_data[CLIENT_VISITOR_DATA_MAX]; /* VISITOR_DATA / visitorData, "" when absent */
};

/* Scans a watch page. Values are kept only when made of safe characters (they travel in URLs and JSON). */
void client_page_scan(const char *html, size_t len, struct client_page *out);

/*
 * Builds the timedtext URL of a caption track: baseUrl mapped onto the upstream origin (see upstream_map_url; only
 * the /api/timedtext path is accepted), any fmt parameter replaced by fmt=json3, and any tlang by tlang=<tlang> when
 * tlang is not "" (the platform's translation of the track; tlang is a checked language code). With pot not "" (a PO
 * token, base64url characters: fetcher/platform/potoken.h), any pot, potc and c parameters are replaced by
 * pot=<pot>&potc=1&c=<client_name>, the InnerTube client name of the reply that gave the track. Returns 0, -EPERM,
 * -EINVAL or -ENOMEM.
 */
int client_timedtext_url(const struct upstream *up, const char *base_url, const char *tlang, const char *pot,
                         const char *client_name, struct buf *out);

/*
 * Appends tmpl to out with its placeholders expanded: {video_id} as video_id, {nonce:N} as N fresh random characters
 * of A-Z, a-z, 0-9, - and _ (the profile was checked: other braces are copied as they are). Returns 0, -ENOMEM, or
 * -errno when the kernel gives no random bytes.
 */
int client_expand(const char *tmpl, const char *video_id, struct buf *out);

/*
 * The URL of client c's player call: https://<host><path>?prettyPrint=false, then key=<api_key> when api_key is not
 * "", then the profile's query parameters expanded. Returns 0 or an error of client_expand.
 */
int client_player_url(const struct client_profile *c, const char *video_id, const char *api_key, struct buf *out);

/*
 * The player request's JSON body for client c: context.client with its clientName, version and context fields, the
 * user agent when the profile puts it in the context, visitorData (percent-decoded; left out when malformed) when
 * visitor_data is not ""; the profile's members of context beside client; then the player request (video_id with the
 * content checks accepted and the profile's request members), nested under the wrapper's member beside its fixed
 * members when the profile has a wrapper. Returns 0 or an error of client_expand.
 */
int client_player_body(const struct client_profile *c, const char *ua, const char *video_id, const char *visitor_data,
                       struct buf *body);

/* The body of client c's visitor call: its context alone (no visitorData). Returns 0 or -ENOMEM. */
int client_visitor_body(const struct client_profile *c, const char *ua, struct buf *body);

/*
 * The visitor data of a visitor call's reply (responseContext.visitorData) into out (CLIENT_VISITOR_DATA_MAX bytes),
 * kept only when made of the characters visitor data travels in (letters, digits, _ - % =). Returns 0, or -EPROTO
 * for a reply without usable visitor data.
 */
int client_visitor_reply(const char *json, size_t len, char *out);

/*
 * Visitor data made here (the form the platform issues: a random 11-character visitor id, the time, the country),
 * base64url with its padding percent-encoded, into out (CLIENT_VISITOR_DATA_MAX bytes). Returns 0, or -errno.
 */
int client_visitor_local(char *out);

/* The user agent of a profile: "{version}" replaced by its version. Returns 0 or -ENOMEM. */
int client_user_agent(const struct client_profile *c, struct buf *ua);

/*
 * One request to the platform, whole: req is what egress sends (upstream_fetch), and points into the members beside
 * it, which hold its URL, body, user agent and headers until client_request_free. Start from CLIENT_REQUEST_INIT; a
 * builder may be called again on the same request after client_request_free.
 */
struct client_request {
  struct upstream_request req;
  struct buf url, body, ua;
  char name[32];
  char version[64];
  char visitor[CLIENT_VISITOR_DATA_MAX + 32];
  char origin[96];
  const char *headers[5 + PROFILES_MAX_HEADERS + 1];
};
#define CLIENT_REQUEST_INIT \
  { .url = BUF_INIT, .body = BUF_INIT, .ua = BUF_INIT }
void client_request_free(struct client_request *r);

/*
 * Client c's player call for video_id: a POST to client_player_url with api_key ("" for none) and the body of
 * client_player_body with visitor_data ("" for none), as c's user agent, with c's headers (Content-Type, its client
 * name and version, X-Goog-Visitor-Id when visitor_data is not "", Origin, the profile's own), and cookie (NULL for
 * none). r->ua.data is the user agent, for the calls that follow it (a caption track). Returns 0 or an error of
 * client_expand.
 */
int client_player_request(struct client_request *r, const struct client_profile *c, const char *video_id,
                          const char *api_key, const char *visitor_data, const char *cookie);

/* Client c's visitor call: a POST of client_visitor_body to PROFILES_VISITOR_PATH on c's host. Returns 0 or -ENOMEM. */
int client_visitor_request(struct client_request *r, const struct client_profile *c);

/*
 * Client c's browse call, to the host of its player call: the page what (enum proto_browse_what) target names, a
 * playlist's first page (as the continuation browse_playlist_token builds), a channel's videos tab, or a continuation.
 * Returns 0, -EINVAL (a playlist id browse_playlist_token refuses) or -ENOMEM.
 */
int client_browse_request(struct client_request *r, const struct client_profile *c, uint8_t what, const char *target);

/*
 * The watch page of video_id, fetched as a browser would (PROFILES_BROWSER_UA, English), with cookie (NULL for none:
 * the answer to a consent wall). Returns 0 or -ENOMEM.
 */
int client_watch_request(struct client_request *r, const char *video_id, const char *cookie);

/* The web client c's watch-next call for video_id (whose panels hold the chapters). Returns 0 or -ENOMEM. */
int client_next_request(struct client_request *r, const struct client_profile *c, const char *video_id);

/*
 * A caption track's call: a GET of client_timedtext_url(up, base_url, tlang, pot, client_name) as user_agent (borrowed:
 * it must outlive r, the player call's), with cookie (NULL for none). Returns 0 or an error of client_timedtext_url.
 */
int client_track_request(struct client_request *r, const struct upstream *up, const char *base_url, const char *tlang,
                         const char *pot, const char *client_name, const char *user_agent, const char *cookie);

#endif
