/*
 * The API key file: strict loading, constant-time lookup by digest, atomic saving.
 *
 * Entries live in an array in file order. Lookup goes through an open-addressing table indexed by the leading bits
 * of the digest (SHA-256 output is uniform, so no further hashing is needed); each candidate is compared over all
 * 32 bytes without an early exit, so the time taken says nothing about how close a guess came to a stored digest.
 * A second table of the same size finds an entry by its name (keystore_named), so that the dispatcher, which knows a
 * job's key by name only, never walks the file's entries on its loop.
 */
#include "gateway/keys/keys.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/ident.h"
#include "common/limits.h"
#include "common/safefile.h"
#include "common/util.h"

#define KEYS_FIELDS 6     /* a record's fields without a weight */
#define KEYS_FIELDS_MAX 7 /* with one */

/*
 * Keys this store found lately, by a cheap hash of the key: a client sends the same key on every request, and its
 * SHA-256 (through OpenSSL's EVP) costs more than the rest of authentication. Only keys found in the store are kept,
 * up to KEYS_MEMO_KEY_BYTES long (ours are 68), and compared in constant time, so the memo tells an attacker nothing
 * the digest comparison would not. A reload makes a new store, and with it an empty memo.
 */
#define KEYS_MEMO_SLOTS 16
#define KEYS_MEMO_KEY_BYTES 96

struct key_memo {
  uint32_t len;
  uint32_t entry; /* entry index + 1; 0: empty */
  unsigned char key[KEYS_MEMO_KEY_BYTES];
};

struct keystore {
  struct key_entry *entries; /* file order */
  unsigned char (*raw)[32];  /* entries[i].digest as bytes, for the comparisons */
  size_t n;
  uint32_t *slots; /* by digest: 0: empty, else entry index + 1 */
  uint32_t *names; /* by name, the same way and with the same slot count */
  size_t mask;     /* slot count - 1; the slot count is a power of two at least twice n */
  struct key_memo memo[KEYS_MEMO_SLOTS];
  unsigned char secret[32]; /* SHA-256 of the file's bytes (keystore_secret) */
};

static void set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (err == NULL || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

int keys_name_valid(const char *s, size_t len) { return ident_token_valid(s, len, KEYS_MAX_NAME); }

static int hex_nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1; /* uppercase is refused: digests are written lowercase, and one spelling keeps them unique */
}

/* Decodes 64 lowercase hex digits. Returns 0, or -EINVAL. */
static int digest_decode(const char *hex, size_t len, unsigned char out[32]) {
  if (len != 64) return -EINVAL;
  for (size_t i = 0; i < 32; i++) {
    int hi = hex_nibble(hex[2 * i]);
    int lo = hex_nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return -EINVAL;
    out[i] = (unsigned char)(hi << 4 | lo);
  }
  return 0;
}

/* Constant-time equality of two digests. */
static int digest_equal(const unsigned char *a, const unsigned char *b) {
  volatile unsigned char diff = 0;
  for (size_t i = 0; i < 32; i++) diff |= (unsigned char)(a[i] ^ b[i]);
  return diff == 0;
}

static size_t digest_slot(const unsigned char d[32], size_t mask) {
  uint64_t h = 0;
  for (int i = 0; i < 8; i++) h = h << 8 | d[i];
  return (size_t)(h & mask);
}

/* Parses a decimal field into [0, max]. */
static int parse_limit(const char *s, size_t len, int64_t max, int64_t *out) {
  return util_parse_i64_n(s, len, 0, max, out);
}

/* The name and digest rules, shared by loading (fields of a line) and saving (entries built in memory). */
static int check_name_digest(const char *name, size_t nlen, const char *digest, size_t dlen, char *why, size_t whylen) {
  unsigned char raw[32];
  if (!keys_name_valid(name, nlen)) {
    set_err(why, whylen, "name must be 1 to %d characters of A-Z a-z 0-9 _ . -", KEYS_MAX_NAME);
    return -EINVAL;
  }
  if (digest_decode(digest, dlen, raw) != 0) {
    set_err(why, whylen, "digest must be 64 lowercase hex digits");
    return -EINVAL;
  }
  return 0;
}

/* Checks an entry built in memory (the save path) with the rules of a loaded line. */
static int entry_check(const struct key_entry *e, char *why, size_t whylen) {
  int rc = check_name_digest(e->name, strnlen(e->name, sizeof(e->name)), e->digest,
                             strnlen(e->digest, sizeof(e->digest)), why, whylen);
  if (rc != 0) return rc;
  if (e->active != 0 && e->active != 1) {
    set_err(why, whylen, "status must be active or revoked");
    return -EINVAL;
  }
  if (e->rate < 0 || e->rate > VTS_MAX_KEY_RATE || e->window_s < 0 || e->window_s > VTS_MAX_KEY_WINDOW_S ||
      e->quota < 0 || e->quota > VTS_MAX_KEY_QUOTA || e->weight < 0 || e->weight > VTS_MAX_KEY_WEIGHT) {
    set_err(why, whylen, "limits out of range");
    return -EINVAL;
  }
  return 0;
}

/* Parses one record line (without its newline) into e. Returns 0, or -EINVAL with a reason in why. */
static int parse_line(const char *line, size_t len, struct key_entry *e, char *why, size_t whylen) {
  const char *field[KEYS_FIELDS_MAX];
  size_t flen[KEYS_FIELDS_MAX];
  size_t nf = 0, start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i < len && line[i] != '\t') continue;
    if (nf == KEYS_FIELDS_MAX) {
      set_err(why, whylen, "expected %d or %d tab-separated fields, found more", KEYS_FIELDS, KEYS_FIELDS_MAX);
      return -EINVAL;
    }
    field[nf] = line + start;
    flen[nf] = i - start;
    nf++;
    start = i + 1;
  }
  if (nf < KEYS_FIELDS) {
    set_err(why, whylen, "expected %d or %d tab-separated fields, found %zu", KEYS_FIELDS, KEYS_FIELDS_MAX, nf);
    return -EINVAL;
  }

  memset(e, 0, sizeof(*e));
  if (check_name_digest(field[0], flen[0], field[1], flen[1], why, whylen) != 0) return -EINVAL;
  memcpy(e->name, field[0], flen[0]);
  memcpy(e->digest, field[1], 64);
  if (flen[2] == 6 && memcmp(field[2], "active", 6) == 0) {
    e->active = 1;
  } else if (flen[2] == 7 && memcmp(field[2], "revoked", 7) == 0) {
    e->active = 0;
  } else {
    set_err(why, whylen, "status must be active or revoked");
    return -EINVAL;
  }
  if (parse_limit(field[3], flen[3], VTS_MAX_KEY_RATE, &e->rate) != 0) {
    set_err(why, whylen, "rate must be an integer from 0 to %d", VTS_MAX_KEY_RATE);
    return -EINVAL;
  }
  if (parse_limit(field[4], flen[4], VTS_MAX_KEY_WINDOW_S, &e->window_s) != 0) {
    set_err(why, whylen, "window_s must be an integer from 0 to %d", VTS_MAX_KEY_WINDOW_S);
    return -EINVAL;
  }
  if (parse_limit(field[5], flen[5], VTS_MAX_KEY_QUOTA, &e->quota) != 0) {
    set_err(why, whylen, "quota must be an integer from 0 to %lld", (long long)VTS_MAX_KEY_QUOTA);
    return -EINVAL;
  }
  e->weight = 1;
  if (nf == KEYS_FIELDS_MAX && util_parse_i64_n(field[6], flen[6], 1, VTS_MAX_KEY_WEIGHT, &e->weight) != 0) {
    set_err(why, whylen, "weight must be an integer from 1 to %d", VTS_MAX_KEY_WEIGHT);
    return -EINVAL;
  }
  return 0;
}

/* Orders entry indices by name or by digest, ties by index, for the duplicate checks. */
struct dup_order {
  const struct key_entry *entries;
  int by_digest;
};

static int dup_compare(const void *a, const void *b, void *arg) {
  const struct dup_order *o = arg;
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  const char *sx = o->by_digest ? o->entries[x].digest : o->entries[x].name;
  const char *sy = o->by_digest ? o->entries[y].digest : o->entries[y].name;
  int c = strcmp(sx, sy);
  return c ? c : (x > y) - (x < y);
}

/*
 * Finds a repeated name or digest. Returns 0, -ENOMEM, or -EINVAL with the later entry's index in *dup and the
 * field's name in *what. Sorting keeps this O(n log n) for the largest allowed file.
 */
static int find_duplicate(const struct key_entry *entries, size_t n, size_t *dup, const char **what) {
  if (n < 2) return 0;
  size_t *idx = malloc(n * sizeof(*idx));
  if (idx == NULL) return -ENOMEM;
  int rc = 0;
  for (int k = 0; k < 2 && rc == 0; k++) {
    struct dup_order order = {entries, k};
    for (size_t i = 0; i < n; i++) idx[i] = i;
    qsort_r(idx, n, sizeof(*idx), dup_compare, &order);
    for (size_t i = 1; i < n; i++) {
      const struct key_entry *a = &entries[idx[i - 1]], *b = &entries[idx[i]];
      if (strcmp(k ? a->digest : a->name, k ? b->digest : b->name) == 0) {
        *dup = idx[i];
        *what = k ? "digest" : "name";
        rc = -EINVAL;
        break;
      }
    }
  }
  free(idx);
  return rc;
}

/*
 * The slot of a name: SipHash keyed with the store's secret, so that even a file written to make names meet cannot
 * lengthen the probes (names are the operator's, but a table that cannot be lined up needs no such trust).
 */
static size_t name_slot(const struct keystore *ks, const char *name, size_t len) {
  return (size_t)(util_siphash(ks->secret, name, len) & ks->mask);
}

/* Builds the lookup tables over ks->entries (names and digests are unique by then). Returns 0, or -ENOMEM. */
static int build_index(struct keystore *ks) {
  size_t slots = 16;
  while (slots < 2 * ks->n) slots *= 2;
  ks->slots = calloc(slots, sizeof(*ks->slots));
  ks->names = calloc(slots, sizeof(*ks->names));
  ks->raw = ks->n ? malloc(ks->n * sizeof(*ks->raw)) : NULL;
  if (ks->slots == NULL || ks->names == NULL || (ks->n && ks->raw == NULL)) return -ENOMEM;
  ks->mask = slots - 1;
  for (size_t i = 0; i < ks->n; i++) {
    digest_decode(ks->entries[i].digest, 64, ks->raw[i]);
    size_t s = digest_slot(ks->raw[i], ks->mask);
    while (ks->slots[s] != 0) s = (s + 1) & ks->mask;
    ks->slots[s] = (uint32_t)(i + 1);
    s = name_slot(ks, ks->entries[i].name, strlen(ks->entries[i].name));
    while (ks->names[s] != 0) s = (s + 1) & ks->mask;
    ks->names[s] = (uint32_t)(i + 1);
  }
  return 0;
}

struct keystore *keystore_load(const char *path, char *err, size_t errlen) {
  struct buf file = BUF_INIT;
  size_t *line_of = NULL; /* line number of each entry, for the duplicate message */
  size_t cap = 0;
  struct keystore *ks = calloc(1, sizeof(*ks));
  if (ks == NULL) {
    set_err(err, errlen, "out of memory");
    goto fail;
  }

  int rc = buf_read_file(&file, path, VTS_MAX_KEYS_FILE_BYTES);
  if (rc == -ENOENT) {
    rc = 0; /* no file yet: no keys, every request is 401 until one is created */
  } else if (rc == -EFBIG) {
    set_err(err, errlen, "%s: larger than %d bytes", path, VTS_MAX_KEYS_FILE_BYTES);
    goto fail;
  } else if (rc != 0) {
    set_err(err, errlen, "%s: %s", path, strerror(-rc));
    goto fail;
  }
  util_sha256(file.data, file.len, ks->secret);

  size_t pos = 0, lineno = 0;
  while (pos < file.len) {
    const char *line = file.data + pos;
    const char *nl = memchr(line, '\n', file.len - pos);
    size_t len = nl ? (size_t)(nl - line) : file.len - pos;
    pos += len + 1;
    lineno++;
    if (memchr(line, '\0', len) != NULL) {
      set_err(err, errlen, "line %zu: NUL byte", lineno);
      goto fail;
    }
    if (len == 0 || line[0] == '#') continue;
    if (ks->n == VTS_MAX_KEYS) {
      set_err(err, errlen, "line %zu: more than %d keys", lineno, VTS_MAX_KEYS);
      goto fail;
    }
    if (ks->n == cap) {
      size_t ncap = cap ? cap * 2 : 16;
      struct key_entry *ne = realloc(ks->entries, ncap * sizeof(*ne));
      if (ne == NULL) goto fail_oom;
      ks->entries = ne;
      size_t *nl2 = realloc(line_of, ncap * sizeof(*nl2));
      if (nl2 == NULL) goto fail_oom;
      line_of = nl2;
      cap = ncap;
    }
    char why[128];
    if (parse_line(line, len, &ks->entries[ks->n], why, sizeof(why)) != 0) {
      set_err(err, errlen, "line %zu: %s", lineno, why);
      goto fail;
    }
    line_of[ks->n] = lineno;
    ks->n++;
  }

  size_t dup = 0;
  const char *what = NULL;
  rc = find_duplicate(ks->entries, ks->n, &dup, &what);
  if (rc == -ENOMEM) goto fail_oom;
  if (rc != 0) {
    set_err(err, errlen, "line %zu: duplicate %s", line_of[dup], what);
    goto fail;
  }
  if (build_index(ks) != 0) goto fail_oom;
  free(line_of);
  buf_free(&file);
  return ks;

fail_oom:
  set_err(err, errlen, "out of memory");
fail:
  free(line_of);
  buf_free(&file);
  keystore_free(ks);
  return NULL;
}

void keystore_free(struct keystore *ks) {
  if (ks == NULL) return;
  free(ks->entries);
  free(ks->raw);
  free(ks->slots);
  free(ks->names);
  free(ks);
}

/* The slot of a key: FNV-1a of its length and its last 16 bytes (where keys differ; ours share a prefix). */
static struct key_memo *memo_slot(struct keystore *ks, const char *key, size_t len) {
  uint32_t h = (2166136261u ^ (uint32_t)len) * 16777619u;
  for (size_t i = len > 16 ? len - 16 : 0; i < len; i++) h = (h ^ (unsigned char)key[i]) * 16777619u;
  return &ks->memo[h % KEYS_MEMO_SLOTS];
}

/* Equality of two byte strings of length len in time that depends on len only, eight bytes a step. */
static int bytes_equal(const unsigned char *a, const unsigned char *b, size_t len) {
  uint64_t diff = 0;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t x, y;
    memcpy(&x, a + i, 8);
    memcpy(&y, b + i, 8);
    diff |= x ^ y;
  }
  for (; i < len; i++) diff |= (uint64_t)(a[i] ^ b[i]);
  return diff == 0;
}

const struct key_entry *keystore_lookup(struct keystore *ks, const char *key, size_t len) {
  if (ks == NULL || key == NULL || len == 0 || len > VTS_MAX_API_KEY_BYTES || ks->n == 0) return NULL;
  struct key_memo *m = len <= KEYS_MEMO_KEY_BYTES ? memo_slot(ks, key, len) : NULL;
  const struct key_entry *found = NULL;
  if (m != NULL && m->entry != 0 && m->len == len && bytes_equal(m->key, (const unsigned char *)key, len)) {
    found = &ks->entries[m->entry - 1];
  } else {
    unsigned char want[32];
    util_sha256(key, len, want);
    for (size_t s = digest_slot(want, ks->mask); ks->slots[s] != 0; s = (s + 1) & ks->mask) {
      size_t i = ks->slots[s] - 1;
      if (digest_equal(ks->raw[i], want)) {
        found = &ks->entries[i];
        if (m != NULL) {
          memcpy(m->key, key, len);
          m->len = (uint32_t)len;
          m->entry = (uint32_t)(i + 1);
        }
        break;
      }
    }
  }
  if (found == NULL || !found->active) return NULL;
  return found;
}

const struct key_entry *keystore_named(const struct keystore *ks, const char *name) {
  if (ks == NULL || name == NULL || ks->n == 0) return NULL;
  size_t len = strnlen(name, KEYS_MAX_NAME + 1);
  if (len == 0 || len > KEYS_MAX_NAME) return NULL;
  for (size_t s = name_slot(ks, name, len); ks->names[s] != 0; s = (s + 1) & ks->mask) {
    const struct key_entry *e = &ks->entries[ks->names[s] - 1];
    if (memcmp(e->name, name, len + 1) == 0) return e;
  }
  return NULL;
}

size_t keystore_count(const struct keystore *ks) { return ks ? ks->n : 0; }

const struct key_entry *keystore_entry(const struct keystore *ks, size_t i) {
  if (ks == NULL || i >= ks->n) return NULL;
  return &ks->entries[i];
}

int keystore_save(const char *path, const struct key_entry *entries, size_t n, char *err, size_t errlen) {
  struct buf out = BUF_INIT;
  int rc = 0;
  char why[128];
  if (n > VTS_MAX_KEYS) {
    /* The service would refuse the file: the rate limiter's table is sized for this many keys. */
    rc = -EINVAL;
    set_err(err, errlen, "more than %d keys (revoked ones included): remove some first", VTS_MAX_KEYS);
    goto fail;
  }
  for (size_t i = 0; i < n; i++) {
    rc = entry_check(&entries[i], why, sizeof(why));
    if (rc != 0) {
      set_err(err, errlen, "entry %zu: %s", i + 1, why);
      goto fail;
    }
  }
  size_t dup = 0;
  const char *what = NULL;
  rc = find_duplicate(entries, n, &dup, &what);
  if (rc == -EINVAL) {
    set_err(err, errlen, "entry %zu: duplicate %s", dup + 1, what);
    goto fail;
  }

  if (rc == 0) {
    rc = buf_puts(&out,
                  "# vts API keys, managed by vts-keys. SHA-256 digests only, never keys.\n"
                  "# name\tsha256\tstatus\trate\twindow_s\tquota\tweight  (0 = service default; no weight: 1)\n");
  }
  for (size_t i = 0; i < n && rc == 0; i++) {
    const struct key_entry *e = &entries[i];
    rc = buf_printf(&out, "%s\t%s\t%s\t%" PRId64 "\t%" PRId64 "\t%" PRId64, e->name, e->digest,
                    e->active ? "active" : "revoked", e->rate, e->window_s, e->quota);
    /* Weight 1 is no field: the line stays one that the loaders of earlier releases read (a rolling upgrade). */
    if (rc == 0 && e->weight > 1) rc = buf_printf(&out, "\t%" PRId64, e->weight);
    if (rc == 0) rc = buf_puts(&out, "\n");
  }
  if (rc != 0) {
    set_err(err, errlen, "out of memory");
    goto fail;
  }

  /*
   * The new file takes the place of the old one, so it keeps its owner, group and mode: the service reading it
   * (often as another user, through the group) must still be able to after `sudo vts-keys revoke`. A new file is
   * KEYS_FILE_NEW_MODE, owned by whoever runs the tool.
   */
  rc = safefile_replace(path, out.data, out.len, KEYS_FILE_NEW_MODE, SAFEFILE_KEEP_OWNER, err, errlen);
fail:
  buf_free(&out);
  return rc;
}

const unsigned char *keystore_secret(const struct keystore *ks) { return ks->secret; }
