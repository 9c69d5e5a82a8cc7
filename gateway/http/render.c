/*
 * Rendering a cached transcript body in another format. The body is read by the one segment reader, segments_scan
 * (yajl's event parser, no tree: a body of 1,500 segments becomes cues as it is read), and times are read from the
 * numbers' own digits, so a cue starts at exactly the millisecond the JSON says: no double ever rounds 2.675 to 2.674.
 */
#include "gateway/http/render.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "common/limits.h"
#include "gateway/http/segments.h"

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

/* A rendering: the format and where it goes. */
struct reader {
  enum render_format format;
  struct buf *out;
  unsigned cues; /* cues written */
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

/* A segment becomes a cue (SubRip, WebVTT): it must have its times, and makes one when its text has content. */
static int on_segment(void *ctx, const struct segments_seen *seg) {
  struct reader *r = ctx;
  if (seg->start_ms < 0 || seg->duration_ms < 0) return -EPROTO;
  if (!has_content(seg->text, seg->text_len)) return 0;
  /* "N\n" and "HH:MM:SS,mmm --> HH:MM:SS,mmm\n", each time at most 30 characters. */
  char head[96];
  size_t n = 0;
  char sep = r->format == RENDER_SRT ? ',' : '.';
  r->cues++;
  if (r->format == RENDER_SRT) {
    n = format_uint(head, r->cues, 1);
    head[n++] = '\n';
  }
  n += format_time(head + n, seg->start_ms, sep);
  memcpy(head + n, " --> ", 5);
  n += 5;
  n += format_time(head + n, seg->start_ms + seg->duration_ms, sep);
  head[n++] = '\n';
  int rv = buf_append(r->out, head, n);
  if (rv == 0) rv = put_cue_text(r->out, r->format, seg->text, seg->text_len);
  if (rv == 0) rv = buf_append(r->out, "\n\n", 2);
  return rv != 0 ? -ENOMEM : 0;
}

/* The body's own text is the plain text format. */
static int on_member(void *ctx, enum segments_member m, const char *s, size_t len) {
  struct reader *r = ctx;
  if (m == SEGMENTS_TEXT && buf_append(r->out, s, len) != 0) return -ENOMEM;
  return 0;
}

int render_transcript(enum render_format f, const char *json, size_t len, struct buf *out) {
  static const struct segments_sink as_text = {on_member, NULL, 0}, as_cues = {NULL, on_segment, 0};
  if (f != RENDER_TEXT && f != RENDER_SRT && f != RENDER_VTT) return -EINVAL;
  size_t start = out->len;
  struct reader r = {.format = f, .out = out};
  int rv = 0;
  if (f == RENDER_VTT) rv = buf_puts(out, "WEBVTT\n\n") != 0 ? -ENOMEM : 0;
  if (rv == 0) rv = segments_scan(json, len, f == RENDER_TEXT ? &as_text : &as_cues, &r);
  if (rv != 0) {
    out->len = start;
    if (out->data != NULL) out->data[out->len] = '\0';
  }
  return rv;
}
