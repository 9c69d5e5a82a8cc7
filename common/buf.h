/* A growable byte buffer. */
#ifndef VTS_BUF_H
#define VTS_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct buf {
  char *data; /* always NUL-terminated when len > 0 or after any append */
  size_t len;
  size_t cap;
};

#define BUF_INIT \
  { NULL, 0, 0 }

/* Makes room for extra more bytes (plus a NUL). Returns 0, or -ENOMEM. */
int buf_reserve(struct buf *b, size_t extra);
/* Appends len bytes. Returns 0, or -ENOMEM. */
int buf_append(struct buf *b, const void *data, size_t len);
/* Appends a NUL-terminated string. */
int buf_puts(struct buf *b, const char *s);
/* Appends printf-style text. */
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * Appends s (len bytes) as the inside of a JSON string: quotes, backslashes and control characters escaped, and each
 * byte that is not part of a valid UTF-8 character written as \ufffd (JSON text is UTF-8, RFC 8259 8.1).
 */
int buf_json_escape(struct buf *b, const char *s, size_t len);
/* Empties the buffer, keeping its memory. */
void buf_reset(struct buf *b);
/* Releases the memory; the buffer is empty and reusable after. */
void buf_free(struct buf *b);
/*
 * Appends the whole file at path, at most max bytes of it. Returns 0, -EFBIG for a larger file (what was read stays),
 * or -errno of open or read (-ENOENT for a missing file).
 */
int buf_read_file(struct buf *b, const char *path, size_t max);
/* Hands the bytes to the caller (who frees them) and empties the buffer. */
char *buf_steal(struct buf *b, size_t *len);

#endif
