#include "proto/proto.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/ident.h"
#include "common/limits.h"
#include "common/util.h"

#define OUTCOME_VALUE_CHECK_(id, value, status, kind) \
  _Static_assert((value) >= 1 && (value) <= PROTO_NOUTCOMES, "outcome " #id ": wire values are 1 to the row count");
PROTO_OUTCOMES(OUTCOME_VALUE_CHECK_)
#undef OUTCOME_VALUE_CHECK_

struct reader {
  const unsigned char *p;
  size_t left;
};

static int put_u8(struct buf *b, uint8_t v) { return buf_append(b, &v, 1); }

static int put_be(struct buf *b, uint64_t v, int bytes) {
  unsigned char tmp[8];
  for (int i = 0; i < bytes; i++) tmp[i] = (unsigned char)(v >> (8 * (bytes - 1 - i)));
  return buf_append(b, tmp, (size_t)bytes);
}

static int put_str(struct buf *b, const char *s, size_t max) {
  size_t n = strlen(s);
  if (n > max) return -EINVAL;
  int rv = put_be(b, n, 2);
  return rv ? rv : buf_append(b, s, n);
}

/* A blob: u32 length and bytes, at most max. */
static int put_blob(struct buf *b, const char *data, uint32_t len, size_t max) {
  if (len > max || (len > 0 && data == NULL)) return -EINVAL;
  int rv = put_be(b, len, 4);
  return rv || len == 0 ? rv : buf_append(b, data, len);
}

static int put_header(struct buf *b, enum proto_type type) {
  int rv = buf_append(b, "VT", 2);
  if (rv == 0) rv = put_u8(b, PROTO_VERSION);
  if (rv == 0) rv = put_u8(b, (uint8_t)type);
  return rv;
}

static int get_be(struct reader *r, int bytes, uint64_t *v) {
  if (r->left < (size_t)bytes) return -EPROTO;
  uint64_t x = 0;
  for (int i = 0; i < bytes; i++) x = (x << 8) | r->p[i];
  r->p += bytes;
  r->left -= (size_t)bytes;
  *v = x;
  return 0;
}

/* Reads a string into out (cap bytes with the NUL); a NUL inside or a longer string is a protocol error. */
static int get_str(struct reader *r, char *out, size_t cap) {
  uint64_t n;
  if (get_be(r, 2, &n) != 0 || n >= cap || r->left < n) return -EPROTO;
  if (memchr(r->p, '\0', n) != NULL) return -EPROTO;
  memcpy(out, r->p, n);
  out[n] = '\0';
  r->p += n;
  r->left -= n;
  return 0;
}

/* Reads a blob of at most max bytes; *data borrows from the message (NULL for an empty one). */
static int get_blob(struct reader *r, size_t max, const char **data, uint32_t *len) {
  uint64_t n;
  if (get_be(r, 4, &n) != 0 || n > max || r->left < n) return -EPROTO;
  *data = n ? (const char *)r->p : NULL;
  *len = (uint32_t)n;
  r->p += n;
  r->left -= n;
  return 0;
}

/* Checks the header for one of two types (pass the same type twice for one) and positions r after it. */
static int open_reader(struct reader *r, const void *data, size_t len, enum proto_type want, enum proto_type or_want) {
  int type = proto_peek_type(data, len);
  if (type != (int)want && type != (int)or_want) return -EPROTO;
  r->p = (const unsigned char *)data + 4;
  r->left = len - 4;
  return 0;
}

/*
 * A job names a video, except a webhook delivery (a URL instead) and a browse job (what it reads and its target
 * instead); the browse fields are empty for every other kind.
 */
static int job_target_valid(const struct proto_job *job) {
  if (job->kind == PROTO_KIND_BROWSE)
    return job->video_id[0] == '\0' && job->browse_what >= PROTO_BROWSE_PLAYLIST &&
           job->browse_what <= PROTO_BROWSE_CONTINUATION && job->browse_len > 0 &&
           job->browse_len <= VTS_MAX_BROWSE_TOKEN_BYTES && job->browse != NULL &&
           memchr(job->browse, '\0', job->browse_len) == NULL;
  if (job->browse_what != PROTO_BROWSE_NONE || job->browse_len != 0) return 0;
  if ((job->include & ~PROTO_INCLUDE_ALL) != 0 || (job->include != 0 && job->kind != PROTO_KIND_METADATA)) return 0;
  if (job->refresh > 1 || (job->refresh && (job->kind != PROTO_KIND_CAPTIONS || job->inm_len == 0))) return 0;
  if (job->kind == PROTO_KIND_WEBHOOK) return job->video_id[0] == '\0' && job->hook_url_len > 0;
  return ident_video_id_valid(job->video_id, strlen(job->video_id));
}

int proto_encode_job(struct buf *out, const struct proto_job *job) {
  if (job->kind < PROTO_KIND_CAPTIONS || job->kind > PROTO_KIND_LAST || !job_target_valid(job)) return -EINVAL;
  int rv = put_header(out, PROTO_JOB);
  if (rv == 0) rv = put_be(out, job->job_id, 8);
  if (rv == 0) rv = put_u8(out, job->kind);
  if (rv == 0) rv = put_be(out, job->deadline_ms, 4);
  if (rv == 0) rv = put_str(out, job->video_id, VTS_VIDEO_ID_LEN);
  if (rv == 0) rv = put_str(out, job->lang, PROTO_MAX_LANG);
  if (rv == 0) rv = put_str(out, job->translate, PROTO_MAX_LANG);
  if (rv == 0) rv = put_str(out, job->request_id, PROTO_MAX_REQUEST_ID);
  if (rv == 0) rv = put_u8(out, job->declines);
  if (rv == 0) rv = put_u8(out, job->include);
  if (rv == 0) rv = put_blob(out, job->player, job->player_len, VTS_MAX_PLAYER_SUMMARY_BYTES);
  if (rv == 0) rv = put_blob(out, job->hook_url, job->hook_url_len, VTS_WEBHOOK_URL_MAX_BYTES);
  if (rv == 0) rv = put_str(out, job->hook_id, PROTO_MAX_HOOK_ID);
  if (rv == 0) rv = put_be(out, job->hook_timestamp, 8);
  if (rv == 0) rv = put_str(out, job->hook_signature, PROTO_MAX_HOOK_SIG);
  if (rv == 0) rv = put_blob(out, job->hook_body, job->hook_body_len, VTS_WEBHOOK_MAX_PAYLOAD_BYTES);
  if (rv == 0) rv = put_u8(out, job->browse_what);
  if (rv == 0) rv = put_blob(out, job->browse, job->browse_len, VTS_MAX_BROWSE_TOKEN_BYTES);
  if (rv == 0) rv = put_blob(out, job->inm, job->inm_len, PROTO_MAX_INM);
  if (rv == 0) rv = put_u8(out, job->refresh);
  return rv;
}

static int encode_result(struct buf *out, const struct proto_result *res, enum proto_type type) {
  if (res->outcome < 1 || res->outcome > PROTO_NOUTCOMES || res->source > PROTO_SOURCE_LAST) return -EINVAL;
  if (res->reason >= PROTO_REASON__COUNT || res->nattempts > PROTO_MAX_ATTEMPTS) return -EINVAL;
  if (res->negress > PROTO_MAX_EGRESS || res->sandbox >= (1u << PROTO_SANDBOX__COUNT)) return -EINVAL;
  for (uint8_t i = 0; i < res->negress; i++)
    if (res->egress[i].egress >= PROTO_MAX_EGRESS) return -EINVAL;
  if (res->body_len > VTS_MAX_MESSAGE_BYTES - 256) return -EINVAL;
  int rv = put_header(out, type);
  if (rv == 0) rv = put_be(out, res->job_id, 8);
  if (rv == 0) rv = put_u8(out, res->outcome);
  if (rv == 0) rv = put_u8(out, res->source);
  if (rv == 0) rv = put_be(out, res->fetch_ms, 4);
  if (rv == 0) rv = put_str(out, res->lang, PROTO_MAX_LANG);
  if (rv == 0) rv = put_str(out, res->detail, sizeof(res->detail) - 1);
  if (rv == 0) rv = put_u8(out, res->reason);
  if (rv == 0) rv = put_u8(out, res->nattempts);
  for (uint8_t i = 0; rv == 0 && i < res->nattempts; i++) {
    rv = put_u8(out, res->attempts[i].proxy);
    if (rv == 0) rv = put_u8(out, res->attempts[i].result);
    if (rv == 0) rv = put_str(out, res->attempts[i].client, PROTO_MAX_CLIENT_NAME);
  }
  if (rv == 0) rv = put_u8(out, res->negress);
  for (uint8_t i = 0; rv == 0 && i < res->negress; i++) {
    rv = put_u8(out, res->egress[i].egress);
    if (rv == 0) rv = put_be(out, res->egress[i].left, 4);
    if (rv == 0) rv = put_be(out, res->egress[i].waits, 4);
    if (rv == 0) rv = put_be(out, res->egress[i].declines, 4);
  }
  if (rv == 0) rv = put_be(out, res->cache_ms, 4);
  if (rv == 0) rv = put_be(out, res->retry_after_s, 4);
  if (rv == 0) rv = put_u8(out, res->pot_failures);
  if (rv == 0) rv = put_u8(out, res->sandbox);
  if (rv == 0) rv = put_be(out, res->player_ttl_ms, 4);
  if (rv == 0) rv = put_blob(out, res->player, res->player_len, VTS_MAX_PLAYER_SUMMARY_BYTES);
  if (rv == 0) rv = put_u8(out, res->notmod ? 1 : 0);
  if (rv == 0) rv = put_str(out, res->etag, PROTO_MAX_ETAG);
  if (rv == 0) rv = put_be(out, res->body_len, 4);
  if (rv == 0 && res->body_len > 0) rv = buf_append(out, res->body, res->body_len);
  return rv;
}

int proto_encode_result(struct buf *out, const struct proto_result *res) {
  return encode_result(out, res, PROTO_RESULT);
}

int proto_encode_result_last(struct buf *out, const struct proto_result *res) {
  return encode_result(out, res, PROTO_RESULT_LAST);
}

int proto_encode_ready(struct buf *out) { return put_header(out, PROTO_READY); }

int proto_encode_decline(struct buf *out, uint64_t job_id, uint8_t why) {
  if (why > PROTO_DECLINE_BUDGET) return -EINVAL;
  int rv = put_header(out, PROTO_DECLINE);
  if (rv == 0) rv = put_be(out, job_id, 8);
  return rv ? rv : put_u8(out, why);
}

int proto_decode_decline(const void *data, size_t len, uint64_t *job_id, uint8_t *why) {
  struct reader r;
  uint64_t v;
  if (open_reader(&r, data, len, PROTO_DECLINE, PROTO_DECLINE) != 0) return -EPROTO;
  if (get_be(&r, 8, job_id) != 0) return -EPROTO;
  if (get_be(&r, 1, &v) != 0 || v > PROTO_DECLINE_BUDGET || r.left != 0) return -EPROTO;
  *why = (uint8_t)v;
  return 0;
}

int proto_peek_type(const void *data, size_t len) {
  const unsigned char *p = data;
  if (len < 4 || len > VTS_MAX_MESSAGE_BYTES || p[0] != 'V' || p[1] != 'T' || p[2] != PROTO_VERSION) return -EPROTO;
  if (p[3] < PROTO_JOB || p[3] > PROTO_DECLINE) return -EPROTO;
  if (p[3] == PROTO_READY && len != 4) return -EPROTO;
  return p[3];
}

int proto_decode_job(const void *data, size_t len, struct proto_job *job) {
  struct reader r;
  uint64_t v;
  memset(job, 0, sizeof(*job));
  if (open_reader(&r, data, len, PROTO_JOB, PROTO_JOB) != 0) return -EPROTO;
  if (get_be(&r, 8, &v) != 0) return -EPROTO;
  job->job_id = v;
  if (get_be(&r, 1, &v) != 0 || v < PROTO_KIND_CAPTIONS || v > PROTO_KIND_LAST) return -EPROTO;
  job->kind = (uint8_t)v;
  if (get_be(&r, 4, &v) != 0) return -EPROTO;
  job->deadline_ms = (uint32_t)v;
  if (get_str(&r, job->video_id, sizeof(job->video_id)) != 0) return -EPROTO;
  if (get_str(&r, job->lang, sizeof(job->lang)) != 0) return -EPROTO;
  if (get_str(&r, job->translate, sizeof(job->translate)) != 0) return -EPROTO;
  if (get_str(&r, job->request_id, sizeof(job->request_id)) != 0) return -EPROTO;
  if (get_be(&r, 1, &v) != 0) return -EPROTO;
  job->declines = (uint8_t)v;
  if (get_be(&r, 1, &v) != 0) return -EPROTO;
  job->include = (uint8_t)v;
  if (get_blob(&r, VTS_MAX_PLAYER_SUMMARY_BYTES, &job->player, &job->player_len) != 0) return -EPROTO;
  if (get_blob(&r, VTS_WEBHOOK_URL_MAX_BYTES, &job->hook_url, &job->hook_url_len) != 0) return -EPROTO;
  if (get_str(&r, job->hook_id, sizeof(job->hook_id)) != 0) return -EPROTO;
  if (get_be(&r, 8, &v) != 0) return -EPROTO;
  job->hook_timestamp = v;
  if (get_str(&r, job->hook_signature, sizeof(job->hook_signature)) != 0) return -EPROTO;
  if (get_blob(&r, VTS_WEBHOOK_MAX_PAYLOAD_BYTES, &job->hook_body, &job->hook_body_len) != 0) return -EPROTO;
  if (get_be(&r, 1, &v) != 0) return -EPROTO;
  job->browse_what = (uint8_t)v;
  if (get_blob(&r, VTS_MAX_BROWSE_TOKEN_BYTES, &job->browse, &job->browse_len) != 0) return -EPROTO;
  if (get_blob(&r, PROTO_MAX_INM, &job->inm, &job->inm_len) != 0) return -EPROTO;
  if (get_be(&r, 1, &v) != 0) return -EPROTO;
  job->refresh = (uint8_t)v;
  return r.left == 0 && job_target_valid(job) ? 0 : -EPROTO;
}

int proto_decode_result(const void *data, size_t len, struct proto_result *res) {
  struct reader r;
  uint64_t v;
  memset(res, 0, sizeof(*res));
  if (open_reader(&r, data, len, PROTO_RESULT, PROTO_RESULT_LAST) != 0) return -EPROTO;
  if (get_be(&r, 8, &v) != 0) return -EPROTO;
  res->job_id = v;
  if (get_be(&r, 1, &v) != 0 || v < 1 || v > PROTO_NOUTCOMES) return -EPROTO;
  res->outcome = (uint8_t)v;
  if (get_be(&r, 1, &v) != 0 || v > PROTO_SOURCE_LAST) return -EPROTO;
  res->source = (uint8_t)v;
  if (get_be(&r, 4, &v) != 0) return -EPROTO;
  res->fetch_ms = (uint32_t)v;
  if (get_str(&r, res->lang, sizeof(res->lang)) != 0) return -EPROTO;
  if (get_str(&r, res->detail, sizeof(res->detail)) != 0) return -EPROTO;
  if (get_be(&r, 1, &v) != 0 || v >= PROTO_REASON__COUNT) return -EPROTO;
  res->reason = (uint8_t)v;
  if (get_be(&r, 1, &v) != 0 || v > PROTO_MAX_ATTEMPTS) return -EPROTO;
  res->nattempts = (uint8_t)v;
  for (uint8_t i = 0; i < res->nattempts; i++) {
    struct proto_attempt *a = &res->attempts[i];
    if (get_be(&r, 1, &v) != 0 || v > VTS_UPSTREAM_MAX_PROXIES) return -EPROTO;
    a->proxy = (uint8_t)v;
    if (get_be(&r, 1, &v) != 0 || v > PROTO_ATTEMPT_FAILED) return -EPROTO;
    a->result = (uint8_t)v;
    if (get_str(&r, a->client, sizeof(a->client)) != 0) return -EPROTO;
  }
  if (get_be(&r, 1, &v) != 0 || v > PROTO_MAX_EGRESS) return -EPROTO;
  res->negress = (uint8_t)v;
  for (uint8_t i = 0; i < res->negress; i++) {
    struct proto_egress *e = &res->egress[i];
    if (get_be(&r, 1, &v) != 0 || v >= PROTO_MAX_EGRESS) return -EPROTO;
    e->egress = (uint8_t)v;
    if (get_be(&r, 4, &v) != 0) return -EPROTO;
    e->left = (uint32_t)v;
    if (get_be(&r, 4, &v) != 0) return -EPROTO;
    e->waits = (uint32_t)v;
    if (get_be(&r, 4, &v) != 0) return -EPROTO;
    e->declines = (uint32_t)v;
  }
  if (get_be(&r, 4, &v) != 0) return -EPROTO;
  res->cache_ms = (uint32_t)v;
  if (get_be(&r, 4, &v) != 0) return -EPROTO;
  res->retry_after_s = (uint32_t)v;
  if (get_be(&r, 1, &v) != 0) return -EPROTO;
  res->pot_failures = (uint8_t)v;
  if (get_be(&r, 1, &v) != 0 || v >= (1u << PROTO_SANDBOX__COUNT)) return -EPROTO;
  res->sandbox = (uint8_t)v;
  if (get_be(&r, 4, &v) != 0) return -EPROTO;
  res->player_ttl_ms = (uint32_t)v;
  if (get_blob(&r, VTS_MAX_PLAYER_SUMMARY_BYTES, &res->player, &res->player_len) != 0) return -EPROTO;
  if (get_be(&r, 1, &v) != 0 || v > 1) return -EPROTO;
  res->notmod = (uint8_t)v;
  if (get_str(&r, res->etag, sizeof(res->etag)) != 0) return -EPROTO;
  if (get_be(&r, 4, &v) != 0 || v != r.left) return -EPROTO;
  res->body = v ? (const char *)r.p : NULL;
  res->body_len = (uint32_t)v;
  /* A successful result must carry a body, unless it is a 304 (with its validator); a failure's body is ignored. */
  if (res->notmod && (res->outcome != PROTO_OK || res->etag[0] == '\0' || res->body_len != 0)) return -EPROTO;
  if (res->outcome == PROTO_OK && res->body_len == 0 && !res->notmod) return -EPROTO;
  return 0;
}

void proto_job_key(const struct proto_job *job, char out[PROTO_MAX_JOB_KEY + 1]) {
  /* The fields are bounded by their arrays, so the key always fits. */
  if (job->kind == PROTO_KIND_TRACKS) {
    memcpy(out, PROTO_TRACKS_KEY, sizeof(PROTO_TRACKS_KEY));
    return;
  }
  if (job->kind == PROTO_KIND_METADATA && (job->include & PROTO_INCLUDE_CHAPTERS)) {
    memcpy(out, PROTO_CHAPTERS_KEY, sizeof(PROTO_CHAPTERS_KEY));
    return;
  }
  if (job->kind == PROTO_KIND_METADATA) {
    memcpy(out, PROTO_METADATA_KEY, sizeof(PROTO_METADATA_KEY));
    return;
  }
  if (job->kind == PROTO_KIND_BROWSE) {
    memcpy(out, PROTO_BROWSE_KEY, sizeof(PROTO_BROWSE_KEY));
    return;
  }
  size_t n = strnlen(job->lang, PROTO_MAX_LANG);
  ident_language_canon(job->lang, n, out);
  if (job->translate[0] != '\0') {
    out[n++] = '>';
    size_t t = strnlen(job->translate, PROTO_MAX_LANG);
    ident_language_canon(job->translate, t, out + n);
    n += t;
  }
  out[n] = '\0';
}

void proto_track_key(const struct proto_result *res, char out[PROTO_MAX_JOB_KEY + 1]) {
  unsigned char md[32];
  util_sha256(res->body, res->body_len, md); /* the body names its source too */
  size_t n = strnlen(res->lang, PROTO_MAX_LANG);
  out[0] = '=';
  ident_language_canon(res->lang, n, out + 1);
  out[1 + n] = '#';
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < 6; i++) {
    out[2 + n + 2 * i] = hex[md[i] >> 4];
    out[3 + n + 2 * i] = hex[md[i] & 15];
  }
  out[2 + n + 12] = '\0';
}

uint8_t proto_key_kind(const char *key) {
  if (strcmp(key, PROTO_TRACKS_KEY) == 0) return PROTO_KIND_TRACKS;
  if (strcmp(key, PROTO_METADATA_KEY) == 0 || strcmp(key, PROTO_CHAPTERS_KEY) == 0) return PROTO_KIND_METADATA;
  if (strcmp(key, PROTO_BROWSE_KEY) == 0) return PROTO_KIND_BROWSE;
  return PROTO_KIND_CAPTIONS;
}

int proto_reason_gone(uint8_t reason) {
  switch (reason) {
    case PROTO_REASON_NOT_PLAYABLE:
    case PROTO_REASON_AGE_RESTRICTED:
    case PROTO_REASON_MEMBERS_ONLY:
    case PROTO_REASON_PRIVATE:
    case PROTO_REASON_REMOVED:
    case PROTO_REASON_LIVE_NOT_ARCHIVED:
    case PROTO_REASON_GEO_RESTRICTED:
      return 1;
    default:
      return 0;
  }
}

int proto_result_gone(const struct proto_result *res) {
  return res->outcome == PROTO_NOT_AVAILABLE && proto_reason_gone(res->reason);
}

int proto_outcome_status(uint8_t outcome) {
  switch (outcome) {
#define PROTO_OUTCOME_STATUS_(id, value, status, kind) \
  case PROTO_##id:                                     \
    return status;
    PROTO_OUTCOMES(PROTO_OUTCOME_STATUS_)
#undef PROTO_OUTCOME_STATUS_
    default:
      return 500;
  }
}

static const char *const reason_names[PROTO_REASON__COUNT] = {
#define PROTO_REASON_NAME_(id, name, kind) [PROTO_REASON_##id] = name,
    PROTO_REASONS(PROTO_REASON_NAME_)
#undef PROTO_REASON_NAME_
};

const char *proto_reason_name(uint8_t reason) {
  return reason < PROTO_REASON__COUNT ? reason_names[reason] : "unknown";
}

int proto_browse_body(struct buf *out, const char *token, const char (*ids)[VTS_VIDEO_ID_LEN + 1], size_t n) {
  size_t tl = strlen(token);
  if (tl > VTS_MAX_BROWSE_TOKEN_BYTES || memchr(token, '\n', tl) != NULL) return -EINVAL;
  int rv = buf_append(out, token, tl);
  if (rv == 0) rv = buf_append(out, "\n", 1);
  for (size_t i = 0; rv == 0 && i < n; i++) {
    if (!ident_video_id_valid(ids[i], strnlen(ids[i], VTS_VIDEO_ID_LEN + 1))) return -EINVAL;
    rv = buf_append(out, ids[i], VTS_VIDEO_ID_LEN);
    if (rv == 0) rv = buf_append(out, "\n", 1);
  }
  return rv;
}

int proto_browse_read(const char *body, size_t len, struct proto_browse_page *out) {
  memset(out, 0, sizeof(*out));
  const char *nl = body != NULL ? memchr(body, '\n', len) : NULL;
  if (nl == NULL) return -EPROTO;
  size_t tl = (size_t)(nl - body);
  if (tl > VTS_MAX_BROWSE_TOKEN_BYTES || memchr(body, '\0', tl) != NULL) return -EPROTO;
  const char *ids = nl + 1;
  size_t rest = len - tl - 1;
  if (rest % (VTS_VIDEO_ID_LEN + 1) != 0) return -EPROTO;
  size_t n = rest / (VTS_VIDEO_ID_LEN + 1);
  for (size_t i = 0; i < n; i++) {
    const char *id = ids + i * (VTS_VIDEO_ID_LEN + 1);
    if (!ident_video_id_valid(id, VTS_VIDEO_ID_LEN) || id[VTS_VIDEO_ID_LEN] != '\n') return -EPROTO;
  }
  out->token = body;
  out->token_len = tl;
  out->ids = ids;
  out->n = n;
  return 0;
}
