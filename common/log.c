#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"

static const char *log_component = "vts";
static enum log_level log_min = LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_init(const char *component, enum log_level min_level) {
  log_component = component;
  log_min = min_level;
}

int log_level_parse(const char *s, enum log_level *out) {
  for (int i = 0; i < 4; i++) {
    if (strcmp(s, level_names[i]) == 0) {
      *out = (enum log_level)i;
      return 0;
    }
  }
  return -1;
}

void log_msg(enum log_level level, const char *msg, ...) {
  if (level < log_min) return;
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  gmtime_r(&tv.tv_sec, &tm);
  char ts[40];
  strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);

  struct buf b = BUF_INIT;
  buf_printf(&b, "{\"ts\":\"%s.%03dZ\",\"level\":\"%s\",\"component\":\"%s\",\"pid\":%d,\"msg\":\"", ts,
             (int)(tv.tv_usec / 1000), level_names[level], log_component, (int)getpid());
  buf_json_escape(&b, msg, strlen(msg));
  buf_puts(&b, "\"");

  va_list ap;
  va_start(ap, msg);
  for (;;) {
    const char *key = va_arg(ap, const char *);
    if (key == NULL) break;
    const char *value = va_arg(ap, const char *);
    if (value == NULL) value = "";
    int raw = key[0] == '=';
    if (raw) key++;
    buf_puts(&b, ",\"");
    buf_json_escape(&b, key, strlen(key));
    buf_puts(&b, raw ? "\":" : "\":\"");
    if (raw)
      buf_puts(&b, value[0] ? value : "null");
    else
      buf_json_escape(&b, value, strlen(value));
    if (!raw) buf_puts(&b, "\"");
  }
  va_end(ap);
  buf_puts(&b, "}\n");
  if (b.data) {
    /* One write per line keeps lines whole when several processes share the stream. */
    ssize_t off = 0;
    while ((size_t)off < b.len) {
      ssize_t n = write(STDERR_FILENO, b.data + off, b.len - (size_t)off);
      if (n <= 0) break;
      off += n;
    }
  }
  buf_free(&b);
}
