/* Strict bounded XML tokenizer (see xmlscan.h). Every loop advances p and stops at end: the scan is linear. */
#include "fetcher/readers/xmlscan.h"

#include <errno.h>
#include <string.h>

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
static int is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':'; }
static int is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.'; }

void xmlscan_init(struct xmlscan *x, const char *body, size_t len) {
  memset(x, 0, sizeof(*x));
  x->p = body;
  x->end = body + len;
  if (len >= 3 && memcmp(body, "\xEF\xBB\xBF", 3) == 0) x->p += 3;
}

static size_t left(const struct xmlscan *x) { return (size_t)(x->end - x->p); }

static void skip_spaces(struct xmlscan *x) {
  while (x->p < x->end && is_space(*x->p)) x->p++;
}

/* Moves past the next occurrence of term, which must exist. */
static int skip_past(struct xmlscan *x, const char *term, size_t term_len) {
  const char *hit = memmem(x->p, left(x), term, term_len);
  if (!hit) return -EPROTO;
  x->p = hit + term_len;
  return 0;
}

static int scan_name(struct xmlscan *x, const char **name, size_t *len) {
  const char *start = x->p;
  if (x->p >= x->end || !is_name_start(*x->p)) return -EPROTO;
  while (x->p < x->end && is_name_char(*x->p)) x->p++;
  *name = start;
  *len = (size_t)(x->p - start);
  return 0;
}

/* Reads the attributes of a start tag up to and including '>' or "/>". */
static int scan_attrs(struct xmlscan *x, struct xmlscan_token *t, int *self_closing) {
  const char *start = x->p;
  *self_closing = 0;
  for (;;) {
    const char *before = x->p;
    skip_spaces(x);
    if (x->p >= x->end) return -EPROTO;
    if (*x->p == '>' || *x->p == '/') {
      t->attrs = start;
      t->attrs_len = (size_t)(x->p - start);
      if (*x->p == '/') {
        if (left(x) < 2 || x->p[1] != '>') return -EPROTO;
        *self_closing = 1;
        x->p++;
      }
      x->p++;
      return 0;
    }
    if (x->p == before) return -EPROTO; /* attributes are separated by whitespace */
    const char *name;
    size_t len;
    if (scan_name(x, &name, &len) < 0) return -EPROTO;
    skip_spaces(x);
    if (x->p >= x->end || *x->p != '=') return -EPROTO;
    x->p++;
    skip_spaces(x);
    if (x->p >= x->end || (*x->p != '"' && *x->p != '\'')) return -EPROTO;
    char quote = *x->p++;
    const char *close = memchr(x->p, quote, left(x));
    if (!close || memchr(x->p, '<', (size_t)(close - x->p))) return -EPROTO;
    x->p = close + 1;
  }
}

static int scan_end_tag(struct xmlscan *x, struct xmlscan_token *t) {
  x->p += 2;
  if (x->depth == 0 || scan_name(x, &t->name, &t->name_len) < 0) return -EPROTO;
  skip_spaces(x);
  if (x->p >= x->end || *x->p != '>') return -EPROTO;
  x->p++;
  size_t d = x->depth - 1;
  if (x->open[d].len != t->name_len || memcmp(x->open[d].name, t->name, t->name_len) != 0) return -EPROTO;
  t->kind = XMLSCAN_END;
  t->depth = x->depth;
  x->depth--;
  if (x->depth == 0) x->root_done = 1;
  return 0;
}

static int scan_start_tag(struct xmlscan *x, struct xmlscan_token *t) {
  x->p++;
  if (x->depth == 0 && x->root_done) return -EPROTO; /* a second root */
  int self_closing;
  if (scan_name(x, &t->name, &t->name_len) < 0 || scan_attrs(x, t, &self_closing) < 0) return -EPROTO;
  if (self_closing) {
    t->kind = XMLSCAN_EMPTY;
    t->depth = x->depth + 1;
    if (x->depth == 0) x->root_done = 1;
    return 0;
  }
  if (x->depth >= VTS_MAX_XML_DEPTH) return -EPROTO;
  x->open[x->depth].name = t->name;
  x->open[x->depth].len = t->name_len;
  x->depth++;
  t->kind = XMLSCAN_START;
  t->depth = x->depth;
  return 0;
}

int xmlscan_next(struct xmlscan *x, struct xmlscan_token *t) {
  memset(t, 0, sizeof(*t));
  for (;;) {
    if (x->depth == 0) skip_spaces(x); /* whitespace around the root is not content */
    if (x->p >= x->end) {
      if (x->depth == 0 && x->root_done) {
        t->kind = XMLSCAN_EOF;
        return 0;
      }
      return -EPROTO;
    }
    if (*x->p != '<') {
      if (x->depth == 0) return -EPROTO; /* text outside the root */
      const char *lt = memchr(x->p, '<', left(x));
      t->kind = XMLSCAN_TEXT;
      t->text = x->p;
      t->text_len = lt ? (size_t)(lt - x->p) : left(x);
      t->depth = x->depth;
      x->p += t->text_len;
      return 0;
    }
    if (left(x) >= 4 && memcmp(x->p, "<!--", 4) == 0) {
      x->p += 4;
      if (skip_past(x, "-->", 3) < 0) return -EPROTO;
      continue;
    }
    if (left(x) >= 2 && x->p[1] == '?') {
      x->p += 2;
      if (skip_past(x, "?>", 2) < 0) return -EPROTO;
      continue;
    }
    /* DOCTYPE (entity declarations) and CDATA have no place in a caption body. */
    if (left(x) >= 2 && x->p[1] == '!') return -EPROTO;
    if (left(x) >= 2 && x->p[1] == '/') return scan_end_tag(x, t);
    return scan_start_tag(x, t);
  }
}

int xmlscan_attr(const struct xmlscan_token *t, const char *name, const char **val, size_t *len) {
  size_t want = strlen(name);
  const char *p = t->attrs, *end = t->attrs + t->attrs_len;
  /* The syntax was checked by scan_attrs, so this walk only needs to find the pieces again. */
  while (p < end) {
    while (p < end && is_space(*p)) p++;
    const char *n = p;
    while (p < end && is_name_char(*p)) p++;
    size_t nlen = (size_t)(p - n);
    while (p < end && *p != '"' && *p != '\'') p++;
    if (p >= end) break;
    char quote = *p++;
    const char *v = p;
    while (p < end && *p != quote) p++;
    if (nlen == want && memcmp(n, name, want) == 0) {
      *val = v;
      *len = (size_t)(p - v);
      return 0;
    }
    p++;
  }
  return -ENOENT;
}
