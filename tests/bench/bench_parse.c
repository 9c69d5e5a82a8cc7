/*
 * Times the fetcher's caption path on a generated 1,500-segment json3 body: captions_parse + transcript_serialize,
 * and prints the median milliseconds per transcript (target: 5 ms or less). Usage: bench_parse [iterations].
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "tests/bench/bench_timing.h"
#include "common/util.h"
#include "fetcher/captions/captions.h"
#include "fetcher/captions/transcript.h"

#define SEGMENTS 1500

/* A body in the shape of an ASR json3 track: a window event, word segs with offsets, line-break appends. */
static int make_body(struct buf *b) {
  static const char *const words[] = {"so",    "today", "we're", "going", "to",    "talk", "about", "the",
                                      "quick", "brown", "fox",   "that",  "jumps", "over", "lazy",  "dogs"};
  int rv = buf_puts(b,
                    "{\"wireMagic\":\"pb3\",\"pens\":[{}],\"wsWinStyles\":[{}],\"wpWinPositions\":[{}],\"events\":["
                    "{\"tStartMs\":0,\"dDurationMs\":1800000,\"id\":1,\"wpWinPosId\":1,\"wsWinStyleId\":1}");
  for (size_t i = 0; i < SEGMENTS && rv == 0; i++) {
    rv =
        buf_printf(b, ",{\"tStartMs\":%zu,\"dDurationMs\":%zu,\"wWinId\":1,\"segs\":[{\"utf8\":\"%s\",\"acAsrConf\":0}",
                   i * 1200, 2400 + i % 7, words[i % 16]);
    for (size_t w = 1; w < 6 && rv == 0; w++)
      rv = buf_printf(b, ",{\"utf8\":\" %s\",\"tOffsetMs\":%zu,\"acAsrConf\":0}", words[(i + w * 3) % 16], w * 200);
    if (rv == 0)
      rv = buf_printf(
          b, "]},{\"tStartMs\":%zu,\"dDurationMs\":1200,\"wWinId\":1,\"aAppend\":1,\"segs\":[{\"utf8\":\"\\n\"}]}",
          i * 1200 + 1190);
  }
  if (rv == 0) rv = buf_puts(b, "]}");
  return rv;
}

int main(int argc, char **argv) {
  int64_t iterations;
  if (bench_iterations(argc, argv, &iterations) != 0) return 2;
  struct buf body = BUF_INIT, out = BUF_INIT;
  double *times = calloc((size_t)iterations, sizeof(*times));
  double *parse_times = calloc((size_t)iterations, sizeof(*parse_times));
  if (!times || !parse_times || make_body(&body) < 0) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  for (int64_t i = 0; i < iterations; i++) {
    struct segment_list sl;
    buf_reset(&out);
    double t0 = bench_now_ms();
    int rv = captions_parse(body.data, body.len, &sl);
    parse_times[i] = bench_now_ms() - t0;
    if (rv == 0) rv = transcript_serialize(&sl, "en", "captions", &out);
    times[i] = bench_now_ms() - t0;
    size_t n = sl.len;
    segment_list_free(&sl);
    if (rv < 0 || n != SEGMENTS) {
      fprintf(stderr, "parse failed: %s, %zu segments\n", strerror(-rv), n);
      return 1;
    }
  }
  qsort(times, (size_t)iterations, sizeof(*times), bench_cmp_double);
  qsort(parse_times, (size_t)iterations, sizeof(*parse_times), bench_cmp_double);
  printf("bench_parse: %d segments, json3 body %zu bytes, transcript %zu bytes, %lld iterations\n", SEGMENTS, body.len,
         out.len, (long long)iterations);
  printf("median %.3f ms per transcript (min %.3f, p90 %.3f; target <= 5 ms)\n", times[iterations / 2], times[0],
         times[iterations * 9 / 10]);
  printf("of which captions_parse %.3f ms (median)\n", parse_times[iterations / 2]);
  free(parse_times);
  free(times);
  buf_free(&body);
  buf_free(&out);
  return 0;
}
