/*
 * Turns the raw text of one caption cue into the text we publish: one line of valid UTF-8 with single spaces.
 *
 * Markup (XML caption shapes): character references are decoded (&amp; &lt; &gt; &quot; &apos; &#NNN; &#xHH;), and
 * decoded a second time when the result still holds one, because ASR text often arrives escaped twice
 * ("&amp;#39;" -> "'"); then tags that arrived escaped ("&lt;i&gt;") are stripped, <br> becoming a space.
 * An unknown or unterminated reference is kept as written.
 *
 * Always: whitespace, control characters (C0, DEL, C1) and U+00A0/U+2028/U+2029 collapse to single spaces, the ends
 * are trimmed, and invalid UTF-8 (stray bytes, overlong forms, surrogates, past U+10FFFF) and references to
 * NUL, surrogates or past U+10FFFF become U+FFFD: one bad byte upstream must not cost the whole transcript.
 */
#ifndef VTS_TEXTCLEAN_H
#define VTS_TEXTCLEAN_H

#include <stddef.h>

#include "common/buf.h"

/* Scratch memory reused from cue to cue. Zero-initialise; release with textclean_free. */
struct textclean {
  struct buf a;
  struct buf b;
};

/*
 * Cleans s (len bytes; markup as above when markup is non-zero). Sets *out to a new NUL-terminated string the
 * caller frees, or to NULL when nothing but whitespace is left. Returns 0, or -ENOMEM.
 */
int textclean_cue(struct textclean *tc, const char *s, size_t len, int markup, char **out);
void textclean_free(struct textclean *tc);

/*
 * Copies s into dst (cap bytes, NUL-terminated) cleaned the same way without markup, cut at a character boundary
 * when it does not fit. For short upstream texts kept for logs.
 */
void textclean_copy(char *dst, size_t cap, const char *s, size_t len);

#endif
