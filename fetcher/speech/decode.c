#include "fetcher/speech/decode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libswresample/swresample.h>

#include "common/limits.h"
#include "proto/proto.h"

/* Demuxer names as libavformat reports them after probing; the whitelist is their union. */
#define DECODE_FORMAT_MP4 "mov,mp4,m4a,3gp,3g2,mj2"
#define DECODE_FORMAT_WEBM "matroska,webm"
#define DECODE_FORMATS DECODE_FORMAT_MP4 "," DECODE_FORMAT_WEBM
#define DECODE_CODECS "aac,opus,vorbis"
#define DECODE_IO_BUFFER_BYTES 65536
#define DECODE_MAX_CHANNELS 8
#define DECODE_MAX_INPUT_RATE 384000
/* A stream that stops this far short of its declared duration is truncated: half a second, or 1% of long files. */
#define DECODE_TRUNCATION_SLACK_S 0.5
#define DECODE_TRUNCATION_SLACK_RATIO 0.01

/* The file as libavformat sees it: a read-only, seekable view of the caller's bytes. */
struct mem_input {
  const uint8_t *data;
  size_t len;
  size_t pos;
};

struct decoder {
  struct mem_input in;
  AVIOContext *io;
  AVFormatContext *fmt;
  AVCodecContext *codec;
  SwrContext *swr;
  AVChannelLayout swr_layout; /* input parameters swr was built for */
  int swr_format;
  int swr_rate;
  AVPacket *pkt;
  AVFrame *frame;
  int stream;
  size_t max_samples;
  struct decode_pcm *out;
};

static int mem_read(void *opaque, uint8_t *buf, int size) {
  struct mem_input *in = opaque;
  if (in->pos >= in->len) return AVERROR_EOF;
  size_t n = in->len - in->pos;
  if (n > (size_t)size) n = (size_t)size;
  memcpy(buf, in->data + in->pos, n);
  in->pos += n;
  return (int)n;
}

static int64_t mem_seek(void *opaque, int64_t offset, int whence) {
  struct mem_input *in = opaque;
  int64_t base;
  switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE:
      return (int64_t)in->len;
    case SEEK_SET:
      base = 0;
      break;
    case SEEK_CUR:
      base = (int64_t)in->pos;
      break;
    case SEEK_END:
      base = (int64_t)in->len;
      break;
    default:
      return AVERROR(EINVAL);
  }
  if (offset > (int64_t)in->len || offset < -base || base + offset > (int64_t)in->len) return AVERROR(EINVAL);
  in->pos = (size_t)(base + offset);
  return (int64_t)in->pos;
}

static int map_averror(int err) { return err == AVERROR(ENOMEM) ? -ENOMEM : -EPROTO; }

/* Makes room for n more samples without letting the buffer grow far past the cap. */
static int pcm_reserve(struct decode_pcm *pcm, size_t n, size_t max_samples) {
  if (n > max_samples || pcm->len > max_samples - n) return -EFBIG;
  size_t need = pcm->len + n;
  if (need <= pcm->cap) return 0;
  size_t cap = pcm->cap ? pcm->cap : DECODE_SAMPLE_RATE * 8;
  while (cap < need) cap *= 2;
  if (cap > max_samples) cap = max_samples;
  int16_t *p = realloc(pcm->samples, cap * sizeof(*p));
  if (p == NULL) return -ENOMEM;
  pcm->samples = p;
  pcm->cap = cap;
  return 0;
}

/*
 * Resamples in_samples samples (NULL to drain the resampler) onto the end of the output. swr may hold back a few
 * samples; swr_get_out_samples bounds what one call can produce.
 */
static int convert(struct decoder *d, const uint8_t **in, int in_samples) {
  int room = swr_get_out_samples(d->swr, in_samples);
  if (room < 0) return -EPROTO;
  if (room == 0) return 0;
  /* One extra frame of room so that a stream just over the cap is reported as such rather than cut. */
  int rv = pcm_reserve(d->out, (size_t)room, d->max_samples + (size_t)room);
  if (rv != 0) return rv;
  uint8_t *dst = (uint8_t *)(d->out->samples + d->out->len);
  int n = swr_convert(d->swr, &dst, room, in, in_samples);
  if (n < 0) return map_averror(n);
  d->out->len += (size_t)n;
  if (d->out->len > d->max_samples) return -EFBIG;
  return 0;
}

/* Builds the resampler for the frame's parameters, draining the old one first when the stream changes them. */
static int setup_resampler(struct decoder *d, const AVFrame *f) {
  AVChannelLayout layout;
  int rv;
  if (f->ch_layout.nb_channels < 1 || f->ch_layout.nb_channels > DECODE_MAX_CHANNELS || f->sample_rate <= 0 ||
      f->sample_rate > DECODE_MAX_INPUT_RATE)
    return -EPROTO;
  /* An unordered layout ("2 channels") has no mixing matrix: treat it as the default layout of that count. */
  if (f->ch_layout.order == AV_CHANNEL_ORDER_UNSPEC)
    av_channel_layout_default(&layout, f->ch_layout.nb_channels);
  else if (av_channel_layout_copy(&layout, &f->ch_layout) < 0)
    return -ENOMEM;

  if (d->swr != NULL && d->swr_format == f->format && d->swr_rate == f->sample_rate &&
      av_channel_layout_compare(&d->swr_layout, &layout) == 0) {
    av_channel_layout_uninit(&layout);
    return 0;
  }
  if (d->swr != NULL) {
    rv = convert(d, NULL, 0);
    swr_free(&d->swr);
    av_channel_layout_uninit(&d->swr_layout);
    if (rv != 0) goto fail;
  }
  AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
  rv = swr_alloc_set_opts2(&d->swr, &mono, AV_SAMPLE_FMT_S16, DECODE_SAMPLE_RATE, &layout, f->format, f->sample_rate, 0,
                           NULL);
  if (rv < 0 || swr_init(d->swr) < 0) {
    rv = -EPROTO;
    goto fail;
  }
  d->swr_layout = layout;
  d->swr_format = f->format;
  d->swr_rate = f->sample_rate;
  return 0;

fail:
  swr_free(&d->swr);
  av_channel_layout_uninit(&layout);
  return rv;
}

/* Takes every frame the decoder has ready. */
static int drain_frames(struct decoder *d) {
  for (;;) {
    int rv = avcodec_receive_frame(d->codec, d->frame);
    if (rv == AVERROR(EAGAIN) || rv == AVERROR_EOF) return 0;
    if (rv < 0) return map_averror(rv);
    if (d->frame->decode_error_flags != 0 || (d->frame->flags & AV_FRAME_FLAG_CORRUPT)) rv = -EPROTO;
    if (rv == 0) rv = setup_resampler(d, d->frame);
    if (rv == 0) rv = convert(d, (const uint8_t **)d->frame->extended_data, d->frame->nb_samples);
    av_frame_unref(d->frame);
    if (rv != 0) return rv;
  }
}

static int open_input(struct decoder *d) {
  d->fmt = avformat_alloc_context();
  uint8_t *iobuf = av_malloc(DECODE_IO_BUFFER_BYTES);
  if (d->fmt == NULL || iobuf == NULL) {
    av_free(iobuf);
    return -ENOMEM;
  }
  d->io = avio_alloc_context(iobuf, DECODE_IO_BUFFER_BYTES, 0, &d->in, mem_read, NULL, mem_seek);
  if (d->io == NULL) {
    av_free(iobuf);
    return -ENOMEM;
  }
  d->fmt->pb = d->io;
  d->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
  d->fmt->max_streams = VTS_MAX_AUDIO_STREAMS;
  /* No demuxer may open anything beside our bytes (mp4 data references, playlists): no protocol is allowed. */
  d->fmt->format_whitelist = av_strdup(DECODE_FORMATS);
  d->fmt->codec_whitelist = av_strdup(DECODE_CODECS);
  d->fmt->protocol_whitelist = av_strdup("none");
  if (d->fmt->format_whitelist == NULL || d->fmt->codec_whitelist == NULL || d->fmt->protocol_whitelist == NULL)
    return -ENOMEM;

  int rv = avformat_open_input(&d->fmt, NULL, NULL, NULL);
  if (rv < 0) {
    /* avformat_open_input freed the context. A probed format outside the whitelist comes back as EINVAL. */
    d->fmt = NULL;
    return rv == AVERROR(EINVAL) ? -ENOTSUP : map_averror(rv);
  }
  if (strcmp(d->fmt->iformat->name, DECODE_FORMAT_MP4) != 0 && strcmp(d->fmt->iformat->name, DECODE_FORMAT_WEBM) != 0)
    return -ENOTSUP;
  rv = avformat_find_stream_info(d->fmt, NULL);
  if (rv < 0) return map_averror(rv);
  return 0;
}

static int open_codec(struct decoder *d) {
  const AVCodec *codec = NULL;
  int idx = av_find_best_stream(d->fmt, AVMEDIA_TYPE_AUDIO, -1, -1, &codec, 0);
  if (idx == AVERROR_DECODER_NOT_FOUND) return -ENOTSUP;
  if (idx < 0) return -EPROTO;
  if (codec->id != AV_CODEC_ID_AAC && codec->id != AV_CODEC_ID_OPUS && codec->id != AV_CODEC_ID_VORBIS) return -ENOTSUP;
  d->stream = idx;
  for (unsigned i = 0; i < d->fmt->nb_streams; i++) {
    if ((int)i != idx) d->fmt->streams[i]->discard = AVDISCARD_ALL;
  }
  d->codec = avcodec_alloc_context3(codec);
  if (d->codec == NULL) return -ENOMEM;
  int rv = avcodec_parameters_to_context(d->codec, d->fmt->streams[idx]->codecpar);
  if (rv < 0) return map_averror(rv);
  /* The fetcher runs one job on one core; frame threads would only add memory. */
  d->codec->thread_count = 1;
  d->codec->codec_whitelist = av_strdup(DECODE_CODECS);
  if (d->codec->codec_whitelist == NULL) return -ENOMEM;
  rv = avcodec_open2(d->codec, codec, NULL);
  if (rv < 0) return rv == AVERROR(EINVAL) ? -ENOTSUP : map_averror(rv);
  return 0;
}

/* The container's own idea of the duration in seconds, or -1 when it has none. */
static double declared_seconds(const AVFormatContext *fmt) {
  if (fmt->duration == AV_NOPTS_VALUE || fmt->duration <= 0) return -1;
  return (double)fmt->duration / AV_TIME_BASE;
}

static int decode_packets(struct decoder *d) {
  int rv;
  for (;;) {
    rv = av_read_frame(d->fmt, d->pkt);
    if (rv == AVERROR_EOF) break;
    if (rv < 0) return map_averror(rv);
    if (d->pkt->stream_index != d->stream) {
      av_packet_unref(d->pkt);
      continue;
    }
    if (d->pkt->flags & AV_PKT_FLAG_CORRUPT) rv = -EPROTO;
    if (rv == 0) {
      rv = avcodec_send_packet(d->codec, d->pkt);
      rv = rv < 0 ? map_averror(rv) : drain_frames(d);
    }
    av_packet_unref(d->pkt);
    if (rv != 0) return rv;
  }
  rv = avcodec_send_packet(d->codec, NULL);
  if (rv < 0) return map_averror(rv);
  rv = drain_frames(d);
  if (rv == 0 && d->swr != NULL) rv = convert(d, NULL, 0);
  return rv;
}

/*
 * What a failed decoding means for the job: audio longer than the cap is a video we do not transcribe (404); a
 * format refused, no memory or a corrupt file is a fault on our side of the job (500).
 */
static int decode_outcome(int rv, struct fetch_outcome *res) {
  if (rv == 0) return fetch_outcome_ok(res);
  if (rv == -EFBIG) return fetch_outcome_set(res, PROTO_NOT_AVAILABLE, PROTO_REASON_NOT_PLAYABLE, "audio_too_long");
  return fetch_outcome_set(res, PROTO_INTERNAL, PROTO_REASON_INTERNAL,
                           rv == -ENOTSUP  ? "audio_format_refused"
                           : rv == -ENOMEM ? "decode_nomem"
                                           : "audio_corrupt");
}

int decode_audio(const void *data, size_t len, size_t max_samples, struct decode_pcm *out, struct fetch_outcome *res) {
  struct decoder d = {.in = {.data = data, .len = len}, .max_samples = max_samples, .out = out, .stream = -1};
  int rv;
  out->len = 0;
  /* FFmpeg would print upstream-controlled text to stderr; our errors are values. */
  av_log_set_level(AV_LOG_QUIET);

  rv = open_input(&d);
  if (rv != 0) goto done;
  double declared = declared_seconds(d.fmt);
  if (declared > (double)max_samples / DECODE_SAMPLE_RATE) {
    rv = -EFBIG;
    goto done;
  }
  rv = open_codec(&d);
  if (rv != 0) goto done;
  d.pkt = av_packet_alloc();
  d.frame = av_frame_alloc();
  if (d.pkt == NULL || d.frame == NULL) {
    rv = -ENOMEM;
    goto done;
  }
  rv = decode_packets(&d);
  if (rv != 0) goto done;
  if (declared > 0) {
    double got = (double)out->len / DECODE_SAMPLE_RATE;
    double slack = declared * DECODE_TRUNCATION_SLACK_RATIO;
    if (slack < DECODE_TRUNCATION_SLACK_S) slack = DECODE_TRUNCATION_SLACK_S;
    if (got < declared - slack) rv = -EPROTO;
  }

done:
  av_frame_free(&d.frame);
  av_packet_free(&d.pkt);
  swr_free(&d.swr);
  av_channel_layout_uninit(&d.swr_layout);
  avcodec_free_context(&d.codec);
  avformat_close_input(&d.fmt);
  if (d.io != NULL) {
    av_freep(&d.io->buffer);
    avio_context_free(&d.io);
  }
  if (rv != 0) out->len = 0;
  return decode_outcome(rv, res);
}

void decode_pcm_free(struct decode_pcm *pcm) {
  free(pcm->samples);
  pcm->samples = NULL;
  pcm->len = pcm->cap = 0;
}
