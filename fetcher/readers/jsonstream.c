/* Bounded streaming JSON reader (see jsonstream.h). */
#include "fetcher/readers/jsonstream.h"

#include <errno.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "common/limits.h"

struct frame {
  int node;  /* JSONSTREAM_SKIP for a container nobody wants */
  int field; /* objects: the field id of the pending key; arrays: JSONSTREAM_ITEM */
};

struct stream {
  const struct jsonstream_ops *ops;
  void *ctx;
  int err;
  size_t depth; /* containers open; frames[depth - 1] is the innermost */
  struct frame frames[VTS_MAX_JSON_DEPTH];
};

/* The innermost frame, or NULL before the top-level object opened. */
static struct frame *top(struct stream *st) { return st->depth ? &st->frames[st->depth - 1] : NULL; }

static int fail(struct stream *st, int err) {
  st->err = err;
  return 0; /* yajl: cancel */
}

static int on_scalar(struct stream *st, enum jsonstream_kind kind, const char *s, size_t len) {
  struct frame *f = top(st);
  if (!f) return fail(st, -EPROTO); /* a top-level scalar is not an object */
  if (f->node == JSONSTREAM_SKIP || f->field == 0) return 1;
  int rv = st->ops->scalar(st->ctx, f->node, f->field, kind, s, len);
  return rv < 0 ? fail(st, rv) : 1;
}

static int on_null(void *ctx) { return on_scalar(ctx, JSONSTREAM_NULL, "null", 4); }
static int on_bool(void *ctx, int b) { return on_scalar(ctx, JSONSTREAM_BOOL, b ? "true" : "false", b ? 4 : 5); }
static int on_number(void *ctx, const char *s, size_t len) { return on_scalar(ctx, JSONSTREAM_NUMBER, s, len); }
static int on_string(void *ctx, const unsigned char *s, size_t len) {
  return on_scalar(ctx, JSONSTREAM_STRING, (const char *)s, len);
}

static int on_open(struct stream *st, int is_array) {
  struct frame *f = top(st);
  int node = JSONSTREAM_SKIP;
  if (!f) {
    if (is_array) return fail(st, -EPROTO);
    node = JSONSTREAM_ROOT;
  } else if (f->node != JSONSTREAM_SKIP && f->field != 0) {
    node = st->ops->open(st->ctx, f->node, f->field, is_array);
    if (node < 0) return fail(st, node);
  }
  /* The cap is checked before yajl goes deeper, so a hostile document costs at most this many frames. */
  if (st->depth >= VTS_MAX_JSON_DEPTH) return fail(st, -EPROTO);
  st->frames[st->depth].node = node;
  st->frames[st->depth].field = is_array ? JSONSTREAM_ITEM : 0;
  st->depth++;
  return 1;
}

static int on_close(struct stream *st) {
  struct frame *f = top(st);
  if (!f) return fail(st, -EPROTO);
  int node = f->node;
  st->depth--;
  if (node != JSONSTREAM_SKIP) {
    int rv = st->ops->close(st->ctx, node);
    if (rv < 0) return fail(st, rv);
  }
  /* A value of an object field is complete: the next value needs its own key. */
  f = top(st);
  if (f && f->field != JSONSTREAM_ITEM) f->field = 0;
  return 1;
}

static int on_start_map(void *ctx) { return on_open(ctx, 0); }
static int on_start_array(void *ctx) { return on_open(ctx, 1); }
static int on_end(void *ctx) { return on_close(ctx); }

static int on_key(void *ctx, const unsigned char *key, size_t len) {
  struct stream *st = ctx;
  struct frame *f = top(st);
  if (f->node == JSONSTREAM_SKIP) return 1;
  int field = st->ops->key(st->ctx, f->node, (const char *)key, len);
  if (field < 0) return fail(st, field);
  f->field = field;
  return 1;
}

static const yajl_callbacks callbacks = {
    .yajl_null = on_null,
    .yajl_boolean = on_bool,
    .yajl_number = on_number, /* raw text: no overflow errors for numbers we never read */
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_key,
    .yajl_end_map = on_end,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end,
};

int jsonstream_parse(const char *body, size_t len, int validate_utf8, const struct jsonstream_ops *ops, void *ctx) {
  if (len == 0 || len > VTS_MAX_UPSTREAM_BODY_BYTES) return -EPROTO;
  struct stream st = {.ops = ops, .ctx = ctx};
  yajl_handle h = yajl_alloc(&callbacks, NULL, &st);
  if (!h) return -ENOMEM;
  /* Explicit although these are yajl's defaults: the contract must not depend on a library default. */
  yajl_config(h, yajl_allow_comments, 0);
  yajl_config(h, yajl_allow_trailing_garbage, 0);
  yajl_config(h, yajl_allow_multiple_values, 0);
  yajl_config(h, yajl_allow_partial_values, 0);
  yajl_config(h, yajl_dont_validate_strings, validate_utf8 ? 0 : 1);
  int rv = 0;
  yajl_status s = yajl_parse(h, (const unsigned char *)body, len);
  if (s == yajl_status_ok) s = yajl_complete_parse(h);
  if (s == yajl_status_client_canceled)
    rv = st.err ? st.err : -EPROTO;
  else if (s != yajl_status_ok || st.depth != 0)
    rv = -EPROTO;
  yajl_free(h);
  return rv;
}

int jsonstream_key_field(const struct jsonstream_key *rows, size_t n, int node, const char *key, size_t len) {
  for (size_t i = 0; i < n; i++) {
    if (rows[i].node == node && strlen(rows[i].key) == len && memcmp(rows[i].key, key, len) == 0) return rows[i].field;
  }
  return -1;
}

int jsonstream_child_node(const struct jsonstream_child *rows, size_t n, int node, int field, int is_array) {
  for (size_t i = 0; i < n; i++) {
    if (rows[i].node == node && rows[i].field == field && rows[i].is_array == is_array) return rows[i].child;
  }
  return JSONSTREAM_SKIP;
}
