#include "gateway/limits/ratelimit_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/safefile.h"
#include "common/util.h"
#include "gateway/limits/ratelimit_backend.h"

/*
 * The table is shared between processes, so its atomics must be real lock-free instructions: a libatomic fallback
 * would take a lock that lives in one process only.
 */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free to be shared between processes");

/*
 * Word layouts. Window: end second of the window (34 bits, good until the year 2514) above the admitted count
 * (30 bits: VTS_RATE_LIMIT is at most 10^9 < 2^30). Month: month index since 1970 (16 bits) above the used count
 * (48 bits: VTS_MONTHLY_QUOTA is at most 10^12 < 2^48). A zero word is "no window / no month yet".
 */
#define WINDOW_COUNT_BITS 30
#define QUOTA_COUNT_BITS 48
#define COUNT_MASK(bits) ((UINT64_C(1) << (bits)) - 1)

#define SNAPSHOT_HEADER "vts-quota-snapshot 1"

struct rlmem_slot {
  _Atomic uint64_t tag; /* 64 bits of the key's digest, never 0; 0 is a free slot */
  _Atomic uint64_t window;
  _Atomic uint64_t quota;
  /* The redis provider: what the fail-open fallback counted in a window and a month, same layouts as above. */
  _Atomic uint64_t owed_window;
  _Atomic uint64_t owed_quota;
  /* The number of the owed counts, raised after every change of them (never reset, so it only grows for a key of
   * this gateway), and the highest number Redis is known to hold. Equal: nothing new to tell Redis. */
  _Atomic uint64_t owed_seq;
  _Atomic uint64_t told_seq;
  _Atomic int64_t used_s; /* the last second the key was decided: a full probe window gives up its oldest */
  /*
   * A fallback shared among gateways (rlmem_check_share): the counts of the window and the month when this gateway's
   * fallback began deciding the key, same layouts as above; zero while Redis answers (rlmem_mirror clears them).
   */
  _Atomic uint64_t share_window;
  _Atomic uint64_t share_quota;
};

struct rlmem_table {
  uint32_t nslots;
  size_t map_bytes;
  _Atomic uint64_t generation;     /* bumped on every quota change: a snapshot is due when it moved */
  _Atomic uint64_t snapshot_gen;   /* generation held by the last snapshot written */
  _Atomic uint64_t snapshot_ms;    /* monotonic ms at which the last snapshot started */
  _Atomic int64_t snapshot_writer; /* pid writing a snapshot now, 0 when none */
  struct rlmem_slot slots[];
};

struct rlmem_table *rlmem_create(uint32_t nslots) {
  if (nslots == 0 || (nslots & (nslots - 1)) != 0) {
    errno = EINVAL;
    return NULL;
  }
  size_t bytes = sizeof(struct rlmem_table) + (size_t)nslots * sizeof(struct rlmem_slot);
  /* Anonymous shared memory is zero-filled: every slot starts free, every counter at zero. */
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  struct rlmem_table *t = p;
  t->nslots = nslots;
  t->map_bytes = bytes;
  return t;
}

void rlmem_destroy(struct rlmem_table *t) {
  if (t != NULL) munmap(t, t->map_bytes);
}

/* Parses exactly 16 hex characters. Returns 0, or -EINVAL. */
static int parse_hex64(const char *s, uint64_t *out) {
  uint64_t v = 0;
  for (int i = 0; i < 16; i++) {
    int h = util_hex_value(s[i]);
    if (h < 0) return -EINVAL;
    v = (v << 4) | (uint64_t)h;
  }
  *out = v;
  return 0;
}

/*
 * The slot tag of a key: the first 64 bits of its SHA-256 digest. Two keys sharing them is a 2^-64 event per pair
 * (about 10^-10 for a full table), and would make them share one limit, nothing worse.
 */
static uint64_t digest_tag(const char *digest) {
  uint64_t tag = 0;
  if (parse_hex64(digest, &tag) != 0) {
    /* Not a digest (never from keys.c): hash the text instead (FNV-1a) so the limiter still works. */
    tag = UINT64_C(1469598103934665603);
    for (const char *p = digest; *p != '\0'; p++) tag = (tag ^ (uint8_t)*p) * UINT64_C(1099511628211);
  }
  return tag != 0 ? tag : 1;
}

_Static_assert(VTS_RATELIMIT_SLOTS >= 2 * VTS_MAX_KEYS, "the key file must not be able to fill the table");

/*
 * A slot whose key has nothing left to count at second now: its window ended and its month is over. Its counts
 * would read as zero anyway (word_period), so another key may take it over.
 */
static bool slot_stale(struct rlmem_slot *s, int64_t now) {
  uint64_t w = atomic_load(&s->window), q = atomic_load(&s->quota);
  return (int64_t)(w >> WINDOW_COUNT_BITS) <= now && (int64_t)(q >> QUOTA_COUNT_BITS) < rlcalc_month_index(now);
}

/*
 * How far from its home slot a key may live. Slots are never emptied (only taken over), so after months of new keys
 * a table may hold no free slot at all: every new key then scans its whole window, so the window is short. With at
 * most 38% of the slots live (VTS_RATELIMIT_SLOTS), a linear-probing run this long does not happen in practice.
 */
#define RLMEM_MAX_PROBES 64

/*
 * Finds the key's slot; when create is set and it has none, claims the first stale slot of its probe window, else
 * the free slot that ends the chain, else (a window with neither) the slot used least recently: its key has not been
 * seen for longer than any other of the window, so its counts are the ones forgotten (limits.h says what that costs).
 * Linear probing: slots are taken over, never emptied, so no chain is ever cut. The whole window is searched before a
 * slot is claimed, so a key never gets a second slot.
 */
static struct rlmem_slot *slot_find(struct rlmem_table *t, uint64_t tag, bool create, int64_t now) {
  uint32_t mask = t->nslots - 1;
  uint32_t probes = t->nslots < RLMEM_MAX_PROBES ? t->nslots : RLMEM_MAX_PROBES;
  for (int attempt = 0; attempt < 8; attempt++) {
    struct rlmem_slot *claim = NULL, *oldest = NULL;
    uint64_t claim_tag = 0, oldest_tag = 0;
    int64_t oldest_s = INT64_MAX;
    bool chain_end = false;
    for (uint32_t i = 0; i < probes; i++) {
      struct rlmem_slot *s = &t->slots[(tag + i) & mask];
      uint64_t cur = atomic_load(&s->tag);
      if (cur == tag) return s;
      if (cur == 0) {
        if (claim == NULL) claim = s;
        chain_end = true;
        break;
      }
      if (!create || claim != NULL) continue;
      if (slot_stale(s, now)) {
        claim = s;
        claim_tag = cur;
        continue;
      }
      int64_t used = atomic_load(&s->used_s);
      if (used < oldest_s) {
        oldest = s;
        oldest_tag = cur;
        oldest_s = used;
      }
    }
    if (!create) return NULL;
    if (claim == NULL && !chain_end && oldest != NULL) {
      claim = oldest;
      claim_tag = oldest_tag;
    }
    if (claim == NULL) return NULL;
    uint64_t expected = claim_tag;
    if (atomic_compare_exchange_strong(&claim->tag, &expected, tag)) {
      if (claim_tag != 0) {
        /* Taken over: the old key's counts must not be read as this key's. */
        atomic_store(&claim->window, 0);
        atomic_store(&claim->quota, 0);
        atomic_store(&claim->owed_window, 0);
        atomic_store(&claim->owed_quota, 0);
      }
      atomic_store(&claim->used_s, now);
      return claim;
    }
    /* Another process claimed this slot first, maybe for the same key; else search again. */
    if (expected == tag) return claim;
  }
  return NULL;
}

/*
 * The period (window end or month index) a request at `mine` counts in, given the stored word, and the count stored
 * for it. A stored period one step ahead of ours means a process whose clock already crossed the boundary wrote
 * first: count in that newer period rather than rewinding it (which would grant its requests a second time). Any
 * other stored period is stale (or from an older window length) and counts as empty.
 */
static void word_period(uint64_t word, int bits, int64_t mine, int64_t step, int64_t *period, int64_t *count) {
  int64_t stored = (int64_t)(word >> bits);
  if (stored == mine || stored == mine + step) {
    *period = stored;
    *count = (int64_t)(word & COUNT_MASK(bits));
  } else {
    *period = mine;
    *count = 0;
  }
}

/*
 * Takes one unit of the counter for period `mine` if it stays within max. Returns true when taken; *period and
 * *count are the period counted in and its count afterwards (or the count that refused).
 */
static bool word_take(_Atomic uint64_t *w, int bits, int64_t mine, int64_t step, int64_t max, int64_t *period,
                      int64_t *count) {
  uint64_t old = atomic_load(w);
  for (;;) {
    word_period(old, bits, mine, step, period, count);
    if (*count >= max || (uint64_t)*count >= COUNT_MASK(bits)) return false;
    uint64_t next = ((uint64_t)*period << bits) | (uint64_t)(*count + 1);
    if (atomic_compare_exchange_weak(w, &old, next)) {
      (*count)++;
      return true;
    }
  }
}

/* Gives back a unit taken by word_take, unless the period has moved on since (then there is nothing to undo). */
static void word_give_back(_Atomic uint64_t *w, int bits, int64_t period) {
  uint64_t old = atomic_load(w);
  for (;;) {
    if ((int64_t)(old >> bits) != period || (old & COUNT_MASK(bits)) == 0) return;
    if (atomic_compare_exchange_weak(w, &old, old - 1)) return;
  }
}

/* Raises the count of period to at least value; a word already in a later period is left alone. */
static void word_raise(_Atomic uint64_t *w, int bits, int64_t period, int64_t value) {
  if (value <= 0) return;
  uint64_t capped = (uint64_t)value < COUNT_MASK(bits) ? (uint64_t)value : COUNT_MASK(bits);
  uint64_t old = atomic_load(w);
  for (;;) {
    int64_t stored = (int64_t)(old >> bits);
    if (stored > period || (stored == period && (old & COUNT_MASK(bits)) >= capped)) return;
    if (atomic_compare_exchange_weak(w, &old, ((uint64_t)period << bits) | capped)) return;
  }
}

/* The second a decision is computed at: now, or the start of the next window when a peer already moved there. */
static int64_t window_now(int64_t now, int64_t window_end, int64_t window_s) {
  return window_end - window_s > now ? window_end - window_s : now;
}

/*
 * The cap of a counter shared among n gateways while none can reach Redis: the count when this gateway's fallback
 * began deciding the key in this period (base, recorded on first use), plus an n-th of what was left then. Each of
 * the n gateways admits at most its n-th, so together they admit at most what was left.
 */
static int64_t share_cap(_Atomic uint64_t *count_word, _Atomic uint64_t *base_word, int bits, int64_t mine,
                         int64_t step, int64_t max, uint32_t n) {
  uint64_t b = atomic_load(base_word);
  int64_t base;
  for (;;) {
    if (b != 0 && (int64_t)(b >> bits) == mine) {
      base = (int64_t)(b & COUNT_MASK(bits));
      break;
    }
    int64_t period, cur;
    word_period(atomic_load(count_word), bits, mine, step, &period, &cur);
    if (atomic_compare_exchange_weak(base_word, &b, ((uint64_t)mine << bits) | (uint64_t)cur)) {
      base = cur;
      break;
    }
  }
  return base >= max ? base : base + (max - base) / (int64_t)n;
}

/* rlmem_check, or with reserve false rlmem_check_unspent; share > 1 decides by a share (rlmem_check_share). */
static int check(struct rlmem_table *t, const char *digest, const struct rl_limits *full, int64_t now, bool reserve,
                 uint32_t share, struct rl_decision *d) {
  struct rlmem_slot *s = slot_find(t, digest_tag(digest), true, now);
  if (s == NULL) return -ENOSPC;
  struct rl_limits shared = *full;
  if (share > 1) {
    shared.quota =
        share_cap(&s->quota, &s->share_quota, QUOTA_COUNT_BITS, rlcalc_month_index(now), 1, full->quota, share);
    shared.rate = share_cap(&s->window, &s->share_window, WINDOW_COUNT_BITS, rlcalc_window_reset(now, full->window_s),
                            full->window_s, full->rate, share);
  }
  const struct rl_limits *lim = &shared;
  if (atomic_load_explicit(&s->used_s, memory_order_relaxed) < now)
    atomic_store_explicit(&s->used_s, now, memory_order_relaxed);
  int64_t month = rlcalc_month_index(now);
  int64_t reset = rlcalc_window_reset(now, lim->window_s);
  int64_t qperiod, qused, wperiod, wused;

  /*
   * The window counts every request that passed the key check, refused or not (a count at the word's capacity
   * stays there and still refuses). A peer may have moved the window on: the headers then describe that window.
   */
  word_take(&s->window, WINDOW_COUNT_BITS, reset, lim->window_s, (int64_t)COUNT_MASK(WINDOW_COUNT_BITS), &wperiod,
            &wused);
  int64_t wnow = window_now(now, wperiod, lim->window_s);
  /* Quota first, read only: an exhausted month reserves nothing. */
  word_period(atomic_load(&s->quota), QUOTA_COUNT_BITS, month, 1, &qperiod, &qused);
  if (qused >= lim->quota) {
    rlcalc_decision(d, RL_QUOTA, lim, wnow, wused, qused);
    return 0;
  }
  if (wused > lim->rate || !reserve) {
    rlcalc_decision(d, wused > lim->rate ? RL_LIMITED : RL_ALLOW, lim, wnow, wused, qused);
    return 0;
  }
  /* Admitted by the window; reserve the month's unit. Another worker may have taken the last one since the read. */
  if (!word_take(&s->quota, QUOTA_COUNT_BITS, month, 1, lim->quota, &qperiod, &qused)) {
    rlcalc_decision(d, RL_QUOTA, lim, wnow, wused, qused);
    return 0;
  }
  atomic_fetch_add(&t->generation, 1);
  rlcalc_decision(d, RL_ALLOW, lim, wnow, wused, qused);
  d->reserved_month = qperiod;
  return 0;
}

int rlmem_check(struct rlmem_table *t, const char *digest, const struct rl_limits *lim, int64_t now,
                struct rl_decision *d) {
  return check(t, digest, lim, now, true, 1, d);
}

int rlmem_check_unspent(struct rlmem_table *t, const char *digest, const struct rl_limits *lim, int64_t now,
                        struct rl_decision *d) {
  return check(t, digest, lim, now, false, 1, d);
}

int rlmem_charge_month(struct rlmem_table *t, const char *digest, int64_t quota, int64_t now, int64_t *month,
                       enum rl_charge *outcome) {
  struct rlmem_slot *s = slot_find(t, digest_tag(digest), true, now);
  if (s == NULL) return -ENOSPC;
  if (atomic_load_explicit(&s->used_s, memory_order_relaxed) < now)
    atomic_store_explicit(&s->used_s, now, memory_order_relaxed);
  int64_t qperiod, qused;
  if (!word_take(&s->quota, QUOTA_COUNT_BITS, rlcalc_month_index(now), 1, quota, &qperiod, &qused)) {
    *outcome = RL_CHARGE_QUOTA_USED_UP;
    return 0;
  }
  atomic_fetch_add(&t->generation, 1);
  *month = qperiod;
  *outcome = RL_CHARGE_TAKEN;
  return 0;
}

int rlmem_check_share(struct rlmem_table *t, const char *digest, const struct rl_limits *lim, int64_t now,
                      uint32_t gateways, struct rl_decision *d) {
  int rv = check(t, digest, lim, now, true, gateways > 1 ? gateways : 1, d);
  if (rv == 0) {
    /* The key's limits as configured; what is left is this gateway's share of them. */
    d->limit = lim->rate;
    d->quota_limit = lim->quota;
  }
  return rv;
}

void rlmem_refund(struct rlmem_table *t, const char *digest, int64_t month) {
  struct rlmem_slot *s = slot_find(t, digest_tag(digest), false, 0);
  if (s == NULL) return;
  word_give_back(&s->quota, QUOTA_COUNT_BITS, month);
  atomic_fetch_add(&t->generation, 1);
}

/* Adds one to the count of period, starting it at zero when the word holds another period (never wraps). */
static void word_add(_Atomic uint64_t *w, int bits, int64_t period) {
  uint64_t old = atomic_load(w);
  for (;;) {
    uint64_t count = (int64_t)(old >> bits) == period ? (old & COUNT_MASK(bits)) : 0;
    if (count >= COUNT_MASK(bits)) return;
    if (atomic_compare_exchange_weak(w, &old, ((uint64_t)period << bits) | (count + 1))) return;
  }
}

void rlmem_owed_add(struct rlmem_table *t, const char *digest, const struct rl_decision *d, bool spent) {
  struct rlmem_slot *s = slot_find(t, digest_tag(digest), false, 0);
  if (s == NULL) return;
  word_add(&s->owed_window, WINDOW_COUNT_BITS, d->reset);
  if (d->outcome == RL_ALLOW && spent) word_add(&s->owed_quota, QUOTA_COUNT_BITS, d->reserved_month);
  /* After the counts: a reader that sees this number sees counts at least this new (rlmem_owed_read). */
  atomic_fetch_add(&s->owed_seq, 1);
}

void rlmem_owed_refund(struct rlmem_table *t, const char *digest, int64_t month) {
  rlmem_refund(t, digest, month);
  struct rlmem_slot *s = slot_find(t, digest_tag(digest), false, 0);
  if (s == NULL) return;
  word_give_back(&s->owed_quota, QUOTA_COUNT_BITS, month);
  atomic_fetch_add(&s->owed_seq, 1);
}

/* The count a word holds for exactly this period, or -1. */
static int64_t word_count_of(_Atomic uint64_t *w, int bits, int64_t period) {
  uint64_t v = atomic_load(w);
  return v != 0 && (int64_t)(v >> bits) == period ? (int64_t)(v & COUNT_MASK(bits)) : -1;
}

void rlmem_owed_read(struct rlmem_table *t, const char *digest, int64_t window_end, int64_t month, int64_t now,
                     struct rl_owed *out) {
  out->window = -1;
  out->quota = -1;
  out->seq = 0;
  struct rlmem_slot *s = slot_find(t, digest_tag(digest), false, now);
  if (s == NULL) return;
  /* The number first, then the counts: they are at least as new as the number says. */
  uint64_t seq = atomic_load(&s->owed_seq);
  if (seq <= atomic_load(&s->told_seq)) return;
  out->window = word_count_of(&s->owed_window, WINDOW_COUNT_BITS, window_end);
  out->quota = word_count_of(&s->owed_quota, QUOTA_COUNT_BITS, month);
  out->seq = seq;
}

void rlmem_owed_acked(struct rlmem_table *t, const char *digest, uint64_t seq) {
  struct rlmem_slot *s = slot_find(t, digest_tag(digest), false, 0);
  if (s == NULL) return;
  uint64_t told = atomic_load(&s->told_seq);
  while (told < seq && !atomic_compare_exchange_weak(&s->told_seq, &told, seq)) {
  }
}

void rlmem_mirror(struct rlmem_table *t, const char *digest, const struct rl_limits *lim, int64_t now,
                  int64_t window_used, int64_t quota_used) {
  struct rlmem_slot *s = slot_find(t, digest_tag(digest), true, now);
  if (s == NULL) return;
  word_raise(&s->window, WINDOW_COUNT_BITS, rlcalc_window_reset(now, lim->window_s), window_used);
  /* Redis answers: a later fallback shares what is left then, counted from there. */
  atomic_store(&s->share_window, 0);
  atomic_store(&s->share_quota, 0);
  uint64_t before = atomic_load(&s->quota);
  word_raise(&s->quota, QUOTA_COUNT_BITS, rlcalc_month_index(now), quota_used);
  if (atomic_load(&s->quota) != before) atomic_fetch_add(&t->generation, 1);
}

static int snapshot_path(char *out, size_t outlen, const char *dir) {
  int n = snprintf(out, outlen, "%s/%s", dir, RLMEM_SNAPSHOT_FILE);
  return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

int rlmem_snapshot_write(struct rlmem_table *t, const char *dir, int64_t now) {
  char path[PATH_MAX];
  int rv = snapshot_path(path, sizeof(path), dir);
  if (rv != 0) return rv;
  int64_t month = rlcalc_month_index(now);
  struct buf out = BUF_INIT;
  rv = buf_printf(&out, "%s\n", SNAPSHOT_HEADER);
  for (uint32_t i = 0; rv == 0 && i < t->nslots; i++) {
    uint64_t tag = atomic_load(&t->slots[i].tag);
    if (tag == 0) continue;
    uint64_t q = atomic_load(&t->slots[i].quota);
    int64_t qmonth = (int64_t)(q >> QUOTA_COUNT_BITS);
    uint64_t used = q & COUNT_MASK(QUOTA_COUNT_BITS);
    /* Only the current month matters to a restart; a later month appears when the clock sits on the boundary. */
    if (used == 0 || qmonth < month) continue;
    rv = buf_printf(&out, "%016" PRIx64 " %" PRId64 " %" PRIu64 "\n", tag, qmonth, used);
  }
  if (rv == 0) rv = safefile_replace(path, out.data, out.len, 0600, 0, NULL, 0);
  buf_free(&out);
  return rv;
}

/* Splits "tag month used" in place. Returns 0, or -EINVAL. */
static int parse_snapshot_line(char *line, uint64_t *tag, int64_t *month, int64_t *used) {
  size_t len = strlen(line);
  if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
  char *sp1 = strchr(line, ' ');
  if (sp1 == NULL || sp1 - line != 16) return -EINVAL;
  char *sp2 = strchr(sp1 + 1, ' ');
  if (sp2 == NULL) return -EINVAL;
  *sp1 = '\0';
  *sp2 = '\0';
  if (parse_hex64(line, tag) != 0 || *tag == 0) return -EINVAL;
  if (util_parse_i64(sp1 + 1, 0, (INT64_C(1) << 16) - 1, month) != 0) return -EINVAL;
  if (util_parse_i64(sp2 + 1, 0, (int64_t)COUNT_MASK(QUOTA_COUNT_BITS), used) != 0) return -EINVAL;
  return 0;
}

int rlmem_snapshot_restore(struct rlmem_table *t, const char *dir, int64_t now, char *err, size_t errlen) {
  char path[PATH_MAX];
  int rv = snapshot_path(path, sizeof(path), dir);
  if (rv != 0) {
    snprintf(err, errlen, "VTS_STATE_DIR: path too long");
    return rv;
  }
  FILE *f = fopen(path, "re");
  if (f == NULL) {
    if (errno == ENOENT) return 0;
    rv = -errno;
    snprintf(err, errlen, "VTS_STATE_DIR: cannot read %s: %s", path, strerror(-rv));
    return rv;
  }
  int64_t month = rlcalc_month_index(now);
  char *line = NULL;
  size_t cap = 0;
  int lineno = 0;
  while (getline(&line, &cap, f) >= 0) {
    lineno++;
    if (lineno == 1) {
      if (strcmp(line, SNAPSHOT_HEADER "\n") != 0) goto malformed;
      continue;
    }
    uint64_t tag;
    int64_t lmonth, used;
    if (parse_snapshot_line(line, &tag, &lmonth, &used) != 0) goto malformed;
    if (lmonth != month) continue; /* another month's usage: it no longer counts */
    struct rlmem_slot *s = slot_find(t, tag, true, now);
    if (s == NULL) {
      rv = -ENOSPC;
      snprintf(err, errlen, "VTS_STATE_DIR: %s holds more keys than the table (%d)", path, VTS_RATELIMIT_SLOTS);
      goto fail;
    }
    word_raise(&s->quota, QUOTA_COUNT_BITS, month, used);
  }
  if (ferror(f)) {
    rv = -EIO;
    snprintf(err, errlen, "VTS_STATE_DIR: cannot read %s", path);
    goto fail;
  }
  /* What was just loaded is on disk already: no snapshot is due until usage changes. */
  atomic_store(&t->snapshot_gen, atomic_load(&t->generation));
  free(line);
  fclose(f);
  return 0;

malformed:
  rv = -EINVAL;
  snprintf(err, errlen, "VTS_STATE_DIR: %s is malformed at line %d (fix or remove it)", path, lineno);
fail:
  free(line);
  fclose(f);
  return rv;
}

static bool process_alive(int64_t pid) { return kill((pid_t)pid, 0) == 0 || errno == EPERM; }

bool rlmem_snapshot_begin(struct rlmem_table *t, uint64_t now_ms, bool at_exit, uint64_t *gen) {
  uint64_t g = atomic_load(&t->generation);
  if (g == atomic_load(&t->snapshot_gen)) return false;
  if (!at_exit && now_ms - atomic_load(&t->snapshot_ms) < VTS_RATELIMIT_SNAPSHOT_INTERVAL_MS) return false;
  int64_t writer = atomic_load(&t->snapshot_writer);
  /* A writer that died mid-snapshot (a crashed worker) must not block snapshots forever: take over its claim. */
  if (writer != 0 && process_alive(writer)) return false;
  if (!atomic_compare_exchange_strong(&t->snapshot_writer, &writer, (int64_t)getpid())) return false;
  atomic_store(&t->snapshot_ms, now_ms);
  *gen = g;
  return true;
}

void rlmem_snapshot_end(struct rlmem_table *t, uint64_t gen, bool ok) {
  if (ok) atomic_store(&t->snapshot_gen, gen);
  atomic_store(&t->snapshot_writer, 0);
}

void rlmem_decide(struct rlmem_table *t, const char *digest, const struct rl_limits *lim, int64_t now, bool spend,
                  uint32_t gateways, struct rl_decision *d, struct ratelimit_stats *stats) {
  int rv = !spend         ? rlmem_check_unspent(t, digest, lim, now, d)
           : gateways > 1 ? rlmem_check_share(t, digest, lim, now, gateways, d)
                          : rlmem_check(t, digest, lim, now, d);
  if (rv == 0) {
    if (spend && d->outcome == RL_ALLOW) rlcalc_reserved(d, RL_STORE_MEMORY, digest, d->reserved_month);
    return;
  }
  stats->table_full++;
  rlcalc_decision(d, RL_UNAVAILABLE, lim, now, 0, 0);
}

/*
 * The memory backend: the shared table decides every check, and its month's usage is snapshotted to VTS_STATE_DIR so
 * a restart loses no quota.
 */
struct rlmem_limiter {
  struct ratelimit base;
  uv_timer_t snap_timer; /* offers a snapshot every VTS_RATELIMIT_SNAPSHOT_INTERVAL_MS */
  bool snap_timer_on;
  uv_work_t snap_work; /* the snapshot is written on the threadpool: fsync must not stall the loop */
  bool snap_busy;
  bool snap_failed_logged;
  uint64_t snap_gen;
  int snap_rv;
  int refs; /* 1 for the owner, plus the snapshot timer and a snapshot in progress */
  bool closing;
};

/* Creating a file is the only honest test of writability (access() ignores read-only mounts and is moot as root). */
static int probe_writable(const char *dir) {
  char path[PATH_MAX];
  int n = snprintf(path, sizeof(path), "%s/.vts-write-probe.%ld", dir, (long)getpid());
  if (n < 0 || (size_t)n >= sizeof(path)) return -ENAMETOOLONG;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  close(fd);
  unlink(path);
  return 0;
}

static int mem_selected(const struct vts_config *cfg) {
  (void)cfg;
  return 1;
}

/* The state directory, made when missing and proved writable, and this month's usage reloaded from its snapshot. */
static int mem_init(const struct vts_config *cfg, struct ratelimit_shared *s, char *err, size_t errlen) {
  int rv = util_make_dirs(cfg->state_dir);
  if (rv == 0) rv = probe_writable(cfg->state_dir);
  if (rv != 0) {
    snprintf(err, errlen, "VTS_STATE_DIR: %s is not a writable directory: %s", cfg->state_dir, strerror(-rv));
    return rv;
  }
  return rlmem_snapshot_restore(s->table, cfg->state_dir, util_wall_s(), err, errlen);
}

static int mem_save(const struct vts_config *cfg, const struct ratelimit_shared *s) {
  return rlmem_snapshot_write(s->table, cfg->state_dir, util_wall_s());
}

static void mem_unref(struct rlmem_limiter *m) {
  if (--m->refs == 0) free(m);
}

static void snap_timer_closed(uv_handle_t *h) { mem_unref(h->data); }

/* Runs on a threadpool thread: touches only the shared table (atomics) and the file system. */
static void snap_work(uv_work_t *w) {
  struct rlmem_limiter *m = w->data;
  m->snap_rv = rlmem_snapshot_write(m->base.table, m->base.cfg.state_dir, util_wall_s());
}

static void snap_done(uv_work_t *w, int status) {
  struct rlmem_limiter *m = w->data;
  bool ok = status == 0 && m->snap_rv == 0;
  rlmem_snapshot_end(m->base.table, m->snap_gen, ok);
  if (!ok && !m->snap_failed_logged) {
    log_msg(LOG_ERROR, "quota snapshot failed", "path", m->base.cfg.state_dir, "error",
            strerror(status != 0 ? -status : -m->snap_rv), NULL);
  }
  m->snap_failed_logged = !ok;
  m->snap_busy = false;
  mem_unref(m);
}

/*
 * Every worker offers; the table lets one process at a time write, at most once per interval and only when usage
 * changed, so no worker is special and a dead one is not missed.
 */
static void on_snap_timer(uv_timer_t *t) {
  struct rlmem_limiter *m = t->data;
  if (m->snap_busy || m->closing) return;
  if (!rlmem_snapshot_begin(m->base.table, util_now_ms(), false, &m->snap_gen)) return;
  m->snap_busy = true;
  m->refs++;
  if (uv_queue_work(m->base.loop, &m->snap_work, snap_work, snap_done) != 0) {
    rlmem_snapshot_end(m->base.table, m->snap_gen, false);
    m->snap_busy = false;
    m->refs--;
  }
}

static struct ratelimit *mem_open(uv_loop_t *loop, const struct vts_config *cfg, const struct ratelimit_shared *s) {
  struct rlmem_limiter *m = calloc(1, sizeof(*m));
  if (m == NULL) return NULL;
  m->base.ops = &ratelimit_memory_ops;
  m->base.loop = loop;
  m->base.cfg = *cfg;
  m->base.table = s->table;
  m->refs = 1;
  m->snap_work.data = m;
  uv_timer_init(loop, &m->snap_timer);
  m->snap_timer.data = m;
  uv_timer_start(&m->snap_timer, on_snap_timer, VTS_RATELIMIT_SNAPSHOT_INTERVAL_MS, VTS_RATELIMIT_SNAPSHOT_INTERVAL_MS);
  /* The snapshot timer alone must not keep a draining worker's loop alive. */
  uv_unref((uv_handle_t *)&m->snap_timer);
  m->snap_timer_on = true;
  m->refs++;
  return &m->base;
}

/*
 * A worker leaving writes what changed since the last snapshot, synchronously: the master's final save covers a clean
 * shutdown, this also covers a worker stopped on its own.
 */
static void snapshot_at_exit(struct rlmem_limiter *m) {
  uint64_t gen;
  if (m->snap_busy || !rlmem_snapshot_begin(m->base.table, util_now_ms(), true, &gen)) return;
  int rv = rlmem_snapshot_write(m->base.table, m->base.cfg.state_dir, util_wall_s());
  rlmem_snapshot_end(m->base.table, gen, rv == 0);
  if (rv != 0) log_msg(LOG_ERROR, "quota snapshot failed", "path", m->base.cfg.state_dir, "error", strerror(-rv), NULL);
}

static void mem_close(struct ratelimit *rl) {
  struct rlmem_limiter *m = (struct rlmem_limiter *)rl;
  if (m->snap_timer_on) snapshot_at_exit(m);
  m->closing = true;
  if (m->snap_timer_on) uv_close((uv_handle_t *)&m->snap_timer, snap_timer_closed);
  m->snap_timer_on = false;
  mem_unref(m);
}

static void mem_check(struct ratelimit *rl, const char *digest, const struct rl_limits *lim, bool spend, rl_cb cb,
                      void *arg) {
  struct rl_decision d;
  rlmem_decide(rl->table, digest, lim, util_wall_s(), spend, 1, &d, &rl->stats);
  rlcalc_count(&rl->stats, &d);
  cb(arg, &d);
}

static void mem_refund(struct ratelimit *rl, enum rl_store in, const char *digest, int64_t month) {
  (void)in;
  rlmem_refund(rl->table, digest, month);
}

const struct rl_backend_ops ratelimit_memory_ops = {
    .version = RL_BACKEND_OPS_VERSION,
    .name = "memory",
    .shared_size = sizeof(struct ratelimit_shared),
    .selected = mem_selected,
    .init = mem_init,
    .save = mem_save,
    .open = mem_open,
    .close = mem_close,
    .check = mem_check,
    .refund = mem_refund,
};
