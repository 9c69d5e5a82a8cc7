/*
 * The speech-recognition fallback: the audio of a video (fetcher/speech/audio.h), decoded to 16 kHz mono
 * (fetcher/speech/decode.h), recognised by the configured engine into timed segments.
 *
 * Engines (VTS_SPEECH_ENGINE):
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
#include "fetcher/captions/captions.h"
#include "fetcher/platform/player.h"

#define SPEECH_DEFAULT_MODEL_DIR "/usr/share/pocketsphinx/model/en-us/en-us"
#define SPEECH_DEFAULT_OPENAI_MODEL "whisper-1"

/* The audio handed to an engine. */
struct speech_audio {
  const int16_t *pcm; /* 16 kHz mono; always present */
  size_t nsamples;
  const void *original; /* the downloaded file, or NULL; an engine may send it instead of the samples */
  size_t original_len;
  const char *original_name; /* file name for the original bytes ("audio.m4a", "audio.webm"), or NULL */
};

/*
 * Transcribes the audio of a video: chooses an audio format of pi (audio_choose), checks its approxDurationMs
 * against cfg->speech_max_seconds, downloads it (audio_download, without proxy), decodes it with the same cap and
 * runs cfg->speech_engine. On PROTO_OK, out holds the segments (ordered, times in seconds from the start of the
 * audio; the caller frees them with segment_list_free) and lang the language of the transcript. Otherwise out is
 * empty and detail holds a short reason for logs ("no_audio_format", "audio_http_403", "speech_http_500").
 * Returns an enum proto_outcome:
 *   PROTO_NOT_AVAILABLE    no usable audio format, audio too long or too big, no speech recognised
 *   PROTO_UPSTREAM_FAILED  audio download refused or failed, transcription server failing or timing out
 *   PROTO_INTERNAL         decoder or engine fault, deadline passed in the embedded engine
 */
int speech_transcribe(const struct vts_config *cfg, const struct player_info *pi, uint64_t deadline_ms_abs,
                      struct segment_list *out, char lang[16], char *detail, size_t detaillen);

/*
 * The same through a proxy (NULL for none). The platform binds an audio URL to the address that fetched the player
 * reply, so a fetcher that used a proxy for the player request passes the same proxy here.
 */
int speech_transcribe_via(const struct vts_config *cfg, const struct player_info *pi, const char *proxy,
                          uint64_t deadline_ms_abs, struct segment_list *out, char lang[16], char *detail,
                          size_t detaillen);

/*
 * Recognises audio with the embedded pocketsphinx engine. Utterances are cut at the silences its voice activity
 * detector finds (and after VTS_SPEECH_MAX_UTTERANCE_S of uninterrupted speech), and split further at pauses
 * between words; each becomes a segment. model_dir is the acoustic model directory (NULL or "" for the default).
 * Appends to out and sets lang to "en". Returns 0, -ENOENT (model files missing), -ETIMEDOUT (deadline passed), -E2BIG
 * (more than VTS_MAX_SEGMENTS), -ENOMEM, or -EIO (decoder fault).
 */
int speech_pocketsphinx_recognise(const char *model_dir, const struct speech_audio *audio, uint64_t deadline_ms_abs,
                                  struct segment_list *out, char lang[16], char *detail, size_t detaillen);

/*
 * Recognises audio with a /v1/audio/transcriptions server (multipart: file, model, response_format=verbose_json).
 * The original file is sent when it fits in max_upload_bytes; otherwise the samples are sent as WAV parts of at
 * most max_upload_bytes each, and each part's segment times are shifted by the part's offset. Appends to out and
 * sets lang from the reply's "language" ("english" -> "en"; "und" when unknown). Returns 0, -EINVAL (no
 * VTS_SPEECH_URL), -EIO (connection failed or a non-200 answer), -ETIMEDOUT, -EPROTO (a reply that is not
 * verbose_json or is too large), -E2BIG (more than VTS_MAX_SEGMENTS), or -ENOMEM.
 */
int speech_openai_recognise(const struct vts_config *cfg, const struct speech_audio *audio, size_t max_upload_bytes,
                            uint64_t deadline_ms_abs, struct segment_list *out, char lang[16], char *detail,
                            size_t detaillen);

/*
 * Appends a segment with a copy of text (len bytes, surrounding whitespace trimmed; nothing is appended when
 * that leaves it empty). Returns 0, -E2BIG past VTS_MAX_SEGMENTS, or -ENOMEM. Shared by the engines.
 */
int speech_segment_append(struct segment_list *sl, const char *text, size_t len, double start, double duration);

#endif
