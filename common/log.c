#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"

#define LOG_KEEP_BYTES 8192 /* the line buffer a thread keeps between lines */

static const char *log_component = "vts";
static enum log_level log_min = LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};
/* This process's id as text, per thread (read again after a fork, in the one thread the child has). */
static _Thread_local char log_pid_text[16];
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static pthread_key_t log_line_key; /* each thread's line buffer, freed when the thread ends */

static void log_forked(void) { log_pid_text[0] = '\0'; }
static void line_free(void *p) {
  buf_free(p);
  free(p);
}
static void log_setup(void) {
  pthread_atfork(NULL, NULL, log_forked);
  pthread_key_create(&log_line_key, line_free);
}

void log_init(const char *component, enum log_level min_level) {
  log_component = component;
  log_min = min_level;
  pthread_once(&log_once, log_setup);
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

/*
 * The line's lead up to its message: {"ts":"...","level":"...","component":"...","pid":N,"msg":" with the time's
 * second formatted once a second (per thread).
 */
static void line_lead(struct buf *b, enum log_level level) {
  static _Thread_local time_t sec = -1;
  static _Thread_local char sec_text[32];
  struct timeval tv;
  gettimeofday(&tv, NULL);
  if (tv.tv_sec != sec) {
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    strftime(sec_text, sizeof(sec_text), "%Y-%m-%dT%H:%M:%S", &tm);
    sec = tv.tv_sec;
  }
  int ms = (int)(tv.tv_usec / 1000);
  char frac[8] = {'.', (char)('0' + ms / 100), (char)('0' + ms / 10 % 10), (char)('0' + ms % 10), 'Z', '\0'};
  if (log_pid_text[0] == '\0') snprintf(log_pid_text, sizeof(log_pid_text), "%d", (int)getpid());
  buf_puts(b, "{\"ts\":\"");
  buf_puts(b, sec_text);
  buf_puts(b, frac);
  buf_puts(b, "\",\"level\":\"");
  buf_puts(b, level_names[level]);
  buf_puts(b, "\",\"component\":\"");
  buf_puts(b, log_component);
  buf_puts(b, "\",\"pid\":");
  buf_puts(b, log_pid_text);
  buf_puts(b, ",\"msg\":\"");
}

void log_msg(enum log_level level, const char *msg, ...) {
  if (level < log_min) return;
  /* One buffer per thread, kept: a line costs no allocation once the longest line has been seen. */
  pthread_once(&log_once, log_setup);
  struct buf *b = pthread_getspecific(log_line_key), local = BUF_INIT;
  if (b == NULL && (b = calloc(1, sizeof(*b))) != NULL && pthread_setspecific(log_line_key, b) != 0) {
    free(b);
    b = NULL;
  }
  if (b == NULL) b = &local; /* out of memory: this line only */
  buf_reset(b);
  line_lead(b, level);
  buf_json_escape(b, msg, strlen(msg));
  buf_puts(b, "\"");

  va_list ap;
  va_start(ap, msg);
  for (;;) {
    const char *key = va_arg(ap, const char *);
    if (key == NULL) break;
    const char *value = va_arg(ap, const char *);
    if (value == NULL) value = "";
    int raw = key[0] == '=';
    if (raw) key++;
    buf_puts(b, ",\"");
    buf_json_escape(b, key, strlen(key));
    buf_puts(b, raw ? "\":" : "\":\"");
    if (raw)
      buf_puts(b, value[0] ? value : "null");
    else
      buf_json_escape(b, value, strlen(value));
    if (!raw) buf_puts(b, "\"");
  }
  va_end(ap);
  buf_puts(b, "}\n");
  if (b->data) {
    /* One write per line keeps lines whole when several processes share the stream. */
    ssize_t off = 0;
    while ((size_t)off < b->len) {
      ssize_t n = write(STDERR_FILENO, b->data + off, b->len - (size_t)off);
      if (n <= 0) break;
      off += n;
    }
  }
  if (b == &local || b->len > LOG_KEEP_BYTES) buf_free(b); /* an unusually long line gives its memory back */
}
