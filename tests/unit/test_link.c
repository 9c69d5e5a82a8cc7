/*
 * The log of the jobs link's failed handshakes, with the time set by hand: one line per peer every
 * VTS_LINK_HANDSHAKE_LOG_MS at most, each saying the count since the start and how many failures it covers without a
 * line of their own; what no line told is told at stop.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/limits.h"
#include "common/log.h"
#include "proto/link.h"

#define URL "tls+tcp://127.0.0.1:7400"
#define T0 5000000

struct capture {
  int pipe[2];
  int saved;
};

/* Points stderr at a non-blocking pipe, so that lines() can read what was written without waiting for more. */
static void capture_start(struct capture *c) {
  assert_int_equal(pipe2(c->pipe, O_NONBLOCK), 0);
  c->saved = dup(STDERR_FILENO);
  assert_true(c->saved >= 0);
  dup2(c->pipe[1], STDERR_FILENO);
}

static void capture_end(struct capture *c) {
  dup2(c->saved, STDERR_FILENO);
  close(c->saved);
  close(c->pipe[0]);
  close(c->pipe[1]);
}

/* The "failed" and "suppressed" of every line written since the last call, as "failed/suppressed;..." in out. */
static void lines(struct capture *c, char *out, size_t cap) {
  char buf[4096];
  ssize_t n = read(c->pipe[0], buf, sizeof(buf) - 1);
  buf[n > 0 ? n : 0] = '\0';
  out[0] = '\0';
  size_t used = 0;
  for (char *line = buf; *line != '\0';) {
    char *end = strchr(line, '\n');
    assert_non_null(end);
    *end = '\0';
    assert_non_null(strstr(line,
                           "\"msg\":\"jobs link handshake failed: a certificate was refused by one end, or TLS "
                           "failed\",\"url\":\"" URL "\""));
    unsigned long long failed, suppressed;
    const char *f = strstr(line, "\"failed\":");
    assert_non_null(f);
    assert_int_equal(sscanf(f, "\"failed\":%llu,\"suppressed\":%llu}", &failed, &suppressed), 2);
    used += (size_t)snprintf(out + used, cap - used, "%llu/%llu;", failed, suppressed);
    line = end + 1;
  }
}

static void test_failed_handshakes_are_logged_once_a_window_with_what_was_left_out(void **state) {
  (void)state;
  struct capture c;
  char got[256];
  struct link_handshakes h = {0};
  capture_start(&c);

  link_handshakes_note(&h, 0, T0, URL);
  lines(&c, got, sizeof(got));
  assert_string_equal(got, ""); /* nothing failed yet */

  link_handshakes_note(&h, 1, T0, URL);
  lines(&c, got, sizeof(got));
  assert_string_equal(got, "1/0;"); /* the first at once */

  link_handshakes_note(&h, 3, T0 + 1000, URL);
  link_handshakes_note(&h, 4, T0 + VTS_LINK_HANDSHAKE_LOG_MS - 1, URL);
  lines(&c, got, sizeof(got));
  assert_string_equal(got, ""); /* within the window: counted, not written */

  link_handshakes_note(&h, 4, T0 + VTS_LINK_HANDSHAKE_LOG_MS, URL);
  lines(&c, got, sizeof(got));
  assert_string_equal(got, "4/2;"); /* as the window ends, with no new failure: three, two of them suppressed */

  link_handshakes_note(&h, 4, T0 + 3 * VTS_LINK_HANDSHAKE_LOG_MS, URL);
  link_handshakes_flush(&h, URL);
  lines(&c, got, sizeof(got));
  assert_string_equal(got, ""); /* nothing new: no line, even at stop */

  link_handshakes_note(&h, 5, T0 + 3 * VTS_LINK_HANDSHAKE_LOG_MS, URL);
  link_handshakes_note(&h, 7, T0 + 3 * VTS_LINK_HANDSHAKE_LOG_MS + 1, URL);
  lines(&c, got, sizeof(got));
  assert_string_equal(got, "5/0;");
  link_handshakes_flush(&h, URL);
  lines(&c, got, sizeof(got));
  assert_string_equal(got, "7/1;"); /* at stop, what no line told */
  assert_int_equal(h.failed, 7);

  capture_end(&c);
}

int main(void) {
  log_init("test", LOG_INFO);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_failed_handshakes_are_logged_once_a_window_with_what_was_left_out),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
