/* Stand-in until the key module lands: an empty store. */
#include "gateway/keys.h"

#include <stdlib.h>

struct keystore { int unused; };
struct keystore *keystore_load(const char *path, char *err, size_t errlen) { (void)path; (void)err; (void)errlen; return calloc(1, sizeof(struct keystore)); }
void keystore_free(struct keystore *ks) { free(ks); }
const struct key_entry *keystore_lookup(const struct keystore *ks, const char *key, size_t len) { (void)ks; (void)key; (void)len; return NULL; }
size_t keystore_count(const struct keystore *ks) { (void)ks; return 0; }
