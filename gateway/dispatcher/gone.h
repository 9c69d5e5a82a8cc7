/*
 * The keys the runner (runner.h) holds as gone: revoked or removed from the key file since the start, or found so by a
 * take. Each has one record, its name and whether the store stopped its jobs yet. A take's answer, a stop's answer and
 * an item's end look a name up: an open table indexed by the keyed hash the key store's name index uses
 * (util_siphash, with a random key of the set's own), so that a lookup costs the same with one gone key or thousands.
 */
#ifndef VTS_DISPATCH_GONE_H
#define VTS_DISPATCH_GONE_H

#include <stddef.h>

#include "gateway/keys/keys.h"

enum gone_state { GONE_RUNNING, GONE_STOPPING, GONE_STOPPED };

struct gone_key {
  char name[KEYS_MAX_NAME + 1];
  enum gone_state state; /* whether the store stopped the key's jobs yet (GONE_RUNNING: not asked, or it failed) */
};

struct gone;

/* An empty set. NULL without memory or randomness for its hash's key. */
struct gone *gone_new(void);
void gone_free(struct gone *g);

/*
 * Counts name among the gone keys, GONE_RUNNING, unless it is already. Returns 0, -EINVAL (longer than KEYS_MAX_NAME)
 * or -ENOMEM.
 */
int gone_add(struct gone *g, const char *name);
/* name's record (borrowed: valid until the set's next add or removal), or NULL. */
struct gone_key *gone_find(struct gone *g, const char *name);
/* The records in the order they were added (i < gone_count), borrowed as gone_find's. */
size_t gone_count(const struct gone *g);
struct gone_key *gone_at(struct gone *g, size_t i);
/* Drops the keys for which back(name, arg) is not 0, the others kept in their order. Returns how many it dropped. */
size_t gone_drop_if(struct gone *g, int (*back)(const char *name, void *arg), void *arg);

#endif
