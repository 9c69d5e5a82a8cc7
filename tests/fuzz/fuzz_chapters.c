/*
 * Fuzzes the chapters reader: whatever it accepts holds at most CHAPTERS_MAX chapters, each with a title of at most
 * CHAPTERS_TITLE_MAX bytes and a start later than the one before, and renders as JSON whatever the length.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fetcher/platform/chapters.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct chapter_list l;
  if (chapters_parse((const char *)data, size, &l) == 0) {
    if (l.n > CHAPTERS_MAX) abort();
    for (size_t i = 0; i < l.n; i++) {
      size_t n = strlen(l.items[i].title);
      if (n == 0 || n > CHAPTERS_TITLE_MAX || l.items[i].start_s < 0) abort();
      if (i > 0 && l.items[i].start_s <= l.items[i - 1].start_s) abort();
    }
    struct buf b = BUF_INIT;
    if (chapters_json(&l, size % 2 ? -1 : (int64_t)size, &b) != 0 || b.len < 2 || b.data[0] != '[') abort();
    buf_free(&b);
  } else if (l.n != 0 || l.items != NULL) {
    abort();
  }
  chapters_free(&l);
  return 0;
}
