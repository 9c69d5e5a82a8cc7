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
#include <llhttp.h>
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
  int has_body;
  char rid[80];
};

static struct fixture fx;

static void on_request(void *app, struct http_request *req) {
  struct fixture *f = app;
  snprintf(f->path, sizeof(f->path), "%.*s", (int)req->path_len, req->path);
  snprintf(f->query, sizeof(f->query), "%.*s", req->query ? (int)req->query_len : 0, req->query ? req->query : "");
  snprintf(f->key, sizeof(f->key), "%.*s", req->api_key ? (int)req->api_key_len : 0, req->api_key ? req->api_key : "");
  f->key_state = req->key_state;
  f->has_body = req->has_body;
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

/* A new client connection (the blocking connect completes in the listen backlog; the loop accepts it later). */
static void client_connect(void) {
  fx.client = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)fx.cfg.listen_port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(connect(fx.client, (struct sockaddr *)&a, sizeof(a)), 0);
  fcntl(fx.client, F_SETFL, O_NONBLOCK);
}

/* Closes the client connection and opens another, forgetting what the handler saw and what came back. */
static void client_reconnect(void) {
  close(fx.client);
  fx.got_len = 0;
  fx.got[0] = '\0';
  fx.path[0] = '\0';
  client_connect();
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
  client_connect();
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
  send_all("GET / HTTP/1.1\r\nHost: t\r\nX-Request-Id: a b\r\n\r\n");
  assert_true(run_until(one_response));
  assert_int_equal(strlen(fx.rid), 32);
  assert_int_equal(fx.key_state, HTTP_KEY_ABSENT);
}

static void test_async_answers_keep_pipelined_order(void **state) {
  (void)state;
  fx.async = 1;
  send_all("GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n");
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
  send_all("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
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
    snprintf(req, sizeof(req), "GET /%zu HTTP/1.1\r\nHost: t\r\nX-Request-Id: %s\r\n\r\n", i, cases[i].id);
    send_all(req);
    want_responses = i + 1;
    assert_true(run_until(wanted_responses));
    int same = strcmp(fx.rid, cases[i].id) == 0;
    if (cases[i].kept && !same) fail_msg("id \"%s\" not kept: the request had \"%s\"", cases[i].id, fx.rid);
    if (!cases[i].kept && (same || strlen(fx.rid) != 32))
      fail_msg("id \"%s\" not replaced by a generated one: the request had \"%s\"", cases[i].id, fx.rid);
  }
}

static int second_response(void) { return count_responses() >= 2; }

static const char BAD_REQUEST[] =
    "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 68\r\n";

/* Sends each request on a connection of its own and expects a 400 that the handler never saw. */
static void expect_400(const char *request) {
  send_all(request);
  assert_true(run_until(one_response));
  if (strncmp(fx.got, BAD_REQUEST, strlen(BAD_REQUEST)) != 0) fail_msg("%s: got %.80s", request, fx.got);
  assert_string_equal(fx.path, "");
}

static void test_host_missing_repeated_or_malformed_is_400(void **state) {
  (void)state;
  expect_400("GET /p HTTP/1.1\r\n\r\n");
}

static void test_two_hosts_are_400(void **state) {
  (void)state;
  expect_400("GET /p HTTP/1.1\r\nHost: t\r\nhost: t\r\n\r\n");
}

static void test_host_with_a_space_is_400(void **state) {
  (void)state;
  expect_400("GET /p HTTP/1.1\r\nHost: a b\r\n\r\n");
}

static void test_whitespace_before_a_colon_is_400(void **state) {
  (void)state;
  expect_400("GET /p HTTP/1.1\r\nHost: t\r\nX-A : 1\r\n\r\n");
}

static int nothing_yet(void) { return fx.got_len > 0; }

static void test_whitespace_before_a_colon_in_the_next_read_is_400(void **state) {
  (void)state;
  /* The name ends exactly where the first read ends; the space comes with the second. */
  send_all("GET /p HTTP/1.1\r\nHost: t\r\nX-A");
  /* Nothing is answered for an incomplete head: this window only lets the loop parse the first read alone. */
  assert_false(run_until_ms(nothing_yet, 100));
  expect_400(" : 1\r\n\r\n");
}

static void test_a_host_in_two_reads_is_checked_whole(void **state) {
  (void)state;
  send_all("GET /p HTTP/1.1\r\nHost: [::");
  /* Nothing is answered for an incomplete head: this window only lets the loop parse the first read alone. */
  assert_false(run_until_ms(nothing_yet, 100));
  send_all("1]:8080\r\n\r\n");
  assert_true(run_until(one_response));
  assert_string_equal(fx.path, "/p");
  assert_non_null(strstr(fx.got, "HTTP/1.1 200 OK\r\n"));
}

static void test_a_space_inside_a_host_in_the_next_read_is_400(void **state) {
  (void)state;
  send_all("GET /p HTTP/1.1\r\nHost: a");
  assert_false(run_until_ms(nothing_yet, 100));
  expect_400(" b\r\n\r\n");
}

static void test_http10_without_host_is_served(void **state) {
  (void)state;
  send_all("GET /p HTTP/1.0\r\n\r\n");
  assert_true(run_until(one_response));
  assert_string_equal(fx.path, "/p");
  assert_non_null(strstr(fx.got, "HTTP/1.1 200 OK\r\n"));
}

static void test_absolute_form_target_is_routed_by_its_path(void **state) {
  (void)state;
  send_all("GET http://Example.test:8080/p/q?a=1 HTTP/1.1\r\nHost: other\r\n\r\n");
  assert_true(run_until(one_response));
  assert_string_equal(fx.path, "/p/q");
  assert_string_equal(fx.query, "a=1");
}

static void test_absolute_form_without_a_path_is_the_root(void **state) {
  (void)state;
  send_all("GET HTTPS://t?x=2 HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(run_until(one_response));
  assert_string_equal(fx.path, "/");
  assert_string_equal(fx.query, "x=2");
}

static void test_absolute_form_without_a_host_is_400(void **state) {
  (void)state;
  expect_400("GET http:///p HTTP/1.1\r\nHost: t\r\n\r\n");
}

static void test_unknown_method_is_501(void **state) {
  (void)state;
  send_all("FROB /p HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(run_until(one_response));
  assert_non_null(strstr(fx.got, "HTTP/1.1 501 Not Implemented\r\n"));
  assert_non_null(
      strstr(fx.got,
             "\r\nConnection: close\r\n\r\n"
             "{\"error\":{\"code\":\"not_implemented\",\"message\":\"The server does not support this method.\"}}"));
  assert_string_equal(fx.path, "");
}

static void test_a_method_llhttp_knows_but_rfc_9110_does_not_is_501(void **state) {
  (void)state;
  send_all("MKCOL /p HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(run_until(one_response));
  assert_non_null(strstr(fx.got, "HTTP/1.1 501 Not Implemented\r\n"));
  assert_string_equal(fx.path, "");
}

static void test_garbage_instead_of_a_method_is_400(void **state) {
  (void)state;
  expect_400("\x16\x03\x01 /p HTTP/1.1\r\nHost: t\r\n\r\n");
}

static void test_a_request_with_a_body_reaches_its_route_and_then_closes(void **state) {
  (void)state;
  /* The route decides first (404, 405), then the body's 413; the body is never parsed as a request. */
  send_all("POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 40\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(run_until(one_response));
  assert_string_equal(fx.path, "/p");
  assert_int_equal(fx.has_body, 1);
  assert_non_null(strstr(fx.got, "\r\nConnection: close\r\n"));
  /* No second answer comes: the bytes after the head were never parsed as a request. */
  assert_false(run_until_ms(second_response, 200));
  assert_string_equal(fx.path, "/p");
}

static void test_a_401_says_how_to_authenticate(void **state) {
  (void)state;
  fx.async = 1;
  send_all("GET /p HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(run_until(one_held));
  http_respond_error(fx.held[0], API_ERR_UNAUTHORIZED, NULL);
  http_request_release(fx.held[0]);
  assert_true(run_until(one_response));
  assert_non_null(strstr(fx.got, "HTTP/1.1 401 Unauthorized\r\n"));
  assert_non_null(strstr(fx.got, "\r\nWWW-Authenticate: ApiKey header=\"x-api-key\"\r\n"));
}

static int held_gone(void) { return fx.nheld == 1 && http_request_gone(fx.held[0]); }

static void test_a_reset_before_the_answer_makes_the_request_gone(void **state) {
  (void)state;
  fx.async = 1;
  send_all("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(run_until(one_held));
  struct linger lg = {.l_onoff = 1, .l_linger = 0};
  assert_int_equal(setsockopt(fx.client, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
  close(fx.client);
  fx.client = -1;
  assert_true(run_until(held_gone));
  assert_int_equal(http_respond(fx.held[0], 200, NULL, "{}", 2, NULL), 0);
  http_request_release(fx.held[0]);
}

static void test_a_half_close_before_the_answer_still_gets_it(void **state) {
  (void)state;
  fx.async = 1;
  send_all("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_true(run_until(one_held));
  assert_int_equal(shutdown(fx.client, SHUT_WR), 0);
  assert_false(run_until_ms(held_gone, 100));
  http_respond(fx.held[0], 200, NULL, "{}", 2, NULL);
  http_request_release(fx.held[0]);
  assert_true(run_until(one_response));
  assert_non_null(strstr(fx.got, "HTTP/1.1 200 OK\r\n"));
}

/* Sends one request on a connection of its own; returns its status (0 for none) and leaves the handler's view in fx. */
static int status_of(const char *request) {
  client_reconnect();
  send_all(request);
  if (!run_until(one_response)) return 0;
  int status = 0;
  if (sscanf(fx.got, "HTTP/1.1 %d ", &status) != 1) return 0;
  return status;
}

static void test_host_values_are_checked_by_their_grammar(void **state) {
  (void)state;
  static const char *const good[] = {"",
                                     "t",
                                     "example.com",
                                     "Example.COM:8080",
                                     "10.0.0.1:80",
                                     "[::1]",
                                     "[::1]:8080",
                                     "[::ffff:1.2.3.4]",
                                     "a%41b",
                                     "x-y_z~!$&'()*+,;=",
                                     "t  ",
                                     "[::1]:80\t",
                                     "h:"};
  static const char *const bad[] = {"a b", "a/b",  "a@b",   "a?b",   "a#b",    "[::1",  "[]",      "[::g]", "h:8o",
                                    "a%4", "a%zz", "\"h\"", "h:1:2", "[::1]x", "a b c", "[::1] x", "a%4 "};
  char req[128];
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    snprintf(req, sizeof(req), "GET /p HTTP/1.1\r\nHost: %s\r\n\r\n", good[i]);
    int status = status_of(req);
    if (status != 200 || strcmp(fx.path, "/p") != 0) fail_msg("Host \"%s\": status %d, not served", good[i], status);
  }
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    snprintf(req, sizeof(req), "GET /p HTTP/1.1\r\nHost: %s\r\n\r\n", bad[i]);
    int status = status_of(req);
    if (status != 400 || fx.path[0] != '\0') fail_msg("Host \"%s\": status %d, not refused", bad[i], status);
  }
}

static void test_known_methods_are_rfc_9110s_and_patch(void **state) {
  (void)state;
  /* Each reaches the handler (a route answers 405 to those it does not take); CONNECT's target is authority-form. */
  static const char *const known[] = {"GET /p",       "HEAD /p",    "POST /p",  "PUT /p",  "DELETE /p",
                                      "CONNECT t:80", "OPTIONS /p", "TRACE /p", "PATCH /p"};
  static const char *const unknown[] = {"PROPFIND /p", "MKCOL /p", "PURGE /p", "LINK /p", "SEARCH /p"};
  char req[128];
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
    snprintf(req, sizeof(req), "%s HTTP/1.1\r\nHost: t\r\n\r\n", known[i]);
    int status = status_of(req);
    if (status != 200 || fx.path[0] == '\0') fail_msg("%s: status %d, not served", known[i], status);
  }
  for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
    snprintf(req, sizeof(req), "%s HTTP/1.1\r\nHost: t\r\n\r\n", unknown[i]);
    int status = status_of(req);
    if (status != 501 || fx.path[0] != '\0') fail_msg("%s: status %d, not 501", unknown[i], status);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_request_fields_reach_the_handler, setup, teardown),
      cmocka_unit_test_setup_teardown(test_invalid_request_id_is_replaced, setup, teardown),
      cmocka_unit_test_setup_teardown(test_async_answers_keep_pipelined_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_answer_after_connection_closed_is_dropped, setup, teardown),
      cmocka_unit_test_setup_teardown(test_request_id_is_kept_only_when_valid, setup, teardown),
      cmocka_unit_test_setup_teardown(test_host_missing_repeated_or_malformed_is_400, setup, teardown),
      cmocka_unit_test_setup_teardown(test_two_hosts_are_400, setup, teardown),
      cmocka_unit_test_setup_teardown(test_host_with_a_space_is_400, setup, teardown),
      cmocka_unit_test_setup_teardown(test_whitespace_before_a_colon_is_400, setup, teardown),
      cmocka_unit_test_setup_teardown(test_whitespace_before_a_colon_in_the_next_read_is_400, setup, teardown),
      cmocka_unit_test_setup_teardown(test_http10_without_host_is_served, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_host_in_two_reads_is_checked_whole, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_space_inside_a_host_in_the_next_read_is_400, setup, teardown),
      cmocka_unit_test_setup_teardown(test_absolute_form_target_is_routed_by_its_path, setup, teardown),
      cmocka_unit_test_setup_teardown(test_absolute_form_without_a_path_is_the_root, setup, teardown),
      cmocka_unit_test_setup_teardown(test_absolute_form_without_a_host_is_400, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unknown_method_is_501, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_method_llhttp_knows_but_rfc_9110_does_not_is_501, setup, teardown),
      cmocka_unit_test_setup_teardown(test_garbage_instead_of_a_method_is_400, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_request_with_a_body_reaches_its_route_and_then_closes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_401_says_how_to_authenticate, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_reset_before_the_answer_makes_the_request_gone, setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_half_close_before_the_answer_still_gets_it, setup, teardown),
      cmocka_unit_test_setup_teardown(test_host_values_are_checked_by_their_grammar, setup, teardown),
      cmocka_unit_test_setup_teardown(test_known_methods_are_rfc_9110s_and_patch, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
