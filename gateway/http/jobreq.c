/* A job request's body read through its table of members (see jobreq.h). */
#include "gateway/http/jobreq.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "common/ident.h"
#include "common/util.h"
#include "gateway/http/hookurl.h"
#include "gateway/http/idfold.h"
#include "gateway/http/jsonshape.h"
#include "gateway/http/videourl.h"

/*
 * A number that is an integer by JSON Schema's "integer" (its value has no fraction: 2, 2.0 and 1e2 alike, as JSON
 * writers emit them) into out. Returns 0, or -EINVAL for anything else, a fraction or a value out of int64's range.
 */
static int json_integer(yajl_val v, int64_t *out) {
  if (YAJL_IS_INTEGER(v)) {
    *out = YAJL_GET_INTEGER(v);
    return 0;
  }
  if (!YAJL_IS_DOUBLE(v)) return -EINVAL;
  double d = YAJL_GET_DOUBLE(v);
  if (!(d >= -9.2e18 && d <= 9.2e18) || d != (double)(int64_t)d) return -EINVAL;
  *out = (int64_t)d;
  return 0;
}

/* A string member's value, or NULL when it is not a string. */
static const char *str_of(yajl_val v) { return YAJL_IS_STRING(v) ? YAJL_GET_STRING(v) : NULL; }

struct job_member;
/*
 * Sets a member's value v into jr (cfg: the bounds a row takes from the configuration). Returns API_OK, or the
 * member's error with msg (JOBREQ_MSG_BYTES) saying what is wrong, "" when the error's own message says it.
 */
typedef enum api_error job_member_set(const struct job_member *m, const struct vts_config *cfg, yajl_val v,
                                      struct job_request *jr, char *msg);

/* When a member is checked: where it stands in the body, or after the source is known (in the table's order). */
enum job_member_when { MEMBER_IN_PLACE, MEMBER_AFTER_SOURCE };

/* Which source a member names: a job has exactly one (400 job_source otherwise). */
enum job_member_source { SOURCE_NONE = 0, SOURCE_IDS, SOURCE_LIST };

/*
 * One member of a job request, as one row of Redis's config table is one directive: its name, when it is checked,
 * its setter (which also checks its type), and for a string the field it fills and its check, or for an integer its
 * least value (the largest comes from the configuration).
 */
struct job_member {
  const char *name;
  enum job_member_when when;
  enum job_member_source source;
  job_member_set *set;
  size_t field; /* set_string: offsetof the field in struct job_request */
  size_t size;  /* its size, the terminating NUL included */
  int (*valid)(const char *s, size_t len);
  enum api_error bad; /* the code of a bad value */
  const char *bad_msg;
  int64_t min; /* set_limit: the least value */
};

static job_member_set set_string, set_format, set_limit, set_webhook_url, set_video_ids;

#define JOBS_STR_(x) #x
#define JOBS_STR(x) JOBS_STR_(x)
#define JOBS_LANGUAGE_RULE " must be a string matching ^[a-z]{2,3}(?:-[a-zA-Z]{2,8})?$."

/* The members of POST /v1/jobs. The order of the MEMBER_AFTER_SOURCE rows is the order their errors are answered. */
static const struct job_member job_members[] = {
    {"playlist_id", MEMBER_IN_PLACE, SOURCE_LIST, set_string, offsetof(struct job_request, playlist),
     VTS_PLAYLIST_ID_MAX + 1, ident_playlist_id_valid, API_ERR_INVALID_MEMBER,
     "playlist_id must be 2 to " JOBS_STR(VTS_PLAYLIST_ID_MAX) " characters of A-Z, a-z, 0-9, _ or -.", 0},
    {"channel_id", MEMBER_IN_PLACE, SOURCE_LIST, set_string, offsetof(struct job_request, channel),
     VTS_CHANNEL_ID_LEN + 1, ident_channel_id_valid, API_ERR_INVALID_MEMBER,
     "channel_id must be a channel id: UC and 22 characters of A-Z, a-z, 0-9, _ or -.", 0},
    {"language", MEMBER_IN_PLACE, SOURCE_NONE, set_string, offsetof(struct job_request, language),
     sizeof(((struct job_request *)0)->language), ident_language_valid, API_ERR_INVALID_LANGUAGE,
     "language" JOBS_LANGUAGE_RULE, 0},
    {"translate", MEMBER_IN_PLACE, SOURCE_NONE, set_string, offsetof(struct job_request, translate),
     sizeof(((struct job_request *)0)->translate), ident_language_valid, API_ERR_INVALID_TRANSLATE,
     "translate" JOBS_LANGUAGE_RULE, 0},
    {"format", MEMBER_IN_PLACE, SOURCE_NONE, set_format, 0, 0, NULL, API_ERR_INVALID_MEMBER,
     "format must be one of " RENDER_FORMAT_NAMES ".", 0},
    {"limit", MEMBER_AFTER_SOURCE, SOURCE_NONE, set_limit, 0, 0, NULL, API_ERR_INVALID_MEMBER, NULL, 1},
    {"webhook_url", MEMBER_AFTER_SOURCE, SOURCE_NONE, set_webhook_url, 0, 0, NULL, API_ERR_INVALID_MEMBER, NULL, 0},
    {"video_ids", MEMBER_AFTER_SOURCE, SOURCE_IDS, set_video_ids, 0, 0, NULL, API_ERR_INVALID_MEMBER,
     "video_ids must be a non-empty array of video ids or video URLs.", 0},
};

#define JOB_NMEMBERS (sizeof(job_members) / sizeof(job_members[0]))

static const struct job_member *find_member(const char *name) {
  for (size_t i = 0; i < JOB_NMEMBERS; i++)
    if (strcmp(job_members[i].name, name) == 0) return &job_members[i];
  return NULL;
}

/* A string member checked by its row's valid into its row's field (language, translate, playlist_id, channel_id). */
static enum api_error set_string(const struct job_member *m, const struct vts_config *cfg, yajl_val v,
                                 struct job_request *jr, char *msg) {
  (void)cfg;
  const char *s = str_of(v);
  size_t len = s != NULL ? strlen(s) : 0;
  if (s == NULL || len >= m->size || !m->valid(s, len)) {
    util_copy_str(msg, JOBREQ_MSG_BYTES, m->bad_msg);
    return m->bad;
  }
  memcpy((char *)jr + m->field, s, len + 1);
  return API_OK;
}

static enum api_error set_format(const struct job_member *m, const struct vts_config *cfg, yajl_val v,
                                 struct job_request *jr, char *msg) {
  (void)cfg;
  const char *s = str_of(v);
  if (s == NULL || render_format_from_name(s, strlen(s), &jr->format) != 0) {
    util_copy_str(msg, JOBREQ_MSG_BYTES, m->bad_msg);
    return m->bad;
  }
  return API_OK;
}

/* limit: from the row's least to VTS_JOB_MAX_ITEMS, the job's cap in place of VTS_JOB_MAX_ITEMS. */
static enum api_error set_limit(const struct job_member *m, const struct vts_config *cfg, yajl_val v,
                                struct job_request *jr, char *msg) {
  int64_t n = 0;
  if (json_integer(v, &n) != 0 || n < m->min || n > cfg->job_max_items) {
    snprintf(msg, JOBREQ_MSG_BYTES, "limit must be an integer from %lld to %lld (VTS_JOB_MAX_ITEMS).",
             (long long)m->min, (long long)cfg->job_max_items);
    return m->bad;
  }
  jr->cap = n;
  jr->limited = 1;
  return API_OK;
}

/*
 * webhook_url: a string that hookurl_check accepts with the allow list of VTS_WEBHOOK_ALLOW (checked at start, so it
 * parses). A malformed one is the row's code, a refused one webhook_refused.
 */
static enum api_error set_webhook_url(const struct job_member *m, const struct vts_config *cfg, yajl_val v,
                                      struct job_request *jr, char *msg) {
  struct netaddr_allow allow;
  char why[128];
  if (netaddr_allow_parse(cfg->webhook_allow, &allow, why, sizeof(why)) != 0) allow.n = 0;
  const char *s = str_of(v);
  size_t len = s != NULL ? strlen(s) : 0;
  enum hookurl_verdict verdict = hookurl_check(s, len, &allow, msg, JOBREQ_MSG_BYTES);
  if (verdict == HOOKURL_MALFORMED) return m->bad;
  if (verdict == HOOKURL_REFUSED) return API_ERR_WEBHOOK_REFUSED;
  memcpy(jr->webhook_url, s, len + 1);
  return API_OK;
}

/*
 * video_ids, entry by entry: every entry read first (a bad one left "" and remembered), then folded, then taken in
 * order up to the job's cap (past it: the rest is not asked for when a limit was given, else 400 too_many_items).
 */
static enum api_error set_video_ids(const struct job_member *m, const struct vts_config *cfg, yajl_val v,
                                    struct job_request *jr, char *msg) {
  if (!YAJL_IS_ARRAY(v) || v->u.array.len == 0) {
    util_copy_str(msg, JOBREQ_MSG_BYTES, m->bad_msg);
    return m->bad;
  }
  size_t len_in = v->u.array.len;
  jr->ids = calloc(len_in, sizeof(*jr->ids));
  unsigned char *flag = calloc(len_in, 2);
  if (jr->ids == NULL || flag == NULL) {
    free(flag);
    return API_ERR_SERVICE_UNAVAILABLE;
  }
  unsigned char *bad = flag, *dup = flag + len_in;
  for (size_t i = 0; i < len_in; i++) {
    const char *s = str_of(v->u.array.values[i]);
    size_t sl = s != NULL ? strlen(s) : 0;
    char *id = jr->ids[i];
    if (s != NULL && ident_video_id_valid(s, sl)) {
      memcpy(id, s, VTS_VIDEO_ID_LEN);
      id[VTS_VIDEO_ID_LEN] = '\0';
    } else if (s == NULL || videourl_parse(s, sl, id) != 0) {
      id[0] = '\0';
      bad[i] = 1;
    }
  }
  enum api_error e = API_OK;
  if (idfold_mark((const char(*)[VTS_VIDEO_ID_LEN + 1]) jr->ids, len_in, dup) != 0) e = API_ERR_SERVICE_UNAVAILABLE;
  for (size_t i = 0; e == API_OK && i < len_in; i++) {
    if (bad[i]) {
      snprintf(msg, JOBREQ_MSG_BYTES, "video_ids[%zu] is neither a video id nor a recognised video URL.", i);
      e = API_ERR_INVALID_VIDEO_ID;
      break;
    }
    if (dup[i]) continue; /* a duplicate: folded into its first place */
    if ((int64_t)jr->n == jr->cap) {
      if (jr->limited && jr->cap < cfg->job_max_items) break; /* limit reached: the rest is not asked for */
      snprintf(msg, JOBREQ_MSG_BYTES, "video_ids holds more than %lld distinct videos (VTS_JOB_MAX_ITEMS).",
               (long long)cfg->job_max_items);
      e = API_ERR_TOO_MANY_ITEMS;
      break;
    }
    if (jr->n != i) memcpy(jr->ids[jr->n], jr->ids[i], sizeof(jr->ids[0]));
    jr->n++;
  }
  free(flag);
  return e;
}

/* The deepest nesting a job request has (jsonshape_ok refuses deeper bodies before yajl sees them). */
enum { JOB_BODY_MAX_DEPTH = 8 };

/*
 * Checks the members of root (an object) into jr. In the body's order: a repeated or unknown member, then each
 * MEMBER_IN_PLACE row's value; then exactly one source; then the MEMBER_AFTER_SOURCE rows in the table's order (a
 * playlist's or channel's videos are read from the platform, not from the body).
 */
static enum api_error read_members(const struct vts_config *cfg, yajl_val root, struct job_request *jr, char *msg) {
  yajl_val after[JOB_NMEMBERS] = {0};
  enum job_member_source source = SOURCE_NONE;
  int sources = 0;
  size_t nkeys = root->u.object.len;
  for (size_t i = 0; i < nkeys; i++) {
    const char *k = root->u.object.keys[i];
    yajl_val v = root->u.object.values[i];
    for (size_t j = 0; j < i; j++) {
      if (strcmp(root->u.object.keys[j], k) == 0) {
        snprintf(msg, JOBREQ_MSG_BYTES, "%.40s is given more than once.", k);
        return API_ERR_INVALID_MEMBER;
      }
    }
    const struct job_member *m = find_member(k);
    if (m == NULL) {
      snprintf(msg, JOBREQ_MSG_BYTES, "%.40s is not a member of a job request.", k);
      return API_ERR_INVALID_MEMBER;
    }
    if (m->source != SOURCE_NONE) {
      source = m->source;
      sources++;
    }
    if (m->when == MEMBER_AFTER_SOURCE) {
      after[m - job_members] = v;
      continue;
    }
    enum api_error e = m->set(m, cfg, v, jr, msg);
    if (e != API_OK) return e;
  }
  if (sources != 1) return API_ERR_JOB_SOURCE;
  for (size_t i = 0; i < JOB_NMEMBERS; i++) {
    const struct job_member *m = &job_members[i];
    if (after[i] == NULL || (m->source != SOURCE_NONE && m->source != source)) continue;
    enum api_error e = m->set(m, cfg, after[i], jr, msg);
    if (e != API_OK) return e;
  }
  return API_OK;
}

enum api_error jobreq_read(const struct vts_config *cfg, const char *body, size_t len, struct job_request *jr,
                           char *msg) {
  msg[0] = '\0';
  jr->cap = cfg->job_max_items;
  char errbuf[128];
  if (body == NULL || len == 0 || !jsonshape_ok(body, len, JOB_BODY_MAX_DEPTH)) return API_ERR_INVALID_JSON;
  yajl_val root = yajl_tree_parse(body, errbuf, sizeof(errbuf));
  enum api_error e = root != NULL && YAJL_IS_OBJECT(root) ? read_members(cfg, root, jr, msg) : API_ERR_INVALID_JSON;
  yajl_tree_free(root);
  return e;
}
