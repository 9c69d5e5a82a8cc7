#include "gateway/http/handlers.h"

#include <errno.h>
#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/http/dispatch_client.h"
#include "gateway/http/errors.h"
#include "gateway/http/query.h"
#include "gateway/http/render.h"
#include "proto/proto.h"

extern const unsigned char openapi_json[];
extern const size_t openapi_json_len;

#define ALLOW_HEADER "Allow: GET, HEAD\r\n"
/* Three X-RateLimit lines and a Retry-After line, each well under 48 bytes. */
#define RL_HEADERS_BYTES 192

/*
 * The state of one transcript or tracks request across its asynchronous steps (rate limit, dispatch). Both endpoints
 * share the key, the limits, the video rules and the errors; they differ in the job's kind and the parameters read.
 */
struct transcript {
  struct handlers_ctx *ctx;
  struct http_request *req;
  struct key_entry key;  /* a copy: a key file reload may free the store meanwhile */
  struct rl_decision rl; /* holds the month's unit reserved at admission until the answer is known */
  char rl_headers[RL_HEADERS_BYTES];
  enum render_format format; /* of a 200; errors are always JSON */
  uint8_t kind;              /* PROTO_KIND_CAPTIONS or PROTO_KIND_TRACKS */
};

static void handle_health(struct handlers_ctx *ctx, struct http_request *req) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  char ts[40];
  util_rfc3339(ts, sizeof(ts), (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000);
  uint64_t up_ms = util_now_ms() - ctx->started_ms;

  struct buf b = BUF_INIT;
  int rv = buf_puts(&b, "{\"environment\":\"");
  rv |= buf_json_escape(&b, ctx->cfg->env, strlen(ctx->cfg->env));
  rv |= buf_printf(&b,
                   "\",\"nodeVersion\":\"libuv/%s\",\"rateLimitProvider\":\"%s\",\"service\":\"api\","
                   "\"status\":\"ok\",\"timestamp\":\"%s\",\"uptime\":%llu.%03u,\"version\":\"%s\","
                   "\"speechFallbackEnabled\":%s}",
                   uv_version_string(), ratelimit_provider(ctx->cfg), ts, (unsigned long long)(up_ms / 1000),
                   (unsigned)(up_ms % 1000), VTS_VERSION, ctx->cfg->speech_fallback ? "true" : "false");
  if (rv != 0) {
    buf_free(&b);
    http_respond_error(req, API_ERR_SERVICE_UNAVAILABLE, NULL);
    return;
  }
  size_t len = 0;
  char *body = buf_steal(&b, &len);
  http_respond(req, 200, NULL, body, len, body);
}

static void handle_openapi(struct handlers_ctx *ctx, struct http_request *req) {
  (void)ctx;
  http_respond(req, 200, NULL, (const char *)openapi_json, openapi_json_len, NULL);
}

/* Every answer but a 200 with a transcript, a client gone included, gives the reserved month's unit back. */
static void transcript_free(struct transcript *t) {
  ratelimit_refund(t->ctx->rl, &t->rl);
  http_request_release(t->req);
  free(t);
}

static void transcript_error(struct transcript *t, enum api_error e) { http_respond_error(t->req, e, t->rl_headers); }

/*
 * A 200: the body is the final public JSON, serialised once by the fetcher, so JSON is a copy of its bytes, never
 * re-encoded; another format is rendered from them here, so the caches hold one body whatever the format.
 */
static void respond_ok(struct transcript *t, const struct proto_result *res) {
  struct buf b = BUF_INIT;
  int rv = t->format == RENDER_JSON ? buf_append(&b, res->body, res->body_len)
                                    : render_transcript(t->format, res->body, res->body_len, &b);
  if (rv == 0 && b.data == NULL) rv = buf_reserve(&b, 1); /* an empty text still needs memory to own */
  if (rv != 0) {
    log_msg(LOG_WARN, "transcript not rendered", "request_id", t->req->request_id, "error",
            rv == -EPROTO ? "not a transcript body" : "no memory", NULL);
    buf_free(&b);
    transcript_error(t, API_ERR_FETCH_FAILED);
    return;
  }
  size_t len = 0;
  char *body = buf_steal(&b, &len);
  http_respond_typed(t->req, 200, render_content_type(t->format), t->rl_headers, body, len, body);
  t->rl.reserved_in = RL_STORE_NONE; /* delivered: the unit stays spent */
}

static void on_dispatched(void *arg, const struct proto_result *res) {
  struct transcript *t = arg;
  if (http_request_gone(t->req)) goto done;
  if (res == NULL) {
    transcript_error(t, API_ERR_FETCH_FAILED);
    goto done;
  }
  switch (proto_outcome_status(res->outcome)) {
    case 200:
      respond_ok(t, res);
      break;
    case 404:
      transcript_error(t, API_ERR_NOT_AVAILABLE);
      break;
    case 502:
      transcript_error(t, API_ERR_UPSTREAM_FAILED);
      break;
    default:
      transcript_error(t, API_ERR_FETCH_FAILED);
      break;
  }
done:
  transcript_free(t);
}

static void format_rl_headers(struct transcript *t, const struct rl_decision *d) {
  int n = snprintf(t->rl_headers, sizeof(t->rl_headers),
                   "X-RateLimit-Limit: %lld\r\nX-RateLimit-Remaining: %lld\r\nX-RateLimit-Reset: %lld\r\n",
                   (long long)d->limit, (long long)(d->remaining > 0 ? d->remaining : 0), (long long)d->reset);
  if (d->outcome == RL_LIMITED || d->outcome == RL_UNAVAILABLE) {
    int64_t ra = d->retry_after >= 1 ? d->retry_after : 1;
    snprintf(t->rl_headers + n, sizeof(t->rl_headers) - (size_t)n, "Retry-After: %lld\r\n", (long long)ra);
  }
}

static void on_rate_decided(void *arg, const struct rl_decision *d) {
  struct transcript *t = arg;
  struct http_request *req = t->req;
  t->rl = *d;
  if (http_request_gone(req)) goto done;
  format_rl_headers(t, d);
  switch (d->outcome) {
    case RL_ALLOW:
      break;
    case RL_LIMITED:
      transcript_error(t, API_ERR_RATE_LIMITED);
      goto done;
    case RL_QUOTA:
      transcript_error(t, API_ERR_QUOTA_EXCEEDED);
      goto done;
    default:
      transcript_error(t, API_ERR_RATE_LIMIT_UNAVAILABLE);
      goto done;
  }

  struct transcript_query q;
  const char *qs = req->query != NULL ? req->query : "";
  enum api_error qe = t->kind == PROTO_KIND_TRACKS ? query_parse_tracks(qs, req->query_len, &q)
                                                   : query_parse_transcript(qs, req->query_len, &q);
  if (qe != API_OK) {
    transcript_error(t, qe);
    goto done;
  }
  /* The track list is JSON only; a transcript's format is the parameter's, else the Accept header's. */
  if (t->kind == PROTO_KIND_CAPTIONS)
    t->format = q.format_given ? q.format : render_format_from_accept(req->accept, req->accept_len);
  struct proto_job job;
  memset(&job, 0, sizeof(job));
  job.kind = t->kind;
  job.deadline_ms = (uint32_t)t->ctx->cfg->job_timeout_ms;
  memcpy(job.video_id, q.video_id, sizeof(job.video_id));
  snprintf(job.lang, sizeof(job.lang), "%s", q.lang);
  snprintf(job.translate, sizeof(job.translate), "%s", q.translate);
  snprintf(job.request_id, sizeof(job.request_id), "%s", req->request_id);
  /* From here the dispatch callback owns t and the request's hold (it may run before dispatch_submit returns). */
  if (dispatch_submit(&job, on_dispatched, t) == 0) return;
  transcript_error(t, API_ERR_FETCH_FAILED);
done:
  transcript_free(t);
}

static void handle_video(struct handlers_ctx *ctx, struct http_request *req, uint8_t kind) {
  const struct key_entry *key = NULL;
  if (req->key_state == HTTP_KEY_PRESENT) key = keystore_lookup(ctx->keys, req->api_key, req->api_key_len);
  if (key == NULL) {
    http_respond_error(req, API_ERR_UNAUTHORIZED, NULL);
    return;
  }
  snprintf(req->key_id, sizeof(req->key_id), "%s", key->name);
  struct transcript *t = calloc(1, sizeof(*t));
  if (t == NULL) {
    http_respond_error(req, API_ERR_SERVICE_UNAVAILABLE, NULL);
    return;
  }
  t->ctx = ctx;
  t->req = req;
  t->kind = kind;
  t->key = *key;
  http_request_hold(req);
  ratelimit_check(ctx->rl, &t->key, on_rate_decided, t);
}

static void handle_transcript(struct handlers_ctx *ctx, struct http_request *req) {
  handle_video(ctx, req, PROTO_KIND_CAPTIONS);
}

static void handle_tracks(struct handlers_ctx *ctx, struct http_request *req) {
  handle_video(ctx, req, PROTO_KIND_TRACKS);
}

struct route {
  const char *path;
  void (*handle)(struct handlers_ctx *ctx, struct http_request *req);
};

static const struct route routes[] = {
    {"/health", handle_health},
    {"/openapi.json", handle_openapi},
    {"/v1/video/transcript", handle_transcript},
    {"/v1/video/tracks", handle_tracks},
};

void handlers_request(void *app, struct http_request *req) {
  struct handlers_ctx *ctx = app;
  for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
    const struct route *r = &routes[i];
    if (strlen(r->path) != req->path_len || memcmp(r->path, req->path, req->path_len) != 0) continue;
    if (req->method != HTTP_GET && req->method != HTTP_HEAD) {
      http_respond_error(req, API_ERR_METHOD_NOT_ALLOWED, ALLOW_HEADER);
      return;
    }
    r->handle(ctx, req);
    return;
  }
  http_respond_error(req, API_ERR_NOT_FOUND, NULL);
}
