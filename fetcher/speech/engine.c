#include "fetcher/speech/engine.h"

#include <string.h>

#define SPEECH_ENGINE_ROW(name) &speech_engine_##name,
static const struct speech_engine *const engines[] = {SPEECH_ENGINES(SPEECH_ENGINE_ROW)};
#undef SPEECH_ENGINE_ROW

const struct speech_engine *speech_engine_find(const char *name) {
  if (name == NULL) return NULL;
  for (size_t i = 0; i < sizeof(engines) / sizeof(engines[0]); i++) {
    if (strcmp(engines[i]->name, name) == 0) return engines[i];
  }
  return NULL;
}
