/*
 * The public error answers: status, code and message of each, and the Error body of SPEC 2.4 built once.
 * Messages are ours, short and stable; they never carry upstream text or internals.
 */
#ifndef VTS_ERRORS_H
#define VTS_ERRORS_H

#include <stddef.h>

/*
 * X(id, status, code, message), one row per answer (API_ERR_<id>); several rows may share a code with their own
 * message. Every status here has its row in status.h. Rows alike in shape stay rows: each is an answer of its own.
 */
#define API_ERRORS(X)                                                                                                 \
  X(UNAUTHORIZED, 401, "UNAUTHORIZED", "A valid x-api-key header is required.")                                       \
  X(INVALID_VIDEO_ID, 400, "invalid_video_id", "video_id must be 11 characters of A-Z, a-z, 0-9, _ or -.")            \
  X(INVALID_VIDEO_URL, 400, "invalid_video_url", "video_url is not a recognised video URL.")                          \
  X(AMBIGUOUS_REQUEST, 400, "ambiguous_request", "Give exactly one of video_id and video_url.")                       \
  X(INVALID_LANGUAGE, 400, "invalid_language", "language must match ^[a-z]{2,3}(?:-[a-zA-Z]{2,8})?$.")                \
  X(AMBIGUOUS_LANGUAGE, 400, "ambiguous_language", "Give at most one of language and lang.")                          \
  X(NOT_AVAILABLE, 404, "transcript_not_available", "No accessible transcript was found for this video.")             \
  X(RATE_LIMITED, 429, "rate_limited", "Rate limit exceeded; retry after the time in Retry-After.")                   \
  X(QUOTA_EXCEEDED, 429, "quota_exceeded", "The monthly quota of this API key is used up.")                           \
  X(UPSTREAM_FAILED, 502, "upstream_transcript_failed", "The video platform did not return the transcript.")          \
  X(FETCH_FAILED, 500, "transcript_fetch_failed", "The transcript could not be fetched.")                             \
  X(RATE_LIMIT_UNAVAILABLE, 503, "rate_limit_unavailable", "The rate-limit store is unavailable.")                    \
  /* an unknown path */                                                                                               \
  X(NOT_FOUND, 404, "not_found", "No such resource.")                                                                 \
  X(METHOD_NOT_ALLOWED, 405, "method_not_allowed", "Method not allowed for this resource.")                           \
  /* malformed HTTP, smuggling shapes */                                                                              \
  X(BAD_REQUEST, 400, "bad_request", "Malformed HTTP request.")                                                       \
  X(URI_TOO_LONG, 414, "uri_too_long", "The request line is too long.")                                               \
  X(HEADERS_TOO_LARGE, 431, "headers_too_large", "The request headers are too large.")                                \
  X(PAYLOAD_TOO_LARGE, 413, "payload_too_large", "This endpoint takes no request body.")                              \
  X(REQUEST_TIMEOUT, 408, "request_timeout", "The request headers took too long.")                                    \
  /* shutting down, connection cap */                                                                                 \
  X(SERVICE_UNAVAILABLE, 503, "service_unavailable", "The service is not accepting requests now.")                    \
  /* format not one of RENDER_FORMAT_NAMES, or repeated */                                                            \
  X(INVALID_FORMAT, 400, "bad_request", "format must be one of json, text, srt, vtt.")                                \
  X(AMBIGUOUS_TRANSLATE, 400, "ambiguous_language", "Give translate at most once.")                                   \
  X(INVALID_TRANSLATE, 400, "invalid_language", "translate must match ^[a-z]{2,3}(?:-[a-zA-Z]{2,8})?$.")              \
  /* a method the server does not know */                                                                             \
  X(NOT_IMPLEMENTED, 501, "not_implemented", "The server does not support this method.")                              \
  /* transcript_not_available with the case the platform's reply said (PROTO_REASONS, proto_reason_gone) */           \
  X(NOT_AVAILABLE_AGE_RESTRICTED, 404, "transcript_not_available", "The video is age-restricted.")                    \
  X(NOT_AVAILABLE_MEMBERS_ONLY, 404, "transcript_not_available", "The video is for channel members only.")            \
  X(NOT_AVAILABLE_PRIVATE, 404, "transcript_not_available", "The video is private.")                                  \
  X(NOT_AVAILABLE_REMOVED, 404, "transcript_not_available", "The video has been removed.")                            \
  X(NOT_AVAILABLE_LIVE, 404, "transcript_not_available", "The live stream is not archived yet.")                      \
  X(NOT_AVAILABLE_GEO_RESTRICTED, 404, "transcript_not_available", "The video is not available in this region.")      \
  /* request bodies (POST /v1/jobs) */                                                                                \
  X(LENGTH_REQUIRED, 411, "length_required", "A request body needs a Content-Length.")                                \
  X(BODY_TOO_LARGE, 413, "payload_too_large", "The request body is larger than 1 MiB.")                               \
  X(UNSUPPORTED_MEDIA_TYPE, 415, "unsupported_media_type", "The request body must be application/json.")              \
  X(BODY_TIMEOUT, 408, "request_timeout", "The request body took too long.")                                          \
  /* batch jobs; the 400s of a body's members carry a message naming the member (http_respond_error_msg) */           \
  X(INVALID_JSON, 400, "invalid_json", "The request body must be a JSON object.")                                     \
  X(INVALID_MEMBER, 400, "invalid_request", "A member of the request body is not valid.")                             \
  X(TOO_MANY_ITEMS, 400, "too_many_items", "The job holds more videos than VTS_JOB_MAX_ITEMS.")                       \
  X(JOB_SOURCE, 400, "ambiguous_request", "Give exactly one of video_ids, playlist_id and channel_id.")               \
  X(JOB_NOT_IMPLEMENTED, 501, "not_implemented", "This kind of job is not supported yet.")                            \
  X(TOO_MANY_JOBS, 429, "too_many_open_jobs", "This API key has as many open jobs as VTS_JOBS_MAX_OPEN.")             \
  X(TOO_MANY_STORED, 429, "too_many_stored_items",                                                                    \
    "This API key's jobs would keep more items than VTS_JOBS_MAX_STORED_ITEMS, ended jobs included.")                 \
  X(JOB_NOT_FOUND, 404, "not_found", "No such job.")                                                                  \
  X(INVALID_CURSOR, 400, "invalid_cursor", "cursor must be an item offset: a decimal integer from 1.")                \
  X(INVALID_LIMIT, 400, "invalid_limit", "limit must be an integer from 1 to 1000.")                                  \
  X(JOBS_UNAVAILABLE, 503, "jobs_unavailable", "The job store is unavailable.")                                       \
  X(WEBHOOK_REFUSED, 400, "webhook_url_refused", "webhook_url names a destination this service does not call.")       \
  /* POST /v1/jobs of a playlist or channel: the case its first page said (PROTO_REASONS) */                          \
  X(NOT_AVAILABLE_PLAYLIST_MISSING, 404, "transcript_not_available", "The playlist does not exist.")                  \
  X(NOT_AVAILABLE_PLAYLIST_PRIVATE, 404, "transcript_not_available", "The playlist is private.")                      \
  X(NOT_AVAILABLE_PLAYLIST_UNVIEWABLE, 404, "transcript_not_available", "The playlist cannot be viewed.")             \
  X(NOT_AVAILABLE_CHANNEL_MISSING, 404, "transcript_not_available", "The channel does not exist.")                    \
  X(NOT_AVAILABLE_CHANNEL_REMOVED, 404, "transcript_not_available", "The channel has been removed.")                  \
  X(NOT_AVAILABLE_NO_VIDEOS, 404, "transcript_not_available", "The playlist or channel holds no videos.")             \
  /* format=chunks of the transcript endpoint */                                                                      \
  X(INVALID_CHUNK_CHARS, 400, "bad_request", "chunk_chars must be an integer from 200 to 20000.")                     \
  X(INVALID_CHUNK_OVERLAP, 400, "bad_request", "chunk_overlap must be an integer from 0 to half of chunk_chars.")     \
  /* include of GET /v1/video/metadata */                                                                             \
  X(INVALID_INCLUDE, 400, "bad_request", "include must be chapters.")                                                 \
  /* POST /mcp before its JSON-RPC message is read */                                                                 \
  X(MCP_UNAUTHORIZED, 401, "UNAUTHORIZED", "A valid API key is required: Authorization: Bearer <key>, or x-api-key.") \
  X(MCP_ORIGIN, 403, "forbidden_origin", "Requests from this Origin are not allowed.")                                \
  X(MCP_NOT_ACCEPTABLE, 406, "not_acceptable", "Accept must allow application/json.")                                 \
  X(MCP_VERSION, 400, "unsupported_protocol_version",                                                                 \
    "MCP-Protocol-Version must be one of 2025-11-25, 2025-06-18, 2025-03-26.")

#define API_ERROR_ENUM_(id, status, code, message) API_ERR_##id,
enum api_error { API_OK = 0, API_ERRORS(API_ERROR_ENUM_) API_ERR__COUNT };
#undef API_ERROR_ENUM_

struct api_error_info {
  int status;
  const char *code;
  const char *message;
  const char *body; /* {"error":{"code":...,"message":...}} */
  size_t body_len;
};

/* Returns the static description of e (never NULL for a valid e). */
const struct api_error_info *api_error_get(enum api_error e);

/* The 404 of a video that cannot be played, saying the case its reply named (enum proto_reason); else the plain one. */
enum api_error api_error_not_available(unsigned reason);

#endif
