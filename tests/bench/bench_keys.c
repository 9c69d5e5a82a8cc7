/*
 * The cost of finding a key's entry by name in the fullest key file (VTS_MAX_KEYS entries), as the dispatcher's
 * runner does on its loop for every take, every item's unit and, at a reload, for every active key of the previous
 * file. Compares a walk over the entries (how the runner found a name before the store had an index by name) with
 * keystore_named, for the last name of the file, a name not in it and names drawn across the file, and times a whole
 * reload's worth of lookups (one per key). Prints nanoseconds per lookup, medians of 5 runs.
 *   build/bin/bench_keys [LOOKUPS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/util.h"
#include "gateway/keys/keys.h"
#include "tests/bench/bench_timing.h"

#define RUNS 5

/* The walk the runner made before keystore_named. */
static const struct key_entry *walk_named(const struct keystore *ks, const char *name) {
  for (size_t i = 0; i < keystore_count(ks); i++) {
    const struct key_entry *k = keystore_entry(ks, i);
    if (strcmp(k->name, name) == 0) return k;
  }
  return NULL;
}

typedef const struct key_entry *(*named_fn)(const struct keystore *ks, const char *name);

/* Nanoseconds per lookup of names[i % nnames], the median of RUNS runs of calls lookups. found counts the hits. */
static double per_lookup(named_fn fn, const struct keystore *ks, char (*names)[KEYS_MAX_NAME + 1], size_t nnames,
                         size_t calls, size_t *found) {
  double ns[RUNS];
  for (int r = 0; r < RUNS; r++) {
    size_t hits = 0;
    double t0 = bench_now_ms();
    for (size_t i = 0; i < calls; i++) hits += fn(ks, names[i % nnames]) != NULL;
    ns[r] = (bench_now_ms() - t0) * 1e6 / (double)calls;
    *found = hits;
  }
  qsort(ns, RUNS, sizeof(ns[0]), bench_cmp_double);
  return ns[RUNS / 2];
}

int main(int argc, char **argv) {
  int64_t lookups = 0;
  if (bench_iterations(argc, argv, &lookups) != 0) return 2;
  size_t n = VTS_MAX_KEYS;
  struct key_entry *entries = calloc(n, sizeof(*entries));
  char(*names)[KEYS_MAX_NAME + 1] = calloc(n + 1, sizeof(*names));
  if (entries == NULL || names == NULL) return 1;
  for (size_t i = 0; i < n; i++) {
    char key[32];
    snprintf(entries[i].name, sizeof(entries[i].name), "customer-%zu", i);
    snprintf(key, sizeof(key), "secret-%zu", i);
    util_sha256_hex(key, strlen(key), entries[i].digest);
    entries[i].active = 1;
  }
  /* Names across the file in a scrambled order (a stride prime to n), then one name not in it. */
  for (size_t i = 0; i < n; i++) memcpy(names[i], entries[(i * 7919) % n].name, sizeof(names[i]));
  snprintf(names[n], sizeof(names[n]), "customer-%zu", n);

  const char *tmp = getenv("TMPDIR");
  char dir[512], path[600], err[256] = "";
  snprintf(dir, sizeof(dir), "%s/vts-bench-keys.XXXXXX", tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  if (mkdtemp(dir) == NULL) return 1;
  snprintf(path, sizeof(path), "%s/keys", dir);
  int rc = keystore_save(path, entries, n, err, sizeof(err));
  struct keystore *ks = rc == 0 ? keystore_load(path, err, sizeof(err)) : NULL;
  unlink(path);
  rmdir(dir);
  if (ks == NULL) {
    fprintf(stderr, "key file not made: %s\n", err);
    return 1;
  }

  size_t calls = (size_t)lookups, found = 0, last = 0;
  /* Where the scramble put the file's last entry: the walk's worst case. */
  while (strcmp(names[last], entries[n - 1].name) != 0) last++;
  struct {
    const char *what;
    char (*names)[KEYS_MAX_NAME + 1];
    size_t nnames;
    size_t want;
  } cases[] = {
      {"the last name", names + last, 1, 1},
      {"a name not in the file", names + n, 1, 0},
      {"names across the file", names, n, 1},
  };
  printf("key file of %zu entries; ns per lookup by name, median of %d runs of %zu lookups\n", n, RUNS, calls);
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    double walk = per_lookup(walk_named, ks, cases[c].names, cases[c].nnames, calls, &found);
    size_t walk_found = found;
    double index = per_lookup(keystore_named, ks, cases[c].names, cases[c].nnames, calls, &found);
    if (walk_found != calls * cases[c].want || found != calls * cases[c].want) {
      fprintf(stderr, "%s: found %zu (walk) and %zu (index) of %zu\n", cases[c].what, walk_found, found, calls);
      return 1;
    }
    printf("  %-24s walk %10.0f ns   index %6.0f ns\n", cases[c].what, walk, index);
  }
  /* A reload asks once for each active key of the previous file: the walk's time is its mean lookup times n. */
  double t0 = bench_now_ms();
  for (size_t i = 0; i < n; i++) found += keystore_named(ks, names[i]) != NULL;
  double index_ms = bench_now_ms() - t0;
  double walk_ms = per_lookup(walk_named, ks, names, n, calls, &found) * (double)n / 1e6;
  printf("  one lookup per key (a reload): walk %.0f ms (mean lookup x %zu), index %.1f ms (timed)\n", walk_ms, n,
         index_ms);
  keystore_free(ks);
  free(entries);
  free(names);
  return 0;
}
