/* What every backend of the job store shares (see jobstore_backend.h). */
#include "gateway/jobs/jobstore_backend.h"

#include <errno.h>
#include <stdlib.h>
#include <zlib.h>

static const char *const item_status_names[ITEM__COUNT] = {"queued", "running", "done", "failed", "cancelled"};

const char *jobstore_item_status_name(enum jobstore_item_status s) {
  return (unsigned)s < ITEM__COUNT ? item_status_names[s] : "unknown";
}

const char *jobstore_job_status(const struct jobstore_job *j, int cancelled) {
  if (j->more && !cancelled && j->counts[ITEM_QUEUED] + j->counts[ITEM_RUNNING] == 0) return "running";
  if (j->counts[ITEM_QUEUED] + j->counts[ITEM_RUNNING] == 0) return cancelled ? "cancelled" : "done";
  if (cancelled) return "cancelled";
  return j->counts[ITEM_QUEUED] == j->total ? "queued" : "running";
}

int jobstore_inflate(const void *z, size_t zlen, int64_t len, char **out) {
  *out = NULL;
  if (len < 0 || len > VTS_MAX_TRANSCRIPT_BYTES) return -EBADMSG;
  char *plain = malloc(len > 0 ? (size_t)len : 1);
  if (!plain) return -ENOMEM;
  uLongf out_len = (uLongf)len;
  if (uncompress((Bytef *)plain, &out_len, z, (uLong)zlen) != Z_OK || out_len != (uLongf)len) {
    free(plain);
    return -EBADMSG;
  }
  *out = plain;
  return 0;
}
