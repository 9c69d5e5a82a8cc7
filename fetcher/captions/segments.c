#include "fetcher/captions/segments.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"

int segment_list_push(struct segment_list *sl, char *text, double start, double duration) {
  if (sl->len >= VTS_MAX_SEGMENTS) {
    free(text);
    return -E2BIG;
  }
  if (sl->len == sl->cap) {
    size_t cap = sl->cap ? sl->cap * 2 : 64;
    struct segment *items = realloc(sl->items, cap * sizeof(*items));
    if (items == NULL) {
      free(text);
      return -ENOMEM;
    }
    sl->items = items;
    sl->cap = cap;
  }
  sl->items[sl->len++] = (struct segment){.text = text, .start = start, .duration = duration < 0 ? 0 : duration};
  return 0;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

int segment_list_append(struct segment_list *sl, const char *text, size_t len, double start, double duration) {
  while (len > 0 && is_space(text[0])) {
    text++;
    len--;
  }
  while (len > 0 && is_space(text[len - 1])) len--;
  if (len == 0) return 0;
  char *copy = strndup(text, len);
  if (copy == NULL) return -ENOMEM;
  return segment_list_push(sl, copy, start, duration);
}

void segment_list_free(struct segment_list *sl) {
  for (size_t i = 0; i < sl->len; i++) free(sl->items[i].text);
  free(sl->items);
  memset(sl, 0, sizeof(*sl));
}
