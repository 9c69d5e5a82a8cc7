/*
 * A real redis-server for unit tests: started on a free 127.0.0.1 port, waited for with PING, stopped (even when
 * frozen) at teardown. Header-only; each test program includes it once.
 */
#ifndef VTS_TEST_REDIS_SERVER_H
#define VTS_TEST_REDIS_SERVER_H

#include <errno.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"

#define TEST_REDIS_START_TIMEOUT_MS 5000

/* The server a test runs, for a last-resort kill from an alarm or atexit handler. */
static volatile pid_t test_redis_running;

static int test_redis_available(void) { return system("redis-server --version >/dev/null 2>&1") == 0; }

static int test_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
    fail_msg("no free port: %s", strerror(errno));
  }
  close(fd);
  return ntohs(a.sin_port);
}

/* A synchronous connection for the test's own commands (PING, SCRIPT FLUSH, GET). */
static redisContext *test_redis_sync(int port) {
  struct timeval tv = {0, 200000};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (c != NULL && c->err != 0) {
    redisFree(c);
    return NULL;
  }
  return c;
}

/* Starts redis-server on port and waits until it answers PING. Returns its pid. */
static pid_t test_redis_start(int port) {
  char p[16];
  snprintf(p, sizeof(p), "%d", port);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (freopen("/dev/null", "w", stdout) == NULL) _exit(126);
    execlp("redis-server", "redis-server", "--port", p, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
           (char *)NULL);
    _exit(127);
  }
  test_redis_running = pid;
  uint64_t deadline = util_now_ms() + TEST_REDIS_START_TIMEOUT_MS;
  while (util_now_ms() < deadline) {
    redisContext *c = test_redis_sync(port);
    if (c != NULL) {
      redisReply *r = redisCommand(c, "PING");
      int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
      freeReplyObject(r);
      redisFree(c);
      if (ok) return pid;
    }
    usleep(10000); /* poll interval: PING again until the start timeout */
  }
  fail_msg("redis-server did not start on port %d", port);
  return -1;
}

/* Stops the server, frozen or not. */
static void test_redis_stop(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGCONT);
  kill(pid, SIGTERM);
  waitpid(pid, NULL, 0);
  test_redis_running = 0;
}

/* Sends one command on a new connection and checks it did not fail. */
static void test_redis_command(int port, const char *cmd) {
  redisContext *c = test_redis_sync(port);
  assert_non_null(c);
  redisReply *r = redisCommand(c, cmd);
  assert_non_null(r);
  assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
  freeReplyObject(r);
  redisFree(c);
}

#endif
