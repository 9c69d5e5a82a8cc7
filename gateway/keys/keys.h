/*
 * API keys. The key file holds SHA-256 digests of keys only, one key a line, with name, status and optional
 * per-key limits. Lookup is by the digest of the presented key.
 *
 * File format (text, one record a line, tab-separated, '#' starts a comment line, empty lines are skipped):
 *   name <TAB> sha256-hex <TAB> active|revoked <TAB> rate <TAB> window_s <TAB> quota [<TAB> weight]
 * name is [A-Za-z0-9_.-]{1,64} and unique; sha256-hex is 64 lowercase hex digits and unique; rate is
 * 0..VTS_MAX_KEY_RATE, window_s 0..VTS_MAX_KEY_WINDOW_S, quota 0..VTS_MAX_KEY_QUOTA, each 0 for "use the service
 * default"; weight, the key's share of batch work against the other keys' (gateway/dispatcher/fair.h), is
 * 1..VTS_MAX_KEY_WEIGHT, 1 when the line has no seventh field (the files of earlier releases have none). Any other
 * line makes the whole load fail ("line N: reason"), so a typo never silently drops a key.
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
  int64_t weight;               /* 1..VTS_MAX_KEY_WEIGHT once loaded; 0 in an entry made for keystore_save: 1 */
};

struct keystore;

/* Loads a key file. Returns a new store, or NULL with a one-line reason in err. A missing file is an empty store. */
struct keystore *keystore_load(const char *path, char *err, size_t errlen);
void keystore_free(struct keystore *ks);
/*
 * Finds the active entry whose digest is SHA-256(key). Returns a borrowed pointer valid until keystore_free, or NULL
 * for an unknown or revoked key, an empty key, or one longer than VTS_MAX_API_KEY_BYTES. The digests are compared in
 * constant time. Not thread-safe: a store remembers the keys it found lately (one store per worker loop).
 */
const struct key_entry *keystore_lookup(struct keystore *ks, const char *key, size_t len);
/*
 * Finds the entry named name, active or revoked, through an index built with the store (no walk over the entries).
 * Returns a borrowed pointer valid until keystore_free, or NULL for a name not in the file (or longer than
 * KEYS_MAX_NAME). Names are unique: keystore_load refuses a file that repeats one. Safe from any thread.
 */
const struct key_entry *keystore_named(const struct keystore *ks, const char *name);
/* Number of entries (active and revoked). */
size_t keystore_count(const struct keystore *ks);
/* The i-th entry in file order (i < keystore_count). Returns a borrowed pointer valid until keystore_free. */
const struct key_entry *keystore_entry(const struct keystore *ks, size_t i);

/*
 * 32 bytes no client can know: the SHA-256 of the key file as loaded (digests of every key, never a key). Every
 * gateway of a fleet reads the same file, so they share it; a changed file changes it. Keys what the service signs
 * for a client to hand back (the cursors of /mcp).
 */
const unsigned char *keystore_secret(const struct keystore *ks);

/* Whether s matches [A-Za-z0-9_.-]{1,64}. */
int keys_name_valid(const char *s, size_t len);

/* Mode of a key file keystore_save creates: the service may read it through its group, nobody else. */
#define KEYS_FILE_NEW_MODE 0640

/*
 * Writes entries to path atomically: a temporary file in the same directory given the owner, group and mode of the
 * file it replaces (KEYS_FILE_NEW_MODE and the caller's owner for a new file), fsync, rename over path, fsync of the
 * directory. A caller that may not give the file its owner back (EPERM) changes nothing; more than VTS_MAX_KEYS
 * entries (which keystore_load would refuse) are refused too (-EINVAL). A reader sees the old file or
 * the new one, never a mix. Returns 0, or -errno with a one-line reason in err. The entries are validated first as
 * keystore_load would (-EINVAL). A weight of 1 is written as no seventh field, so a file that weighs no key stays one
 * an earlier release reads.
 */
int keystore_save(const char *path, const struct key_entry *entries, size_t n, char *err, size_t errlen);

#endif
