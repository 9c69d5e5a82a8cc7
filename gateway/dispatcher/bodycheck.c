/*
 * The transcript check as a yajl callback parser: the shape is a small state machine over the parser's events, so a
 * body is checked in one pass without building a tree of it.
 */
#include "gateway/dispatcher/bodycheck.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "common/limits.h"

/* Where the parser is in the shape. */
enum level { L_TOP, L_OBJECT, L_SEGMENTS, L_SEGMENT, L_DONE };

/* The keys of each object, as bits: every one exactly once. */
enum { K_LANGUAGE = 1, K_SOURCE = 2, K_TEXT = 4, K_SEGMENTS = 8, K_ALL_TOP = 15 };
enum { S_TEXT = 1, S_START = 2, S_DURATION = 4, S_ALL = 7 };

struct shape {
  enum level level;
  unsigned top;     /* keys of the transcript object read so far */
  unsigned segment; /* keys of the segment being read */
  unsigned key;     /* the key whose value comes next */
};

static bool is(const unsigned char *s, size_t len, const char *want) {
  return len == strlen(want) && memcmp(s, want, len) == 0;
}

static int on_map_key(void *ctx, const unsigned char *s, size_t len) {
  struct shape *sh = ctx;
  unsigned k = 0;
  if (sh->level == L_OBJECT) {
    k = is(s, len, "language")   ? K_LANGUAGE
        : is(s, len, "source")   ? K_SOURCE
        : is(s, len, "text")     ? K_TEXT
        : is(s, len, "segments") ? K_SEGMENTS
                                 : 0;
  } else if (sh->level == L_SEGMENT) {
    k = is(s, len, "text") ? S_TEXT : is(s, len, "start") ? S_START : is(s, len, "duration") ? S_DURATION : 0;
  }
  unsigned *seen = sh->level == L_OBJECT ? &sh->top : &sh->segment;
  if (k == 0 || (*seen & k) != 0) return 0;
  *seen |= k;
  sh->key = k;
  return 1;
}

static int on_string(void *ctx, const unsigned char *s, size_t len) {
  struct shape *sh = ctx;
  if (sh->level == L_OBJECT && sh->key == K_SOURCE) return is(s, len, "captions") || is(s, len, "speech");
  if (sh->level == L_OBJECT) return sh->key == K_LANGUAGE || sh->key == K_TEXT;
  return sh->level == L_SEGMENT && sh->key == S_TEXT;
}

static int on_number(struct shape *sh) {
  return sh->level == L_SEGMENT && (sh->key == S_START || sh->key == S_DURATION);
}

static int on_integer(void *ctx, long long v) {
  (void)v;
  return on_number(ctx);
}

static int on_double(void *ctx, double v) {
  (void)v;
  return on_number(ctx);
}

/* Nowhere in the shape: yajl skips an event without a callback, so these refuse it. */
static int on_null(void *ctx) {
  (void)ctx;
  return 0;
}

static int on_boolean(void *ctx, int v) {
  (void)ctx;
  (void)v;
  return 0;
}

static int on_start_map(void *ctx) {
  struct shape *sh = ctx;
  if (sh->level == L_TOP) {
    sh->level = L_OBJECT;
    return 1;
  }
  if (sh->level != L_SEGMENTS) return 0;
  sh->level = L_SEGMENT;
  sh->segment = 0;
  return 1;
}

static int on_end_map(void *ctx) {
  struct shape *sh = ctx;
  if (sh->level == L_SEGMENT && sh->segment == S_ALL) {
    sh->level = L_SEGMENTS;
    return 1;
  }
  if (sh->level == L_OBJECT && sh->top == K_ALL_TOP) {
    sh->level = L_DONE;
    return 1;
  }
  return 0;
}

static int on_start_array(void *ctx) {
  struct shape *sh = ctx;
  if (sh->level != L_OBJECT || sh->key != K_SEGMENTS) return 0;
  sh->level = L_SEGMENTS;
  return 1;
}

static int on_end_array(void *ctx) {
  struct shape *sh = ctx;
  if (sh->level != L_SEGMENTS) return 0;
  sh->level = L_OBJECT;
  return 1;
}

static const yajl_callbacks callbacks = {
    .yajl_null = on_null,
    .yajl_boolean = on_boolean,
    .yajl_integer = on_integer,
    .yajl_double = on_double,
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_map_key,
    .yajl_end_map = on_end_map,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end_array,
};

int bodycheck_transcript(const char *body, size_t len, const char **why) {
  const char *reason = "not_a_transcript";
  int rv = -EINVAL;
  if (len > VTS_MAX_TRANSCRIPT_BYTES) {
    if (why != NULL) *why = "too_large";
    return -E2BIG;
  }
  struct shape sh = {.level = L_TOP};
  yajl_handle h = yajl_alloc(&callbacks, NULL, &sh);
  if (h == NULL) {
    if (why != NULL) *why = "no_memory";
    return -ENOMEM;
  }
  yajl_config(h, yajl_allow_comments, 0);
  yajl_config(h, yajl_dont_validate_strings, 0);
  yajl_config(h, yajl_allow_trailing_garbage, 0);
  yajl_config(h, yajl_allow_multiple_values, 0);
  yajl_config(h, yajl_allow_partial_values, 0);
  yajl_status st = yajl_parse(h, (const unsigned char *)body, len);
  if (st == yajl_status_ok) st = yajl_complete_parse(h);
  if (st == yajl_status_ok && sh.level == L_DONE)
    rv = 0;
  else if (st == yajl_status_error)
    reason = "not_json";
  yajl_free(h);
  if (why != NULL) *why = rv == 0 ? "" : reason;
  return rv;
}
