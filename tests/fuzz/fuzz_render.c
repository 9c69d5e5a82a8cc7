/*
 * Fuzzes the transcript formats: any body is rendered or refused in every format, never crashes, and a refusal
 * leaves the output as it was. A rendered WebVTT starts with its header line; SubRip and WebVTT cues never hold an
 * empty line inside, so every blank line ends a cue.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/http/render.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const enum render_format formats[] = {RENDER_TEXT, RENDER_SRT, RENDER_VTT};
  for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
    struct buf b = BUF_INIT;
    if (buf_puts(&b, "x") != 0) abort();
    int rv = render_transcript(formats[i], (const char *)data, size, &b);
    if (rv != 0 && (b.len != 1 || b.data[0] != 'x')) abort();
    if (rv == 0 && formats[i] == RENDER_VTT && strncmp(b.data + 1, "WEBVTT\n\n", 8) != 0) abort();
    if (rv == 0 && formats[i] != RENDER_TEXT) {
      /* After the header, cues are "times\ntext...\n\n": a blank line is always followed by a cue or the end. */
      const char *p = b.data + 1 + (formats[i] == RENDER_VTT ? 8 : 0);
      const char *end = b.data + b.len;
      while (p < end) {
        const char *blank = strstr(p, "\n\n");
        if (blank == NULL) abort();
        if (blank + 2 < end && blank[2] == '\n') abort();
        p = blank + 2;
      }
    }
    buf_free(&b);
  }
  return 0;
}
