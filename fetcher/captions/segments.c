#include "fetcher/captions/segments.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"

int segment_list_push(struct segment_list *sl, char *text, double start, double duration) {
  if (sl->len >= VTS_MAX_SEGMENTS) {
    free(text);
    return -E2BIG;
  }
  if (sl->len == sl->cap) {
    size_t cap = sl->cap ? sl->cap * 2 : 64;
    struct segment *items = realloc(sl->items, cap * sizeof(*items));
    if (items == NULL) {
      free(text);
      return -ENOMEM;
    }
    sl->items = items;
    sl->cap = cap;
  }
  sl->items[sl->len++] = (struct segment){.text = text, .start = start, .duration = duration < 0 ? 0 : duration};
  return 0;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

int segment_list_append(struct segment_list *sl, const char *text, size_t len, double start, double duration) {
  while (len > 0 && is_space(text[0])) {
    text++;
    len--;
  }
  while (len > 0 && is_space(text[len - 1])) len--;
  if (len == 0) return 0;
  char *copy = strndup(text, len);
  if (copy == NULL) return -ENOMEM;
  return segment_list_push(sl, copy, start, duration);
}

static double word_end(const struct segment *w) { return w->start + w->duration; }

/* Appends words[first..last] as one segment: their texts joined with spaces, its times clamped. */
static int emit_run(struct segment_list *out, const struct segment_list *words, size_t first, size_t last,
                    double audio_s) {
  size_t len = 0;
  for (size_t i = first; i <= last; i++) len += strlen(words->items[i].text) + 1;
  char *text = malloc(len + 1);
  if (text == NULL) return -ENOMEM;
  size_t n = 0;
  for (size_t i = first; i <= last; i++) {
    size_t wlen = strlen(words->items[i].text);
    if (wlen == 0) continue;
    if (n > 0) text[n++] = ' ';
    memcpy(text + n, words->items[i].text, wlen);
    n += wlen;
  }
  text[n] = '\0';
  if (n == 0) {
    free(text);
    return 0;
  }
  double start = words->items[first].start, end = word_end(&words->items[last]);
  if (start < 0) start = 0;
  if (audio_s > 0 && end > audio_s) end = audio_s;
  if (audio_s > 0 && start > end) start = end;
  if (end - start > VTS_MAX_SPEECH_SEGMENT_S) end = start + VTS_MAX_SPEECH_SEGMENT_S;
  return segment_list_push(out, text, start, end - start);
}

static double pause_after(const struct segment_list *words, size_t k) {
  return words->items[k + 1].start - word_end(&words->items[k]);
}

/*
 * The word after which words[first..last] is cut: the longest pause, and among pauses as long (to the millisecond:
 * recognisers' times mean no more) the one nearest the middle, so that the pieces come out even.
 */
static size_t longest_pause(const struct segment_list *words, size_t first, size_t last) {
  double longest = pause_after(words, first);
  for (size_t k = first + 1; k < last; k++) {
    if (pause_after(words, k) > longest) longest = pause_after(words, k);
  }
  double middle = (words->items[first].start + word_end(&words->items[last])) / 2;
  size_t cut = first;
  double best_dist = -1;
  for (size_t k = first; k < last; k++) {
    if (pause_after(words, k) < longest - 0.0005) continue;
    double at = (word_end(&words->items[k]) + words->items[k + 1].start) / 2;
    double dist = at > middle ? at - middle : middle - at;
    if (best_dist < 0 || dist < best_dist) {
      best_dist = dist;
      cut = k;
    }
  }
  return cut;
}

/*
 * Cuts the run words[first..last] until every piece fits the cap, appending the pieces in time order. A stack of
 * pieces still to look at replaces recursion: a run cut at its edge every time would otherwise nest once per word.
 */
static int cut_run(struct segment_list *out, const struct segment_list *words, size_t first, size_t last,
                   double audio_s) {
  size_t cap = last - first + 1;
  size_t(*stack)[2] = malloc(cap * sizeof(*stack));
  if (stack == NULL) return -ENOMEM;
  size_t depth = 0;
  stack[depth][0] = first;
  stack[depth][1] = last;
  depth++;
  int rv = 0;
  while (rv == 0 && depth > 0) {
    depth--;
    size_t a = stack[depth][0], b = stack[depth][1];
    if (a == b || word_end(&words->items[b]) - words->items[a].start <= VTS_MAX_SPEECH_SEGMENT_S) {
      rv = emit_run(out, words, a, b, audio_s);
      continue;
    }
    size_t k = longest_pause(words, a, b);
    /* The later piece goes under the earlier one, so the earlier is looked at (and appended) first. */
    stack[depth][0] = k + 1;
    stack[depth][1] = b;
    stack[depth + 1][0] = a;
    stack[depth + 1][1] = k;
    depth += 2;
  }
  free(stack);
  return rv;
}

int segment_list_group_words(struct segment_list *out, const struct segment_list *words, double gap_s, double audio_s) {
  size_t first = 0;
  for (size_t i = 0; i < words->len; i++) {
    int last = i + 1 == words->len || words->items[i + 1].start - word_end(&words->items[i]) >= gap_s;
    if (!last) continue;
    int rv = cut_run(out, words, first, i, audio_s);
    if (rv != 0) return rv;
    first = i + 1;
  }
  return 0;
}

void segment_list_free(struct segment_list *sl) {
  for (size_t i = 0; i < sl->len; i++) free(sl->items[i].text);
  free(sl->items);
  memset(sl, 0, sizeof(*sl));
}
