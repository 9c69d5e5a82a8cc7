/*
 * Times the worker's transcript formats on the body of a 1,500-segment transcript (as transcript_serialize writes
 * it): render_transcript to text, SubRip and WebVTT, and prints the median milliseconds per render of each.
 * Usage: bench_render [iterations].
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "tests/bench/bench_timing.h"
#include "common/util.h"
#include "fetcher/captions/segments.h"
#include "fetcher/captions/transcript.h"
#include "gateway/http/render.h"

#define SEGMENTS 1500

/* 1,500 segments of six words, 1.2 s apart and 2.4 s long, as an ASR track gives them. */
static int make_body(struct buf *out) {
  struct segment_list sl = {0};
  int rv = 0;
  for (size_t i = 0; i < SEGMENTS && rv == 0; i++) {
    char text[64];
    int n = snprintf(text, sizeof(text), "so today we're going to talk %zu", i);
    rv = segment_list_append(&sl, text, (size_t)n, (double)i * 1.2, 2.4 + (double)(i % 7) / 1000);
  }
  if (rv == 0) rv = transcript_serialize(&sl, "en", "captions", out);
  segment_list_free(&sl);
  return rv;
}

int main(int argc, char **argv) {
  int64_t iterations;
  if (bench_iterations(argc, argv, &iterations) != 0) return 2;
  struct buf body = BUF_INIT;
  double *times = calloc((size_t)iterations, sizeof(*times));
  if (times == NULL || make_body(&body) != 0) {
    fprintf(stderr, "could not make the body\n");
    return 1;
  }
  static const struct {
    const char *name;
    enum render_format format;
  } formats[] = {{"text", RENDER_TEXT}, {"srt", RENDER_SRT}, {"vtt", RENDER_VTT}};
  for (size_t f = 0; f < sizeof(formats) / sizeof(formats[0]); f++) {
    size_t out_len = 0;
    for (int64_t i = 0; i < iterations; i++) {
      struct buf out = BUF_INIT;
      double t0 = bench_now_ms();
      int rv = render_transcript(formats[f].format, body.data, body.len, &out);
      times[i] = bench_now_ms() - t0;
      out_len = out.len;
      buf_free(&out);
      if (rv != 0) {
        fprintf(stderr, "%s: render failed (%d)\n", formats[f].name, rv);
        return 1;
      }
    }
    qsort(times, (size_t)iterations, sizeof(*times), bench_cmp_double);
    printf("render %s, %d segments, %zu -> %zu bytes: median %.3f ms (min %.3f, p90 %.3f) over %lld renders\n",
           formats[f].name, SEGMENTS, body.len, out_len, times[iterations / 2], times[0], times[iterations * 9 / 10],
           (long long)iterations);
  }
  free(times);
  buf_free(&body);
  return 0;
}
