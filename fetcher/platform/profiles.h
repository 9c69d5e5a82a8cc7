/*
 * Client profiles: everything one platform client sends, as data. A profile is a name (and the clientName it sends,
 * the name unless said), the numeric client id (X-YouTube-Client-Name), a version (clientVersion and
 * X-YouTube-Client-Version), the user agent, the members of context.client beyond name and version (device make and
 * model, OS name and version, platform, hl, gl, ...), members of context outside context.client (thirdParty.embedUrl,
 * request, user), extra request headers and Origin, the host, path and extra query parameters of the player call, a
 * wrapper (the player request nested under a named member beside fixed members, the reply under another, as the reel
 * call does), extra members of the player request, where visitor data comes from (the watch page, made locally, or
 * fetched from the platform's visitor endpoint and renewed on a schedule), and whether the watch page is fetched
 * first (for its API key and visitor data).
 *
 * The built-in table follows what maintained downloaders send; VTS_CLIENT_PROFILES names a JSON file that adds
 * profiles or replaces built-in ones by name (docs/REFERENCE.md "Client profiles"); VTS_INNERTUBE_CLIENTS picks which
 * are tried, in order, by name, optionally overriding the version ("ANDROID" or "ANDROID:21.26.364").
 */
#ifndef VTS_PROFILES_H
#define VTS_PROFILES_H

#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#define PROFILES_MAX 16        /* profiles known at once (built-in and file) */
#define PROFILES_MAX_FIELDS 16 /* members of context.client beyond clientName and clientVersion */
#define PROFILES_MAX_HEADERS 8 /* extra headers of one profile */
#define PROFILES_MAX_FILE_BYTES (64 * 1024)
#define PROFILES_MAX_QUERY 6           /* extra query parameters of the player call */
#define PROFILES_MAX_MEMBERS_TEXT 1024 /* JSON text of a profile's extra members (context, wrapper, player request) */
#define PROFILES_MAX_NONCE 64          /* characters of one {nonce:N} */
#define PROFILES_VISITOR_RENEW_S 21600 /* visitor data made or fetched is renewed after this, unless said */
#define PROFILES_PLAYER_HOST "www.youtube.com"
#define PROFILES_PLAYER_PATH "/youtubei/v1/player"
#define PROFILES_VISITOR_PATH "/youtubei/v1/visitor_id"

/* A desktop browser's user agent: the WEB profile's, and the watch page's whatever the client. */
#define PROFILES_BROWSER_UA \
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/138.0.0.0 Safari/537.36"

struct profile_field {
  char key[32];
  char value[128];
  int is_number; /* sent as a JSON number (androidSdkVersion: 30), else as a string */
};

/* Where a profile's visitor data (context.client.visitorData and X-Goog-Visitor-Id) comes from. */
enum profile_visitor {
  PROFILE_VISITOR_NONE = 0, /* none is sent */
  PROFILE_VISITOR_PAGE,     /* the watch page's (needs_page) */
  PROFILE_VISITOR_LOCAL,    /* made by the fetcher, once, renewed every visitor_renew_s */
  PROFILE_VISITOR_FETCH,    /* asked of the visitor endpoint on the profile's host, once, renewed likewise */
};

/*
 * Strings marked "template" may hold {video_id} (the video's id) and {nonce:N} (N random characters of A-Z, a-z,
 * 0-9, - and _, 1 <= N <= PROFILES_MAX_NONCE, fresh for each request), expanded by client_expand.
 */
struct client_profile {
  char name[32];        /* the profile's name: A-Z, 0-9 and _ */
  char client_name[40]; /* clientName sent: the name unless the profile says another */
  char client_id[8];    /* X-YouTube-Client-Name, digits; "" sends none */
  char version[32];     /* digits and dots */
  char user_agent[256]; /* "{version}" in it is replaced by the version */
  struct profile_field fields[PROFILES_MAX_FIELDS];
  size_t nfields;
  char headers[PROFILES_MAX_HEADERS][192]; /* "Name: value" */
  size_t nheaders;
  int needs_page;
  int user_agent_in_context; /* the user agent is also sent as context.client.userAgent, as app clients do */
  char host[64];             /* host of the player call, a platform host (upstream_api_host) */
  char path[96];             /* path of the player call */
  char query[PROFILES_MAX_QUERY][2][64]; /* extra query parameters: name, value (template), after prettyPrint */
  size_t nquery;
  /* Members as JSON text, each ",\"name\":value..." (empty for none), checked and written when the profile is read. */
  char context_members[PROFILES_MAX_MEMBERS_TEXT]; /* of context, beside client */
  char request_members[PROFILES_MAX_MEMBERS_TEXT]; /* of the player request, beside videoId and the checks (template) */
  char wrap_members[PROFILES_MAX_MEMBERS_TEXT];    /* of the body beside context and wrap_request (template) */
  char wrap_request[32];                           /* the member the player request is nested under, "" for none */
  char wrap_reply[32]; /* the member of the reply the player reply sits under, "" for none */
  enum profile_visitor visitor;
  unsigned visitor_renew_s; /* LOCAL and FETCH: renewed after this many seconds */
  char origin[80];          /* the Origin header, "" for none */
};

struct profile_set {
  struct client_profile p[PROFILES_MAX];
  size_t n;
};

/* The built-in profiles. */
void profiles_builtin(struct profile_set *out);

/* The profile named name in set, or NULL. */
const struct client_profile *profiles_find(const struct profile_set *set, const char *name);

/*
 * Applies the JSON document (len bytes) to set: each profile in it is added, or replaces the built-in one of the same
 * name whole. On any error set is left as it was and err holds one line saying what is wrong (profile and member).
 * Returns 0, -EINVAL or -ENOMEM.
 */
int profiles_apply_json(struct profile_set *set, const char *json, size_t len, char *err, size_t errlen);

/*
 * The profiles of a fetcher, kept current: built-ins plus the file at path ("" for none), re-read when the file's
 * inode, size or modification time changed. A file that cannot be read or is refused keeps the profiles in force
 * and logs one warning line naming what is wrong (once per version of the file).
 */
struct profile_source {
  char path[4096];
  struct profile_set set;
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
  int seen;            /* dev, ino, size and mtime name a version of the file looked at (applied or refused) */
  int missing;         /* the file could not be found at the last look (logged once) */
  unsigned generation; /* bumped whenever set changes */
};

/* Loads built-ins and the file. Returns 0, or -EINVAL with err saying what is wrong with the file (start refuses it).
 */
int profiles_source_init(struct profile_source *src, const char *path, char *err, size_t errlen);

/* Re-reads the file when it changed. Returns 1 when the profiles changed, else 0. */
int profiles_source_refresh(struct profile_source *src);

/*
 * One entry of VTS_INNERTUBE_CLIENTS resolved against a profile set: the profile copied, with the version of the
 * entry when it names one.
 */
struct innertube_client {
  struct client_profile profile;
};

/*
 * Parses VTS_INNERTUBE_CLIENTS ("NAME[:VERSION],..."): names of profiles in set, versions of digits and dots, no
 * repeated entry, at most max. Returns 0 and the count in *n, or -EINVAL with a one-line message in err.
 */
int profiles_clients_parse(const struct profile_set *set, const char *spec, struct innertube_client *out, size_t max,
                           size_t *n, char *err, size_t errlen);

#endif
