/*
 * Browse replies, read with the bounded streaming JSON reader. The video list sits at a depth and path that changes
 * with the page's kind and the platform's layout of the day, so the reader walks every container except the large
 * ones that never hold it, and recognises the list by its owner's key, not by its full path.
 */
#include "fetcher/platform/browse.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/ident.h"
#include "fetcher/readers/jsonstream.h"

/* Containers, by what they are. */
enum {
  N_ANY = JSONSTREAM_ROOT + 1, /* any container on the way to a list */
  N_LIST_OWNER,                /* playlistVideoListRenderer, richGridRenderer */
  N_LIST,                      /* its contents, or continuationItems */
  N_ITEM,                      /* an element of a list */
  N_VIDEO,                     /* playlistVideoRenderer, videoRenderer */
  N_RICH,                      /* richItemRenderer */
  N_RICH_CONTENT,              /* .content */
  N_LOCKUP,                    /* lockupViewModel */
  N_CONT,                      /* continuationItemRenderer */
  N_CONT_ENDPOINT,             /* .continuationEndpoint */
  N_CONT_COMMAND,              /* .continuationCommand */
  N_ALERTS,                    /* alerts */
  N_ALERT_ITEM,                /* alerts[] */
  N_ALERT,                     /* .alertRenderer */
  N_ALERT_TEXT,                /* .text */
  N_ALERT_RUNS,                /* .text.runs */
  N_ALERT_RUN,                 /* .text.runs[] */
};

/* Keys. F_ANY is any key of a container on the way: its value is walked too. */
enum {
  F_NONE = 0,
  F_ANY,
  F_LIST_OWNER,
  F_LIST,
  F_VIDEO,
  F_RICH,
  F_CONTENT,
  F_LOCKUP,
  F_CONT,
  F_ENDPOINT,
  F_COMMAND,
  F_TOKEN,
  F_VIDEO_ID,
  F_CONTENT_ID,
  F_CONTENT_TYPE,
  F_ALERTS,
  F_ALERT,
  F_TYPE,
  F_TEXT,
  F_SIMPLE_TEXT,
  F_RUNS,
};

/*
 * The keys each kind of container reads; a key of N_ANY that is not here is F_ANY. Its rows are alike in shape with
 * the player's table: each reply has its own keys.
 */
static const struct jsonstream_key keys[] = {
    {JSONSTREAM_ROOT, "alerts", F_ALERTS},
    /* Never a video list, and most of a reply's bytes: skipped unseen. */
    {JSONSTREAM_ROOT, "responseContext", F_NONE},
    {JSONSTREAM_ROOT, "frameworkUpdates", F_NONE},
    {JSONSTREAM_ROOT, "topbar", F_NONE},
    {JSONSTREAM_ROOT, "microformat", F_NONE},
    {JSONSTREAM_ROOT, "sidebar", F_NONE},
    {JSONSTREAM_ROOT, "header", F_NONE},
    {N_ANY, "playlistVideoListRenderer", F_LIST_OWNER},
    {N_ANY, "richGridRenderer", F_LIST_OWNER},
    {N_ANY, "continuationItems", F_LIST},
    {N_LIST_OWNER, "contents", F_LIST},
    {N_ITEM, "playlistVideoRenderer", F_VIDEO},
    {N_ITEM, "richItemRenderer", F_RICH},
    {N_ITEM, "continuationItemRenderer", F_CONT},
    {N_RICH, "content", F_CONTENT},
    {N_RICH_CONTENT, "videoRenderer", F_VIDEO},
    {N_RICH_CONTENT, "lockupViewModel", F_LOCKUP},
    {N_VIDEO, "videoId", F_VIDEO_ID},
    {N_LOCKUP, "contentId", F_CONTENT_ID},
    {N_LOCKUP, "contentType", F_CONTENT_TYPE},
    {N_CONT, "continuationEndpoint", F_ENDPOINT},
    {N_CONT_ENDPOINT, "continuationCommand", F_COMMAND},
    {N_CONT_COMMAND, "token", F_TOKEN},
    {N_ALERT_ITEM, "alertRenderer", F_ALERT},
    {N_ALERT, "type", F_TYPE},
    {N_ALERT, "text", F_TEXT},
    {N_ALERT_TEXT, "simpleText", F_SIMPLE_TEXT},
    {N_ALERT_TEXT, "runs", F_RUNS},
    {N_ALERT_RUN, "text", F_TEXT},
};

/* The container a field opens: {parent node, field, is_array, child node}. */
static const struct jsonstream_child opens[] = {
    {N_ANY, F_ANY, 0, N_ANY},
    {N_ANY, F_ANY, 1, N_ANY},
    {N_ANY, JSONSTREAM_ITEM, 0, N_ANY},
    {N_ANY, JSONSTREAM_ITEM, 1, N_ANY},
    {N_ANY, F_LIST_OWNER, 0, N_LIST_OWNER},
    {N_ANY, F_LIST, 1, N_LIST},
    {N_LIST_OWNER, F_LIST, 1, N_LIST},
    {N_LIST, JSONSTREAM_ITEM, 0, N_ITEM},
    {N_ITEM, F_VIDEO, 0, N_VIDEO},
    {N_ITEM, F_RICH, 0, N_RICH},
    {N_ITEM, F_CONT, 0, N_CONT},
    {N_RICH, F_CONTENT, 0, N_RICH_CONTENT},
    {N_RICH_CONTENT, F_VIDEO, 0, N_VIDEO},
    {N_RICH_CONTENT, F_LOCKUP, 0, N_LOCKUP},
    {N_CONT, F_ENDPOINT, 0, N_CONT_ENDPOINT},
    {N_CONT_ENDPOINT, F_COMMAND, 0, N_CONT_COMMAND},
    {JSONSTREAM_ROOT, F_ALERTS, 1, N_ALERTS},
    {N_ALERTS, JSONSTREAM_ITEM, 0, N_ALERT_ITEM},
    {N_ALERT_ITEM, F_ALERT, 0, N_ALERT},
    {N_ALERT, F_TEXT, 0, N_ALERT_TEXT},
    {N_ALERT_TEXT, F_RUNS, 1, N_ALERT_RUNS},
    {N_ALERT_RUNS, JSONSTREAM_ITEM, 0, N_ALERT_RUN},
};

struct reader {
  struct browse_page *out;
  char id[VTS_VIDEO_ID_LEN + 1]; /* the id of the video item open, "" when none or invalid */
  int lockup_is_video;           /* a lockup's contentType says video */
  char alert_type[16];
  char alert_text[sizeof(((struct browse_page *)0)->error)];
  size_t alert_len;
};

static int find_key(int node, const char *key, size_t len) {
  return jsonstream_key_field(keys, sizeof(keys) / sizeof(keys[0]), node, key, len);
}

/* The top-level object is a container on the way too, with a few keys of its own. */
static int on_key(void *ctx, int node, const char *key, size_t len) {
  (void)ctx;
  int field = find_key(node, key, len);
  if (field < 0 && node == JSONSTREAM_ROOT) field = find_key(N_ANY, key, len);
  if (field >= 0) return field;
  return node == N_ANY || node == JSONSTREAM_ROOT ? F_ANY : F_NONE;
}

static int on_open(void *ctx, int node, int field, int is_array) {
  struct reader *r = ctx;
  if (node == JSONSTREAM_ROOT && field != F_ALERTS) node = N_ANY;
  int child = jsonstream_child_node(opens, sizeof(opens) / sizeof(opens[0]), node, field, is_array);
  if (child == N_LIST) r->out->has_list = 1;
  if (child == N_VIDEO || child == N_LOCKUP) {
    r->id[0] = '\0';
    r->lockup_is_video = 0;
  }
  if (child == N_ALERT) {
    r->alert_type[0] = '\0';
    r->alert_len = 0;
  }
  return child;
}

static int add_video(struct browse_page *p, const char *id) {
  for (size_t i = 0; i < p->nvideos; i++) {
    if (memcmp(p->video_ids[i], id, VTS_VIDEO_ID_LEN) == 0) return 0;
  }
  if (p->nvideos == BROWSE_MAX_PAGE_VIDEOS) return -EPROTO;
  if (p->nvideos == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 128;
    if (cap > BROWSE_MAX_PAGE_VIDEOS) cap = BROWSE_MAX_PAGE_VIDEOS;
    void *ids = realloc(p->video_ids, cap * sizeof(p->video_ids[0]));
    if (!ids) return -ENOMEM;
    p->video_ids = ids;
    p->cap = cap;
  }
  memcpy(p->video_ids[p->nvideos++], id, VTS_VIDEO_ID_LEN + 1);
  return 0;
}

static int on_close(void *ctx, int node) {
  struct reader *r = ctx;
  if ((node == N_VIDEO || (node == N_LOCKUP && r->lockup_is_video)) && r->id[0] != '\0') {
    int rv = add_video(r->out, r->id);
    r->id[0] = '\0';
    return rv;
  }
  if (node == N_ALERT && strcmp(r->alert_type, "ERROR") == 0 && r->out->error[0] == '\0')
    memcpy(r->out->error, r->alert_text, r->alert_len + 1);
  return 0;
}

static void keep_id(struct reader *r, const char *s, size_t len) {
  if (len == VTS_VIDEO_ID_LEN && ident_video_id_valid(s, len)) {
    memcpy(r->id, s, len);
    r->id[len] = '\0';
  } else {
    r->id[0] = '\0';
  }
}

/* Alert text: the runs joined, cut at the buffer; a NUL from \u0000 ends it. */
static void add_alert_text(struct reader *r, const char *s, size_t len) {
  size_t room = sizeof(r->alert_text) - 1 - r->alert_len;
  size_t n = strnlen(s, len < room ? len : room);
  memcpy(r->alert_text + r->alert_len, s, n);
  r->alert_len += n;
  r->alert_text[r->alert_len] = '\0';
}

static int on_scalar(void *ctx, int node, int field, enum jsonstream_kind kind, const char *s, size_t len) {
  struct reader *r = ctx;
  if (kind != JSONSTREAM_STRING) return 0;
  switch (field) {
    case F_VIDEO_ID:
    case F_CONTENT_ID:
      keep_id(r, s, len);
      break;
    case F_CONTENT_TYPE:
      r->lockup_is_video = len == strlen("LOCKUP_CONTENT_TYPE_VIDEO") && !memcmp(s, "LOCKUP_CONTENT_TYPE_VIDEO", len);
      break;
    case F_TOKEN:
      if (len > BROWSE_MAX_TOKEN || memchr(s, '\0', len)) return -EPROTO;
      memcpy(r->out->continuation, s, len);
      r->out->continuation[len] = '\0';
      break;
    case F_TYPE:
      if (len < sizeof(r->alert_type)) {
        memcpy(r->alert_type, s, len);
        r->alert_type[len] = '\0';
      }
      break;
    case F_SIMPLE_TEXT:
    case F_TEXT:
      if (node == N_ALERT_TEXT || node == N_ALERT_RUN) add_alert_text(r, s, len);
      break;
    default:
      break;
  }
  return 0;
}

static const struct jsonstream_ops ops = {.key = on_key, .open = on_open, .close = on_close, .scalar = on_scalar};

int browse_parse(const char *body, size_t len, struct browse_page *out) {
  memset(out, 0, sizeof(*out));
  struct reader r = {.out = out};
  int rv = jsonstream_parse(body, len, 1, &ops, &r);
  if (rv != 0) {
    out->nvideos = 0;
    out->continuation[0] = '\0';
  }
  return rv;
}

void browse_page_free(struct browse_page *p) {
  free(p->video_ids);
  p->video_ids = NULL;
  p->nvideos = p->cap = 0;
}

int browse_request_body(const struct client_profile *c, const char *browse_id, const char *params,
                        const char *continuation, struct buf *out) {
  int rv = buf_puts(out, "{\"context\":{\"client\":{\"clientName\":\"");
  if (rv == 0) rv = buf_json_escape(out, c->client_name, strlen(c->client_name));
  if (rv == 0) rv = buf_puts(out, "\",\"clientVersion\":\"");
  if (rv == 0) rv = buf_json_escape(out, c->version, strlen(c->version));
  if (rv == 0) rv = buf_puts(out, "\",\"hl\":\"en\",\"gl\":\"US\"}}");
  if (rv == 0 && continuation != NULL) {
    rv = buf_puts(out, ",\"continuation\":\"");
    if (rv == 0) rv = buf_json_escape(out, continuation, strlen(continuation));
    if (rv == 0) rv = buf_puts(out, "\"");
  } else {
    if (rv == 0 && browse_id != NULL) {
      rv = buf_puts(out, ",\"browseId\":\"");
      if (rv == 0) rv = buf_json_escape(out, browse_id, strlen(browse_id));
      if (rv == 0) rv = buf_puts(out, "\"");
    }
    if (rv == 0 && params != NULL) {
      rv = buf_puts(out, ",\"params\":\"");
      if (rv == 0) rv = buf_json_escape(out, params, strlen(params));
      if (rv == 0) rv = buf_puts(out, "\"");
    }
  }
  if (rv == 0) rv = buf_puts(out, "}");
  return rv;
}

static int join(const char *prefix, const char *rest, char *out, size_t outlen) {
  size_t p = strlen(prefix), n = strlen(rest);
  if (n == 0 || p + n + 1 > outlen) return -EINVAL;
  memcpy(out, prefix, p);
  memcpy(out + p, rest, n + 1);
  return 0;
}

int browse_playlist_id(const char *playlist_id, char *out, size_t outlen) {
  return join("VL", playlist_id, out, outlen);
}

int browse_uploads_id(const char *channel_id, char *out, size_t outlen) {
  if (strncmp(channel_id, "UC", 2) != 0) return -EINVAL;
  return join("VLUU", channel_id + 2, out, outlen);
}

/* Appends a protobuf varint. */
static int put_varint(struct buf *b, uint64_t v) {
  unsigned char tmp[10];
  size_t n = 0;
  do {
    tmp[n] = (unsigned char)(v & 0x7f);
    v >>= 7;
    if (v != 0) tmp[n] |= 0x80;
    n++;
  } while (v != 0);
  return buf_append(b, tmp, n);
}

/* Appends a protobuf length-delimited field. */
static int put_field(struct buf *b, uint32_t field, const void *data, size_t len) {
  int rv = put_varint(b, (uint64_t)field << 3 | 2);
  if (rv == 0) rv = put_varint(b, len);
  return rv ? rv : buf_append(b, data, len);
}

int browse_playlist_token(const char *playlist_id, struct buf *out) {
  /* The web client's own numbers: the browse continuation's field, and the "show unavailable videos" parameter. */
  enum { TOKEN_FIELD = 80226972, F_BROWSE_ID = 2, F_PARAMS = 3, F_PLAYLIST_ID = 35 };
  static const char params[] = "CADCBgIIAA%3D%3D";
  size_t n = strlen(playlist_id);
  if (n == 0 || n > VTS_PLAYLIST_ID_MAX) return -EINVAL;
  char vl[VTS_PLAYLIST_ID_MAX + 3];
  if (browse_playlist_id(playlist_id, vl, sizeof(vl)) != 0) return -EINVAL;
  struct buf inner = BUF_INIT, outer = BUF_INIT;
  int rv = put_field(&inner, F_BROWSE_ID, vl, strlen(vl));
  if (rv == 0) rv = put_field(&inner, F_PARAMS, params, sizeof(params) - 1);
  if (rv == 0) rv = put_field(&inner, F_PLAYLIST_ID, playlist_id, n);
  if (rv == 0) rv = put_field(&outer, TOKEN_FIELD, inner.data, inner.len);
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const unsigned char *p = (const unsigned char *)outer.data;
  for (size_t i = 0; rv == 0 && i < outer.len; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16;
    size_t left = outer.len - i;
    if (left > 1) v |= (uint32_t)p[i + 1] << 8;
    if (left > 2) v |= p[i + 2];
    char q[4] = {alphabet[v >> 18], alphabet[(v >> 12) & 63], alphabet[(v >> 6) & 63], alphabet[v & 63]};
    size_t keep = left > 2 ? 4 : left + 1;
    rv = buf_append(out, q, keep);
    for (size_t k = keep; rv == 0 && k < 4; k++) rv = buf_puts(out, "%3D");
  }
  buf_free(&inner);
  buf_free(&outer);
  return rv;
}
