/* Fuzzes the browse reader: whatever it accepts holds only valid, distinct video ids and a bounded token. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/ident.h"
#include "fetcher/platform/browse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct browse_page p;
  if (browse_parse((const char *)data, size, &p) == 0) {
    if (p.nvideos > BROWSE_MAX_PAGE_VIDEOS || strlen(p.continuation) > BROWSE_MAX_TOKEN) abort();
    for (size_t i = 0; i < p.nvideos; i++) {
      if (!ident_video_id_valid(p.video_ids[i], strlen(p.video_ids[i]))) abort();
      for (size_t j = 0; j < i; j++) {
        if (strcmp(p.video_ids[i], p.video_ids[j]) == 0) abort();
      }
    }
  }
  browse_page_free(&p);
  return 0;
}
