#include "gateway/http/segments.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "common/util.h"
#include "gateway/cache/bodycheck.h"

enum field { FIELD_OTHER = 0, FIELD_LANGUAGE, FIELD_SOURCE, FIELD_SEGMENTS, FIELD_TEXT, FIELD_START, FIELD_DURATION };

struct reader {
  struct segments_doc *doc;
  int depth; /* 1 the body, 2 the segments array, 3 a segment */
  int in_segments;
  int seen_segments;
  enum field field;
  struct segments_item cur;
  int has_text, has_start, has_duration;
  size_t cap;
  int err;
};

static int fail(struct reader *r, int err) {
  if (r->err == 0) r->err = err;
  return 0; /* stops the parse */
}

static int on_scalar(struct reader *r) {
  if (r->depth == 2 && r->in_segments) return fail(r, -EPROTO);
  r->field = FIELD_OTHER;
  return 1;
}

static int on_null(void *ctx) { return on_scalar(ctx); }
static int on_bool(void *ctx, int v) {
  (void)v;
  return on_scalar(ctx);
}

static int on_number(void *ctx, const char *s, size_t len) {
  struct reader *r = ctx;
  if (r->depth == 3 && r->in_segments && (r->field == FIELD_START || r->field == FIELD_DURATION)) {
    int64_t ms;
    if (len >= SEGMENTS_TIME_BYTES || bodycheck_seconds_ms(s, len, &ms) != 0) return fail(r, -EPROTO);
    char *dst = r->field == FIELD_START ? r->cur.start : r->cur.duration;
    memcpy(dst, s, len);
    dst[len] = '\0';
    if (r->field == FIELD_START) {
      r->cur.start_ms = ms;
      r->has_start = 1;
    } else {
      r->cur.end_ms = ms; /* the duration, until the segment ends */
      r->has_duration = 1;
    }
  }
  return on_scalar(r);
}

static void copy_field(char *dst, size_t cap, const unsigned char *s, size_t len) {
  if (len >= cap) len = cap - 1;
  memcpy(dst, s, len);
  dst[len] = '\0';
}

static int on_string(void *ctx, const unsigned char *s, size_t len) {
  struct reader *r = ctx;
  if (r->depth == 1 && r->field == FIELD_LANGUAGE) {
    copy_field(r->doc->language, sizeof(r->doc->language), s, len);
  } else if (r->depth == 1 && r->field == FIELD_SOURCE) {
    copy_field(r->doc->source, sizeof(r->doc->source), s, len);
  } else if (r->depth == 3 && r->in_segments && r->field == FIELD_TEXT) {
    r->cur.text_at = r->doc->pool.len;
    r->cur.text_len = len;
    r->has_text = 1;
    if (buf_append(&r->doc->pool, s, len) != 0) return fail(r, -ENOMEM);
  }
  return on_scalar(r);
}

static int on_start_map(void *ctx) {
  struct reader *r = ctx;
  r->depth++;
  if (r->depth == 3 && r->in_segments) {
    memset(&r->cur, 0, sizeof(r->cur));
    r->has_text = r->has_start = r->has_duration = 0;
  }
  if (r->depth > 3) return fail(r, -EPROTO);
  r->field = FIELD_OTHER;
  return 1;
}

static int on_key(void *ctx, const unsigned char *key, size_t len) {
  struct reader *r = ctx;
  static const struct {
    const char *name;
    int depth;
    enum field field;
  } keys[] = {{"language", 1, FIELD_LANGUAGE}, {"source", 1, FIELD_SOURCE}, {"segments", 1, FIELD_SEGMENTS},
              {"text", 3, FIELD_TEXT},         {"start", 3, FIELD_START},   {"duration", 3, FIELD_DURATION}};
  r->field = FIELD_OTHER;
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
    if (keys[i].depth == r->depth && strlen(keys[i].name) == len && memcmp(keys[i].name, key, len) == 0) {
      r->field = keys[i].field;
      break;
    }
  }
  return 1;
}

static int on_end_map(void *ctx) {
  struct reader *r = ctx;
  if (r->depth == 3 && r->in_segments) {
    if (!r->has_text || !r->has_start || !r->has_duration) return fail(r, -EPROTO);
    struct segments_doc *doc = r->doc;
    if (doc->n == r->cap) {
      size_t ncap = r->cap ? r->cap * 2 : 256;
      struct segments_item *ns = realloc(doc->seg, ncap * sizeof(*ns));
      if (ns == NULL) return fail(r, -ENOMEM);
      doc->seg = ns;
      r->cap = ncap;
    }
    r->cur.end_ms += r->cur.start_ms;
    doc->seg[doc->n++] = r->cur;
  }
  r->depth--;
  r->field = FIELD_OTHER;
  return 1;
}

static int on_start_array(void *ctx) {
  struct reader *r = ctx;
  if (r->depth != 1 || r->field != FIELD_SEGMENTS) return fail(r, -EPROTO);
  r->depth = 2;
  r->in_segments = 1;
  r->seen_segments = 1;
  return 1;
}

static int on_end_array(void *ctx) {
  struct reader *r = ctx;
  r->depth = 1;
  r->in_segments = 0;
  r->field = FIELD_OTHER;
  return 1;
}

static const yajl_callbacks segment_callbacks = {
    on_null, on_bool, NULL, NULL, on_number, on_string, on_start_map, on_key, on_end_map, on_start_array, on_end_array,
};

void segments_free(struct segments_doc *doc) {
  free(doc->seg);
  buf_free(&doc->pool);
  memset(doc, 0, sizeof(*doc));
}

int segments_read(const char *json, size_t len, struct segments_doc *doc) {
  memset(doc, 0, sizeof(*doc));
  struct reader r = {.doc = doc};
  yajl_handle h = yajl_alloc(&segment_callbacks, NULL, &r);
  if (h == NULL) return -ENOMEM;
  yajl_status st = yajl_parse(h, (const unsigned char *)json, len);
  if (st == yajl_status_ok) st = yajl_complete_parse(h);
  yajl_free(h);
  int rv = r.err != 0 ? r.err : st != yajl_status_ok || !r.seen_segments ? -EPROTO : 0;
  if (rv == 0 && doc->pool.data == NULL) rv = buf_reserve(&doc->pool, 1) != 0 ? -ENOMEM : 0;
  if (rv != 0) segments_free(doc);
  return rv;
}

size_t segments_chars(const char *s, size_t len) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++)
    if (((unsigned char)s[i] & 0xC0) != 0x80) n++;
  return n;
}

size_t segments_stamp(int64_t ms, char out[24]) {
  int64_t s = ms / 1000;
  struct strb b = strb_init(out, 24);
  strb_puts(&b, "[");
  if (s >= 3600) {
    strb_u64(&b, (uint64_t)(s / 3600));
    strb_puts(&b, ":");
    if ((s / 60) % 60 < 10) strb_puts(&b, "0");
  }
  strb_u64(&b, (uint64_t)((s / 60) % 60));
  strb_puts(&b, s % 60 < 10 ? ":0" : ":");
  strb_u64(&b, (uint64_t)(s % 60));
  strb_puts(&b, "] ");
  return b.len;
}

/* The characters of a text once written as a JSON string's contents: an escape counts as its characters. */
static size_t json_chars(const char *s, size_t len) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if ((c & 0xC0) == 0x80) continue;
    n += c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' ? 2 : c < 0x20 ? 6 : 1;
  }
  return n;
}

size_t segments_cost(const struct segments_doc *doc, size_t i, int as_text) {
  const struct segments_item *g = &doc->seg[i];
  if (as_text) {
    char stamp[24];
    return segments_stamp(g->start_ms, stamp) + segments_chars(segments_text(doc, i), g->text_len) + 1;
  }
  /* {"text":"...","start":S,"duration":D}, */
  return 33 + json_chars(segments_text(doc, i), g->text_len) + strlen(g->start) + strlen(g->duration);
}

size_t segments_page_end(const struct segments_doc *doc, size_t from, size_t max_chars, int as_text) {
  size_t used = segments_cost(doc, from, as_text);
  size_t end = from + 1;
  while (end < doc->n) {
    size_t c = segments_cost(doc, end, as_text);
    if (used + c > max_chars) break;
    used += c;
    end++;
  }
  return end;
}
