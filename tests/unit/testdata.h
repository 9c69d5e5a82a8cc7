/* Reading test fixtures: our own under $VTS_TEST_DATA, the shared captures under $VTS_SHARED_FIXTURES. */
#ifndef VTS_TESTDATA_H
#define VTS_TESTDATA_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads a whole file into a new buffer (NUL-terminated, not counted in *len). Returns NULL when unreadable. */
static inline char *testdata_read_path(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *data = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 65536;
      char *p = realloc(data, cap);
      if (!p) break;
      data = p;
    }
    size_t got = fread(data + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
  }
  int bad = ferror(f) || !data;
  fclose(f);
  if (bad) {
    free(data);
    return NULL;
  }
  data[n] = '\0';
  *len = n;
  return data;
}

/* Reads one of our fixtures from $VTS_TEST_DATA (set by ctest); NULL when missing. */
static inline char *testdata_read(const char *name, size_t *len) {
  const char *dir = getenv("VTS_TEST_DATA");
  char path[4096];
  if (!dir) return NULL;
  int n = snprintf(path, sizeof(path), "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= sizeof(path)) return NULL;
  return testdata_read_path(path, len);
}

/* An exact-size heap copy, so that the sanitizers see any read past the end. */
static inline char *testdata_exact(const char *s, size_t len) {
  char *p = malloc(len ? len : 1);
  if (p && len) memcpy(p, s, len);
  return p;
}

#endif
