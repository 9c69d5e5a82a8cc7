/* Cue text cleaning (see textclean.h). Every pass writes at most as many bytes as the sizes reserved for it. */
#include "fetcher/readers/textclean.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define REPLACEMENT 0xFFFDu

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* A code point a reference may name: never NUL, a surrogate or past Unicode. */
static uint32_t checked_cp(uint32_t cp) {
  if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return REPLACEMENT;
  return cp;
}

/*
 * Recognises a character reference at s (s[0] == '&'). Returns its length with the code point in *cp, or 0.
 * Digits are bounded (7 decimal, 6 hex) so a long run of digits cannot overflow and is simply not a reference.
 */
static size_t entity_at(const char *s, size_t len, uint32_t *cp) {
  static const struct {
    const char *name;
    size_t len;
    uint32_t cp;
  } named[] = {{"&amp;", 5, '&'}, {"&lt;", 4, '<'}, {"&gt;", 4, '>'}, {"&quot;", 6, '"'}, {"&apos;", 6, '\''}};
  if (len >= 2 && s[1] != '#') {
    for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
      if (len >= named[i].len && memcmp(s, named[i].name, named[i].len) == 0) {
        *cp = named[i].cp;
        return named[i].len;
      }
    }
    return 0;
  }
  if (len < 4) return 0;
  size_t i = 2;
  uint32_t v = 0;
  if (s[2] == 'x' || s[2] == 'X') {
    for (i = 3; i < len && i < 3 + 6 && util_hex_value(s[i]) >= 0; i++) v = v * 16 + (uint32_t)util_hex_value(s[i]);
    if (i == 3) return 0;
  } else {
    for (; i < len && i < 2 + 7 && is_digit(s[i]); i++) v = v * 10 + (uint32_t)(s[i] - '0');
    if (i == 2) return 0;
  }
  if (i >= len || s[i] != ';') return 0;
  *cp = checked_cp(v);
  return i + 1;
}

static size_t put_utf8(char *dst, uint32_t cp) {
  if (cp < 0x80) {
    dst[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    dst[0] = (char)(0xC0 | (cp >> 6));
    dst[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    dst[0] = (char)(0xE0 | (cp >> 12));
    dst[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    dst[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  dst[0] = (char)(0xF0 | (cp >> 18));
  dst[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  dst[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  dst[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/*
 * Decodes one well-formed UTF-8 sequence at s (s[0] >= 0x80) per RFC 3629: no overlong forms, no surrogates, nothing
 * past U+10FFFF. Returns its length with the code point in *cp, or 0.
 */
static size_t utf8_at(const unsigned char *s, size_t len, uint32_t *cp) {
  unsigned char c = s[0];
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (len < n || s[1] < lo || s[1] > hi) return 0;
  uint32_t v = c & (0x7F >> n);
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    v = (v << 6) | (s[i] & 0x3F);
  }
  *cp = v;
  return n;
}

/*
 * Copies the text from *s up to the next c (or to end) to dst + *o and advances both. Returns whether a c is next
 * (at *s) for the caller's pass to handle.
 */
static int copy_until(char *dst, size_t *o, const char **s, const char *end, char c) {
  const char *at = memchr(*s, c, (size_t)(end - *s));
  size_t plain = at ? (size_t)(at - *s) : (size_t)(end - *s);
  memcpy(dst + *o, *s, plain);
  *o += plain;
  *s += plain;
  return at != NULL;
}

/* Writes s with references decoded into dst (at least len bytes: a reference never decodes longer than itself). */
static size_t decode_refs(char *dst, const char *s, size_t len) {
  size_t o = 0;
  const char *end = s + len;
  while (s < end) {
    if (!copy_until(dst, &o, &s, end, '&')) break;
    uint32_t cp;
    size_t n = entity_at(s, (size_t)(end - s), &cp);
    if (n) {
      o += put_utf8(dst + o, cp);
      s += n;
    } else {
      dst[o++] = *s++;
    }
  }
  return o;
}

static int has_ref(const char *s, size_t len) {
  const char *end = s + len;
  uint32_t cp;
  while (s < end) {
    const char *amp = memchr(s, '&', (size_t)(end - s));
    if (!amp) return 0;
    if (entity_at(amp, (size_t)(end - amp), &cp)) return 1;
    s = amp + 1;
  }
  return 0;
}

/*
 * Writes s without tags into dst (at least len bytes). A tag is '<' then a letter or '/', up to the next '>' with no
 * '<' before it; anything else ("a < b") stays text. <br> becomes a space so that the words around it stay apart.
 */
static size_t strip_tags(char *dst, const char *s, size_t len) {
  size_t o = 0;
  const char *end = s + len;
  while (s < end) {
    if (!copy_until(dst, &o, &s, end, '<')) break;
    const char *gt = NULL;
    if (s + 1 < end && (is_alpha(s[1]) || s[1] == '/')) {
      for (const char *q = s + 1; q < end && *q != '<'; q++) {
        if (*q == '>') {
          gt = q;
          break;
        }
      }
    }
    if (!gt) {
      dst[o++] = *s++;
      continue;
    }
    const char *name = s[1] == '/' ? s + 2 : s + 1;
    if (gt - name >= 2 && (name[0] == 'b' || name[0] == 'B') && (name[1] == 'r' || name[1] == 'R') &&
        (gt - name == 2 || !is_alpha(name[2])))
      dst[o++] = ' ';
    s = gt + 1;
  }
  return o;
}

/*
 * Writes s into dst (at least 3 * len bytes: a stray byte becomes a 3-byte U+FFFD) as valid UTF-8 with runs of
 * whitespace and control characters turned into one space and both ends trimmed.
 */
static size_t normalize(char *dst, const char *s, size_t len) {
  const unsigned char *p = (const unsigned char *)s, *end = p + len;
  size_t o = 0;
  int space = 0;
  while (p < end) {
    uint32_t cp = *p;
    size_t n = 1;
    if (cp >= 0x80) {
      n = utf8_at(p, (size_t)(end - p), &cp);
      if (!n) {
        cp = REPLACEMENT;
        n = 1;
      }
    }
    int blank = cp <= 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0x2028 || cp == 0x2029;
    if (blank) {
      space = 1;
    } else {
      if (space && o) dst[o++] = ' ';
      space = 0;
      if (cp == REPLACEMENT && n == 1)
        o += put_utf8(dst + o, cp);
      else {
        memcpy(dst + o, p, n);
        o += n;
      }
    }
    p += n;
  }
  return o;
}

static int reserve(struct buf *b, size_t n) {
  b->len = 0;
  return buf_reserve(b, n);
}

int textclean_cue(struct textclean *tc, const char *s, size_t len, int markup, char **out) {
  *out = NULL;
  /* Empty text cleans to nothing; returning here also keeps every pass below from offsetting a NULL s or buffer. */
  if (len == 0) return 0;
  if (len > (SIZE_MAX - 1) / 3) return -ENOMEM;
  const char *cur = s;
  size_t cur_len = len;
  if (markup) {
    if (reserve(&tc->a, len) < 0 || reserve(&tc->b, len) < 0) return -ENOMEM;
    cur_len = decode_refs(tc->a.data, s, len);
    cur = tc->a.data;
    if (has_ref(cur, cur_len)) {
      cur_len = decode_refs(tc->b.data, cur, cur_len);
      cur = tc->b.data;
    }
    char *dst = cur == tc->a.data ? tc->b.data : tc->a.data;
    cur_len = strip_tags(dst, cur, cur_len);
    cur = dst;
  }
  /* normalize cannot run in place (it may grow), so it writes into a fresh string sized for the worst case. */
  char *text = malloc(cur_len * 3 + 1);
  if (!text) return -ENOMEM;
  size_t n = normalize(text, cur, cur_len);
  if (n == 0) {
    free(text);
    return 0;
  }
  text[n] = '\0';
  /* Shrink only when the worst-case reserve was mostly unused, to keep 1,500 cues cheap. */
  if (n + 64 < cur_len * 3) {
    char *shrunk = realloc(text, n + 1);
    if (shrunk) text = shrunk;
  }
  *out = text;
  return 0;
}

void textclean_free(struct textclean *tc) {
  buf_free(&tc->a);
  buf_free(&tc->b);
}

void textclean_copy(char *dst, size_t cap, const char *s, size_t len) {
  if (cap == 0) return;
  dst[0] = '\0';
  struct textclean tc = {BUF_INIT, BUF_INIT}; /* unused without markup: nothing to free */
  char *clean = NULL;
  if (textclean_cue(&tc, s, len, 0, &clean) < 0 || !clean) return;
  size_t n = strlen(clean);
  if (n >= cap) {
    n = cap - 1;
    /* Back off to the start of a character so the copy stays valid UTF-8. */
    while (n > 0 && ((unsigned char)clean[n] & 0xC0) == 0x80) n--;
  }
  memcpy(dst, clean, n);
  dst[n] = '\0';
  free(clean);
}
