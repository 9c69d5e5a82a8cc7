#include "gateway/http/errors.h"

#define ERR(e, st, c, m)                                                     \
  [e] = {st, c, m, "{\"error\":{\"code\":\"" c "\",\"message\":\"" m "\"}}", \
         sizeof("{\"error\":{\"code\":\"" c "\",\"message\":\"" m "\"}}") - 1}

static const struct api_error_info errors[API_ERR__COUNT] = {
    ERR(API_ERR_UNAUTHORIZED, 401, "UNAUTHORIZED", "A valid x-api-key header is required."),
    ERR(API_ERR_INVALID_VIDEO_ID, 400, "invalid_video_id", "video_id must be 11 characters of A-Z, a-z, 0-9, _ or -."),
    ERR(API_ERR_INVALID_VIDEO_URL, 400, "invalid_video_url", "video_url is not a recognised video URL."),
    ERR(API_ERR_AMBIGUOUS_REQUEST, 400, "ambiguous_request", "Give exactly one of video_id and video_url."),
    ERR(API_ERR_INVALID_LANGUAGE, 400, "invalid_language", "language must match ^[a-z]{2,3}(?:-[a-zA-Z]{2,8})?$."),
    ERR(API_ERR_AMBIGUOUS_LANGUAGE, 400, "ambiguous_language", "Give at most one of language and lang."),
    ERR(API_ERR_NOT_AVAILABLE, 404, "transcript_not_available", "No accessible transcript was found for this video."),
    ERR(API_ERR_RATE_LIMITED, 429, "rate_limited", "Rate limit exceeded; retry after the time in Retry-After."),
    ERR(API_ERR_QUOTA_EXCEEDED, 429, "quota_exceeded", "The monthly quota of this API key is used up."),
    ERR(API_ERR_UPSTREAM_FAILED, 502, "upstream_transcript_failed",
        "The video platform did not return the transcript."),
    ERR(API_ERR_FETCH_FAILED, 500, "transcript_fetch_failed", "The transcript could not be fetched."),
    ERR(API_ERR_RATE_LIMIT_UNAVAILABLE, 503, "rate_limit_unavailable", "The rate-limit store is unavailable."),
    ERR(API_ERR_NOT_FOUND, 404, "not_found", "No such resource."),
    ERR(API_ERR_METHOD_NOT_ALLOWED, 405, "method_not_allowed", "Method not allowed for this resource."),
    ERR(API_ERR_BAD_REQUEST, 400, "bad_request", "Malformed HTTP request."),
    ERR(API_ERR_URI_TOO_LONG, 414, "uri_too_long", "The request line is too long."),
    ERR(API_ERR_HEADERS_TOO_LARGE, 431, "headers_too_large", "The request headers are too large."),
    ERR(API_ERR_PAYLOAD_TOO_LARGE, 413, "payload_too_large", "This endpoint takes no request body."),
    ERR(API_ERR_REQUEST_TIMEOUT, 408, "request_timeout", "The request headers took too long."),
    ERR(API_ERR_SERVICE_UNAVAILABLE, 503, "service_unavailable", "The service is not accepting requests now."),
    ERR(API_ERR_INVALID_FORMAT, 400, "bad_request", "format must be one of json, text, srt, vtt."),
    ERR(API_ERR_AMBIGUOUS_TRANSLATE, 400, "ambiguous_language", "Give translate at most once."),
    ERR(API_ERR_INVALID_TRANSLATE, 400, "invalid_language", "translate must match ^[a-z]{2,3}(?:-[a-zA-Z]{2,8})?$."),
    ERR(API_ERR_NOT_IMPLEMENTED, 501, "not_implemented", "This method is not implemented."),
};

const struct api_error_info *api_error_get(enum api_error e) {
  if (e <= API_OK || e >= API_ERR__COUNT) e = API_ERR_FETCH_FAILED;
  return &errors[e];
}
