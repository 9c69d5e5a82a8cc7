/* Small helpers: clocks, time formatting, randomness, digests, strict number parsing. */
#ifndef VTS_UTIL_H
#define VTS_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* Monotonic milliseconds, for deadlines and durations. */
uint64_t util_now_ms(void);
/* Wall-clock seconds since the epoch. */
int64_t util_wall_s(void);
/* Wall-clock milliseconds since the epoch. */
int64_t util_wall_ms(void);
/* Formats t as RFC 3339 UTC with milliseconds ("2026-11-22T02:29:28.123Z") into out (at least 32 bytes). */
void util_rfc3339(char *out, size_t outlen, int64_t wall_ms);
/*
 * Reads an RFC 3339 date-time of len bytes ("2026-11-22T02:29:28Z", "2026-11-22T02:29:28.123456+01:00"; fractions
 * past milliseconds are dropped) into milliseconds since the epoch. Returns 0, or -EINVAL for anything else.
 */
int util_parse_rfc3339(const char *s, size_t len, int64_t *wall_ms);
/* Formats t as an IMF-fixdate for the HTTP Date header into out (at least 30 bytes). */
void util_http_date(char *out, size_t outlen, time_t t);
/* Fills out with 2*nbytes lowercase hex characters of random bytes and a NUL. Returns 0, or -errno. */
int util_random_hex(char *out, size_t nbytes);
/* mkdir -p with mode 0700 for each directory made (the state directory may be several levels below an existing
 * one). Returns 0 when path is a directory at the end, or -errno (-ENOTDIR when it is something else). */
int util_make_dirs(const char *path);
/* Fills out with n random bytes from the kernel (getrandom). Returns 0, or -errno. */
int util_random_bytes(void *out, size_t n);
/* Writes the 2*n lowercase hex characters of raw and a NUL into out. */
void util_hex(const unsigned char *raw, size_t n, char *out);
/*
 * SipHash-2-4, a keyed hash for tables whose keys a client chooses: without the key, no one can make many keys meet
 * in one bucket. Fed in pieces (init, update, final); the same bytes give the same hash however they are split.
 */
struct util_siphash {
  uint64_t v[4];
  uint64_t tail; /* up to 7 bytes not yet compressed, little-endian */
  size_t len;    /* bytes fed so far */
};
void util_siphash_init(struct util_siphash *h, const unsigned char key[16]);
void util_siphash_update(struct util_siphash *h, const void *data, size_t len);
uint64_t util_siphash_final(struct util_siphash *h);
/* SipHash-2-4 of one piece of data under key: init, update and final at once. */
uint64_t util_siphash(const unsigned char key[16], const void *data, size_t len);
/* SHA-256 of data, its 32 bytes into md. */
void util_sha256(const void *data, size_t len, unsigned char md[32]);
/* SHA-256 of data as 64 lowercase hex characters and a NUL into out (65 bytes). */
void util_sha256_hex(const void *data, size_t len, char out[65]);
/*
 * Parses a whole decimal string into [min, max]. Returns 0, or -EINVAL for anything else (empty, sign where min >= 0,
 * trailing bytes, overflow).
 */
int util_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
/* The same for a slice of len bytes (not NUL-terminated), at most 20 characters. */
int util_parse_i64_n(const char *s, size_t len, int64_t min, int64_t max, int64_t *out);
/* The value of a hex digit (0-9, a-f, A-F), or -1 for any other character. */
int util_hex_value(char c);
/* v in decimal and a NUL into out; returns the number of digits. */
size_t util_u64_dec(uint64_t v, char out[21]);

/*
 * A string built in a fixed buffer by appends, for the hot paths where snprintf's format parsing costs more than the
 * bytes: once a piece does not fit, the build is over (ok false) and the buffer holds a NUL-terminated prefix.
 */
struct strb {
  char *p;
  size_t cap, len;
  int ok;
};
static inline struct strb strb_init(char *buf, size_t cap) {
  buf[0] = '\0';
  return (struct strb){buf, cap, 0, 1};
}
/* Inline, so that the length of a literal is known at compile time and its copy is a few moves. */
static inline void strb_put(struct strb *b, const char *s, size_t n) {
  if (!b->ok || n >= b->cap - b->len) {
    b->ok = 0;
    return;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}
static inline void strb_puts(struct strb *b, const char *s) { strb_put(b, s, strlen(s)); }
/* Copies the string src into dst of size cap (> 0), cut to fit, always NUL-terminated. Returns the length copied. */
size_t util_copy_str(char *dst, size_t cap, const char *src);
void strb_u64(struct strb *b, uint64_t v);

#endif
