/*
 * How a fetcher's job, or one step of it, ended: one type for every module that decides it (a transfer to the
 * platform, the audio download, its decoding, a speech engine, the course of the job). The module that meets a
 * failure names its outcome, reason and detail where it meets it; callers pass the struct on and never read a
 * meaning into an errno value. The outcomes and reasons are proto/proto.h's tables (PROTO_OUTCOMES, PROTO_REASONS).
 */
#ifndef VTS_OUTCOME_H
#define VTS_OUTCOME_H

#include <stdint.h>

struct fetch_outcome {
  uint8_t outcome; /* enum proto_outcome */
  uint8_t reason;  /* enum proto_reason */
  char detail[64]; /* short stable words for logs and the result: "audio_too_long", "http_429", "timeout"... */
};

/* Sets o to outcome, reason and detail (cut to fit; NULL is ""). Returns outcome. */
int fetch_outcome_set(struct fetch_outcome *o, uint8_t outcome, uint8_t reason, const char *detail);

/* Sets o's outcome and reason, keeping the detail already written in o->detail. Returns outcome. */
int fetch_outcome_keep(struct fetch_outcome *o, uint8_t outcome, uint8_t reason);

/* Sets o to PROTO_OK, PROTO_REASON_NONE and detail "". Returns PROTO_OK. */
int fetch_outcome_ok(struct fetch_outcome *o);

#endif
