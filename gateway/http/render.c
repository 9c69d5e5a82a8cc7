/*
 * Rendering a cached transcript body in another format. The body is read with yajl's event parser (no tree: a body
 * of 1,500 segments becomes cues as it is read), and times are read from the numbers' own digits, so a cue starts
 * at exactly the millisecond the JSON says: no double ever rounds 2.675 to 2.674.
 */
#include "gateway/http/render.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <yajl/yajl_parse.h>

#include "common/limits.h"
#include "gateway/cache/bodycheck.h"

int render_format_from_name(const char *s, size_t len, enum render_format *out) {
  static const struct {
    const char *name;
    enum render_format format;
  } names[] = {{"json", RENDER_JSON}, {"text", RENDER_TEXT}, {"srt", RENDER_SRT}, {"vtt", RENDER_VTT}};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    if (strlen(names[i].name) == len && memcmp(names[i].name, s, len) == 0) {
      *out = names[i].format;
      return 0;
    }
  }
  return -EINVAL;
}

const char *render_content_type(enum render_format f) {
  switch (f) {
    case RENDER_TEXT:
      return "text/plain; charset=utf-8";
    case RENDER_SRT:
      return "application/x-subrip; charset=utf-8";
    case RENDER_VTT:
      return "text/vtt; charset=utf-8";
    default:
      return "application/json";
  }
}

static int is_ows(char c) { return c == ' ' || c == '\t'; }

/* s[0, len) without surrounding spaces and tabs. */
static const char *trim(const char *s, size_t *len) {
  while (*len > 0 && is_ows(s[0])) {
    s++;
    (*len)--;
  }
  while (*len > 0 && is_ows(s[*len - 1])) (*len)--;
  return s;
}

/*
 * The quality of one media range's parameters ("q=0.5"), in thousandths: 1000 without a q, 0 for a malformed one
 * (a range we cannot read is not a preference).
 */
static int range_quality(const char *params, size_t len) {
  while (len > 0) {
    size_t n = 0;
    while (n < len && params[n] != ';') n++;
    size_t plen = n;
    const char *p = trim(params, &plen);
    if (plen >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
      const char *v = p + 2;
      size_t vlen = plen - 2;
      if (vlen == 0 || vlen > 5 || (v[0] != '0' && v[0] != '1')) return 0;
      int q = (v[0] - '0') * 1000;
      if (vlen > 1) {
        if (v[1] != '.') return 0;
        int scale = 100;
        for (size_t i = 2; i < vlen; i++, scale /= 10) {
          if (v[i] < '0' || v[i] > '9') return 0;
          q += (v[i] - '0') * scale;
        }
      }
      return q > 1000 ? 0 : q;
    }
    params += n < len ? n + 1 : n;
    len -= n < len ? n + 1 : n;
  }
  return 1000;
}

enum render_format render_format_from_accept(const char *accept, size_t len) {
  static const struct {
    const char *type;
    enum render_format format;
  } types[] = {{"text/plain", RENDER_TEXT},   {"application/x-subrip", RENDER_SRT},
               {"text/vtt", RENDER_VTT},      {"application/json", RENDER_JSON},
               {"*/*", RENDER_JSON},          {"text/*", RENDER_JSON},
               {"application/*", RENDER_JSON}};
  enum render_format best = RENDER_JSON;
  int best_q = 0;
  while (accept != NULL && len > 0) {
    size_t n = 0;
    while (n < len && accept[n] != ',') n++;
    const char *semi = memchr(accept, ';', n);
    size_t tlen = semi != NULL ? (size_t)(semi - accept) : n;
    const char *type = trim(accept, &tlen);
    int q = semi != NULL ? range_quality(semi + 1, n - (size_t)(semi + 1 - accept)) : 1000;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
      if (strlen(types[i].type) == tlen && strncasecmp(types[i].type, type, tlen) == 0) {
        if (q > best_q) {
          best_q = q;
          best = types[i].format;
        }
        break;
      }
    }
    accept += n < len ? n + 1 : n;
    len -= n < len ? n + 1 : n;
  }
  return best;
}

/* ---- reading the transcript body ---- */

enum field { FIELD_OTHER = 0, FIELD_TEXT, FIELD_SEGMENTS, FIELD_START, FIELD_DURATION };

struct reader {
  enum render_format format;
  struct buf *out;
  int depth;         /* 1 in the body object, 2 in segments, 3 in a segment */
  int in_segments;   /* the array being read is the body's segments */
  enum field field;  /* the key whose value comes next */
  struct buf text;   /* the segment's text */
  int64_t start_ms;  /* -1 until read */
  int64_t dur_ms;    /* -1 until read */
  unsigned cues;     /* cues written */
  int err;           /* the first error: -EPROTO or -ENOMEM */
  int seen_segments; /* the body had its segments array */
};

/* Writes v in decimal, with leading zeros up to min_digits, into out (room for 20). Returns the length. */
static size_t format_uint(char *out, uint64_t v, size_t min_digits) {
  char digits[20];
  size_t nd = 0;
  do {
    digits[nd++] = (char)('0' + v % 10);
    v /= 10;
  } while (v > 0);
  while (nd < min_digits) digits[nd++] = '0';
  size_t n = 0;
  while (nd > 0) out[n++] = digits[--nd];
  return n;
}

/*
 * Writes ms as HH:MM:SS followed by sep and the milliseconds (hours may run past 99) into out, which has room for
 * 30 characters. Returns the length. By hand rather than with printf: a transcript has thousands of cues.
 */
static size_t format_time(char *out, int64_t ms, char sep) {
  size_t n = format_uint(out, (uint64_t)(ms / 3600000), 2);
  out[n++] = ':';
  n += format_uint(out + n, (uint64_t)(ms / 60000 % 60), 2);
  out[n++] = ':';
  n += format_uint(out + n, (uint64_t)(ms / 1000 % 60), 2);
  out[n++] = sep;
  n += format_uint(out + n, (uint64_t)(ms % 1000), 3);
  return n;
}

/* The WebVTT escape of c, or NULL when c stands for itself. */
static const char *vtt_escape(char c) { return c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : NULL; }

/*
 * Appends a cue's text: line breaks kept, but never an empty line (which would end the cue), and in WebVTT the three
 * characters its cue text reserves escaped. Plain runs are appended whole.
 */
static int put_cue_text(struct buf *b, enum render_format f, const char *s, size_t len) {
  int rv = 0;
  int pending_break = 0;
  size_t i = 0;
  while (i < len && rv == 0) {
    if (s[i] == '\r' || s[i] == '\n') {
      pending_break = 1;
      i++;
      continue;
    }
    if (pending_break) rv = buf_append(b, "\n", 1);
    pending_break = 0;
    size_t run = i;
    while (run < len && s[run] != '\r' && s[run] != '\n' && (f != RENDER_VTT || vtt_escape(s[run]) == NULL)) run++;
    if (rv == 0 && run > i) rv = buf_append(b, s + i, run - i);
    if (rv == 0 && run < len && f == RENDER_VTT && vtt_escape(s[run]) != NULL) rv = buf_puts(b, vtt_escape(s[run++]));
    i = run;
  }
  return rv;
}

/* Whether the text has anything but line breaks and spaces, i.e. makes a cue. */
static int has_content(const char *s, size_t len) {
  for (size_t i = 0; i < len; i++) {
    if (s[i] != '\r' && s[i] != '\n' && s[i] != ' ' && s[i] != '\t') return 1;
  }
  return 0;
}

static int emit_cue(struct reader *r) {
  if (r->start_ms < 0 || r->dur_ms < 0) return -EPROTO;
  if (!has_content(r->text.data, r->text.len)) return 0;
  /* "N\n" and "HH:MM:SS,mmm --> HH:MM:SS,mmm\n", each time at most 30 characters. */
  char head[96];
  size_t n = 0;
  char sep = r->format == RENDER_SRT ? ',' : '.';
  r->cues++;
  if (r->format == RENDER_SRT) {
    n = format_uint(head, r->cues, 1);
    head[n++] = '\n';
  }
  n += format_time(head + n, r->start_ms, sep);
  memcpy(head + n, " --> ", 5);
  n += 5;
  n += format_time(head + n, r->start_ms + r->dur_ms, sep);
  head[n++] = '\n';
  int rv = buf_append(r->out, head, n);
  if (rv == 0) rv = put_cue_text(r->out, r->format, r->text.data, r->text.len);
  if (rv == 0) rv = buf_append(r->out, "\n\n", 2);
  return rv != 0 ? -ENOMEM : 0;
}

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

static int on_number(void *ctx, const char *s, size_t len) {
  struct reader *r = ctx;
  if (r->depth == 3 && r->in_segments && (r->field == FIELD_START || r->field == FIELD_DURATION)) {
    int64_t ms;
    if (bodycheck_seconds_ms(s, len, &ms) != 0) return fail(r, -EPROTO);
    if (r->field == FIELD_START)
      r->start_ms = ms;
    else
      r->dur_ms = ms;
  }
  return on_scalar(r);
}

static int on_string(void *ctx, const unsigned char *s, size_t len) {
  struct reader *r = ctx;
  if (r->field == FIELD_TEXT && r->depth == 1 && r->format == RENDER_TEXT) {
    if (buf_append(r->out, s, len) != 0) return fail(r, -ENOMEM);
  } else if (r->field == FIELD_TEXT && r->depth == 3 && r->in_segments) {
    buf_reset(&r->text);
    if (buf_append(&r->text, s, len) != 0) return fail(r, -ENOMEM);
  }
  return on_scalar(r);
}

static int on_start_map(void *ctx) {
  struct reader *r = ctx;
  r->depth++;
  if (r->depth == 3 && r->in_segments) {
    buf_reset(&r->text);
    r->start_ms = -1;
    r->dur_ms = -1;
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
  } keys[] = {{"text", 1, FIELD_TEXT},
              {"segments", 1, FIELD_SEGMENTS},
              {"text", 3, FIELD_TEXT},
              {"start", 3, FIELD_START},
              {"duration", 3, FIELD_DURATION}};
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
  if (r->depth == 3 && r->in_segments && r->format != RENDER_TEXT) {
    int rv = emit_cue(r);
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

static const yajl_callbacks render_callbacks = {
    on_null, on_bool, NULL, NULL, on_number, on_string, on_start_map, on_key, on_end_map, on_start_array, on_end_array,
};

int render_transcript(enum render_format f, const char *json, size_t len, struct buf *out) {
  if (f != RENDER_TEXT && f != RENDER_SRT && f != RENDER_VTT) return -EINVAL;
  size_t start = out->len;
  struct reader r = {.format = f, .out = out, .text = BUF_INIT};
  int rv = 0;
  if (f == RENDER_VTT) rv = buf_puts(out, "WEBVTT\n\n") != 0 ? -ENOMEM : 0;
  yajl_handle h = rv == 0 ? yajl_alloc(&render_callbacks, NULL, &r) : NULL;
  if (rv == 0 && h == NULL) rv = -ENOMEM;
  if (rv == 0) {
    yajl_status st = yajl_parse(h, (const unsigned char *)json, len);
    if (st == yajl_status_ok) st = yajl_complete_parse(h);
    if (r.err != 0)
      rv = r.err;
    else if (st != yajl_status_ok || !r.seen_segments)
      rv = -EPROTO;
  }
  if (h != NULL) yajl_free(h);
  buf_free(&r.text);
  if (rv != 0) {
    out->len = start;
    if (out->data != NULL) out->data[out->len] = '\0';
  }
  return rv;
}
