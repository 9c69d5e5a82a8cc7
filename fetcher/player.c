/* Stand-in until the player module lands. */
#include "fetcher/player.h"

#include <errno.h>
#include <string.h>

int player_parse(const char *json, size_t len, struct player_info *out) { (void)json; (void)len; memset(out, 0, sizeof(*out)); return -EPROTO; }
void player_info_free(struct player_info *pi) { (void)pi; }
int player_choose_track(const struct player_info *pi, const char *lang) { (void)pi; (void)lang; return -1; }
