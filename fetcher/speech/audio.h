/*
 * The audio of a video for the speech fallback: which of the player's audio formats to take, and its download.
 * Downloads go only to *.googlevideo.com or the configured upstream's host, over HTTPS (plain HTTP only on
 * loopback, for tests), in ranged chunks of VTS_AUDIO_CHUNK_BYTES, with redirects checked against the same rule.
 */
#ifndef VTS_AUDIO_H
#define VTS_AUDIO_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/config.h"
#include "fetcher/egress/outcome.h"
#include "fetcher/platform/player.h"

/*
 * Chooses the audio format to transcribe: among formats with a direct url and an audio/mp4 or audio/webm mime
 * (the containers the decoder accepts), those of the default audio track (all of them when no format is marked
 * default), the smallest by content_length, else by bitrate * duration. Returns an index into pi->audio, or -ENOENT.
 */
int audio_choose(const struct player_info *pi);

/*
 * Checks url against the download policy: the host is a subdomain of googlevideo.com (matched on a dot boundary)
 * or exactly the host of cfg->upstream_url; the scheme is https, or http to a loopback address.
 * Returns 0, or -EPERM.
 */
int audio_url_allowed(const char *url, const struct vts_config *cfg);

/*
 * Downloads url into out (appended) in ranged requests, following at most VTS_MAX_AUDIO_REDIRECTS redirects that
 * pass audio_url_allowed. proxy may be NULL; when the caller fetched the player reply through a proxy it must pass
 * the same one, since the platform binds audio URLs to the requesting address. Stops at deadline_ms_abs
 * (util_now_ms clock). Sets res and returns its outcome:
 *   PROTO_OK               out holds the file (detail "")
 *   PROTO_NOT_AVAILABLE    more than VTS_MAX_AUDIO_BYTES (reason not_playable, detail "audio_too_big")
 *   PROTO_UPSTREAM_FAILED  URL or redirect refused, HTTP or network failure, bad range reply, deadline passed (reason
 *                          speech, detail "audio_url_refused", "audio_http_403", "audio_timeout"...)
 *   PROTO_INTERNAL         out of memory (reason internal)
 * On failure out is as it was.
 */
int audio_download(const char *url, const struct vts_config *cfg, const char *proxy, uint64_t deadline_ms_abs,
                   struct buf *out, struct fetch_outcome *res);

#endif
