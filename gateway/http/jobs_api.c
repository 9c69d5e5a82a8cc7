/* The batch jobs' routes of a worker (see jobs_api.h). */
#include "gateway/http/jobs_api.h"
#include "gateway/http/jobreq.h"
#include "gateway/http/jobsink.h"

#include <errno.h>
#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/percent.h"
#include "common/util.h"
#include "common/whsig.h"
#include "gateway/http/dispatch_client.h"
#include "gateway/http/idfold.h"
#include "gateway/http/render.h"
#include "gateway/http/routes.h"
#include "gateway/jobs/jobjson.h"
#include "gateway/jobs/jobstore.h"
#include "gateway/jobs/storeq.h"

/* Three X-RateLimit lines and a Retry-After line, each well under 48 bytes. */
/* The rate-limit lines and a Location line. */
#define JOBS_HEADERS_BYTES (RLCALC_HEADERS_BYTES + 64)
/* The default and the largest page of GET /v1/jobs/{id}/items. */
#define JOBS_PAGE_DEFAULT 100
#define JOBS_PAGE_MAX 1000
/*
 * The most calls a worker keeps with its job store's thread: past them (a store that stopped answering) a jobs
 * request is 503 jobs_unavailable at once instead of waiting behind the others.
 */
#define JOBS_STORE_CALLS_MAX 64
/*
 * One jobs request across the limiter's answer (and, for a playlist or channel, across its first page's reading),
 * answered into sink: the REST request's own (http), or the sink of the front that asked (jobs_api_ask).
 */
struct jobs_call {
  struct handlers_ctx *ctx;
  struct jobsink *sink;
  struct jobsink_http http;
  struct http_request *req; /* a REST request: its head and body are read here; NULL for jobs_api_ask */
  const char *request_id;
  const char *body; /* JOBS_CREATE: the request's JSON, once read */
  size_t body_len;
  const char *query; /* JOBS_ITEMS: cursor and limit */
  size_t query_len;
  size_t page_bytes; /* JOBS_ITEMS: 0, or the most bytes a page of items takes (past its first item) */
  enum jobs_op op;
  struct key_entry key; /* a copy: a key file reload may free the store meanwhile */
  char job_id[ROUTE_ID_MAX + 1];
  struct rl_decision rl; /* given back when done (its own check): with Redis, even an unspent check may hold a unit */
  char rl_headers[RLCALC_HEADERS_BYTES];
  struct job_request jr; /* JOBS_CREATE of a playlist or channel: the request while its first page is read */
  /* The store's call: its inputs, set on the loop before it is queued; its results, written by the store's thread in
   * the call's work and read on the loop in its done (storeq.h). */
  int store_rv;
  size_t open_jobs, stored;
  struct jobstore_job job;
  struct buf page; /* JOBS_ITEMS: the page of items, built on the store's thread */
  int page_failed; /* no memory, or a stored answer that is not a transcript */
  int64_t after, limit, next;
  char source[sizeof("playlist:") + VTS_PLAYLIST_ID_MAX];
  char *continuation; /* JOBS_CREATE of a list: the rest to read ("" for none); NULL for a job of ids */
  char new_id[JOBSTORE_ID_LEN + 1];
  char secret[WHSIG_SECRET_LEN + 1];
  int64_t created_ms;
};

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct storeq *jobs_api_queue(struct handlers_ctx *ctx) {
  if (ctx->jobsq != NULL) return ctx->jobsq;
  char err[256] = "";
  if (storeq_open(ctx->loop, ctx->cfg, VTS_JOBS_REDIS_TIMEOUT_MS, &ctx->jobsq, err, sizeof(err)) != 0) {
    log_msg(LOG_ERROR, "job store unavailable", "error", err, NULL);
    ctx->jobsq = NULL;
  }
  return ctx->jobsq;
}

/* ---- answers ---- */

static void respond_error(struct jobs_call *c, enum api_error e) {
  c->sink->ops->error(c->sink, e, NULL, c->rl_headers);
}

/* A 400 (or another refusal) with msg naming what was bad; msg "" is e's own message. */
static void respond_error_msg(struct jobs_call *c, enum api_error e, const char *msg) {
  c->sink->ops->error(c->sink, e, msg[0] != '\0' ? msg : NULL, c->rl_headers);
}

static void respond_buf(struct jobs_call *c, int status, const char *headers, struct buf *b) {
  if (b->data == NULL && buf_reserve(b, 1) != 0) {
    respond_error(c, API_ERR_SERVICE_UNAVAILABLE);
    return;
  }
  size_t len = 0;
  char *body = buf_steal(b, &len);
  c->sink->ops->answer(c->sink, status, headers, body, len);
}

static void store_error(struct jobs_call *c, int rv) {
  if (rv == -ENOENT) {
    respond_error(c, API_ERR_JOB_NOT_FOUND);
    return;
  }
  char code[16];
  snprintf(code, sizeof(code), "%d", rv);
  log_msg(LOG_ERROR, "job store failed", "request_id", c->request_id, "error", code, NULL);
  respond_error(c, API_ERR_JOBS_UNAVAILABLE);
}

static void jobs_call_end(struct jobs_call *c);

/*
 * Runs work(js, c) on the store's thread, then done(c) on the loop, which owns c from here (and ends it). A store
 * that cannot be opened, or that holds JOBS_STORE_CALLS_MAX calls already, is 503 jobs_unavailable at once.
 */
static void store_call(struct jobs_call *c, storeq_work_fn work, storeq_done_fn done) {
  struct storeq *q = jobs_api_queue(c->ctx);
  int rv = q == NULL ? -EIO : storeq_depth(q) >= JOBS_STORE_CALLS_MAX ? -EBUSY : storeq_call(q, work, done, c);
  if (rv == 0) return;
  if (rv == -EBUSY) log_msg(LOG_WARN, "job store busy", "request_id", c->request_id, NULL);
  respond_error(c, API_ERR_JOBS_UNAVAILABLE);
  jobs_call_end(c);
}

/* Runs on the store's thread: the job of c->jr made (its webhook's secret drawn first). */
static void create_work(struct jobstore *js, void *arg) {
  struct jobs_call *c = arg;
  const struct job_request *jr = &c->jr;
  /* The secret signs every delivery of the job's webhook: the client sees it in this answer only. */
  int rv = jr->webhook_url[0] != '\0' && whsig_secret_new(c->secret, sizeof(c->secret)) != 0 ? -EIO : 0;
  static const char *const format_names[] = {"json", "text", "srt", "vtt"};
  struct jobstore_spec spec = {.key_id = c->key.name,
                               .language = jr->language,
                               .translate = jr->translate,
                               .format = format_names[jr->format],
                               .webhook_url = jr->webhook_url,
                               .webhook_secret = c->secret,
                               .source = c->source,
                               .continuation = c->continuation,
                               .max_items = (size_t)jr->cap,
                               .max_open = (size_t)c->ctx->cfg->jobs_max_open,
                               .max_stored = (size_t)c->ctx->cfg->jobs_max_stored_items};
  c->created_ms = wall_ms();
  if (rv == 0)
    rv = jobstore_create(js, &spec, (const char(*)[VTS_VIDEO_ID_LEN + 1]) jr->ids, jr->n, c->created_ms, c->new_id);
  c->store_rv = rv;
}

/* The job made: 202 with it, or why not. */
static void create_done(void *arg) {
  struct jobs_call *c = arg;
  int rv = c->store_rv;
  size_t n = c->jr.n;
  if (c->sink->ops->gone(c->sink)) goto done;
  if (rv == -EDQUOT) {
    respond_error(c, API_ERR_TOO_MANY_JOBS);
    goto done;
  }
  if (rv == -ENOSPC) {
    char msg[JOBREQ_MSG_BYTES];
    snprintf(msg, sizeof(msg),
             "This API key's jobs would keep more than %lld items (VTS_JOBS_MAX_STORED_ITEMS), ended jobs included "
             "until they expire.",
             (long long)c->ctx->cfg->jobs_max_stored_items);
    respond_error_msg(c, API_ERR_TOO_MANY_STORED, msg);
    goto done;
  }
  if (rv != 0) {
    store_error(c, rv == -ENOENT ? -EIO : rv);
    goto done;
  }
  const char *id = c->new_id;
  struct buf b = BUF_INIT;
  int brv = buf_printf(&b, "{\"id\":\"%s\",\"status\":\"queued\",\"total\":%zu", id, n);
  brv |= jobjson_time(&b, "created", c->created_ms);
  /* At most this many of its items can get a transcript now: each holds a unit before the platform is asked. */
  brv |=
      buf_printf(&b, ",\"quota_remaining\":%lld", (long long)(c->rl.quota_remaining > 0 ? c->rl.quota_remaining : 0));
  if (c->secret[0] != '\0') brv |= buf_printf(&b, ",\"webhook_secret\":\"%s\"", c->secret);
  brv |= buf_puts(&b, "}");
  if (brv != 0) {
    buf_free(&b);
    respond_error(c, API_ERR_SERVICE_UNAVAILABLE);
    goto done;
  }
  char headers[JOBS_HEADERS_BYTES];
  snprintf(headers, sizeof(headers), "%sLocation: /v1/jobs/%s\r\n", c->rl_headers, id);
  char total[24];
  snprintf(total, sizeof(total), "%zu", n);
  log_msg(LOG_INFO, "job accepted", "request_id", c->request_id, "job_id", id, "key_id", c->key.name, "=items", total,
          "source", c->source, "more", c->continuation != NULL && c->continuation[0] != '\0' ? "yes" : "no", NULL);
  respond_buf(c, 202, headers, &b);
  /* The dispatcher's runner starts it now, not at the store's next poll. A full counter is a wake-up already due. */
  if (c->ctx->jobs_made_fd >= 0) {
    uint64_t one = 1;
    if (write(c->ctx->jobs_made_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
      log_msg(LOG_WARN, "the dispatcher was not told of a new job", "error", strerror(errno), NULL);
  }
done:
  jobs_call_end(c);
}

/* Creates the job of c->jr from source (a list's rest in c->continuation) and answers 202 with it; owns c. */
static void create_and_answer(struct jobs_call *c, const char *source) {
  util_copy_str(c->source, sizeof(c->source), source);
  store_call(c, create_work, create_done);
}

/* The end of a jobs request: the limiter's hold given back, the sink ended. */
static void jobs_call_end(struct jobs_call *c) {
  ratelimit_refund(c->ctx->rl, &c->rl);
  c->sink->ops->end(c->sink);
  free(c->jr.ids);
  free(c->continuation);
  buf_free(&c->page);
  free(c);
}

/* The 404 of a playlist or channel whose first page said why it cannot be read. */
static enum api_error browse_not_available(uint8_t reason) {
  switch (reason) {
    case PROTO_REASON_PLAYLIST_MISSING:
      return API_ERR_NOT_AVAILABLE_PLAYLIST_MISSING;
    case PROTO_REASON_PLAYLIST_PRIVATE:
      return API_ERR_NOT_AVAILABLE_PLAYLIST_PRIVATE;
    case PROTO_REASON_PLAYLIST_UNVIEWABLE:
      return API_ERR_NOT_AVAILABLE_PLAYLIST_UNVIEWABLE;
    case PROTO_REASON_CHANNEL_MISSING:
      return API_ERR_NOT_AVAILABLE_CHANNEL_MISSING;
    case PROTO_REASON_CHANNEL_REMOVED:
      return API_ERR_NOT_AVAILABLE_CHANNEL_REMOVED;
    default:
      return API_ERR_NOT_AVAILABLE;
  }
}

/*
 * The first page of a playlist or channel, read by a fetcher within the request's deadline: its ids (folded, at
 * most the job's cap) make the job, and its continuation is kept for the runner to read the rest in the background.
 * A refusal is the transcript endpoint's answer: 404 with the case, 502 (with Retry-After when the platform gave
 * one), 503 with Retry-After (shed: the dispatcher's queue could not read it in time), 500.
 */
static void on_first_page(void *arg, const struct proto_result *res, struct entity *ent) {
  (void)ent;
  struct jobs_call *c = arg;
  struct job_request *jr = &c->jr;
  if (c->sink->ops->gone(c->sink)) goto done;
  int status = res != NULL ? proto_outcome_status(res->outcome) : 500;
  struct proto_browse_page page;
  if (status == 200 && proto_browse_read(res->body, res->body_len, &page) != 0) status = 500;
  if (status == 404) {
    respond_error(c, browse_not_available(res->reason));
    goto done;
  }
  if (status == 502 || status == 503) {
    size_t len = strlen(c->rl_headers);
    struct strb h = {c->rl_headers, sizeof(c->rl_headers), len, 1};
    if (res->retry_after_s > 0) {
      strb_puts(&h, "Retry-After: ");
      strb_u64(&h, res->retry_after_s);
      strb_puts(&h, "\r\n");
      if (!h.ok) c->rl_headers[len] = '\0';
    }
    respond_error(c, status == 503 ? API_ERR_SERVICE_UNAVAILABLE : API_ERR_UPSTREAM_FAILED);
    goto done;
  }
  if (status != 200) {
    respond_error(c, API_ERR_FETCH_FAILED);
    goto done;
  }
  jr->ids = calloc(page.n + 1, sizeof(*jr->ids));
  unsigned char *dup = malloc(page.n + 1);
  char *next = malloc(page.token_len + 1);
  if (jr->ids == NULL || dup == NULL || next == NULL) {
    free(dup);
    free(next);
    respond_error(c, API_ERR_SERVICE_UNAVAILABLE);
    goto done;
  }
  for (size_t i = 0; i < page.n; i++) {
    memcpy(jr->ids[i], page.ids + i * (VTS_VIDEO_ID_LEN + 1), VTS_VIDEO_ID_LEN);
    jr->ids[i][VTS_VIDEO_ID_LEN] = '\0';
  }
  if (idfold_mark((const char(*)[VTS_VIDEO_ID_LEN + 1]) jr->ids, page.n, dup) != 0) {
    free(dup);
    free(next);
    respond_error(c, API_ERR_SERVICE_UNAVAILABLE);
    goto done;
  }
  for (size_t i = 0; i < page.n && (int64_t)jr->n < jr->cap; i++) {
    if (dup[i]) continue;
    if (jr->n != i) memcpy(jr->ids[jr->n], jr->ids[i], sizeof(jr->ids[0]));
    jr->n++;
  }
  free(dup);
  /* The rest of the list is read only while the job may hold more. */
  memcpy(next, page.token, page.token_len);
  next[(int64_t)jr->n < jr->cap ? page.token_len : 0] = '\0';
  if (jr->n == 0 && next[0] == '\0') {
    free(next);
    respond_error(c, API_ERR_NOT_AVAILABLE_NO_VIDEOS);
    goto done;
  }
  char source[sizeof(c->source)];
  snprintf(source, sizeof(source), "%s:%s", jr->playlist[0] ? "playlist" : "channel",
           jr->playlist[0] ? jr->playlist : jr->channel);
  c->continuation = next;
  create_and_answer(c, source);
  return;
done:
  jobs_call_end(c);
}

/* Asks the dispatcher for the first page of jr's playlist or channel. Returns 0 (on_first_page owns c), or -1. */
static int read_first_page(struct jobs_call *c) {
  struct job_request *jr = &c->jr;
  const char *target = jr->playlist[0] ? jr->playlist : jr->channel;
  struct proto_job job = {.kind = PROTO_KIND_BROWSE,
                          .deadline_ms = (uint32_t)c->ctx->cfg->job_timeout_ms,
                          .browse_what = jr->playlist[0] ? PROTO_BROWSE_PLAYLIST : PROTO_BROWSE_CHANNEL,
                          .browse = target,
                          .browse_len = (uint32_t)strlen(target)};
  util_copy_str(job.request_id, sizeof(job.request_id), c->request_id);
  return dispatch_submit(&job, on_first_page, c) == 0 ? 0 : -1;
}

/* The body of POST /v1/jobs, read: the request, then the job (or its playlist's or channel's first page); owns c. */
static void jobs_create_body(struct jobs_call *c) {
  struct job_request *jrp = &c->jr;
  jrp->format = RENDER_JSON;
  char msg[JOBREQ_MSG_BYTES];
  enum api_error e = jobreq_read(c->ctx->cfg, c->body, c->body_len, jrp, msg);
  if (e != API_OK) {
    respond_error_msg(c, e, msg);
    jobs_call_end(c);
    return;
  }
  if (jrp->playlist[0] != '\0' || jrp->channel[0] != '\0') {
    if (read_first_page(c) == 0) return; /* the first page's callback owns c */
    respond_error(c, API_ERR_FETCH_FAILED);
    jobs_call_end(c);
    return;
  }
  create_and_answer(c, "video_ids");
}

static void on_job_body(void *arg, struct http_request *req, int status) {
  struct jobs_call *c = arg;
  if (status != 0) {
    jobs_call_end(c); /* the server answered a body that did not come */
    return;
  }
  c->body = req->body;
  c->body_len = req->body_len;
  jobs_create_body(c);
}

/* Whether the head of a REST POST /v1/jobs names a body it cannot have (then answered 415). */
static int refuse_media_type(struct jobs_call *c) {
  const struct http_request *req = c->req;
  /* RFC 9110 15.5.16: a body of another media type, or in a content coding we do not read, is 415. */
  static const char json[] = "application/json";
  size_t jl = sizeof(json) - 1;
  const char *ct = req->content_type;
  size_t ctl = req->content_type_len;
  int json_type = ct != NULL && ctl >= jl && strncasecmp(ct, json, jl) == 0 &&
                  (ctl == jl || ct[jl] == ';' || ct[jl] == ' ' || ct[jl] == '\t');
  if (!json_type || req->content_encoded) {
    /* The message names what came, so a client sees its own mistake; its bytes are the client's, kept printable. */
    char msg[160];
    char got[64];
    size_t n = 0;
    for (size_t i = 0; ct != NULL && i < ctl && n + 1 < sizeof(got); i++)
      got[n++] = ct[i] >= 0x20 && ct[i] < 0x7f && ct[i] != '"' && ct[i] != '\\' ? ct[i] : '?';
    got[n] = '\0';
    if (json_type)
      snprintf(msg, sizeof(msg), "The request body must be application/json without a Content-Encoding.");
    else if (ct == NULL)
      snprintf(msg, sizeof(msg), "The request body must be application/json; got no Content-Type.");
    else
      snprintf(msg, sizeof(msg), "The request body must be application/json; got %s%s.", got, n < ctl ? "..." : "");
    respond_error_msg(c, API_ERR_UNSUPPORTED_MEDIA_TYPE, msg);
    return 1;
  }
  return 0;
}

/* Runs on the store's thread: how many of the key's jobs are open. */
static void open_jobs_work(struct jobstore *js, void *arg) {
  struct jobs_call *c = arg;
  c->store_rv = jobstore_open_jobs(js, c->key.name, &c->open_jobs);
}

/* The cap of open jobs checked: 429, or the body read (or taken) and the job made. */
static void open_jobs_done(void *arg) {
  struct jobs_call *c = arg;
  struct http_request *req = c->req;
  int rv = c->store_rv;
  if (c->sink->ops->gone(c->sink)) {
    jobs_call_end(c);
    return;
  }
  if (rv == 0 && (int64_t)c->open_jobs >= c->ctx->cfg->jobs_max_open) rv = -EDQUOT;
  if (rv != 0) {
    if (rv == -EDQUOT)
      respond_error(c, API_ERR_TOO_MANY_JOBS);
    else
      store_error(c, rv == -ENOENT ? -EIO : rv);
    jobs_call_end(c);
    return;
  }
  if (req != NULL && req->body_waiting) {
    if (http_request_read_body(req, on_job_body, c) != 0) jobs_call_end(c); /* answered already, or gone */
    return;
  }
  if (req != NULL) {
    c->body = req->body;
    c->body_len = req->body_len;
  }
  jobs_create_body(c);
}

/*
 * POST /v1/jobs once its head is in and the key and its window passed: what the head decides (the media type, the
 * cap of open jobs) is answered before a byte of the body is read. Owns c.
 */
static void jobs_create(struct jobs_call *c) {
  if (c->req != NULL && refuse_media_type(c)) {
    jobs_call_end(c);
    return;
  }
  store_call(c, open_jobs_work, open_jobs_done);
}

/* Runs on the store's thread: the job (cancelled first for a DELETE). */
static void get_work(struct jobstore *js, void *arg) {
  struct jobs_call *c = arg;
  int rv = 0;
  if (c->op == JOBS_CANCEL) {
    size_t n = 0;
    rv = jobstore_cancel(js, c->key.name, c->job_id, wall_ms(), &n);
  }
  if (rv == 0) rv = jobstore_get(js, c->key.name, c->job_id, &c->job);
  c->store_rv = rv;
}

static void get_done(void *arg) {
  struct jobs_call *c = arg;
  struct buf b = BUF_INIT;
  if (c->sink->ops->gone(c->sink))
    ;
  else if (c->store_rv != 0)
    store_error(c, c->store_rv);
  else if (jobjson_status(&b, &c->job, NULL) != 0)
    respond_error(c, API_ERR_SERVICE_UNAVAILABLE);
  else
    respond_buf(c, 200, c->rl_headers, &b);
  buf_free(&b);
  jobs_call_end(c);
}

/* The walk of one page of items into the answer. */
struct items_walk {
  struct buf *b;
  enum render_format format;
  size_t n;
  size_t within; /* 0, or the most bytes the page takes: an item past them (not the first) ends it */
  int failed;    /* no memory, or a stored answer that is not a transcript */
};

static int item_json(void *arg, const struct jobstore_item *it) {
  struct items_walk *w = arg;
  struct buf *b = w->b;
  /* A page holds at least one item, and stops at VTS_MAX_JOBS_PAGE_BYTES: the client follows next_cursor. */
  if (w->n > 0 && b->len >= VTS_MAX_JOBS_PAGE_BYTES) return JOBSTORE_PAGE_FULL;
  size_t before = b->len;
  int rv = buf_printf(b, "%s{\"video_id\":\"%s\",\"status\":\"%s\"", w->n++ > 0 ? "," : "", it->video_id,
                      jobstore_item_status_name(it->status));
  if (it->status == ITEM_DONE && it->body != NULL) {
    rv |= buf_puts(b, ",\"transcript\":");
    if (w->format == RENDER_JSON) {
      rv |= buf_append(b, it->body, it->body_len);
    } else {
      struct buf r = BUF_INIT;
      int rr = render_transcript(w->format, it->body, it->body_len, &r);
      rv |= rr;
      rv |= buf_puts(b, "\"");
      if (rr == 0) rv |= buf_json_escape(b, r.data != NULL ? r.data : "", r.len);
      rv |= buf_puts(b, "\"");
      buf_free(&r);
    }
  } else if (it->status == ITEM_FAILED) {
    const char *code = it->error_code != NULL ? it->error_code : "transcript_fetch_failed";
    const char *m = it->error_message != NULL ? it->error_message : "";
    rv |= buf_puts(b, ",\"error\":{\"code\":\"");
    rv |= buf_json_escape(b, code, strlen(code));
    rv |= buf_puts(b, "\",\"message\":\"");
    rv |= buf_json_escape(b, m, strlen(m));
    rv |= buf_puts(b, "\"}");
  }
  rv |= buf_puts(b, "}");
  if (rv != 0) w->failed = 1;
  if (rv == 0 && w->within > 0 && w->n > 1 && b->len > w->within) {
    /* Past the bound: the page ends before this item, which the next page starts with. */
    b->len = before;
    w->n--;
    return JOBSTORE_PAGE_FULL;
  }
  return rv != 0 ? -ENOMEM : 0;
}

/*
 * The items' query: cursor (a next_cursor we gave: the position after which the page starts, in decimal) and limit.
 * A repeated or malformed one is 400; unknown parameters are ignored.
 */
static enum api_error read_items_query(const char *qs, size_t len, int64_t *after, int64_t *limit) {
  *after = 0;
  *limit = JOBS_PAGE_DEFAULT;
  int seen_cursor = 0, seen_limit = 0;
  size_t i = 0;
  while (i < len) {
    size_t end = i;
    while (end < len && qs[end] != '&') end++;
    const char *eq = memchr(qs + i, '=', end - i);
    size_t nlen = eq != NULL ? (size_t)(eq - (qs + i)) : end - i;
    const char *val = eq != NULL ? eq + 1 : qs + end;
    size_t vlen = (size_t)(qs + end - val);
    char v[32];
    long dl = percent_decode(val, vlen, v, sizeof(v) - 1, PERCENT_PLUS_IS_SPACE);
    int is_cursor = nlen == 6 && memcmp(qs + i, "cursor", 6) == 0;
    int is_limit = nlen == 5 && memcmp(qs + i, "limit", 5) == 0;
    if (is_cursor) {
      if (seen_cursor++ || dl <= 0 || util_parse_i64_n(v, (size_t)dl, 1, INT64_MAX, after) != 0)
        return API_ERR_INVALID_CURSOR;
    } else if (is_limit) {
      if (seen_limit++ || dl <= 0 || util_parse_i64_n(v, (size_t)dl, 1, JOBS_PAGE_MAX, limit) != 0)
        return API_ERR_INVALID_LIMIT;
    }
    i = end + 1;
  }
  return API_OK;
}

/* Runs on the store's thread: the job (for its format), then one page of its items into c->page. */
static void items_work(struct jobstore *js, void *arg) {
  struct jobs_call *c = arg;
  int rv = jobstore_get(js, c->key.name, c->job_id, &c->job);
  if (rv != 0) {
    c->store_rv = rv;
    return;
  }
  struct items_walk w = {.b = &c->page, .format = RENDER_JSON, .within = c->page_bytes};
  if (c->job.format[0] != '\0') render_format_from_name(c->job.format, strlen(c->job.format), &w.format);
  rv = buf_puts(&c->page, "{\"items\":[");
  if (rv == 0) rv = jobstore_items(js, c->key.name, c->job_id, c->after, (size_t)c->limit, item_json, &w, &c->next);
  if (rv == 0)
    rv = c->next > 0 ? buf_printf(&c->page, "],\"next_cursor\":\"%lld\"}", (long long)c->next)
                     : buf_puts(&c->page, "],\"next_cursor\":null}");
  c->page_failed = w.failed;
  c->store_rv = rv;
}

static void items_done(void *arg) {
  struct jobs_call *c = arg;
  int rv = c->store_rv;
  if (c->sink->ops->gone(c->sink))
    ;
  else if (rv != 0 && (c->page_failed || rv == -ENOMEM))
    respond_error(c, API_ERR_SERVICE_UNAVAILABLE);
  else if (rv != 0)
    store_error(c, rv);
  else
    respond_buf(c, 200, c->rl_headers, &c->page);
  jobs_call_end(c);
}

/* GET /v1/jobs/{id}/items: its query checked here, the page read on the store's thread. Owns c. */
static void jobs_items(struct jobs_call *c) {
  enum api_error e = read_items_query(c->query != NULL ? c->query : "", c->query_len, &c->after, &c->limit);
  if (e != API_OK) {
    respond_error(c, e);
    jobs_call_end(c);
    return;
  }
  store_call(c, items_work, items_done);
}

/*
 * The key's own use, as this request's check saw it: the month (units used and left, when it starts again), the short
 * window (this request counted), and what its jobs hold (open jobs, stored items) against their caps.
 */
static void usage_work(struct jobstore *js, void *arg) {
  struct jobs_call *c = arg;
  int rv = jobstore_open_jobs(js, c->key.name, &c->open_jobs);
  if (rv == 0) rv = jobstore_stored_items(js, c->key.name, &c->stored);
  c->store_rv = rv;
}

static void usage_answer(struct jobs_call *c) {
  const struct rl_decision *d = &c->rl;
  const struct vts_config *cfg = c->ctx->cfg;
  size_t open_jobs = c->open_jobs, stored = c->stored;
  if (c->store_rv != 0) {
    store_error(c, c->store_rv == -ENOENT ? -EIO : c->store_rv);
    return;
  }
  struct rl_limits lim;
  rlcalc_limits(&c->key, cfg, &lim);
  int64_t left = d->quota_remaining > 0 ? d->quota_remaining : 0;
  struct buf b = BUF_INIT;
  int brv = buf_printf(&b, "{\"month\":{\"quota\":%lld,\"used\":%lld,\"remaining\":%lld", (long long)d->quota_limit,
                       (long long)(d->quota_limit - left), (long long)left);
  brv |= jobjson_time(&b, "reset", d->quota_reset * 1000);
  brv |= buf_printf(&b, "},\"window\":{\"limit\":%lld,\"seconds\":%lld,\"remaining\":%lld", (long long)d->limit,
                    (long long)lim.window_s, (long long)d->remaining);
  brv |= jobjson_time(&b, "reset", d->reset * 1000);
  brv |= buf_printf(&b, "},\"open_jobs\":{\"count\":%zu,\"max\":%lld},\"stored_items\":{\"count\":%zu,\"max\":%lld}}",
                    open_jobs, (long long)cfg->jobs_max_open, stored, (long long)cfg->jobs_max_stored_items);
  if (brv != 0) {
    buf_free(&b);
    respond_error(c, API_ERR_SERVICE_UNAVAILABLE);
    return;
  }
  respond_buf(c, 200, c->rl_headers, &b);
}

static void usage_done(void *arg) {
  struct jobs_call *c = arg;
  if (!c->sink->ops->gone(c->sink)) usage_answer(c);
  jobs_call_end(c);
}

/* ---- the common path: key, window, store ---- */

enum api_error jobs_api_refusal(const struct rl_decision *d, enum jobs_op op) {
  /* A month used up refuses a new job (its items could only fail), never reading or cancelling the jobs made. */
  if (d->outcome == RL_ALLOW || (d->outcome == RL_QUOTA && op != JOBS_CREATE)) return API_OK;
  return d->outcome == RL_LIMITED ? API_ERR_RATE_LIMITED
         : d->outcome == RL_QUOTA ? API_ERR_QUOTA_EXCEEDED
                                  : API_ERR_RATE_LIMIT_UNAVAILABLE;
}

/* The store's part of a call whose key and window passed, on the store's thread; owns c. */
static void jobs_run(struct jobs_call *c) {
  switch (c->op) {
    case JOBS_CREATE:
      jobs_create(c);
      break;
    case JOBS_GET:
    case JOBS_CANCEL:
      store_call(c, get_work, get_done);
      break;
    case JOBS_ITEMS:
      jobs_items(c);
      break;
    case JOBS_USAGE:
      store_call(c, usage_work, usage_done);
      break;
  }
}

static void on_jobs_rate_decided(void *arg, const struct rl_decision *d) {
  struct jobs_call *c = arg;
  c->rl = *d;
  if (c->sink->ops->gone(c->sink)) {
    jobs_call_end(c);
    return;
  }
  rlcalc_headers(d, c->rl_headers, sizeof(c->rl_headers));
  enum api_error e = jobs_api_refusal(d, c->op);
  if (e != API_OK) {
    respond_error(c, e);
    jobs_call_end(c);
    return;
  }
  jobs_run(c);
}

/*
 * Every jobs route: the key (401), then the short window, counted once and spending no unit of the month
 * (ratelimit_check_unspent): a job's items pay the month one by one as their transcripts are delivered.
 */
static void jobs_begin(struct handlers_ctx *ctx, struct http_request *req, enum jobs_op op, enum http_route route) {
  const struct key_entry *key = appctx_authorize(ctx, req);
  if (key == NULL) return;
  struct jobs_call *c = calloc(1, sizeof(*c));
  if (c == NULL) {
    http_respond_error(req, API_ERR_SERVICE_UNAVAILABLE, NULL);
    return;
  }
  c->ctx = ctx;
  c->req = req;
  jobsink_http_init(&c->http, req);
  c->sink = &c->http.sink;
  c->request_id = req->request_id;
  c->query = req->query;
  c->query_len = req->query_len;
  c->op = op;
  c->key = *key;
  const char *id;
  size_t id_len;
  if (route_id(route, req->path, req->path_len, &id, &id_len) == 0) {
    memcpy(c->job_id, id, id_len);
    c->job_id[id_len] = '\0';
  }
  ratelimit_check_unspent(ctx->rl, &c->key, on_jobs_rate_decided, c);
}

void jobs_api_ask(struct handlers_ctx *ctx, const struct key_entry *key, const struct jobs_ask *a,
                  struct jobsink *sink) {
  struct jobs_call *c = calloc(1, sizeof(*c));
  if (c == NULL) {
    sink->ops->error(sink, API_ERR_SERVICE_UNAVAILABLE, NULL, "");
    sink->ops->end(sink);
    return;
  }
  c->ctx = ctx;
  c->sink = sink;
  c->request_id = a->request_id;
  c->body = a->body;
  c->body_len = a->body_len;
  c->query = a->query;
  c->query_len = a->query_len;
  c->page_bytes = a->page_bytes;
  c->op = a->op;
  c->key = *key;
  if (a->job_id != NULL) util_copy_str(c->job_id, sizeof(c->job_id), a->job_id);
  /* The caller's decision, its unit the caller's to give back. */
  c->rl = *a->decided;
  c->rl.reserved_in = RL_STORE_NONE;
  rlcalc_headers(&c->rl, c->rl_headers, sizeof(c->rl_headers));
  jobs_run(c);
}

void handle_jobs_create(struct handlers_ctx *ctx, struct http_request *req) {
  jobs_begin(ctx, req, JOBS_CREATE, ROUTE_JOBS);
}

void handle_job(struct handlers_ctx *ctx, struct http_request *req) {
  jobs_begin(ctx, req, req->method == HTTP_DELETE ? JOBS_CANCEL : JOBS_GET, ROUTE_JOB);
}

void handle_job_items(struct handlers_ctx *ctx, struct http_request *req) {
  jobs_begin(ctx, req, JOBS_ITEMS, ROUTE_JOB_ITEMS);
}

void handle_usage(struct handlers_ctx *ctx, struct http_request *req) { jobs_begin(ctx, req, JOBS_USAGE, ROUTE_USAGE); }
