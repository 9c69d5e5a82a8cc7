/*
 * Fuzzes the client profiles document (VTS_CLIENT_PROFILES), the client order resolved against it, and the requests
 * of every profile it makes: each player and visitor body must be one JSON object, whatever the document said.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_tree.h>

#include "common/buf.h"
#include "fetcher/platform/client.h"
#include "fetcher/platform/profiles.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static struct profile_set set, before;
  char err[256];
  profiles_builtin(&set);
  before = set;
  int rv = profiles_apply_json(&set, (const char *)data, size, err, sizeof(err));
  /* A refused document leaves the profiles as they were, and says why on one line. */
  if (rv != 0 && (memcmp(&set, &before, sizeof(set)) != 0 || strchr(err, '\n') != NULL)) abort();
  if (rv == 0 && (set.n < before.n || set.n > PROFILES_MAX)) abort();
  struct innertube_client clients[8];
  size_t n = 0;
  if (profiles_clients_parse(&set, "VISIONOS,ANDROID:21.1", clients, 8, &n, err, sizeof(err)) != 0 || n != 2) abort();
  for (size_t i = 0; rv == 0 && i < set.n; i++) {
    struct buf url = BUF_INIT, body = BUF_INIT, visitor = BUF_INIT;
    if (client_player_url(&set.p[i], "abcdefghijk", "key", &url) != 0 ||
        client_player_body(&set.p[i], "ua", "abcdefghijk", "Cgt%3D", &body) != 0 ||
        client_visitor_body(&set.p[i], "ua", &visitor) != 0)
      abort();
    const struct buf *bodies[] = {&body, &visitor};
    for (size_t b = 0; b < 2; b++) {
      yajl_val doc = yajl_tree_parse(bodies[b]->data, NULL, 0);
      if (doc == NULL || !YAJL_IS_OBJECT(doc)) abort();
      yajl_tree_free(doc);
    }
    buf_free(&url);
    buf_free(&body);
    buf_free(&visitor);
  }
  return 0;
}
