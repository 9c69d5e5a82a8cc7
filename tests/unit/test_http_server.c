/*
 * The HTTP front on a real loop with a client socket in the same thread: request fields, asynchronous answers in
 * pipelined order, and answers that arrive after the connection is gone (ASan checks the memory).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/config.h"
#include "common/util.h"
#include "gateway/http/http.h"

#define TEST_DEADLINE_MS 3000
#define TEST_MAX_HELD 4

struct fixture {
  uv_loop_t loop;
  struct vts_config cfg;
  struct http_server *srv;
  int client;
  char got[8192];
  size_t got_len;
  int drained;
  /* What the handler saw and what it holds for a later answer. */
  struct http_request *held[TEST_MAX_HELD];
  int nheld;
  int async;
  char path[64];
  char query[64];
  char key[64];
  int key_state;
  char rid[80];
};

static struct fixture fx;

static void on_request(void *app, struct http_request *req) {
  struct fixture *f = app;
  snprintf(f->path, sizeof(f->path), "%.*s", (int)req->path_len, req->path);
  snprintf(f->query, sizeof(f->query), "%.*s", req->query ? (int)req->query_len : 0, req->query ? req->query : "");
  snprintf(f->key, sizeof(f->key), "%.*s", req->api_key ? (int)req->api_key_len : 0, req->api_key ? req->api_key : "");
  f->key_state = req->key_state;
  snprintf(f->rid, sizeof(f->rid), "%s", req->request_id);
  if (f->async) {
    http_request_hold(req);
    f->held[f->nheld++] = req;
    return;
  }
  http_respond(req, 200, NULL, "{}", 2, NULL);
}

static int free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  bind(s, (struct sockaddr *)&a, sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(s, (struct sockaddr *)&a, &len);
  close(s);
  return ntohs(a.sin_port);
}

static int setup(void **state) {
  (void)state;
  memset(&fx, 0, sizeof(fx));
  char err[256];
  assert_int_equal(config_load(&fx.cfg, err, sizeof(err)), 0);
  snprintf(fx.cfg.listen_host, sizeof(fx.cfg.listen_host), "127.0.0.1");
  fx.cfg.listen_port = free_port();
  fx.cfg.drain_timeout_ms = 50;
  assert_int_equal(uv_loop_init(&fx.loop), 0);
  fx.srv = http_server_new(&fx.loop, &fx.cfg, on_request, &fx);
  assert_non_null(fx.srv);
  assert_int_equal(http_server_listen(fx.srv), 0);

  fx.client = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)fx.cfg.listen_port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(connect(fx.client, (struct sockaddr *)&a, sizeof(a)), 0);
  fcntl(fx.client, F_SETFL, O_NONBLOCK);
  return 0;
}

static void close_walk(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

static int teardown(void **state) {
  (void)state;
  if (fx.client >= 0) close(fx.client);
  http_server_free(fx.srv);
  uv_walk(&fx.loop, close_walk, NULL);
  uv_run(&fx.loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&fx.loop), 0);
  return 0;
}

/* Runs the loop, collecting what the client receives, until pred holds or the deadline passes. */
static int run_until_ms(int (*pred)(void), uint64_t ms) {
  uint64_t deadline = util_now_ms() + ms;
  while (!pred() && util_now_ms() < deadline) {
    uv_run(&fx.loop, UV_RUN_NOWAIT);
    if (fx.client >= 0) {
      ssize_t n = recv(fx.client, fx.got + fx.got_len, sizeof(fx.got) - 1 - fx.got_len, 0);
      if (n > 0) fx.got_len += (size_t)n;
    }
    fx.got[fx.got_len] = '\0';
    usleep(1000); /* poll interval: the loop and the client's socket again, until the deadline */
  }
  return pred();
}

static int run_until(int (*pred)(void)) { return run_until_ms(pred, TEST_DEADLINE_MS); }

static size_t count_responses(void) {
  size_t n = 0;
  const char *p = strstr(fx.got, "HTTP/1.1 ");
  while (p != NULL) {
    n++;
    p = strstr(p + 1, "HTTP/1.1 ");
  }
  return n;
}

static int one_response(void) { return count_responses() >= 1 && strstr(fx.got, "\r\n\r\n") != NULL; }
static int two_held(void) { return fx.nheld == 2; }
static int one_held(void) { return fx.nheld == 1; }
static int two_responses(void) { return count_responses() >= 2 && strstr(fx.got, "\"b\"") != NULL; }
static int drained(void) { return fx.drained; }

static void send_all(const char *s) { assert_int_equal(send(fx.client, s, strlen(s), 0), (ssize_t)strlen(s)); }

static void test_request_fields_reach_the_handler(void **state) {
  (void)state;
  send_all("GET /p/q?a=1&b=2 HTTP/1.1\r\nHost: t\r\nX-API-KEY: k1  \r\nx-request-id: rid-1\r\n\r\n");
  assert_true(run_until(one_response));
  assert_string_equal(fx.path, "/p/q");
  assert_string_equal(fx.query, "a=1&b=2");
  assert_string_equal(fx.key, "k1");
  assert_int_equal(fx.key_state, HTTP_KEY_PRESENT);
  assert_string_equal(fx.rid, "rid-1");
  assert_non_null(strstr(fx.got, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"));
  assert_non_null(strstr(fx.got, "\r\nX-Request-Id: rid-1\r\n"));
}

static void test_invalid_request_id_is_replaced(void **state) {
  (void)state;
  send_all("GET / HTTP/1.1\r\nX-Request-Id: a b\r\n\r\n");
  assert_true(run_until(one_response));
  assert_int_equal(strlen(fx.rid), 32);
  assert_int_equal(fx.key_state, HTTP_KEY_ABSENT);
}

static void test_async_answers_keep_pipelined_order(void **state) {
  (void)state;
  fx.async = 1;
  send_all("GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n");
  /* The second request waits for the first answer: only one reaches the handler. */
  assert_true(run_until(one_held));
  assert_false(run_until_ms(two_held, 200));
  http_respond(fx.held[0], 200, NULL, "\"a\"", 3, NULL);
  http_request_release(fx.held[0]);
  assert_true(run_until(two_held));
  char *body = malloc(3);
  memcpy(body, "\"b\"", 3);
  http_respond(fx.held[1], 404, "X-Extra: 1\r\n", body, 3, body);
  http_request_release(fx.held[1]);
  assert_true(run_until(two_responses));
  const char *a = strstr(fx.got, "\"a\"");
  const char *b = strstr(fx.got, "HTTP/1.1 404 Not Found\r\n");
  assert_non_null(a);
  assert_non_null(b);
  assert_true(a < b);
  assert_non_null(strstr(b, "\r\nX-Extra: 1\r\n\r\n\"b\""));
}

static void on_drained(void *arg) { ((struct fixture *)arg)->drained = 1; }

static void test_answer_after_connection_closed_is_dropped(void **state) {
  (void)state;
  fx.async = 1;
  send_all("GET /slow HTTP/1.1\r\n\r\n");
  assert_true(run_until(one_held));
  close(fx.client);
  fx.client = -1;
  /* The drain deadline (50 ms) closes the connection while the handler still holds the request. */
  http_server_drain(fx.srv, on_drained, &fx);
  assert_true(run_until(drained));
  assert_true(http_request_gone(fx.held[0]));
  char *body = malloc(4);
  memcpy(body, "late", 4);
  assert_int_equal(http_respond(fx.held[0], 200, NULL, body, 4, body), 0);
  http_request_release(fx.held[0]);
}

static size_t want_responses;
static int wanted_responses(void) { return count_responses() >= want_responses; }

/* A client's X-Request-Id is kept when it is 1..64 characters of [A-Za-z0-9._-]; any other is replaced by ours. */
static void test_request_id_is_kept_only_when_valid(void **state) {
  (void)state;
  char id64[65], id65[66];
  memset(id64, 'x', 64);
  id64[64] = '\0';
  memset(id65, 'x', 65);
  id65[65] = '\0';
  const struct {
    const char *id;
    int kept;
  } cases[] = {{"a", 1}, {"A-b_c.9", 1}, {id64, 1}, {id65, 0}, {"a b", 0}, {"a/b", 0}, {"a\"b", 0}, {"", 0}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char req[256];
    snprintf(req, sizeof(req), "GET /%zu HTTP/1.1\r\nX-Request-Id: %s\r\n\r\n", i, cases[i].id);
    send_all(req);
    want_responses = i + 1;
    assert_true(run_until(wanted_responses));
    int same = strcmp(fx.rid, cases[i].id) == 0;
    if (cases[i].kept && !same) fail_msg("id \"%s\" not kept: the request had \"%s\"", cases[i].id, fx.rid);
    if (!cases[i].kept && (same || strlen(fx.rid) != 32))
      fail_msg("id \"%s\" not replaced by a generated one: the request had \"%s\"", cases[i].id, fx.rid);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_request_fields_reach_the_handler, setup, teardown),
      cmocka_unit_test_setup_teardown(test_invalid_request_id_is_replaced, setup, teardown),
      cmocka_unit_test_setup_teardown(test_async_answers_keep_pipelined_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_answer_after_connection_closed_is_dropped, setup, teardown),
      cmocka_unit_test_setup_teardown(test_request_id_is_kept_only_when_valid, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
