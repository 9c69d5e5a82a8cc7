#include "common/ident.h"

#include "common/limits.h"

int ident_language_valid(const char *s, size_t len) {
  if (len > VTS_MAX_LANGUAGE_BYTES) return 0;
  size_t i = 0;
  while (i < len && s[i] >= 'a' && s[i] <= 'z') i++;
  if (i < 2 || i > 3) return 0;
  if (i == len) return 1;
  if (s[i] != '-') return 0;
  size_t region = 0;
  for (i++; i < len; i++, region++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return 0;
  }
  return region >= 2 && region <= 8;
}

int ident_video_id_valid(const char *s, size_t len) {
  if (len != VTS_VIDEO_ID_LEN) return 0;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return 0;
  }
  return 1;
}
