/*
 * Caption bodies: json3 through the bounded JSON reader, srv1 and srv3 through the strict XML tokenizer, every cue's
 * text through textclean. Times are parsed strictly (digits, optional fraction): a negative, exponent or absurd time
 * means the body is not what we think it is, so the whole body is refused (-EPROTO) rather than guessed at.
 */
#include "fetcher/captions/captions.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/limits.h"
#include "fetcher/readers/jsonstream.h"
#include "fetcher/readers/textclean.h"
#include "fetcher/readers/xmlscan.h"

/* Anything later than this (about 31 years of video) is not a caption time. */
#define MAX_TIME_MS 1e12

/* Cleans one cue and appends it unless it is empty; takes nothing, the raw text stays the caller's. */
static int add_cue(struct segment_list *sl, struct textclean *tc, const char *raw, size_t len, int markup,
                   double start_ms, double dur_ms) {
  char *text;
  int rv = textclean_cue(tc, raw, len, markup, &text);
  if (rv < 0) return rv;
  if (!text) return 0;
  return segment_list_push(sl, text, start_ms / 1000.0, dur_ms / 1000.0);
}

/* Parses a non-negative decimal ("1200", "1.54") times scale into *ms. Returns 0, or -EPROTO. */
static int parse_time(const char *s, size_t len, double scale, double *ms) {
  double v = 0, frac = 0.1;
  size_t i = 0, digits = 0;
  for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, digits++) v = v * 10 + (s[i] - '0');
  if (i < len && s[i] == '.') {
    for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++, digits++, frac /= 10) v += (s[i] - '0') * frac;
  }
  if (i != len || digits == 0) return -EPROTO;
  v *= scale;
  if (v > MAX_TIME_MS) return -EPROTO;
  *ms = v;
  return 0;
}

/* json3 ---------------------------------------------------------------------------------------------------------- */

enum { J_EVENTS = JSONSTREAM_ROOT + 1, J_EVENT, J_SEGS, J_SEG };
enum { JF_NONE = 0, JF_EVENTS, JF_START, JF_DURATION, JF_APPEND, JF_SEGS, JF_UTF8 };

struct json3 {
  struct segment_list *out;
  struct textclean tc;
  struct buf raw; /* the current event's segs, concatenated */
  int has_segs;
  int append;
  double start_ms;
  double dur_ms;
};

static int key_is(const char *k, size_t len, const char *want) { return len == strlen(want) && !memcmp(k, want, len); }

static int json3_key(void *ctx, int node, const char *k, size_t len) {
  (void)ctx;
  if (node == JSONSTREAM_ROOT) return key_is(k, len, "events") ? JF_EVENTS : JF_NONE;
  if (node == J_EVENT) {
    if (key_is(k, len, "tStartMs")) return JF_START;
    if (key_is(k, len, "dDurationMs")) return JF_DURATION;
    if (key_is(k, len, "aAppend")) return JF_APPEND;
    if (key_is(k, len, "segs")) return JF_SEGS;
    return JF_NONE;
  }
  if (node == J_SEG) return key_is(k, len, "utf8") ? JF_UTF8 : JF_NONE;
  return JF_NONE;
}

static int json3_open(void *ctx, int node, int field, int is_array) {
  struct json3 *j = ctx;
  if (node == JSONSTREAM_ROOT && field == JF_EVENTS) return is_array ? J_EVENTS : -EPROTO;
  if (node == J_EVENTS && !is_array) {
    j->raw.len = 0;
    j->has_segs = 0;
    j->append = 0;
    j->start_ms = 0;
    j->dur_ms = 0;
    return J_EVENT;
  }
  if (node == J_EVENT && field == JF_SEGS) {
    if (!is_array) return -EPROTO;
    j->has_segs = 1;
    return J_SEGS;
  }
  if (node == J_SEGS && !is_array) return J_SEG;
  return JSONSTREAM_SKIP;
}

static int json3_close(void *ctx, int node) {
  struct json3 *j = ctx;
  /* Events without segs are window and style records; aAppend events only carry the line break of a roll-up. */
  if (node != J_EVENT || !j->has_segs || j->append) return 0;
  return add_cue(j->out, &j->tc, j->raw.data, j->raw.len, 0, j->start_ms, j->dur_ms);
}

static int json3_scalar(void *ctx, int node, int field, enum jsonstream_kind kind, const char *s, size_t len) {
  struct json3 *j = ctx;
  if (node == J_EVENT) {
    if (field == JF_START || field == JF_DURATION) {
      if (kind != JSONSTREAM_NUMBER) return -EPROTO;
      return parse_time(s, len, 1, field == JF_START ? &j->start_ms : &j->dur_ms);
    }
    if (field == JF_APPEND)
      j->append = (kind == JSONSTREAM_NUMBER && !key_is(s, len, "0")) || (kind == JSONSTREAM_BOOL && len == 4);
    return 0;
  }
  if (node == J_SEG && field == JF_UTF8 && kind == JSONSTREAM_STRING) return buf_append(&j->raw, s, len);
  return 0;
}

static const struct jsonstream_ops json3_ops = {json3_key, json3_open, json3_close, json3_scalar};

static int parse_json3(const char *body, size_t len, struct segment_list *out) {
  struct json3 j = {.out = out, .raw = BUF_INIT};
  /* Strings are not validated by yajl: textclean repairs invalid UTF-8 with U+FFFD, as it does for XML. */
  int rv = jsonstream_parse(body, len, 0, &json3_ops, &j);
  buf_free(&j.raw);
  textclean_free(&j.tc);
  return rv;
}

/* srv1 and srv3 -------------------------------------------------------------------------------------------------- */

struct xml_shape {
  size_t cue_depth;       /* depth of cue elements */
  const char *cue;        /* their name */
  const char *parent;     /* the name of their parent, or NULL for the root */
  const char *start_attr; /* start time */
  const char *dur_attr;   /* duration */
  double scale;           /* attribute unit to milliseconds */
};

static const struct xml_shape srv1 = {2, "text", NULL, "start", "dur", 1000};
static const struct xml_shape srv3 = {3, "p", "body", "t", "d", 1};

static int name_is(const struct xmlscan_token *t, const char *want) {
  return t->name_len == strlen(want) && memcmp(t->name, want, t->name_len) == 0;
}

/* An absent time attribute counts as 0, like json3's absent dDurationMs. */
static int attr_time(const struct xmlscan_token *t, const char *name, double scale, double *ms) {
  const char *v;
  size_t len;
  *ms = 0;
  if (xmlscan_attr(t, name, &v, &len) < 0) return 0;
  return parse_time(v, len, scale, ms);
}

static int parse_xml(const char *body, size_t len, struct segment_list *out) {
  struct xmlscan x;
  struct xmlscan_token t;
  struct textclean tc = {BUF_INIT, BUF_INIT};
  struct buf raw = BUF_INIT;
  const struct xml_shape *shape = NULL;
  int in_parent = 0; /* inside the cues' parent element (srv3 <body>) */
  int in_cue = 0;
  double start_ms = 0, dur_ms = 0;
  int rv;

  xmlscan_init(&x, body, len);
  for (;;) {
    rv = xmlscan_next(&x, &t);
    if (rv < 0 || t.kind == XMLSCAN_EOF) break;
    if (!shape) {
      /* The first token is the root: it names the shape. */
      if (name_is(&t, "transcript"))
        shape = &srv1;
      else if (name_is(&t, "timedtext"))
        shape = &srv3;
      if (!shape) {
        rv = -EPROTO;
        break;
      }
      in_parent = shape->parent == NULL;
      continue;
    }
    if (in_cue) {
      if (t.kind == XMLSCAN_TEXT) {
        rv = buf_append(&raw, t.text, t.text_len);
      } else if ((t.kind == XMLSCAN_START || t.kind == XMLSCAN_EMPTY) && name_is(&t, "br")) {
        rv = buf_append(&raw, " ", 1);
      } else if (t.kind == XMLSCAN_END && t.depth == shape->cue_depth) {
        in_cue = 0;
        rv = add_cue(out, &tc, raw.data, raw.len, 1, start_ms, dur_ms);
      }
      if (rv < 0) break;
      continue;
    }
    if (shape->parent && t.depth == shape->cue_depth - 1 && name_is(&t, shape->parent)) {
      in_parent = t.kind == XMLSCAN_START;
      continue;
    }
    if (in_parent && t.depth == shape->cue_depth && name_is(&t, shape->cue) &&
        (t.kind == XMLSCAN_START || t.kind == XMLSCAN_EMPTY)) {
      rv = attr_time(&t, shape->start_attr, shape->scale, &start_ms);
      if (rv == 0) rv = attr_time(&t, shape->dur_attr, shape->scale, &dur_ms);
      if (rv < 0) break;
      raw.len = 0;
      in_cue = t.kind == XMLSCAN_START;
    }
  }
  buf_free(&raw);
  textclean_free(&tc);
  return rv;
}

/* ---------------------------------------------------------------------------------------------------------------- */

int captions_parse(const char *body, size_t len, struct segment_list *out) {
  memset(out, 0, sizeof(*out));
  if (len > VTS_MAX_UPSTREAM_BODY_BYTES) return -EPROTO;
  size_t i = 0;
  if (len >= 3 && memcmp(body, "\xEF\xBB\xBF", 3) == 0) i = 3;
  while (i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n')) i++;
  int rv = -EPROTO;
  if (i < len && body[i] == '{')
    rv = parse_json3(body + i, len - i, out);
  else if (i < len && body[i] == '<')
    rv = parse_xml(body + i, len - i, out);
  if (rv < 0) segment_list_free(out);
  return rv == -E2BIG ? -EPROTO : rv; /* more cues than a transcript may hold: not a body we serve */
}
