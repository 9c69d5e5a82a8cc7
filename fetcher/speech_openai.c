/* A remote speech engine: any server that speaks OpenAI's POST /v1/audio/transcriptions with verbose_json. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <yajl/yajl_parse.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/util.h"
#include "fetcher/audio.h"
#include "fetcher/decode.h"
#include "fetcher/speech.h"

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

/*
 * The reply, read with yajl's event parser: the tree parser accepts comments, stops at a NUL and recurses when
 * freeing. Only {"language", "text", "duration", "segments": [{"start", "end", "text"}]} is looked at.
 */
struct reply {
  int depth;
  int segs_depth; /* depth inside the segments array, 0 when not in it */
  int in_segment;
  char top_key[16];
  char seg_key[16];
  double start, end;
  int has_start, has_end;
  struct buf seg_text;
  int saw_segments;
  struct buf top_text;
  double duration;
  char language[16];
  double offset; /* of this part in the whole audio, added to every time */
  struct segment_list *out;
  int err;
};

static void copy_key(char *dst, size_t dstlen, const unsigned char *s, size_t len) {
  /* A longer key cannot be one we look for; keep it distinguishable from all of them. */
  if (len >= dstlen) len = 0;
  memcpy(dst, s, len);
  dst[len] = '\0';
}

/* Ends the parse with err: yajl stops when a callback returns 0. */
static int stop(struct reply *r, int err) {
  r->err = err;
  return 0;
}

static int at_segment_field(const struct reply *r) { return r->in_segment && r->depth == r->segs_depth + 1; }

static int on_number(struct reply *r, double v) {
  /* The reply is an object: a bare value at the top is not verbose_json. */
  if (!isfinite(v) || r->depth == 0) return stop(r, -EPROTO);
  if (r->depth == 1 && strcmp(r->top_key, "duration") == 0) r->duration = v;
  if (at_segment_field(r)) {
    if (strcmp(r->seg_key, "start") == 0) {
      r->start = v;
      r->has_start = 1;
    } else if (strcmp(r->seg_key, "end") == 0) {
      r->end = v;
      r->has_end = 1;
    }
  }
  return 1;
}

static int cb_integer(void *ctx, long long v) { return on_number(ctx, (double)v); }
static int cb_double(void *ctx, double v) { return on_number(ctx, v); }

static int cb_string(void *ctx, const unsigned char *s, size_t len) {
  struct reply *r = ctx;
  int rv = 0;
  if (r->depth == 0) return stop(r, -EPROTO);
  if (r->depth == 1 && strcmp(r->top_key, "language") == 0)
    map_language((const char *)s, len, r->language);
  else if (r->depth == 1 && strcmp(r->top_key, "text") == 0)
    rv = buf_append(&r->top_text, s, len);
  else if (at_segment_field(r) && strcmp(r->seg_key, "text") == 0)
    rv = buf_append(&r->seg_text, s, len);
  return rv != 0 ? stop(r, rv) : 1;
}

static int cb_scalar(void *ctx) {
  struct reply *r = ctx;
  return r->depth == 0 ? stop(r, -EPROTO) : 1;
}
static int cb_boolean(void *ctx, int v) {
  (void)v;
  return cb_scalar(ctx);
}

static int cb_map_key(void *ctx, const unsigned char *s, size_t len) {
  struct reply *r = ctx;
  if (r->depth == 1)
    copy_key(r->top_key, sizeof(r->top_key), s, len);
  else if (at_segment_field(r))
    copy_key(r->seg_key, sizeof(r->seg_key), s, len);
  return 1;
}

static int enter(struct reply *r) {
  if (r->depth >= VTS_MAX_JSON_DEPTH) return stop(r, -EPROTO);
  r->depth++;
  return 1;
}

static int cb_start_map(void *ctx) {
  struct reply *r = ctx;
  if (r->segs_depth != 0 && r->depth == r->segs_depth) {
    r->in_segment = 1;
    r->has_start = r->has_end = 0;
    r->seg_key[0] = '\0';
    buf_reset(&r->seg_text);
  }
  return enter(r);
}

static int cb_end_map(void *ctx) {
  struct reply *r = ctx;
  if (at_segment_field(r)) {
    r->in_segment = 0;
    if (!r->has_start || !r->has_end || r->start < 0) return stop(r, -EPROTO);
    int rv = speech_segment_append(r->out, r->seg_text.data != NULL ? r->seg_text.data : "", r->seg_text.len,
                                   r->offset + r->start, r->end - r->start);
    if (rv != 0) return stop(r, rv);
  }
  r->depth--;
  return 1;
}

static int cb_start_array(void *ctx) {
  struct reply *r = ctx;
  if (r->depth == 0) return stop(r, -EPROTO);
  if (r->depth == 1 && strcmp(r->top_key, "segments") == 0) {
    r->segs_depth = 2;
    r->saw_segments = 1;
  }
  return enter(r);
}

static int cb_end_array(void *ctx) {
  struct reply *r = ctx;
  if (r->depth == r->segs_depth) r->segs_depth = 0;
  r->depth--;
  return 1;
}

static const yajl_callbacks reply_callbacks = {
    .yajl_null = cb_scalar,
    .yajl_boolean = cb_boolean,
    .yajl_integer = cb_integer,
    .yajl_double = cb_double,
    .yajl_string = cb_string,
    .yajl_start_map = cb_start_map,
    .yajl_map_key = cb_map_key,
    .yajl_end_map = cb_end_map,
    .yajl_start_array = cb_start_array,
    .yajl_end_array = cb_end_array,
};

/*
 * Reads one verbose_json reply into out, times shifted by offset; part_seconds is the length of the audio sent, for
 * a reply that has text but no segments (a server that ignored response_format). Returns 0, -EPROTO, -E2BIG or
 * -ENOMEM.
 */
static int parse_reply(const char *body, size_t len, double offset, double part_seconds, struct segment_list *out,
                       char lang[16]) {
  struct reply r = {.offset = offset, .out = out, .seg_text = BUF_INIT, .top_text = BUF_INIT, .duration = -1};
  yajl_handle h = yajl_alloc(&reply_callbacks, NULL, &r);
  if (h == NULL) return -ENOMEM;
  yajl_status st = yajl_parse(h, (const unsigned char *)(body != NULL ? body : ""), len);
  if (st == yajl_status_ok) st = yajl_complete_parse(h);
  int rv = 0;
  if (st != yajl_status_ok)
    rv = r.err != 0 ? r.err : -EPROTO;
  else if (r.depth != 0)
    rv = -EPROTO;
  if (rv == 0 && !r.saw_segments && r.top_text.len > 0)
    rv = speech_segment_append(out, r.top_text.data, r.top_text.len, offset,
                               r.duration >= 0 ? r.duration : part_seconds);
  if (rv == 0 && r.language[0] != '\0' && (lang[0] == '\0' || strcmp(lang, LANG_UNDETERMINED) == 0))
    snprintf(lang, 16, "%s", r.language);
  yajl_free(h);
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
  const char *model = cfg->speech_model[0] != '\0' ? cfg->speech_model : SPEECH_DEFAULT_OPENAI_MODEL;
  const char *ext = strrchr(name, '.');
  const char *type = ext == NULL                 ? "application/octet-stream"
                     : strcmp(ext, ".wav") == 0  ? "audio/wav"
                     : strcmp(ext, ".webm") == 0 ? "audio/webm"
                                                 : "audio/mp4";
  struct audio_sink sink = {.buf = reply, .cap = VTS_MAX_UPSTREAM_BODY_BYTES};
  struct curl_slist *headers = NULL;
  curl_mime *mime = NULL;
  int rv = -ENOMEM;
  CURL *curl = curl_easy_init();
  if (curl == NULL) goto done;
  mime = curl_mime_init(curl);
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

  if (cfg->speech_api_key[0] != '\0') {
    struct buf auth = BUF_INIT;
    if (buf_printf(&auth, "Authorization: Bearer %s", cfg->speech_api_key) != 0) goto done;
    struct curl_slist *h = curl_slist_append(headers, auth.data);
    buf_free(&auth);
    if (h == NULL) goto done;
    headers = h;
  }
  /* Without this curl waits for "100 Continue" before a large body, which some servers never send. */
  struct curl_slist *h = curl_slist_append(headers, "Expect:");
  if (h == NULL) goto done;
  headers = h;

  curl_easy_setopt(curl, CURLOPT_URL, url);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_MIMEPOST, mime);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, audio_sink_write);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)VTS_UPSTREAM_CONNECT_TIMEOUT_MS);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)(deadline_ms_abs - now));
  CURLcode cc = curl_easy_perform(curl);
  long status = 0;
  if (cc == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  if (cc == CURLE_OPERATION_TIMEDOUT) {
    set_detail(detail, detaillen, "speech_timeout");
    rv = -ETIMEDOUT;
  } else if (sink.overflow) {
    set_detail(detail, detaillen, "speech_reply_too_big");
    rv = -EIO;
  } else if (cc == CURLE_OUT_OF_MEMORY) {
    rv = -ENOMEM;
  } else if (cc != CURLE_OK) {
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
  curl_slist_free_all(headers);
  curl_mime_free(mime);
  if (curl != NULL) curl_easy_cleanup(curl);
  return rv;
}

int speech_openai_recognise(const struct vts_config *cfg, const struct speech_audio *audio, size_t max_upload_bytes,
                            uint64_t deadline_ms_abs, struct segment_list *out, char lang[16], char *detail,
                            size_t detaillen) {
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
