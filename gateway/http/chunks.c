#include "gateway/http/chunks.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <yajl/yajl_gen.h>

#include "gateway/http/segments.h"

/* The characters segment i adds to a chunk's text: its own, and the space before it unless it is the first. */
static size_t added_chars(const struct segments_doc *doc, size_t i, size_t chars_so_far) {
  size_t n = segments_chars(segments_text(doc, i), doc->seg[i].text_len);
  return n == 0 ? 0 : n + (chars_so_far > 0 ? 1 : 0);
}

/*
 * The end (exclusive) of the chapter segment from starts in: the first later segment that starts at or after the next
 * chapter's start (cuts: the chapters' starts in ms, ascending), or doc->n.
 */
static size_t chapter_end(const struct segments_doc *doc, size_t from, const int64_t *cuts, size_t ncuts) {
  int64_t at = doc->seg[from].start_ms;
  size_t k = 0;
  while (k < ncuts && cuts[k] <= at) k++;
  if (k == ncuts) return doc->n;
  size_t end = from + 1;
  while (end < doc->n && doc->seg[end].start_ms < cuts[k]) end++;
  return end;
}

/* The end (exclusive) of the chunk that starts at from: at most chars characters, at least one segment, up to limit. */
static size_t chunk_end(const struct segments_doc *doc, size_t from, size_t chars, size_t limit) {
  size_t used = 0, end = from;
  while (end < limit) {
    size_t add = added_chars(doc, end, used);
    if (end > from && used + add > chars) break;
    used += add;
    end++;
  }
  return end;
}

/* The start of the chunk after [from, end): its last segments within overlap characters, never from itself. */
static size_t next_start(const struct segments_doc *doc, size_t from, size_t end, size_t overlap) {
  size_t k = end, used = 0;
  while (k - 1 > from) {
    size_t n = segments_chars(segments_text(doc, k - 1), doc->seg[k - 1].text_len);
    size_t add = n == 0 ? 0 : n + 1;
    if (used + add > overlap) break;
    used += add;
    k--;
  }
  return k;
}

static void gen_key(yajl_gen g, const char *k) { yajl_gen_string(g, (const unsigned char *)k, strlen(k)); }

static int gen_chunk(yajl_gen g, const struct segments_doc *doc, size_t index, size_t from, size_t end,
                     struct buf *text) {
  buf_reset(text);
  int rv = 0;
  for (size_t i = from; i < end && rv == 0; i++) {
    size_t len = doc->seg[i].text_len;
    if (len == 0) continue;
    if (text->len > 0) rv = buf_append(text, " ", 1);
    if (rv == 0) rv = buf_append(text, segments_text(doc, i), len);
  }
  if (rv != 0) return -ENOMEM;
  char endtime[32];
  int64_t end_ms = doc->seg[end - 1].end_ms;
  int n = snprintf(endtime, sizeof(endtime), "%" PRId64 ".%03d", end_ms / 1000, (int)(end_ms % 1000));
  yajl_gen_map_open(g);
  gen_key(g, "index");
  yajl_gen_integer(g, (long long)index);
  gen_key(g, "start");
  yajl_gen_number(g, doc->seg[from].start, strlen(doc->seg[from].start));
  gen_key(g, "end");
  yajl_gen_number(g, endtime, (size_t)n);
  gen_key(g, "first_segment");
  yajl_gen_integer(g, (long long)from);
  gen_key(g, "end_segment");
  yajl_gen_integer(g, (long long)end);
  gen_key(g, "text");
  yajl_gen_string(g, (const unsigned char *)(text->data != NULL ? text->data : ""), text->len);
  yajl_gen_map_close(g);
  return 0;
}

int chunks_render(const char *json, size_t len, size_t chars, size_t overlap, const int64_t *cuts, size_t ncuts,
                  struct buf *out) {
  struct segments_doc doc;
  int rv = segments_read(json, len, &doc);
  if (rv != 0) return rv;
  yajl_gen g = yajl_gen_alloc(NULL);
  if (g == NULL) {
    segments_free(&doc);
    return -ENOMEM;
  }
  yajl_gen_config(g, yajl_gen_validate_utf8, 1);
  struct buf text = BUF_INIT;
  yajl_gen_map_open(g);
  gen_key(g, "language");
  yajl_gen_string(g, (const unsigned char *)doc.language, strlen(doc.language));
  gen_key(g, "source");
  yajl_gen_string(g, (const unsigned char *)doc.source, strlen(doc.source));
  gen_key(g, "chunk_chars");
  yajl_gen_integer(g, (long long)chars);
  gen_key(g, "chunk_overlap");
  yajl_gen_integer(g, (long long)overlap);
  gen_key(g, "chunks");
  yajl_gen_array_open(g);
  size_t from = 0, index = 0;
  while (from < doc.n && rv == 0) {
    size_t limit = chapter_end(&doc, from, cuts, ncuts);
    size_t end = chunk_end(&doc, from, chars, limit);
    rv = gen_chunk(g, &doc, index++, from, end, &text);
    if (end >= doc.n) break;
    /* A chapter's first chunk overlaps nothing of the chapter before. */
    from = end == limit ? end : next_start(&doc, from, end, overlap);
  }
  yajl_gen_array_close(g);
  yajl_gen_map_close(g);
  const unsigned char *p;
  size_t n;
  if (rv != 0)
    ;
  else if (yajl_gen_get_buf(g, &p, &n) != yajl_gen_status_ok)
    rv = -EPROTO;
  else if (buf_append(out, p, n) != 0)
    rv = -ENOMEM;
  yajl_gen_free(g);
  buf_free(&text);
  segments_free(&doc);
  return rv;
}
