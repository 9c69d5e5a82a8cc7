/*
 * The result checks as one yajl callback parser driven by a description of the expected shape: an object whose
 * members are each a string (maybe one of a few values), a number, a boolean, an object, an array of objects
 * described the same way or an array of strings; a member may be optional, or null. A body is checked in one pass
 * without building a tree of it.
 */
#include "gateway/cache/bodycheck.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "common/limits.h"
#include "common/util.h"
#include "proto/proto.h"

/*
 * V_NUMBER: a time (bodycheck_seconds_ms reads it); V_INTEGER: an index, -1 included; V_COUNT: a whole number of up
 * to 18 digits; V_STRINGS: an array of strings.
 */
enum value { V_STRING, V_NUMBER, V_INTEGER, V_BOOLEAN, V_ARRAY, V_OBJECT, V_COUNT, V_STRINGS };

/* A member's flags: it may be left out; its value may be null. */
#define M_OPTIONAL 1u
#define M_NULLABLE 2u

struct object;

struct member {
  const char *name;
  enum value value;
  const char *const *one_of;  /* V_STRING: the values allowed (NULL-terminated), or NULL for any string */
  const struct object *items; /* V_ARRAY: the shape of each element, always an object; V_OBJECT: its shape */
  unsigned flags;             /* M_OPTIONAL, M_NULLABLE */
};

/* An object with these members, each once, in any order; every member not M_OPTIONAL present. */
struct object {
  const struct member *members;
  unsigned nmembers; /* at most 32: what was seen is kept as bits */
};

#define MEMBERS(m) \
  { m, sizeof(m) / sizeof(m[0]) }

static const char *const sources[] = {"captions", "speech", NULL};
static const char *const kinds[] = {"manual", "asr", NULL};

static const struct member segment_members[] = {
    {"text", V_STRING, NULL, NULL, 0}, {"start", V_NUMBER, NULL, NULL, 0}, {"duration", V_NUMBER, NULL, NULL, 0}};
static const struct object segment = MEMBERS(segment_members);
static const struct member transcript_members[] = {{"language", V_STRING, NULL, NULL, 0},
                                                   {"source", V_STRING, sources, NULL, 0},
                                                   {"text", V_STRING, NULL, NULL, 0},
                                                   {"segments", V_ARRAY, NULL, &segment, 0}};
static const struct object transcript = MEMBERS(transcript_members);

static const struct member track_members[] = {{"language", V_STRING, NULL, NULL, 0},
                                              {"name", V_STRING, NULL, NULL, 0},
                                              {"kind", V_STRING, kinds, NULL, 0},
                                              {"translatable", V_BOOLEAN, NULL, NULL, 0}};
static const struct object track = MEMBERS(track_members);
static const struct member language_members[] = {{"language", V_STRING, NULL, NULL, 0},
                                                 {"name", V_STRING, NULL, NULL, 0}};
static const struct object language = MEMBERS(language_members);
static const struct member tracks_members[] = {{"tracks", V_ARRAY, NULL, &track, 0},
                                               {"translationLanguages", V_ARRAY, NULL, &language, 0}};
static const struct object tracks = MEMBERS(tracks_members);

/*
 * A player summary, as fetcher/platform/player.c writes it (a minimal player reply): playable, naming its video, with
 * the caption tracks, the default track and the translation languages.
 */
static const char *const ok_status[] = {"OK", NULL};
static const char *const track_kinds[] = {"", "asr", NULL};
static const struct member text_members[] = {{"simpleText", V_STRING, NULL, NULL, 0}};
static const struct object text = MEMBERS(text_members);
static const struct member play_members[] = {{"status", V_STRING, ok_status, NULL, 0}};
static const struct object play = MEMBERS(play_members);
static const struct member thumb_members[] = {
    {"url", V_STRING, NULL, NULL, 0}, {"width", V_INTEGER, NULL, NULL, 0}, {"height", V_INTEGER, NULL, NULL, 0}};
static const struct object thumb = MEMBERS(thumb_members);
static const struct member thumbnail_members[] = {{"thumbnails", V_ARRAY, NULL, &thumb, 0}};
static const struct object thumbnail = MEMBERS(thumbnail_members);
/* The member tables of the two metadata shapes are alike row by row: each is the schema of another body. */
/* The video details as the platform writes them, those the reply lacked left out. */
static const struct member details_members[] = {{"videoId", V_STRING, NULL, NULL, 0},
                                                {"title", V_STRING, NULL, NULL, M_OPTIONAL},
                                                {"channelId", V_STRING, NULL, NULL, M_OPTIONAL},
                                                {"author", V_STRING, NULL, NULL, M_OPTIONAL},
                                                {"shortDescription", V_STRING, NULL, NULL, M_OPTIONAL},
                                                {"lengthSeconds", V_STRING, NULL, NULL, M_OPTIONAL},
                                                {"viewCount", V_STRING, NULL, NULL, M_OPTIONAL},
                                                {"isLive", V_BOOLEAN, NULL, NULL, M_OPTIONAL},
                                                {"isLiveContent", V_BOOLEAN, NULL, NULL, M_OPTIONAL},
                                                {"keywords", V_STRINGS, NULL, NULL, M_OPTIONAL},
                                                {"thumbnail", V_OBJECT, NULL, &thumbnail, M_OPTIONAL}};
static const struct object details = MEMBERS(details_members);
static const struct member pmr_members[] = {{"publishDate", V_STRING, NULL, NULL, 0}};
static const struct object pmr = MEMBERS(pmr_members);
static const struct member microformat_members[] = {{"playerMicroformatRenderer", V_OBJECT, NULL, &pmr, 0}};
static const struct object microformat = MEMBERS(microformat_members);
static const struct member ctrack_members[] = {{"baseUrl", V_STRING, NULL, NULL, 0},
                                               {"languageCode", V_STRING, NULL, NULL, 0},
                                               {"name", V_OBJECT, NULL, &text, 0},
                                               {"kind", V_STRING, track_kinds, NULL, 0},
                                               {"isTranslatable", V_BOOLEAN, NULL, NULL, 0}};
static const struct object ctrack = MEMBERS(ctrack_members);
static const struct member audio_members[] = {{"defaultCaptionTrackIndex", V_INTEGER, NULL, NULL, 0}};
static const struct object audio = MEMBERS(audio_members);
static const struct member tlang_members[] = {{"languageCode", V_STRING, NULL, NULL, 0},
                                              {"languageName", V_OBJECT, NULL, &text, 0}};
static const struct object tlang = MEMBERS(tlang_members);
static const struct member renderer_members[] = {{"captionTracks", V_ARRAY, NULL, &ctrack, 0},
                                                 {"audioTracks", V_ARRAY, NULL, &audio, 0},
                                                 {"defaultAudioTrackIndex", V_INTEGER, NULL, NULL, 0},
                                                 {"translationLanguages", V_ARRAY, NULL, &tlang, 0}};
static const struct object renderer = MEMBERS(renderer_members);
static const struct member captions_members[] = {{"playerCaptionsTracklistRenderer", V_OBJECT, NULL, &renderer, 0}};
static const struct object captions = MEMBERS(captions_members);
static const struct member summary_members[] = {{"playabilityStatus", V_OBJECT, NULL, &play, 0},
                                                {"videoDetails", V_OBJECT, NULL, &details, 0},
                                                {"microformat", V_OBJECT, NULL, &microformat, M_OPTIONAL},
                                                {"captions", V_OBJECT, NULL, &captions, 0}};
static const struct object summary = MEMBERS(summary_members);

/* A chapter of a metadata body that includes them (the fetcher's chapters_json). */
static const struct member chapter_members[] = {
    {"title", V_STRING, NULL, NULL, 0}, {"start", V_COUNT, NULL, NULL, 0}, {"end", V_COUNT, NULL, NULL, 0}};
static const struct object chapter = MEMBERS(chapter_members);

/* The public metadata of a video, as player_metadata_json writes it, and its chapters when the job included them. */
static const struct member metadata_members[] = {{"videoId", V_STRING, NULL, NULL, 0},
                                                 {"title", V_STRING, NULL, NULL, M_NULLABLE},
                                                 {"channelId", V_STRING, NULL, NULL, M_NULLABLE},
                                                 {"channelName", V_STRING, NULL, NULL, M_NULLABLE},
                                                 {"lengthSeconds", V_COUNT, NULL, NULL, M_NULLABLE},
                                                 {"isLive", V_BOOLEAN, NULL, NULL, 0},
                                                 {"isLiveContent", V_BOOLEAN, NULL, NULL, 0},
                                                 {"viewCount", V_COUNT, NULL, NULL, M_NULLABLE},
                                                 {"publishDate", V_STRING, NULL, NULL, M_NULLABLE},
                                                 {"description", V_STRING, NULL, NULL, M_NULLABLE},
                                                 {"keywords", V_STRINGS, NULL, NULL, 0},
                                                 {"thumbnails", V_ARRAY, NULL, &thumb, 0},
                                                 {"captionLanguages", V_STRINGS, NULL, NULL, 0},
                                                 {"chapters", V_ARRAY, NULL, &chapter, M_OPTIONAL}};
static const struct object metadata = MEMBERS(metadata_members);

/* The deepest shape: the summary's track names (summary, captions, renderer, track, name). */
#define MAX_DEPTH 5

/* One open object: its shape, the members seen, the member whose value comes next, and whether we are in its array. */
struct frame {
  const struct object *shape;
  unsigned seen;
  const struct member *next;
  bool in_array;
};

struct parse {
  const struct object *top;
  struct frame stack[MAX_DEPTH];
  int depth; /* open objects */
  bool done; /* the top object closed */
};

static struct frame *cur(struct parse *p) { return p->depth > 0 ? &p->stack[p->depth - 1] : NULL; }

/* The member whose value this event is, when it is a plain value of that type; NULL otherwise. */
static const struct member *expecting(struct parse *p, enum value v) {
  struct frame *f = cur(p);
  if (f == NULL || f->in_array || f->next == NULL || f->next->value != v) return NULL;
  const struct member *m = f->next;
  f->next = NULL;
  return m;
}

static int on_map_key(void *ctx, const unsigned char *s, size_t len) {
  struct frame *f = cur(ctx);
  if (f == NULL || f->in_array || f->next != NULL) return 0;
  for (unsigned i = 0; i < f->shape->nmembers; i++) {
    const struct member *m = &f->shape->members[i];
    if (len != strlen(m->name) || memcmp(s, m->name, len) != 0) continue;
    if (f->seen & (1u << i)) return 0;
    f->seen |= 1u << i;
    f->next = m;
    return 1;
  }
  return 0;
}

static int on_string(void *ctx, const unsigned char *s, size_t len) {
  struct frame *f = cur(ctx);
  if (f != NULL && f->in_array) return f->next != NULL && f->next->value == V_STRINGS; /* an element */
  const struct member *m = expecting(ctx, V_STRING);
  if (m == NULL) return 0;
  if (m->one_of == NULL) return 1;
  for (const char *const *v = m->one_of; *v != NULL; v++)
    if (len == strlen(*v) && memcmp(s, *v, len) == 0) return 1;
  return 0;
}

/* An index: an optional minus and 1 to 9 digits. */
static bool integer_valid(const char *s, size_t len) {
  size_t i = len > 0 && s[0] == '-' ? 1 : 0;
  if (len - i < 1 || len - i > 9) return false;
  for (; i < len; i++)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

/* A count: 1 to 18 digits. */
static bool count_valid(const char *s, size_t len) {
  if (len < 1 || len > 18) return false;
  for (size_t i = 0; i < len; i++)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

/* yajl hands every number over as its text (yajl_number set): a time is read as the renderers read it. */
static int on_number(void *ctx, const char *s, size_t len) {
  struct frame *f = cur(ctx);
  if (f != NULL && !f->in_array && f->next != NULL && f->next->value == V_INTEGER)
    return expecting(ctx, V_INTEGER) != NULL && integer_valid(s, len);
  if (f != NULL && !f->in_array && f->next != NULL && f->next->value == V_COUNT)
    return expecting(ctx, V_COUNT) != NULL && count_valid(s, len);
  int64_t ms;
  return expecting(ctx, V_NUMBER) != NULL && bodycheck_seconds_ms(s, len, &ms) == 0;
}

static int on_boolean(void *ctx, int v) {
  (void)v;
  return expecting(ctx, V_BOOLEAN) != NULL;
}

/* Only as the value of a member that may be null: yajl skips an event without a callback, so this refuses others. */
static int on_null(void *ctx) {
  struct frame *f = cur(ctx);
  if (f == NULL || f->in_array || f->next == NULL || !(f->next->flags & M_NULLABLE)) return 0;
  f->next = NULL;
  return 1;
}

static int on_start_map(void *ctx) {
  struct parse *p = ctx;
  struct frame *f = cur(p);
  const struct object *shape;
  if (f == NULL && !p->done)
    shape = p->top;
  else if (f != NULL && f->next != NULL && f->next->value == (f->in_array ? V_ARRAY : V_OBJECT) && p->depth < MAX_DEPTH)
    shape = f->next->items;
  else
    return 0;
  p->stack[p->depth++] = (struct frame){.shape = shape};
  return 1;
}

static int on_end_map(void *ctx) {
  struct parse *p = ctx;
  struct frame *f = cur(p);
  if (f == NULL || f->in_array || f->next != NULL) return 0;
  for (unsigned i = 0; i < f->shape->nmembers; i++)
    if (!(f->seen & (1u << i)) && !(f->shape->members[i].flags & M_OPTIONAL)) return 0;
  p->depth--;
  if (p->depth == 0) p->done = true;
  /* An object member's value is over; an array's element is not the end of the array. */
  f = cur(p);
  if (f != NULL && !f->in_array) f->next = NULL;
  return 1;
}

static int on_start_array(void *ctx) {
  struct frame *f = cur(ctx);
  if (f == NULL || f->in_array || f->next == NULL || (f->next->value != V_ARRAY && f->next->value != V_STRINGS))
    return 0;
  f->in_array = true;
  return 1;
}

static int on_end_array(void *ctx) {
  struct frame *f = cur(ctx);
  if (f == NULL || !f->in_array) return 0;
  f->in_array = false;
  f->next = NULL;
  return 1;
}

static const yajl_callbacks callbacks = {
    .yajl_null = on_null,
    .yajl_boolean = on_boolean,
    .yajl_number = on_number,
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_map_key,
    .yajl_end_map = on_end_map,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end_array,
};

static int check(const struct object *top, const char *other_shape, size_t max, const char *body, size_t len,
                 const char **why) {
  const char *reason = other_shape;
  int rv = -EINVAL;
  if (len > max) {
    if (why != NULL) *why = "too_large";
    return -E2BIG;
  }
  struct parse p = {.top = top};
  yajl_handle h = yajl_alloc(&callbacks, NULL, &p);
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
  if (st == yajl_status_ok && p.done)
    rv = 0;
  else if (st == yajl_status_error) /* a callback's refusal is yajl_status_client_canceled */
    reason = "not_json";
  yajl_free(h);
  if (why != NULL) *why = rv == 0 ? "" : reason;
  return rv;
}

int bodycheck_transcript(const char *body, size_t len, const char **why) {
  return check(&transcript, "not_a_transcript", VTS_MAX_TRANSCRIPT_BYTES, body, len, why);
}

int bodycheck_tracks(const char *body, size_t len, const char **why) {
  return check(&tracks, "not_a_track_list", VTS_MAX_TRANSCRIPT_BYTES, body, len, why);
}

int bodycheck_player(const char *body, size_t len, const char **why) {
  return check(&summary, "not_a_player_summary", VTS_MAX_PLAYER_SUMMARY_BYTES, body, len, why);
}

int bodycheck_metadata(const char *body, size_t len, const char **why) {
  return check(&metadata, "not_metadata", VTS_MAX_TRANSCRIPT_BYTES, body, len, why);
}

int bodycheck_webhook(const char *body, size_t len, const char **why) {
  int ok = len == 3 && body[0] == '2' && body[1] >= '0' && body[1] <= '9' && body[2] >= '0' && body[2] <= '9';
  if (why != NULL) *why = ok ? "" : "not_a_2xx_status";
  return ok ? 0 : -EPROTO;
}

int bodycheck_result(uint8_t kind, const char *body, size_t len, const char **why) {
  if (kind == PROTO_KIND_TRACKS) return bodycheck_tracks(body, len, why);
  if (kind == PROTO_KIND_METADATA) return bodycheck_metadata(body, len, why);
  if (kind == PROTO_KIND_WEBHOOK) return bodycheck_webhook(body, len, why);
  if (kind == PROTO_KIND_BROWSE) {
    struct proto_browse_page page;
    if (proto_browse_read(body, len, &page) == 0) return 0;
    *why = "not_a_browse_page";
    return -EPROTO;
  }
  return bodycheck_transcript(body, len, why);
}

int bodycheck_seconds_ms(const char *s, size_t len, int64_t *ms) {
  size_t dot = 0;
  while (dot < len && s[dot] != '.') dot++;
  int64_t whole;
  if (dot == 0 || util_parse_i64_n(s, dot, 0, BODYCHECK_MAX_SECONDS, &whole) != 0) return -EPROTO;
  size_t ndigits = dot < len ? len - dot - 1 : 0;
  if (dot < len && ndigits == 0) return -EPROTO; /* "1." is not JSON */
  int64_t frac = 0;
  int round_up = 0;
  for (size_t i = 0; i < ndigits; i++) {
    char c = s[dot + 1 + i];
    if (c < '0' || c > '9') return -EPROTO;
    if (i < 3)
      frac = frac * 10 + (c - '0');
    else if (i == 3)
      round_up = c >= '5'; /* later digits are below half a millisecond */
  }
  for (size_t i = ndigits; i < 3; i++) frac *= 10;
  *ms = whole * 1000 + frac + round_up;
  return 0;
}
