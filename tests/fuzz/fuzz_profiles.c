/* Fuzzes the client profiles document (VTS_CLIENT_PROFILES) and the client order resolved against it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
  return 0;
}
