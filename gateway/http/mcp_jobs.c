/* The job tools of the MCP endpoint (see mcp_jobs.h). */
#include "gateway/http/mcp_jobs.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <yajl/yajl_gen.h>

#include "common/buf.h"
#include "common/util.h"
#include "gateway/http/errors.h"
#include "gateway/http/jobs_api.h"
#include "gateway/http/jobsink.h"
#include "gateway/http/jsonshape.h"
#include "gateway/http/mcp_rpc.h"
#include "gateway/http/routes.h"

/* get_transcript_job's max_chars, as get_transcript's. */
#define MCP_JOBS_PAGE_DEFAULT_CHARS 20000
#define MCP_JOBS_PAGE_MIN_CHARS 1000
#define MCP_JOBS_PAGE_MAX_CHARS 100000
/* The most items a page asks the store for: max_chars ends it first unless the items are small. */
#define MCP_JOBS_PAGE_ITEMS 1000
/* A next_cursor of the items (the REST API's: a position in decimal). */
#define MCP_JOBS_CURSOR_DIGITS 19

/*
 * One call of a job tool across its steps: the limiter, then one jobs API request (start), or two (get: the status,
 * then a page of items), each answered into sink.
 */
struct jobs_tool_call {
  struct handlers_ctx *ctx;
  struct http_request *req;
  struct key_entry key; /* a copy: a key file reload may free the store meanwhile */
  enum jobs_op op;      /* the step under way */
  char id[MCP_ID_BYTES + 1];
  struct rl_decision rl; /* given back at the end: with Redis, even an unspent check may hold a unit */
  char rl_headers[RLCALC_HEADERS_BYTES];
  struct jobsink sink;
  struct buf body; /* start: the arguments as a job request's JSON */
  char job_id[ROUTE_ID_MAX + 1];
  char query[sizeof("cursor=&limit=") + MCP_JOBS_CURSOR_DIGITS + 8];
  size_t max_chars;
  /* What the step's answer was: a body (got), or a refusal (failed with err, msg, retry_s). */
  char *got;
  size_t got_len;
  int failed;
  enum api_error err;
  char msg[256];
  int64_t retry_s;
  char *job; /* get: the status answered by the first step, JSON */
  size_t job_len;
};

static struct jobs_tool_call *call_of(const struct jobsink *s) {
  return (struct jobs_tool_call *)(void *)((char *)(uintptr_t)s - offsetof(struct jobs_tool_call, sink));
}

static void call_free(struct jobs_tool_call *c) {
  ratelimit_refund(c->ctx->rl, &c->rl);
  http_request_release(c->req);
  buf_free(&c->body);
  free(c->got);
  free(c->job);
  free(c);
}

static void sink_answer(struct jobsink *s, int status, const char *headers, char *body, size_t len) {
  (void)status;
  (void)headers;
  struct jobs_tool_call *c = call_of(s);
  free(c->got);
  c->got = body;
  c->got_len = len;
}

static void sink_error(struct jobsink *s, enum api_error e, const char *message, const char *headers) {
  struct jobs_tool_call *c = call_of(s);
  c->failed = 1;
  c->err = e;
  util_copy_str(c->msg, sizeof(c->msg), message != NULL ? message : api_error_get(e)->message);
  c->retry_s = jobsink_retry_after(headers);
}

static int sink_gone(const struct jobsink *s) { return http_request_gone(call_of(s)->req); }

static void step_done(struct jobs_tool_call *c);

static void sink_end(struct jobsink *s) { step_done(call_of(s)); }

static const struct jobsink_ops sink_ops = {sink_answer, sink_error, sink_gone, sink_end};

/* The next step: a request of the jobs API whose answer comes to step_done (maybe before this returns). */
static void ask(struct jobs_tool_call *c, enum jobs_op op) {
  c->op = op;
  c->failed = 0;
  struct jobs_ask a = {.op = op,
                       .job_id = c->job_id,
                       .body = c->body.data,
                       .body_len = c->body.len,
                       .query = c->query,
                       .query_len = strlen(c->query),
                       .page_bytes = c->max_chars,
                       .request_id = c->req->request_id,
                       .decided = &c->rl};
  jobs_api_ask(c->ctx, &c->key, &a, &c->sink);
}

/* The value of the member name of the object v (a status or a job answer), NULL when absent. */
static yajl_val member(yajl_val v, const char *name) {
  const char *path[] = {name, NULL};
  return yajl_tree_get(v, path, yajl_t_any);
}

/* The result of start_transcript_job: the 202's body as structuredContent, and what to do next as text. */
static void answer_start(struct jobs_tool_call *c) {
  yajl_val v;
  /* An answer that does not parse has no members to read: the text says "?" for them and still carries the answer. */
  (void)jsonshape_tree(c->got, c->got_len, &v);
  yajl_val idv = member(v, "id"), total = member(v, "total");
  struct buf t = BUF_INIT;
  int rv = buf_printf(&t,
                      "Job %s is queued with %lld videos. Call get_transcript_job with job_id \"%s\" until its status "
                      "is done or cancelled; its items hold the transcripts, a page at a time (next_cursor).\n",
                      YAJL_IS_STRING(idv) ? YAJL_GET_STRING(idv) : "?",
                      YAJL_IS_INTEGER(total) ? (long long)YAJL_GET_INTEGER(total) : 0LL,
                      YAJL_IS_STRING(idv) ? YAJL_GET_STRING(idv) : "?");
  rv |= buf_append(&t, c->got, c->got_len);
  yajl_tree_free(v);
  if (rv != 0)
    mcp_rpc_error(c->req, 500, c->id, MCP_RPC_INTERNAL_ERROR, "Out of memory.");
  else
    mcp_rpc_tool_result(c->req, c->id, c->rl_headers, t.data, t.len, c->got, c->got_len, 0);
  buf_free(&t);
}

/*
 * The result of get_transcript_job: {"job": the status, "items": the page, "next_cursor"} as structuredContent, and
 * as text a line saying where the job is, then the same JSON.
 */
static void answer_get(struct jobs_tool_call *c) {
  struct buf s = BUF_INIT;
  /* The items' answer is {"items":[...],"next_cursor":...}: the job goes in front of its members. */
  int rv = c->got_len < 2 || c->got[0] != '{' ? -EPROTO : 0;
  if (rv == 0) {
    rv = buf_puts(&s, "{\"job\":") | buf_append(&s, c->job, c->job_len) | buf_puts(&s, ",") |
         buf_append(&s, c->got + 1, c->got_len - 1);
  }
  yajl_val v = NULL;
  if (rv == 0) (void)jsonshape_tree(c->job, c->job_len, &v);
  const char *counts_done[] = {"counts", "done", NULL}, *counts_failed[] = {"counts", "failed", NULL};
  yajl_val status = member(v, "status"), total = member(v, "total");
  yajl_val done = yajl_tree_get(v, counts_done, yajl_t_number), failed = yajl_tree_get(v, counts_failed, yajl_t_number);
  struct buf t = BUF_INIT;
  if (rv == 0) {
    rv = buf_printf(&t, "Job %s is %s: %lld of %lld videos done, %lld failed.\n", c->job_id,
                    YAJL_IS_STRING(status) ? YAJL_GET_STRING(status) : "?",
                    YAJL_IS_INTEGER(done) ? (long long)YAJL_GET_INTEGER(done) : 0LL,
                    YAJL_IS_INTEGER(total) ? (long long)YAJL_GET_INTEGER(total) : 0LL,
                    YAJL_IS_INTEGER(failed) ? (long long)YAJL_GET_INTEGER(failed) : 0LL);
    rv |= buf_append(&t, s.data, s.len);
  }
  yajl_tree_free(v);
  if (rv != 0)
    mcp_rpc_error(c->req, 500, c->id, MCP_RPC_INTERNAL_ERROR, "Out of memory.");
  else
    mcp_rpc_tool_result(c->req, c->id, c->rl_headers, t.data, t.len, s.data, s.len, 0);
  buf_free(&t);
  buf_free(&s);
}

/* A step's answer is in: the next step, or the tool's result (and the call's end). */
static void step_done(struct jobs_tool_call *c) {
  if (http_request_gone(c->req)) goto done;
  if (c->failed) {
    /* A malformed member is the caller's to fix: JSON-RPC's invalid params, as other tools' bad arguments. */
    if (api_error_get(c->err)->status == 400)
      mcp_rpc_error(c->req, 200, c->id, MCP_RPC_INVALID_PARAMS, c->msg);
    else
      mcp_rpc_tool_error(c->req, c->id, c->rl_headers, c->err, c->msg, c->retry_s);
    goto done;
  }
  if (c->got == NULL) {
    mcp_rpc_tool_error(c->req, c->id, c->rl_headers, API_ERR_SERVICE_UNAVAILABLE, NULL, 0);
    goto done;
  }
  if (c->op == JOBS_CREATE) {
    answer_start(c);
    goto done;
  }
  if (c->op == JOBS_GET) {
    c->job = c->got;
    c->job_len = c->got_len;
    c->got = NULL;
    ask(c, JOBS_ITEMS); /* its answer comes back here, which ends the call */
    return;
  }
  answer_get(c);
done:
  call_free(c);
}

static void on_rate_decided(void *arg, const struct rl_decision *d) {
  struct jobs_tool_call *c = arg;
  c->rl = *d;
  if (http_request_gone(c->req)) {
    call_free(c);
    return;
  }
  rlcalc_headers(d, c->rl_headers, sizeof(c->rl_headers));
  enum api_error e = jobs_api_refusal(d, c->op);
  if (e != API_OK) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t retry = e == API_ERR_QUOTA_EXCEEDED ? d->quota_reset - (int64_t)now.tv_sec : d->retry_after;
    mcp_rpc_tool_error(c->req, c->id, c->rl_headers, e, NULL, retry);
    call_free(c);
    return;
  }
  ask(c, c->op);
}

static struct jobs_tool_call *call_new(struct handlers_ctx *ctx, struct http_request *req, const struct key_entry *key,
                                       const char *id, enum jobs_op op) {
  struct jobs_tool_call *c = calloc(1, sizeof(*c));
  if (c == NULL) {
    mcp_rpc_error(req, 500, id, MCP_RPC_INTERNAL_ERROR, "Out of memory.");
    return NULL;
  }
  c->ctx = ctx;
  c->req = req;
  c->key = *key;
  c->op = op;
  c->sink.ops = &sink_ops;
  util_copy_str(c->id, sizeof(c->id), id);
  return c;
}

/* Counts the call in the key's short window (no unit of the month), then runs its first step. */
static void call_begin(struct jobs_tool_call *c) {
  http_request_hold(c->req);
  ratelimit_check_unspent(c->ctx->rl, &c->key, on_rate_decided, c);
}

/* v as JSON text into g (arguments are nested at most as deep as jsonshape_ok let the message be). */
static void gen_value(yajl_gen g, yajl_val v) {
  if (YAJL_IS_STRING(v)) {
    const char *s = YAJL_GET_STRING(v);
    yajl_gen_string(g, (const unsigned char *)s, strlen(s));
  } else if (YAJL_IS_NUMBER(v)) {
    const char *n = YAJL_GET_NUMBER(v);
    yajl_gen_number(g, n, strlen(n));
  } else if (YAJL_IS_OBJECT(v)) {
    yajl_gen_map_open(g);
    for (size_t i = 0; i < v->u.object.len; i++) {
      const char *k = v->u.object.keys[i];
      yajl_gen_string(g, (const unsigned char *)k, strlen(k));
      gen_value(g, v->u.object.values[i]);
    }
    yajl_gen_map_close(g);
  } else if (YAJL_IS_ARRAY(v)) {
    yajl_gen_array_open(g);
    for (size_t i = 0; i < v->u.array.len; i++) gen_value(g, v->u.array.values[i]);
    yajl_gen_array_close(g);
  } else if (YAJL_IS_TRUE(v) || YAJL_IS_FALSE(v)) {
    yajl_gen_bool(g, YAJL_IS_TRUE(v));
  } else {
    yajl_gen_null(g);
  }
}

int mcp_jobs_start(struct handlers_ctx *ctx, struct http_request *req, const struct key_entry *key, const char *id,
                   yajl_val args) {
  struct jobs_tool_call *c = call_new(ctx, req, key, id, JOBS_CREATE);
  if (c == NULL) return 0;
  /* The arguments are a job request's members: the jobs API reads them as it reads POST /v1/jobs's body. */
  yajl_gen g = yajl_gen_alloc(NULL);
  int rv = g != NULL ? 0 : -ENOMEM;
  if (rv == 0) {
    if (args != NULL) {
      gen_value(g, args);
    } else {
      yajl_gen_map_open(g);
      yajl_gen_map_close(g);
    }
    const unsigned char *p;
    size_t n;
    rv = yajl_gen_get_buf(g, &p, &n) == yajl_gen_status_ok && buf_append(&c->body, p, n) == 0 ? 0 : -ENOMEM;
  }
  if (g != NULL) yajl_gen_free(g);
  if (rv != 0) {
    mcp_rpc_error(req, 500, id, MCP_RPC_INTERNAL_ERROR, "Out of memory.");
    buf_free(&c->body);
    free(c);
    return 0;
  }
  call_begin(c);
  return 0;
}

/* Reads get_transcript_job's arguments into c. Returns NULL, or the -32602 message naming the argument. */
static const char *read_get_args(struct jobs_tool_call *c, yajl_val args) {
  yajl_val job_id = NULL, max_chars = NULL, cursor = NULL;
  size_t n = args != NULL ? args->u.object.len : 0;
  for (size_t i = 0; i < n; i++) {
    const char *k = args->u.object.keys[i];
    yajl_val *slot = strcmp(k, "job_id") == 0      ? &job_id
                     : strcmp(k, "max_chars") == 0 ? &max_chars
                     : strcmp(k, "cursor") == 0    ? &cursor
                                                   : NULL;
    if (slot == NULL) return "get_transcript_job takes job_id, max_chars and cursor only.";
    if (*slot != NULL) return "an argument is given twice.";
    *slot = args->u.object.values[i];
  }
  const char *s = YAJL_IS_STRING(job_id) ? YAJL_GET_STRING(job_id) : NULL;
  size_t len = s != NULL ? strlen(s) : 0;
  int ok = len > 0 && len <= ROUTE_ID_MAX;
  for (size_t i = 0; ok && i < len; i++)
    ok = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
         s[i] == '-';
  if (!ok) return "job_id is required: the id start_transcript_job gave.";
  memcpy(c->job_id, s, len + 1);
  c->max_chars = MCP_JOBS_PAGE_DEFAULT_CHARS;
  if (max_chars != NULL) {
    if (!YAJL_IS_INTEGER(max_chars) || YAJL_GET_INTEGER(max_chars) < MCP_JOBS_PAGE_MIN_CHARS ||
        YAJL_GET_INTEGER(max_chars) > MCP_JOBS_PAGE_MAX_CHARS)
      return "max_chars must be an integer from 1000 to 100000.";
    c->max_chars = (size_t)YAJL_GET_INTEGER(max_chars);
  }
  const char *cur = cursor != NULL ? (YAJL_IS_STRING(cursor) ? YAJL_GET_STRING(cursor) : "") : NULL;
  size_t cl = cur != NULL ? strlen(cur) : 0;
  ok = cur == NULL || (cl > 0 && cl <= MCP_JOBS_CURSOR_DIGITS);
  for (size_t i = 0; ok && i < cl; i++) ok = cur[i] >= '0' && cur[i] <= '9';
  if (!ok) return "cursor is not a next_cursor of this job (call again without cursor).";
  if (cur != NULL)
    snprintf(c->query, sizeof(c->query), "cursor=%s&limit=%d", cur, MCP_JOBS_PAGE_ITEMS);
  else
    snprintf(c->query, sizeof(c->query), "limit=%d", MCP_JOBS_PAGE_ITEMS);
  return NULL;
}

int mcp_jobs_get(struct handlers_ctx *ctx, struct http_request *req, const struct key_entry *key, const char *id,
                 yajl_val args) {
  struct jobs_tool_call *c = call_new(ctx, req, key, id, JOBS_GET);
  if (c == NULL) return 0;
  const char *bad = read_get_args(c, args);
  if (bad != NULL) {
    mcp_rpc_refuse_args(req, id, bad);
    free(c);
    return 0;
  }
  call_begin(c);
  return 0;
}
