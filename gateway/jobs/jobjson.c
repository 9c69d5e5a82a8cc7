/* A batch job's status object (see jobjson.h). */
#include "gateway/jobs/jobjson.h"

#include <errno.h>

#include "common/util.h"

int jobjson_time(struct buf *b, const char *name, int64_t ms) {
  char ts[40];
  util_rfc3339(ts, sizeof(ts), ms);
  return buf_printf(b, ",\"%s\":\"%s\"", name, ts);
}

int jobjson_status(struct buf *b, const struct jobstore_job *j, const char *type) {
  int rv = buf_puts(b, "{");
  if (type != NULL) rv |= buf_printf(b, "\"type\":\"%s\",", type);
  rv |= buf_printf(b, "\"id\":\"%s\",\"status\":\"%s\",\"total\":%zu,\"counts\":{", j->id, j->status, j->total);
  for (int s = 0; s < ITEM__COUNT; s++)
    rv |= buf_printf(b, "%s\"%s\":%zu", s > 0 ? "," : "", jobstore_item_status_name((enum jobstore_item_status)s),
                     j->counts[s]);
  rv |= buf_puts(b, "}");
  rv |= jobjson_time(b, "created", j->created_ms);
  rv |= jobjson_time(b, "updated", j->updated_ms);
  rv |= buf_printf(b, ",\"format\":\"%s\"", j->format[0] != '\0' ? j->format : "json");
  if (j->language[0] != '\0') rv |= buf_printf(b, ",\"language\":\"%s\"", j->language);
  if (j->translate[0] != '\0') rv |= buf_printf(b, ",\"translate\":\"%s\"", j->translate);
  if (j->stop_reason[0] != '\0') rv |= buf_printf(b, ",\"stop_reason\":\"%s\"", j->stop_reason);
  rv |= buf_puts(b, "}");
  return rv != 0 ? -ENOMEM : 0;
}
