#include "gateway/http/idfold.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What qsort orders: an id's bytes, then its place, so that equal ids stand in their first order. */
struct idref {
  const char *id;
  size_t at;
};

static int idref_cmp(const void *a, const void *b) {
  const struct idref *x = a, *y = b;
  int c = memcmp(x->id, y->id, VTS_VIDEO_ID_LEN);
  if (c != 0) return c;
  return x->at < y->at ? -1 : x->at > y->at;
}

int idfold_mark(const char (*ids)[VTS_VIDEO_ID_LEN + 1], size_t n, unsigned char *dup) {
  memset(dup, 0, n);
  struct idref *refs = malloc((n > 0 ? n : 1) * sizeof(*refs));
  if (refs == NULL) return -ENOMEM;
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (ids[i][0] != '\0') refs[m++] = (struct idref){ids[i], i};
  qsort(refs, m, sizeof(*refs), idref_cmp);
  for (size_t i = 1; i < m; i++)
    if (memcmp(refs[i].id, refs[i - 1].id, VTS_VIDEO_ID_LEN) == 0) dup[refs[i].at] = 1;
  free(refs);
  return 0;
}
