/*
 * The messages between gateway workers, the dispatcher and fetchers. One encoder and one decoder serve every side.
 *
 * Wire format, all integers big-endian:
 *   magic "VT" | version u8 | type u8 | fields of the type
 *   string: u16 length + bytes (no NUL); blob: u32 length + bytes
 * Every decode checks the magic, the version, every length against the bytes present and the field limits below,
 * and that nothing trails; a message that fails any check is rejected whole (-EPROTO) and never trusted.
 */
#ifndef VTS_PROTO_H
#define VTS_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/limits.h"

/*
 * 2: a result carries its typed reason and player attempts; 3: a result carries the cache lifetime left (dispatcher
 * -> worker), a job its translation; the TRACKS kind and the DECLINE message exist; 4: a result carries its
 * fetcher's egress budgets, a DECLINE why it was sent, a job its declines; 5: a result carries the seconds after which
 * the platform may answer again (Retry-After), and the reasons rationed, client_outdated, wrong_video and
 * translation_throttled exist; a result and a job carry a player summary (its reuse across the jobs of a video); 6: a
 * result carries its job's PO-token provider failures; 7: the WEBHOOK kind exists, and a job carries a webhook
 * delivery; 8: the BROWSE kind, a job's browse target, and the reasons of a playlist or channel that cannot be read;
 * 9: a result carries its fetcher's sandbox layers; 10: a job carries what it includes beyond its kind's answer (a
 * metadata job's chapters); 11: a job says whether it is a worker's refresh of an answer it holds.
 */
#define PROTO_VERSION 11
#define PROTO_MAX_LANG 15                             /* bytes of a language code, without NUL */
#define PROTO_MAX_REQUEST_ID VTS_MAX_REQUEST_ID_BYTES /* bytes of a request id, without NUL */

enum proto_type {
  PROTO_JOB = 1,    /* worker -> dispatcher (a request) and dispatcher -> fetcher (an assignment) */
  PROTO_RESULT = 2, /* fetcher -> dispatcher (a finished job, also meaning "idle") and dispatcher -> worker */
  PROTO_READY = 3,  /* fetcher -> dispatcher: idle, give me a job; dispatcher -> fetcher: RESULT_LAST received */
  /*
   * fetcher -> dispatcher: the finished job of a fetcher that is stopping. Encoded exactly as a RESULT, but it does
   * not mean "idle": the dispatcher takes the result, answers at once with a READY (the acknowledgement, so the
   * fetcher knows the result arrived and may close) and gives that fetcher no more jobs. A job queued meanwhile goes
   * to another fetcher instead of into a connection about to close.
   */
  PROTO_RESULT_LAST = 4,
  /*
   * fetcher -> dispatcher: "busy: job_id given back, not run". A fetcher serving several dispatchers offers itself to
   * each; a job that reaches it while it runs another goes straight back this way. The dispatcher puts the job first
   * in line for another idle fetcher (it is no failure) and answers at once with a READY; it gives this fetcher
   * nothing more until the fetcher says READY (or RESULT) again. Fields: job_id u64, why u8 (enum
   * proto_decline_why): a job given back because every egress of that fetcher spent its budget counts in the job's
   * declines.
   */
  PROTO_DECLINE = 5,
};

/*
 * What a job asks for. CAPTIONS answers a transcript (and may become SPEECH in the dispatcher); TRACKS answers the
 * video's caption tracks and translation languages, the body of GET /v1/video/tracks; METADATA the video's details
 * (title, channel, length...), the body of GET /v1/video/metadata. WEBHOOK (dispatcher -> fetcher only) is no video's
 * job: the fetcher POSTs a batch job's signed webhook message (the job's hook_* fields) and answers OK when the
 * receiver answered 2xx, else UPSTREAM_FAILED with the reason; the result's body is the receiver's HTTP status in
 * decimal ("" when there was none). BROWSE reads one page of a playlist's or a channel's videos (its job names no
 * video either: the target is browse_what and browse), for the batch jobs of POST /v1/jobs; its answer is a browse
 * body (proto_browse_body), never cached and never sent to a client.
 */
enum proto_kind {
  PROTO_KIND_CAPTIONS = 1,
  PROTO_KIND_SPEECH = 2,
  PROTO_KIND_TRACKS = 3,
  PROTO_KIND_METADATA = 4,
  PROTO_KIND_WEBHOOK = 5,
  PROTO_KIND_BROWSE = 6,
  PROTO_KIND_LAST = PROTO_KIND_BROWSE /* the kinds' wire values are 1 to this */
};

/*
 * What a job includes beyond its kind's answer, one bit each (proto_job.include): CHAPTERS, for a METADATA job only,
 * adds the video's chapters to the metadata body (one more platform request, so only when asked). A job that includes
 * something has its own job key: the caches keep the answers with and without apart.
 */
enum proto_include { PROTO_INCLUDE_CHAPTERS = 1 };
#define PROTO_INCLUDE_ALL PROTO_INCLUDE_CHAPTERS

/* What a BROWSE job reads: the first page of a playlist, of a channel's videos, or the page a continuation names. */
enum proto_browse_what {
  PROTO_BROWSE_NONE = 0, /* every other kind */
  PROTO_BROWSE_PLAYLIST = 1,
  PROTO_BROWSE_CHANNEL = 2,
  PROTO_BROWSE_CONTINUATION = 3
};

/*
 * What happened to a job, one row each: X(id, wire value, HTTP status, metric kind). The gateway answers the status
 * (ARCHITECTURE.md "Outcomes"); vts_upstream_outcomes_total counts the job under the metric kind, the row's suffix of
 * enum metrics_upstream, or under its reason's kind (BY_REASON).
 *   OK               200, body is the final public JSON
 *   NOT_AVAILABLE    404 transcript_not_available
 *   UPSTREAM_FAILED  502 upstream_transcript_failed
 *   INTERNAL         500 transcript_fetch_failed
 *   NO_CAPTIONS      fetcher -> dispatcher only: playable but no captions; speech may follow, else 404
 *   OVERLOADED       dispatcher -> worker only: shed, the queue cannot serve it before its deadline; 503
 *                    service_unavailable with retry_after_s (a fetcher's is refused)
 */
#define PROTO_OUTCOMES(X)                 \
  X(OK, 1, 200, OK)                       \
  X(NOT_AVAILABLE, 2, 404, NOT_AVAILABLE) \
  X(UPSTREAM_FAILED, 3, 502, BY_REASON)   \
  X(INTERNAL, 4, 500, INTERNAL)           \
  X(NO_CAPTIONS, 5, 404, NO_CAPTIONS)     \
  X(OVERLOADED, 6, 503, OTHER)

#define PROTO_OUTCOME_ENUM_(id, value, status, kind) PROTO_##id = value,
enum proto_outcome { PROTO_OUTCOMES(PROTO_OUTCOME_ENUM_) };
#undef PROTO_OUTCOME_ENUM_
/* The outcomes' wire values are 1 to PROTO_NOUTCOMES (proto.c checks it at compile time). */
#define PROTO_OUTCOME_ONE_(id, value, status, kind) +1
enum { PROTO_NOUTCOMES = 0 PROTO_OUTCOMES(PROTO_OUTCOME_ONE_) };
#undef PROTO_OUTCOME_ONE_

/* WEBHOOK: the result of a webhook delivery (PROTO_KIND_WEBHOOK), which says nothing of the platform. */
enum proto_source {
  PROTO_SOURCE_NONE = 0,
  PROTO_SOURCE_CAPTIONS = 1,
  PROTO_SOURCE_SPEECH = 2,
  PROTO_SOURCE_WEBHOOK = 3,
  PROTO_SOURCE_LAST = PROTO_SOURCE_WEBHOOK
};

/*
 * Why a job ended as it did: set where the failure happens (the transport, the player step, the caption step) and
 * carried unchanged to the result, the metrics (vts_upstream_outcomes_total) and the logs. Nothing decides on the
 * detail string, which is for people.
 *
 * X(id, name, metric kind), one row per reason (PROTO_REASON_<id>): name is its stable name in logs, metric kind the
 * suffix of enum metrics_upstream it is counted under when its outcome counts by reason. A reason's number goes on
 * the wire: a new reason is a new row at the end.
 */
#define PROTO_REASONS(X)                                                             \
  /* success, or a failure of the gateway's own (queue, deadline) */                 \
  X(NONE, "none", OTHER)                                                             \
  /* playable, no caption track */                                                   \
  X(NO_CAPTIONS, "no_captions", NO_CAPTIONS)                                         \
  /* every client agrees: private, removed, age-restricted, unplayable, offline */   \
  X(NOT_PLAYABLE, "not_playable", OTHER)                                             \
  /* 429 from the platform: a block of our address */                                \
  X(HTTP_429, "http_429", HTTP_429)                                                  \
  /* the "unusual traffic" page: a block */                                          \
  X(RECAPTCHA, "recaptcha", RECAPTCHA)                                               \
  /* "confirm you're not a bot": a block */                                          \
  X(BOT_CHECK, "bot_check", BOT_CHECK)                                               \
  /* the platform failed */                                                          \
  X(HTTP_5XX, "http_5xx", HTTP_5XX)                                                  \
  /* another unexpected status (403 on a caption URL, 404...) */                     \
  X(HTTP_OTHER, "http_other", OTHER)                                                 \
  /* the job's deadline passed in a transfer */                                      \
  X(TIMEOUT, "timeout", TIMEOUT)                                                     \
  /* a consent wall we could not answer */                                           \
  X(CONSENT, "consent", CONSENT)                                                     \
  /* every track wanted a proof-of-origin token (exp=xpe / exp=xpv) */               \
  X(PO_TOKEN, "po_token", PO_TOKEN)                                                  \
  /* a reply not in the platform's shape: unparsable, truncated, too large, empty */ \
  X(MALFORMED, "malformed", MALFORMED)                                               \
  /* DNS, connect, TLS or proxy failure: nothing reached the platform */             \
  X(NETWORK, "network", NETWORK)                                                     \
  /* a URL or redirect off the allowed hosts */                                      \
  X(REFUSED, "refused", OTHER)                                                       \
  /* the speech pipeline failed (audio, decoding, recogniser) */                     \
  X(SPEECH, "speech", OTHER)                                                         \
  /* out of memory, a result too large, a bad job */                                 \
  X(INTERNAL, "internal", INTERNAL)                                                  \
  /* no egress had a unit of its budget (VTS_EGRESS_RATE) in time */                 \
  X(BUDGET, "egress_budget", EGRESS_BUDGET)                                          \
  /* the platform's ration of our address ("try again later"): a block */            \
  X(RATIONED, "rationed", RATIONED)                                                  \
  /* a retired client profile ("Watch on the latest version"): next client */        \
  X(CLIENT_OUTDATED, "client_outdated", CLIENT_OUTDATED)                             \
  /* the player answered for another video: a block, the reply unused */             \
  X(WRONG_VIDEO, "wrong_video", WRONG_VIDEO)                                         \
  /* 429 or an empty body on a translated (tlang) caption track */                   \
  X(TRANSLATION_THROTTLED, "translation_throttled", TRANSLATION_THROTTLED)           \
  /* not playable, and the reply says why (NOT_PLAYABLE when it does not): */        \
  X(AGE_RESTRICTED, "age_restricted", AGE_RESTRICTED)                                \
  X(MEMBERS_ONLY, "members_only", MEMBERS_ONLY)                                      \
  X(PRIVATE, "private", PRIVATE)                                                     \
  X(REMOVED, "removed", REMOVED)                                                     \
  /* a live stream not begun, or ended and not yet archived */                       \
  X(LIVE_NOT_ARCHIVED, "live_not_archived", LIVE_NOT_ARCHIVED)                       \
  X(GEO_RESTRICTED, "geo_restricted", GEO_RESTRICTED)                                \
  /* a playlist or channel that cannot be read (browse), and the case it said: */    \
  X(PLAYLIST_MISSING, "playlist_missing", OTHER)                                     \
  X(PLAYLIST_PRIVATE, "playlist_private", OTHER)                                     \
  X(PLAYLIST_UNVIEWABLE, "playlist_unviewable", OTHER)                               \
  X(CHANNEL_MISSING, "channel_missing", OTHER)                                       \
  X(CHANNEL_REMOVED, "channel_removed", OTHER)

#define PROTO_REASON_ENUM_(id, name, kind) PROTO_REASON_##id,
enum proto_reason { PROTO_REASONS(PROTO_REASON_ENUM_) PROTO_REASON__COUNT };
#undef PROTO_REASON_ENUM_

/* A short stable name of a reason ("http_429", "network"), for logs. */
const char *proto_reason_name(uint8_t reason);

#define PROTO_MAX_ATTEMPTS 16    /* attempt records a result carries; later attempts go unrecorded */
#define PROTO_MAX_CLIENT_NAME 31 /* bytes of a client profile name */
#define PROTO_MAX_HOOK_ID 63     /* bytes of a webhook-id */
#define PROTO_MAX_HOOK_SIG 127   /* bytes of a webhook-signature */
#define PROTO_MAX_INM 512        /* bytes of an If-None-Match a worker hands on; a longer one is not (a 200) */
#define PROTO_MAX_ETAG 47        /* bytes of a quoted ETag in a result */

/* How one player attempt (one client through one egress) went, for per-proxy and per-client counters. */
enum proto_attempt_result { PROTO_ATTEMPT_OK = 0, PROTO_ATTEMPT_BLOCKED = 1, PROTO_ATTEMPT_FAILED = 2 };

struct proto_attempt {
  uint8_t proxy;                          /* 0: no proxy; n: entry n (1-based) of VTS_UPSTREAM_PROXY */
  uint8_t result;                         /* enum proto_attempt_result */
  char client[PROTO_MAX_CLIENT_NAME + 1]; /* the client profile's name */
};

/*
 * The budget of one egress of the fetcher that sent a result (fetcher/egress/pace.h), for the per-egress gauges and
 * counters: what it holds now, and what this process waited for or declined since its previous result.
 */
#define PROTO_MAX_EGRESS (VTS_UPSTREAM_MAX_PROXIES + 1) /* the direct route and every proxy */
struct proto_egress {
  uint8_t egress;    /* 0: the direct route; n: entry n (1-based) of VTS_UPSTREAM_PROXY */
  uint32_t left;     /* whole requests its budget holds */
  uint32_t waits;    /* requests that waited for a unit of it */
  uint32_t declines; /* jobs given back to a dispatcher for want of it */
};

/*
 * The layers of a fetcher's sandbox (fetcher/process/sandbox.h), one bit each in a result, for the gauge
 * vts_fetcher_sandbox_layer: X(id, name), name its label.
 */
#define PROTO_SANDBOX_LAYERS(X)   \
  X(NO_NEW_PRIVS, "no_new_privs") \
  X(USER, "user")                 \
  X(SECCOMP, "seccomp")           \
  X(LANDLOCK_FS, "landlock_fs")   \
  X(LANDLOCK_NET, "landlock_net") \
  X(RLIMITS, "rlimits")
#define PROTO_SANDBOX_ENUM_(id, name) PROTO_SANDBOX_##id,
enum proto_sandbox_layer { PROTO_SANDBOX_LAYERS(PROTO_SANDBOX_ENUM_) PROTO_SANDBOX__COUNT };
#undef PROTO_SANDBOX_ENUM_

/* Why a fetcher gave a job back. */
enum proto_decline_why { PROTO_DECLINE_BUSY = 0, PROTO_DECLINE_BUDGET = 1 };

struct proto_job {
  uint64_t job_id;                           /* assigned by the dispatcher; 0 in a worker's request */
  uint8_t kind;                              /* enum proto_kind */
  uint32_t deadline_ms;                      /* time the job may take, from its receipt */
  char video_id[12];                         /* exactly 11 characters and a NUL */
  char lang[PROTO_MAX_LANG + 1];             /* requested language, "" for none */
  char translate[PROTO_MAX_LANG + 1];        /* CAPTIONS: the language to translate the track into, "" for none */
  char request_id[PROTO_MAX_REQUEST_ID + 1]; /* the client request's id, for logs */
  uint8_t declines; /* times fetchers gave it back for want of budget (dispatcher -> fetcher) */
  uint8_t include;  /* bits of enum proto_include; 0 for every kind but METADATA */
  /*
   * Dispatcher -> fetcher: what a fetcher learnt of the video's player reply lately (a player summary, see
   * proto_result), to use instead of a player request; NULL/0 for none. Borrowed, like a result's body.
   */
  const char *player;
  uint32_t player_len;
  /*
   * WEBHOOK: the delivery the fetcher POSTs (video_id is "" for it, as for BROWSE and no other kind): to hook_url (an
   * http(s) URL of at most VTS_WEBHOOK_URL_MAX_BYTES), with the headers webhook-id, webhook-timestamp (seconds since
   * the epoch) and webhook-signature as the Standard Webhooks specification names them, and the JSON body hook_body (at
   * most VTS_WEBHOOK_MAX_PAYLOAD_BYTES). The dispatcher signs it: the secret never leaves the gateway. url and body are
   * borrowed, like player; empty for the other kinds.
   */
  const char *hook_url;
  uint32_t hook_url_len;
  char hook_id[PROTO_MAX_HOOK_ID + 1];
  uint64_t hook_timestamp;
  char hook_signature[PROTO_MAX_HOOK_SIG + 1];
  const char *hook_body;
  uint32_t hook_body_len;
  /*
   * BROWSE (video_id ""): what it reads (enum proto_browse_what) and its target, a playlist id, a channel id or a
   * continuation token (1 to VTS_MAX_BROWSE_TOKEN_BYTES bytes, no NUL); PROTO_BROWSE_NONE and NULL/0 for any other
   * kind. Borrowed, like player.
   */
  uint8_t browse_what;
  const char *browse;
  uint32_t browse_len;
  /*
   * Worker -> dispatcher: the request's If-None-Match (at most PROTO_MAX_INM bytes), so that an answer from the
   * dispatcher's cache whose validator it names is a 304 decided there (proto_result.notmod); NULL/0 for none, and
   * always for a fetcher. Borrowed, like player.
   */
  const char *inm;
  uint32_t inm_len;
  /*
   * Worker -> dispatcher: 1 for a refresh of an answer the worker holds in its own cache (its ETag in inm): answered
   * from the dispatcher's memory cache only (a 304 when it still holds that answer, or the answer it holds), never by a
   * job (PROTO_INTERNAL "not_cached" when it holds none); 0 for a request. Only for a CAPTIONS job with an inm.
   */
  uint8_t refresh;
};

struct proto_result {
  uint64_t job_id;
  uint8_t outcome;               /* enum proto_outcome */
  uint8_t source;                /* enum proto_source */
  uint32_t fetch_ms;             /* time spent by the fetcher */
  char lang[PROTO_MAX_LANG + 1]; /* language of the returned track */
  char detail[64];               /* a short internal reason for logs ("recaptcha", "http_429"); never sent to clients */
  uint8_t reason;                /* enum proto_reason: what metrics count */
  uint8_t nattempts;
  struct proto_attempt attempts[PROTO_MAX_ATTEMPTS];
  uint8_t negress; /* fetcher -> dispatcher: the paced egresses of its process, 0 when none is paced */
  struct proto_egress egress[PROTO_MAX_EGRESS];
  /*
   * Dispatcher -> worker: how long the answer may still be kept, in ms (0: do not keep). A worker keeps a hot answer
   * in its own cache no longer than the shared entry lives. A fetcher sends 0; the dispatcher ignores what it sends.
   */
  uint32_t cache_ms;
  /*
   * Seconds after which the platform may serve this job's like again (the HTTP Retry-After of a 502), 0 for none: set
   * by a fetcher when every egress it could use rests, or translations do, or no egress had a unit of its budget in
   * time; carried unchanged to the worker.
   */
  uint32_t retry_after_s;
  /*
   * Fetcher -> dispatcher: the job's requests to the PO-token provider (VTS_POT_PROVIDER_URL) that gave no token (down,
   * slow, refusing, out of shape), for vts_pot_provider_failures_total. A dispatcher sends 0.
   */
  uint8_t pot_failures;
  /* Fetcher -> dispatcher: the sandbox layers in force in its process (bits of enum proto_sandbox_layer). */
  uint8_t sandbox;
  /*
   * Fetcher -> dispatcher: the summary of a playable player reply the job read (its caption tracks with their URLs
   * and translation languages, as a minimal player reply, at most VTS_MAX_PLAYER_SUMMARY_BYTES), and how long it may
   * be used for the video's next jobs (ms, bounded by its caption URLs' expire); NULL/0 for none. Borrowed.
   */
  const char *player;
  uint32_t player_len;
  uint32_t player_ttl_ms;
  /*
   * Dispatcher -> worker: 1 when the answer came from the dispatcher's cache and the job's If-None-Match names etag,
   * the validator of one of its forms: the answer is a 304 with that ETag, carrying no body. 0 otherwise.
   */
  uint8_t notmod;
  char etag[PROTO_MAX_ETAG + 1];
  const char *body; /* borrowed: points into the decoded message or the caller's memory */
  uint32_t body_len;
};

/* Appends an encoded job to out. Returns 0, -EINVAL for a field out of its limits, or -ENOMEM. */
int proto_encode_job(struct buf *out, const struct proto_job *job);
/* Appends an encoded result (the body is copied). Returns 0, -EINVAL or -ENOMEM. */
int proto_encode_result(struct buf *out, const struct proto_result *res);
/* The same for a RESULT_LAST (sent by a stopping fetcher). */
int proto_encode_result_last(struct buf *out, const struct proto_result *res);
/* Appends an encoded READY. */
int proto_encode_ready(struct buf *out);
/* Appends an encoded DECLINE of job_id, for why (enum proto_decline_why). Returns 0, -EINVAL or -ENOMEM. */
int proto_encode_decline(struct buf *out, uint64_t job_id, uint8_t why);

/* Reads the type of a message after checking magic and version. Returns the type (> 0), or -EPROTO. */
int proto_peek_type(const void *data, size_t len);
/* Decodes a job. Returns 0, or -EPROTO. */
int proto_decode_job(const void *data, size_t len, struct proto_job *job);
/*
 * Decodes a RESULT or a RESULT_LAST (proto_peek_type tells them apart); res->body borrows from data, valid while
 * data is. Returns 0, or -EPROTO.
 */
int proto_decode_result(const void *data, size_t len, struct proto_result *res);

/* Decodes a DECLINE. Returns 0, or -EPROTO. */
int proto_decode_decline(const void *data, size_t len, uint64_t *job_id, uint8_t *why);

/*
 * Longest key proto_job_key writes: a requested language, '>' and a translation language, or the tracks marker.
 */
#define PROTO_MAX_JOB_KEY (2 * PROTO_MAX_LANG + 1)

/* The job keys of a video's track list, its metadata, and "this video cannot be played": no language can be any. */
#define PROTO_TRACKS_KEY "*tracks"
#define PROTO_METADATA_KEY "*metadata"
#define PROTO_CHAPTERS_KEY "*metadata+chapters" /* a metadata job that includes the chapters */
#define PROTO_GONE_KEY "*gone"
#define PROTO_BROWSE_KEY "*browse"

/*
 * The part of a job's identity besides its video id, for the caches and coalescing: two jobs of one video with the
 * same key have the same answer. A transcript's key is its requested language in its canonical spelling
 * (ident_language_canon: "en-us" and "en-US" are one key), with ">xx" for a translation into xx; the tracks of a
 * video have the key PROTO_TRACKS_KEY, its metadata PROTO_METADATA_KEY (PROTO_CHAPTERS_KEY with its chapters). Writes a
 * NUL-terminated key into out (PROTO_MAX_JOB_KEY + 1 bytes).
 */
void proto_job_key(const struct proto_job *job, char out[PROTO_MAX_JOB_KEY + 1]);

/*
 * The kind of job a job key answers: PROTO_KIND_TRACKS, PROTO_KIND_METADATA, PROTO_KIND_BROWSE, else
 * PROTO_KIND_CAPTIONS.
 */
uint8_t proto_key_kind(const char *key);

/*
 * The key of the track a transcript result holds, whatever spelling asked for it: '=', the served language, '#' and
 * 48 bits of the SHA-256 of its body (which names its source) in hex. Two requests served the same transcript share it,
 * so a cache keeps one copy of the transcript under it and only a small alias under each request's own job key.
 */
void proto_track_key(const struct proto_result *res, char out[PROTO_MAX_JOB_KEY + 1]);

/*
 * Whether a reason says the video itself cannot be played: PROTO_REASON_NOT_PLAYABLE, or one of the reasons that say
 * why (age-restricted, members-only, private, removed, live not yet archived, not in the region).
 */
int proto_reason_gone(uint8_t reason);

/* Whether res says the video itself cannot be played: the answer of every language and kind of the video. */
int proto_result_gone(const struct proto_result *res);

/* The HTTP status for an outcome (PROTO_NO_CAPTIONS maps to 404). */
int proto_outcome_status(uint8_t outcome);

/*
 * The body of a BROWSE job's OK result: the continuation token of the next page ("" at the end of the list) on the
 * first line, then each video id of the page on a line of its own, in the page's order:
 *   TOKEN\n ID\n ID\n ...
 * proto_browse_body appends it to out (ids: n checked ids). Returns 0, -EINVAL (a token too long, or holding a
 * newline or NUL) or -ENOMEM.
 */
int proto_browse_body(struct buf *out, const char *token, const char (*ids)[VTS_VIDEO_ID_LEN + 1], size_t n);

/* A browse body read in place: slices of the body it was read from. */
struct proto_browse_page {
  const char *token; /* the continuation, token_len bytes, not NUL-terminated; token_len 0 at the end of the list */
  size_t token_len;
  const char *ids; /* n video ids, the i-th at ids + i * (VTS_VIDEO_ID_LEN + 1), each followed by a newline */
  size_t n;
};

/* Checks body as a browse body and points out at its parts. Returns 0, or -EPROTO for anything else. */
int proto_browse_read(const char *body, size_t len, struct proto_browse_page *out);

#endif
