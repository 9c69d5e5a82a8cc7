#include "fetcher/egress/outcome.h"

#include <stdio.h>

#include "proto/proto.h"

int fetch_outcome_set(struct fetch_outcome *o, uint8_t outcome, uint8_t reason, const char *detail) {
  o->outcome = outcome;
  o->reason = reason;
  snprintf(o->detail, sizeof(o->detail), "%s", detail != NULL ? detail : "");
  return outcome;
}

int fetch_outcome_keep(struct fetch_outcome *o, uint8_t outcome, uint8_t reason) {
  o->outcome = outcome;
  o->reason = reason;
  return outcome;
}

int fetch_outcome_ok(struct fetch_outcome *o) { return fetch_outcome_set(o, PROTO_OK, PROTO_REASON_NONE, ""); }
