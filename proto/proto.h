/*
 * The messages between gateway workers, the dispatcher and fetchers. One encoder and one decoder serve every side.
 *
 * Wire format, all integers big-endian:
 *   magic "VT" | version u8 | type u8 | fields of the type
 *   string: u16 length + bytes (no NUL); blob: u32 length + bytes
 * Every decode checks the magic, the version, every length against the bytes present and the field limits below,
 * and that nothing trails; a message that fails any check is rejected whole (-EPROTO) and never trusted.
 */
#ifndef VTS_PROTO_H
#define VTS_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/limits.h"

#define PROTO_VERSION 1
#define PROTO_MAX_LANG 15                             /* bytes of a language code, without NUL */
#define PROTO_MAX_REQUEST_ID VTS_MAX_REQUEST_ID_BYTES /* bytes of a request id, without NUL */

enum proto_type {
  PROTO_JOB = 1,    /* worker -> dispatcher (a request) and dispatcher -> fetcher (an assignment) */
  PROTO_RESULT = 2, /* fetcher -> dispatcher (a finished job, also meaning "idle") and dispatcher -> worker */
  PROTO_READY = 3,  /* fetcher -> dispatcher: idle, give me a job; dispatcher -> fetcher: RESULT_LAST received */
  /*
   * fetcher -> dispatcher: the finished job of a fetcher that is stopping. Encoded exactly as a RESULT, but it does
   * not mean "idle": the dispatcher takes the result, answers at once with a READY (the acknowledgement, so the
   * fetcher knows the result arrived and may close) and gives that fetcher no more jobs. A job queued meanwhile goes
   * to another fetcher instead of into a connection about to close.
   */
  PROTO_RESULT_LAST = 4,
};

enum proto_kind { PROTO_KIND_CAPTIONS = 1, PROTO_KIND_SPEECH = 2 };

/* What happened to a job; the gateway maps it to the HTTP status of ARCHITECTURE.md "Outcomes". */
enum proto_outcome {
  PROTO_OK = 1,              /* 200, body is the final public JSON */
  PROTO_NOT_AVAILABLE = 2,   /* 404 transcript_not_available */
  PROTO_UPSTREAM_FAILED = 3, /* 502 upstream_transcript_failed */
  PROTO_INTERNAL = 4,        /* 500 transcript_fetch_failed */
  PROTO_NO_CAPTIONS = 5,     /* fetcher -> dispatcher only: playable but no captions; speech may follow, else 404 */
};

enum proto_source { PROTO_SOURCE_NONE = 0, PROTO_SOURCE_CAPTIONS = 1, PROTO_SOURCE_SPEECH = 2 };

struct proto_job {
  uint64_t job_id;                           /* assigned by the dispatcher; 0 in a worker's request */
  uint8_t kind;                              /* enum proto_kind */
  uint32_t deadline_ms;                      /* time the job may take, from its receipt */
  char video_id[12];                         /* exactly 11 characters and a NUL */
  char lang[PROTO_MAX_LANG + 1];             /* requested language, "" for none */
  char request_id[PROTO_MAX_REQUEST_ID + 1]; /* the client request's id, for logs */
};

struct proto_result {
  uint64_t job_id;
  uint8_t outcome;               /* enum proto_outcome */
  uint8_t source;                /* enum proto_source */
  uint32_t fetch_ms;             /* time spent by the fetcher */
  char lang[PROTO_MAX_LANG + 1]; /* language of the returned track */
  char detail[64];  /* a short internal reason for logs and metrics ("recaptcha", "http_429"); never sent to clients */
  const char *body; /* borrowed: points into the decoded message or the caller's memory */
  uint32_t body_len;
};

/* Appends an encoded job to out. Returns 0, -EINVAL for a field out of its limits, or -ENOMEM. */
int proto_encode_job(struct buf *out, const struct proto_job *job);
/* Appends an encoded result (the body is copied). Returns 0, -EINVAL or -ENOMEM. */
int proto_encode_result(struct buf *out, const struct proto_result *res);
/* The same for a RESULT_LAST (sent by a stopping fetcher). */
int proto_encode_result_last(struct buf *out, const struct proto_result *res);
/* Appends an encoded READY. */
int proto_encode_ready(struct buf *out);

/* Reads the type of a message after checking magic and version. Returns the type (> 0), or -EPROTO. */
int proto_peek_type(const void *data, size_t len);
/* Decodes a job. Returns 0, or -EPROTO. */
int proto_decode_job(const void *data, size_t len, struct proto_job *job);
/*
 * Decodes a RESULT or a RESULT_LAST (proto_peek_type tells them apart); res->body borrows from data, valid while
 * data is. Returns 0, or -EPROTO.
 */
int proto_decode_result(const void *data, size_t len, struct proto_result *res);

/* The HTTP status for an outcome (PROTO_NO_CAPTIONS maps to 404). */
int proto_outcome_status(uint8_t outcome);

#endif
