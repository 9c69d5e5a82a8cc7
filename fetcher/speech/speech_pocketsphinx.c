/* The embedded speech engine (VTS_SPEECH_ENGINE=pocketsphinx): CMU pocketsphinx with its US English model. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pocketsphinx.h>
#include <sphinxbase/err.h>

#include "common/limits.h"
#include "common/util.h"
#include "fetcher/speech/decode.h"
#include "fetcher/speech/engine.h"
#include "proto/proto.h"

#define PS_FRAMES_PER_S 100
/* Samples fed per call: the voice activity state is read this often (0.1 s). */
#define PS_CHUNK_SAMPLES (DECODE_SAMPLE_RATE / 10)
/* A pause between two words of at least this many frames starts a new segment. */
#define PS_SEGMENT_GAP_FRAMES 50
#define PS_DICT_FILE "cmudict-en-us.dict"
#define PS_LM_FILE "en-us.lm.bin"
#define PS_LANGUAGE "en"

static void set_detail(char *detail, size_t detaillen, const char *what) {
  if (detail != NULL && detaillen > 0) snprintf(detail, detaillen, "%s", what);
}

/* Finds name in dir, else in dir's parent (Debian keeps the dictionary and LM beside the acoustic model). */
static int model_file(const char *dir, const char *name, char *out, size_t outlen) {
  int n = snprintf(out, outlen, "%s/%s", dir, name);
  if (n > 0 && (size_t)n < outlen && access(out, R_OK) == 0) return 0;
  n = snprintf(out, outlen, "%s/../%s", dir, name);
  if (n > 0 && (size_t)n < outlen && access(out, R_OK) == 0) return 0;
  return -ENOENT;
}

static int decoder_open(const char *dir, ps_decoder_t **ps_out, cmd_ln_t **cfg_out) {
  if (dir == NULL || dir[0] == '\0') dir = config_default("VTS_POCKETSPHINX_MODEL_DIR");
  char hmm[PATH_MAX], dict[PATH_MAX], lm[PATH_MAX];
  int n = snprintf(hmm, sizeof(hmm), "%s/mdef", dir);
  if (n < 0 || (size_t)n >= sizeof(hmm) || access(hmm, R_OK) != 0) return -ENOENT;
  snprintf(hmm, sizeof(hmm), "%s", dir);
  if (model_file(dir, PS_DICT_FILE, dict, sizeof(dict)) != 0 || model_file(dir, PS_LM_FILE, lm, sizeof(lm)) != 0)
    return -ENOENT;
  /* sphinxbase logs every setting to stderr; our logs are JSON lines. */
  err_set_logfp(NULL);
  /*
   * Search limits measured on read speech (tests/bench/bench_speech.c): capping active HMMs and word exits per
   * frame and skipping the second (flat lexicon) pass more than halves the time at the same word error rate.
   */
  cmd_ln_t *cfg = cmd_ln_init(NULL, ps_args(), TRUE, "-hmm", hmm, "-dict", dict, "-lm", lm, "-maxhmmpf", "3000",
                              "-maxwpf", "10", "-fwdflat", "no", NULL);
  if (cfg == NULL) return -EIO;
  ps_decoder_t *ps = ps_init(cfg);
  if (ps == NULL) {
    cmd_ln_free_r(cfg);
    return -EIO;
  }
  *ps_out = ps;
  *cfg_out = cfg;
  return 0;
}

/*
 * Turns the words of the utterance just ended into segments (fetcher/captions/segments.c groups them: a pause of
 * PS_SEGMENT_GAP_FRAMES starts a segment, a run past the segment cap is cut at its longest pause). Frame numbers
 * count from the start of the stream, not of the utterance, so they are times already. Fillers (<s>, <sil>, [NOISE])
 * are dropped, and alternative pronunciations ("read(2)") lose their suffix.
 */
static int collect_utterance(ps_decoder_t *ps, double audio_s, struct segment_list *out) {
  struct segment_list words = {0};
  int rv = 0;
  ps_seg_t *seg = ps_seg_iter(ps);
  while (seg != NULL) {
    const char *word = ps_seg_word(seg);
    int sf = 0, ef = 0;
    ps_seg_frames(seg, &sf, &ef);
    if (word != NULL && word[0] != '<' && word[0] != '[' && word[0] != '\0')
      rv = segment_list_append(&words, word, strcspn(word, "("), (double)sf / PS_FRAMES_PER_S,
                               (double)(ef + 1 - sf) / PS_FRAMES_PER_S);
    if (rv != 0) {
      ps_seg_free(seg);
      break;
    }
    seg = ps_seg_next(seg);
  }
  if (rv == 0) rv = segment_list_group_words(out, &words, (double)PS_SEGMENT_GAP_FRAMES / PS_FRAMES_PER_S, audio_s);
  segment_list_free(&words);
  return rv;
}

static int end_utterance(ps_decoder_t *ps, double audio_s, struct segment_list *out) {
  if (ps_end_utt(ps) < 0) return -EIO;
  return collect_utterance(ps, audio_s, out);
}

/*
 * Utterances are cut at the silences the voice activity detector finds (and after VTS_SPEECH_MAX_UTTERANCE_S of
 * uninterrupted speech), and split further at pauses between words and at the longest pause of a run past
 * VTS_MAX_SPEECH_SEGMENT_S (segment_list_group_words); each piece becomes a segment. The acoustic model directory is
 * VTS_POCKETSPHINX_MODEL_DIR (its default when empty). Sets lang to "en". Returns 0, -ENOENT (model files missing),
 * -ETIMEDOUT (deadline passed), -E2BIG (more than VTS_MAX_SEGMENTS), -ENOMEM, or -EIO (decoder fault).
 */
static int pocketsphinx_run(const struct speech_request *req, struct segment_list *out, char lang[16], char *detail,
                            size_t detaillen) {
  const struct speech_audio *audio = req->audio;
  const uint64_t deadline_ms_abs = req->deadline_ms_abs;
  ps_decoder_t *ps = NULL;
  cmd_ln_t *cfg = NULL;
  int rv = decoder_open(req->cfg->pocketsphinx_model_dir, &ps, &cfg);
  if (rv != 0) {
    set_detail(detail, detaillen, rv == -ENOENT ? "speech_model_missing" : "speech_engine_init");
    return rv;
  }
  if (ps_start_utt(ps) < 0) {
    rv = -EIO;
    goto fail;
  }
  const size_t max_utt = (size_t)VTS_SPEECH_MAX_UTTERANCE_S * DECODE_SAMPLE_RATE;
  const double audio_s = (double)audio->nsamples / DECODE_SAMPLE_RATE;
  int in_speech = 0;
  size_t utt_start = 0;
  for (size_t pos = 0; pos < audio->nsamples;) {
    if (util_now_ms() >= deadline_ms_abs) {
      rv = -ETIMEDOUT;
      goto fail;
    }
    size_t n = audio->nsamples - pos;
    if (n > PS_CHUNK_SAMPLES) n = PS_CHUNK_SAMPLES;
    if (ps_process_raw(ps, audio->pcm + pos, n, FALSE, FALSE) < 0) {
      rv = -EIO;
      goto fail;
    }
    pos += n;
    int speaking = ps_get_in_speech(ps) != 0;
    if (speaking && !in_speech) utt_start = pos;
    /*
     * An utterance ends when the detector hears silence again. One that runs on without a pause (music, crowd
     * noise) is cut so that the decoder's per-utterance memory stays bounded.
     */
    if ((in_speech && !speaking) || (speaking && pos - utt_start >= max_utt)) {
      rv = end_utterance(ps, audio_s, out);
      if (rv == 0 && ps_start_utt(ps) < 0) rv = -EIO;
      if (rv != 0) goto fail;
      speaking = 0;
    }
    in_speech = speaking;
  }
  rv = end_utterance(ps, audio_s, out);
  if (rv != 0) goto fail;
  snprintf(lang, 16, "%s", PS_LANGUAGE);
  ps_free(ps);
  cmd_ln_free_r(cfg);
  return 0;

fail:
  set_detail(detail, detaillen, rv == -ETIMEDOUT ? "speech_timeout" : "speech_engine_fault");
  ps_free(ps);
  cmd_ln_free_r(cfg);
  return rv;
}

/*
 * pocketsphinx_run, and what its failure means for the job: every one is ours (500, reason internal), the deadline
 * passed included, with the detail of its kind. Shaped as the other engine's: the ops table's entry of each engine.
 */
static int pocketsphinx_recognise(const struct speech_request *req, struct segment_list *out, char lang[16],
                                  struct fetch_outcome *res) {
  fetch_outcome_ok(res);
  int rv = pocketsphinx_run(req, out, lang, res->detail, sizeof(res->detail));
  if (rv == 0) return PROTO_OK;
  const char *detail = rv == -ETIMEDOUT ? "speech_timeout"
                       : rv == -ENOENT  ? "speech_model_missing"
                       : rv == -E2BIG   ? "speech_too_many_segments"
                       : rv == -EINVAL  ? "speech_not_configured"
                                        : NULL;
  if (detail == NULL && res->detail[0] == '\0') detail = "speech_engine_fault";
  if (detail == NULL) return fetch_outcome_keep(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL);
  return fetch_outcome_set(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, detail);
}

const struct speech_engine speech_engine_pocketsphinx = {.name = "pocketsphinx", .recognise = pocketsphinx_recognise};
