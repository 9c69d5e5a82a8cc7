/*
 * The interface between the speech fallback (fetcher/speech/speech.c) and its recognition engines: what an engine
 * is given (the audio) and what it fills (a segment list, fetcher/captions/segments.h). speech.c picks the engine of
 * VTS_SPEECH_ENGINE; an engine knows nothing of speech.c.
 */
#ifndef VTS_SPEECH_ENGINE_H
#define VTS_SPEECH_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "fetcher/captions/segments.h"

/* The audio handed to an engine. */
struct speech_audio {
  const int16_t *pcm; /* 16 kHz mono; always present */
  size_t nsamples;
  const void *original; /* the downloaded file, or NULL; an engine may send it instead of the samples */
  size_t original_len;
  const char *original_name; /* file name for the original bytes ("audio.m4a", "audio.webm"), or NULL */
};

/*
 * Recognises audio with the embedded pocketsphinx engine. Utterances are cut at the silences its voice activity
 * detector finds (and after VTS_SPEECH_MAX_UTTERANCE_S of uninterrupted speech), and split further at pauses
 * between words and at the longest pause of a run past VTS_MAX_SPEECH_SEGMENT_S (segment_list_group_words); each
 * piece becomes a segment. model_dir is the acoustic model directory (NULL or "" for the default).
 * Appends to out and sets lang to "en". Returns 0, -ENOENT (model files missing), -ETIMEDOUT (deadline passed), -E2BIG
 * (more than VTS_MAX_SEGMENTS), -ENOMEM, or -EIO (decoder fault).
 */
int speech_pocketsphinx_recognise(const char *model_dir, const struct speech_audio *audio, uint64_t deadline_ms_abs,
                                  struct segment_list *out, char lang[16], char *detail, size_t detaillen);

/*
 * Recognises audio with a /v1/audio/transcriptions server (multipart: file, model, response_format=verbose_json,
 * timestamp_granularities[] word and segment). A segment past VTS_MAX_SPEECH_SEGMENT_S is cut at the longest pause
 * between its words (segment_list_group_words), or evenly when the server gave no word times.
 * The original file is sent when it fits in max_upload_bytes; otherwise the samples are sent as WAV parts of at
 * most max_upload_bytes each, and each part's segment times are shifted by the part's offset. Appends to out and
 * sets lang from the reply's "language" ("english" -> "en"; "und" when unknown). Returns 0, -EINVAL (no
 * VTS_SPEECH_URL), -EIO (connection failed or a non-200 answer), -ETIMEDOUT, -EPROTO (a reply that is not
 * verbose_json or is too large), -E2BIG (more than VTS_MAX_SEGMENTS), or -ENOMEM.
 */
int speech_openai_recognise(const struct vts_config *cfg, const struct speech_audio *audio, size_t max_upload_bytes,
                            uint64_t deadline_ms_abs, struct segment_list *out, char lang[16], char *detail,
                            size_t detaillen);

#endif
