#include "gateway/http/errors.h"

#define ERROR_BODY_(c, m) "{\"error\":{\"code\":\"" c "\",\"message\":\"" m "\"}}"
#define ERROR_ROW_(id, st, c, m) [API_ERR_##id] = {st, c, m, ERROR_BODY_(c, m), sizeof(ERROR_BODY_(c, m)) - 1},

static const struct api_error_info errors[API_ERR__COUNT] = {API_ERRORS(ERROR_ROW_)};

const struct api_error_info *api_error_get(enum api_error e) {
  if (e <= API_OK || e >= API_ERR__COUNT) e = API_ERR_FETCH_FAILED;
  return &errors[e];
}
