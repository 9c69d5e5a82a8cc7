/*
 * Fuzzes HTTP request handling through the worker's real code: gateway/http/http_*.c's server (llhttp callbacks,
 * limits, keep-alive, pipelining, the response writer) with handlers.c behind it (router, auth, the memory rate
 * limiter, query validation). One server listens on 127.0.0.1 for the whole run; each input is written to a fresh
 * client connection in two parts split at a point derived from the data (so llhttp sees a request across reads), then
 * the client shuts down its write side and reads until the server closes.
 *
 * Checks, any failure aborts: the server finishes every input within FUZZ_INPUT_BOUND_MS and holds no connection
 * afterwards; the bytes it sent are a sequence of well-formed HTTP/1.1 responses, each with Content-Type,
 * Content-Length, Date and a valid X-Request-Id, a status from the set the server may produce here, a body of exactly
 * Content-Length bytes (or none, for HEAD), and nothing after a response that said Connection: close.
 *
 * The dispatcher link is deliberately not initialised: dispatch_submit then fails at once (-ENOTCONN) and a valid
 * transcript request is answered 500 transcript_fetch_failed synchronously. (An initialised link with no dispatcher
 * would answer only after VTS_DISPATCH_CONNECT_WAIT_MS, one second per input.)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <uv.h>

#include "common/config.h"
#include "common/ident.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/http/handlers.h"
#include "gateway/http/http.h"
#include "gateway/keys/keys.h"
#include "gateway/limits/ratelimit.h"

/* Every input is answered and closed well within this; more means the server hangs on it. */
#define FUZZ_INPUT_BOUND_MS 2000
/* The longest response stream kept for the checks: 32 pipelined answers of the OpenAPI document fit. */
#define FUZZ_MAX_RESPONSE_BYTES (4 * 1024 * 1024)
#define FUZZ_KEY "fuzz-key-0123456789"
/* Client source addresses 127.0.0.2 onwards, each with its own ephemeral ports. */
#define FUZZ_SOURCE_ADDRESSES 200

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct {
  uv_loop_t loop;
  struct vts_config cfg;
  struct ratelimit_shared *limits;
  struct handlers_ctx ctx;
  struct http_server *srv;
  struct sockaddr_in addr;
  char *resp;
  size_t resp_len;
} fz;

static void die(const char *what) {
  fprintf(stderr, "fuzz_http: %s\n", what);
  abort();
}

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof(a);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || getsockname(fd, (struct sockaddr *)&a, &alen) != 0)
    die("no free port");
  close(fd);
  return ntohs(a.sin_port);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) die("cannot write a temporary file");
}

static char fuzz_dir[256];

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* The key file and quota snapshots go with the process (libFuzzer ends a timed run with exit()). */
static void remove_fuzz_dir(void) {
  if (fuzz_dir[0] != '\0') nftw(fuzz_dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static void setup(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/fuzz_http.XXXXXX", tmp != NULL && tmp[0] == '/' ? tmp : "/tmp");
  if (mkdtemp(fuzz_dir) == NULL) die("mkdtemp failed");
  atexit(remove_fuzz_dir);
  const char *dir = fuzz_dir;
  char keys[256], state[256], listen[64], line[512], digest[65];
  snprintf(keys, sizeof(keys), "%s/keys.db", dir);
  snprintf(state, sizeof(state), "%s/state", dir);
  /* Limits no fuzzing run reaches, so that every valid request goes on to query validation. */
  util_sha256_hex(FUZZ_KEY, strlen(FUZZ_KEY), digest);
  snprintf(line, sizeof(line), "fuzz\t%s\tactive\t1000000\t1\t1000000000000\n", digest);
  write_file(keys, line);
  snprintf(listen, sizeof(listen), "127.0.0.1:%d", free_port());
  setenv("VTS_LISTEN", listen, 1);
  setenv("VTS_KEYS_FILE", keys, 1);
  setenv("VTS_STATE_DIR", state, 1);
  setenv("VTS_METRICS_LISTEN", "", 1);
  setenv("VTS_LOG_LEVEL", "error", 1);
  unsetenv("VTS_REDIS_URL");

  char err[512] = "";
  if (config_load(&fz.cfg, err, sizeof(err)) != 0) die(err);
  log_init("worker", LOG_ERROR);
  if (uv_loop_init(&fz.loop) != 0) die("uv_loop_init failed");
  char rl_err[512];
  if (ratelimit_shared_new(&fz.cfg, &fz.limits, rl_err, sizeof(rl_err)) != 0) die(rl_err);
  fz.ctx.cfg = &fz.cfg;
  fz.ctx.keys = keystore_load(keys, err, sizeof(err));
  if (fz.ctx.keys == NULL) die(err);
  fz.ctx.rl = ratelimit_new(&fz.loop, &fz.cfg, fz.limits);
  if (fz.ctx.rl == NULL) die("ratelimit_new failed");
  fz.ctx.started_ms = util_now_ms();
  fz.srv = http_server_new(&fz.loop, &fz.cfg, handlers_request, &fz.ctx);
  if (fz.srv == NULL || http_server_listen(fz.srv) != 0) die("the server does not listen");
  memset(&fz.addr, 0, sizeof(fz.addr));
  fz.addr.sin_family = AF_INET;
  fz.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  fz.addr.sin_port = htons((uint16_t)fz.cfg.listen_port);
  fz.resp = malloc(FUZZ_MAX_RESPONSE_BYTES);
  if (fz.resp == NULL) die("out of memory");
}

/* ---- checking the response stream ---- */

static const char *find_crlfcrlf(const char *s, size_t n) {
  for (size_t i = 0; i + 4 <= n; i++)
    if (memcmp(s + i, "\r\n\r\n", 4) == 0) return s + i;
  return NULL;
}

static int status_expected(int status) {
  switch (status) {
    case 200: /* /health, /openapi.json, a job */
    case 202: /* a job accepted */
    case 400: /* framing, validation */
    case 401: /* no or unknown key */
    case 404:
    case 405:
    case 408: /* a job's body cut short */
    case 411: /* a job without Content-Length */
    case 413:
    case 414:
    case 415: /* a job's body of another type */
    case 429: /* the key's open jobs */
    case 431:
    case 500: /* a valid transcript request: no dispatcher */
    case 501: /* a method the server does not know; a playlist job */
    case 503: /* /ready without a dispatcher; the job store */
      return 1;
    default:
      return 0;
  }
}

static int header_is(const char *line, size_t len, const char *name, const char **value, size_t *vlen) {
  size_t n = strlen(name);
  if (len < n + 1 || strncasecmp(line, name, n) != 0 || line[n] != ':') return 0;
  const char *v = line + n + 1;
  const char *end = line + len;
  while (v < end && *v == ' ') v++;
  *value = v;
  *vlen = (size_t)(end - v);
  return 1;
}

static void check_responses(const char *d, size_t n) {
  size_t off = 0;
  int closed = 0;
  while (off < n) {
    if (closed) die("bytes after a response with Connection: close");
    const char *head = d + off;
    const char *end = find_crlfcrlf(head, n - off);
    if (end == NULL) die("incomplete response head");
    if (end - head < 13 || memcmp(head, "HTTP/1.1 ", 9) != 0 || head[12] != ' ') die("bad status line");
    int status = 0;
    for (int i = 9; i < 12; i++) {
      if (head[i] < '0' || head[i] > '9') die("bad status code");
      status = status * 10 + (head[i] - '0');
    }
    if (status == 100) {
      /* The interim answer to Expect: 100-continue, before a job's body: a status line alone. */
      if (end - head != 23 || memcmp(head, "HTTP/1.1 100 Continue", 21) != 0) die("bad 100 Continue");
      off = (size_t)(end + 4 - d);
      continue;
    }
    if (!status_expected(status)) die("unexpected status");
    int have_ct = 0, have_date = 0, have_rid = 0, have_cl = 0;
    size_t cl = 0;
    const char *line = memchr(head, '\n', (size_t)(end - head));
    while (line != NULL && line < end) {
      line++;
      const char *eol = memchr(line, '\r', (size_t)(end + 2 - line));
      size_t len = (size_t)(eol - line);
      const char *v;
      size_t vlen;
      if (header_is(line, len, "Content-Length", &v, &vlen)) {
        if (have_cl++ || vlen == 0 || vlen > 9) die("bad Content-Length");
        for (size_t i = 0; i < vlen; i++) {
          if (v[i] < '0' || v[i] > '9') die("bad Content-Length");
          cl = cl * 10 + (size_t)(v[i] - '0');
        }
      } else if (header_is(line, len, "Content-Type", &v, &vlen)) {
        have_ct = 1;
      } else if (header_is(line, len, "Date", &v, &vlen)) {
        have_date = 1;
      } else if (header_is(line, len, "X-Request-Id", &v, &vlen)) {
        if (!ident_token_valid(v, vlen, VTS_MAX_REQUEST_ID_BYTES)) die("bad X-Request-Id");
        have_rid = 1;
      } else if (header_is(line, len, "Connection", &v, &vlen)) {
        if (vlen == 5 && strncasecmp(v, "close", 5) == 0) closed = 1;
      }
      line = memchr(line, '\n', (size_t)(end + 2 - line));
    }
    if (!have_ct || !have_date || !have_rid || !have_cl) die("a required header is missing");
    off = (size_t)(end + 4 - d);
    /* A HEAD answer has a Content-Length and no body: the next response, or the end, follows its head at once. */
    int headless = off == n || (n - off >= 9 && memcmp(d + off, "HTTP/1.1 ", 9) == 0);
    if (headless || cl == 0) continue;
    if (n - off < cl) die("body shorter than its Content-Length");
    if (d[off] != '{') die("body is not JSON");
    off += cl;
  }
}

/* ---- one input ---- */

static size_t split_point(const uint8_t *data, size_t size) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < size && i < 16; i++) h = (h ^ data[i]) * 16777619u;
  return size == 0 ? 0 : h % (size + 1);
}

static void client_read(int fd, int *eof) {
  for (;;) {
    char tmp[65536];
    ssize_t r = recv(fd, tmp, sizeof(tmp), 0);
    if (r > 0) {
      size_t take = (size_t)r;
      if (take > FUZZ_MAX_RESPONSE_BYTES - fz.resp_len) die("response stream larger than expected");
      memcpy(fz.resp + fz.resp_len, tmp, take);
      fz.resp_len += take;
      continue;
    }
    if (r == 0 || (errno != EAGAIN && errno != EINTR)) *eof = 1;
    return;
  }
}

/* Writes data[*sent..upto) as far as the socket takes it. */
static void client_write(int fd, const uint8_t *data, size_t upto, size_t *sent) {
  while (*sent < upto) {
    ssize_t w = send(fd, data + *sent, upto - *sent, MSG_NOSIGNAL);
    if (w > 0) {
      *sent += (size_t)w;
      continue;
    }
    /* The server refused the rest (it answered and closed): what it sent is still checked. */
    if (w < 0 && errno != EAGAIN && errno != EINTR) *sent = upto;
    return;
  }
}

/* One turn of the server, then a short wait for either side to have something to do. */
static void turn(int fd) {
  uv_run(&fz.loop, UV_RUN_NOWAIT);
  struct pollfd p[2] = {{fd, POLLIN, 0}, {uv_backend_fd(&fz.loop), POLLIN, 0}};
  int t = uv_backend_timeout(&fz.loop);
  poll(p, 2, t < 0 || t > 5 ? 5 : t);
}

/*
 * A non-blocking client connected to the server. Each connection ends in TIME_WAIT on the client side (it sends
 * the first FIN), thousands a second: source addresses rotate over 127.0.0.0/8 so that no address runs out of
 * ports within TIME_WAIT's minute. The connect is waited for with poll, which libFuzzer's timer signal cannot
 * break the way it interrupts a blocking connect.
 */
static int client_connect(void) {
  static unsigned next_src;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) die("socket failed");
  int one = 1;
  setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
  struct sockaddr_in src;
  memset(&src, 0, sizeof(src));
  src.sin_family = AF_INET;
  src.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1 + (next_src++ % FUZZ_SOURCE_ADDRESSES));
  if (bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0) die("cannot bind a client source address");
  if (connect(fd, (struct sockaddr *)&fz.addr, sizeof(fz.addr)) != 0 && errno != EINPROGRESS) {
    fprintf(stderr, "fuzz_http: connect: %s\n", strerror(errno));
    die("the server no longer accepts");
  }
  uint64_t deadline = util_now_ms() + FUZZ_INPUT_BOUND_MS;
  for (;;) {
    struct pollfd p = {fd, POLLOUT, 0};
    if (poll(&p, 1, 10) == 1) break;
    if (util_now_ms() > deadline) die("the server no longer accepts: connect timed out");
  }
  int err = 0;
  socklen_t elen = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0) {
    fprintf(stderr, "fuzz_http: connect: %s\n", strerror(err));
    die("the server no longer accepts");
  }
  return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (fz.srv == NULL) setup();
  int fd = client_connect();
  fz.resp_len = 0;

  size_t split = split_point(data, size);
  size_t sent = 0;
  int eof = 0, shut = 0;
  uint64_t deadline = util_now_ms() + FUZZ_INPUT_BOUND_MS;
  /* The first part, then two server turns (accept, read) so that the second part arrives in a read of its own. */
  client_write(fd, data, split, &sent);
  uv_run(&fz.loop, UV_RUN_NOWAIT);
  uv_run(&fz.loop, UV_RUN_NOWAIT);
  while (!eof || http_server_conn_count(fz.srv) > 0) {
    if (util_now_ms() > deadline) die("the server did not finish the input in time");
    if (!shut) {
      client_write(fd, data, sent < split ? split : size, &sent);
      if (sent == size) {
        shutdown(fd, SHUT_WR);
        shut = 1;
      }
    }
    if (!eof) client_read(fd, &eof);
    turn(fd);
  }
  /* An abortive close: no TIME_WAIT per input, so a long run never runs out of ports. */
  struct linger lg = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  close(fd);
  uv_run(&fz.loop, UV_RUN_NOWAIT);
  /* For reading a reproducer by hand: FUZZ_HTTP_VERBOSE=1 fuzz_http FILE prints what the server answered. */
  if (getenv("FUZZ_HTTP_VERBOSE") != NULL) fprintf(stderr, "---\n%.*s\n---\n", (int)fz.resp_len, fz.resp);
  check_responses(fz.resp, fz.resp_len);
  return 0;
}
