/*
 * Chapters, read with the bounded streaming JSON reader. A panel's identifier may come before or after its content,
 * so a panel's items are gathered while it is read and kept when it closes only if it was the chapters panel.
 */
#include "fetcher/platform/chapters.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "fetcher/readers/jsonstream.h"

#define CHAPTERS_PANEL_ID "engagement-panel-macro-markers-description-chapters"

/* Containers, by what they are. */
enum {
  N_PANELS = JSONSTREAM_ROOT + 1, /* engagementPanels */
  N_PANEL_ITEM,                   /* engagementPanels[] */
  N_PANEL,                        /* .engagementPanelSectionListRenderer */
  N_CONTENT,                      /* .content */
  N_LIST_OWNER,                   /* .macroMarkersListRenderer */
  N_LIST,                         /* .contents */
  N_ITEM,                         /* .contents[] */
  N_MARKER,                       /* .macroMarkersListItemRenderer */
  N_TITLE,                        /* .title */
  N_RUNS,                         /* .title.runs */
  N_RUN,                          /* .title.runs[] */
  N_TAP,                          /* .onTap */
  N_WATCH,                        /* .onTap.watchEndpoint */
};

enum {
  F_NONE = 0,
  F_PANELS,
  F_PANEL,
  F_PANEL_ID,
  F_CONTENT,
  F_LIST_OWNER,
  F_LIST,
  F_MARKER,
  F_TITLE,
  F_SIMPLE,
  F_RUNS,
  F_TEXT,
  F_TAP,
  F_WATCH,
  F_START
};

static const struct jsonstream_key keys[] = {
    {JSONSTREAM_ROOT, "engagementPanels", F_PANELS},
    {N_PANEL_ITEM, "engagementPanelSectionListRenderer", F_PANEL},
    {N_PANEL, "panelIdentifier", F_PANEL_ID},
    {N_PANEL, "content", F_CONTENT},
    {N_CONTENT, "macroMarkersListRenderer", F_LIST_OWNER},
    {N_LIST_OWNER, "contents", F_LIST},
    {N_ITEM, "macroMarkersListItemRenderer", F_MARKER},
    {N_MARKER, "title", F_TITLE},
    {N_MARKER, "onTap", F_TAP},
    {N_TITLE, "simpleText", F_SIMPLE},
    {N_TITLE, "runs", F_RUNS},
    {N_RUN, "text", F_TEXT},
    {N_TAP, "watchEndpoint", F_WATCH},
    {N_WATCH, "startTimeSeconds", F_START},
};

/* The container a field opens: {parent node, field, is_array, child node}. */
static const struct jsonstream_child opens[] = {
    {JSONSTREAM_ROOT, F_PANELS, 1, N_PANELS},
    {N_PANELS, JSONSTREAM_ITEM, 0, N_PANEL_ITEM},
    {N_PANEL_ITEM, F_PANEL, 0, N_PANEL},
    {N_PANEL, F_CONTENT, 0, N_CONTENT},
    {N_CONTENT, F_LIST_OWNER, 0, N_LIST_OWNER},
    {N_LIST_OWNER, F_LIST, 1, N_LIST},
    {N_LIST, JSONSTREAM_ITEM, 0, N_ITEM},
    {N_ITEM, F_MARKER, 0, N_MARKER},
    {N_MARKER, F_TITLE, 0, N_TITLE},
    {N_TITLE, F_RUNS, 1, N_RUNS},
    {N_RUNS, JSONSTREAM_ITEM, 0, N_RUN},
    {N_MARKER, F_TAP, 0, N_TAP},
    {N_TAP, F_WATCH, 0, N_WATCH},
};

struct reader {
  struct chapter_list *out;
  struct chapter_list panel; /* the items of the panel being read */
  size_t panel_cap;
  int is_chapters; /* its identifier is the chapters panel's */
  int done;        /* the chapters panel was read: later panels are not looked at */
  struct chapter item;
  size_t title_len;
  int has_title, has_start;
};

static int on_key(void *ctx, int node, const char *key, size_t len) {
  (void)ctx;
  int field = jsonstream_key_field(keys, sizeof(keys) / sizeof(keys[0]), node, key, len);
  return field >= 0 ? field : F_NONE;
}

static int on_open(void *ctx, int node, int field, int is_array) {
  struct reader *r = ctx;
  int child = jsonstream_child_node(opens, sizeof(opens) / sizeof(opens[0]), node, field, is_array);
  if (child == N_PANEL) {
    if (r->done) return JSONSTREAM_SKIP;
    r->panel.n = 0;
    r->is_chapters = 0;
  }
  if (child == N_MARKER) {
    memset(&r->item, 0, sizeof(r->item));
    r->title_len = 0;
    r->has_title = r->has_start = 0;
  }
  return child;
}

/* A marker read whole: kept when it has a title and starts after the one before. */
static int add_item(struct reader *r) {
  struct chapter_list *p = &r->panel;
  if (!r->has_title || !r->has_start || r->title_len == 0) return 0;
  if (p->n > 0 && r->item.start_s <= p->items[p->n - 1].start_s) return 0;
  if (p->n == CHAPTERS_MAX) return -EPROTO;
  if (p->n == r->panel_cap) {
    size_t cap = r->panel_cap ? r->panel_cap * 2 : 16;
    if (cap > CHAPTERS_MAX) cap = CHAPTERS_MAX;
    void *items = realloc(p->items, cap * sizeof(p->items[0]));
    if (items == NULL) return -ENOMEM;
    p->items = items;
    r->panel_cap = cap;
  }
  p->items[p->n++] = r->item;
  return 0;
}

static int on_close(void *ctx, int node) {
  struct reader *r = ctx;
  if (node == N_MARKER) return add_item(r);
  if (node == N_PANEL && r->is_chapters) {
    /* The panel's list becomes the answer; the reader's own buffer is handed over. */
    free(r->out->items);
    *r->out = r->panel;
    r->panel.items = NULL;
    r->panel.n = 0;
    r->panel_cap = 0;
    r->done = 1;
  }
  return 0;
}

/* A title's text: runs joined, cut at CHAPTERS_TITLE_MAX bytes on a character's start; a NUL ends it. */
static void add_title(struct reader *r, const char *s, size_t len) {
  size_t room = CHAPTERS_TITLE_MAX - r->title_len;
  size_t n = strnlen(s, len);
  if (n > room) {
    n = room;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
  }
  memcpy(r->item.title + r->title_len, s, n);
  r->title_len += n;
  r->item.title[r->title_len] = '\0';
  r->has_title = 1;
}

static int on_scalar(void *ctx, int node, int field, enum jsonstream_kind kind, const char *s, size_t len) {
  struct reader *r = ctx;
  (void)node;
  if (field == F_PANEL_ID && kind == JSONSTREAM_STRING)
    r->is_chapters = len == strlen(CHAPTERS_PANEL_ID) && memcmp(s, CHAPTERS_PANEL_ID, len) == 0;
  else if ((field == F_SIMPLE || field == F_TEXT) && kind == JSONSTREAM_STRING)
    add_title(r, s, len);
  else if (field == F_START && (kind == JSONSTREAM_NUMBER || kind == JSONSTREAM_STRING))
    /* The platform writes a whole number of seconds (some clients as a string). */
    r->has_start = util_parse_i64_n(s, len, 0, INT32_MAX, &r->item.start_s) == 0;
  return 0;
}

static const struct jsonstream_ops ops = {.key = on_key, .open = on_open, .close = on_close, .scalar = on_scalar};

int chapters_parse(const char *body, size_t len, struct chapter_list *out) {
  memset(out, 0, sizeof(*out));
  struct reader r = {.out = out};
  int rv = jsonstream_parse(body, len, 1, &ops, &r);
  free(r.panel.items);
  if (rv != 0) chapters_free(out);
  return rv;
}

void chapters_free(struct chapter_list *l) {
  free(l->items);
  l->items = NULL;
  l->n = 0;
}

int chapters_json(const struct chapter_list *l, int64_t length_s, struct buf *out) {
  int rv = buf_puts(out, "[");
  for (size_t i = 0; rv == 0 && i < l->n; i++) {
    const struct chapter *c = &l->items[i];
    int64_t end = i + 1 < l->n ? l->items[i + 1].start_s : (length_s > c->start_s ? length_s : c->start_s);
    rv = buf_puts(out, i > 0 ? ",{\"title\":\"" : "{\"title\":\"");
    if (rv == 0) rv = buf_json_escape(out, c->title, strlen(c->title));
    if (rv == 0) rv = buf_printf(out, "\",\"start\":%lld,\"end\":%lld}", (long long)c->start_s, (long long)end);
  }
  if (rv == 0) rv = buf_puts(out, "]");
  return rv == 0 ? 0 : -ENOMEM;
}

int chapters_next_body(const struct client_profile *c, const char *video_id, struct buf *out) {
  int rv = buf_puts(out, "{\"context\":{\"client\":{\"clientName\":\"");
  if (rv == 0) rv = buf_json_escape(out, c->client_name, strlen(c->client_name));
  if (rv == 0) rv = buf_puts(out, "\",\"clientVersion\":\"");
  if (rv == 0) rv = buf_json_escape(out, c->version, strlen(c->version));
  if (rv == 0) rv = buf_puts(out, "\",\"hl\":\"en\",\"gl\":\"US\"}},\"videoId\":\"");
  if (rv == 0) rv = buf_json_escape(out, video_id, strlen(video_id));
  if (rv == 0) rv = buf_puts(out, "\",\"contentCheckOk\":true,\"racyCheckOk\":true}");
  return rv == 0 ? 0 : -ENOMEM;
}
