#include "gateway/cache/entity.h"

#include <brotli/encode.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "common/limits.h"
#include "common/util.h"

/* Returns a malloc'd gzip stream of in, or NULL when it fails or would not be smaller than in. */
static char *make_gzip(const char *in, size_t len, size_t *out_len) {
  z_stream z;
  memset(&z, 0, sizeof(z));
  /* 15 window bits plus 16: a gzip header and trailer rather than zlib's. */
  if (deflateInit2(&z, VTS_GZIP_LEVEL, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return NULL;
  size_t cap = deflateBound(&z, (uLong)len);
  char *out = malloc(cap);
  if (out == NULL) {
    deflateEnd(&z);
    return NULL;
  }
  z.next_in = (Bytef *)(uintptr_t)in;
  z.avail_in = (uInt)len;
  z.next_out = (Bytef *)out;
  z.avail_out = (uInt)cap;
  int rv = deflate(&z, Z_FINISH);
  size_t n = cap - z.avail_out;
  deflateEnd(&z);
  if (rv != Z_STREAM_END || n >= len) {
    free(out);
    return NULL;
  }
  *out_len = n;
  return out;
}

/* As make_gzip, for a brotli stream. */
static char *make_brotli(const char *in, size_t len, size_t *out_len) {
  size_t cap = BrotliEncoderMaxCompressedSize(len);
  if (cap == 0) return NULL;
  char *out = malloc(cap);
  if (out == NULL) return NULL;
  size_t n = cap;
  if (!BrotliEncoderCompress(VTS_BROTLI_QUALITY, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_TEXT, len, (const uint8_t *)in, &n,
                             (uint8_t *)out) ||
      n >= len) {
    free(out);
    return NULL;
  }
  *out_len = n;
  return out;
}

/* Keeps a compressed form, shrunk to its size (the encoders ask for their worst case). */
static void keep_form(struct entity *e, enum entity_coding c, char *data, size_t len) {
  if (data == NULL) return;
  char *fit = realloc(data, len);
  if (fit != NULL) data = fit;
  e->form[c].data = data;
  e->form[c].len = len;
  e->bytes += len;
  e->held |= 1u << c;
}

/* The directory a large body is kept in as an unnamed file (entity_body_dir), or -1: memory files only. */
static int body_dir = -1;

int entity_body_dir(const char *path) {
  int dir = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return -errno;
  /* A file system without unnamed files (O_TMPFILE), or one that refuses them here, says so now, not per body. */
  int probe = openat(dir, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (probe < 0) {
    int rv = -errno;
    close(dir);
    return rv;
  }
  close(probe);
  if (body_dir >= 0) close(body_dir);
  body_dir = dir;
  return 0;
}

/* Writes body (len bytes) into the empty file fd; returns 0, or -1. */
static int body_write(int fd, const char *body, size_t len) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = write(fd, body + done, len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    done += (size_t)n;
  }
  return 0;
}

/* Maps fd's len bytes for reading into *map; returns fd, or -1 (fd closed). */
static int body_map(int fd, size_t len, const char **map) {
  void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return -1;
  }
  *map = p;
  return fd;
}

/*
 * body (len > 0 bytes) in a new file mapped for reading into *map. An unnamed file of the body directory first: the
 * page cache of a disk's file system holds it as it holds the files nginx serves (in large folios where the file
 * system has them, as ext4 has on recent kernels), which the tail benchmark measured steadier at the p99 than the
 * 4 KiB pages of shared memory (docs/REFERENCE.md). No other process can open it by a name (it has none); the page
 * cache writes it back to the disk like any file, and its disk space goes when the last reference closes it. Else (no
 * body directory, a full disk) a memory file, sealed against any change. Returns the file, or -1 (the caller keeps the
 * body in memory instead).
 */
static int body_file(const char *body, size_t len, const char **map) {
  int fd = body_dir >= 0 ? openat(body_dir, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600) : -1;
  if (fd >= 0) {
    if (body_write(fd, body, len) == 0) return body_map(fd, len, map);
    close(fd);
  }
  fd = memfd_create("vts-body", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  /* Sealed before it is mapped: a shared mapping of a file open for writing would keep F_SEAL_WRITE out. */
  if (body_write(fd, body, len) == 0 &&
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) == 0)
    return body_map(fd, len, map);
  close(fd);
  return -1;
}

struct entity *entity_new(const char *body, size_t len, unsigned flags) {
  const char *map = NULL;
  int fd = (flags & ENTITY_FILE) && len >= VTS_SENDFILE_MIN_BYTES ? body_file(body, len, &map) : -1;
  struct entity *e = malloc(sizeof(*e) + (fd >= 0 ? 0 : len));
  if (e == NULL) {
    if (fd >= 0) {
      munmap((void *)(uintptr_t)map, len);
      close(fd);
    }
    return NULL;
  }
  memset(e, 0, sizeof(*e));
  for (int c = 0; c < ENTITY_CODINGS; c++) e->form[c].fd = -1;
  e->refs = 1;
  e->bytes = sizeof(*e) + len;
  if (fd < 0 && len > 0) memcpy(e->body, body, len);
  e->form[ENTITY_IDENTITY].data = fd >= 0 ? map : e->body;
  e->form[ENTITY_IDENTITY].len = len;
  e->form[ENTITY_IDENTITY].fd = fd;
  e->held = 1u << ENTITY_IDENTITY;
  char digest[65];
  util_sha256_hex(len > 0 ? body : "", len, digest);
  memcpy(e->tag, digest, ENTITY_TAG_HEX);
  e->tag[ENTITY_TAG_HEX] = '\0';
  if ((flags & ENTITY_COMPRESS) && len >= VTS_COMPRESS_MIN_BYTES) {
    /* A form that fails to be made is only a missed saving: the identity form is always there. */
    size_t n = 0;
    char *gz = make_gzip(body, len, &n);
    keep_form(e, ENTITY_GZIP, gz, n);
    char *br = make_brotli(body, len, &n);
    keep_form(e, ENTITY_BR, br, n);
  }
  return e;
}

struct entity *entity_validator(const struct entity *e) {
  struct entity *v = calloc(1, sizeof(*v));
  if (v == NULL) return NULL;
  v->refs = 1;
  v->expires_ms = e->expires_ms;
  v->bytes = sizeof(*v);
  v->held = e->held;
  for (int c = 0; c < ENTITY_CODINGS; c++) v->form[c].fd = -1;
  memcpy(v->tag, e->tag, sizeof(v->tag));
  return v;
}

struct entity *entity_ref(struct entity *e) {
  e->refs++;
  return e;
}

void entity_unref(struct entity *e) {
  if (e == NULL || --e->refs > 0) return;
  for (int c = ENTITY_IDENTITY + 1; c < ENTITY_CODINGS; c++) free((char *)(uintptr_t)e->form[c].data);
  struct entity_form *id = &e->form[ENTITY_IDENTITY];
  if (id->fd >= 0) {
    munmap((void *)(uintptr_t)id->data, id->len);
    close(id->fd);
  }
  free(e);
}

void entity_release(void *e) { entity_unref(e); }

int entity_has(const struct entity *e, enum entity_coding c) { return (e->held & (1u << c)) != 0; }

static const char *const coding_names[ENTITY_CODINGS] = {NULL, "br", "gzip"};
static const char *const etag_suffixes[ENTITY_CODINGS] = {"", "-br", "-gz"};

void entity_etag(const struct entity *e, enum entity_coding c, char out[ENTITY_ETAG_BYTES]) {
  struct strb b = strb_init(out, ENTITY_ETAG_BYTES);
  strb_put(&b, "\"", 1);
  strb_puts(&b, e->tag);
  strb_puts(&b, etag_suffixes[c]);
  strb_put(&b, "\"", 1);
}

const char *entity_coding_name(enum entity_coding c) { return coding_names[c]; }

static int etag_ows(char c) { return c == ' ' || c == '\t'; }

int entity_etag_match(const char *inm, size_t len, const char *etag) {
  if (inm == NULL) return 0;
  size_t etag_len = strlen(etag);
  size_t i = 0;
  while (i < len && etag_ows(inm[i])) i++;
  if (i < len && inm[i] == '*') {
    size_t j = i + 1;
    while (j < len && etag_ows(inm[j])) j++;
    return j == len;
  }
  while (i < len) {
    while (i < len && (etag_ows(inm[i]) || inm[i] == ',')) i++;
    if (i >= len) break;
    if (len - i >= 2 && inm[i] == 'W' && inm[i + 1] == '/') i += 2;
    if (i >= len || inm[i] != '"') return 0;
    const char *end = memchr(inm + i + 1, '"', len - i - 1);
    if (end == NULL) return 0;
    size_t tag_len = (size_t)(end - (inm + i)) + 1;
    if (tag_len == etag_len && memcmp(inm + i, etag, etag_len) == 0) return 1;
    i += tag_len;
  }
  return 0;
}
