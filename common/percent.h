/*
 * Percent-decoding, strict: a '%' must be followed by two hex digits, or the whole value is refused. The query
 * string (application/x-www-form-urlencoded, '+' is a space) and values the fetcher reads out of the platform's
 * pages both decode here.
 */
#ifndef VTS_PERCENT_H
#define VTS_PERCENT_H

#include <stddef.h>

enum percent_flags {
  PERCENT_PLUS_IS_SPACE = 1, /* form encoding: '+' decodes to ' ' */
};

/*
 * Decodes s[0, len) into out (cap bytes, not NUL-terminated). Returns the decoded length, -1 for a malformed escape,
 * or -2 when the result does not fit in cap.
 */
long percent_decode(const char *s, size_t len, char *out, size_t cap, int flags);

#endif
