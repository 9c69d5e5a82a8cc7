/*
 * The gone keys (see gone.h): records in an array in the order they were added, found through an open-addressing
 * table of record indices (linear probing, at most half full). The table is built again when it grows and after a
 * removal, which happens only when the key file changed.
 */
#include "gateway/dispatcher/gone.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

struct gone {
  struct gone_key *keys;
  size_t n, cap;
  uint32_t *slots; /* 0: empty, else record index + 1 */
  size_t mask;     /* slot count - 1; the slot count is a power of two at least twice n */
  unsigned char secret[16];
};

static size_t slot_of(const struct gone *g, const char *name, size_t len) {
  return (size_t)(util_siphash(g->secret, name, len) & g->mask);
}

/* Puts every record in the table, emptied first. */
static void fill(struct gone *g) {
  memset(g->slots, 0, (g->mask + 1) * sizeof(*g->slots));
  for (size_t i = 0; i < g->n; i++) {
    size_t s = slot_of(g, g->keys[i].name, strlen(g->keys[i].name));
    while (g->slots[s] != 0) s = (s + 1) & g->mask;
    g->slots[s] = (uint32_t)(i + 1);
  }
}

/* The table again with slots slots. Returns 0, or -ENOMEM (the old table kept). */
static int reindex(struct gone *g, size_t slots) {
  uint32_t *t = calloc(slots, sizeof(*t));
  if (t == NULL) return -ENOMEM;
  free(g->slots);
  g->slots = t;
  g->mask = slots - 1;
  fill(g);
  return 0;
}

struct gone *gone_new(void) {
  struct gone *g = calloc(1, sizeof(*g));
  if (g == NULL) return NULL;
  if (util_random_bytes(g->secret, sizeof(g->secret)) != 0 || reindex(g, 16) != 0) {
    gone_free(g);
    return NULL;
  }
  return g;
}

void gone_free(struct gone *g) {
  if (g == NULL) return;
  free(g->keys);
  free(g->slots);
  free(g);
}

struct gone_key *gone_find(struct gone *g, const char *name) {
  size_t len = strnlen(name, KEYS_MAX_NAME + 1);
  if (len > KEYS_MAX_NAME) return NULL;
  for (size_t s = slot_of(g, name, len); g->slots[s] != 0; s = (s + 1) & g->mask) {
    struct gone_key *k = &g->keys[g->slots[s] - 1];
    if (memcmp(k->name, name, len + 1) == 0) return k;
  }
  return NULL;
}

int gone_add(struct gone *g, const char *name) {
  size_t len = strnlen(name, KEYS_MAX_NAME + 1);
  if (len > KEYS_MAX_NAME) return -EINVAL;
  if (gone_find(g, name) != NULL) return 0;
  if (g->n == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 16;
    struct gone_key *grown = realloc(g->keys, cap * sizeof(*grown));
    if (grown == NULL) return -ENOMEM;
    g->keys = grown;
    g->cap = cap;
  }
  if (2 * (g->n + 1) > g->mask + 1 && reindex(g, 2 * (g->mask + 1)) != 0) return -ENOMEM;
  struct gone_key *k = &g->keys[g->n];
  memcpy(k->name, name, len + 1);
  k->state = GONE_RUNNING;
  size_t s = slot_of(g, name, len);
  while (g->slots[s] != 0) s = (s + 1) & g->mask;
  g->slots[s] = (uint32_t)(++g->n);
  return 0;
}

size_t gone_count(const struct gone *g) { return g->n; }

struct gone_key *gone_at(struct gone *g, size_t i) {
  return i < g->n ? &g->keys[i] : NULL;
}

size_t gone_drop_if(struct gone *g, int (*back)(const char *name, void *arg), void *arg) {
  size_t w = 0;
  for (size_t i = 0; i < g->n; i++) {
    if (back(g->keys[i].name, arg)) continue;
    if (w != i) g->keys[w] = g->keys[i];
    w++;
  }
  size_t dropped = g->n - w;
  if (dropped == 0) return 0;
  g->n = w;
  /* The same slot count: no allocation, so a removal cannot fail. */
  fill(g);
  return dropped;
}
