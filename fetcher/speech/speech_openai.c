/*
 * A remote speech engine (VTS_SPEECH_ENGINE=openai): any server that speaks OpenAI's POST /v1/audio/transcriptions
 * with verbose_json.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/util.h"
#include "fetcher/speech/audio.h"
#include "fetcher/speech/decode.h"
#include "fetcher/speech/engine.h"
#include "fetcher/readers/jsonstream.h"
#include "fetcher/egress/transport.h"
#include "proto/proto.h"

#define OPENAI_PATH "/v1/audio/transcriptions"
#define WAV_HEADER_BYTES 44
#define LANG_UNDETERMINED "und"

static void set_detail(char *detail, size_t detaillen, const char *what) {
  if (detail != NULL && detaillen > 0) snprintf(detail, detaillen, "%s", what);
}

/* Whisper answers with the language's English name; the transcript carries its ISO 639-1 code. */
static const struct {
  const char *name;
  const char *code;
} languages[] = {
    {"afrikaans", "af"},     {"albanian", "sq"},      {"amharic", "am"},     {"arabic", "ar"},
    {"armenian", "hy"},      {"assamese", "as"},      {"azerbaijani", "az"}, {"bashkir", "ba"},
    {"basque", "eu"},        {"belarusian", "be"},    {"bengali", "bn"},     {"bosnian", "bs"},
    {"breton", "br"},        {"bulgarian", "bg"},     {"burmese", "my"},     {"cantonese", "yue"},
    {"castilian", "es"},     {"catalan", "ca"},       {"chinese", "zh"},     {"croatian", "hr"},
    {"czech", "cs"},         {"danish", "da"},        {"dutch", "nl"},       {"english", "en"},
    {"estonian", "et"},      {"faroese", "fo"},       {"finnish", "fi"},     {"flemish", "nl"},
    {"french", "fr"},        {"galician", "gl"},      {"georgian", "ka"},    {"german", "de"},
    {"greek", "el"},         {"gujarati", "gu"},      {"haitian", "ht"},     {"haitian creole", "ht"},
    {"hausa", "ha"},         {"hawaiian", "haw"},     {"hebrew", "he"},      {"hindi", "hi"},
    {"hungarian", "hu"},     {"icelandic", "is"},     {"indonesian", "id"},  {"italian", "it"},
    {"japanese", "ja"},      {"javanese", "jv"},      {"kannada", "kn"},     {"kazakh", "kk"},
    {"khmer", "km"},         {"korean", "ko"},        {"lao", "lo"},         {"latin", "la"},
    {"latvian", "lv"},       {"letzeburgesch", "lb"}, {"lingala", "ln"},     {"lithuanian", "lt"},
    {"luxembourgish", "lb"}, {"macedonian", "mk"},    {"malagasy", "mg"},    {"malay", "ms"},
    {"malayalam", "ml"},     {"maltese", "mt"},       {"maori", "mi"},       {"marathi", "mr"},
    {"moldavian", "ro"},     {"moldovan", "ro"},      {"mongolian", "mn"},   {"myanmar", "my"},
    {"nepali", "ne"},        {"norwegian", "no"},     {"nynorsk", "nn"},     {"occitan", "oc"},
    {"panjabi", "pa"},       {"pashto", "ps"},        {"persian", "fa"},     {"polish", "pl"},
    {"portuguese", "pt"},    {"punjabi", "pa"},       {"pushto", "ps"},      {"romanian", "ro"},
    {"russian", "ru"},       {"sanskrit", "sa"},      {"serbian", "sr"},     {"shona", "sn"},
    {"sindhi", "sd"},        {"sinhala", "si"},       {"sinhalese", "si"},   {"slovak", "sk"},
    {"slovenian", "sl"},     {"somali", "so"},        {"spanish", "es"},     {"sundanese", "su"},
    {"swahili", "sw"},       {"swedish", "sv"},       {"tagalog", "tl"},     {"tajik", "tg"},
    {"tamil", "ta"},         {"tatar", "tt"},         {"telugu", "te"},      {"thai", "th"},
    {"tibetan", "bo"},       {"turkish", "tr"},       {"turkmen", "tk"},     {"ukrainian", "uk"},
    {"urdu", "ur"},          {"uzbek", "uz"},         {"valencian", "ca"},   {"vietnamese", "vi"},
    {"welsh", "cy"},         {"yiddish", "yi"},       {"yoruba", "yo"},
};

static int is_lower(char c) { return c >= 'a' && c <= 'z'; }
static int is_alpha(char c) { return is_lower(c) || (c >= 'A' && c <= 'Z'); }

/* A language tag already in the public pattern ^[a-z]{2,3}(-[a-zA-Z]{2,8})?$. */
static int is_language_code(const char *s, size_t len) {
  size_t i = 0;
  while (i < len && is_lower(s[i])) i++;
  if (i < 2 || i > 3) return 0;
  if (i == len) return 1;
  if (s[i] != '-') return 0;
  size_t r = len - i - 1;
  if (r < 2 || r > 8) return 0;
  for (size_t j = i + 1; j < len; j++) {
    if (!is_alpha(s[j])) return 0;
  }
  return 1;
}

static void map_language(const char *s, size_t len, char lang[16]) {
  if (is_language_code(s, len)) {
    snprintf(lang, 16, "%.*s", (int)len, s);
    return;
  }
  char lower[32];
  if (len >= sizeof(lower)) len = 0;
  for (size_t i = 0; i < len; i++) lower[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] - 'A' + 'a') : s[i];
  lower[len] = '\0';
  for (size_t i = 0; i < sizeof(languages) / sizeof(languages[0]); i++) {
    if (strcmp(lower, languages[i].name) == 0) {
      snprintf(lang, 16, "%s", languages[i].code);
      return;
    }
  }
  snprintf(lang, 16, "%s", LANG_UNDETERMINED);
}

/* The verbose_json fields we read, as jsonstream node and field ids. */
enum { N_SEGMENTS = 2, N_SEGMENT, N_WORDS, N_WORD };
enum { F_LANGUAGE = 1, F_TEXT, F_DURATION, F_SEGMENTS, F_START, F_END, F_SEG_TEXT, F_WORDS, F_WORD };

/*
 * One reply being read: top-level language, text and duration, each element of segments[] with its start, end and
 * text, and each of words[] (asked for with timestamp_granularities[]=word) likewise. Times are shifted by offset
 * (the part's place in the whole audio). Segments and words are collected first: a segment longer than the cap is
 * cut at the longest pause between its words before it joins out.
 */
struct reply {
  int in_word; /* the element being read is a word, not a segment */
  struct segment_list segs;
  struct segment_list words;
  double start, end;
  int has_start, has_end;
  struct buf seg_text;
  int saw_segments;
  struct buf top_text;
  double duration;
  char language[16];
  double offset;
  struct segment_list *out;
};

static int reply_key(void *ctx, int node, const char *key, size_t len) {
  (void)ctx;
  static const struct {
    int node, field;
    const char *name;
  } fields[] = {{JSONSTREAM_ROOT, F_LANGUAGE, "language"},
                {JSONSTREAM_ROOT, F_TEXT, "text"},
                {JSONSTREAM_ROOT, F_DURATION, "duration"},
                {JSONSTREAM_ROOT, F_SEGMENTS, "segments"},
                {N_SEGMENT, F_START, "start"},
                {N_SEGMENT, F_END, "end"},
                {N_SEGMENT, F_SEG_TEXT, "text"},
                {JSONSTREAM_ROOT, F_WORDS, "words"},
                {N_WORD, F_START, "start"},
                {N_WORD, F_END, "end"},
                {N_WORD, F_WORD, "word"}};
  for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
    if (fields[i].node == node && strlen(fields[i].name) == len && memcmp(fields[i].name, key, len) == 0)
      return fields[i].field;
  }
  return 0;
}

static int reply_open(void *ctx, int node, int field, int is_array) {
  struct reply *r = ctx;
  if (node == JSONSTREAM_ROOT && field == F_SEGMENTS && is_array) {
    r->saw_segments = 1;
    return N_SEGMENTS;
  }
  if (node == JSONSTREAM_ROOT && field == F_WORDS && is_array) return N_WORDS;
  if ((node == N_SEGMENTS || node == N_WORDS) && field == JSONSTREAM_ITEM && !is_array) {
    r->has_start = r->has_end = 0;
    r->in_word = node == N_WORDS;
    buf_reset(&r->seg_text);
    return r->in_word ? N_WORD : N_SEGMENT;
  }
  return JSONSTREAM_SKIP;
}

static int reply_close(void *ctx, int node) {
  struct reply *r = ctx;
  if (node != N_SEGMENT && node != N_WORD) return 0;
  if (!r->has_start || !r->has_end || r->start < 0) return -EPROTO;
  return segment_list_append(node == N_WORD ? &r->words : &r->segs, r->seg_text.data != NULL ? r->seg_text.data : "",
                             r->seg_text.len, r->offset + r->start, r->end - r->start);
}

/* A JSON number as written into a finite double. Returns 0, or -EPROTO. */
static int number_value(const char *s, size_t len, double *out) {
  char tmp[64];
  if (len == 0 || len >= sizeof(tmp)) return -EPROTO;
  memcpy(tmp, s, len);
  tmp[len] = '\0';
  char *end = NULL;
  double v = strtod(tmp, &end);
  if (end != tmp + len || !isfinite(v)) return -EPROTO;
  *out = v;
  return 0;
}

static int reply_scalar(void *ctx, int node, int field, enum jsonstream_kind kind, const char *s, size_t len) {
  struct reply *r = ctx;
  if (kind == JSONSTREAM_STRING) {
    if (node == JSONSTREAM_ROOT && field == F_LANGUAGE) map_language(s, len, r->language);
    if (node == JSONSTREAM_ROOT && field == F_TEXT) return buf_append(&r->top_text, s, len);
    if ((node == N_SEGMENT && field == F_SEG_TEXT) || (node == N_WORD && field == F_WORD))
      return buf_append(&r->seg_text, s, len);
    return 0;
  }
  if (kind != JSONSTREAM_NUMBER) return 0;
  double v;
  if (node == JSONSTREAM_ROOT && field == F_DURATION) return number_value(s, len, &r->duration);
  if ((node == N_SEGMENT || node == N_WORD) && (field == F_START || field == F_END)) {
    if (number_value(s, len, &v) != 0) return -EPROTO;
    if (field == F_START) {
      r->start = v;
      r->has_start = 1;
    } else {
      r->end = v;
      r->has_end = 1;
    }
  }
  return 0;
}

static const struct jsonstream_ops reply_ops = {reply_key, reply_open, reply_close, reply_scalar};

/*
 * The words of a segment that is too long to read, with their times: the reply's words inside its span when their
 * texts make up its text (the segment's own words then keep its punctuation), else its text's words spread evenly
 * over it (a server that gave no word times: every pause is as long, so the cuts fall in the middle).
 */
static int words_of(const struct segment *seg, const struct segment_list *words, struct segment_list *out) {
  const double slack = 0.001; /* word and segment times are rounded apart */
  double end = seg->start + seg->duration;
  size_t first = 0;
  while (first < words->len && words->items[first].start < seg->start - slack) first++;
  size_t n = 0;
  while (first + n < words->len && words->items[first + n].start + words->items[first + n].duration <= end + slack) n++;
  size_t ntext = 0;
  for (const char *p = seg->text; *p != '\0'; ntext++) {
    p += strspn(p, " ");
    if (*p == '\0') break;
    p += strcspn(p, " ");
  }
  int rv = 0;
  const char *p = seg->text;
  for (size_t i = 0; rv == 0 && i < ntext; i++) {
    p += strspn(p, " ");
    size_t wlen = strcspn(p, " ");
    if (n == ntext)
      rv = segment_list_append(out, p, wlen, words->items[first + i].start, words->items[first + i].duration);
    else
      rv = segment_list_append(out, p, wlen, seg->start + seg->duration * (double)i / (double)ntext,
                               seg->duration / (double)ntext);
    p += wlen;
  }
  if (rv == 0 && n > 0 && n != ntext) {
    /* The server's words do not match the segment's text: its words and times are the better account. */
    segment_list_free(out);
    for (size_t i = 0; rv == 0 && i < n; i++) {
      const struct segment *w = &words->items[first + i];
      rv = segment_list_append(out, w->text, strlen(w->text), w->start, w->duration);
    }
  }
  return rv;
}

/* Appends seg to out, cut at its longest pauses (fetcher/captions/segments.c) when it is longer than the cap. */
static int add_segment(struct segment_list *out, const struct segment *seg, const struct segment_list *words,
                       double audio_s) {
  if (seg->duration <= VTS_MAX_SPEECH_SEGMENT_S)
    return segment_list_append(out, seg->text, strlen(seg->text), seg->start, seg->duration);
  struct segment_list w = {0};
  int rv = words_of(seg, words, &w);
  /* A pause nowhere inside the segment ends it: only the cap cuts. */
  if (rv == 0) rv = segment_list_group_words(out, &w, HUGE_VAL, audio_s);
  segment_list_free(&w);
  return rv;
}

/*
 * Reads one verbose_json reply into out, times shifted by offset; part_seconds is the length of the audio sent, for
 * a reply that has text but no segments (a server that ignored response_format). The reply is untrusted: it goes
 * through the bounded streaming reader (fetcher/readers/jsonstream.h). Returns 0, -EPROTO, -E2BIG or -ENOMEM.
 */
static int parse_reply(const char *body, size_t len, double offset, double part_seconds, struct segment_list *out,
                       char lang[16]) {
  struct reply r = {.offset = offset, .out = out, .seg_text = BUF_INIT, .top_text = BUF_INIT, .duration = -1};
  int rv = jsonstream_parse(body != NULL ? body : "", len, 1, &reply_ops, &r);
  if (rv == 0 && !r.saw_segments && r.top_text.len > 0)
    rv = segment_list_append(&r.segs, r.top_text.data, r.top_text.len, offset,
                             r.duration >= 0 ? r.duration : part_seconds);
  for (size_t i = 0; rv == 0 && i < r.segs.len; i++)
    rv = add_segment(out, &r.segs.items[i], &r.words, offset + part_seconds);
  segment_list_free(&r.segs);
  segment_list_free(&r.words);
  if (rv == 0 && r.language[0] != '\0' && (lang[0] == '\0' || strcmp(lang, LANG_UNDETERMINED) == 0))
    snprintf(lang, 16, "%s", r.language);
  buf_free(&r.seg_text);
  buf_free(&r.top_text);
  return rv;
}

static void put_le(struct buf *b, uint32_t v, int bytes) {
  unsigned char c[4];
  for (int i = 0; i < bytes; i++) c[i] = (unsigned char)(v >> (8 * i));
  buf_append(b, c, (size_t)bytes);
}

/* A 16 kHz mono 16-bit PCM WAV file of n samples. Returns 0, or -ENOMEM. */
static int wav_file(struct buf *b, const int16_t *pcm, size_t n) {
  uint32_t data_bytes = (uint32_t)(n * 2);
  buf_reset(b);
  if (buf_reserve(b, WAV_HEADER_BYTES + data_bytes) != 0) return -ENOMEM;
  buf_append(b, "RIFF", 4);
  put_le(b, 36 + data_bytes, 4);
  buf_append(b, "WAVEfmt ", 8);
  put_le(b, 16, 4);
  put_le(b, 1, 2); /* PCM */
  put_le(b, 1, 2); /* mono */
  put_le(b, DECODE_SAMPLE_RATE, 4);
  put_le(b, DECODE_SAMPLE_RATE * 2, 4);
  put_le(b, 2, 2);
  put_le(b, 16, 2);
  buf_append(b, "data", 4);
  put_le(b, data_bytes, 4);
  for (size_t i = 0; i < n; i++) put_le(b, (uint16_t)pcm[i], 2);
  return 0;
}

/* One request; the reply body lands in reply. Returns 0, -EIO, -ETIMEDOUT or -ENOMEM. */
static int post_file(const struct vts_config *cfg, const char *url, const void *file, size_t len, const char *name,
                     uint64_t deadline_ms_abs, struct buf *reply, char *detail, size_t detaillen) {
  uint64_t now = util_now_ms();
  if (now >= deadline_ms_abs) {
    set_detail(detail, detaillen, "speech_timeout");
    return -ETIMEDOUT;
  }
  const char *model = cfg->speech_model[0] != '\0' ? cfg->speech_model : config_default("VTS_SPEECH_MODEL");
  const char *ext = strrchr(name, '.');
  const char *type = ext == NULL                 ? "application/octet-stream"
                     : strcmp(ext, ".wav") == 0  ? "audio/wav"
                     : strcmp(ext, ".webm") == 0 ? "audio/webm"
                                                 : "audio/mp4";
  struct buf auth = BUF_INIT;
  curl_mime *mime = NULL;
  struct transport t;
  int rv = transport_init(&t);
  if (rv != 0) goto done;
  rv = -ENOMEM;
  mime = curl_mime_init(t.curl);
  if (mime == NULL) goto done;
  curl_mimepart *part = curl_mime_addpart(mime);
  if (part == NULL || curl_mime_name(part, "file") != CURLE_OK || curl_mime_data(part, file, len) != CURLE_OK ||
      curl_mime_filename(part, name) != CURLE_OK || curl_mime_type(part, type) != CURLE_OK)
    goto done;
  part = curl_mime_addpart(mime);
  if (part == NULL || curl_mime_name(part, "model") != CURLE_OK ||
      curl_mime_data(part, model, CURL_ZERO_TERMINATED) != CURLE_OK)
    goto done;
  part = curl_mime_addpart(mime);
  if (part == NULL || curl_mime_name(part, "response_format") != CURLE_OK ||
      curl_mime_data(part, "verbose_json", CURL_ZERO_TERMINATED) != CURLE_OK)
    goto done;
  /* Word times let a long segment be cut at its longest pause; segments stay the unit the server chose. */
  static const char *const granularities[] = {"word", "segment"};
  for (size_t i = 0; i < sizeof(granularities) / sizeof(granularities[0]); i++) {
    part = curl_mime_addpart(mime);
    if (part == NULL || curl_mime_name(part, "timestamp_granularities[]") != CURLE_OK ||
        curl_mime_data(part, granularities[i], CURL_ZERO_TERMINATED) != CURLE_OK)
      goto done;
  }

  if (cfg->speech_api_key[0] != '\0' && buf_printf(&auth, "Authorization: Bearer %s", cfg->speech_api_key) != 0)
    goto done;
  const char *headers[] = {auth.data, NULL};
  /* The engine is no platform host: the configured URL is called directly, never through the platform's proxies. */
  struct transport_req req = {.url = url,
                              .post = 1,
                              .mime = mime,
                              .headers = auth.data != NULL ? headers : NULL,
                              .deadline_ms = deadline_ms_abs,
                              .max_bytes = VTS_MAX_UPSTREAM_BODY_BYTES,
                              .operator_url = 1};
  long status = 0;
  uint8_t reason;
  int trv = transport_perform(&t, &req, reply, &status, &reason);
  if (trv == -ETIMEDOUT) {
    set_detail(detail, detaillen, "speech_timeout");
    rv = -ETIMEDOUT;
  } else if (trv == -EFBIG) {
    set_detail(detail, detaillen, "speech_reply_too_big");
    rv = -EIO;
  } else if (trv == -ENOMEM) {
    rv = -ENOMEM;
  } else if (trv != 0) {
    set_detail(detail, detaillen, "speech_unreachable");
    rv = -EIO;
  } else if (status != 200) {
    char what[32];
    snprintf(what, sizeof(what), "speech_http_%ld", status);
    set_detail(detail, detaillen, what);
    rv = -EIO;
  } else {
    rv = 0;
  }

done:
  buf_free(&auth);
  curl_mime_free(mime);
  transport_cleanup(&t);
  return rv;
}

/*
 * Sends the audio as multipart (file, model, response_format=verbose_json, timestamp_granularities[] word and
 * segment). A segment past VTS_MAX_SPEECH_SEGMENT_S is cut at the longest pause between its words
 * (segment_list_group_words), or evenly when the server gave no word times. The original file is sent when it fits
 * in req->max_upload_bytes; otherwise the samples are sent as WAV parts of at most that many bytes each, and each
 * part's segment times are shifted by the part's offset. Sets lang from the reply's "language" ("english" -> "en";
 * "und" when unknown). Returns 0, -EINVAL (no VTS_SPEECH_URL), -EIO (connection failed or a non-200 answer),
 * -ETIMEDOUT, -EPROTO (a reply that is not verbose_json or is too large), -E2BIG (more than VTS_MAX_SEGMENTS), or
 * -ENOMEM.
 */
static int openai_run(const struct speech_request *req, struct segment_list *out, char lang[16], char *detail,
                      size_t detaillen) {
  const struct vts_config *cfg = req->cfg;
  const struct speech_audio *audio = req->audio;
  const size_t max_upload_bytes = req->max_upload_bytes;
  const uint64_t deadline_ms_abs = req->deadline_ms_abs;
  struct buf url = BUF_INIT, wav = BUF_INIT, reply = BUF_INIT;
  int rv;
  lang[0] = '\0';
  size_t base_len = strlen(cfg->speech_url);
  while (base_len > 0 && cfg->speech_url[base_len - 1] == '/') base_len--;
  if (base_len == 0 || max_upload_bytes <= WAV_HEADER_BYTES + 2) {
    set_detail(detail, detaillen, "speech_url_unset");
    return -EINVAL;
  }
  rv = buf_printf(&url, "%.*s%s", (int)base_len, cfg->speech_url, OPENAI_PATH);
  if (rv != 0) goto done;

  if (audio->original != NULL && audio->original_name != NULL && audio->original_len <= max_upload_bytes) {
    rv = post_file(cfg, url.data, audio->original, audio->original_len, audio->original_name, deadline_ms_abs, &reply,
                   detail, detaillen);
    if (rv == 0) rv = parse_reply(reply.data, reply.len, 0, (double)audio->nsamples / DECODE_SAMPLE_RATE, out, lang);
  } else {
    /* WAV parts of whole samples; each part's times are shifted by where it starts. */
    size_t per_part = (max_upload_bytes - WAV_HEADER_BYTES) / 2;
    rv = 0;
    for (size_t first = 0; rv == 0 && first < audio->nsamples; first += per_part) {
      size_t n = audio->nsamples - first;
      if (n > per_part) n = per_part;
      rv = wav_file(&wav, audio->pcm + first, n);
      buf_reset(&reply);
      if (rv == 0)
        rv = post_file(cfg, url.data, wav.data, wav.len, "audio.wav", deadline_ms_abs, &reply, detail, detaillen);
      if (rv == 0)
        rv = parse_reply(reply.data, reply.len, (double)first / DECODE_SAMPLE_RATE, (double)n / DECODE_SAMPLE_RATE, out,
                         lang);
    }
  }
  if (rv == -EPROTO) set_detail(detail, detaillen, "speech_bad_reply");
  if (rv == 0 && lang[0] == '\0') snprintf(lang, 16, "%s", LANG_UNDETERMINED);

done:
  buf_free(&url);
  buf_free(&wav);
  buf_free(&reply);
  return rv;
}

/*
 * openai_run, and what its failure means for the job: the server unreachable, failing, late or answering nonsense is
 * the upstream's failure (502, reason speech, the detail it wrote); no VTS_SPEECH_URL, too many segments or no
 * memory is ours (500, reason internal). Shaped as the other engine's: the ops table's entry of each engine.
 */
static int openai_recognise(const struct speech_request *req, struct segment_list *out, char lang[16],
                            struct fetch_outcome *res) {
  fetch_outcome_ok(res);
  int rv = openai_run(req, out, lang, res->detail, sizeof(res->detail));
  if (rv == 0) return PROTO_OK;
  if (rv == -EIO || rv == -ETIMEDOUT || rv == -EPROTO)
    return fetch_outcome_keep(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_SPEECH);
  if (rv == -EINVAL) return fetch_outcome_set(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "speech_not_configured");
  if (rv == -ENOENT) return fetch_outcome_set(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "speech_model_missing");
  if (rv == -E2BIG) return fetch_outcome_set(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "speech_too_many_segments");
  if (res->detail[0] == '\0')
    return fetch_outcome_set(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL, "speech_engine_fault");
  return fetch_outcome_keep(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL);
}

const struct speech_engine speech_engine_openai = {.name = "openai", .recognise = openai_recognise};
