#include "gateway/http/jsonshape.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int jsonshape_ok(const char *body, size_t len, int max_depth) {
  int depth = 0, in_string = 0;
  for (size_t i = 0; i < len; i++) {
    char c = body[i];
    if (c == '\0') return 0;
    if (in_string) {
      if (c == '"') {
        in_string = 0;
      } else if (c == '\\' && i + 1 < len) {
        if (body[i + 1] == 'u' && i + 5 < len && memcmp(body + i + 2, "000", 3) == 0 && body[i + 5] == '0') return 0;
        i++; /* the escaped character: a quote or a backslash that ends nothing */
      }
    } else if (c == '"') {
      in_string = 1;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return 0;
    } else if (c == ']' || c == '}') {
      depth--;
    }
  }
  return 1;
}

int jsonshape_tree(const char *text, size_t len, yajl_val *root) {
  *root = NULL;
  char *copy = malloc(len + 1);
  if (copy == NULL) return -ENOMEM;
  memcpy(copy, text, len);
  copy[len] = '\0';
  *root = yajl_tree_parse(copy, NULL, 0);
  free(copy);
  return *root != NULL ? 0 : -EPROTO;
}
