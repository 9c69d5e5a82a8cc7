#include "gateway/http/chapterlist.h"

#include <errno.h>
#include <stdlib.h>
#include <yajl/yajl_tree.h>

#include "gateway/http/jsonshape.h"

int chapterlist_starts(const char *json, size_t len, int64_t **starts, size_t *n) {
  *starts = NULL;
  *n = 0;
  yajl_val root;
  if (jsonshape_tree(json, len, &root) == -ENOMEM) return -ENOMEM;
  const char *path[] = {"chapters", NULL};
  yajl_val list = root != NULL ? yajl_tree_get(root, path, yajl_t_array) : NULL;
  int rv = list == NULL ? -EPROTO : 0;
  size_t count = list != NULL ? list->u.array.len : 0;
  int64_t *out = NULL;
  if (rv == 0 && count > 0 && (out = malloc(count * sizeof(*out))) == NULL) rv = -ENOMEM;
  const char *start_path[] = {"start", NULL};
  for (size_t i = 0; rv == 0 && i < count; i++) {
    yajl_val start = yajl_tree_get(list->u.array.values[i], start_path, yajl_t_number);
    if (start == NULL || !YAJL_IS_INTEGER(start) || YAJL_GET_INTEGER(start) < 0 ||
        YAJL_GET_INTEGER(start) > INT32_MAX || (i > 0 && YAJL_GET_INTEGER(start) * 1000 <= out[i - 1])) {
      rv = -EPROTO;
      break;
    }
    out[i] = (int64_t)YAJL_GET_INTEGER(start) * 1000;
  }
  yajl_tree_free(root);
  if (rv != 0) {
    free(out);
    return rv;
  }
  *starts = out;
  *n = count;
  return 0;
}
