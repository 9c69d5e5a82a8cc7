/* Fuzzes the player-reply reader and track choice. */
#include <stdint.h>
#include <stdlib.h>

#include "fetcher/platform/player.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct player_info pi;
  if (player_parse((const char *)data, size, &pi) == 0) {
    int t = player_choose_track(&pi, "en");
    if (t < -1 || (t >= 0 && (size_t)t >= pi.ntracks)) abort();
    (void)player_choose_track(&pi, "");
    (void)player_choose_track(&pi, "pt-BR");
    player_info_free(&pi);
  }
  return 0;
}
