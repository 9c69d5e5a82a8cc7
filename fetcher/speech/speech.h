/*
 * The speech-recognition fallback: the audio of a video (fetcher/speech/audio.h), decoded to 16 kHz mono
 * (fetcher/speech/decode.h), recognised by the configured engine into timed segments.
 *
 * Engines (VTS_SPEECH_ENGINE; their table, and what an engine fills, is fetcher/speech/engine.h):
 *   pocketsphinx  embedded, English. VTS_POCKETSPHINX_MODEL_DIR names the acoustic model directory (default
 *                 /usr/share/pocketsphinx/model/en-us/en-us); the dictionary cmudict-en-us.dict and the language
 *                 model en-us.lm.bin are taken from that directory, else from its parent (Debian's layout).
 *   openai        any server with POST /v1/audio/transcriptions (OpenAI, whisper.cpp, faster-whisper servers) at
 *                 VTS_SPEECH_URL, with VTS_SPEECH_API_KEY as a Bearer token and VTS_SPEECH_MODEL as the model
 *                 (default whisper-1). Audio over VTS_SPEECH_MAX_UPLOAD_BYTES (common/limits.h) is sent in parts.
 */
#ifndef VTS_SPEECH_H
#define VTS_SPEECH_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "fetcher/captions/segments.h"
#include "fetcher/egress/outcome.h"
#include "fetcher/platform/player.h"

/*
 * Transcribes the audio of a video: chooses an audio format of pi (audio_choose), checks its approxDurationMs
 * against cfg->speech_max_seconds, downloads it (audio_download, through proxy: NULL for none), decodes it with the
 * same cap and runs cfg->speech_engine. On PROTO_OK, out holds the segments (ordered, times in seconds from the start
 * of the audio; the caller frees them with segment_list_free) and lang the language of the transcript. Otherwise out is
 * empty. Sets res, as the step that failed decided it, and returns its outcome:
 *   PROTO_NOT_AVAILABLE    reason not_playable: no usable audio format, audio too long or too big (declared, found
 *                          in the download or in the decoding), no speech recognised
 *   PROTO_UPSTREAM_FAILED  reason speech: audio download refused or failed, transcription server failing or timing out
 *   PROTO_INTERNAL         reason internal: decoder or engine fault, deadline passed in the embedded engine, an engine
 *                          name not in the table (engine.h; the configuration refuses one)
 * res->detail is a short reason for logs ("no_audio_format", "audio_http_403", "speech_http_500").
 *
 * The platform binds an audio URL to the address that fetched the player reply, so a fetcher that used a proxy for
 * the player request passes the same proxy here.
 */
int speech_transcribe_via(const struct vts_config *cfg, const struct player_info *pi, const char *proxy,
                          uint64_t deadline_ms_abs, struct segment_list *out, char lang[16], struct fetch_outcome *res);

#endif
