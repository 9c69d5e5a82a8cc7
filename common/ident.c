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

static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }
static char upper(char c) { return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c; }

void ident_language_canon(const char *s, size_t len, char *out) {
  size_t i = 0;
  for (; i < len && s[i] != '-'; i++) out[i] = lower(s[i]);
  while (i < len) {
    out[i] = s[i]; /* the '-' */
    size_t start = ++i;
    while (i < len && s[i] != '-') i++;
    size_t n = i - start;
    for (size_t k = 0; k < n; k++) {
      char c = s[start + k];
      out[start + k] = n == 2 || (n == 4 && k == 0) ? upper(c) : lower(c);
    }
  }
}

/* Whether every byte of s[0, len) is a letter, a digit, '_', '-', or (with dot) '.'. */
static int all_word_chars(const char *s, size_t len, int dot) {
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
             (dot && c == '.');
    if (!ok) return 0;
  }
  return 1;
}

int ident_video_id_valid(const char *s, size_t len) { return len == VTS_VIDEO_ID_LEN && all_word_chars(s, len, 0); }

int ident_token_valid(const char *s, size_t len, size_t max) {
  return len > 0 && len <= max && all_word_chars(s, len, 1);
}

int ident_playlist_id_valid(const char *s, size_t len) {
  return len >= 2 && len <= VTS_PLAYLIST_ID_MAX && all_word_chars(s, len, 0);
}

int ident_channel_id_valid(const char *s, size_t len) {
  return len == VTS_CHANNEL_ID_LEN && s[0] == 'U' && s[1] == 'C' && all_word_chars(s, len, 0);
}
