#include "common/util.h"

#include <errno.h>
#include <pthread.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <openssl/evp.h>

uint64_t util_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int64_t util_wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec;
}

int64_t util_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void util_rfc3339(char *out, size_t outlen, int64_t wall_ms) {
  time_t t = (time_t)(wall_ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char base[24];
  strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out, outlen, "%s.%03dZ", base, (int)(wall_ms % 1000));
}

/* n digits of s as a number within [lo, hi], or -1. */
static int digits(const char *s, int n, int lo, int hi) {
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v >= lo && v <= hi ? v : -1;
}

/* Days from 1970-01-01 to the civil date y-m-d of the proleptic Gregorian calendar. */
static int64_t days_from_civil(int64_t y, int m, int d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

int util_parse_rfc3339(const char *s, size_t len, int64_t *wall_ms) {
  static const char shape[] = "dddd-dd-ddTdd:dd:dd";
  static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  size_t n = sizeof(shape) - 1;
  if (len < n + 1) return -EINVAL;
  for (size_t i = 0; i < n; i++) {
    int want_digit = shape[i] == 'd';
    int is_digit = s[i] >= '0' && s[i] <= '9';
    if (want_digit ? !is_digit : (s[i] != shape[i] && !(shape[i] == 'T' && (s[i] == 't' || s[i] == ' '))))
      return -EINVAL;
  }
  int y = digits(s, 4, 0, 9999), mo = digits(s + 5, 2, 1, 12), d = digits(s + 8, 2, 1, 31);
  int h = digits(s + 11, 2, 0, 23), mi = digits(s + 14, 2, 0, 59), se = digits(s + 17, 2, 0, 60);
  if (y < 0 || mo < 0 || d < 0 || h < 0 || mi < 0 || se < 0 || d > mdays[mo - 1]) return -EINVAL;
  if (mo == 2 && d == 29 && !(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))) return -EINVAL;
  int ms = 0;
  size_t i = n;
  if (s[i] == '.') {
    size_t start = ++i;
    while (i < len && s[i] >= '0' && s[i] <= '9') {
      if (i - start < 3) ms = ms * 10 + (s[i] - '0');
      i++;
    }
    if (i == start) return -EINVAL;
    for (size_t k = i - start; k < 3; k++) ms *= 10;
  }
  int64_t offset_min = 0;
  if (i + 1 == len && (s[i] == 'Z' || s[i] == 'z')) {
    i++;
  } else if (i + 6 == len && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
    int oh = digits(s + i + 1, 2, 0, 23), om = digits(s + i + 4, 2, 0, 59);
    if (oh < 0 || om < 0) return -EINVAL;
    offset_min = (s[i] == '-' ? -1 : 1) * (int64_t)(oh * 60 + om);
    i += 6;
  }
  if (i != len) return -EINVAL;
  int64_t secs = days_from_civil(y, mo, d) * 86400 + (int64_t)h * 3600 + (int64_t)mi * 60 + se - offset_min * 60;
  *wall_ms = secs * 1000 + ms;
  return 0;
}

void util_http_date(char *out, size_t outlen, time_t t) {
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, outlen, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static uint64_t rotl64(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

static void sip_round(uint64_t v[4]) {
  v[0] += v[1];
  v[1] = rotl64(v[1], 13) ^ v[0];
  v[0] = rotl64(v[0], 32);
  v[2] += v[3];
  v[3] = rotl64(v[3], 16) ^ v[2];
  v[0] += v[3];
  v[3] = rotl64(v[3], 21) ^ v[0];
  v[2] += v[1];
  v[1] = rotl64(v[1], 17) ^ v[2];
  v[2] = rotl64(v[2], 32);
}

static void sip_compress(struct util_siphash *h, uint64_t m) {
  h->v[3] ^= m;
  sip_round(h->v);
  sip_round(h->v);
  h->v[0] ^= m;
}

void util_siphash_init(struct util_siphash *h, const unsigned char key[16]) {
  uint64_t k0 = 0, k1 = 0;
  for (int i = 7; i >= 0; i--) {
    k0 = (k0 << 8) | key[i];
    k1 = (k1 << 8) | key[8 + i];
  }
  h->v[0] = k0 ^ UINT64_C(0x736f6d6570736575);
  h->v[1] = k1 ^ UINT64_C(0x646f72616e646f6d);
  h->v[2] = k0 ^ UINT64_C(0x6c7967656e657261);
  h->v[3] = k1 ^ UINT64_C(0x7465646279746573);
  h->tail = 0;
  h->len = 0;
}

void util_siphash_update(struct util_siphash *h, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) {
    h->tail |= (uint64_t)p[i] << (8 * (h->len & 7));
    if ((++h->len & 7) == 0) {
      sip_compress(h, h->tail);
      h->tail = 0;
    }
  }
}

uint64_t util_siphash_final(struct util_siphash *h) {
  sip_compress(h, h->tail | ((uint64_t)(h->len & 0xff) << 56));
  h->v[2] ^= 0xff;
  for (int i = 0; i < 4; i++) sip_round(h->v);
  return h->v[0] ^ h->v[1] ^ h->v[2] ^ h->v[3];
}

uint64_t util_siphash(const unsigned char key[16], const void *data, size_t len) {
  struct util_siphash h;
  util_siphash_init(&h, key);
  util_siphash_update(&h, data, len);
  return util_siphash_final(&h);
}

int util_random_bytes(void *out, size_t n) {
  unsigned char *raw = out;
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(raw + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    got += (size_t)r;
  }
  return 0;
}

void util_hex(const unsigned char *raw, size_t n, char *out) {
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = hex[raw[i] >> 4];
    out[2 * i + 1] = hex[raw[i] & 15];
  }
  out[2 * n] = '\0';
}

int util_make_dirs(const char *path) {
  char buf[PATH_MAX];
  size_t len = strlen(path);
  if (len == 0 || len >= sizeof(buf)) return -ENAMETOOLONG;
  memcpy(buf, path, len + 1);
  for (size_t i = 1; i <= len; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    char saved = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, 0700) != 0 && errno != EEXIST) return -errno;
    buf[i] = saved;
  }
  struct stat st;
  if (stat(path, &st) != 0) return -errno;
  return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int util_random_hex(char *out, size_t nbytes) {
  unsigned char raw[64];
  if (nbytes > sizeof(raw)) return -EINVAL;
  int rv = util_random_bytes(raw, nbytes);
  if (rv != 0) return rv;
  util_hex(raw, nbytes, out);
  return 0;
}

/*
 * SHA-256 with the algorithm fetched once and a context per thread: OpenSSL 3 looks the algorithm up again on every
 * EVP_Digest(..., EVP_sha256(), ...), which costs more than hashing an API key. The context is freed with its thread.
 */
static EVP_MD *sha256_md;
static pthread_key_t sha256_ctx_key;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_ctx_free(void *ctx) { EVP_MD_CTX_free(ctx); }
static void sha256_setup(void) {
  sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
  pthread_key_create(&sha256_ctx_key, sha256_ctx_free);
}

void util_sha256(const void *data, size_t len, unsigned char md[32]) {
  unsigned int mdlen = 0;
  pthread_once(&sha256_once, sha256_setup);
  EVP_MD_CTX *ctx = pthread_getspecific(sha256_ctx_key);
  if (ctx == NULL && sha256_md != NULL && (ctx = EVP_MD_CTX_new()) != NULL &&
      pthread_setspecific(sha256_ctx_key, ctx) != 0) {
    EVP_MD_CTX_free(ctx);
    ctx = NULL;
  }
  if (ctx == NULL || EVP_DigestInit_ex2(ctx, sha256_md, NULL) != 1 || EVP_DigestUpdate(ctx, data, len) != 1 ||
      EVP_DigestFinal_ex(ctx, md, &mdlen) != 1)
    EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL); /* the slow way, still right */
}

void util_sha256_hex(const void *data, size_t len, char out[65]) {
  unsigned char md[32];
  util_sha256(data, len, md);
  util_hex(md, 32, out);
}

int util_parse_i64_n(const char *s, size_t len, int64_t min, int64_t max, int64_t *out) {
  char tmp[24];
  if (len == 0 || len >= sizeof(tmp)) return -EINVAL;
  memcpy(tmp, s, len);
  tmp[len] = '\0';
  return util_parse_i64(tmp, min, max, out);
}

int util_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out) {
  if (s == NULL || *s == '\0') return -EINVAL;
  if (min >= 0 && (*s == '-' || *s == '+')) return -EINVAL;
  for (const char *p = (*s == '-') ? s + 1 : s; *p; p++) {
    if (*p < '0' || *p > '9') return -EINVAL;
  }
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0') return -EINVAL;
  if (v < min || v > max) return -EINVAL;
  *out = (int64_t)v;
  return 0;
}

int util_hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

size_t util_u64_dec(uint64_t v, char out[21]) {
  /* Two digits a step from a table, written from the end: the digits are counted first. */
  static const char pairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  size_t n = 1;
  for (uint64_t t = v; t >= 10; t /= 10) n++;
  char *p = out + n;
  *p = '\0';
  while (v >= 100) {
    const char *d = pairs + 2 * (v % 100);
    v /= 100;
    *--p = d[1];
    *--p = d[0];
  }
  if (v >= 10) {
    *--p = pairs[2 * v + 1];
    *--p = pairs[2 * v];
  } else {
    *--p = (char)('0' + v);
  }
  return n;
}

size_t util_copy_str(char *dst, size_t cap, const char *src) {
  size_t n = strnlen(src, cap - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
  return n;
}

void strb_u64(struct strb *b, uint64_t v) {
  char d[21];
  strb_put(b, d, util_u64_dec(v, d));
}
