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
#include "gateway/http/chapterlist.h"
#include "gateway/http/chunks.h"
#include "gateway/http/dispatch_client.h"
#include "gateway/http/errors.h"
#include "gateway/http/jobs_api.h"
#include "gateway/http/mcp.h"
#include "gateway/http/negotiate.h"
#include "gateway/http/query.h"
#include "gateway/http/render.h"
#include "gateway/http/routes.h"
#include "gateway/metrics/metrics.h"
#include "proto/proto.h"

extern const unsigned char openapi_json[];
extern const size_t openapi_json_len;

/* Three X-RateLimit lines and a Retry-After line, each well under 48 bytes. */
/* The rate-limit lines, then ETag (~50), Cache-Control (~45), Vary (~25) and Content-Encoding (~25). */
#define ANSWER_HEADERS_BYTES (RLCALC_HEADERS_BYTES + 192)

/*
 * The state of one transcript or tracks request across its asynchronous steps (rate limit, dispatch). Both endpoints
 * share the key, the limits, the video rules and the errors; they differ in the job's kind and the parameters read.
 */
struct transcript {
  struct handlers_ctx *ctx;
  struct http_request *req;
  struct key_entry key;  /* a copy: a key file reload may free the store meanwhile */
  struct rl_decision rl; /* holds the month's unit reserved at admission until the answer is known */
  char rl_headers[RLCALC_HEADERS_BYTES];
  enum render_format format; /* of a 200; errors are always JSON */
  uint8_t kind;              /* PROTO_KIND_CAPTIONS, PROTO_KIND_TRACKS or PROTO_KIND_METADATA */
  /* The query, read once when the request arrives; its 400 (query_error) is answered after the limiter. */
  struct transcript_query q;
  enum api_error query_error;
  struct proto_job job; /* what the query asks, as the dispatcher and the caches see it (when query_error is API_OK) */
  /* A revalidation the worker already matched: the entity or validator it matched (a reference), else NULL, and
   * the form and ETag it matched. */
  struct entity *ent;
  enum entity_coding ent_coding;
  char ent_etag[ENTITY_ETAG_BYTES];
  /* format=chunks: the transcript body (a copy) while the video's chapters are asked for, with that job. */
  char *chunk_src;
  size_t chunk_src_len;
  struct proto_job chapters_job;
};

/* Answers 200 with the JSON body built in b (taking it), or 503 when building it failed (rv != 0). */
static void respond_built(struct http_request *req, struct buf *b, int rv) {
  if (rv != 0) {
    buf_free(b);
    http_respond_error(req, API_ERR_SERVICE_UNAVAILABLE, NULL);
    return;
  }
  size_t len = 0;
  char *body = buf_steal(b, &len);
  http_respond(req, 200, NULL, body, len, body);
}

/* The Vary of a transcript or track list: Accept too when it chose the format (no format parameter). */
static const char *answer_vary(const struct transcript *t) {
  return t->kind == PROTO_KIND_CAPTIONS && !t->q.format_given ? "Vary: Accept, Accept-Encoding\r\n"
                                                              : "Vary: Accept-Encoding\r\n";
}

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
  respond_built(req, &b, rv);
}

/*
 * Readiness, apart from /health (liveness, whose answer the contract fixes): 200 once a fetcher is connected to this
 * gateway's dispatcher, 503 service_unavailable before, when a transcript request could only wait for its deadline.
 */
static void handle_ready(struct handlers_ctx *ctx, struct http_request *req) {
  (void)ctx;
  int64_t fetchers = metrics_fetchers_connected();
  if (fetchers <= 0) {
    http_respond_error(req, API_ERR_SERVICE_UNAVAILABLE, NULL);
    return;
  }
  struct buf b = BUF_INIT;
  respond_built(req, &b, buf_printf(&b, "{\"status\":\"ready\",\"fetchers\":%lld}", (long long)fetchers));
}

static void handle_openapi(struct handlers_ctx *ctx, struct http_request *req) {
  (void)ctx;
  http_respond(req, 200, NULL, (const char *)openapi_json, openapi_json_len, NULL);
}

/*
 * Every answer but a 200 with a transcript, a client gone included, gives the reserved month's unit back: before the
 * answer is written (transcript_error, respond_not_modified), so the client's next request, on any worker, finds it
 * back; here for a client gone.
 */
static void transcript_free(struct transcript *t) {
  ratelimit_refund(t->ctx->rl, &t->rl);
  http_request_release(t->req);
  entity_unref(t->ent);
  free(t->chunk_src);
  free(t);
}

static void transcript_error(struct transcript *t, enum api_error e) {
  ratelimit_refund(t->ctx->rl, &t->rl);
  http_respond_error(t->req, e, t->rl_headers);
}

/* Picks the form of ent for req's Accept-Encoding and writes its ETag; returns whether If-None-Match names it. */
static int choose_form(const struct http_request *req, const struct entity *ent, enum entity_coding *coding,
                       char etag[ENTITY_ETAG_BYTES]) {
  unsigned held = 0;
  for (int c = 0; c < ENTITY_CODINGS; c++)
    if (entity_has(ent, (enum entity_coding)c)) held |= NEGOTIATE_BIT(c);
  *coding = negotiate_coding(req->accept_encoding, req->accept_encoding_len, held);
  entity_etag(ent, *coding, etag);
  return entity_etag_match(req->if_none_match, req->if_none_match_len, etag);
}

/*
 * Answers a transcript from its entity: the form the request's Accept-Encoding picks, or 304 when If-None-Match
 * named that form's ETag before the limiter (revalidation). An entity that came back from the dispatcher is always
 * a 200 with its unit spent: that revalidation may have made the platform work (If-None-Match: * on a video never
 * fetched), so it is an ordinary request. The body is the final public JSON, serialised once by the fetcher and
 * compressed once by this worker; the connection writes it by reference, never a copy.
 */
static void respond_entity(struct transcript *t, struct entity *ent) {
  struct http_request *req = t->req;
  enum entity_coding coding;
  char etag[ENTITY_ETAG_BYTES];
  int notmod;
  if (ent == t->ent) {
    /* Matched already, before the limiter. */
    coding = t->ent_coding;
    memcpy(etag, t->ent_etag, sizeof(etag));
    notmod = 1;
  } else {
    choose_form(req, ent, &coding, etag);
    notmod = 0;
  }
  uint64_t now = util_now_ms();
  uint64_t max_age_s = ent->expires_ms > now ? (ent->expires_ms - now) / 1000 : 0;
  const char *name = entity_coding_name(coding);
  char headers[ANSWER_HEADERS_BYTES];
  struct strb h = strb_init(headers, sizeof(headers));
  strb_puts(&h, t->rl_headers);
  strb_puts(&h, "ETag: ");
  strb_puts(&h, etag);
  strb_puts(&h, "\r\nCache-Control: private, max-age=");
  strb_u64(&h, max_age_s);
  strb_puts(&h, "\r\n");
  strb_puts(&h, answer_vary(t));
  if (name != NULL && !notmod) {
    strb_puts(&h, "Content-Encoding: ");
    strb_puts(&h, name);
    strb_puts(&h, "\r\n");
  }
  if (notmod) {
    /* Counted in the short window, not against the month: checked without a unit (ratelimit_check_unspent). */
    http_respond(req, 304, headers, NULL, 0, NULL);
    return;
  }
  const struct entity_form *f = &ent->form[coding];
  if (f->data == NULL) {
    /* A validator holds no body; it is only ever asked for the 304 it matched. */
    transcript_error(t, API_ERR_FETCH_FAILED);
    return;
  }
  http_respond_ref(req, 200, headers, f->data, f->len, f->fd, entity_release, entity_ref(ent));
  t->rl.reserved_in = RL_STORE_NONE; /* delivered: the unit stays spent */
}

/*
 * A 304 the dispatcher decided: the answer was in its cache and If-None-Match named its ETag. Nothing was fetched, so
 * the unit reserved goes back (the request is not delivered); the window counted it, as it counts a 304 decided here.
 */
static void respond_not_modified(struct transcript *t, const struct proto_result *res) {
  char headers[ANSWER_HEADERS_BYTES];
  struct strb h = strb_init(headers, sizeof(headers));
  strb_puts(&h, t->rl_headers);
  strb_puts(&h, "ETag: ");
  strb_puts(&h, res->etag);
  strb_puts(&h, "\r\nCache-Control: private, max-age=");
  strb_u64(&h, res->cache_ms / 1000);
  strb_puts(&h, "\r\n");
  strb_puts(&h, answer_vary(t));
  ratelimit_refund(t->ctx->rl, &t->rl);
  http_respond(t->req, 304, headers, NULL, 0, NULL);
}

/* A 200 rendered here (format=chunks with its chapter cuts, or a transcript format other than JSON). */
static void respond_rendered(struct transcript *t, const char *json, size_t json_len, const int64_t *cuts,
                             size_t ncuts) {
  struct buf b = BUF_INIT;
  int rv = t->q.chunks ? chunks_render(json, json_len, t->q.chunk_chars, t->q.chunk_overlap, cuts, ncuts, &b)
                       : render_transcript(t->format, json, json_len, &b);
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
  char headers[ANSWER_HEADERS_BYTES];
  struct strb h = strb_init(headers, sizeof(headers));
  strb_puts(&h, t->rl_headers);
  if (!t->q.format_given) strb_puts(&h, "Vary: Accept\r\n");
  http_respond_typed(t->req, 200, render_content_type(t->format), headers, body, len, body);
  t->rl.reserved_in = RL_STORE_NONE; /* delivered: the unit stays spent */
}

/*
 * A 200. JSON (a transcript's own bytes or a track list) goes out from its entity, by reference; another format is
 * rendered here from the JSON body, so the caches hold one body whatever the format.
 */
static void respond_ok(struct transcript *t, const struct proto_result *res, struct entity *ent) {
  if (t->format == RENDER_JSON && !t->q.chunks) {
    if (ent != NULL)
      respond_entity(t, ent);
    else
      transcript_error(t, API_ERR_FETCH_FAILED);
    return;
  }
  respond_rendered(t, res->body, res->body_len, NULL, 0);
}

/*
 * A 502 the fetcher knows the end of (every egress resting, or translations), or a 503 of the dispatcher's queue:
 * Retry-After, in seconds, after the rate-limit lines (neither carries the limiter's own Retry-After, which only its
 * 429 and 503 have).
 */
static void upstream_retry_after(struct transcript *t, uint32_t seconds) {
  if (seconds == 0) return;
  size_t len = strlen(t->rl_headers);
  struct strb b = {t->rl_headers, sizeof(t->rl_headers), len, 1};
  strb_puts(&b, "Retry-After: ");
  strb_u64(&b, seconds);
  strb_puts(&b, "\r\n");
  if (!b.ok) t->rl_headers[len] = '\0'; /* never half a header line */
}

/* The answer of a job that brought no 200: its outcome's status, with the error that says it. */
static void respond_failure(struct transcript *t, const struct proto_result *res) {
  if (res == NULL) {
    transcript_error(t, API_ERR_FETCH_FAILED);
    return;
  }
  switch (proto_outcome_status(res->outcome)) {
    case 404:
      transcript_error(t, api_error_not_available(res->reason));
      break;
    case 502:
      upstream_retry_after(t, res->retry_after_s);
      transcript_error(t, API_ERR_UPSTREAM_FAILED);
      break;
    case 503:
      /* Shed by the dispatcher: its queue could not serve this in time; Retry-After says when it expects room. */
      upstream_retry_after(t, res->retry_after_s);
      transcript_error(t, API_ERR_SERVICE_UNAVAILABLE);
      break;
    default:
      transcript_error(t, API_ERR_FETCH_FAILED);
      break;
  }
}

/* The chapters of a format=chunks request's video: the chunks are cut at them. */
static void on_chapters(void *arg, const struct proto_result *res, struct entity *ent) {
  struct transcript *t = arg;
  (void)ent;
  if (http_request_gone(t->req)) goto done;
  if (res == NULL || proto_outcome_status(res->outcome) != 200 || res->notmod) {
    respond_failure(t, res);
    goto done;
  }
  int64_t *cuts = NULL;
  size_t ncuts = 0;
  if (chapterlist_starts(res->body, res->body_len, &cuts, &ncuts) != 0) {
    log_msg(LOG_WARN, "chapters not read", "request_id", t->req->request_id, NULL);
    transcript_error(t, API_ERR_FETCH_FAILED);
    goto done;
  }
  respond_rendered(t, t->chunk_src, t->chunk_src_len, cuts, ncuts);
  free(cuts);
done:
  transcript_free(t);
}

/*
 * A transcript cut into chunks never lets one cross a chapter: the video's metadata with its chapters is asked for
 * (cached like any metadata: one platform request a video, and none once cached), the transcript kept meanwhile.
 * Returns 0 when the chapters' callback owns t, or -ENOMEM.
 */
static int chunks_ask_chapters(struct transcript *t, const struct proto_result *res) {
  t->chunk_src = malloc(res->body_len > 0 ? res->body_len : 1);
  if (t->chunk_src == NULL) return -ENOMEM;
  memcpy(t->chunk_src, res->body, res->body_len);
  t->chunk_src_len = res->body_len;
  struct proto_job *job = &t->chapters_job;
  job->kind = PROTO_KIND_METADATA;
  job->include = PROTO_INCLUDE_CHAPTERS;
  job->deadline_ms = t->job.deadline_ms;
  memcpy(job->video_id, t->job.video_id, sizeof(job->video_id));
  memcpy(job->request_id, t->job.request_id, sizeof(job->request_id));
  return dispatch_submit(job, on_chapters, t) == 0 ? 0 : -ENOMEM;
}

static void on_dispatched(void *arg, const struct proto_result *res, struct entity *ent) {
  struct transcript *t = arg;
  if (http_request_gone(t->req)) goto done;
  if (res != NULL && proto_outcome_status(res->outcome) == 200 && res->notmod) {
    respond_not_modified(t, res);
  } else if (res != NULL && proto_outcome_status(res->outcome) == 200 && t->q.chunks) {
    if (chunks_ask_chapters(t, res) == 0) return;
    transcript_error(t, API_ERR_FETCH_FAILED);
  } else if (res != NULL && proto_outcome_status(res->outcome) == 200) {
    respond_ok(t, res, ent);
  } else {
    respond_failure(t, res);
  }
done:
  transcript_free(t);
}

static void on_rate_decided(void *arg, const struct rl_decision *d) {
  struct transcript *t = arg;
  struct http_request *req = t->req;
  t->rl = *d;
  if (http_request_gone(req)) goto done;
  rlcalc_headers(d, t->rl_headers, sizeof(t->rl_headers));
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

  if (t->ent != NULL) {
    respond_entity(t, t->ent);
    goto done;
  }
  if (t->query_error != API_OK) {
    transcript_error(t, t->query_error);
    goto done;
  }
  /* From here the dispatch callback owns t and the request's hold (it may run before dispatch_submit returns). */
  if (dispatch_submit(&t->job, on_dispatched, t) == 0) return;
  transcript_error(t, API_ERR_FETCH_FAILED);
done:
  transcript_free(t);
}

/*
 * Reads the query once: the parameters' 400 (kept for after the limiter), the format of a 200 (the parameter's, else
 * the Accept header's; a track list is JSON only) and the job it asks for.
 */
static void read_query(struct transcript *t) {
  struct http_request *req = t->req;
  struct transcript_query *q = &t->q;
  const char *qs = req->query != NULL ? req->query : "";
  t->query_error = t->kind == PROTO_KIND_CAPTIONS   ? query_parse_transcript(qs, req->query_len, q)
                   : t->kind == PROTO_KIND_METADATA ? query_parse_metadata(qs, req->query_len, q)
                                                    : query_parse_tracks(qs, req->query_len, q);
  if (t->query_error != API_OK) return;
  if (t->kind == PROTO_KIND_CAPTIONS)
    t->format = q->format_given ? q->format : render_format_from_accept(req->accept, req->accept_len);
  struct proto_job *job = &t->job;
  job->kind = t->kind;
  job->include = q->chapters ? PROTO_INCLUDE_CHAPTERS : 0;
  job->deadline_ms = (uint32_t)t->ctx->cfg->job_timeout_ms;
  memcpy(job->video_id, q->video_id, sizeof(job->video_id));
  util_copy_str(job->lang, sizeof(job->lang), q->lang);
  util_copy_str(job->translate, sizeof(job->translate), q->translate);
  util_copy_str(job->request_id, sizeof(job->request_id), req->request_id);
}

/*
 * A JSON answer this worker can revalidate from what it knows (the body in L1, or the validator kept as long as the
 * dispatcher keeps the answer): the entity whose form the request's If-None-Match names, or NULL. Decided before the
 * limiter so that the 304 is answered without the dispatcher; bad parameters and other formats take the usual path.
 */
static struct entity *revalidation(struct transcript *t) {
  if (t->query_error != API_OK || t->format != RENDER_JSON || t->q.chunks) return NULL;
  char key[PROTO_MAX_JOB_KEY + 1];
  proto_job_key(&t->job, key);
  struct entity *ent = dispatch_cached(t->job.video_id, key);
  if (ent != NULL && choose_form(t->req, ent, &t->ent_coding, t->ent_etag)) return ent;
  entity_unref(ent);
  return NULL;
}

/*
 * Unlike a jobs call (jobs_begin), a video request reads its query and its If-None-Match before the key is checked: a
 * revalidation the worker's cache already matches is answered 304 and spends no unit of the month.
 */
static void handle_video(struct handlers_ctx *ctx, struct http_request *req, uint8_t kind) {
  const struct key_entry *key = appctx_authorize(ctx, req);
  if (key == NULL) return;
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
  read_query(t);
  if (req->if_none_match != NULL) t->ent = revalidation(t);
  /* Not known here: the dispatcher decides it when its cache holds the answer (a "*" is an ordinary request). */
  if (req->if_none_match != NULL && t->ent == NULL && t->query_error == API_OK && t->format == RENDER_JSON &&
      req->if_none_match_len <= PROTO_MAX_INM && memchr(req->if_none_match, '"', req->if_none_match_len) != NULL) {
    t->job.inm = req->if_none_match;
    t->job.inm_len = (uint32_t)req->if_none_match_len;
  }
  /* A revalidation matched already is answered 304: it spends nothing of the month. */
  if (t->ent != NULL)
    ratelimit_check_unspent(ctx->rl, &t->key, on_rate_decided, t);
  else
    ratelimit_check(ctx->rl, &t->key, on_rate_decided, t);
}

static void handle_transcript(struct handlers_ctx *ctx, struct http_request *req) {
  handle_video(ctx, req, PROTO_KIND_CAPTIONS);
}

static void handle_tracks(struct handlers_ctx *ctx, struct http_request *req) {
  handle_video(ctx, req, PROTO_KIND_TRACKS);
}

static void handle_metadata(struct handlers_ctx *ctx, struct http_request *req) {
  handle_video(ctx, req, PROTO_KIND_METADATA);
}

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* The sums of every process's slot, on the metrics listener. */
static void handle_metrics(struct handlers_ctx *ctx, struct http_request *req) {
  (void)ctx;
  struct buf b = BUF_INIT;
  if (metrics_render(&b) != 0) {
    buf_free(&b);
    http_respond_error(req, API_ERR_SERVICE_UNAVAILABLE, NULL);
    return;
  }
  size_t len = 0;
  char *body = buf_steal(&b, &len);
  http_respond_typed(req, 200, METRICS_CONTENT_TYPE, NULL, body, len, body);
}

typedef void route_handler(struct handlers_ctx *ctx, struct http_request *req);

static route_handler *const handlers[ROUTE_OTHER] = {
#define ROUTE_HANDLER_(id, path, methods, server, handler) [ROUTE_##id] = handler,
    HTTP_ROUTES(ROUTE_HANDLER_)
#undef ROUTE_HANDLER_
};

/*
 * Whether a route's handler decides on the request's head, before its body is read (http_request_read_body), so that
 * a refusal costs no byte of the body. Every other route that reads a body gets it whole, read first.
 */
static int decides_on_head(route_handler *h) { return h == handle_jobs_create; }

static void on_body_read(void *arg, struct http_request *req, int status) {
  if (status == 0) handlers[req->route](arg, req);
  http_request_release(req);
}

/* The route table's decision for a request that came to the listener server. */
static void serve(struct handlers_ctx *ctx, struct http_request *req, enum route_server server) {
  enum http_route r = req->route;
  if (!route_served_by(r, server)) {
    http_respond_error(req, API_ERR_NOT_FOUND, NULL);
    return;
  }
  if (!route_allows(r, req->method)) {
    char allow[ROUTE_ALLOW_BYTES];
    http_respond_error(req, API_ERR_METHOD_NOT_ALLOWED, route_allow_header(r, allow, sizeof(allow)));
    return;
  }
  /* A route that reads no body: once the path and method exist (404 and 405 come first), a body is 413. */
  if (req->has_body) {
    http_respond_error(req, API_ERR_PAYLOAD_TOO_LARGE, NULL);
    return;
  }
  if (req->body_waiting && !decides_on_head(handlers[r])) {
    http_request_hold(req);
    if (http_request_read_body(req, on_body_read, ctx) != 0) http_request_release(req);
    return;
  }
  handlers[r](ctx, req);
}

void handlers_request(void *app, struct http_request *req) { serve(app, req, ROUTE_SERVER_PUBLIC); }

void handlers_metrics_request(void *app, struct http_request *req) { serve(app, req, ROUTE_SERVER_METRICS); }
