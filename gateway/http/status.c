#include "gateway/http/status.h"

static const struct {
  int code;
  const char *phrase;
} statuses[HTTP_NSTATUS] = {
#define HTTP_STATUS_ROW_(code, phrase) {code, phrase},
    HTTP_STATUSES(HTTP_STATUS_ROW_)
#undef HTTP_STATUS_ROW_
};

int http_status_index(int status) {
  int i = 0;
  while (i < HTTP_NSTATUS && statuses[i].code != status) i++;
  return i;
}

int http_status_code(int i) { return i >= 0 && i < HTTP_NSTATUS ? statuses[i].code : 0; }

const char *http_status_reason(int status) {
  int i = http_status_index(status);
  return i < HTTP_NSTATUS ? statuses[i].phrase : "Unknown";
}
