/*
 * Batch jobs: the facade over the backends' table (see jobstore.h). It opens the first row of JOBSTORE_BACKENDS the
 * configuration selects, and does what every backend shares (a job's id, the answer compressed once); it names no
 * backend.
 */
#include "gateway/jobs/jobstore.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/util.h"

/* A handle: the backend's table and its own state. */
struct jobstore {
  const struct jobstore_ops *ops;
  void *self;
};

#define JOBSTORE_BACKEND_ROW(name) &jobstore_##name##_ops,
static const struct jobstore_ops *const backends[] = {JOBSTORE_BACKENDS(JOBSTORE_BACKEND_ROW)};
#undef JOBSTORE_BACKEND_ROW

/* The first backend the configuration selects; the table's last row is always selected. */
static const struct jobstore_ops *selected(const struct vts_config *cfg) {
  size_t n = sizeof(backends) / sizeof(backends[0]);
  for (size_t i = 0; i + 1 < n; i++)
    if (backends[i]->selected(cfg)) return backends[i];
  return backends[n - 1];
}

int jobstore_init(const struct vts_config *cfg, char *err, size_t errlen) {
  const struct jobstore_ops *ops = selected(cfg);
  return ops->init != NULL ? ops->init(cfg, err, errlen) : 0;
}

int jobstore_open_config(const struct vts_config *cfg, int timeout_ms, struct jobstore **out, char *err,
                         size_t errlen) {
  const struct jobstore_ops *ops = selected(cfg);
  struct jobstore *js = calloc(1, sizeof(*js));
  if (js == NULL) return -ENOMEM;
  int rv = ops->open(cfg, timeout_ms, &js->self, err, errlen);
  if (rv != 0) {
    free(js);
    return rv;
  }
  js->ops = ops;
  *out = js;
  return 0;
}

void jobstore_close(struct jobstore *js) {
  if (js == NULL) return;
  js->ops->close(js->self);
  free(js);
}

const char *jobstore_backend(const struct jobstore *js) { return js->ops->name; }

const char *jobstore_taker(const struct jobstore *js) { return js->ops->taker != NULL ? js->ops->taker(js->self) : ""; }

int jobstore_charges(const struct jobstore *js) { return js->ops->charges; }

int jobstore_create(struct jobstore *js, const struct jobstore_spec *spec,
                    const char (*video_ids)[VTS_VIDEO_ID_LEN + 1], size_t n, int64_t now_ms,
                    char id_out[JOBSTORE_ID_LEN + 1]) {
  if (n == 0 && (spec->continuation == NULL || spec->continuation[0] == '\0')) return -EINVAL;
  char rnd[13];
  int rv = util_random_hex(rnd, 6);
  if (rv != 0) return rv;
  /* The creation time first: ids sort as the jobs were made, which orders a round of the jobs' turns. */
  snprintf(id_out, JOBSTORE_ID_LEN + 1, "j%012" PRIx64 "%s", (uint64_t)now_ms & UINT64_C(0xffffffffffff), rnd);
  return js->ops->create(js->self, spec, video_ids, n, now_ms, id_out);
}

int jobstore_get(struct jobstore *js, const char *key_id, const char *job_id, struct jobstore_job *out) {
  return js->ops->get(js->self, key_id, job_id, out);
}

int jobstore_items(struct jobstore *js, const char *key_id, const char *job_id, int64_t after, size_t limit,
                   jobstore_item_fn fn, void *ctx, int64_t *next) {
  return js->ops->items(js->self, key_id, job_id, after, limit, fn, ctx, next);
}

int jobstore_cancel(struct jobstore *js, const char *key_id, const char *job_id, int64_t now_ms, size_t *n) {
  return js->ops->cancel(js->self, key_id, job_id, now_ms, n);
}

int jobstore_open_jobs(struct jobstore *js, const char *key_id, size_t *n) {
  return js->ops->open_jobs(js->self, key_id, n);
}

int jobstore_stored_items(struct jobstore *js, const char *key_id, size_t *n) {
  return js->ops->stored_items(js->self, key_id, n);
}

int jobstore_take(struct jobstore *js, int64_t now_ms, int64_t lease_ms, struct jobstore_task *out) {
  return js->ops->take(js->self, now_ms, lease_ms, NULL, out);
}

int jobstore_take_skip(struct jobstore *js, int64_t now_ms, int64_t lease_ms, const struct jobstore_skip *skip,
                       struct jobstore_task *out) {
  return js->ops->take(js->self, now_ms, lease_ms, skip, out);
}

/* The answer compressed once, whatever the backend: a zlib stream, its size before kept beside it. */
static int done_with(struct jobstore *js, const char *job_id, int64_t seq, const char *body, size_t len,
                     const struct jobstore_charge *charge, int64_t now_ms) {
  if (len > VTS_MAX_TRANSCRIPT_BYTES) return -EINVAL;
  uLongf zlen = compressBound((uLong)len);
  Bytef *z = malloc(zlen);
  if (!z) return -ENOMEM;
  if (compress2(z, &zlen, (const Bytef *)body, (uLong)len, 6) != Z_OK) {
    free(z);
    return -ENOMEM;
  }
  int rv = js->ops->done(js->self, job_id, seq, z, (size_t)zlen, len, charge, now_ms);
  free(z);
  return rv;
}

int jobstore_done(struct jobstore *js, const char *job_id, int64_t seq, const char *body, size_t len, int64_t now_ms) {
  return done_with(js, job_id, seq, body, len, NULL, now_ms);
}

int jobstore_done_charged(struct jobstore *js, const char *job_id, int64_t seq, const char *body, size_t len,
                          const struct jobstore_charge *charge, int64_t now_ms, enum jobstore_charged *outcome) {
  if (!js->ops->charges) return -ENOTSUP;
  /* The backend's done with a charge answers 1 (kept and counted) or 0 (the month used up), or a negative errno. */
  int rv = done_with(js, job_id, seq, body, len, charge, now_ms);
  if (rv < 0) return rv;
  if (outcome != NULL) *outcome = rv > 0 ? JOBSTORE_CHARGED_KEPT : JOBSTORE_CHARGED_QUOTA_FAILED;
  return 0;
}

int jobstore_reserve(struct jobstore *js, const char *job_id, int64_t seq, const struct jobstore_charge *charge,
                     enum jobstore_reserved *out) {
  if (js->ops->reserve == NULL) return -ENOTSUP;
  /* The backend's reserve answers 1 (held) or 0 (the month used up), or a negative errno. */
  int rv = js->ops->reserve(js->self, job_id, seq, charge);
  if (rv < 0) return rv;
  *out = rv > 0 ? JOBSTORE_RESERVED_HELD : JOBSTORE_RESERVED_USED_UP;
  return 0;
}

int jobstore_unreserve(struct jobstore *js, const char *job_id, int64_t seq, const struct jobstore_charge *charge) {
  return js->ops->unreserve != NULL ? js->ops->unreserve(js->self, job_id, seq, charge) : -ENOTSUP;
}

int jobstore_fail(struct jobstore *js, const char *job_id, int64_t seq, const char *code, const char *message,
                  int64_t now_ms) {
  return js->ops->fail(js->self, job_id, seq, code, message, now_ms);
}

int jobstore_retry(struct jobstore *js, const char *job_id, int64_t seq, int64_t not_before_ms, int64_t now_ms) {
  return js->ops->retry(js->self, job_id, seq, not_before_ms, now_ms);
}

int jobstore_recover(struct jobstore *js, int64_t now_ms) {
  return js->ops->recover != NULL ? js->ops->recover(js->self, now_ms) : 0;
}

int jobstore_expire(struct jobstore *js, int64_t now_ms, int64_t ttl_ms) {
  return js->ops->expire != NULL ? js->ops->expire(js->self, now_ms, ttl_ms) : 0;
}

int jobstore_keepalive(struct jobstore *js, int64_t now_ms) {
  return js->ops->keepalive != NULL ? js->ops->keepalive(js->self, now_ms) : 0;
}

int jobstore_hook_owed(struct jobstore *js, char job_id[JOBSTORE_ID_LEN + 1], char key_id[JOBSTORE_KEY_ID_MAX + 1]) {
  return js->ops->hook_owed(js->self, job_id, key_id);
}

int jobstore_hook_add(struct jobstore *js, const char *job_id, const char *body, size_t len, int64_t now_ms) {
  return js->ops->hook_add(js->self, job_id, body, len, now_ms);
}

/* A take without names to pass over is the op with skip NULL, kept as its own entry for callers that hold no list. */
int jobstore_hook_take(struct jobstore *js, int64_t now_ms, int64_t lease_ms, struct jobstore_hook *out) {
  return js->ops->hook_take(js->self, now_ms, lease_ms, NULL, out);
}

int jobstore_hook_take_skip(struct jobstore *js, int64_t now_ms, int64_t lease_ms, const struct jobstore_skip *skip,
                            struct jobstore_hook *out) {
  return js->ops->hook_take(js->self, now_ms, lease_ms, skip, out);
}

int jobstore_hook_end(struct jobstore *js, const char *job_id, enum jobstore_hook_state state, int64_t next_ms,
                      int http_status) {
  return js->ops->hook_end(js->self, job_id, state, next_ms, http_status);
}

int jobstore_take_page(struct jobstore *js, int64_t now_ms, int64_t lease_ms, struct jobstore_page *out) {
  return js->ops->take_page(js->self, now_ms, lease_ms, NULL, out);
}

int jobstore_take_page_skip(struct jobstore *js, int64_t now_ms, int64_t lease_ms, const struct jobstore_skip *skip,
                            struct jobstore_page *out) {
  return js->ops->take_page(js->self, now_ms, lease_ms, skip, out);
}

int jobstore_page_done(struct jobstore *js, const char *job_id, const char (*ids)[VTS_VIDEO_ID_LEN + 1], size_t n,
                       const char *next, int64_t now_ms, size_t *added) {
  /* Unbounded in pages (max 0): the bounds of jobstore_page_end are the runner's. */
  return js->ops->page_done(js->self, job_id, ids, n, next, 1, 0, NULL, now_ms, added);
}

int jobstore_page_end(struct jobstore *js, const char *job_id, const char (*ids)[VTS_VIDEO_ID_LEN + 1], size_t n,
                      const char *next, int64_t read, int64_t max_pages, const char *why, int64_t now_ms,
                      size_t *added) {
  return js->ops->page_done(js->self, job_id, ids, n, next, read, max_pages, why, now_ms, added);
}

int jobstore_stop_key(struct jobstore *js, const char *key_id, const char *why, int64_t now_ms) {
  return js->ops->stop_key(js->self, key_id, why, now_ms);
}

int jobstore_page_retry(struct jobstore *js, const char *job_id, int64_t not_before_ms, int64_t now_ms) {
  return js->ops->page_retry(js->self, job_id, not_before_ms, now_ms);
}
