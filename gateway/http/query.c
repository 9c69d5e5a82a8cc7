/*
 * The transcript endpoint's query string.
 *
 * Decoding follows application/x-www-form-urlencoded: pairs split on '&', name and value split on the first '=',
 * both percent-decoded, '+' is a space. Every value is decoded into a bounded stack buffer sized by its limit, so a
 * hostile query string costs no allocation. A parameter that is present counts as given even when its value is
 * empty or undecodable: "video_id=" is an invalid video id, not a missing one.
 */
#include "gateway/http/query.h"

#include <string.h>

#include "common/ident.h"
#include "common/limits.h"
#include "common/percent.h"
#include "common/util.h"
#include "gateway/http/chunks.h"
#include "gateway/http/videourl.h"

/* Longest parameter name we recognise ("video_url"); longer decoded names are unknown and ignored. */
#define QUERY_MAX_NAME_BYTES 16

/* Longest format name ("chunks"); a longer value fills its buffer and is unknown. */
#define QUERY_MAX_FORMAT_BYTES 6

/* One recognised parameter: how often it was given and the first value, decoded. */
struct param {
  const char *name;
  char *buf;   /* decoded value of the first occurrence (not NUL-terminated) */
  size_t cap;  /* bytes buf can hold; a longer value is marked too_long */
  size_t len;  /* decoded length */
  int count;   /* occurrences */
  int invalid; /* the first occurrence had a bad escape or exceeded cap */
};

static void param_add(struct param *p, const char *value, size_t len) {
  p->count++;
  if (p->count > 1) return; /* a repeat is ambiguous; the ambiguity rules report it */
  long n = percent_decode(value, len, p->buf, p->cap, PERCENT_PLUS_IS_SPACE);
  if (n < 0) {
    p->invalid = 1;
    p->len = 0;
  } else {
    p->len = (size_t)n;
  }
}

/* One name=value pair of a query string, its name decoded and its value as written. */
struct query_pair {
  char name[QUERY_MAX_NAME_BYTES];
  size_t name_len;
  const char *value; /* still percent-encoded */
  size_t value_len;  /* 0 for a pair without '=' */
};

/*
 * Reads the next pair at *pos of qs into p and moves *pos past it; 0 at the end. Empty pairs ("a=1&&b=2") and
 * pairs whose name is undecodable or longer than any we recognise are passed over: they name nothing of ours.
 */
static int query_next_pair(const char *qs, size_t len, size_t *pos, struct query_pair *p) {
  while (qs != NULL && *pos < len) {
    const char *pair = qs + *pos;
    const char *amp = memchr(pair, '&', len - *pos);
    size_t pair_len = amp ? (size_t)(amp - pair) : len - *pos;
    *pos += pair_len + 1;
    if (pair_len == 0) continue;

    const char *eq = memchr(pair, '=', pair_len);
    size_t name_len = eq ? (size_t)(eq - pair) : pair_len;
    /* Names are form-encoded too ("video%5Fid"). */
    long n = percent_decode(pair, name_len, p->name, sizeof(p->name), PERCENT_PLUS_IS_SPACE);
    if (n < 0) continue;
    p->name_len = (size_t)n;
    p->value = eq ? eq + 1 : pair + pair_len;
    p->value_len = eq ? pair_len - name_len - 1 : 0;
    return 1;
  }
  return 0;
}

/* A bounded integer parameter into *v, left as it is when p is absent; -1 if p is repeated, undecodable or out of
 * range. */
static int param_i64(const struct param *p, int64_t min, int64_t max, int64_t *v) {
  if (p->count == 0) return 0;
  if (p->count > 1 || p->invalid) return -1;
  return util_parse_i64_n(p->buf, p->len, min, max, v) != 0 ? -1 : 0;
}

/* Over 80 lines: one pass over the query string, each parameter checked where it is read, in the errors' order. */
/* Parses qs recognising the first nknown parameters of the table below (the video's two come first). */
static enum api_error parse_query(const char *qs, size_t len, size_t nknown, struct transcript_query *q) {
  /*
   * Each buffer holds one byte more than the longest valid value, so "too long" is seen as a value that fills the
   * buffer and fails its pattern, without a separate length rule.
   */
  char id_buf[VTS_VIDEO_ID_LEN + 1];
  char url_buf[VTS_MAX_VIDEO_URL_BYTES];
  char language_buf[VTS_MAX_LANGUAGE_BYTES + 1];
  char lang_buf[VTS_MAX_LANGUAGE_BYTES + 1];
  struct param video_id = {"video_id", id_buf, sizeof(id_buf), 0, 0, 0};
  struct param video_url = {"video_url", url_buf, sizeof(url_buf), 0, 0, 0};
  struct param language = {"language", language_buf, sizeof(language_buf), 0, 0, 0};
  struct param lang = {"lang", lang_buf, sizeof(lang_buf), 0, 0, 0};
  char format_buf[QUERY_MAX_FORMAT_BYTES + 1];
  struct param format = {"format", format_buf, sizeof(format_buf), 0, 0, 0};
  char translate_buf[VTS_MAX_LANGUAGE_BYTES + 1];
  struct param translate = {"translate", translate_buf, sizeof(translate_buf), 0, 0, 0};
  char chars_buf[8], overlap_buf[8];
  struct param chunk_chars = {"chunk_chars", chars_buf, sizeof(chars_buf), 0, 0, 0};
  struct param chunk_overlap = {"chunk_overlap", overlap_buf, sizeof(overlap_buf), 0, 0, 0};
  struct param *params[] = {&video_id, &video_url, &language, &lang, &format, &translate, &chunk_chars, &chunk_overlap};

  memset(q, 0, sizeof(*q));
  size_t pos = 0;
  struct query_pair pair;
  while (query_next_pair(qs, len, &pos, &pair)) {
    for (size_t i = 0; i < nknown && i < sizeof(params) / sizeof(params[0]); i++) {
      if (strlen(params[i]->name) == pair.name_len && memcmp(params[i]->name, pair.name, pair.name_len) == 0) {
        param_add(params[i], pair.value, pair.value_len);
        break;
      }
    }
  }

  if (video_id.count + video_url.count != 1) return API_ERR_AMBIGUOUS_REQUEST;
  if (language.count + lang.count > 1) return API_ERR_AMBIGUOUS_LANGUAGE;
  if (translate.count > 1) return API_ERR_AMBIGUOUS_TRANSLATE;

  if (video_id.count == 1) {
    if (video_id.invalid || !ident_video_id_valid(video_id.buf, video_id.len)) return API_ERR_INVALID_VIDEO_ID;
    memcpy(q->video_id, video_id.buf, VTS_VIDEO_ID_LEN);
    q->video_id[VTS_VIDEO_ID_LEN] = '\0';
  } else {
    if (video_url.invalid || videourl_parse(video_url.buf, video_url.len, q->video_id) != 0) {
      q->video_id[0] = '\0';
      return API_ERR_INVALID_VIDEO_URL;
    }
  }

  struct param *l = language.count ? &language : (lang.count ? &lang : NULL);
  if (l != NULL) {
    if (l->invalid || !ident_language_valid(l->buf, l->len)) {
      q->video_id[0] = '\0';
      return API_ERR_INVALID_LANGUAGE;
    }
    memcpy(q->lang, l->buf, l->len);
    q->lang[l->len] = '\0';
  }
  if (translate.count == 1) {
    if (translate.invalid || !ident_language_valid(translate.buf, translate.len)) {
      memset(q, 0, sizeof(*q));
      return API_ERR_INVALID_TRANSLATE;
    }
    memcpy(q->translate, translate.buf, translate.len);
    q->translate[translate.len] = '\0';
  }
  if (format.count > 0) {
    q->chunks = format.count == 1 && !format.invalid && format.len == 6 && memcmp(format.buf, "chunks", 6) == 0;
    if (!q->chunks &&
        (format.count > 1 || format.invalid || render_format_from_name(format.buf, format.len, &q->format) != 0)) {
      memset(q, 0, sizeof(*q));
      return API_ERR_INVALID_FORMAT;
    }
    q->format_given = 1;
  }
  if (q->chunks) {
    q->format = RENDER_JSON;
    int64_t v = CHUNKS_DEFAULT_CHARS;
    if (param_i64(&chunk_chars, CHUNKS_MIN_CHARS, CHUNKS_MAX_CHARS, &v) != 0) {
      memset(q, 0, sizeof(*q));
      return API_ERR_INVALID_CHUNK_CHARS;
    }
    q->chunk_chars = (size_t)v;
    v = CHUNKS_DEFAULT_OVERLAP < (int64_t)q->chunk_chars / 2 ? CHUNKS_DEFAULT_OVERLAP : (int64_t)q->chunk_chars / 2;
    if (param_i64(&chunk_overlap, 0, (int64_t)q->chunk_chars / 2, &v) != 0) {
      memset(q, 0, sizeof(*q));
      return API_ERR_INVALID_CHUNK_OVERLAP;
    }
    q->chunk_overlap = (size_t)v;
  }
  return API_OK;
}

/* Of the table in parse_query: video_id and video_url. */
#define QUERY_VIDEO_PARAMS 2

enum api_error query_parse_transcript(const char *qs, size_t len, struct transcript_query *q) {
  return parse_query(qs, len, (size_t)-1, q);
}

enum api_error query_parse_tracks(const char *qs, size_t len, struct transcript_query *q) {
  return parse_query(qs, len, QUERY_VIDEO_PARAMS, q);
}

/* Longest include value read: "chapters" a few times over; a longer one is refused. */
#define QUERY_MAX_INCLUDE_BYTES 64

/* Whether every comma-separated item of v (len bytes) is "chapters". */
static int include_valid(const char *v, size_t len) {
  size_t pos = 0;
  for (;;) {
    const char *comma = memchr(v + pos, ',', len - pos);
    size_t n = comma ? (size_t)(comma - (v + pos)) : len - pos;
    if (n != 8 || memcmp(v + pos, "chapters", 8) != 0) return 0;
    if (comma == NULL) return 1;
    pos += n + 1;
  }
}

enum api_error query_parse_metadata(const char *qs, size_t len, struct transcript_query *q) {
  enum api_error e = parse_query(qs, len, QUERY_VIDEO_PARAMS, q);
  if (e != API_OK) return e;
  int count = 0, valid = 0;
  size_t pos = 0;
  struct query_pair pair;
  while (query_next_pair(qs, len, &pos, &pair)) {
    if (pair.name_len != 7 || memcmp(pair.name, "include", 7) != 0) continue;
    if (++count > 1) break;
    char value[QUERY_MAX_INCLUDE_BYTES];
    long v = percent_decode(pair.value, pair.value_len, value, sizeof(value), PERCENT_PLUS_IS_SPACE);
    valid = v > 0 && include_valid(value, (size_t)v);
  }
  if (count == 0) return API_OK;
  if (count > 1 || !valid) {
    memset(q, 0, sizeof(*q));
    return API_ERR_INVALID_INCLUDE;
  }
  q->chapters = 1;
  return API_OK;
}
