#include "fetcher/platform/profiles.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include "common/buf.h"
#include "common/log.h"
#include "fetcher/egress/upstream.h"

#define UPPER "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#define ALNUM UPPER "abcdefghijklmnopqrstuvwxyz0123456789"

/*
 * The built-in profiles, written in the format of VTS_CLIENT_PROFILES and read by the same code. Each is what a
 * maintained downloader sent when last checked on 2026-11-26 (docs/REFERENCE.md "Client profiles" says against
 * which): VISIONOS, ANDROID, IOS, WEB and WEB_EMBEDDED as yt-dlp's INNERTUBE_CLIENTS of 2026-08-20, ANDROID_REEL as
 * NewPipeExtractor's reel request of 2026-07-20 (the request captured in the shared fixtures). ANDROID_VR is left out:
 * the platform refused all its formats from 2026-08-17. Versions move every few months: a newer one goes into
 * VTS_INNERTUBE_CLIENTS ("ANDROID:21.xx.yy") or, with a new identity, into VTS_CLIENT_PROFILES.
 */
static const char builtin_doc[] =
    "{\"profiles\": ["
    "{\"name\": \"VISIONOS\", \"client_id\": 101, \"version\": \"1.02\","
    " \"user_agent\": \"Mozilla/5.0 (Macintosh; Intel Mac OS X 15_7_3) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/26.0 Safari/605.1.15\", \"user_agent_in_context\": true,"
    " \"context\": {\"deviceMake\": \"Apple\", \"deviceModel\": \"RealityDevice17,1\", \"osName\": \"visionOS\","
    " \"osVersion\": \"26.5.23O471\", \"hl\": \"en\", \"gl\": \"US\", \"utcOffsetMinutes\": 0}},"
    "{\"name\": \"ANDROID\", \"client_id\": 3, \"version\": \"21.26.364\","
    " \"user_agent\": \"com.google.android.youtube/{version} (Linux; U; Android 11) gzip\", \"user_agent_in_context\": "
    "true,"
    " \"context\": {\"androidSdkVersion\": 30, \"osName\": \"Android\", \"osVersion\": \"11\", \"platform\": "
    "\"MOBILE\","
    " \"hl\": \"en\", \"gl\": \"US\", \"utcOffsetMinutes\": 0}},"
    "{\"name\": \"ANDROID_REEL\", \"client_name\": \"ANDROID\", \"client_id\": 3, \"version\": \"21.26.364\","
    " \"user_agent\": \"com.google.android.youtube/{version} (Linux; U; Android 11) gzip\","
    " \"context\": {\"clientScreen\": \"WATCH\", \"platform\": \"MOBILE\", \"osName\": \"Android\", \"osVersion\": "
    "\"11\","
    " \"androidSdkVersion\": 30, \"hl\": \"en\", \"gl\": \"US\", \"utcOffsetMinutes\": 0},"
    " \"context_members\": {\"request\": {\"internalExperimentFlags\": [], \"useSsl\": true},"
    " \"user\": {\"lockedSafetyMode\": false}},"
    " \"headers\": {\"X-Goog-Api-Format-Version\": \"2\"},"
    " \"host\": \"youtubei.googleapis.com\", \"path\": \"/youtubei/v1/reel/reel_item_watch\","
    " \"query\": {\"t\": \"{nonce:12}\", \"id\": \"{video_id}\", \"$fields\": \"playerResponse\"},"
    " \"request_members\": {\"cpn\": \"{nonce:16}\"},"
    " \"wrapper\": {\"request\": \"playerRequest\", \"reply\": \"playerResponse\","
    " \"members\": {\"disablePlayerResponse\": false}},"
    " \"visitor_data\": \"fetch\"},"
    "{\"name\": \"IOS\", \"client_id\": 5, \"version\": \"21.26.4\","
    " \"user_agent\": \"com.google.ios.youtube/{version} (iPhone16,2; U; CPU iOS 18_3_2 like Mac OS X;)\","
    " \"user_agent_in_context\": true,"
    " \"context\": {\"deviceMake\": \"Apple\", \"deviceModel\": \"iPhone16,2\", \"osName\": \"iPhone\","
    " \"osVersion\": \"18.3.2.22D82\", \"platform\": \"MOBILE\", \"hl\": \"en\", \"gl\": \"US\", \"utcOffsetMinutes\": "
    "0}},"
    "{\"name\": \"WEB\", \"client_id\": 1, \"version\": \"2.20260708.00.00\", \"user_agent\": \"" PROFILES_BROWSER_UA
    "\","
    " \"needs_page\": true,"
    " \"context\": {\"platform\": \"DESKTOP\", \"hl\": \"en\", \"gl\": \"US\", \"utcOffsetMinutes\": 0}},"
    "{\"name\": \"WEB_EMBEDDED\", \"client_name\": \"WEB_EMBEDDED_PLAYER\", \"client_id\": 56,"
    " \"version\": \"2.20260708.00.00\", \"user_agent\": \"" PROFILES_BROWSER_UA
    "\","
    " \"context\": {\"clientScreen\": \"EMBED\", \"platform\": \"DESKTOP\", \"hl\": \"en\", \"gl\": \"US\","
    " \"utcOffsetMinutes\": 0},"
    " \"context_members\": {\"thirdParty\": {\"embedUrl\": \"https://www.reddit.com/\"}},"
    " \"headers\": {\"Referer\": \"https://www.reddit.com/\"}, \"origin\": \"https://www.youtube.com\","
    " \"visitor_data\": \"fetch\"}"
    "]}";

void profiles_builtin(struct profile_set *out) {
  char err[256];
  memset(out, 0, sizeof(*out));
  /* The table is part of the program: a unit test proves it reads; failing here is a broken build. */
  if (profiles_apply_json(out, builtin_doc, sizeof(builtin_doc) - 1, err, sizeof(err)) != 0) {
    log_msg(LOG_ERROR, "built-in client profiles unreadable", "error", err, NULL);
    abort();
  }
}

const struct client_profile *profiles_find(const struct profile_set *set, const char *name) {
  for (size_t i = 0; i < set->n; i++)
    if (strcmp(set->p[i].name, name) == 0) return &set->p[i];
  return NULL;
}

/* Whether s is 1 to max-1 bytes, all from allowed (NULL: printable ASCII). */
static int valid_text(const char *s, const char *allowed, size_t max) {
  size_t n = strlen(s);
  if (n == 0 || n >= max) return 0;
  if (allowed != NULL) return strspn(s, allowed) == n;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e) return 0;
  return 1;
}

/* A JSON integer, or a string of digits, as text. Returns 0, or -EINVAL. */
static int digits_of(yajl_val v, char *out, size_t outlen) {
  const char *s = YAJL_IS_STRING(v) ? YAJL_GET_STRING(v) : YAJL_IS_INTEGER(v) ? YAJL_GET_NUMBER(v) : NULL;
  if (s == NULL || !valid_text(s, "0123456789", outlen)) return -EINVAL;
  snprintf(out, outlen, "%s", s);
  return 0;
}

/* A name from the document, fit to be quoted in a one-line message: at most 40 bytes, unprintable ones as '?'. */
static const char *shown(const char *name, char out[41]) {
  size_t i = 0;
  for (; name[i] != '\0' && i < 40; i++) out[i] = (name[i] >= 0x20 && name[i] <= 0x7e) ? name[i] : '?';
  out[i] = '\0';
  return out;
}

#define BAD(...)                        \
  do {                                  \
    snprintf(err, errlen, __VA_ARGS__); \
    return -EINVAL;                     \
  } while (0)

static int parse_context(yajl_val ctx, struct client_profile *p, char *err, size_t errlen) {
  if (!YAJL_IS_OBJECT(ctx)) BAD("profile %s: \"context\" must be an object", p->name);
  if (ctx->u.object.len > PROFILES_MAX_FIELDS)
    BAD("profile %s: \"context\" has more than %d members", p->name, PROFILES_MAX_FIELDS);
  for (size_t i = 0; i < ctx->u.object.len; i++) {
    const char *key = ctx->u.object.keys[i];
    yajl_val v = ctx->u.object.values[i];
    struct profile_field *f = &p->fields[p->nfields];
    char show[41];
    if (!valid_text(key, ALNUM "_", sizeof(f->key)) || strcmp(key, "clientName") == 0 ||
        strcmp(key, "clientVersion") == 0 || strcmp(key, "visitorData") == 0 || strcmp(key, "userAgent") == 0)
      BAD("profile %s: context member \"%s\" is not allowed (letters, digits and _; not clientName, "
          "clientVersion, userAgent or visitorData)",
          p->name, shown(key, show));
    if (YAJL_IS_INTEGER(v)) {
      f->is_number = 1;
      snprintf(f->value, sizeof(f->value), "%s", YAJL_GET_NUMBER(v));
    } else if (YAJL_IS_STRING(v) && valid_text(YAJL_GET_STRING(v), NULL, sizeof(f->value))) {
      f->is_number = 0;
      snprintf(f->value, sizeof(f->value), "%s", YAJL_GET_STRING(v));
    } else {
      BAD("profile %s: context member \"%s\" must be an integer or a printable string of at most %zu bytes", p->name,
          key, sizeof(f->value) - 1);
    }
    snprintf(f->key, sizeof(f->key), "%s", key);
    p->nfields++;
  }
  return 0;
}

/*
 * Header names a profile may not set: the message's framing and routing (Host, Content-Length, Transfer-Encoding,
 * Expect) and the hop-by-hop headers of RFC 9110 7.6.1 (Connection and those it names by custom, TE, Trailer,
 * Upgrade, and every Proxy-* header). The HTTP client writes these itself; a second one from a profile would send a
 * malformed or misrouted player call. An entry ending in '-' is a prefix.
 */
static const char *const framing_headers[] = {
    "Host", "Content-Length", "Transfer-Encoding", "Expect", "Connection", "Keep-Alive",
    "TE",   "Trailer",        "Upgrade",           "Proxy-"};

/* The framing or hop-by-hop name that name is (or starts with, for a prefix), or NULL. */
static const char *framing_header(const char *name) {
  for (size_t i = 0; i < sizeof(framing_headers) / sizeof(framing_headers[0]); i++) {
    const char *f = framing_headers[i];
    size_t fl = strlen(f);
    int prefix = f[fl - 1] == '-';
    if (prefix ? strncasecmp(name, f, fl) == 0 : strcasecmp(name, f) == 0) return f;
  }
  return NULL;
}

static int parse_headers(yajl_val h, struct client_profile *p, char *err, size_t errlen) {
  if (!YAJL_IS_OBJECT(h)) BAD("profile %s: \"headers\" must be an object", p->name);
  if (h->u.object.len > PROFILES_MAX_HEADERS)
    BAD("profile %s: \"headers\" has more than %d members", p->name, PROFILES_MAX_HEADERS);
  for (size_t i = 0; i < h->u.object.len; i++) {
    const char *name = h->u.object.keys[i];
    yajl_val v = h->u.object.values[i];
    char show[41];
    if (!valid_text(name, ALNUM "-", 64))
      BAD("profile %s: header name \"%s\" is not a token (letters, digits and -)", p->name, shown(name, show));
    if (framing_header(name) != NULL)
      BAD("profile %s: header %s is a framing or hop-by-hop header the client writes itself (not Host, "
          "Content-Length, Transfer-Encoding, Expect, Connection, Keep-Alive, TE, Trailer, Upgrade or Proxy-*)",
          p->name, name);
    if (!YAJL_IS_STRING(v) || !valid_text(YAJL_GET_STRING(v), NULL, 120))
      BAD("profile %s: header %s must be a printable string of at most 119 bytes", p->name, name);
    snprintf(p->headers[p->nheaders++], sizeof(p->headers[0]), "%s: %s", name, YAJL_GET_STRING(v));
  }
  return 0;
}

/*
 * Whether the template text s holds only known placeholders: {video_id} and {nonce:N} with 1 <= N <=
 * PROFILES_MAX_NONCE. Any other '{' or '}' is refused, so that what a profile sends is what it says.
 */
static int valid_template(const char *s) {
  for (const char *at = strpbrk(s, "{}"); at != NULL; at = strpbrk(at, "{}")) {
    if (*at == '}') return 0;
    if (strncmp(at, "{video_id}", 10) == 0) {
      at += 10;
      continue;
    }
    if (strncmp(at, "{nonce:", 7) != 0) return 0;
    const char *d = at + 7;
    size_t nd = strspn(d, "0123456789");
    if (nd == 0 || nd > 2 || d[nd] != '}') return 0;
    long n = strtol(d, NULL, 10);
    if (n < 1 || n > PROFILES_MAX_NONCE) return 0;
    at = d + nd + 1;
  }
  return 1;
}

#define MEMBERS_MAX_DEPTH 4 /* nesting of an extra member's value */
#define MEMBERS_MAX_STRING 256

/*
 * Writes the JSON value v to out, checked: objects (member names of letters, digits and _, none twice), arrays,
 * strings of printable ASCII (templates when template is set), integers, true, false and null, nested at most
 * MEMBERS_MAX_DEPTH deep. Returns 0, -ENOMEM, or -EINVAL with what is wrong in why.
 */
static int write_value(yajl_val v, int depth, int template, struct buf *out, const char **why) {
  int rv = 0;
  if (depth > MEMBERS_MAX_DEPTH) {
    *why = "is nested too deep (at most 4 levels)";
    return -EINVAL;
  }
  if (YAJL_IS_OBJECT(v)) {
    rv = buf_puts(out, "{");
    for (size_t i = 0; rv == 0 && i < v->u.object.len; i++) {
      const char *key = v->u.object.keys[i];
      if (!valid_text(key, ALNUM "_", 32)) {
        *why = "has a member name that is not 1 to 31 letters, digits and _";
        return -EINVAL;
      }
      for (size_t j = 0; j < i; j++) {
        if (strcmp(v->u.object.keys[j], key) == 0) {
          *why = "has a member given more than once";
          return -EINVAL;
        }
      }
      rv = buf_printf(out, "%s\"%s\":", i ? "," : "", key);
      if (rv == 0) rv = write_value(v->u.object.values[i], depth + 1, template, out, why);
    }
    return rv == 0 ? buf_puts(out, "}") : rv;
  }
  if (YAJL_IS_ARRAY(v)) {
    rv = buf_puts(out, "[");
    for (size_t i = 0; rv == 0 && i < v->u.array.len; i++) {
      if (i > 0) rv = buf_puts(out, ",");
      if (rv == 0) rv = write_value(v->u.array.values[i], depth + 1, template, out, why);
    }
    return rv == 0 ? buf_puts(out, "]") : rv;
  }
  if (YAJL_IS_STRING(v)) {
    const char *t = YAJL_GET_STRING(v);
    if ((t[0] != '\0' && !valid_text(t, NULL, MEMBERS_MAX_STRING)) || (template && !valid_template(t))) {
      *why = template ? "has a string that is not printable ASCII of at most 255 bytes with only {video_id} and "
                        "{nonce:N} placeholders"
                      : "has a string that is not printable ASCII of at most 255 bytes";
      return -EINVAL;
    }
    rv = buf_puts(out, "\"");
    if (rv == 0) rv = buf_json_escape(out, t, strlen(t));
    return rv == 0 ? buf_puts(out, "\"") : rv;
  }
  if (YAJL_IS_INTEGER(v)) return buf_puts(out, YAJL_GET_NUMBER(v));
  if (YAJL_IS_TRUE(v)) return buf_puts(out, "true");
  if (YAJL_IS_FALSE(v)) return buf_puts(out, "false");
  if (YAJL_IS_NULL(v)) return buf_puts(out, "null");
  *why = "has a number that is not an integer";
  return -EINVAL;
}

/*
 * The members of object v as JSON text (",\"a\":1,\"b\":{...}") into out (outlen bytes), none named as one of
 * reserved (NULL-terminated). member names the profile's member for messages.
 */
static int members_text(const struct client_profile *p, const char *member, yajl_val v, const char *const *reserved,
                        int template, char *out, size_t outlen, char *err, size_t errlen) {
  if (!YAJL_IS_OBJECT(v)) BAD("profile %s: \"%s\" must be an object", p->name, member);
  for (size_t i = 0; i < v->u.object.len; i++) {
    for (const char *const *r = reserved; *r != NULL; r++) {
      if (strcmp(v->u.object.keys[i], *r) == 0)
        BAD("profile %s: \"%s\" may not hold \"%s\" (the fetcher writes it)", p->name, member, *r);
    }
  }
  struct buf text = BUF_INIT;
  const char *why = NULL;
  int rv = write_value(v, 1, template, &text, &why);
  /* Out is the members after a leading comma: text.len - 1 bytes of "{...}", and its NUL. */
  if (rv == 0 && text.len > 2 && text.len - 1 >= outlen) {
    why = "is too long as JSON (at most 1023 bytes)";
    rv = -EINVAL;
  }
  if (rv == 0) {
    /* "{...}" without its braces, each member after a comma. */
    snprintf(out, outlen, "%s%.*s", text.len > 2 ? "," : "", (int)(text.len - 2), text.data + 1);
  }
  buf_free(&text);
  if (rv == -EINVAL) BAD("profile %s: \"%s\" %s", p->name, member, why);
  return rv;
}

/* A string member that must be 1 to outlen-1 bytes of allowed (NULL: printable ASCII). */
static int text_member(const struct client_profile *p, const char *member, yajl_val v, const char *allowed,
                       const char *what, char *out, size_t outlen, char *err, size_t errlen) {
  if (!YAJL_IS_STRING(v) || !valid_text(YAJL_GET_STRING(v), allowed, outlen))
    BAD("profile %s: \"%s\" must be %s of at most %zu bytes", p->name, member, what, outlen - 1);
  snprintf(out, outlen, "%s", YAJL_GET_STRING(v));
  return 0;
}

/* Checked as parse_headers checks its object: alike in shape, each with its own bounds, names and messages. */
static int parse_query(yajl_val q, struct client_profile *p, char *err, size_t errlen) {
  if (!YAJL_IS_OBJECT(q)) BAD("profile %s: \"query\" must be an object", p->name);
  if (q->u.object.len > PROFILES_MAX_QUERY)
    BAD("profile %s: \"query\" has more than %d members", p->name, PROFILES_MAX_QUERY);
  for (size_t i = 0; i < q->u.object.len; i++) {
    const char *key = q->u.object.keys[i];
    yajl_val v = q->u.object.values[i];
    char show[41];
    if (!valid_text(key, ALNUM "_$.-", sizeof(p->query[0][0])) || strcmp(key, "prettyPrint") == 0 ||
        strcmp(key, "key") == 0)
      BAD("profile %s: query parameter \"%s\" is not allowed (letters, digits, _, $, . and -; not prettyPrint "
          "or key)",
          p->name, shown(key, show));
    const char *value = YAJL_GET_STRING(v);
    if (value == NULL || !valid_text(value, ALNUM "_.,~-{}:", sizeof(p->query[0][1])) || !valid_template(value))
      BAD("profile %s: query parameter %s must be letters, digits, _ . , ~ - and the placeholders {video_id} "
          "and {nonce:N}, at most %zu bytes",
          p->name, key, sizeof(p->query[0][1]) - 1);
    snprintf(p->query[p->nquery][0], sizeof(p->query[0][0]), "%s", key);
    snprintf(p->query[p->nquery][1], sizeof(p->query[0][1]), "%s", value);
    p->nquery++;
  }
  return 0;
}

static int parse_wrapper(yajl_val w, struct client_profile *p, char *err, size_t errlen) {
  if (!YAJL_IS_OBJECT(w)) BAD("profile %s: \"wrapper\" must be an object", p->name);
  for (size_t i = 0; i < w->u.object.len; i++) {
    const char *key = w->u.object.keys[i];
    yajl_val v = w->u.object.values[i];
    char show[41];
    int rv = 0;
    if (strcmp(key, "request") == 0) {
      rv = text_member(p, "wrapper.request", v, ALNUM "_", "letters, digits and _", p->wrap_request,
                       sizeof(p->wrap_request), err, errlen);
    } else if (strcmp(key, "reply") == 0) {
      rv = text_member(p, "wrapper.reply", v, ALNUM "_", "letters, digits and _", p->wrap_reply, sizeof(p->wrap_reply),
                       err, errlen);
    } else if (strcmp(key, "members") == 0) {
      continue; /* read below, once the request member is known */
    } else {
      BAD("profile %s: unknown member \"wrapper.%s\" (known: request, reply, members)", p->name, shown(key, show));
    }
    if (rv != 0) return rv;
  }
  if (p->wrap_request[0] == '\0') BAD("profile %s: \"wrapper.request\" is required", p->name);
  if (strcmp(p->wrap_request, "context") == 0) BAD("profile %s: \"wrapper.request\" may not be context", p->name);
  const char *path[] = {"members", NULL};
  yajl_val members = yajl_tree_get(w, path, yajl_t_any);
  if (members == NULL) return 0;
  const char *reserved[] = {"context", p->wrap_request, NULL};
  return members_text(p, "wrapper.members", members, reserved, 1, p->wrap_members, sizeof(p->wrap_members), err,
                      errlen);
}

/* The visitor_data member: where it comes from. */
static int parse_visitor(yajl_val v, struct client_profile *p, char *err, size_t errlen) {
  static const struct {
    const char *name;
    enum profile_visitor mode;
  } modes[] = {{"none", PROFILE_VISITOR_NONE},
               {"page", PROFILE_VISITOR_PAGE},
               {"local", PROFILE_VISITOR_LOCAL},
               {"fetch", PROFILE_VISITOR_FETCH}};
  const char *t = YAJL_IS_STRING(v) ? YAJL_GET_STRING(v) : "";
  for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
    if (strcmp(t, modes[i].name) == 0) {
      p->visitor = modes[i].mode;
      return 0;
    }
  }
  BAD("profile %s: \"visitor_data\" must be \"none\", \"page\", \"local\" or \"fetch\"", p->name);
}

/*
 * The members that say how the player call is made (beside the client's identity): client_name, host, path, query,
 * context_members, request_members, wrapper, visitor_data, visitor_renew_s and origin.
 */
static int parse_request_member(const char *key, yajl_val v, struct client_profile *p, char *err, size_t errlen) {
  char show[41];
  const char *t = YAJL_IS_STRING(v) && YAJL_GET_STRING(v) != NULL ? YAJL_GET_STRING(v) : "";
  if (strcmp(key, "client_name") == 0)
    return text_member(p, key, v, UPPER "0123456789_", "A-Z, 0-9 and _", p->client_name, sizeof(p->client_name), err,
                       errlen);
  if (strcmp(key, "host") == 0) {
    if (!upstream_api_host(t))
      BAD("profile %s: \"host\" must be a platform host: www.youtube.com, youtubei.googleapis.com, m.youtube.com "
          "or music.youtube.com",
          p->name);
    snprintf(p->host, sizeof(p->host), "%s", t);
    return 0;
  }
  if (strcmp(key, "path") == 0) {
    if (!valid_text(t, ALNUM "/_.-", sizeof(p->path)) || strncmp(t, "/youtubei/", 10) != 0 || strstr(t, "..") != NULL)
      BAD("profile %s: \"path\" must start with /youtubei/ and hold letters, digits, / _ . and - (no ..), at most "
          "%zu bytes",
          p->name, sizeof(p->path) - 1);
    snprintf(p->path, sizeof(p->path), "%s", t);
    return 0;
  }
  if (strcmp(key, "query") == 0) return parse_query(v, p, err, errlen);
  if (strcmp(key, "context_members") == 0) {
    const char *reserved[] = {"client", NULL};
    return members_text(p, key, v, reserved, 0, p->context_members, sizeof(p->context_members), err, errlen);
  }
  if (strcmp(key, "request_members") == 0) {
    const char *reserved[] = {"videoId", "contentCheckOk", "racyCheckOk", "context", NULL};
    return members_text(p, key, v, reserved, 1, p->request_members, sizeof(p->request_members), err, errlen);
  }
  if (strcmp(key, "wrapper") == 0) return parse_wrapper(v, p, err, errlen);
  if (strcmp(key, "visitor_data") == 0) return parse_visitor(v, p, err, errlen);
  if (strcmp(key, "visitor_renew_s") == 0) {
    if (!YAJL_IS_INTEGER(v) || YAJL_GET_INTEGER(v) < 1 || YAJL_GET_INTEGER(v) > 30 * 86400)
      BAD("profile %s: \"visitor_renew_s\" must be an integer of seconds from 1 to 2592000", p->name);
    p->visitor_renew_s = (unsigned)YAJL_GET_INTEGER(v);
    return 0;
  }
  if (strcmp(key, "origin") == 0) {
    if (strncmp(t, "https://", 8) != 0 || !valid_text(t + 8, ALNUM ".-", sizeof(p->origin) - 8))
      BAD("profile %s: \"origin\" must be https:// and a host name (letters, digits, . and -), at most %zu bytes",
          p->name, sizeof(p->origin) - 1);
    snprintf(p->origin, sizeof(p->origin), "%s", t);
    return 0;
  }
  BAD("profile %s: unknown member \"%s\" (known: name, client_name, client_id, version, user_agent, "
      "user_agent_in_context, context, context_members, headers, origin, needs_page, host, path, query, "
      "request_members, wrapper, visitor_data, visitor_renew_s)",
      p->name, shown(key, show));
}

static int parse_profile(yajl_val o, size_t index, struct client_profile *p, char *err, size_t errlen) {
  memset(p, 0, sizeof(*p));
  if (!YAJL_IS_OBJECT(o)) BAD("profiles[%zu] must be an object", index);
  const char *name_path[] = {"name", NULL};
  yajl_val name = yajl_tree_get(o, name_path, yajl_t_string);
  if (name == NULL || !valid_text(YAJL_GET_STRING(name), UPPER "0123456789_", sizeof(p->name)))
    BAD("profiles[%zu]: \"name\" must be 1 to %zu characters of A-Z, 0-9 and _", index, sizeof(p->name) - 1);
  snprintf(p->name, sizeof(p->name), "%s", YAJL_GET_STRING(name));
  int have_id = 0, have_version = 0, have_ua = 0, have_visitor = 0;
  snprintf(p->host, sizeof(p->host), "%s", PROFILES_PLAYER_HOST);
  snprintf(p->path, sizeof(p->path), "%s", PROFILES_PLAYER_PATH);
  p->visitor_renew_s = PROFILES_VISITOR_RENEW_S;
  for (size_t i = 0; i < o->u.object.len; i++) {
    const char *key = o->u.object.keys[i];
    yajl_val v = o->u.object.values[i];
    /* A member given twice is a mistake in the file (and two "context" or "headers" would add up past the caps). */
    for (size_t j = 0; j < i; j++) {
      char show[41];
      if (strcmp(o->u.object.keys[j], key) == 0)
        BAD("profile %s: member \"%s\" is given more than once", p->name, shown(key, show));
    }
    if (strcmp(key, "name") == 0) continue;
    if (strcmp(key, "client_id") == 0) {
      if (digits_of(v, p->client_id, sizeof(p->client_id)) != 0)
        BAD("profile %s: \"client_id\" must be a number of at most %zu digits", p->name, sizeof(p->client_id) - 1);
      have_id = 1;
    } else if (strcmp(key, "version") == 0) {
      if (!YAJL_IS_STRING(v) || !valid_text(YAJL_GET_STRING(v), "0123456789.", sizeof(p->version)))
        BAD("profile %s: \"version\" must be digits and dots", p->name);
      snprintf(p->version, sizeof(p->version), "%s", YAJL_GET_STRING(v));
      have_version = 1;
    } else if (strcmp(key, "user_agent") == 0) {
      if (!YAJL_IS_STRING(v) || !valid_text(YAJL_GET_STRING(v), NULL, sizeof(p->user_agent)))
        BAD("profile %s: \"user_agent\" must be a printable string of at most %zu bytes", p->name,
            sizeof(p->user_agent) - 1);
      snprintf(p->user_agent, sizeof(p->user_agent), "%s", YAJL_GET_STRING(v));
      have_ua = 1;
    } else if (strcmp(key, "needs_page") == 0 || strcmp(key, "user_agent_in_context") == 0) {
      if (!YAJL_IS_TRUE(v) && !YAJL_IS_FALSE(v)) BAD("profile %s: \"%s\" must be true or false", p->name, key);
      *(key[0] == 'n' ? &p->needs_page : &p->user_agent_in_context) = YAJL_IS_TRUE(v);
    } else if (strcmp(key, "context") == 0) {
      int rv = parse_context(v, p, err, errlen);
      if (rv != 0) return rv;
    } else if (strcmp(key, "headers") == 0) {
      int rv = parse_headers(v, p, err, errlen);
      if (rv != 0) return rv;
    } else {
      int rv = parse_request_member(key, v, p, err, errlen);
      if (rv == 0 && strcmp(key, "visitor_data") == 0) have_visitor = 1;
      if (rv != 0) return rv;
    }
  }
  if (!have_id || !have_version || !have_ua)
    BAD("profile %s: \"client_id\", \"version\" and \"user_agent\" are required", p->name);
  if (p->client_name[0] == '\0') snprintf(p->client_name, sizeof(p->client_name), "%s", p->name);
  if (!have_visitor) p->visitor = p->needs_page ? PROFILE_VISITOR_PAGE : PROFILE_VISITOR_NONE;
  if (p->visitor == PROFILE_VISITOR_PAGE && !p->needs_page)
    BAD("profile %s: \"visitor_data\": \"page\" needs \"needs_page\": true", p->name);
  if (p->wrap_reply[0] != '\0' && p->wrap_request[0] == '\0')
    BAD("profile %s: \"wrapper.reply\" needs \"wrapper.request\"", p->name);
  return 0;
}

int profiles_apply_json(struct profile_set *set, const char *json, size_t len, char *err, size_t errlen) {
  char perr[256] = "";
  char *text = malloc(len + 1);
  if (text == NULL) return -ENOMEM;
  memcpy(text, json, len);
  text[len] = '\0';
  yajl_val root = yajl_tree_parse(text, perr, sizeof(perr));
  free(text);
  struct profile_set *next = malloc(sizeof(*next));
  int rv = -ENOMEM;
  if (next == NULL) goto done;
  rv = -EINVAL;
  if (root == NULL) {
    /* yajl's message spans lines; the first says what and where. */
    perr[strcspn(perr, "\n")] = '\0';
    for (char *c = perr; *c != '\0'; c++)
      if (*c < 0x20 || *c > 0x7e) *c = '?';
    snprintf(err, errlen, "not JSON: %s", perr[0] ? perr : "parse error");
    goto done;
  }
  const char *list_path[] = {"profiles", NULL};
  yajl_val list = YAJL_IS_OBJECT(root) ? yajl_tree_get(root, list_path, yajl_t_array) : NULL;
  if (list == NULL || root->u.object.len != 1) {
    snprintf(err, errlen, "expected {\"profiles\": [ ... ]} and nothing else");
    goto done;
  }
  *next = *set;
  for (size_t i = 0; i < list->u.array.len; i++) {
    struct client_profile p;
    rv = parse_profile(list->u.array.values[i], i, &p, err, errlen);
    if (rv != 0) goto done;
    rv = -EINVAL;
    struct client_profile *slot = (struct client_profile *)profiles_find(next, p.name);
    if (slot == NULL) {
      if (next->n == PROFILES_MAX) {
        snprintf(err, errlen, "more than %d profiles with the built-in ones", PROFILES_MAX);
        goto done;
      }
      slot = &next->p[next->n++];
    }
    *slot = p;
  }
  *set = *next;
  rv = 0;
done:
  free(next);
  if (root != NULL) yajl_tree_free(root);
  return rv;
}

/* Reads the whole file (at most PROFILES_MAX_FILE_BYTES). Returns 0, or -errno / -EFBIG. */
static int read_file(const char *path, struct stat *st, char **out, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int rv = -errno;
  if (fstat(fd, st) != 0) goto done;
  rv = -EFBIG;
  if (st->st_size > PROFILES_MAX_FILE_BYTES) goto done;
  rv = -ENOMEM;
  char *buf = malloc((size_t)st->st_size + 1);
  if (buf == NULL) goto done;
  size_t got = 0;
  while (got < (size_t)st->st_size) {
    ssize_t n = read(fd, buf + got, (size_t)st->st_size - got);
    if (n <= 0) break;
    got += (size_t)n;
  }
  *out = buf;
  *len = got;
  rv = 0;
done:
  close(fd);
  return rv;
}

/* Loads the file onto the built-ins. Returns 0, or an error with err set. Records the version looked at. */
static int load(struct profile_source *src, char *err, size_t errlen) {
  struct stat st;
  char *text = NULL;
  size_t len = 0;
  int rv = read_file(src->path, &st, &text, &len);
  if (rv != 0) {
    snprintf(err, errlen, "cannot read the file: %s", rv == -EFBIG ? "larger than 64 KiB" : strerror(-rv));
    /* A file too large is a version looked at; an unreadable one is retried at the next job. */
    if (rv == -EFBIG) {
      src->dev = st.st_dev;
      src->ino = st.st_ino;
      src->size = st.st_size;
      src->mtime = st.st_mtim;
      src->seen = 1;
    }
    return rv == -ENOMEM ? rv : -EINVAL;
  }
  src->dev = st.st_dev;
  src->ino = st.st_ino;
  src->size = st.st_size;
  src->mtime = st.st_mtim;
  src->seen = 1;
  struct profile_set set;
  profiles_builtin(&set);
  rv = profiles_apply_json(&set, text, len, err, errlen);
  free(text);
  if (rv == 0) {
    src->set = set;
    src->generation++;
  }
  return rv;
}

int profiles_source_init(struct profile_source *src, const char *path, char *err, size_t errlen) {
  memset(src, 0, sizeof(*src));
  profiles_builtin(&src->set);
  if (path == NULL || path[0] == '\0') return 0;
  snprintf(src->path, sizeof(src->path), "%s", path);
  char why[512];
  int rv = load(src, why, sizeof(why));
  if (rv != 0) snprintf(err, errlen, "VTS_CLIENT_PROFILES: refused: %s: %s", path, why);
  return rv;
}

int profiles_source_refresh(struct profile_source *src) {
  if (src->path[0] == '\0') return 0;
  struct stat st;
  if (stat(src->path, &st) != 0) {
    if (!src->missing)
      log_msg(LOG_WARN, "client profiles file unreadable: keeping the previous profiles", "file", src->path, "error",
              strerror(errno), NULL);
    src->missing = 1;
    return 0;
  }
  src->missing = 0;
  /* A stat per job: the file is re-read only when it is another file or was written since. */
  if (src->seen && st.st_dev == src->dev && st.st_ino == src->ino && st.st_size == src->size &&
      st.st_mtim.tv_sec == src->mtime.tv_sec && st.st_mtim.tv_nsec == src->mtime.tv_nsec)
    return 0;
  char why[512];
  if (load(src, why, sizeof(why)) != 0) {
    /* load recorded this version of the file: it is refused once, and looked at again when it changes. */
    log_msg(LOG_WARN, "client profiles refused: keeping the previous ones", "file", src->path, "error", why, NULL);
    return 0;
  }
  log_msg(LOG_INFO, "client profiles reloaded", "file", src->path, NULL);
  return 1;
}

int profiles_clients_parse(const struct profile_set *set, const char *spec, struct innertube_client *out, size_t max,
                           size_t *n, char *err, size_t errlen) {
  size_t count = 0;
  const char *p = spec;
  for (;;) {
    size_t len = strcspn(p, ",");
    const char *colon = memchr(p, ':', len);
    if (count == max) {
      snprintf(err, errlen, "VTS_INNERTUBE_CLIENTS: invalid value: at most %zu clients", max);
      return -EINVAL;
    }
    char name[32], version[32] = "";
    size_t name_len = colon ? (size_t)(colon - p) : len;
    size_t ver_len = colon ? len - name_len - 1 : 0;
    if (name_len == 0 || name_len >= sizeof(name) || (colon != NULL && ver_len == 0) || ver_len >= sizeof(version) ||
        (colon != NULL && strspn(colon + 1, "0123456789.") < ver_len)) {
      snprintf(err, errlen,
               "VTS_INNERTUBE_CLIENTS: invalid value: expected NAME[:VERSION][,NAME[:VERSION]...] "
               "with a version of digits and dots");
      return -EINVAL;
    }
    memcpy(name, p, name_len);
    name[name_len] = '\0';
    if (colon != NULL) {
      memcpy(version, colon + 1, ver_len);
      version[ver_len] = '\0';
    }
    const struct client_profile *prof = profiles_find(set, name);
    if (prof == NULL) {
      struct buf_names {
        char s[PROFILES_MAX * 33];
      } known = {""};
      size_t off = 0;
      for (size_t i = 0; i < set->n && off < sizeof(known.s); i++)
        off += (size_t)snprintf(known.s + off, sizeof(known.s) - off, "%s%s", i ? ", " : "", set->p[i].name);
      snprintf(err, errlen, "VTS_INNERTUBE_CLIENTS: invalid value: unknown client \"%.31s\" (known: %s)", name,
               known.s);
      return -EINVAL;
    }
    out[count].profile = *prof;
    if (version[0] != '\0') snprintf(out[count].profile.version, sizeof(out[count].profile.version), "%s", version);
    /* Trying the same client twice would repeat a request the platform has already refused. */
    for (size_t i = 0; i < count; i++) {
      if (strcmp(out[i].profile.name, name) == 0 && strcmp(out[i].profile.version, out[count].profile.version) == 0) {
        snprintf(err, errlen, "VTS_INNERTUBE_CLIENTS: invalid value: %.31s:%.31s is listed twice", name,
                 out[count].profile.version);
        return -EINVAL;
      }
    }
    count++;
    if (p[len] == '\0') break;
    p += len + 1;
  }
  *n = count;
  return 0;
}
