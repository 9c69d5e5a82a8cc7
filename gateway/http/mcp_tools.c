#include "gateway/http/mcp_tools.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <yajl/yajl_gen.h>

#include "common/ident.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/http/dispatch_client.h"
#include "gateway/http/errors.h"
#include "gateway/http/mcp_jobs.h"
#include "gateway/http/mcp_rpc.h"
#include "gateway/http/segments.h"
#include "gateway/http/videourl.h"
#include "proto/proto.h"

/* get_transcript's max_chars: its default fits well inside the 25,000 tokens clients take from one tool result. */
#define MCP_PAGE_DEFAULT_CHARS 20000
#define MCP_PAGE_MIN_CHARS 1000
#define MCP_PAGE_MAX_CHARS 100000
/* search_transcript */
#define MCP_QUERY_MAX_CHARS 200
#define MCP_SEARCH_DEFAULT_RESULTS 20
#define MCP_SEARCH_MAX_RESULTS 100
#define MCP_CURSOR_BYTES 128
/* The platform's watch page, which a search match links to at its second. */
#define MCP_WATCH_URL "https://www.youtube.com/watch?v="

/* The arguments a tool may take (the bits of its row's args). */
enum mcp_arg {
  ARG_VIDEO = 1u << 0,
  ARG_LANGUAGE = 1u << 1,
  ARG_TRANSLATE = 1u << 2,
  ARG_FORMAT = 1u << 3,
  ARG_MAX_CHARS = 1u << 4,
  ARG_CURSOR = 1u << 5,
  ARG_QUERY = 1u << 6,
  ARG_MAX_RESULTS = 1u << 7,
  ARG_CHAPTERS = 1u << 8,
};

struct mcp_call;
typedef int mcp_render(struct mcp_call *c, const char *body, size_t len, const struct entity *ent, struct buf *out);

static mcp_render render_page, render_search, render_body;

/* The JSON Schema of the video argument every tool takes, and of the two language arguments. */
#define SCHEMA_VIDEO                                                                                           \
  "\"video\":{\"type\":\"string\",\"description\":\"The video: its 11-character id (dQw4w9WgXcQ) or a URL of " \
  "it (watch?v=, youtu.be/, /shorts/, /live/, /embed/).\"}"
#define SCHEMA_LANGS                                                                                             \
  "\"language\":{\"type\":\"string\",\"description\":\"The caption track's language (en, pt-BR); the video's "   \
  "default track when absent.\"},\"translate\":{\"type\":\"string\",\"description\":\"Translate the track into " \
  "this language (the platform's machine translation).\"}"
#define SCHEMA_SEGMENT                                                                                   \
  "{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"},\"start\":{\"type\":\"number\"}," \
  "\"duration\":{\"type\":\"number\"}},\"required\":[\"text\",\"start\",\"duration\"]}"

static const struct mcp_tool {
  const char *name;
  const char *title;
  const char *description;
  const char *input_schema;
  const char *output_schema;
  unsigned args;
  uint8_t kind; /* the job it runs */
  mcp_render *render;
  /* A tool of its own steps (the job tools), in place of args, kind and render; it changes state unless read_only. */
  int (*run)(struct handlers_ctx *ctx, struct http_request *req, const struct key_entry *key, const char *id,
             yajl_val args);
  int writes;
} tools[] = {
    {"get_transcript", "Get a video's transcript",
     "The transcript of a video (its captions, or speech recognition where it has none), one page at a time. A page "
     "holds whole segments up to max_chars characters; while next_cursor is not null, call again with the same "
     "arguments and cursor set to it for the next page. format text gives lines '[m:ss] words', segments gives each "
     "segment's text, start and duration in seconds. One transcript costs one unit of the key's monthly quota, "
     "however many of its pages are read while it is cached.",
     "{\"type\":\"object\",\"properties\":{" SCHEMA_VIDEO "," SCHEMA_LANGS
     ",\"format\":{\"type\":\"string\",\"enum\":[\"text\",\"segments\"],\"default\":\"text\",\"description\":"
     "\"text: timestamped lines; segments: objects with text, start and duration.\"},\"max_chars\":{\"type\":"
     "\"integer\",\"minimum\":1000,\"maximum\":100000,\"default\":20000,\"description\":\"The most characters a "
     "page holds (at least one segment).\"},\"cursor\":{\"type\":\"string\",\"description\":\"next_cursor of the "
     "page before; absent for the first page.\"}},\"required\":[\"video\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"video_id\":{\"type\":\"string\"},\"language\":{\"type\":\"string\"},"
     "\"source\":{\"type\":\"string\",\"enum\":[\"captions\",\"speech\"]},\"format\":{\"type\":\"string\",\"enum\":"
     "[\"text\",\"segments\"]},\"etag\":{\"type\":\"string\",\"description\":\"The ETag of the transcript, as GET "
     "/v1/video/transcript sends it.\"},\"first_segment\":{\"type\":\"integer\"},\"end_segment\":{\"type\":"
     "\"integer\"},\"total_segments\":{\"type\":\"integer\"},\"start\":{\"type\":\"number\"},\"end\":{\"type\":"
     "\"number\"},\"text\":{\"type\":\"string\"},\"segments\":{\"type\":\"array\",\"items\":" SCHEMA_SEGMENT
     "},\"next_cursor\":{\"type\":[\"string\",\"null\"]}},\"required\":[\"video_id\",\"language\",\"source\","
     "\"format\",\"etag\",\"first_segment\",\"end_segment\",\"total_segments\",\"next_cursor\"]}",
     ARG_VIDEO | ARG_LANGUAGE | ARG_TRANSLATE | ARG_FORMAT | ARG_MAX_CHARS | ARG_CURSOR, PROTO_KIND_CAPTIONS,
     render_page, NULL, 0},
    {"search_transcript", "Search a video's transcript",
     "The segments of a video's transcript whose text contains query (case-insensitive), each with its start time "
     "in seconds and a link that opens the video at that second. Costs one unit of the monthly quota, as reading the "
     "transcript does.",
     "{\"type\":\"object\",\"properties\":{" SCHEMA_VIDEO "," SCHEMA_LANGS
     ",\"query\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":200,\"description\":\"The words to find.\"},"
     "\"max_results\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100,\"default\":20}},\"required\":[\"video\","
     "\"query\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"video_id\":{\"type\":\"string\"},\"language\":{\"type\":\"string\"},"
     "\"query\":{\"type\":\"string\"},\"total_matches\":{\"type\":\"integer\"},\"matches\":{\"type\":\"array\","
     "\"items\":{\"type\":\"object\",\"properties\":{\"start\":{\"type\":\"number\"},\"duration\":{\"type\":"
     "\"number\"},\"text\":{\"type\":\"string\"},\"url\":{\"type\":\"string\"}},\"required\":[\"start\","
     "\"duration\",\"text\",\"url\"]}}},\"required\":[\"video_id\",\"language\",\"query\",\"total_matches\","
     "\"matches\"]}",
     ARG_VIDEO | ARG_LANGUAGE | ARG_TRANSLATE | ARG_QUERY | ARG_MAX_RESULTS, PROTO_KIND_CAPTIONS, render_search, NULL,
     0},
    {"get_video_metadata", "Get a video's metadata",
     "What the platform says of a video: title, channel, duration, view count, description, keywords, dates and "
     "its thumbnails, as GET /v1/video/metadata answers. With include_chapters, also its chapters (title, start and "
     "end in seconds; an empty list when it has none): use them to find a part of the video or to cite it. Costs one "
     "unit of the monthly quota.",
     "{\"type\":\"object\",\"properties\":{" SCHEMA_VIDEO ",\"include_chapters\":{\"type\":\"boolean\","
     "\"default\":false,\"description\":\"Add the video's chapters (chapters: title, start, end in seconds).\"}},"
     "\"required\":[\"video\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"required\":[\"videoId\",\"title\",\"channelId\",\"channelName\","
     "\"lengthSeconds\",\"isLive\",\"viewCount\",\"description\",\"keywords\",\"thumbnails\","
     "\"captionLanguages\"],\"properties\":{\"videoId\":{\"type\":\"string\"},"
     "\"title\":{\"type\":[\"string\",\"null\"]},\"channelId\":{\"type\":[\"string\",\"null\"]},"
     "\"channelName\":{\"type\":[\"string\",\"null\"]},\"lengthSeconds\":{\"type\":[\"integer\","
     "\"null\"]},\"isLive\":{\"type\":\"boolean\"},\"isLiveContent\":{\"type\":\"boolean\"},"
     "\"viewCount\":{\"type\":[\"integer\",\"null\"]},\"publishDate\":{\"type\":[\"string\",\"null\"]},"
     "\"description\":{\"type\":[\"string\",\"null\"]},\"keywords\":{\"type\":\"array\","
     "\"items\":{\"type\":\"string\"}},\"thumbnails\":{\"type\":\"array\","
     "\"items\":{\"type\":\"object\"}},\"captionLanguages\":{\"type\":\"array\","
     "\"items\":{\"type\":\"string\"}},\"chapters\":{\"type\":\"array\",\"description\":\"With "
     "include_chapters only.\",\"items\":{\"type\":\"object\",\"required\":[\"title\",\"start\",\"end\"],"
     "\"properties\":{\"title\":{\"type\":\"string\"},\"start\":{\"type\":\"integer\"},\"end\":{\"type\":"
     "\"integer\"}}}}}}",
     ARG_VIDEO | ARG_CHAPTERS, PROTO_KIND_METADATA, render_body, NULL, 0},
    {"list_caption_tracks", "List a video's caption tracks",
     "The caption tracks of a video (language, name, whether generated by speech recognition, whether "
     "translatable) and the languages it can be translated into, as GET /v1/video/tracks answers: pick language or "
     "translate for get_transcript from them. Costs one unit of the monthly quota.",
     "{\"type\":\"object\",\"properties\":{" SCHEMA_VIDEO "},\"required\":[\"video\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"required\":[\"tracks\",\"translationLanguages\"],"
     "\"properties\":{\"tracks\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
     "\"required\":[\"language\",\"name\",\"kind\",\"translatable\"],"
     "\"properties\":{\"language\":{\"type\":\"string\"},\"name\":{\"type\":\"string\"},"
     "\"kind\":{\"type\":\"string\",\"enum\":[\"manual\",\"asr\"]},"
     "\"translatable\":{\"type\":\"boolean\"}}}},\"translationLanguages\":{\"type\":\"array\","
     "\"items\":{\"type\":\"object\",\"required\":[\"language\",\"name\"],"
     "\"properties\":{\"language\":{\"type\":\"string\"},\"name\":{\"type\":\"string\"}}}}}}",
     ARG_VIDEO, PROTO_KIND_TRACKS, render_body, NULL, 0},
    {"start_transcript_job", "Start a transcript job",
     "Starts a batch job that fetches the transcripts of many videos in the background: video_ids (ids or URLs), "
     "or every video of a playlist_id or a channel_id (exactly one of the three), at most limit of them. Answers "
     "at once with the job's id; read its progress and its transcripts with get_transcript_job. Each transcript "
     "delivered costs one unit of the key's monthly quota (quota_remaining says how many are left); a video without "
     "one costs nothing.",
     MCP_JOBS_START_INPUT, MCP_JOBS_START_OUTPUT, 0, 0, NULL, mcp_jobs_start, 1},
    {"get_transcript_job", "Read a transcript job",
     "The status of a job start_transcript_job made (queued, running, done or cancelled, with counts of its items) "
     "and a page of its items in the job's order: each video's status and, once done, its transcript (or the error "
     "that ended it). A page holds whole items up to max_chars characters (at least one item); while next_cursor is "
     "not null, call again with cursor set to it. Reading costs no unit of the monthly quota.",
     MCP_JOBS_GET_INPUT, MCP_JOBS_GET_OUTPUT, 0, 0, NULL, mcp_jobs_get, 0},
};

#define MCP_NTOOLS (sizeof(tools) / sizeof(tools[0]))

int mcp_tools_list(struct buf *out) {
  int rv = buf_puts(out, "{\"tools\":[");
  for (size_t i = 0; i < MCP_NTOOLS; i++) {
    const struct mcp_tool *t = &tools[i];
    rv |= buf_puts(out, i > 0 ? ",{\"name\":\"" : "{\"name\":\"");
    rv |= buf_puts(out, t->name);
    rv |= buf_puts(out, "\",\"title\":\"");
    rv |= buf_json_escape(out, t->title, strlen(t->title));
    rv |= buf_puts(out, "\",\"description\":\"");
    rv |= buf_json_escape(out, t->description, strlen(t->description));
    rv |= buf_puts(out, "\",\"inputSchema\":");
    rv |= buf_puts(out, t->input_schema);
    rv |= buf_puts(out, ",\"outputSchema\":");
    rv |= buf_puts(out, t->output_schema);
    rv |= buf_puts(out, t->writes ? ",\"annotations\":{\"readOnlyHint\":false,\"openWorldHint\":true}}"
                                  : ",\"annotations\":{\"readOnlyHint\":true,\"openWorldHint\":true}}");
  }
  rv |= buf_puts(out, "]}");
  return rv != 0 ? -ENOMEM : 0;
}

/* One tool call across its asynchronous steps (rate limit, dispatch), as a REST transcript request. */
struct mcp_call {
  struct handlers_ctx *ctx;
  struct http_request *req;
  const struct mcp_tool *tool;
  struct key_entry key; /* a copy: a key file reload may free the store meanwhile */
  unsigned char secret[32];
  struct rl_decision rl;
  char rl_headers[RLCALC_HEADERS_BYTES];
  char id[MCP_ID_BYTES + 1];
  struct proto_job job;
  /* get_transcript */
  int as_text;
  size_t max_chars;
  int has_cursor;
  size_t from;        /* the page's first segment */
  int64_t paid_until; /* the cursor's end of the paid cache life, unix seconds */
  char tag[ENTITY_TAG_HEX + 1];
  int free_page; /* the cursor's unit still covers this page: checked without a unit */
  /* search_transcript */
  char query[MCP_QUERY_MAX_CHARS * 4 + 1];
  char msg[128]; /* a -32602 message naming an argument */
  size_t max_results;
};

static int64_t wall_s(void) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return (int64_t)now.tv_sec;
}

/* HMAC-SHA-256 of msg under key, its first 16 bytes as 32 hex characters. */
static void hmac_hex(const unsigned char key[32], const char *msg, size_t len, char out[33]) {
  unsigned char block[64 + 32];
  unsigned char inner[32], md[32];
  struct buf b = BUF_INIT;
  memset(block, 0, 64);
  memcpy(block, key, 32);
  for (int i = 0; i < 64; i++) block[i] ^= 0x36;
  if (buf_append(&b, block, 64) != 0 || buf_append(&b, msg, len) != 0) {
    buf_free(&b);
    memset(out, '0', 32);
    out[32] = '\0';
    return;
  }
  util_sha256(b.data, b.len, inner);
  buf_free(&b);
  for (int i = 0; i < 64; i++) block[i] ^= 0x36 ^ 0x5c;
  memcpy(block + 64, inner, 32);
  util_sha256(block, sizeof(block), md);
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[2 * i] = hex[md[i] >> 4];
    out[2 * i + 1] = hex[md[i] & 15];
  }
  out[32] = '\0';
}

/* The signature of a cursor: bound to the key, the job (video, language, translation) and its three fields. */
static void cursor_mac(const struct mcp_call *c, size_t from, int64_t paid_until, const char *tag, char out[33]) {
  char msg[512];
  int n = snprintf(msg, sizeof(msg), "%s|%s|%s|%s|%zu|%" PRId64 "|%s", c->key.digest, c->job.video_id, c->job.lang,
                   c->job.translate, from, paid_until, tag);
  hmac_hex(c->secret, msg, n > 0 && (size_t)n < sizeof(msg) ? (size_t)n : 0, out);
}

static void cursor_make(const struct mcp_call *c, size_t from, int64_t paid_until, const char *tag,
                        char out[MCP_CURSOR_BYTES]) {
  char mac[33];
  cursor_mac(c, from, paid_until, tag, mac);
  snprintf(out, MCP_CURSOR_BYTES, "%zu.%" PRId64 ".%s.%s", from, paid_until, tag, mac);
}

static int is_hex32(const char *s, size_t len) {
  if (len != 32) return 0;
  for (size_t i = 0; i < len; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return 1;
}

/* Reads a cursor this service made for c's key and job: "<from>.<paid_until>.<tag>.<mac>". Returns 0 or -EINVAL. */
static int cursor_read(struct mcp_call *c, const char *s, size_t len) {
  char copy[MCP_CURSOR_BYTES];
  if (len == 0 || len >= sizeof(copy)) return -EINVAL;
  memcpy(copy, s, len);
  copy[len] = '\0';
  char *dot1 = strchr(copy, '.');
  char *dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
  char *dot3 = dot2 ? strchr(dot2 + 1, '.') : NULL;
  if (dot3 == NULL) return -EINVAL;
  *dot1 = *dot2 = *dot3 = '\0';
  int64_t from, paid;
  if (util_parse_i64(copy, 0, INT32_MAX, &from) != 0 || util_parse_i64(dot1 + 1, 0, INT64_MAX, &paid) != 0)
    return -EINVAL;
  if (!is_hex32(dot2 + 1, strlen(dot2 + 1)) || !is_hex32(dot3 + 1, strlen(dot3 + 1))) return -EINVAL;
  char want[33];
  cursor_mac(c, (size_t)from, paid, dot2 + 1, want);
  unsigned diff = 0; /* compared in constant time: the signature must not be found byte by byte */
  for (int i = 0; i < 32; i++) diff |= (unsigned)(want[i] ^ dot3[1 + i]);
  if (diff != 0) return -EINVAL;
  c->from = (size_t)from;
  c->paid_until = paid;
  memcpy(c->tag, dot2 + 1, ENTITY_TAG_HEX + 1);
  c->has_cursor = 1;
  return 0;
}

static const char *str_of(yajl_val v) { return YAJL_IS_STRING(v) ? YAJL_GET_STRING(v) : NULL; }

/*
 * Over 80 lines: the tools' argument table and each argument's check in one pass, in the order the errors name them.
 * Reads args (NULL: none) into c for its tool. Returns NULL, or the -32602 message naming the argument.
 */
static const char *read_args(struct mcp_call *c, yajl_val args) {
  static const struct {
    const char *name;
    unsigned bit;
  } names[] = {{"video", ARG_VIDEO},   {"language", ARG_LANGUAGE},       {"translate", ARG_TRANSLATE},
               {"format", ARG_FORMAT}, {"max_chars", ARG_MAX_CHARS},     {"cursor", ARG_CURSOR},
               {"query", ARG_QUERY},   {"max_results", ARG_MAX_RESULTS}, {"include_chapters", ARG_CHAPTERS}};
  const struct mcp_tool *t = c->tool;
  yajl_val v[sizeof(names) / sizeof(names[0])] = {0};
  if (args != NULL && !YAJL_IS_OBJECT(args)) return "arguments must be an object.";
  size_t n = args != NULL ? args->u.object.len : 0;
  for (size_t i = 0; i < n; i++) {
    const char *k = args->u.object.keys[i];
    size_t a = 0;
    while (a < sizeof(names) / sizeof(names[0]) && strcmp(names[a].name, k) != 0) a++;
    if (a == sizeof(names) / sizeof(names[0]) || !(t->args & names[a].bit)) {
      /* Named back when it is a plain name (no half of a character, nothing to escape). */
      int plain = strlen(k) <= 32;
      for (const char *p = k; *p != '\0' && plain; p++)
        plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_';
      snprintf(c->msg, sizeof(c->msg), "%s is not an argument of %s.", plain ? k : "an argument", t->name);
      return c->msg;
    }
    if (v[a] != NULL) {
      snprintf(c->msg, sizeof(c->msg), "%s is given twice.", names[a].name);
      return c->msg;
    }
    v[a] = args->u.object.values[i];
  }
  /* video */
  const char *video = str_of(v[0]);
  if (video == NULL) return "video is required: a video id or URL.";
  size_t vlen = strlen(video);
  if (vlen == 11 && ident_video_id_valid(video, vlen)) {
    memcpy(c->job.video_id, video, 12);
  } else if (videourl_parse(video, vlen, c->job.video_id) != 0) {
    return "video must be an 11-character video id or a video URL.";
  }
  for (int l = 1; l <= 2; l++) {
    if (v[l] == NULL) continue;
    const char *s = str_of(v[l]);
    char *dst = l == 1 ? c->job.lang : c->job.translate;
    if (s == NULL || strlen(s) > PROTO_MAX_LANG || !ident_language_valid(s, strlen(s)))
      return l == 1 ? "language must match ^[a-z]{2,3}(?:-[a-zA-Z]{2,8})?$."
                    : "translate must match ^[a-z]{2,3}(?:-[a-zA-Z]{2,8})?$.";
    util_copy_str(dst, PROTO_MAX_LANG + 1, s);
  }
  c->as_text = 1;
  if (v[3] != NULL) {
    const char *f = str_of(v[3]);
    if (f == NULL || (strcmp(f, "text") != 0 && strcmp(f, "segments") != 0)) return "format must be text or segments.";
    c->as_text = strcmp(f, "text") == 0;
  }
  c->max_chars = MCP_PAGE_DEFAULT_CHARS;
  if (v[4] != NULL) {
    if (!YAJL_IS_INTEGER(v[4]) || YAJL_GET_INTEGER(v[4]) < MCP_PAGE_MIN_CHARS ||
        YAJL_GET_INTEGER(v[4]) > MCP_PAGE_MAX_CHARS)
      return "max_chars must be an integer from 1000 to 100000.";
    c->max_chars = (size_t)YAJL_GET_INTEGER(v[4]);
  }
  if (v[5] != NULL) {
    const char *cur = str_of(v[5]);
    if (cur == NULL || cursor_read(c, cur, strlen(cur)) != 0)
      return "cursor is not a next_cursor of this transcript for this key (call again without cursor).";
  }
  if (t->args & ARG_QUERY) {
    const char *q = str_of(v[6]);
    if (q == NULL || q[0] == '\0' || segments_chars(q, strlen(q)) > MCP_QUERY_MAX_CHARS)
      return "query is required: 1 to 200 characters.";
    util_copy_str(c->query, sizeof(c->query), q);
  }
  c->max_results = MCP_SEARCH_DEFAULT_RESULTS;
  if (v[7] != NULL) {
    if (!YAJL_IS_INTEGER(v[7]) || YAJL_GET_INTEGER(v[7]) < 1 || YAJL_GET_INTEGER(v[7]) > MCP_SEARCH_MAX_RESULTS)
      return "max_results must be an integer from 1 to 100.";
    c->max_results = (size_t)YAJL_GET_INTEGER(v[7]);
  }
  if (v[8] != NULL) {
    if (!YAJL_IS_TRUE(v[8]) && !YAJL_IS_FALSE(v[8])) return "include_chapters must be true or false.";
    c->job.include = YAJL_IS_TRUE(v[8]) ? PROTO_INCLUDE_CHAPTERS : 0;
  }
  return NULL;
}

/*
 * Every answer but a delivered result gives the reserved month's unit back (as for a REST request): before the answer
 * is written (respond_tool_error), so the client's next call finds it back; here for a client gone or a free page.
 */
static void call_free(struct mcp_call *c) {
  ratelimit_refund(c->ctx->rl, &c->rl);
  http_request_release(c->req);
  free(c);
}

/* A tool result: content is text, structured the structuredContent (JSON text) or NULL. */
static void respond_tool(struct mcp_call *c, const char *text, size_t text_len, const char *structured,
                         size_t structured_len, int is_error) {
  mcp_rpc_tool_result(c->req, c->id, c->rl_headers, text, text_len, structured, structured_len, is_error);
}

/* The isError result of a REST error e, with retry_after_s (seconds, or 0 for none). */
static void respond_tool_error(struct mcp_call *c, enum api_error e, int64_t retry_after_s) {
  ratelimit_refund(c->ctx->rl, &c->rl);
  mcp_rpc_tool_error(c->req, c->id, c->rl_headers, e, NULL, retry_after_s);
}

/* yajl_gen's output appended to out. */
static int gen_take(yajl_gen g, struct buf *out) {
  const unsigned char *p;
  size_t n;
  if (yajl_gen_get_buf(g, &p, &n) != yajl_gen_status_ok) return -EPROTO;
  return buf_append(out, p, n) != 0 ? -ENOMEM : 0;
}

static void gen_key(yajl_gen g, const char *k) { yajl_gen_string(g, (const unsigned char *)k, strlen(k)); }
static void gen_str(yajl_gen g, const char *k, const char *v, size_t len) {
  gen_key(g, k);
  yajl_gen_string(g, (const unsigned char *)v, len);
}
static void gen_int(yajl_gen g, const char *k, int64_t v) {
  gen_key(g, k);
  yajl_gen_integer(g, v);
}
/* A time in ms as seconds with its thousandths ("12.345"). */
static void gen_ms(yajl_gen g, const char *k, int64_t ms) {
  char s[32];
  int n = snprintf(s, sizeof(s), "%" PRId64 ".%03d", ms / 1000, (int)(ms % 1000));
  gen_key(g, k);
  yajl_gen_number(g, s, (size_t)n);
}

static yajl_gen gen_new(void) {
  yajl_gen g = yajl_gen_alloc(NULL);
  if (g != NULL) yajl_gen_config(g, yajl_gen_validate_utf8, 1);
  return g;
}

static void gen_segment(yajl_gen g, const struct segments_doc *doc, size_t i) {
  const struct segments_item *s = &doc->seg[i];
  yajl_gen_map_open(g);
  gen_str(g, "text", segments_text(doc, i), s->text_len);
  gen_key(g, "start");
  yajl_gen_number(g, s->start, strlen(s->start));
  gen_key(g, "duration");
  yajl_gen_number(g, s->duration, strlen(s->duration));
  yajl_gen_map_close(g);
}

/*
 * get_transcript: the page from c->from, structuredContent with its segments (or timestamped lines) and next_cursor;
 * the text is the lines (and how to go on), or the structured JSON for format segments.
 */
static int render_page(struct mcp_call *c, const char *body, size_t len, const struct entity *ent, struct buf *out) {
  struct segments_doc doc;
  int rv = segments_read(body, len, &doc);
  if (rv != 0) return rv;
  if (c->has_cursor && (strcmp(c->tag, ent->tag) != 0 || c->from >= doc.n)) {
    segments_free(&doc);
    return -ESTALE;
  }
  size_t from = c->from, end = doc.n > 0 ? segments_page_end(&doc, from, c->max_chars, c->as_text) : 0;
  char cursor[MCP_CURSOR_BYTES] = "";
  if (end < doc.n) {
    int64_t paid = c->paid_until;
    if (!c->free_page) {
      uint64_t now = util_now_ms();
      paid = wall_s() + (ent->expires_ms > now ? (int64_t)((ent->expires_ms - now) / 1000) : 0);
    }
    cursor_make(c, end, paid, ent->tag, cursor);
  }
  char etag[ENTITY_ETAG_BYTES];
  entity_etag(ent, ENTITY_IDENTITY, etag);
  yajl_gen g = gen_new();
  if (g == NULL) {
    segments_free(&doc);
    return -ENOMEM;
  }
  struct buf lines = BUF_INIT;
  yajl_gen_map_open(g);
  gen_str(g, "video_id", c->job.video_id, strlen(c->job.video_id));
  gen_str(g, "language", doc.language, strlen(doc.language));
  gen_str(g, "source", doc.source, strlen(doc.source));
  gen_str(g, "format", c->as_text ? "text" : "segments", c->as_text ? 4 : 8);
  gen_str(g, "etag", etag, strlen(etag));
  gen_int(g, "first_segment", (int64_t)from);
  gen_int(g, "end_segment", (int64_t)end);
  gen_int(g, "total_segments", (int64_t)doc.n);
  if (end > from) {
    gen_key(g, "start");
    yajl_gen_number(g, doc.seg[from].start, strlen(doc.seg[from].start));
    gen_ms(g, "end", doc.seg[end - 1].end_ms);
  }
  if (c->as_text) {
    for (size_t i = from; i < end && rv == 0; i++) {
      char stamp[24];
      size_t sn = segments_stamp(doc.seg[i].start_ms, stamp);
      rv = buf_append(&lines, stamp, sn) | buf_append(&lines, segments_text(&doc, i), doc.seg[i].text_len) |
           buf_append(&lines, "\n", 1);
    }
    gen_str(g, "text", lines.data != NULL ? lines.data : "", lines.len);
  } else {
    gen_key(g, "segments");
    yajl_gen_array_open(g);
    for (size_t i = from; i < end; i++) gen_segment(g, &doc, i);
    yajl_gen_array_close(g);
  }
  gen_key(g, "next_cursor");
  if (cursor[0] != '\0')
    yajl_gen_string(g, (const unsigned char *)cursor, strlen(cursor));
  else
    yajl_gen_null(g);
  yajl_gen_map_close(g);
  if (rv == 0) rv = gen_take(g, out);
  if (rv == 0 && c->as_text) {
    /* The text of the result, after the structured part in out: the lines, and how to go on. */
    rv = buf_append(out, "\n", 1) | buf_append(out, lines.data != NULL ? lines.data : "", lines.len);
    if (rv == 0 && cursor[0] != '\0')
      rv = buf_printf(out, "\n[page %zu-%zu of %zu segments; next_cursor: %s]", from, end, doc.n, cursor);
    rv = rv != 0 ? -ENOMEM : 0;
  }
  buf_free(&lines);
  yajl_gen_free(g);
  segments_free(&doc);
  return rv;
}

/* Whether hay (len bytes) holds needle, ASCII letters compared without case. */
static int contains_fold(const char *hay, size_t len, const char *needle) {
  size_t n = strlen(needle);
  if (n > len) return 0;
  for (size_t i = 0; i + n <= len; i++) {
    size_t j = 0;
    while (j < n) {
      char a = hay[i + j], b = needle[j];
      if (a >= 'A' && a <= 'Z') a = (char)(a - 'A' + 'a');
      if (b >= 'A' && b <= 'Z') b = (char)(b - 'A' + 'a');
      if (a != b) break;
      j++;
    }
    if (j == n) return 1;
  }
  return 0;
}

static int render_search(struct mcp_call *c, const char *body, size_t len, const struct entity *ent, struct buf *out) {
  (void)ent;
  struct segments_doc doc;
  int rv = segments_read(body, len, &doc);
  if (rv != 0) return rv;
  yajl_gen g = gen_new();
  if (g == NULL) {
    segments_free(&doc);
    return -ENOMEM;
  }
  size_t total = 0;
  yajl_gen_map_open(g);
  gen_str(g, "video_id", c->job.video_id, strlen(c->job.video_id));
  gen_str(g, "language", doc.language, strlen(doc.language));
  gen_str(g, "query", c->query, strlen(c->query));
  gen_key(g, "matches");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < doc.n; i++) {
    if (!contains_fold(segments_text(&doc, i), doc.seg[i].text_len, c->query)) continue;
    if (total++ >= c->max_results) continue;
    char url[96];
    int un = snprintf(url, sizeof(url), MCP_WATCH_URL "%s&t=%" PRId64 "s", c->job.video_id, doc.seg[i].start_ms / 1000);
    yajl_gen_map_open(g);
    gen_key(g, "start");
    yajl_gen_number(g, doc.seg[i].start, strlen(doc.seg[i].start));
    gen_key(g, "duration");
    yajl_gen_number(g, doc.seg[i].duration, strlen(doc.seg[i].duration));
    gen_str(g, "text", segments_text(&doc, i), doc.seg[i].text_len);
    gen_str(g, "url", url, (size_t)un);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
  gen_int(g, "total_matches", (int64_t)total);
  yajl_gen_map_close(g);
  rv = gen_take(g, out);
  yajl_gen_free(g);
  segments_free(&doc);
  return rv;
}

/* get_video_metadata and list_caption_tracks: the REST answer's own JSON. */
static int render_body(struct mcp_call *c, const char *body, size_t len, const struct entity *ent, struct buf *out) {
  (void)c;
  (void)ent;
  return buf_append(out, body, len) != 0 ? -ENOMEM : 0;
}

/* The result of a tool whose job answered 200 with body: rendered, and the month's unit spent (unless free). */
static void respond_rendered(struct mcp_call *c, const char *body, size_t len, const struct entity *ent) {
  if (ent == NULL) {
    respond_tool_error(c, API_ERR_FETCH_FAILED, 0);
    return;
  }
  struct buf out = BUF_INIT;
  int rv = c->tool->render(c, body, len, ent, &out);
  if (rv == -ESTALE) {
    buf_free(&out);
    ratelimit_refund(c->ctx->rl, &c->rl);
    mcp_rpc_error(c->req, 200, c->id, MCP_RPC_INVALID_PARAMS,
                  "cursor belongs to a transcript that is no longer the one served: call again without cursor.");
    return;
  }
  if (rv != 0) {
    log_msg(LOG_WARN, "tool result not rendered", "request_id", c->req->request_id, "tool", c->tool->name, NULL);
    buf_free(&out);
    respond_tool_error(c, API_ERR_FETCH_FAILED, 0);
    return;
  }
  /* The structured JSON is the first line of out; a text format's own text follows it. */
  size_t slen = out.len;
  const char *nl = c->tool->render == render_page && c->as_text ? memchr(out.data, '\n', out.len) : NULL;
  if (nl != NULL) slen = (size_t)(nl - out.data);
  const char *text = nl != NULL ? nl + 1 : out.data;
  size_t text_len = nl != NULL ? out.len - slen - 1 : out.len;
  if (c->free_page)
    ratelimit_refund(c->ctx->rl, &c->rl);
  else
    c->rl.reserved_in = RL_STORE_NONE; /* delivered: the unit stays spent */
  respond_tool(c, text, text_len, out.data, slen, 0);
  buf_free(&out);
}

static void on_dispatched(void *arg, const struct proto_result *res, struct entity *ent) {
  struct mcp_call *c = arg;
  if (http_request_gone(c->req)) goto done;
  if (res == NULL) {
    respond_tool_error(c, API_ERR_FETCH_FAILED, 0);
    goto done;
  }
  switch (proto_outcome_status(res->outcome)) {
    case 200:
      respond_rendered(c, res->body, res->body_len, ent);
      break;
    case 404:
      respond_tool_error(c, api_error_not_available(res->reason), 0);
      break;
    case 502:
      respond_tool_error(c, API_ERR_UPSTREAM_FAILED, res->retry_after_s);
      break;
    default:
      respond_tool_error(c, API_ERR_FETCH_FAILED, 0);
      break;
  }
done:
  call_free(c);
}

static void on_rate_decided(void *arg, const struct rl_decision *d) {
  struct mcp_call *c = arg;
  c->rl = *d;
  if (http_request_gone(c->req)) goto done;
  rlcalc_headers(d, c->rl_headers, sizeof(c->rl_headers));
  switch (d->outcome) {
    case RL_ALLOW:
      break;
    case RL_LIMITED:
      respond_tool_error(c, API_ERR_RATE_LIMITED, d->retry_after);
      goto done;
    case RL_QUOTA:
      respond_tool_error(c, API_ERR_QUOTA_EXCEEDED, d->quota_reset - wall_s());
      goto done;
    default:
      respond_tool_error(c, API_ERR_RATE_LIMIT_UNAVAILABLE, d->retry_after);
      goto done;
  }
  if (c->has_cursor) {
    /* A page of a transcript this worker holds whole: no trip to the dispatcher. */
    char key[PROTO_MAX_JOB_KEY + 1];
    proto_job_key(&c->job, key);
    struct entity *ent = dispatch_cached(c->job.video_id, key);
    if (ent != NULL && ent->form[ENTITY_IDENTITY].data != NULL && strcmp(ent->tag, c->tag) == 0) {
      respond_rendered(c, ent->form[ENTITY_IDENTITY].data, ent->form[ENTITY_IDENTITY].len, ent);
      entity_unref(ent);
      goto done;
    }
    entity_unref(ent);
  }
  /* From here the dispatch callback owns c (it may run before dispatch_submit returns). */
  if (dispatch_submit(&c->job, on_dispatched, c) == 0) return;
  respond_tool_error(c, API_ERR_FETCH_FAILED, 0);
done:
  call_free(c);
}

int mcp_tools_call(struct handlers_ctx *ctx, struct http_request *req, const struct key_entry *key, const char *id,
                   const char *name, yajl_val args) {
  const struct mcp_tool *tool = NULL;
  for (size_t i = 0; i < MCP_NTOOLS && tool == NULL; i++)
    if (strcmp(tools[i].name, name) == 0) tool = &tools[i];
  if (tool == NULL) return -ENOENT;
  if (tool->run != NULL) return tool->run(ctx, req, key, id, args);
  struct mcp_call *c = calloc(1, sizeof(*c));
  if (c == NULL) {
    mcp_rpc_error(req, 500, id, MCP_RPC_INTERNAL_ERROR, "Out of memory.");
    return 0;
  }
  c->ctx = ctx;
  c->req = req;
  c->tool = tool;
  c->key = *key;
  memcpy(c->secret, keystore_secret(ctx->keys), sizeof(c->secret));
  util_copy_str(c->id, sizeof(c->id), id);
  c->job.kind = tool->kind;
  c->job.deadline_ms = (uint32_t)ctx->cfg->job_timeout_ms;
  util_copy_str(c->job.request_id, sizeof(c->job.request_id), req->request_id);
  const char *bad = read_args(c, args);
  if (bad != NULL) {
    mcp_rpc_refuse_args(req, id, bad);
    free(c);
    return 0;
  }
  http_request_hold(req);
  /* A page the cursor's unit still covers counts in the short window only, as a revalidation does. */
  c->free_page = c->has_cursor && wall_s() < c->paid_until;
  if (c->free_page)
    ratelimit_check_unspent(ctx->rl, &c->key, on_rate_decided, c);
  else
    ratelimit_check(ctx->rl, &c->key, on_rate_decided, c);
  return 0;
}
