#include "proto/tracks.h"

#include <string.h>
#include <strings.h>

/* A comma between the items of a list value, as sent (",") or percent-encoded ("%2C"): its length, else 0. */
static size_t list_comma(const char *s, size_t left) {
  if (left >= 1 && s[0] == ',') return 1;
  if (left >= 3 && s[0] == '%' && s[1] == '2' && (s[2] == 'C' || s[2] == 'c')) return 3;
  return 0;
}

int tracks_url_wants_po_token(const char *url) {
  /* The query only: a fragment (and anything in it that looks like a parameter) is no part of what is sent. */
  const char *end = url + strcspn(url, "#");
  const char *q = memchr(url, '?', (size_t)(end - url));
  while (q && q < end) {
    q++;
    if (strncmp(q, "exp=", 4) == 0) {
      const char *v = q + 4;
      size_t len = strcspn(v, "&#"), i = 0;
      while (i < len) {
        size_t n = 0;
        while (i + n < len && list_comma(v + i + n, len - i - n) == 0) n++;
        if (n == 3 && (memcmp(v + i, "xpe", 3) == 0 || memcmp(v + i, "xpv", 3) == 0)) return 1;
        i += n;
        if (i < len) i += list_comma(v + i, len - i);
      }
    }
    q = memchr(q, '&', (size_t)(end - q));
  }
  return 0;
}

static size_t base_len(const char *lang) { return strcspn(lang, "-_"); }

static int same_base(const char *a, const char *b) {
  size_t n = base_len(a);
  return n == base_len(b) && strncasecmp(a, b, n) == 0;
}

/* The length of lang without TRACKS_ASR_SUFFIX when it ends with it, else 0. */
static size_t asr_spelling(const char *lang) {
  size_t len = strlen(lang), sl = sizeof(TRACKS_ASR_SUFFIX) - 1;
  return len > sl && strcasecmp(lang + len - sl, TRACKS_ASR_SUFFIX) == 0 ? len - sl : 0;
}

int tracks_choose(tracks_get_fn get, const void *ctx, size_t n, int default_track, const char *lang) {
  const char *tlang;
  int asr, po;
  int best = -1, best_rank = 4, best_bare = 0;
  size_t code = lang != NULL ? asr_spelling(lang) : 0;
  if (code > 0) {
    for (size_t i = 0; i < n; i++) {
      get(ctx, i, &tlang, &asr, &po);
      if (!po && asr && strlen(tlang) == code && strncasecmp(tlang, lang, code) == 0) return (int)i;
    }
    char bare[32];
    if (code >= sizeof(bare)) return -1;
    memcpy(bare, lang, code);
    bare[code] = '\0';
    return tracks_choose(get, ctx, n, default_track, bare);
  }
  if (lang && lang[0]) {
    /*
     * Ranks, lower is better: exact manual, exact asr, same base language manual, then asr; among the base-language
     * matches the bare base ("pt" for "pt-BR") comes before a sibling ("pt-PT") through the order of the loop below.
     */
    for (size_t i = 0; i < n; i++) {
      get(ctx, i, &tlang, &asr, &po);
      if (po) continue;
      int rank;
      if (strcasecmp(tlang, lang) == 0)
        rank = asr ? 1 : 0;
      else if (same_base(tlang, lang))
        rank = asr ? 3 : 2;
      else
        continue;
      int bare = tlang[base_len(tlang)] == '\0';
      if (rank < best_rank || (rank == best_rank && rank >= 2 && bare && !best_bare)) {
        best = (int)i;
        best_rank = rank;
        best_bare = bare;
      }
    }
    if (best >= 0) return best;
  }
  if (default_track >= 0 && (size_t)default_track < n) {
    get(ctx, (size_t)default_track, &tlang, &asr, &po);
    if (!po) return default_track;
  }
  for (size_t i = 0; i < n; i++) {
    get(ctx, i, &tlang, &asr, &po);
    if (!po && !asr) return (int)i;
  }
  for (size_t i = 0; i < n; i++) {
    get(ctx, i, &tlang, &asr, &po);
    if (!po) return (int)i;
  }
  return -1;
}
