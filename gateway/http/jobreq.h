/*
 * The body of POST /v1/jobs (and the arguments of the MCP tool start_transcript_job) read into a job request: its
 * members are a table of rows (name, when checked, the source it names, its setter, and for a string the field it
 * fills and its check, or for an integer its least value), as Redis's config table is, and each bad member's 400
 * names it. Members are checked in a fixed order: the JSON, a repeated or unknown member and each member checked in
 * place (in the body's order), the source (exactly one of video_ids, playlist_id, channel_id), then limit,
 * webhook_url and video_ids entry by entry (duplicates folded into their first place).
 */
#ifndef VTS_JOBREQ_H
#define VTS_JOBREQ_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "common/limits.h"
#include "gateway/http/errors.h"
#include "gateway/http/render.h"

/* A 400's message names the member: its name, an index and a short reason. */
#define JOBREQ_MSG_BYTES 160

/* A body's request, checked. ids holds n distinct video ids in their first order. */
struct job_request {
  char (*ids)[VTS_VIDEO_ID_LEN + 1];
  size_t n;
  char language[16];
  char translate[16];
  enum render_format format;
  char webhook_url[VTS_WEBHOOK_URL_MAX_BYTES + 1]; /* "" for none */
  /* A playlist's or channel's job: its id ("" for a job of video_ids), and the most items it may hold. */
  char playlist[VTS_PLAYLIST_ID_MAX + 1];
  char channel[VTS_CHANNEL_ID_LEN + 1];
  int64_t cap;
  int limited; /* a limit was given */
};

/*
 * Checks body (len bytes) into jr, whose format the caller set to its default. Returns API_OK, or the error with msg
 * (JOBREQ_MSG_BYTES) naming the member ("" when the error's own message says it). jr->ids is allocated here (the
 * caller frees it, also after an error).
 */
enum api_error jobreq_read(const struct vts_config *cfg, const char *body, size_t len, struct job_request *jr,
                           char *msg);

#endif
