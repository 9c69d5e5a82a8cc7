/*
 * API keys. The key file holds SHA-256 digests of keys only, one key a line, with name, status and optional
 * per-key limits. Lookup is by the digest of the presented key.
 *
 * File format (text, one record a line, tab-separated, '#' starts a comment line):
 *   name <TAB> sha256-hex <TAB> active|revoked <TAB> rate <TAB> window_s <TAB> quota
 * rate, window_s and quota are 0 for "use the service default".
 */
#ifndef VTS_KEYS_H
#define VTS_KEYS_H

#include <stddef.h>
#include <stdint.h>

#define KEYS_MAX_NAME 64

struct key_entry {
  char name[KEYS_MAX_NAME + 1]; /* [A-Za-z0-9_.-]{1,64}; safe to log as key_id */
  char digest[65];              /* SHA-256 of the key, lowercase hex */
  int active;                   /* 0 when revoked */
  int64_t rate;                 /* 0: default */
  int64_t window_s;             /* 0: default */
  int64_t quota;                /* 0: default */
};

struct keystore;

/* Loads a key file. Returns a new store, or NULL with a one-line reason in err. A missing file is an empty store. */
struct keystore *keystore_load(const char *path, char *err, size_t errlen);
void keystore_free(struct keystore *ks);
/*
 * Finds the active entry whose digest is SHA-256(key). Returns a borrowed pointer valid until keystore_free, or NULL
 * for an unknown or revoked key.
 */
const struct key_entry *keystore_lookup(const struct keystore *ks, const char *key, size_t len);
/* Number of entries (active and revoked). */
size_t keystore_count(const struct keystore *ks);

#endif
