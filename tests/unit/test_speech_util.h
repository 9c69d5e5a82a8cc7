/*
 * Helpers shared by the speech tests: test audio made at test time with ffmpeg from pocketsphinx-testdata's read
 * speech, the fake speech server (tests/fake_speech/fake_transcribe.py) on a free 127.0.0.1 port, word error rate.
 * Included by test_decode.c and test_speech*.c; everything is static inline so each test takes what it uses.
 */
#ifndef VTS_TEST_SPEECH_UTIL_H
#define VTS_TEST_SPEECH_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/buf.h"
#include "fetcher/captions/captions.h"
#include "tests/unit/test_skip.h"

#define TH_TESTDATA "/usr/share/pocketsphinx/test/data"
#define TH_GOFORWARD TH_TESTDATA "/goforward.raw"
#define TH_GOFORWARD_SAMPLES 44580 /* 89160 bytes of 16 kHz s16le mono */
#define TH_GOFORWARD_TEXT "go forward ten meters"
#define TH_FAKE_SERVER_KEY "test-key"

extern char **environ;

/* Skips the current cmocka test when the group setup could not prepare what it needs (it said why). */
#define TH_SKIP_UNLESS(ready)                                                                              \
  do {                                                                                                     \
    if (!(ready)) TEST_SKIP("%s", "the group setup could not prepare what this test needs (it said why)"); \
  } while (0)

/* Runs argv (searched in PATH) with stdout and stderr to /dev/null. Returns its exit status, or -1. */
static inline int th_run(char *const argv[]) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int rv = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rv != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

/* Whether name runs; version_flag is its harmless option ("-version" for ffmpeg, "--version" for python3). */
static inline int th_have_program(const char *name, const char *version_flag) {
  char *argv[] = {(char *)name, (char *)version_flag, NULL};
  return th_run(argv) == 0;
}

/* Whether ffmpeg and the pocketsphinx test data are installed; prints why not. */
static inline int th_have_audio_tools(void) {
  if (!th_have_program("ffmpeg", "-version")) {
    fprintf(stderr, "SKIP: ffmpeg is not installed\n");
    return 0;
  }
  if (access(TH_GOFORWARD, R_OK) != 0) {
    fprintf(stderr, "SKIP: %s missing (package pocketsphinx-testdata)\n", TH_GOFORWARD);
    return 0;
  }
  return 1;
}

/* Makes a fresh temporary directory into dir (at least 64 bytes). Returns 0, or -errno. */
static inline int th_tmpdir(char *dir, size_t len) {
  snprintf(dir, len, "/tmp/vts-speech-test-XXXXXX");
  return mkdtemp(dir) != NULL ? 0 : -errno;
}

/* Removes the files of dir and dir itself (it holds no subdirectories). */
static inline void th_tmpdir_remove(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) return;
  for (;;) {
    struct dirent *e = readdir(d);
    if (e == NULL) break;
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

/* Reads a whole file into out (replacing its content). Returns 0, or -errno. */
static inline int th_read_file(const char *path, struct buf *out) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return -errno;
  buf_reset(out);
  char chunk[65536];
  int rv = 0;
  for (;;) {
    size_t n = fread(chunk, 1, sizeof(chunk), f);
    if (n == 0) break;
    rv = buf_append(out, chunk, n);
    if (rv != 0) break;
  }
  if (rv == 0 && ferror(f)) rv = -EIO;
  fclose(f);
  return rv;
}

static inline int th_write_file(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (f == NULL) return -errno;
  size_t n = fwrite(data, 1, len, f);
  return fclose(f) == 0 && n == len ? 0 : -EIO;
}

/*
 * Encodes 16 kHz s16le mono raw audio with ffmpeg into out_path, with the output options that follow (a NULL-ended
 * list, at most 20), e.g. "-c:a", "aac", "-ar", "44100", NULL. Returns ffmpeg's exit status.
 */
static inline int th_encode(const char *raw_path, const char *out_path, ...) {
  char *argv[40];
  int i = 0;
  const char *head[] = {"ffmpeg", "-nostdin", "-y",  "-loglevel", "error", "-f",    "s16le",
                        "-ar",    "16000",    "-ac", "1",         "-i",    raw_path};
  for (size_t k = 0; k < sizeof(head) / sizeof(head[0]); k++) argv[i++] = (char *)head[k];
  va_list ap;
  va_start(ap, out_path);
  for (const char *opt = va_arg(ap, const char *); opt != NULL && i < 36; opt = va_arg(ap, const char *))
    argv[i++] = (char *)opt;
  va_end(ap);
  argv[i++] = (char *)out_path;
  argv[i] = NULL;
  return th_run(argv);
}

/* The platform's two audio shapes: AAC 44.1 kHz stereo in mp4, Opus 48 kHz in webm. */
#define TH_AAC "-c:a", "aac", "-b:a", "96k", "-ar", "44100", "-ac", "2"
#define TH_OPUS "-c:a", "libopus", "-b:a", "48k", "-ar", "48000", "-ac", "1"

/* Appends seconds of silence (16 kHz s16le mono) to a buffer of raw samples. */
static inline int th_raw_silence(struct buf *raw, double seconds) {
  size_t n = (size_t)(seconds * 16000) * 2;
  int rv = buf_reserve(raw, n);
  if (rv != 0) return rv;
  memset(raw->data + raw->len, 0, n);
  raw->len += n;
  return 0;
}

/* Appends the samples of a 16 kHz mono 16-bit WAV file (the pocketsphinx test data) to raw. */
static inline int th_raw_append_wav(struct buf *raw, const char *path) {
  struct buf f = BUF_INIT;
  int rv = th_read_file(path, &f);
  if (rv == 0 && (f.len < 44 || memcmp(f.data, "RIFF", 4) != 0)) rv = -EPROTO;
  size_t pos = 12;
  while (rv == 0) {
    if (pos + 8 > f.len) {
      rv = -EPROTO;
      break;
    }
    uint32_t sz = (uint32_t)(unsigned char)f.data[pos + 4] | (uint32_t)(unsigned char)f.data[pos + 5] << 8 |
                  (uint32_t)(unsigned char)f.data[pos + 6] << 16 | (uint32_t)(unsigned char)f.data[pos + 7] << 24;
    if (memcmp(f.data + pos, "data", 4) == 0) {
      if (sz > f.len - pos - 8) sz = (uint32_t)(f.len - pos - 8);
      rv = buf_append(raw, f.data + pos + 8, sz);
      break;
    }
    pos += 8 + sz + (sz & 1);
  }
  buf_free(&f);
  return rv;
}

/* Lowercases words and drops everything but letters, digits, apostrophes and single spaces. */
static inline void th_normalise(const char *in, char *out, size_t outlen) {
  size_t o = 0;
  int space = 1;
  for (const char *p = in; *p != '\0' && o + 1 < outlen; p++) {
    char c = *p;
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '\'') {
      out[o++] = c;
      space = 0;
    } else if (!space) {
      out[o++] = ' ';
      space = 1;
    }
  }
  while (o > 0 && out[o - 1] == ' ') o--;
  out[o] = '\0';
}

#define TH_MAX_WORDS 512

static inline size_t th_split_words(char *s, char *words[TH_MAX_WORDS]) {
  /* s is normalised: words separated by single spaces. */
  size_t n = 0;
  char *p = s;
  while (*p != '\0' && n < TH_MAX_WORDS) {
    words[n++] = p;
    char *sp = strchr(p, ' ');
    if (sp == NULL) break;
    *sp = '\0';
    p = sp + 1;
  }
  return n;
}

/* Word error rate of hyp against ref: (substitutions + deletions + insertions) / words of ref. */
static inline double th_wer(const char *ref, const char *hyp) {
  static char rbuf[8192], hbuf[8192];
  static char *rw[TH_MAX_WORDS], *hw[TH_MAX_WORDS];
  static unsigned dist[TH_MAX_WORDS + 1][TH_MAX_WORDS + 1];
  th_normalise(ref, rbuf, sizeof(rbuf));
  th_normalise(hyp, hbuf, sizeof(hbuf));
  size_t nr = th_split_words(rbuf, rw), nh = th_split_words(hbuf, hw);
  if (nr == 0) return nh == 0 ? 0.0 : 1.0;
  for (size_t i = 0; i <= nr; i++) dist[i][0] = (unsigned)i;
  for (size_t j = 0; j <= nh; j++) dist[0][j] = (unsigned)j;
  for (size_t i = 1; i <= nr; i++) {
    for (size_t j = 1; j <= nh; j++) {
      unsigned sub = dist[i - 1][j - 1] + (strcmp(rw[i - 1], hw[j - 1]) != 0);
      unsigned del = dist[i - 1][j] + 1, ins = dist[i][j - 1] + 1;
      unsigned best = sub < del ? sub : del;
      dist[i][j] = best < ins ? best : ins;
    }
  }
  return (double)dist[nr][nh] / (double)nr;
}

/* The segments' texts joined by spaces, into out. */
static inline void th_join_segments(const struct segment_list *sl, struct buf *out) {
  buf_reset(out);
  for (size_t i = 0; i < sl->len; i++) {
    if (i > 0) buf_puts(out, " ");
    buf_puts(out, sl->items[i].text);
  }
  if (out->data == NULL) buf_puts(out, "");
}

/* Frees segments the speech module produced (the captions module's segment_list_free may still be a stand-in). */
static inline void th_free_segments(struct segment_list *sl) {
  for (size_t i = 0; i < sl->len; i++) free(sl->items[i].text);
  free(sl->items);
  memset(sl, 0, sizeof(*sl));
}

struct th_server {
  pid_t pid;
  int port;
  int stdin_fd; /* the server exits when this closes */
};

/*
 * Starts tests/fake_speech/fake_transcribe.py (found from this header's own path) with python3 on a free
 * 127.0.0.1 port and waits for its "READY <port>" line. Returns 0, or -1 (with a message) when python3 or the
 * script is missing.
 */
static inline int th_server_start(struct th_server *s, const char *audio_dir) {
  char script[1024];
  snprintf(script, sizeof(script), "%s", __FILE__);
  char *slash = strrchr(script, '/');
  if (slash == NULL) return -1;
  snprintf(slash, sizeof(script) - (size_t)(slash - script), "/../fake_speech/fake_transcribe.py");
  if (access(script, R_OK) != 0 || !th_have_program("python3", "--version")) {
    fprintf(stderr, "SKIP: python3 or %s missing\n", script);
    return -1;
  }
  int out[2], in[2];
  if (pipe(out) != 0) return -1;
  if (pipe(in) != 0) {
    close(out[0]);
    close(out[1]);
    return -1;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    /* Die with the test even if it crashes before stopping us. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[0]);
    close(in[1]);
    close(out[0]);
    close(out[1]);
    char *argv[] = {"python3",          script,        "--key",
                    TH_FAKE_SERVER_KEY, "--audio-dir", (char *)(audio_dir ? audio_dir : ""),
                    "--slow-seconds",   "3",           NULL};
    execvp("python3", argv);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  FILE *f = fdopen(out[0], "r");
  char line[64] = "";
  int port = 0;
  if (f == NULL || fgets(line, sizeof(line), f) == NULL || sscanf(line, "READY %d", &port) != 1 || port <= 0) {
    if (f != NULL) fclose(f);
    close(in[1]);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    fprintf(stderr, "fake speech server did not start\n");
    return -1;
  }
  fclose(f);
  s->pid = pid;
  s->port = port;
  s->stdin_fd = in[1];
  return 0;
}

/*
 * cmocka group fixtures for programs whose tests share one fake server without audio files: th_server_ready tells
 * whether it started (tests skip otherwise).
 */
static struct th_server th_shared_server;
static int th_server_ready;

static inline void th_server_stop(struct th_server *s);

static inline int th_shared_server_setup(void **state) {
  (void)state;
  if (th_server_start(&th_shared_server, NULL) == 0) th_server_ready = 1;
  return 0;
}

static inline int th_shared_server_teardown(void **state) {
  (void)state;
  th_server_stop(&th_shared_server);
  return 0;
}

static inline void th_server_stop(struct th_server *s) {
  if (s->pid <= 0) return;
  close(s->stdin_fd);
  kill(s->pid, SIGTERM);
  waitpid(s->pid, NULL, 0);
  s->pid = 0;
}

#endif
