/*
 * The public error answers: status, code and message of each, and the Error body of SPEC 2.4 built once.
 * Messages are ours, short and stable; they never carry upstream text or internals.
 */
#ifndef VTS_ERRORS_H
#define VTS_ERRORS_H

#include <stddef.h>

enum api_error {
  API_OK = 0,
  API_ERR_UNAUTHORIZED,           /* 401 UNAUTHORIZED */
  API_ERR_INVALID_VIDEO_ID,       /* 400 invalid_video_id */
  API_ERR_INVALID_VIDEO_URL,      /* 400 invalid_video_url */
  API_ERR_AMBIGUOUS_REQUEST,      /* 400 ambiguous_request */
  API_ERR_INVALID_LANGUAGE,       /* 400 invalid_language */
  API_ERR_AMBIGUOUS_LANGUAGE,     /* 400 ambiguous_language */
  API_ERR_NOT_AVAILABLE,          /* 404 transcript_not_available */
  API_ERR_RATE_LIMITED,           /* 429 rate_limited */
  API_ERR_QUOTA_EXCEEDED,         /* 429 quota_exceeded */
  API_ERR_UPSTREAM_FAILED,        /* 502 upstream_transcript_failed */
  API_ERR_FETCH_FAILED,           /* 500 transcript_fetch_failed */
  API_ERR_RATE_LIMIT_UNAVAILABLE, /* 503 rate_limit_unavailable */
  API_ERR_NOT_FOUND,              /* 404 not_found: unknown path */
  API_ERR_METHOD_NOT_ALLOWED,     /* 405 method_not_allowed */
  API_ERR_BAD_REQUEST,            /* 400 bad_request: malformed HTTP, smuggling shapes */
  API_ERR_URI_TOO_LONG,           /* 414 uri_too_long */
  API_ERR_HEADERS_TOO_LARGE,      /* 431 headers_too_large */
  API_ERR_PAYLOAD_TOO_LARGE,      /* 413 payload_too_large */
  API_ERR_REQUEST_TIMEOUT,        /* 408 request_timeout */
  API_ERR_SERVICE_UNAVAILABLE,    /* 503 service_unavailable: shutting down, connection cap */
  API_ERR_INVALID_FORMAT,         /* 400 bad_request: format not one of RENDER_FORMAT_NAMES, or repeated */
  API_ERR_AMBIGUOUS_TRANSLATE,    /* 400 ambiguous_language: translate repeated */
  API_ERR_INVALID_TRANSLATE,      /* 400 invalid_language: translate malformed */
  API_ERR_NOT_IMPLEMENTED,        /* 501 not_implemented: a method the server does not know */
  API_ERR__COUNT
};

struct api_error_info {
  int status;
  const char *code;
  const char *message;
  const char *body; /* {"error":{"code":...,"message":...}} */
  size_t body_len;
};

/* Returns the static description of e (never NULL for a valid e). */
const struct api_error_info *api_error_get(enum api_error e);

#endif
