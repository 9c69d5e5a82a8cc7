#include "fetcher/speech/speech.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "fetcher/speech/audio.h"
#include "fetcher/speech/decode.h"
#include "fetcher/speech/engine.h"
#include "proto/proto.h"

static const char *original_name(const char *mime) {
  return strncmp(mime, "audio/webm", 10) == 0 ? "audio.webm" : "audio.m4a";
}

int speech_transcribe_via(const struct vts_config *cfg, const struct player_info *pi, const char *proxy,
                          uint64_t deadline_ms_abs, struct segment_list *out, char lang[16],
                          struct fetch_outcome *res) {
  struct buf file = BUF_INIT;
  struct decode_pcm pcm = {0};
  uint64_t t0 = util_now_ms();
  memset(out, 0, sizeof(*out));
  lang[0] = '\0';
  fetch_outcome_ok(res);
  /* The configuration refuses an unknown name; a caller's own struct may still hold one. */
  const struct speech_engine *engine = speech_engine_find(cfg->speech_engine);
  if (engine == NULL) return fetch_outcome_set(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "speech_not_configured");

  int idx = audio_choose(pi);
  if (idx < 0) return fetch_outcome_set(res, PROTO_NOT_AVAILABLE, PROTO_REASON_NOT_PLAYABLE, "no_audio_format");
  const struct audio_format *af = &pi->audio[idx];
  if (af->duration_ms > cfg->speech_max_seconds * 1000)
    return fetch_outcome_set(res, PROTO_NOT_AVAILABLE, PROTO_REASON_NOT_PLAYABLE, "audio_too_long");
  if (af->content_length > VTS_MAX_AUDIO_BYTES)
    return fetch_outcome_set(res, PROTO_NOT_AVAILABLE, PROTO_REASON_NOT_PLAYABLE, "audio_too_big");

  if (audio_download(af->url, cfg, proxy, deadline_ms_abs, &file, res) != PROTO_OK) goto fail;
  uint64_t t_download = util_now_ms();
  if (decode_audio(file.data, file.len, (size_t)cfg->speech_max_seconds * DECODE_SAMPLE_RATE, &pcm, res) != PROTO_OK)
    goto fail;
  uint64_t t_decode = util_now_ms();

  struct speech_audio audio = {.pcm = pcm.samples,
                               .nsamples = pcm.len,
                               .original = file.data,
                               .original_len = file.len,
                               .original_name = original_name(af->mime)};
  struct speech_request req = {
      .cfg = cfg, .audio = &audio, .deadline_ms_abs = deadline_ms_abs, .max_upload_bytes = VTS_SPEECH_MAX_UPLOAD_BYTES};
  if (engine->recognise(&req, out, lang, res) != PROTO_OK) goto fail;
  if (out->len == 0) {
    fetch_outcome_set(res, PROTO_NOT_AVAILABLE, PROTO_REASON_NOT_PLAYABLE, "no_speech");
    goto fail;
  }

  char itag[16], audio_s[32], download_ms[32], decode_ms[32], recognise_ms[32], nseg[32];
  snprintf(itag, sizeof(itag), "%d", af->itag);
  snprintf(audio_s, sizeof(audio_s), "%.1f", (double)pcm.len / DECODE_SAMPLE_RATE);
  snprintf(download_ms, sizeof(download_ms), "%llu", (unsigned long long)(t_download - t0));
  snprintf(decode_ms, sizeof(decode_ms), "%llu", (unsigned long long)(t_decode - t_download));
  snprintf(recognise_ms, sizeof(recognise_ms), "%llu", (unsigned long long)(util_now_ms() - t_decode));
  snprintf(nseg, sizeof(nseg), "%zu", out->len);
  log_msg(LOG_INFO, "speech transcribed", "engine", engine->name, "=itag", itag, "=audio_s", audio_s, "=download_ms",
          download_ms, "=decode_ms", decode_ms, "=recognise_ms", recognise_ms, "=segments", nseg, NULL);
  decode_pcm_free(&pcm);
  buf_free(&file);
  return PROTO_OK;

fail:
  segment_list_free(out);
  lang[0] = '\0';
  decode_pcm_free(&pcm);
  buf_free(&file);
  return res->outcome;
}
