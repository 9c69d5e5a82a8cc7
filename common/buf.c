#include "common/buf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int buf_reserve(struct buf *b, size_t extra) {
  if (extra > ((size_t)-1) / 2 - b->len) return -ENOMEM;
  size_t need = b->len + extra + 1;
  if (need <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need) cap *= 2;
  char *p = realloc(b->data, cap);
  if (p == NULL) return -ENOMEM;
  b->data = p;
  b->cap = cap;
  return 0;
}

int buf_append(struct buf *b, const void *data, size_t len) {
  int rv = buf_reserve(b, len);
  if (rv != 0) return rv;
  if (len > 0) memcpy(b->data + b->len, data, len);
  b->len += len;
  b->data[b->len] = '\0';
  return 0;
}

int buf_puts(struct buf *b, const char *s) { return buf_append(b, s, strlen(s)); }

__attribute__((format(printf, 2, 0))) static int vprintf_append(struct buf *b, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return -EINVAL;
  int rv = buf_reserve(b, (size_t)n);
  if (rv != 0) return rv;
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
  return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rv = vprintf_append(b, fmt, ap);
  va_end(ap);
  return rv;
}

/*
 * The bytes a JSON string holds as they are: not a control character, DEL, '"' (0x22) or '\\' (0x5c), and not a
 * byte of a multi-byte character either (those are checked for valid UTF-8 first).
 */
static const unsigned char json_plain_table[256] = {
    [0x20 ... 0x21] = 1,
    [0x23 ... 0x5b] = 1,
    [0x5d ... 0x7e] = 1,
};
static inline int json_plain(unsigned char c) { return json_plain_table[c]; }

/* The length of the valid UTF-8 character (RFC 3629: shortest form, no surrogates) s begins with, or 0. */
static size_t utf8_char_len(const unsigned char *s, size_t len) {
  unsigned char c = s[0];
  size_t n;
  unsigned char lo = 0x80, hi = 0xbf; /* the range of the second byte */
  if (c >= 0xc2 && c <= 0xdf)
    n = 2;
  else if (c >= 0xe0 && c <= 0xef)
    n = 3;
  else if (c >= 0xf0 && c <= 0xf4)
    n = 4;
  else
    return 0;
  if (c == 0xe0) lo = 0xa0;
  if (c == 0xed) hi = 0x9f;
  if (c == 0xf0) lo = 0x90;
  if (c == 0xf4) hi = 0x8f;
  if (len < n || s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  return n;
}

int buf_json_escape(struct buf *b, const char *s, size_t len) {
  static const char hex[] = "0123456789abcdef";
  int rv = buf_reserve(b, len);
  if (rv != 0) return rv;
  /* The usual case, nothing to escape: one copy into the room just reserved. */
  size_t plain = 0;
  while (plain < len && json_plain((unsigned char)s[plain])) plain++;
  if (plain == len) {
    if (len > 0) memcpy(b->data + b->len, s, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
  }
  for (size_t i = 0; i < len; i++) {
    /* The characters that need no escape go in runs, one append each. */
    size_t run = i;
    while (run < len && json_plain((unsigned char)s[run])) run++;
    if (run > i) {
      rv = buf_append(b, s + i, run - i);
      if (rv != 0) return rv;
      i = run;
      if (i == len) break;
    }
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x80) {
      /* A valid character goes as it is; each byte of an invalid sequence becomes U+FFFD, so the line stays JSON. */
      size_t ulen = utf8_char_len((const unsigned char *)s + i, len - i);
      rv = ulen > 0 ? buf_append(b, s + i, ulen) : buf_append(b, "\\ufffd", 6);
      if (rv != 0) return rv;
      if (ulen > 1) i += ulen - 1;
      continue;
    }
    char esc[7];
    size_t n = 0;
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      n = 2;
    } else if (c == '\n') {
      memcpy(esc, "\\n", 2);
      n = 2;
    } else if (c == '\r') {
      memcpy(esc, "\\r", 2);
      n = 2;
    } else if (c == '\t') {
      memcpy(esc, "\\t", 2);
      n = 2;
    } else if (c < 0x20 || c == 0x7f) {
      esc[0] = '\\';
      esc[1] = 'u';
      esc[2] = '0';
      esc[3] = '0';
      esc[4] = hex[c >> 4];
      esc[5] = hex[c & 15];
      n = 6;
    }
    rv = buf_append(b, esc, n);
    if (rv != 0) return rv;
  }
  return 0;
}

void buf_reset(struct buf *b) {
  b->len = 0;
  if (b->data) b->data[0] = '\0';
}

void buf_free(struct buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

char *buf_steal(struct buf *b, size_t *len) {
  char *p = b->data;
  if (len) *len = b->len;
  b->data = NULL;
  b->len = b->cap = 0;
  return p;
}

int buf_read_file(struct buf *b, const char *path, size_t max) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t start = b->len;
  int rc = 0;
  for (;;) {
    if (b->len - start > max) {
      rc = -EFBIG;
      break;
    }
    rc = buf_reserve(b, 64 * 1024);
    if (rc != 0) break;
    ssize_t got = read(fd, b->data + b->len, b->cap - b->len - 1);
    if (got < 0) {
      if (errno == EINTR) continue;
      rc = -errno;
      break;
    }
    if (got == 0) break;
    b->len += (size_t)got;
    b->data[b->len] = '\0';
  }
  close(fd);
  return rc;
}
