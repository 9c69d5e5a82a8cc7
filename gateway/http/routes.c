#include "gateway/http/routes.h"

#include <errno.h>
#include <llhttp.h>
#include <string.h>

#include "common/util.h"
#include "gateway/http/status.h"
#include "gateway/metrics/metrics.h"

_Static_assert(ROUTE__COUNT <= METRICS_MAX_ROUTES, "the metrics region has no room for every route");
_Static_assert(HTTP_NSTATUS <= METRICS_MAX_STATUSES, "the metrics region has no room for every status");

static const struct {
  const char *path;
  uint64_t methods;
  enum route_server server;
} routes[ROUTE__COUNT] = {
#define ROUTE_ROW_(id, path, methods, server, handler) [ROUTE_##id] = {path, methods, ROUTE_SERVER_##server},
    HTTP_ROUTES(ROUTE_ROW_)
#undef ROUTE_ROW_
        [ROUTE_OTHER] = {"other", 0, ROUTE_SERVER_PUBLIC},
};

#define ROUTE_ID_MARK "{id}"

static int id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/*
 * Whether path (len bytes) matches pattern; with "{id}" in it, where that segment is in path (*id_at, *id_len).
 * The id is what lies between the pattern's prefix and suffix: a non-empty run of id characters, so it never
 * holds a '/'.
 */
static int route_match(const char *pattern, const char *path, size_t len, size_t *id_at, size_t *id_len) {
  const char *mark = strstr(pattern, ROUTE_ID_MARK);
  if (mark == NULL) {
    *id_at = *id_len = 0;
    return strlen(pattern) == len && memcmp(pattern, path, len) == 0;
  }
  size_t pre = (size_t)(mark - pattern);
  const char *suffix = mark + strlen(ROUTE_ID_MARK);
  size_t post = strlen(suffix);
  if (len <= pre + post || memcmp(pattern, path, pre) != 0 || memcmp(suffix, path + len - post, post) != 0) return 0;
  size_t n = len - pre - post;
  if (n > ROUTE_ID_MAX) return 0;
  for (size_t i = 0; i < n; i++)
    if (!id_char(path[pre + i])) return 0;
  *id_at = pre;
  *id_len = n;
  return 1;
}

enum http_route route_find(const char *path, size_t len) {
  size_t at, n;
  for (int r = 0; r < ROUTE_OTHER; r++) {
    if (route_match(routes[r].path, path, len, &at, &n)) return (enum http_route)r;
  }
  return ROUTE_OTHER;
}

int route_id(enum http_route r, const char *path, size_t len, const char **id, size_t *id_len) {
  size_t at, n;
  if (r < 0 || r >= ROUTE_OTHER || !route_match(routes[r].path, path, len, &at, &n) || n == 0) return -ENOENT;
  *id = path + at;
  *id_len = n;
  return 0;
}

int route_reads_body(enum http_route r, int method) { return method == HTTP_POST && route_allows(r, method); }

const char *route_label(enum http_route r) { return r >= 0 && r < ROUTE__COUNT ? routes[r].path : "other"; }

int route_served_by(enum http_route r, enum route_server server) {
  return r >= 0 && r < ROUTE_OTHER && routes[r].server == server;
}

int route_allows(enum http_route r, int method) {
  return r >= 0 && r < ROUTE_OTHER && method >= 0 && method < 64 && (routes[r].methods & ROUTE_METHOD(method)) != 0;
}

const char *route_allow_header(enum http_route r, char *out, size_t cap) {
  struct strb b = strb_init(out, cap);
  strb_puts(&b, "Allow: ");
  const char *sep = "";
  for (int m = 0; m < 64; m++) {
    if (!route_allows(r, m)) continue;
    strb_puts(&b, sep);
    strb_puts(&b, llhttp_method_name((llhttp_method_t)m));
    sep = ", ";
  }
  strb_puts(&b, "\r\n");
  return out;
}

static const char *metrics_route_label(int route) { return route_label((enum http_route)route); }

void routes_metrics_register(void) {
  static const struct metrics_http_family family = {
      .nroutes = ROUTE__COUNT,
      .route_label = metrics_route_label,
      .nstatus = HTTP_NSTATUS,
      .status_index = http_status_index,
      .status_code = http_status_code,
  };
  metrics_register_http(&family);
}
