#include "fetcher/speech/speech.h"

#include <errno.h>
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

static void set_detail(char *detail, size_t detaillen, const char *what) {
  if (detail != NULL && detaillen > 0) snprintf(detail, detaillen, "%s", what);
}

static const char *original_name(const char *mime) {
  return strncmp(mime, "audio/webm", 10) == 0 ? "audio.webm" : "audio.m4a";
}

static int download_outcome(int rv) {
  if (rv == -EFBIG) return PROTO_NOT_AVAILABLE;
  if (rv == -ENOMEM) return PROTO_INTERNAL;
  return PROTO_UPSTREAM_FAILED;
}

static int decode_outcome(int rv, char *detail, size_t detaillen) {
  if (rv == -EFBIG) {
    set_detail(detail, detaillen, "audio_too_long");
    return PROTO_NOT_AVAILABLE;
  }
  set_detail(detail, detaillen,
             rv == -ENOTSUP  ? "audio_format_refused"
             : rv == -ENOMEM ? "decode_nomem"
                             : "audio_corrupt");
  return PROTO_INTERNAL;
}

static int engine_outcome(const struct speech_engine *engine, int rv, char *detail, size_t detaillen) {
  if (engine->remote && (rv == -EIO || rv == -ETIMEDOUT || rv == -EPROTO)) return PROTO_UPSTREAM_FAILED;
  if (rv == -ETIMEDOUT)
    set_detail(detail, detaillen, "speech_timeout");
  else if (rv == -ENOENT)
    set_detail(detail, detaillen, "speech_model_missing");
  else if (rv == -E2BIG)
    set_detail(detail, detaillen, "speech_too_many_segments");
  else if (rv == -EINVAL)
    set_detail(detail, detaillen, "speech_not_configured");
  else if (detail != NULL && detaillen > 0 && detail[0] == '\0')
    set_detail(detail, detaillen, "speech_engine_fault");
  return PROTO_INTERNAL;
}

int speech_transcribe_via(const struct vts_config *cfg, const struct player_info *pi, const char *proxy,
                          uint64_t deadline_ms_abs, struct segment_list *out, char lang[16], char *detail,
                          size_t detaillen) {
  struct buf file = BUF_INIT;
  struct decode_pcm pcm = {0};
  uint64_t t0 = util_now_ms();
  int outcome, rv;
  memset(out, 0, sizeof(*out));
  lang[0] = '\0';
  set_detail(detail, detaillen, "");
  const struct speech_engine *engine = speech_engine_find(cfg->speech_engine);
  if (engine == NULL) { /* the configuration refuses an unknown name; a caller's own struct may still hold one */
    set_detail(detail, detaillen, "speech_not_configured");
    return PROTO_INTERNAL;
  }

  int idx = audio_choose(pi);
  if (idx < 0) {
    set_detail(detail, detaillen, "no_audio_format");
    return PROTO_NOT_AVAILABLE;
  }
  const struct audio_format *af = &pi->audio[idx];
  if (af->duration_ms > cfg->speech_max_seconds * 1000) {
    set_detail(detail, detaillen, "audio_too_long");
    return PROTO_NOT_AVAILABLE;
  }
  if (af->content_length > VTS_MAX_AUDIO_BYTES) {
    set_detail(detail, detaillen, "audio_too_big");
    return PROTO_NOT_AVAILABLE;
  }

  rv = audio_download(af->url, cfg, proxy, deadline_ms_abs, &file, detail, detaillen);
  if (rv != 0) {
    outcome = download_outcome(rv);
    goto fail;
  }
  uint64_t t_download = util_now_ms();
  rv = decode_audio(file.data, file.len, (size_t)cfg->speech_max_seconds * DECODE_SAMPLE_RATE, &pcm);
  if (rv != 0) {
    outcome = decode_outcome(rv, detail, detaillen);
    goto fail;
  }
  uint64_t t_decode = util_now_ms();

  struct speech_audio audio = {.pcm = pcm.samples,
                               .nsamples = pcm.len,
                               .original = file.data,
                               .original_len = file.len,
                               .original_name = original_name(af->mime)};
  struct speech_request req = {
      .cfg = cfg, .audio = &audio, .deadline_ms_abs = deadline_ms_abs, .max_upload_bytes = VTS_SPEECH_MAX_UPLOAD_BYTES};
  rv = engine->recognise(&req, out, lang, detail, detaillen);
  if (rv != 0) {
    outcome = engine_outcome(engine, rv, detail, detaillen);
    goto fail;
  }
  if (out->len == 0) {
    set_detail(detail, detaillen, "no_speech");
    outcome = PROTO_NOT_AVAILABLE;
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
  return outcome;
}
