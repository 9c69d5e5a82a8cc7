/*
 * Audio decoding for the speech fallback: an mp4/m4a (AAC) or webm/matroska (Opus, Vorbis) file held in memory,
 * decoded with libavformat/libavcodec/libswresample to 16 kHz mono signed 16-bit samples. Only those demuxers and
 * codecs are opened (format_whitelist, codec_whitelist, and a check of the probed names), nothing is read but the
 * given bytes, and corrupt or truncated input is an error, never a crash.
 */
#ifndef VTS_DECODE_H
#define VTS_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "fetcher/egress/outcome.h"

#define DECODE_SAMPLE_RATE 16000

struct decode_pcm {
  int16_t *samples; /* owned; 16 kHz mono */
  size_t len;       /* samples */
  size_t cap;
};

/*
 * Decodes len bytes of data into out (replacing its content). At most max_samples samples are produced. A stream
 * that ends well before its declared duration is truncated. Sets res and returns its outcome:
 *   PROTO_OK             out holds the samples
 *   PROTO_NOT_AVAILABLE  the declared or decoded length is over max_samples (reason not_playable, detail
 *                        "audio_too_long")
 *   PROTO_INTERNAL       reason internal, detail "audio_format_refused" (a container or codec outside the
 *                        whitelist), "audio_corrupt" (corrupt, truncated or not audio) or "decode_nomem"
 * On failure out is empty.
 */
int decode_audio(const void *data, size_t len, size_t max_samples, struct decode_pcm *out, struct fetch_outcome *res);

/* Releases the samples; out is empty and reusable after. */
void decode_pcm_free(struct decode_pcm *pcm);

#endif
