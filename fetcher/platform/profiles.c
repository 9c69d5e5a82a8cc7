#include "fetcher/platform/profiles.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include "common/log.h"

#define UPPER "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#define ALNUM UPPER "abcdefghijklmnopqrstuvwxyz0123456789"

/*
 * The built-in profiles, as maintained downloaders sent them in late 2026 (checked against their state of August
 * 2026; ANDROID_VR left out: the platform refused all its formats from 2026-08-17). Versions move every few months: a
 * newer one goes into VTS_INNERTUBE_CLIENTS ("ANDROID:21.xx.yy") or, with a new identity, into VTS_CLIENT_PROFILES.
 */
struct builtin {
  const char *name, *client_id, *version, *user_agent;
  int needs_page;
  int user_agent_in_context;
  const char *fields[PROFILES_MAX_FIELDS][2]; /* key, value; a value starting with '#' is a number */
};

static const struct builtin builtins[] = {
    {"VISIONOS",
     "101",
     "1.02",
     "Mozilla/5.0 (Macintosh; Intel Mac OS X 15_7_3) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/26.0 "
     "Safari/605.1.15",
     0,
     1,
     {{"deviceMake", "Apple"},
      {"deviceModel", "RealityDevice17,1"},
      {"osName", "visionOS"},
      {"osVersion", "26.5.23O471"},
      {"hl", "en"},
      {"gl", "US"},
      {"utcOffsetMinutes", "#0"}}},
    {"ANDROID",
     "3",
     "21.26.364",
     "com.google.android.youtube/{version} (Linux; U; Android 11) gzip",
     0,
     1,
     {{"androidSdkVersion", "#30"},
      {"osName", "Android"},
      {"osVersion", "11"},
      {"platform", "MOBILE"},
      {"hl", "en"},
      {"gl", "US"},
      {"utcOffsetMinutes", "#0"}}},
    {"IOS",
     "5",
     "21.26.4",
     "com.google.ios.youtube/{version} (iPhone16,2; U; CPU iOS 18_3_2 like Mac OS X;)",
     0,
     1,
     {{"deviceMake", "Apple"},
      {"deviceModel", "iPhone16,2"},
      {"osName", "iPhone"},
      {"osVersion", "18.3.2.22D82"},
      {"platform", "MOBILE"},
      {"hl", "en"},
      {"gl", "US"},
      {"utcOffsetMinutes", "#0"}}},
    {"WEB",
     "1",
     "2.20260708.00.00",
     PROFILES_BROWSER_UA,
     1,
     0,
     {{"platform", "DESKTOP"}, {"hl", "en"}, {"gl", "US"}, {"utcOffsetMinutes", "#0"}}},
};

void profiles_builtin(struct profile_set *out) {
  memset(out, 0, sizeof(*out));
  for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++) {
    const struct builtin *b = &builtins[i];
    struct client_profile *p = &out->p[out->n++];
    snprintf(p->name, sizeof(p->name), "%s", b->name);
    snprintf(p->client_id, sizeof(p->client_id), "%s", b->client_id);
    snprintf(p->version, sizeof(p->version), "%s", b->version);
    snprintf(p->user_agent, sizeof(p->user_agent), "%s", b->user_agent);
    p->needs_page = b->needs_page;
    p->user_agent_in_context = b->user_agent_in_context;
    for (size_t f = 0; f < PROFILES_MAX_FIELDS && b->fields[f][0] != NULL; f++) {
      struct profile_field *pf = &p->fields[p->nfields++];
      const char *v = b->fields[f][1];
      pf->is_number = v[0] == '#';
      snprintf(pf->key, sizeof(pf->key), "%s", b->fields[f][0]);
      snprintf(pf->value, sizeof(pf->value), "%s", pf->is_number ? v + 1 : v);
    }
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
    if (!YAJL_IS_STRING(v) || !valid_text(YAJL_GET_STRING(v), NULL, 120))
      BAD("profile %s: header %s must be a printable string of at most 119 bytes", p->name, name);
    snprintf(p->headers[p->nheaders++], sizeof(p->headers[0]), "%s: %s", name, YAJL_GET_STRING(v));
  }
  return 0;
}

static int parse_profile(yajl_val o, size_t index, struct client_profile *p, char *err, size_t errlen) {
  memset(p, 0, sizeof(*p));
  if (!YAJL_IS_OBJECT(o)) BAD("profiles[%zu] must be an object", index);
  const char *name_path[] = {"name", NULL};
  yajl_val name = yajl_tree_get(o, name_path, yajl_t_string);
  if (name == NULL || !valid_text(YAJL_GET_STRING(name), UPPER "0123456789_", sizeof(p->name)))
    BAD("profiles[%zu]: \"name\" must be 1 to %zu characters of A-Z, 0-9 and _", index, sizeof(p->name) - 1);
  snprintf(p->name, sizeof(p->name), "%s", YAJL_GET_STRING(name));
  int have_id = 0, have_version = 0, have_ua = 0;
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
      char show[41];
      BAD("profile %s: unknown member \"%s\" (known: name, client_id, version, user_agent, user_agent_in_context, "
          "context, headers, needs_page)",
          p->name, shown(key, show));
    }
  }
  if (!have_id || !have_version || !have_ua)
    BAD("profile %s: \"client_id\", \"version\" and \"user_agent\" are required", p->name);
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
  char why[256];
  int rv = load(src, why, sizeof(why));
  if (rv != 0) snprintf(err, errlen, "VTS_CLIENT_PROFILES: refused: %s", why);
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
  char why[256];
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
