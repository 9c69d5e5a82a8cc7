/*
 * The identifiers every side checks: a video id and a language code. Gateway (query, video URL), proto and fetcher
 * all ask here, so the patterns of SPEC.md live in one place.
 */
#ifndef VTS_IDENT_H
#define VTS_IDENT_H

#include <stddef.h>

/* Whether s[0, len) matches ^[a-zA-Z0-9_-]{11}$ . */
int ident_video_id_valid(const char *s, size_t len);
/* Whether s[0, len) matches ^[a-z]{2,3}(?:-[a-zA-Z]{2,8})?$ . */
int ident_language_valid(const char *s, size_t len);
/*
 * Writes the canonical spelling of the language code s[0, len) into out (len bytes, no NUL): BCP 47 casing, the
 * primary language in lower case, a two-letter subtag (a region) in upper case, a four-letter one (a script) in
 * title case, any other in lower case. "en-us", "en-Us" and "en-US" are one language to every cache.
 */
void ident_language_canon(const char *s, size_t len, char *out);
/* Whether s[0, len) is 1 to max bytes of [A-Za-z0-9._-]: an X-Request-Id we echo, an API key's name. */
int ident_token_valid(const char *s, size_t len, size_t max);

/* Whether s[0, len) is a playlist id: 2 to VTS_PLAYLIST_ID_MAX bytes of [A-Za-z0-9_-]. */
int ident_playlist_id_valid(const char *s, size_t len);
/* Whether s[0, len) is a channel id: ^UC[A-Za-z0-9_-]{22}$ . */
int ident_channel_id_valid(const char *s, size_t len);

#endif
