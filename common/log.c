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
#include "common/util.h"

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

/* Bumped by log_init: each thread makes its lead pieces again for the new component. */
static unsigned log_generation = 1;

void log_init(const char *component, enum log_level min_level) {
  log_component = component;
  __atomic_add_fetch(&log_generation, 1, __ATOMIC_RELEASE);
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

/* Appends n bytes the buffer has room for (reserved by the caller). */
static inline void put(struct buf *b, const char *s, size_t n) {
  memcpy(b->data + b->len, s, n);
  b->len += n;
}

/*
 * The line's lead up to its message: {"ts":"...","level":"...","component":"...","pid":N,"msg":" from pieces made
 * once per thread: the time's second (once a second) and, per level, what follows the milliseconds.
 */
static _Thread_local char lead_tail[4][160];
static _Thread_local size_t lead_tail_len[4];
static _Thread_local unsigned lead_generation;

static int line_lead(struct buf *b, enum log_level level) {
  static _Thread_local time_t sec = -1;
  static _Thread_local char sec_text[40];
  static _Thread_local size_t sec_len;
  struct timeval tv;
  gettimeofday(&tv, NULL);
  if (tv.tv_sec != sec) {
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    sec_len = strftime(sec_text, sizeof(sec_text), "{\"ts\":\"%Y-%m-%dT%H:%M:%S.", &tm);
    sec = tv.tv_sec;
  }
  unsigned gen = __atomic_load_n(&log_generation, __ATOMIC_ACQUIRE);
  if (log_pid_text[0] == '\0' || lead_generation != gen) {
    snprintf(log_pid_text, sizeof(log_pid_text), "%d", (int)getpid());
    memset(lead_tail_len, 0, sizeof(lead_tail_len));
    lead_generation = gen;
  }
  if (lead_tail_len[level] == 0) {
    int n = snprintf(lead_tail[level], sizeof(lead_tail[level]),
                     "Z\",\"level\":\"%s\",\"component\":\"%s\",\"pid\":%s,\"msg\":\"", level_names[level],
                     log_component, log_pid_text);
    lead_tail_len[level] = n > 0 && (size_t)n < sizeof(lead_tail[level]) ? (size_t)n : 0;
  }
  int ms = (int)(tv.tv_usec / 1000);
  char frac[3] = {(char)('0' + ms / 100), (char)('0' + ms / 10 % 10), (char)('0' + ms % 10)};
  if (buf_reserve(b, sec_len + sizeof(frac) + sizeof(lead_tail[0])) != 0) return -1;
  put(b, sec_text, sec_len);
  put(b, frac, sizeof(frac));
  put(b, lead_tail[level], lead_tail_len[level]);
  b->data[b->len] = '\0';
  return 0;
}

/* This thread's line buffer, emptied; local when there is no memory for one (that line only). */
static struct buf *line_buffer(struct buf *local) {
  /* One buffer per thread, kept: a line costs no allocation once the longest line has been seen. */
  pthread_once(&log_once, log_setup);
  struct buf *b = pthread_getspecific(log_line_key);
  if (b == NULL && (b = calloc(1, sizeof(*b))) != NULL && pthread_setspecific(log_line_key, b) != 0) {
    free(b);
    b = NULL;
  }
  if (b == NULL) b = local;
  buf_reset(b);
  return b;
}

static void write_all(const char *data, size_t len) {
  size_t off = 0;
  while (off < len) {
    ssize_t n = write(STDERR_FILENO, data + off, len - off);
    if (n <= 0) break;
    off += (size_t)n;
  }
}

/*
 * Access lines held by a thread that batches them (log_batch), written together by log_flush. One write holds whole
 * lines only and at most LOG_BATCH_BYTES (PIPE_BUF), so that lines stay whole on a pipe that several processes share.
 */
#define LOG_BATCH_BYTES 4096
static _Thread_local int batching;
static _Thread_local struct buf batch;

void log_batch(int on) {
  log_flush();
  batching = on;
  if (!on) buf_free(&batch);
}

void log_flush(void) {
  if (batch.len == 0) return;
  write_all(batch.data, batch.len);
  buf_reset(&batch);
}

/* One write per line keeps lines whole when several processes share the stream. */
static void line_write(struct buf *b, struct buf *local) {
  if (b->data) write_all(b->data, b->len);
  if (b == local || b->len > LOG_KEEP_BYTES) buf_free(b); /* an unusually long line gives its memory back */
}

/* Appends a string literal (its length known when compiled). */
#define append_lit(b, lit) buf_append((b), (lit), sizeof(lit) - 1)

/* Appends an access line to b: 0, or -1 when memory ran out (b then holds part of it). */
static int access_line(struct buf *b, const char *request_id, const char *method, const char *path, size_t path_len,
                       uint64_t status, uint64_t dur_ms, const char *key_id) {
  char st[21], dur[21];
  size_t stn = util_u64_dec(status, st), durn = util_u64_dec(dur_ms, dur);
  int err = line_lead(b, LOG_INFO);
  err |= append_lit(b, "request\",\"request_id\":\"");
  err |= buf_json_escape(b, request_id, strlen(request_id));
  err |= append_lit(b, "\",\"method\":\"");
  err |= buf_json_escape(b, method, strlen(method));
  err |= append_lit(b, "\",\"path\":\"");
  err |= buf_json_escape(b, path, path_len);
  err |= append_lit(b, "\",\"status\":");
  err |= buf_append(b, st, stn);
  err |= append_lit(b, ",\"dur_ms\":");
  err |= buf_append(b, dur, durn);
  err |= append_lit(b, ",\"key_id\":\"");
  err |= buf_json_escape(b, key_id, strlen(key_id));
  err |= append_lit(b, "\"}\n");
  return err != 0 ? -1 : 0;
}

/*
 * The batch grew by a line from start: when it no longer fits one write, the lines before go out and the new one
 * stays (or goes out alone when it is longer than a write).
 */
static void batch_settle(size_t start) {
  if (batch.len <= LOG_BATCH_BYTES) return;
  size_t line = batch.len - start;
  write_all(batch.data, start);
  if (line > LOG_BATCH_BYTES) {
    write_all(batch.data + start, line);
    buf_free(&batch); /* an unusually long line gives its memory back */
    return;
  }
  memmove(batch.data, batch.data + start, line);
  batch.len = line;
  batch.data[line] = '\0';
}

void log_access(const char *request_id, const char *method, const char *path, size_t path_len, uint64_t status,
                uint64_t dur_ms, const char *key_id) {
  if (LOG_INFO < log_min) return;
  if (batching) {
    /* Built in the batch itself: no copy. */
    size_t start = batch.len;
    if (access_line(&batch, request_id, method, path, path_len, status, dur_ms, key_id) == 0) {
      batch_settle(start);
      return;
    }
    batch.len = start; /* no memory for the line here: it goes out on its own below */
    if (batch.data != NULL) batch.data[start] = '\0';
  }
  log_flush();
  struct buf local = BUF_INIT, *b = line_buffer(&local);
  access_line(b, request_id, method, path, path_len, status, dur_ms, key_id);
  line_write(b, &local);
}

void log_msg(enum log_level level, const char *msg, ...) {
  if (level < log_min) return;
  log_flush(); /* lines keep their order */
  struct buf local = BUF_INIT, *b = line_buffer(&local);
  line_lead(b, level);
  buf_json_escape(b, msg, strlen(msg));
  append_lit(b, "\"");

  va_list ap;
  va_start(ap, msg);
  for (;;) {
    const char *key = va_arg(ap, const char *);
    if (key == NULL) break;
    const char *value = va_arg(ap, const char *);
    if (value == NULL) value = "";
    int raw = key[0] == '=';
    if (raw) key++;
    /* Keys are names written in our code ([a-z_]), never input: they go in as they are. */
    size_t klen = strlen(key);
    if (buf_reserve(b, klen + 8) != 0) break;
    put(b, ",\"", 2);
    put(b, key, klen);
    if (raw) {
      put(b, "\":", 2);
      buf_puts(b, value[0] ? value : "null");
    } else {
      put(b, "\":\"", 3);
      buf_json_escape(b, value, strlen(value));
      append_lit(b, "\"");
    }
  }
  va_end(ap);
  append_lit(b, "}\n");
  line_write(b, &local);
}
