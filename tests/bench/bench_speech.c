/*
 * Real-time factor and peak memory of the embedded speech engine on one core.
 *
 *   bench_speech [SECONDS]   (default 60)
 *
 * The audio is pocketsphinx-testdata's read speech (five LibriVox sentences and "go forward ten meters") repeated
 * with short pauses until it lasts SECONDS. RTF is CPU time over audio time (target <= 0.25); peak RSS is the
 * process's maximum resident set, model and audio included.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "common/util.h"
#include "fetcher/speech/decode.h"
#include "fetcher/speech/engine.h"
#include "proto/proto.h"
#include "tests/unit/test_speech_util.h"

#define BENCH_PAUSE_S 0.6

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long peak_rss_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* Peak virtual size in KiB from /proc (what RLIMIT_AS limits), or -1. */
static long peak_vm_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (sscanf(line, "VmPeak: %ld kB", &kib) == 1) break;
  }
  fclose(f);
  return kib;
}

/* One round of the test speech, 16 kHz s16le mono, appended to raw. */
static int append_round(struct buf *raw) {
  static const char *wavs[] = {
      TH_TESTDATA "/librivox/sense_and_sensibility_01_austen_64kb-0870.wav",
      TH_TESTDATA "/librivox/sense_and_sensibility_01_austen_64kb-0880.wav",
      TH_TESTDATA "/librivox/sense_and_sensibility_01_austen_64kb-0890.wav",
      TH_TESTDATA "/librivox/sense_and_sensibility_01_austen_64kb-0920.wav",
      TH_TESTDATA "/librivox/sense_and_sensibility_01_austen_64kb-0930.wav",
  };
  for (size_t i = 0; i < sizeof(wavs) / sizeof(wavs[0]); i++) {
    int rv = th_raw_append_wav(raw, wavs[i]);
    if (rv == 0) rv = th_raw_silence(raw, BENCH_PAUSE_S);
    if (rv != 0) return rv;
  }
  struct buf gf = BUF_INIT;
  int rv = th_read_file(TH_GOFORWARD, &gf);
  if (rv == 0) rv = buf_append(raw, gf.data, gf.len);
  if (rv == 0) rv = th_raw_silence(raw, BENCH_PAUSE_S);
  buf_free(&gf);
  return rv;
}

int main(int argc, char **argv) {
  double want = 60;
  if (argc > 1) {
    char *end = NULL;
    want = strtod(argv[1], &end);
    if (end == argv[1] || *end != '\0' || want <= 0 || want > 86400) {
      fprintf(stderr, "usage: %s [SECONDS]\n", argv[0]);
      return 2;
    }
  }
  /* One core, as a fetcher runs one job. */
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  sched_setaffinity(0, sizeof(set), &set);

  struct buf raw = BUF_INIT;
  while ((double)raw.len / 2 / DECODE_SAMPLE_RATE < want) {
    if (append_round(&raw) != 0) {
      fprintf(stderr, "bench_speech: test speech missing (package pocketsphinx-testdata)\n");
      buf_free(&raw);
      return 1;
    }
  }
  struct speech_audio audio = {.pcm = (const int16_t *)(const void *)raw.data, .nsamples = raw.len / 2};
  double audio_s = (double)audio.nsamples / DECODE_SAMPLE_RATE;
  long rss_before = peak_rss_kib();

  struct segment_list segs = {0};
  char lang[16] = "";
  struct fetch_outcome res;
  double c0 = cpu_seconds();
  uint64_t w0 = util_now_ms();
  static struct vts_config cfg; /* all empty: the engine's default model */
  struct speech_request req = {.cfg = &cfg, .audio = &audio, .deadline_ms_abs = w0 + 24ULL * 3600 * 1000};
  int outcome = speech_engine_pocketsphinx.recognise(&req, &segs, lang, &res);
  double cpu = cpu_seconds() - c0;
  double wall = (double)(util_now_ms() - w0) / 1000;
  if (outcome != PROTO_OK) {
    fprintf(stderr, "bench_speech: recognition failed: %d (%s)\n", outcome, res.detail);
    buf_free(&raw);
    return 1;
  }
  printf(
      "engine=pocketsphinx audio_s=%.1f cpu_s=%.2f wall_s=%.2f rtf_cpu=%.3f rtf_wall=%.3f segments=%zu "
      "peak_rss_mb=%.1f rss_before_recognition_mb=%.1f peak_vm_mb=%.1f\n",
      audio_s, cpu, wall, cpu / audio_s, wall / audio_s, segs.len, (double)peak_rss_kib() / 1024,
      (double)rss_before / 1024, (double)peak_vm_kib() / 1024);
  th_free_segments(&segs);
  buf_free(&raw);
  return 0;
}
