/*
 * video_url -> video id, by parsing alone: the URL is never fetched, so the only thing that matters is that a
 * client cannot make us serve a video other than the one an ordinary reader of the URL would see.
 *
 * Decisions (also in the OpenAPI description):
 * - The URL is taken as it arrives after the query string was decoded once. It is not decoded again: a '%' in the
 *   host, the path or the id makes the URL invalid, so "youtube%2Ecom" or a double-encoded id never match.
 * - Only printable ASCII without spaces or backslashes: a raw '+' in the query string decodes to a space, which is
 *   not a URL character, so a client that forgot to encode its URL gets a clear 400 rather than a guess.
 * - Scheme http or https, any case; "//host" and scheme-less URLs are rejected.
 * - No userinfo ('@' anywhere in the authority). Port: none, or the scheme's default (http:80, https:443).
 * - Host compared exactly, case-insensitively, against the list below; one trailing dot ("youtube.com.") names the
 *   same DNS host and is accepted. Anything else, including IP literals and lookalikes, is rejected.
 * - Paths are case-sensitive, as on the platform. youtube.com hosts: /watch?v=ID (v exactly once, at any position),
 *   /shorts/ID, /live/ID, /embed/ID, /v/ID, /e/ID; youtube-nocookie.com hosts: /embed/ID; youtu.be: /ID. After a
 *   path id one '/' is allowed, then a '?query' and a '#fragment' are ignored.
 * - "/embed/videoseries" is a playlist player whose path segment happens to be 11 letters: rejected.
 */
#include "gateway/http/videourl.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "common/ident.h"
#include "common/limits.h"

enum host_kind { HOST_NONE = 0, HOST_YOUTUBE, HOST_NOCOOKIE, HOST_SHORT };

/* The hosts a video URL may name; a host's kind says where in the URL the id stands. */
static const struct {
  const char *name;
  enum host_kind kind;
} hosts[] = {
    {"youtube.com", HOST_YOUTUBE},
    {"www.youtube.com", HOST_YOUTUBE},
    {"m.youtube.com", HOST_YOUTUBE},
    {"music.youtube.com", HOST_YOUTUBE},
    {"youtube-nocookie.com", HOST_NOCOOKIE},
    {"www.youtube-nocookie.com", HOST_NOCOOKIE},
    {"youtu.be", HOST_SHORT},
};

/* Path prefixes on youtube.com hosts that are followed by the id. */
static const char *const id_prefixes[] = {"/shorts/", "/live/", "/embed/", "/v/", "/e/"};

/* A (base, len) slice of the URL. */
struct span {
  const char *p;
  size_t len;
};

static int span_is(struct span s, const char *lit) { return s.len == strlen(lit) && memcmp(s.p, lit, s.len) == 0; }

static int span_starts(struct span s, const char *lit) {
  size_t n = strlen(lit);
  return s.len >= n && memcmp(s.p, lit, n) == 0;
}

static enum host_kind host_kind(struct span host) {
  if (host.len > 0 && host.p[host.len - 1] == '.') host.len--;
  for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
    if (host.len == strlen(hosts[i].name) && strncasecmp(host.p, hosts[i].name, host.len) == 0) return hosts[i].kind;
  }
  return HOST_NONE;
}

/* Copies an id slice out if it is a valid id. Returns 0, or -EINVAL. */
static int take_id(struct span s, char id[12]) {
  if (!ident_video_id_valid(s.p, s.len)) return -EINVAL;
  memcpy(id, s.p, VTS_VIDEO_ID_LEN);
  id[VTS_VIDEO_ID_LEN] = '\0';
  return 0;
}

/* A path of the form "<prefix>ID" or "<prefix>ID/". A path shorter than the prefix (even empty) is no id. */
static int id_after_prefix(struct span path, const char *prefix, char id[12]) {
  if (!span_starts(path, prefix)) return -EINVAL;
  struct span rest = {path.p + strlen(prefix), path.len - strlen(prefix)};
  if (rest.len > 0 && rest.p[rest.len - 1] == '/') rest.len--;
  if (span_is(rest, "videoseries")) return -EINVAL;
  return take_id(rest, id);
}

/* The value of the one "v" parameter of a watch URL's query. Two "v" parameters are ambiguous and rejected. */
static int id_from_watch_query(struct span query, char id[12]) {
  struct span found = {NULL, 0};
  int count = 0;
  size_t pos = 0;
  while (pos < query.len) {
    const char *pair = query.p + pos;
    const char *amp = memchr(pair, '&', query.len - pos);
    size_t pair_len = amp ? (size_t)(amp - pair) : query.len - pos;
    pos += pair_len + 1;
    if (pair_len >= 2 && pair[0] == 'v' && pair[1] == '=') {
      found.p = pair + 2;
      found.len = pair_len - 2;
      count++;
    }
  }
  if (count != 1) return -EINVAL;
  return take_id(found, id);
}

/* Splits "scheme://" off. Returns the default port of the scheme (80 or 443), or 0 for anything else. */
static int scheme_port(struct span *rest) {
  if (rest->len >= 7 && strncasecmp(rest->p, "http://", 7) == 0) {
    rest->p += 7;
    rest->len -= 7;
    return 80;
  }
  if (rest->len >= 8 && strncasecmp(rest->p, "https://", 8) == 0) {
    rest->p += 8;
    rest->len -= 8;
    return 443;
  }
  return 0;
}

int videourl_parse(const char *url, size_t len, char id[12]) {
  id[0] = '\0';
  if (url == NULL || len == 0 || len > VTS_MAX_VIDEO_URL_BYTES) return -EINVAL;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)url[i];
    if (c <= 0x20 || c >= 0x7f || c == '\\') return -EINVAL;
  }

  struct span rest = {url, len};
  int default_port = scheme_port(&rest);
  if (default_port == 0) return -EINVAL;

  /* The authority runs to the first '/', '?' or '#'. */
  size_t a = 0;
  while (a < rest.len && rest.p[a] != '/' && rest.p[a] != '?' && rest.p[a] != '#') a++;
  struct span authority = {rest.p, a};
  if (memchr(authority.p, '@', authority.len) != NULL) return -EINVAL;
  if (memchr(authority.p, '%', authority.len) != NULL) return -EINVAL;
  struct span host = authority;
  const char *colon = memchr(authority.p, ':', authority.len);
  if (colon != NULL) {
    host.len = (size_t)(colon - authority.p);
    struct span port = {colon + 1, authority.len - host.len - 1};
    if (!(default_port == 80 && span_is(port, "80")) && !(default_port == 443 && span_is(port, "443"))) {
      return -EINVAL;
    }
  }
  enum host_kind kind = host_kind(host);
  if (kind == HOST_NONE) return -EINVAL;

  /* Path to the first '?' or '#', query to the first '#'; the fragment is ignored. */
  struct span after = {rest.p + a, rest.len - a};
  const char *hash = memchr(after.p, '#', after.len);
  if (hash != NULL) after.len = (size_t)(hash - after.p);
  const char *qmark = memchr(after.p, '?', after.len);
  struct span path = {after.p, qmark ? (size_t)(qmark - after.p) : after.len};
  struct span query = {qmark ? qmark + 1 : after.p + after.len, qmark ? after.len - path.len - 1 : 0};
  if (memchr(path.p, '%', path.len) != NULL) return -EINVAL;

  switch (kind) {
    case HOST_SHORT:
      return id_after_prefix(path, "/", id);
    case HOST_NOCOOKIE:
      return id_after_prefix(path, "/embed/", id);
    case HOST_YOUTUBE:
      if (span_is(path, "/watch")) return id_from_watch_query(query, id);
      for (size_t i = 0; i < sizeof(id_prefixes) / sizeof(id_prefixes[0]); i++) {
        if (span_starts(path, id_prefixes[i])) return id_after_prefix(path, id_prefixes[i], id);
      }
      return -EINVAL;
    case HOST_NONE:
      break;
  }
  return -EINVAL;
}
