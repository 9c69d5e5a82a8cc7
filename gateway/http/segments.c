#include "gateway/http/segments.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "common/util.h"
#include "gateway/cache/bodycheck.h"

enum field { FIELD_OTHER = 0, FIELD_MEMBER, FIELD_SEGMENTS, FIELD_TEXT, FIELD_START, FIELD_DURATION };

struct reader {
  const struct segments_sink *sink;
  void *ctx;
  int depth; /* 1 the body, 2 the segments array, 3 a segment */
  int in_segments;
  int seen_segments;
  enum field field;            /* the key whose value comes next */
  enum segments_member member; /* with FIELD_MEMBER: which */
  struct segments_seen seen;   /* the segment being read; its text is kept in text */
  struct buf text;
  int err;
};

static int fail(struct reader *r, int err) {
  if (r->err == 0) r->err = err;
  return 0; /* stops the parse */
}

static int on_scalar(struct reader *r) {
  /* A scalar is a value only inside an object; one directly in the segments array is not a segment. */
  if (r->depth == 2 && r->in_segments) return fail(r, -EPROTO);
  r->field = FIELD_OTHER;
  return 1;
}

static int on_null(void *ctx) { return on_scalar(ctx); }
static int on_bool(void *ctx, int v) {
  (void)v;
  return on_scalar(ctx);
}

static void keep_digits(char *dst, size_t *dst_len, const char *s, size_t len) {
  size_t n = len < SEGMENTS_TIME_BYTES ? len : SEGMENTS_TIME_BYTES - 1;
  memcpy(dst, s, n);
  dst[n] = '\0';
  *dst_len = len;
}

static int on_number(void *ctx, const char *s, size_t len) {
  struct reader *r = ctx;
  if (r->depth == 3 && r->in_segments && (r->field == FIELD_START || r->field == FIELD_DURATION)) {
    int64_t ms;
    if (bodycheck_seconds_ms(s, len, &ms) != 0) return fail(r, -EPROTO);
    if (r->field == FIELD_START) {
      r->seen.start_ms = ms;
      if (r->sink->digits) keep_digits(r->seen.start, &r->seen.start_len, s, len);
    } else {
      r->seen.duration_ms = ms;
      if (r->sink->digits) keep_digits(r->seen.duration, &r->seen.duration_len, s, len);
    }
  }
  return on_scalar(r);
}

static int on_string(void *ctx, const unsigned char *s, size_t len) {
  struct reader *r = ctx;
  if (r->depth == 1 && r->field == FIELD_MEMBER && r->sink->member != NULL) {
    int rv = r->sink->member(r->ctx, r->member, (const char *)s, len);
    if (rv != 0) return fail(r, rv);
  } else if (r->depth == 3 && r->in_segments && r->field == FIELD_TEXT && r->sink->segment != NULL) {
    buf_reset(&r->text);
    if (buf_append(&r->text, s, len) != 0) return fail(r, -ENOMEM);
    r->seen.has_text = 1;
  }
  return on_scalar(r);
}

static int on_start_map(void *ctx) {
  struct reader *r = ctx;
  r->depth++;
  if (r->depth == 3 && r->in_segments) {
    buf_reset(&r->text);
    r->seen.has_text = 0;
    r->seen.start_ms = r->seen.duration_ms = -1;
    r->seen.start_len = r->seen.duration_len = 0;
    r->seen.start[0] = r->seen.duration[0] = '\0';
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
    enum segments_member member;
  } keys[] = {/* a segment's first: they are read thousands of times a body */
              {"text", 3, FIELD_TEXT, 0},
              {"start", 3, FIELD_START, 0},
              {"duration", 3, FIELD_DURATION, 0},
              {"text", 1, FIELD_MEMBER, SEGMENTS_TEXT},
              {"segments", 1, FIELD_SEGMENTS, 0},
              {"language", 1, FIELD_MEMBER, SEGMENTS_LANGUAGE},
              {"source", 1, FIELD_MEMBER, SEGMENTS_SOURCE}};
  r->field = FIELD_OTHER;
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
    if (keys[i].depth == r->depth && strlen(keys[i].name) == len && memcmp(keys[i].name, key, len) == 0) {
      r->field = keys[i].field;
      r->member = keys[i].member;
      break;
    }
  }
  return 1;
}

static int on_end_map(void *ctx) {
  struct reader *r = ctx;
  if (r->depth == 3 && r->in_segments && r->sink->segment != NULL) {
    r->seen.text = r->text.data;
    r->seen.text_len = r->text.len;
    int rv = r->sink->segment(r->ctx, &r->seen);
    if (rv != 0) return fail(r, rv);
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

int segments_scan(const char *json, size_t len, const struct segments_sink *sink, void *ctx) {
  struct reader r = {.sink = sink, .ctx = ctx, .text = BUF_INIT};
  yajl_handle h = yajl_alloc(&segment_callbacks, NULL, &r);
  if (h == NULL) return -ENOMEM;
  yajl_status st = yajl_parse(h, (const unsigned char *)json, len);
  if (st == yajl_status_ok) st = yajl_complete_parse(h);
  yajl_free(h);
  buf_free(&r.text);
  return r.err != 0 ? r.err : st != yajl_status_ok || !r.seen_segments ? -EPROTO : 0;
}

/* segments_read's sink: the body's language and source, and every segment, which must have its three members. */
struct collect {
  struct segments_doc *doc;
  size_t cap;
};

static void copy_field(char *dst, size_t cap, const char *s, size_t len) {
  if (len >= cap) len = cap - 1;
  memcpy(dst, s, len);
  dst[len] = '\0';
}

static int collect_member(void *ctx, enum segments_member m, const char *s, size_t len) {
  struct segments_doc *doc = ((struct collect *)ctx)->doc;
  if (m == SEGMENTS_LANGUAGE)
    copy_field(doc->language, sizeof(doc->language), s, len);
  else if (m == SEGMENTS_SOURCE)
    copy_field(doc->source, sizeof(doc->source), s, len);
  return 0;
}

static int collect_segment(void *ctx, const struct segments_seen *seg) {
  struct collect *c = ctx;
  struct segments_doc *doc = c->doc;
  if (!seg->has_text || seg->start_ms < 0 || seg->duration_ms < 0) return -EPROTO;
  if (seg->start_len >= SEGMENTS_TIME_BYTES || seg->duration_len >= SEGMENTS_TIME_BYTES) return -EPROTO;
  if (doc->n == c->cap) {
    size_t ncap = c->cap ? c->cap * 2 : 256;
    struct segments_item *ns = realloc(doc->seg, ncap * sizeof(*ns));
    if (ns == NULL) return -ENOMEM;
    doc->seg = ns;
    c->cap = ncap;
  }
  struct segments_item *it = &doc->seg[doc->n];
  memset(it, 0, sizeof(*it));
  it->text_at = doc->pool.len;
  it->text_len = seg->text_len;
  if (buf_append(&doc->pool, seg->text, seg->text_len) != 0) return -ENOMEM;
  memcpy(it->start, seg->start, sizeof(it->start));
  memcpy(it->duration, seg->duration, sizeof(it->duration));
  it->start_ms = seg->start_ms;
  it->end_ms = seg->start_ms + seg->duration_ms;
  doc->n++;
  return 0;
}

void segments_free(struct segments_doc *doc) {
  free(doc->seg);
  buf_free(&doc->pool);
  memset(doc, 0, sizeof(*doc));
}

int segments_read(const char *json, size_t len, struct segments_doc *doc) {
  static const struct segments_sink sink = {collect_member, collect_segment, 1};
  memset(doc, 0, sizeof(*doc));
  struct collect c = {.doc = doc};
  int rv = segments_scan(json, len, &sink, &c);
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
