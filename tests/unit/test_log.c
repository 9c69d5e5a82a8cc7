/*
 * The log line: its exact shape, field by field, in this process and in a forked child (whose pid it names); the
 * access line, byte for byte the line the general writer makes of the same fields.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"

/* Points stderr at a new pipe (p); returns the stderr to put back with stderr_back. */
static int stderr_to_pipe(int p[2], int flags) {
  assert_int_equal(pipe2(p, flags), 0);
  int saved = dup(STDERR_FILENO);
  assert_true(saved >= 0);
  dup2(p[1], STDERR_FILENO);
  return saved;
}

/* Puts stderr back and closes the pipe's write end: a read then ends where the lines end. */
static void stderr_back(int saved, int p[2]) {
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(p[1]);
}

/* Runs one log_msg with stderr on a pipe; returns the line read back. */
static void capture(char *out, size_t cap, void (*write_line)(void)) {
  int p[2], saved = stderr_to_pipe(p, 0);
  write_line();
  stderr_back(saved, p);
  ssize_t n = read(p[0], out, cap - 1);
  close(p[0]);
  assert_true(n > 0);
  out[n] = '\0';
}

static void line_with_every_kind_of_field(void) {
  log_msg(LOG_WARN, "a \"quoted\" msg", "request_id", "r1", "=status", "304", "=empty", "", "path", "/x\n\x01",
          "key_id", NULL, NULL);
}

/* Checks the lead's timestamp shape and returns what follows it. */
static const char *after_timestamp(const char *line) {
  const char *lead = "{\"ts\":\"";
  assert_memory_equal(line, lead, strlen(lead));
  const char *ts = line + strlen(lead);
  /* 2026-11-25T05:12:29.123Z */
  const char *shape = "dddd-dd-ddTdd:dd:dd.dddZ";
  for (size_t i = 0; shape[i] != '\0'; i++) {
    if (shape[i] == 'd')
      assert_true(ts[i] >= '0' && ts[i] <= '9');
    else
      assert_int_equal(ts[i], shape[i]);
  }
  return ts + strlen(shape);
}

static void test_fields_are_written_in_order_with_escapes_and_raw_numbers(void **state) {
  (void)state;
  log_init("worker", LOG_INFO);
  char line[1024], want[512];
  capture(line, sizeof(line), line_with_every_kind_of_field);
  snprintf(want, sizeof(want),
           "\",\"level\":\"warn\",\"component\":\"worker\",\"pid\":%d,\"msg\":\"a \\\"quoted\\\" msg\",\"request_id\":"
           "\"r1\",\"status\":304,\"empty\":null,\"path\":\"/x\\n\\u0001\",\"key_id\":\"\"}\n",
           (int)getpid());
  assert_string_equal(after_timestamp(line), want);
}

static void line_below_the_level(void) {
  log_msg(LOG_DEBUG, "not written", NULL);
  log_msg(LOG_WARN, "written", NULL);
}

static void test_a_line_below_the_level_is_not_written(void **state) {
  (void)state;
  log_init("gateway", LOG_INFO); /* after lines as "worker" at the same level: the new name is written */
  char line[512], want[256];
  capture(line, sizeof(line), line_below_the_level);
  snprintf(want, sizeof(want), "\",\"level\":\"warn\",\"component\":\"gateway\",\"pid\":%d,\"msg\":\"written\"}\n",
           (int)getpid());
  assert_string_equal(after_timestamp(line), want);
}

static void line_plain(void) { log_msg(LOG_INFO, "hello", NULL); }

static void test_a_forked_child_names_its_own_pid(void **state) {
  (void)state;
  log_init("worker", LOG_INFO);
  char line[512];
  capture(line, sizeof(line), line_plain); /* the parent's pieces are made before the fork */
  int p[2];
  assert_int_equal(pipe(p), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    close(p[0]);
    dup2(p[1], STDERR_FILENO);
    log_msg(LOG_INFO, "hello", NULL);
    _exit(0);
  }
  close(p[1]);
  ssize_t n = read(p[0], line, sizeof(line) - 1);
  close(p[0]);
  int status = 0;
  waitpid(child, &status, 0);
  assert_true(n > 0);
  line[n] = '\0';
  char want[256];
  snprintf(want, sizeof(want), "\",\"level\":\"info\",\"component\":\"worker\",\"pid\":%d,\"msg\":\"hello\"}\n",
           (int)child);
  assert_string_equal(after_timestamp(line), want);
}

static void access_by_log_msg(void) {
  log_msg(LOG_INFO, "request", "request_id", "r-1.x", "method", "GET", "path", "/v1/\"a\"\n\x02", "=status", "304",
          "=dur_ms", "0", "key_id", "", NULL);
}

static void access_by_log_access(void) {
  /* The path is not NUL-terminated where it ends: only its length counts. */
  static const char path[] = "/v1/\"a\"\n\x02/and more";
  log_access("r-1.x", "GET", path, 9, 304, 0, "");
}

static void access_with_a_key_and_a_long_time(void) { log_access("abc", "HEAD", "/health", 7, 200, 12345, "k.1"); }

static void test_the_access_line_is_the_line_log_msg_writes(void **state) {
  (void)state;
  log_init("worker", LOG_INFO);
  char a[512], b[512], want[512];
  capture(a, sizeof(a), access_by_log_msg);
  capture(b, sizeof(b), access_by_log_access);
  assert_string_equal(after_timestamp(b), after_timestamp(a));
  capture(b, sizeof(b), access_with_a_key_and_a_long_time);
  snprintf(want, sizeof(want),
           "\",\"level\":\"info\",\"component\":\"worker\",\"pid\":%d,\"msg\":\"request\",\"request_id\":\"abc\","
           "\"method\":\"HEAD\",\"path\":\"/health\",\"status\":200,\"dur_ms\":12345,\"key_id\":\"k.1\"}\n",
           (int)getpid());
  assert_string_equal(after_timestamp(b), want);
  /* Below the level, nothing. */
  log_init("worker", LOG_WARN);
  int p[2], saved = stderr_to_pipe(p, 0);
  access_with_a_key_and_a_long_time();
  stderr_back(saved, p);
  char c;
  assert_int_equal(read(p[0], &c, 1), 0);
  close(p[0]);
}

/* What the pipe holds now, without waiting (the write end stays open). */
static size_t drain(int fd, char *out, size_t cap) {
  size_t n = 0;
  for (;;) {
    ssize_t r = read(fd, out + n, cap - 1 - n);
    if (r <= 0) break;
    n += (size_t)r;
  }
  out[n] = '\0';
  return n;
}

/* Ends batching: what it still held is read into out; stderr goes back and the pipe closes. */
static size_t batch_end(int saved, int p[2], char *out, size_t cap) {
  log_batch(0);
  size_t n = drain(p[0], out, cap);
  stderr_back(saved, p);
  close(p[0]);
  return n;
}

static void test_batched_access_lines_wait_for_the_flush_and_keep_their_order(void **state) {
  (void)state;
  log_init("worker", LOG_INFO);
  int p[2], saved = stderr_to_pipe(p, O_NONBLOCK);
  static char got[65536];
  log_batch(1);
  log_access("a1", "GET", "/health", 7, 200, 0, "");
  log_access("a2", "GET", "/health", 7, 200, 0, "");
  size_t held = drain(p[0], got, sizeof(got));
  log_flush();
  size_t after_flush = drain(p[0], got, sizeof(got));
  int two = strstr(got, "\"request_id\":\"a1\"") != NULL && strstr(got, "\"request_id\":\"a2\"") != NULL;
  /* Another line writes what is held first. */
  log_access("a3", "GET", "/health", 7, 200, 0, "");
  log_msg(LOG_WARN, "after a3", NULL);
  drain(p[0], got, sizeof(got));
  const char *a3 = strstr(got, "\"request_id\":\"a3\""), *warn = strstr(got, "after a3");
  int ordered = a3 != NULL && warn != NULL && a3 < warn;
  /* Many lines: written in whole lines, at most 4096 bytes a write, none lost. */
  for (int i = 0; i < 100; i++) log_access("many", "GET", "/v1/video/transcript", 20, 304, 1, "bench");
  size_t early = drain(p[0], got, sizeof(got));
  size_t rest = batch_end(saved, p, got + early, sizeof(got) - early);
  assert_int_equal(held, 0);
  assert_true(after_flush > 0);
  assert_true(two);
  assert_true(ordered);
  assert_true(early > 0 && early <= 4096 * 25);
  size_t lines = 0;
  for (size_t i = 0; i < early + rest; i++) lines += got[i] == '\n';
  assert_int_equal(lines, 100);
  assert_int_equal(got[early - 1], '\n'); /* what went out early ended with a whole line */
}

/* A path of n bytes, the same for the direct and the batched line. */
static char long_path[6000];

/* The line after the one at s. */
static char *line_after(char *s) {
  char *nl = strchr(s, '\n');
  assert_non_null(nl);
  return nl + 1;
}

static void access_long(void) { log_access("long", "GET", long_path, sizeof(long_path) - 1, 200, 3, "k"); }

static void test_a_batched_line_is_the_direct_line_and_a_long_one_goes_out_alone_in_order(void **state) {
  (void)state;
  log_init("worker", LOG_INFO);
  memset(long_path, 'p', sizeof(long_path) - 1);
  long_path[0] = '/';
  static char direct[8192], got[65536];
  capture(direct, sizeof(direct), access_long);
  char short_direct[512];
  capture(short_direct, sizeof(short_direct), access_with_a_key_and_a_long_time);

  int p[2], saved = stderr_to_pipe(p, O_NONBLOCK);
  log_batch(1);
  access_with_a_key_and_a_long_time();
  access_long(); /* longer than one write: what is held goes first, then the line alone */
  size_t early = drain(p[0], got, sizeof(got));
  access_with_a_key_and_a_long_time(); /* held again */
  size_t held = drain(p[0], got + early, sizeof(got) - early);
  size_t rest = batch_end(saved, p, got + early, sizeof(got) - early);

  assert_int_equal(held, 0);
  assert_true(early > 6000);
  size_t n = early + rest;
  /* Three lines in order: the short one, the long one, the short one; each the bytes the direct writer makes. */
  char *first = got, *second = line_after(first), *third = line_after(second);
  assert_int_equal((size_t)(line_after(third) - got), n);
  assert_int_equal((size_t)(second - first), strlen(short_direct));
  assert_int_equal((size_t)(third - second), strlen(direct));
  assert_int_equal(got + early, third); /* the long line went out at once, the last one at the end */
  assert_memory_equal(after_timestamp(first), after_timestamp(short_direct), strlen(after_timestamp(short_direct)));
  assert_memory_equal(after_timestamp(second), after_timestamp(direct), strlen(after_timestamp(direct)));
  assert_memory_equal(after_timestamp(third), after_timestamp(short_direct), strlen(after_timestamp(short_direct)));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fields_are_written_in_order_with_escapes_and_raw_numbers),
      cmocka_unit_test(test_a_line_below_the_level_is_not_written),
      cmocka_unit_test(test_a_forked_child_names_its_own_pid),
      cmocka_unit_test(test_the_access_line_is_the_line_log_msg_writes),
      cmocka_unit_test(test_batched_access_lines_wait_for_the_flush_and_keep_their_order),
      cmocka_unit_test(test_a_batched_line_is_the_direct_line_and_a_long_one_goes_out_alone_in_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
