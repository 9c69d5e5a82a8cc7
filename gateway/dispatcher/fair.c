/* Fair shares of batch work between API keys (see fair.h). */
#include "gateway/dispatcher/fair.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/keys/keys.h"

#define FAIR_MS 100000ull    /* a millisecond of one slot at weight 1, in served (integer arithmetic) */
#define FAIR_START 1000ull   /* what a start adds to served at weight 1: a hundredth of a millisecond held */
#define FAIR_FORGET_MS 60000 /* a key holding nothing and not seen this long is forgotten */
#define FAIR_US_PER_HOUR 3600000000ull

struct fair_key {
  char name[KEYS_MAX_NAME + 1];
  uint32_t weight;
  uint64_t held;       /* pieces of work it holds */
  uint64_t seen_ms;    /* when a take last found work of it */
  int idle;            /* a take found nothing of it since */
  uint64_t served;     /* slot time its pieces held until since_ms, FAIR_START more for each start, over its weight */
  uint64_t since_ms;   /* until when served counts the time of the pieces it holds */
  uint64_t full_at_us; /* its egress bucket: when it is full again (fetcher/egress/pace.h's arithmetic) */
};

struct fair {
  struct fair_limits lim;
  struct fair_key *keys;
  size_t n, cap;
};

struct fair *fair_new(const struct fair_limits *lim) {
  struct fair *f = calloc(1, sizeof(*f));
  if (f == NULL) return NULL;
  f->lim = *lim;
  return f;
}

void fair_free(struct fair *f) {
  if (f == NULL) return;
  free(f->keys);
  free(f);
}

static struct fair_key *find(const struct fair *f, const char *key) {
  for (size_t i = 0; i < f->n; i++)
    if (strcmp(f->keys[i].name, key) == 0) return &f->keys[i];
  return NULL;
}

static int sharing(const struct fair_key *k, uint64_t now) {
  return k->held > 0 || (!k->idle && now < k->seen_ms + FAIR_LINGER_MS);
}

/* What key was served by now: the pieces it holds count the time they have held their slots so far. */
static uint64_t served_at(const struct fair_key *k, uint64_t now) {
  uint64_t ms = now > k->since_ms ? now - k->since_ms : 0;
  return k->served + ms * k->held * FAIR_MS / k->weight;
}

/* Counts the time held so far into served, before the pieces held or the weight change. */
static void settle(struct fair_key *k, uint64_t now) {
  k->served = served_at(k, now);
  if (now > k->since_ms) k->since_ms = now;
}

/* The sharing keys' weights in all, and the least served of those with work waiting. */
static void totals(const struct fair *f, uint64_t now, uint64_t *weights, uint64_t *least) {
  *weights = 0;
  *least = UINT64_MAX;
  for (size_t i = 0; i < f->n; i++) {
    const struct fair_key *k = &f->keys[i];
    if (!sharing(k, now)) continue;
    *weights += k->weight;
    if (!k->idle && served_at(k, now) < *least) *least = served_at(k, now);
  }
}

/* Drops the keys holding nothing and not seen for FAIR_FORGET_MS (all such when the table is full). */
static void forget(struct fair *f, uint64_t now, int all) {
  size_t w = 0;
  for (size_t i = 0; i < f->n; i++) {
    const struct fair_key *k = &f->keys[i];
    if (k->held == 0 && !sharing(k, now) && (all || now >= k->seen_ms + FAIR_FORGET_MS)) continue;
    f->keys[w++] = *k;
  }
  f->n = w;
}

static struct fair_key *get(struct fair *f, uint64_t now, const char *key, uint32_t weight) {
  struct fair_key *k = find(f, key);
  if (k != NULL) {
    settle(k, now);
    k->weight = weight > 0 ? weight : 1;
    return k;
  }
  if (strlen(key) > KEYS_MAX_NAME) return NULL;
  if (f->n == f->cap) forget(f, now, f->n >= FAIR_MAX_KEYS);
  if (f->n == f->cap) {
    if (f->cap >= FAIR_MAX_KEYS) return NULL;
    size_t cap = f->cap ? f->cap * 2 : 16;
    struct fair_key *grown = realloc(f->keys, cap * sizeof(*grown));
    if (grown == NULL) return NULL;
    f->keys = grown;
    f->cap = cap;
  }
  k = &f->keys[f->n++];
  memset(k, 0, sizeof(*k));
  memcpy(k->name, key, strlen(key) + 1);
  k->weight = weight > 0 ? weight : 1;
  k->idle = 1;
  k->since_ms = now;
  return k;
}

/* A key that starts to share again starts level with the least served of the others: no credit for its pause. */
static void join(struct fair *f, uint64_t now, struct fair_key *k) {
  if (sharing(k, now) && !k->idle) return;
  uint64_t weights, least;
  totals(f, now, &weights, &least);
  if (least != UINT64_MAX && k->served < least) k->served = least;
}

int fair_seen(struct fair *f, uint64_t now, const char *key, uint32_t weight) {
  struct fair_key *k = get(f, now, key, weight);
  if (k == NULL) return -ENOMEM;
  join(f, now, k);
  k->idle = 0;
  k->seen_ms = now;
  return 0;
}

void fair_idle(struct fair *f, const char *key) {
  struct fair_key *k = find(f, key);
  if (k != NULL) k->idle = 1;
}

/* The interval of a key's egress bucket (its weight w of the sharing keys' weights): its share of per_hour. */
static uint64_t interval_of(const struct fair *f, uint64_t weights, uint64_t w) {
  uint64_t us = (uint64_t)((double)FAIR_US_PER_HOUR * (double)weights / ((double)f->lim.per_hour * (double)w));
  return us > 0 ? us : 1;
}

/* Whether key's egress bucket has room for one more request now: 1 or 0 (always 1 with no egress share). */
static int bucket_room(const struct fair *f, uint64_t now, const struct fair_key *k, uint64_t weights) {
  if (f->lim.per_hour == 0) return 1;
  uint64_t interval = interval_of(f, weights, k->weight), burst = f->lim.burst * k->weight / weights;
  if (burst == 0) burst = 1;
  /* Its unit would put the bucket no more than a burst of intervals past now. */
  return k->full_at_us + interval <= now * 1000 + burst * interval;
}

/*
 * The slots as key sees them, cap in all: the sharing keys' weights (key's own counted, sharing or not), their whole
 * shares (cap * weight / weights, rounded down) in all, the slots they hold past those, and the least served of the
 * other keys with work waiting whose buckets let them start (UINT64_MAX: none).
 */
struct tally {
  uint64_t weights, based, over, least;
};

static uint64_t base_of(uint64_t cap, uint64_t w, uint64_t weights) { return cap * w / weights; }

static void tally(const struct fair *f, uint64_t now, const struct fair_key *key, uint64_t cap, struct tally *t) {
  t->weights = sharing(key, now) ? 0 : key->weight;
  for (size_t i = 0; i < f->n; i++)
    if (sharing(&f->keys[i], now)) t->weights += f->keys[i].weight;
  t->based = t->over = 0;
  t->least = UINT64_MAX;
  for (size_t i = 0; i < f->n; i++) {
    const struct fair_key *k = &f->keys[i];
    if (k != key && !sharing(k, now)) continue;
    uint64_t base = base_of(cap, k->weight, t->weights);
    t->based += base;
    t->over += k->held > base ? k->held - base : 0;
    if (k != key && !k->idle && bucket_room(f, now, k, t->weights) && served_at(k, now) < t->least)
      t->least = served_at(k, now);
  }
}

void fair_idle_but(struct fair *f, const char *const *skip, size_t n) {
  for (size_t i = 0; i < f->n; i++) {
    int passed = 0;
    for (size_t j = 0; j < n && !passed; j++) passed = strcmp(f->keys[i].name, skip[j]) == 0;
    if (!passed) f->keys[i].idle = 1;
  }
}

int fair_may_start(struct fair *f, uint64_t now, const char *key, uint64_t cap) {
  struct fair_key *k = find(f, key);
  if (k == NULL) return cap > 0;
  struct tally t;
  tally(f, now, k, cap, &t);
  if (!bucket_room(f, now, k, t.weights)) return 0;
  if (k->held < base_of(cap, k->weight, t.weights)) return 1;
  /*
   * Past its whole share: one of the slots the rounding down left over, while one is free, and only for the least
   * served of the keys waiting, so that a key holds more than its exact share only while none served less waits.
   */
  return t.based + t.over < cap && served_at(k, now) <= t.least;
}

int fair_started(struct fair *f, uint64_t now, const char *key, uint32_t weight) {
  struct fair_key *k = get(f, now, key, weight);
  if (k == NULL) return -ENOMEM;
  join(f, now, k);
  k->held++;
  /* A start counts a little too, so that work that ends at once still takes turns. */
  k->served += FAIR_START / k->weight;
  return 0;
}

void fair_ended(struct fair *f, uint64_t now, const char *key, uint32_t requests) {
  struct fair_key *k = find(f, key);
  if (k == NULL) return;
  settle(k, now);
  if (k->held > 0) k->held--;
  if (requests == 0 || f->lim.per_hour == 0) return;
  /* Spent at the interval of its share now. */
  uint64_t weights, least;
  totals(f, now, &weights, &least);
  if (!sharing(k, now)) weights += k->weight;
  uint64_t now_us = now * 1000, base = k->full_at_us > now_us ? k->full_at_us : now_us;
  k->full_at_us = base + (uint64_t)requests * interval_of(f, weights, k->weight);
}

size_t fair_skip(struct fair *f, uint64_t now, uint64_t cap, int ahead, const char **out, size_t max) {
  forget(f, now, 0);
  /* Whose turn it is: the least served of the keys that may start now (one at its share cannot take a turn). */
  uint64_t least = UINT64_MAX;
  for (size_t i = 0; i < f->n; i++) {
    const struct fair_key *k = &f->keys[i];
    if (sharing(k, now) && !k->idle && served_at(k, now) < least && fair_may_start(f, now, k->name, cap))
      least = served_at(k, now);
  }
  size_t n = 0;
  for (size_t i = 0; i < f->n && n < max; i++) {
    struct fair_key *k = &f->keys[i];
    int skip = !fair_may_start(f, now, k->name, cap);
    if (!skip && ahead && least != UINT64_MAX && sharing(k, now) && !k->idle) skip = served_at(k, now) > least;
    if (skip) out[n++] = k->name;
  }
  return n;
}

uint64_t fair_held(const struct fair *f, const char *key) {
  const struct fair_key *k = find(f, key);
  return k != NULL ? k->held : 0;
}

uint64_t fair_held_all(const struct fair *f) {
  uint64_t n = 0;
  for (size_t i = 0; i < f->n; i++) n += f->keys[i].held;
  return n;
}

size_t fair_sharing(struct fair *f, uint64_t now) {
  size_t n = 0;
  for (size_t i = 0; i < f->n; i++) n += sharing(&f->keys[i], now) != 0;
  return n;
}
