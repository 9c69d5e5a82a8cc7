/*
 * An open-loop HTTP/1.1 load generator for the tail benchmark (tests/bench/tail.sh): Debian has no wrk2.
 *
 *   bench_openloop PORT PATH RATE SECONDS CONNS [EXPECT [HEADER...]]
 *
 * Keeps CONNS keep-alive connections to 127.0.0.1:PORT and sends GET PATH (with each HEADER line) at RATE requests a
 * second in all, each connection at RATE / CONNS on a fixed schedule: request i of connection k is due at
 * start + (i * CONNS + k) / RATE. How it corrects for coordinated omission: a request's latency is counted from the
 * time it was due, not from when it was sent, so a slow answer that holds its connection past the next due times is
 * charged to every request it delayed (as wrk2 does), and the schedule never slows down to the server's pace. The
 * loop polls without sleeping (libuv's timers have a millisecond grain, too coarse for sub-millisecond answers), so
 * the generator wants a core of its own (taskset). RATE 0 is a closed loop instead (each connection sends again as
 * soon as its answer is in): the server's maximum. Every answer's status must be EXPECT (200 by default).
 *
 * Prints one line: "sent N rps R p50 A p99 B p999 C max D errors E lag99 L" (microseconds). lag99 is the 99th
 * percentile of how late a request went out after its due time while its connection was free: the generator's own
 * delay (its core busy, or taken by something else), not the server's. When it nears the latencies, the generator, not
 * the server, is the tail.
 *
 * With BENCH_LATENCIES set to a file's name, every answer's latency (microseconds, one a line) is also appended to it,
 * so that several runs can be pooled into one distribution (tail.sh does, for runs of two servers made in turn).
 * With BENCH_TIMELINE set to a file's name, the file gets each answer's due time (microseconds from the run's start)
 * and latency, "DUE LATENCY" a line in the order the answers came: where in the run the slow answers fell, and whether
 * they come in bursts or at a period.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "common/util.h"

#define MAX_CONNS 1024
#define READ_BYTES 65536

struct conn {
  uv_tcp_t tcp;
  uv_connect_t connect;
  uv_write_t write;
  int k;              /* its index: its place in the schedule */
  int busy;           /* a request is out, its answer not complete */
  int connected;      /* connected and able to send */
  uint64_t i;         /* the next request's number on this connection */
  uint64_t due_ns;    /* when the request out (busy) or the next one was due */
  uint64_t free_ns;   /* when its last answer was complete */
  char head[256];     /* the answer's status line and headers, as far as read (up to its first 255 bytes) */
  size_t head_len;    /* bytes of head read (it may be cut: only the status line and Content-Length matter) */
  int in_body;        /* the head is over */
  int status;         /* the answer's status */
  uint64_t body_left; /* bytes of body still to read */
  char tail[4];       /* the last bytes of the head read, to find its end across reads */
};

static struct {
  uv_loop_t *loop;
  struct conn conns[MAX_CONNS];
  int nconns;
  char *request;
  size_t request_len;
  double rate;
  uint64_t start_ns, end_ns;
  int expect;
  uint32_t *lat; /* microseconds, one per answer */
  size_t nlat, cap;
  uint32_t *due; /* each answer's due time, microseconds from start_ns, in the order of lat before it is sorted */
  size_t ndue, duecap;
  uint32_t *lag; /* microseconds, one per request sent on a free connection: how late it went out */
  size_t nlag, lagcap;
  uint64_t sent, errors;
  int stopping;
  bool timeline; /* BENCH_TIMELINE is set: keep each answer's due time */
  char readbuf[READ_BYTES];
} g;

static uint64_t due_of(const struct conn *c) {
  if (g.rate <= 0) return 0;
  return g.start_ns + (uint64_t)(((double)c->i * g.nconns + c->k) * 1e9 / g.rate);
}

/* Appends us to *v (growing it); a failed growth counts as an error. */
static void push(uint32_t **v, size_t *n, size_t *cap, uint64_t ns) {
  if (*n == *cap) {
    size_t c = *cap ? 2 * *cap : 1 << 16;
    uint32_t *p = realloc(*v, c * sizeof(*p));
    if (p == NULL) {
      g.errors++;
      return;
    }
    *v = p;
    *cap = c;
  }
  uint64_t us = ns / 1000;
  (*v)[(*n)++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static void on_written(uv_write_t *w, int status) {
  if (status != 0) g.errors++;
  (void)w;
}

static void send_request(struct conn *c, uint64_t now) {
  if (g.rate <= 0) c->due_ns = now;
  /* Only a request whose connection was free at its due time: a later one waited for the server, not for us. */
  if (g.rate > 0 && c->free_ns <= c->due_ns) push(&g.lag, &g.nlag, &g.lagcap, now - c->due_ns);
  c->busy = 1;
  c->in_body = 0;
  c->head_len = 0;
  c->status = 0;
  c->body_left = 0;
  memset(c->tail, 0, sizeof(c->tail));
  uv_buf_t b = uv_buf_init(g.request, (unsigned)g.request_len);
  if (uv_write(&c->write, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) {
    g.errors++;
    c->connected = 0;
    return;
  }
  g.sent++;
}

/* The answer is complete: its latency from when it was due, and the next request's due time. */
static void answered(struct conn *c) {
  uint64_t now = uv_hrtime();
  c->busy = 0;
  c->free_ns = now;
  if (c->status != g.expect) g.errors++;
  push(&g.lat, &g.nlat, &g.cap, now - c->due_ns);
  if (g.timeline) push(&g.due, &g.ndue, &g.duecap, c->due_ns - g.start_ns);
  c->i++;
  c->due_ns = due_of(c);
}

/* Reads the head's status and Content-Length once it is whole (a 304 has no body whatever it says). */
static void head_done(struct conn *c) {
  c->in_body = 1;
  c->head[c->head_len < sizeof(c->head) ? c->head_len : sizeof(c->head) - 1] = '\0';
  if (strncmp(c->head, "HTTP/1.1 ", 9) == 0) c->status = (int)strtol(c->head + 9, NULL, 10);
  const char *cl = strcasestr(c->head, "\r\ncontent-length:");
  c->body_left = cl != NULL && c->status != 304 ? strtoull(cl + 17, NULL, 10) : 0;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct conn *c = s->data;
  if (n < 0) {
    if (!g.stopping) g.errors++;
    c->connected = 0;
    uv_read_stop(s);
    return;
  }
  size_t off = 0;
  while (off < (size_t)n && c->busy) {
    if (!c->in_body) {
      char ch = buf->base[off++];
      if (c->head_len < sizeof(c->head) - 1) c->head[c->head_len] = ch;
      c->head_len++;
      memmove(c->tail, c->tail + 1, 3);
      c->tail[3] = ch;
      if (memcmp(c->tail, "\r\n\r\n", 4) == 0) {
        head_done(c);
        if (c->body_left == 0) answered(c);
      }
      continue;
    }
    size_t take = (size_t)n - off < c->body_left ? (size_t)n - off : (size_t)c->body_left;
    off += take;
    c->body_left -= take;
    if (c->body_left == 0) answered(c);
  }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)h;
  (void)suggested;
  *buf = uv_buf_init(g.readbuf, sizeof(g.readbuf));
}

static void on_connect(uv_connect_t *req, int status) {
  struct conn *c = req->data;
  if (status != 0) {
    fprintf(stderr, "connect: %s\n", uv_strerror(status));
    exit(1);
  }
  uv_tcp_nodelay(&c->tcp, 1);
  c->tcp.data = c;
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  c->connected = 1;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static uint32_t pct_of(const uint32_t *v, size_t n, double p) {
  return n ? v[(size_t)(p / 100.0 * (double)(n - 1))] : 0;
}
static uint32_t pct(double p) { return pct_of(g.lat, g.nlat, p); }

static int arg_num(const char *s, double *out) {
  char *end = NULL;
  errno = 0;
  *out = strtod(s, &end);
  return errno == 0 && end != s && *end == '\0' && *out >= 0 ? 0 : -1;
}

/*
 * Writes the answers to the file named path (nothing when it is NULL or empty): with timeline false, appends each
 * latency, one a line (BENCH_LATENCIES); with timeline true, writes "DUE LATENCY" a line (BENCH_TIMELINE), before the
 * latencies are sorted. A failed growth of one array (counted as an error) leaves the two of different lengths: the
 * pairs stop there. Returns 0, or 1 on error.
 */
static int answers_write(const char *path, bool timeline) {
  if (path == NULL || path[0] == '\0') return 0;
  FILE *f = fopen(path, timeline ? "w" : "a");
  if (f == NULL) {
    fprintf(stderr, "%s: %s\n", path, strerror(errno));
    return 1;
  }
  for (size_t i = 0; i < g.nlat && (!timeline || i < g.ndue); i++) {
    if (timeline)
      fprintf(f, "%u %u\n", g.due[i], g.lat[i]);
    else
      fprintf(f, "%u\n", g.lat[i]);
  }
  if (fclose(f) != 0) {
    fprintf(stderr, "%s: %s\n", path, strerror(errno));
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  double port, rate, seconds, conns, expect = 200;
  if (argc < 6 || arg_num(argv[1], &port) || arg_num(argv[3], &rate) || arg_num(argv[4], &seconds) ||
      arg_num(argv[5], &conns) || conns < 1 || conns > MAX_CONNS || (argc > 6 && arg_num(argv[6], &expect))) {
    fprintf(stderr, "usage: %s PORT PATH RATE SECONDS CONNS [EXPECT [HEADER...]]\n", argv[0]);
    return 2;
  }
  size_t cap = 256 + strlen(argv[2]);
  for (int i = 7; i < argc; i++) cap += strlen(argv[i]) + 2;
  g.request = malloc(cap);
  if (g.request == NULL) return 1;
  int len = snprintf(g.request, cap, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n", argv[2]);
  for (int i = 7; i < argc; i++) len += snprintf(g.request + len, cap - (size_t)len, "%s\r\n", argv[i]);
  len += snprintf(g.request + len, cap - (size_t)len, "\r\n");
  g.request_len = (size_t)len;
  g.rate = rate;
  g.expect = (int)expect;
  g.nconns = (int)conns;
  g.loop = uv_default_loop();
  struct sockaddr_in addr;
  uv_ip4_addr("127.0.0.1", (int)port, &addr);
  for (int k = 0; k < g.nconns; k++) {
    struct conn *c = &g.conns[k];
    c->k = k;
    uv_tcp_init(g.loop, &c->tcp);
    c->connect.data = c;
    uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&addr, on_connect);
  }
  int up = 0;
  while (up < g.nconns) {
    uv_run(g.loop, UV_RUN_ONCE);
    up = 0;
    for (int k = 0; k < g.nconns; k++) up += g.conns[k].connected;
  }
  const char *timeline = getenv("BENCH_TIMELINE");
  g.timeline = timeline && *timeline;
  g.start_ns = uv_hrtime();
  g.end_ns = g.start_ns + (uint64_t)(seconds * 1e9);
  for (int k = 0; k < g.nconns; k++) g.conns[k].due_ns = due_of(&g.conns[k]);
  /* Busy polling: a due request goes out within microseconds of its time. */
  for (;;) {
    uv_run(g.loop, UV_RUN_NOWAIT);
    uint64_t now = uv_hrtime();
    if (now >= g.end_ns) break;
    for (int k = 0; k < g.nconns; k++) {
      struct conn *c = &g.conns[k];
      if (c->connected && !c->busy && c->due_ns <= now) send_request(c, now);
    }
  }
  /* The answers still out: waited for (briefly), and counted from their due time. */
  uint64_t drain_until = uv_hrtime() + 2000000000ull;
  for (;;) {
    int out = 0;
    for (int k = 0; k < g.nconns; k++) out += g.conns[k].connected && g.conns[k].busy;
    if (out == 0 || uv_hrtime() >= drain_until) {
      g.errors += (uint64_t)out;
      break;
    }
    uv_run(g.loop, UV_RUN_NOWAIT);
  }
  g.stopping = 1;
  double took = (double)(uv_hrtime() - g.start_ns) / 1e9;
  int rv = answers_write(timeline, true);
  qsort(g.lat, g.nlat, sizeof(*g.lat), cmp_u32);
  qsort(g.lag, g.nlag, sizeof(*g.lag), cmp_u32);
  printf("sent %llu rps %.0f p50 %u p99 %u p999 %u max %u errors %llu lag99 %u\n", (unsigned long long)g.sent,
         (double)g.nlat / took, pct(50), pct(99), pct(99.9), g.nlat ? g.lat[g.nlat - 1] : 0,
         (unsigned long long)g.errors, pct_of(g.lag, g.nlag, 99));
  rv |= answers_write(getenv("BENCH_LATENCIES"), false);
  free(g.lat);
  free(g.due);
  free(g.lag);
  free(g.request);
  return rv;
}
