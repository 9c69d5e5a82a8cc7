/*
 * The speech engines: one struct of operations each engine fills (in a file of its own, speech_<name>.c), and the
 * table of them, chosen by the name VTS_SPEECH_ENGINE gives. An engine is given the audio and fills a segment list
 * (fetcher/captions/segments.h); it knows nothing of speech.c, which downloads and decodes the audio and turns what
 * an engine returns into the job's outcome.
 *
 * A new engine is one file that defines `const struct speech_engine speech_engine_<name>` and one row in
 * SPEECH_ENGINES below.
 */
#ifndef VTS_SPEECH_ENGINE_H
#define VTS_SPEECH_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "fetcher/captions/segments.h"
#include "fetcher/egress/outcome.h"

/* The audio handed to an engine. */
struct speech_audio {
  const int16_t *pcm; /* 16 kHz mono; always present */
  size_t nsamples;
  const void *original; /* the downloaded file, or NULL; an engine may send it instead of the samples */
  size_t original_len;
  const char *original_name; /* file name for the original bytes ("audio.m4a", "audio.webm"), or NULL */
};

/* What an engine is asked to do. */
struct speech_request {
  const struct vts_config *cfg; /* the engine's own settings (VTS_SPEECH_URL, VTS_POCKETSPHINX_MODEL_DIR, ...) */
  const struct speech_audio *audio;
  uint64_t deadline_ms_abs;
  size_t max_upload_bytes; /* the largest body an engine sends in one request (VTS_SPEECH_MAX_UPLOAD_BYTES) */
};

/* One engine: its name and the operations it fills. */
struct speech_engine {
  const char *name; /* its VTS_SPEECH_ENGINE value */
  /*
   * Recognises req->audio: appends timed segments (ordered, in seconds from the start of the audio) to out and sets
   * lang. Sets res and returns its outcome: PROTO_OK (detail ""), or the engine's own verdict on its failure:
   * PROTO_UPSTREAM_FAILED (reason speech) when a server that recognises the audio is unreachable, failing, late or
   * answers nonsense; PROTO_INTERNAL (reason internal) otherwise, with detail "speech_model_missing",
   * "speech_not_configured", "speech_timeout" (req->deadline_ms_abs passed), "speech_too_many_segments" (more than
   * VTS_MAX_SEGMENTS), "speech_engine_fault" or a more precise one ("speech_engine_init").
   */
  int (*recognise)(const struct speech_request *req, struct segment_list *out, char lang[16],
                   struct fetch_outcome *res);
};

/* The engines, one row each: X(name) names speech_engine_<name>, whose .name is "<name>". */
#define SPEECH_ENGINES(X) \
  X(pocketsphinx)         \
  X(openai)

#define SPEECH_ENGINE_DECLARE(name) extern const struct speech_engine speech_engine_##name;
SPEECH_ENGINES(SPEECH_ENGINE_DECLARE)
#undef SPEECH_ENGINE_DECLARE

/* The engine called name, or NULL when there is none. */
const struct speech_engine *speech_engine_find(const char *name);

#endif
