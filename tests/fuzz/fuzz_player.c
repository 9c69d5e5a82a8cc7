/* Fuzzes the player-reply reader (plain and wrapped, as the reel call's), track choice and the visitor reply. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fetcher/platform/client.h"
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
  if (player_parse_wrapped((const char *)data, size, "playerResponse", &pi) == 0 && pi.ntracks > 0 &&
      pi.tracks[0].base_url == NULL)
    abort();
  player_info_free(&pi);
  char visitor[CLIENT_VISITOR_DATA_MAX];
  if (client_visitor_reply((const char *)data, size, visitor) == 0 && strlen(visitor) == 0) abort();
  return 0;
}
