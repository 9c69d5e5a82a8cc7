#include "common/percent.h"

#include "common/util.h"

long percent_decode(const char *s, size_t len, char *out, size_t cap, int flags) {
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    if (c == '%') {
      if (len - i < 3) return -1; /* '%' needs two hex digits after it */
      int hi = util_hex_value(s[i + 1]);
      int lo = util_hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return -1;
      c = (char)(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && (flags & PERCENT_PLUS_IS_SPACE)) {
      c = ' ';
    }
    if (o == cap) return -2;
    out[o++] = c;
  }
  return (long)o;
}
