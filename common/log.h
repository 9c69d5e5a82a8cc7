/*
 * Structured logs: one JSON object per line on stderr, with stable keys (ts, level, msg, component, pid, and the
 * caller's fields). Never pass an API key, a cookie, a raw query string or an upstream body as a field.
 */
#ifndef VTS_LOG_H
#define VTS_LOG_H

#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Names the component (gateway, worker, dispatcher, fetcher) that appears in every line of this process. */
void log_init(const char *component, enum log_level min_level);

/*
 * Writes one line. The variable part is a NULL-terminated list of (key, value) string pairs. A key that starts
 * with '=' marks its value as a raw JSON number (the '=' is not written), e.g. "=status", "404".
 */
void log_msg(enum log_level level, const char *msg, ...);

/*
 * The access line of one answered request, at info level: the very bytes of
 *   log_msg(LOG_INFO, "request", "request_id", request_id, "method", method, "path", path, "=status", status,
 *           "=dur_ms", dur_ms, "key_id", key_id, NULL)
 * without the general field loop (it is written once a request). path need not end in a NUL.
 */
void log_access(const char *request_id, const char *method, const char *path, size_t path_len, uint64_t status,
                uint64_t dur_ms, const char *key_id);

/*
 * Batching of this thread's access lines (for an event loop that answers many requests a turn): with on, log_access
 * holds lines and log_flush writes them, whole lines and at most PIPE_BUF bytes a write; any other line, and
 * log_batch itself, writes what is held first. The loop calls log_flush once a turn, before it waits.
 */
void log_batch(int on);
void log_flush(void);

/* Parses "debug", "info", "warn" or "error". Returns 0, or -1. */
int log_level_parse(const char *s, enum log_level *out);

#endif
