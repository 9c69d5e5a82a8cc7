/*
 * Structured logs: one JSON object per line on stderr, with stable keys (ts, level, msg, component, pid, and the
 * caller's fields). Never pass an API key, a cookie, a raw query string or an upstream body as a field.
 */
#ifndef VTS_LOG_H
#define VTS_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Names the component (gateway, worker, dispatcher, fetcher) that appears in every line of this process. */
void log_init(const char *component, enum log_level min_level);

/*
 * Writes one line. The variable part is a NULL-terminated list of (key, value) string pairs. A key that starts
 * with '=' marks its value as a raw JSON number (the '=' is not written), e.g. "=status", "404".
 */
void log_msg(enum log_level level, const char *msg, ...);

/* Parses "debug", "info", "warn" or "error". Returns 0, or -1. */
int log_level_parse(const char *s, enum log_level *out);

#endif
