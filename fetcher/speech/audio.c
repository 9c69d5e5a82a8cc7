#include "fetcher/speech/audio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/limits.h"
#include "common/util.h"
#include "fetcher/egress/transport.h"
#include "proto/proto.h"

#define AUDIO_PLATFORM_DOMAIN "googlevideo.com"

static void set_detail(char *detail, size_t detaillen, const char *what) {
  if (detail != NULL && detaillen > 0) snprintf(detail, detaillen, "%s", what);
}

/* The media type before any parameters ("audio/webm; codecs=\"opus\"") is one the decoder opens. */
static int mime_is_decodable(const char *mime) {
  size_t n = strcspn(mime, "; ");
  return (n == 9 && strncmp(mime, "audio/mp4", 9) == 0) || (n == 10 && strncmp(mime, "audio/webm", 10) == 0);
}

/* The expected download size of af in bytes: content_length, else bitrate * duration, else -1. */
static int64_t estimated_bytes(const struct audio_format *af) {
  if (af->content_length > 0) return af->content_length;
  /* bitrate is bits per second, so bits / 8 over the duration in ms gives bytes / 1000. */
  if (af->bitrate > 0 && af->duration_ms > 0 && af->bitrate <= INT64_MAX / af->duration_ms)
    return af->bitrate * af->duration_ms / 8000;
  return -1;
}

static int usable(const struct audio_format *af) {
  return af->url != NULL && af->url[0] != '\0' && mime_is_decodable(af->mime);
}

int audio_choose(const struct player_info *pi) {
  int any_default = 0;
  for (size_t i = 0; i < pi->naudio; i++) {
    if (usable(&pi->audio[i]) && pi->audio[i].is_default) any_default = 1;
  }
  int best = -ENOENT;
  int64_t best_size = 0;
  for (size_t i = 0; i < pi->naudio; i++) {
    const struct audio_format *af = &pi->audio[i];
    if (!usable(af) || (any_default && !af->is_default)) continue;
    /* A format of unknown size sorts after every format of known size. */
    int64_t size = estimated_bytes(af);
    if (size < 0) size = INT64_MAX;
    if (best < 0 || size < best_size) {
      best = (int)i;
      best_size = size;
    }
  }
  return best;
}

/* A proper subdomain of the platform's media domain: "rr1---sn-x.googlevideo.com", never "evilgooglevideo.com". */
static int host_is_platform_media(const char *host) {
  size_t n = strlen(host), d = strlen(AUDIO_PLATFORM_DOMAIN);
  return n > d + 1 && host[n - d - 1] == '.' && strcmp(host + n - d, AUDIO_PLATFORM_DOMAIN) == 0;
}

int audio_url_allowed(const char *url, const struct vts_config *cfg) {
  char scheme[16], host[256], up_scheme[16], up_host[256];
  if (transport_url_parts(url, scheme, sizeof(scheme), host, sizeof(host), NULL, 0) != 0) return -EPERM;
  int host_ok = host_is_platform_media(host);
  if (!host_ok &&
      transport_url_parts(cfg->upstream_url, up_scheme, sizeof(up_scheme), up_host, sizeof(up_host), NULL, 0) == 0)
    host_ok = strcmp(host, up_host) == 0;
  if (!host_ok) return -EPERM;
  return transport_scheme_allowed(scheme, host);
}

/*
 * Parses "bytes FIRST-LAST/TOTAL" (TOTAL may be "*", stored as -1). Returns 0, or -EIO for anything else: a range
 * reply we cannot read is a broken server, not something to guess around.
 */
static int parse_content_range(const char *v, int64_t *first, int64_t *last, int64_t *total) {
  if (strncmp(v, "bytes ", 6) != 0) return -EIO;
  const char *p = v + 6;
  char *end = NULL;
  errno = 0;
  long long a = strtoll(p, &end, 10);
  if (errno != 0 || end == p || *end != '-' || a < 0) return -EIO;
  p = end + 1;
  long long b = strtoll(p, &end, 10);
  if (errno != 0 || end == p || *end != '/' || b < a) return -EIO;
  p = end + 1;
  long long t = -1;
  if (strcmp(p, "*") != 0) {
    t = strtoll(p, &end, 10);
    if (errno != 0 || end == p || *end != '\0' || t <= b) return -EIO;
  }
  *first = a;
  *last = b;
  *total = t;
  return 0;
}

/* State of one download: the handle is reused across chunks so that the connection is kept alive. */
struct download {
  struct transport t;
  const char *proxy;
  const struct vts_config *cfg;
  struct buf url; /* where the next chunk is asked: changes when a redirect is followed */
  uint64_t deadline;
  struct buf *out;
  size_t cap; /* out->len may grow up to this */
  char *detail;
  size_t detaillen;
};

/* A failed transfer: its detail and what the download answers, by the transfer's error; out of memory has no detail. */
static int transfer_failure(struct download *d, int rv) {
  static const struct {
    int rv;
    const char *detail;
    int answer;
  } failures[] = {{-EFBIG, "audio_too_big", -EFBIG},
                  {-ETIMEDOUT, "audio_timeout", -ETIMEDOUT},
                  {-EPERM, "audio_redirect_refused", -EPERM},
                  {-ELOOP, "audio_redirect_loop", -EIO}};
  if (rv == -ENOMEM) return -ENOMEM;
  for (size_t i = 0; i < sizeof(failures) / sizeof(failures[0]); i++) {
    if (failures[i].rv == rv) {
      set_detail(d->detail, d->detaillen, failures[i].detail);
      return failures[i].answer;
    }
  }
  set_detail(d->detail, d->detaillen, "audio_network");
  return -EIO;
}

/* The audio download's host policy for transport_fetch: audio_url_allowed, the URL unchanged. */
static int audio_policy(const void *ctx, const char *url, struct buf *out) {
  if (audio_url_allowed(url, ctx) != 0) return -EPERM;
  return buf_puts(out, url);
}

/*
 * Requests bytes [first, last] and appends what arrives. *got is the number of bytes appended, *total the size of the
 * whole resource when the reply told it (else -1), *whole is set when the server ignored the range and sent it all.
 * A redirect is followed and the same range asked again; the next chunks go to where it led. Returns 0 or a negative
 * errno.
 */
static int fetch_range(struct download *d, int64_t first, int64_t last, int64_t *got, int64_t *total, int *whole) {
  char range[64];
  snprintf(range, sizeof(range), "%lld-%lld", (long long)first, (long long)last);
  if (util_now_ms() >= d->deadline) {
    set_detail(d->detail, d->detaillen, "audio_timeout");
    return -ETIMEDOUT;
  }
  size_t before = d->out->len;
  struct transport_req req = {.url = d->url.data,
                              .user_agent = "Mozilla/5.0",
                              .range = range,
                              .proxy = d->proxy,
                              .deadline_ms = d->deadline,
                              .max_bytes = d->cap > before ? d->cap - before : 0};
  long status = 0;
  uint8_t reason;
  struct buf final_url = BUF_INIT;
  int rv =
      transport_fetch(&d->t, &req, audio_policy, d->cfg, VTS_MAX_AUDIO_REDIRECTS, d->out, &status, &reason, &final_url);
  if (rv == 0) {
    buf_free(&d->url);
    d->url = final_url;
  } else {
    buf_free(&final_url);
  }
  if (rv != 0) return transfer_failure(d, rv);
  *got = (int64_t)(d->out->len - before);
  *whole = 0;
  *total = -1;
  if (status == 200 && first == 0) {
    *whole = 1;
    return 0;
  }
  if (status != 206) {
    d->out->len = before;
    char what[32];
    snprintf(what, sizeof(what), "audio_http_%ld", status);
    set_detail(d->detail, d->detaillen, what);
    return -EIO;
  }
  const char *content_range = transport_header(&d->t, "Content-Range");
  int64_t a = 0, b = 0;
  if (content_range == NULL || parse_content_range(content_range, &a, &b, total) != 0 || a != first ||
      *got != b - a + 1) {
    set_detail(d->detail, d->detaillen, "audio_bad_range");
    return -EIO;
  }
  return 0;
}

/*
 * What a failed download means for the job: a file over VTS_MAX_AUDIO_BYTES is a video we do not transcribe (404),
 * no memory is ours (500), anything else the platform's (502). The detail is the one the failure wrote.
 */
static int download_outcome(int rv, struct fetch_outcome *res) {
  if (rv == -EFBIG) return fetch_outcome_keep(res, PROTO_NOT_AVAILABLE, PROTO_REASON_NOT_PLAYABLE);
  if (rv == -ENOMEM) return fetch_outcome_keep(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL);
  return fetch_outcome_keep(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_SPEECH);
}

int audio_download(const char *url, const struct vts_config *cfg, const char *proxy, uint64_t deadline_ms_abs,
                   struct buf *out, struct fetch_outcome *res) {
  char *detail = res->detail;
  size_t detaillen = sizeof(res->detail);
  /* Named members, as the course's flow is set up: alike in shape only. */
  struct download d = {.cfg = cfg,
                       .proxy = proxy,
                       .url = BUF_INIT,
                       .deadline = deadline_ms_abs,
                       .out = out,
                       .detail = detail,
                       .detaillen = detaillen};
  size_t start_len = out->len;
  int rv;
  fetch_outcome_ok(res);
  if (audio_url_allowed(url, cfg) != 0)
    return fetch_outcome_set(res, PROTO_UPSTREAM_FAILED, PROTO_REASON_SPEECH, "audio_url_refused");
  /* The handle is reused across chunks so that the connection is kept alive. */
  if (buf_puts(&d.url, url) != 0 || transport_init(&d.t) != 0) {
    rv = -ENOMEM;
    goto fail;
  }
  d.cap = start_len + VTS_MAX_AUDIO_BYTES;

  int64_t off = 0, total = -1;
  for (;;) {
    int64_t last = off + VTS_AUDIO_CHUNK_BYTES - 1;
    if (total >= 0 && last >= total) last = total - 1;
    int64_t want = last - off + 1, got = 0, chunk_total = -1;
    int whole = 0;
    rv = fetch_range(&d, off, last, &got, &chunk_total, &whole);
    if (rv != 0) goto fail;
    if (whole) break;
    if (chunk_total > VTS_MAX_AUDIO_BYTES) {
      set_detail(detail, detaillen, "audio_too_big");
      rv = -EFBIG;
      goto fail;
    }
    if (off > 0 && chunk_total != total) {
      /* The resource changed size between two chunks: the bytes we hold are not one file. */
      set_detail(detail, detaillen, "audio_bad_range");
      rv = -EIO;
      goto fail;
    }
    total = chunk_total;
    off += got;
    /* With an unknown total, a short chunk is the last one. */
    if ((total >= 0 && off >= total) || (total < 0 && got < want)) break;
  }
  buf_free(&d.url);
  transport_cleanup(&d.t);
  return PROTO_OK;

fail:
  /* The caller gets its buffer back as it was, never a partial file. */
  out->len = start_len;
  if (out->data != NULL) out->data[out->len] = '\0';
  buf_free(&d.url);
  transport_cleanup(&d.t);
  return download_outcome(rv, res);
}
