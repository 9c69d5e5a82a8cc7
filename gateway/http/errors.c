#include "gateway/http/errors.h"

#include "proto/proto.h"

#define ERROR_BODY_(c, m) "{\"error\":{\"code\":\"" c "\",\"message\":\"" m "\"}}"
#define ERROR_ROW_(id, st, c, m) [API_ERR_##id] = {st, c, m, ERROR_BODY_(c, m), sizeof(ERROR_BODY_(c, m)) - 1},

static const struct api_error_info errors[API_ERR__COUNT] = {API_ERRORS(ERROR_ROW_)};

const struct api_error_info *api_error_get(enum api_error e) {
  if (e <= API_OK || e >= API_ERR__COUNT) e = API_ERR_FETCH_FAILED;
  return &errors[e];
}

enum api_error api_error_not_available(unsigned reason) {
  switch (reason) {
    case PROTO_REASON_AGE_RESTRICTED:
      return API_ERR_NOT_AVAILABLE_AGE_RESTRICTED;
    case PROTO_REASON_MEMBERS_ONLY:
      return API_ERR_NOT_AVAILABLE_MEMBERS_ONLY;
    case PROTO_REASON_PRIVATE:
      return API_ERR_NOT_AVAILABLE_PRIVATE;
    case PROTO_REASON_REMOVED:
      return API_ERR_NOT_AVAILABLE_REMOVED;
    case PROTO_REASON_LIVE_NOT_ARCHIVED:
      return API_ERR_NOT_AVAILABLE_LIVE;
    case PROTO_REASON_GEO_RESTRICTED:
      return API_ERR_NOT_AVAILABLE_GEO_RESTRICTED;
    default:
      return API_ERR_NOT_AVAILABLE;
  }
}
