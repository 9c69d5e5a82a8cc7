#include "gateway/http/routes.h"

#include <llhttp.h>
#include <string.h>

#include "common/util.h"

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

enum http_route route_find(const char *path, size_t len) {
  for (int r = 0; r < ROUTE_OTHER; r++) {
    if (strlen(routes[r].path) == len && memcmp(routes[r].path, path, len) == 0) return (enum http_route)r;
  }
  return ROUTE_OTHER;
}

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
