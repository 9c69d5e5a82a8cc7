#include "gateway/redis/redis_conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "common/percent.h"
#include "common/util.h"

#define REDIS_DEFAULT_PORT 6379
#define REDIS_MAX_DB 1000000

/*
 * Our own libuv binding for hiredis, instead of hiredis/adapters/libuv.h: that adapter drops poll errors, and libuv
 * reports a refused connect as one (UV_EBADF, after stopping the poll), so a connection attempt to a stopped Redis
 * would hang forever. Here an error is handed to hiredis as readiness: it then reads the socket error itself and
 * calls on_connect or on_disconnect. What still slips through is caught by the ready and stall deadlines.
 */
struct redis_poll {
  redisAsyncContext *ac; /* NULL once hiredis has let go of the connection */
  uv_poll_t handle;
  int events;
};

static void poll_cb(uv_poll_t *h, int status, int events) {
  struct redis_poll *p = h->data;
  if (p->ac == NULL) return;
  if (status < 0) {
    if ((p->ac->c.flags & REDIS_CONNECTED) == 0) {
      redisAsyncHandleWrite(p->ac); /* completes the connect: finds the socket error */
    } else {
      redisAsyncHandleRead(p->ac); /* reads the error or the end of the stream */
    }
    return;
  }
  /* Handling a read may free the connection (p->ac becomes NULL); p itself lives until its close callback. */
  if (p->ac != NULL && (events & UV_READABLE)) redisAsyncHandleRead(p->ac);
  if (p->ac != NULL && (events & UV_WRITABLE)) redisAsyncHandleWrite(p->ac);
}

/* Watches (on) or stops watching (!on) the socket for flag; hiredis calls the four functions below. */
static void poll_change(void *privdata, int flag, int on) {
  struct redis_poll *p = privdata;
  int events = on ? p->events | flag : p->events & ~flag;
  /* hiredis asks to read again after every read and write: a restart would cost epoll changes for nothing (libuv
   * takes the descriptor out of epoll and puts it back on every uv_poll_start). */
  if (events == p->events) return;
  p->events = events;
  if (p->events != 0) {
    uv_poll_start(&p->handle, p->events, poll_cb);
  } else {
    uv_poll_stop(&p->handle);
  }
}

static void poll_add_read(void *privdata) { poll_change(privdata, UV_READABLE, 1); }
static void poll_del_read(void *privdata) { poll_change(privdata, UV_READABLE, 0); }
static void poll_add_write(void *privdata) { poll_change(privdata, UV_WRITABLE, 1); }
static void poll_del_write(void *privdata) { poll_change(privdata, UV_WRITABLE, 0); }

void redis_conn_write_now(redisAsyncContext *ac) {
  /* A connect still in progress would be taken for done by hiredis's write handler. */
  if ((ac->c.flags & REDIS_CONNECTED) != 0 && (ac->c.flags & (REDIS_DISCONNECTING | REDIS_FREEING)) == 0)
    redisAsyncHandleWrite(ac);
}

static void poll_closed(uv_handle_t *h) { free(h->data); }

static void poll_cleanup(void *privdata) {
  struct redis_poll *p = privdata;
  p->ac = NULL;
  uv_close((uv_handle_t *)&p->handle, poll_closed);
}

static int poll_attach(redisAsyncContext *ac, uv_loop_t *loop) {
  struct redis_poll *p = calloc(1, sizeof(*p));
  if (p == NULL) return -ENOMEM;
  int rv = uv_poll_init(loop, &p->handle, ac->c.fd);
  if (rv != 0) {
    free(p);
    return rv;
  }
  p->handle.data = p;
  p->ac = ac;
  ac->ev.data = p;
  ac->ev.addRead = poll_add_read;
  ac->ev.delRead = poll_del_read;
  ac->ev.addWrite = poll_add_write;
  ac->ev.delWrite = poll_del_write;
  ac->ev.cleanup = poll_cleanup;
  return 0;
}

/* One command that prepares a connection: AUTH, SELECT. The strings point into the addr it was made from. */
struct setup_cmd {
  int argc;
  const char *argv[3];
  char num[16];
};

/* The commands every new connection of addr runs before anything else, into cmds (room for 2). Returns how many. */
static int setup_commands(const struct redis_addr *addr, struct setup_cmd cmds[2]) {
  int n = 0;
  if (addr->password[0] != '\0') {
    struct setup_cmd *c = &cmds[n++];
    c->argv[0] = "AUTH";
    c->argc = 1;
    if (addr->user[0] != '\0') c->argv[c->argc++] = addr->user;
    c->argv[c->argc++] = addr->password;
  }
  if (addr->db != 0) {
    struct setup_cmd *c = &cmds[n++];
    snprintf(c->num, sizeof(c->num), "%d", addr->db);
    c->argv[0] = "SELECT";
    c->argv[1] = c->num;
    c->argc = 2;
  }
  return n;
}

redisAsyncContext *redis_conn_open_async(uv_loop_t *loop, const struct redis_addr *addr, void *data,
                                         redisConnectCallback *on_connect, redisDisconnectCallback *on_disconnect,
                                         redisCallbackFn *setup_cb, void *setup_arg, char *err, size_t errlen) {
  redisAsyncContext *ac = redisAsyncConnect(addr->ip, addr->port);
  if (ac == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if (ac->err != 0) {
    snprintf(err, errlen, "%s", ac->errstr);
    goto fail;
  }
  ac->data = data;
  if (poll_attach(ac, loop) != 0) {
    snprintf(err, errlen, "cannot watch the socket");
    goto fail;
  }
  redisAsyncSetConnectCallback(ac, on_connect);
  redisAsyncSetDisconnectCallback(ac, on_disconnect);
  /* Pipelined: hiredis sends these once connected, ahead of anything the caller queues. */
  struct setup_cmd cmds[2];
  int n = setup_commands(addr, cmds);
  for (int i = 0; i < n; i++) redisAsyncCommandArgv(ac, setup_cb, setup_arg, cmds[i].argc, cmds[i].argv, NULL);
  return ac;

fail:
  redisAsyncFree(ac);
  return NULL;
}

redisContext *redis_conn_open_sync(const struct redis_addr *addr, int timeout_ms, char *err, size_t errlen) {
  struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
  redisContext *c = redisConnectWithTimeout(addr->ip, addr->port, tv);
  if (c == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if (c->err == 0 && redisSetTimeout(c, tv) != REDIS_OK) snprintf(err, errlen, "cannot set the timeout");
  if (c->err != 0) {
    snprintf(err, errlen, "%s", c->errstr);
    redisFree(c);
    return NULL;
  }
  struct setup_cmd cmds[2];
  int n = setup_commands(addr, cmds);
  for (int i = 0; i < n; i++) {
    redisReply *r = redisCommandArgv(c, cmds[i].argc, cmds[i].argv, NULL);
    int ok = r != NULL && r->type != REDIS_REPLY_ERROR;
    /* The server's own words (WRONGPASS, NOAUTH): they name no password. */
    if (!ok) snprintf(err, errlen, "%s", r != NULL ? r->str : c->errstr);
    freeReplyObject(r);
    if (!ok) {
      redisFree(c);
      return NULL;
    }
  }
  return c;
}

/* Copies s[0, n) as a string into out. Returns 0, or -EINVAL when empty or too long. */
static int copy_part(char *out, size_t outlen, const char *s, size_t n) {
  if (n == 0 || n >= outlen) return -EINVAL;
  memcpy(out, s, n);
  out[n] = '\0';
  return 0;
}

/* Percent-decodes s[0, n) as a string into out. Returns 0, or -EINVAL (a bad escape, a NUL, too long). */
static int decode_part(char *out, size_t outlen, const char *s, size_t n) {
  long len = percent_decode(s, n, out, outlen - 1, 0);
  if (len < 0 || memchr(out, '\0', (size_t)len) != NULL) return -EINVAL;
  out[len] = '\0';
  return 0;
}

/* "[user]:password" (n bytes at s) into out. A user without a password is refused: there is nothing to send. */
static int parse_userinfo(const char *s, size_t n, struct redis_addr *out) {
  const char *colon = memchr(s, ':', n);
  if (colon == NULL || colon + 1 == s + n) return -EINVAL;
  size_t ulen = (size_t)(colon - s);
  if (ulen > 0 && decode_part(out->user, sizeof(out->user), s, ulen) != 0) return -EINVAL;
  return decode_part(out->password, sizeof(out->password), colon + 1, n - ulen - 1);
}

static int parse_url(const char *url, char *host, size_t hostlen, struct redis_addr *out) {
  static const char prefix[] = "redis://";
  if (strncmp(url, prefix, sizeof(prefix) - 1) != 0) return -EINVAL;
  const char *p = url + sizeof(prefix) - 1;
  /* Credentials end at the last '@' (a password may hold one, better percent-encoded). */
  const char *at = strrchr(p, '@');
  if (at != NULL) {
    if (parse_userinfo(p, (size_t)(at - p), out) != 0) return -EINVAL;
    p = at + 1;
  }
  const char *rest;
  if (*p == '[') {
    const char *close = strchr(p, ']');
    if (close == NULL || copy_part(host, hostlen, p + 1, (size_t)(close - p - 1)) != 0) return -EINVAL;
    rest = close + 1;
  } else {
    size_t n = strcspn(p, ":/");
    if (copy_part(host, hostlen, p, n) != 0) return -EINVAL;
    rest = p + n;
  }
  char num[16];
  int64_t v = REDIS_DEFAULT_PORT;
  if (*rest == ':') {
    size_t n = strcspn(rest + 1, "/");
    if (copy_part(num, sizeof(num), rest + 1, n) != 0 || util_parse_i64(num, 1, 65535, &v) != 0) return -EINVAL;
    rest += 1 + n;
  }
  out->port = (int)v;
  v = 0;
  if (*rest == '/' && rest[1] != '\0') {
    if (util_parse_i64(rest + 1, 0, REDIS_MAX_DB, &v) != 0) return -EINVAL;
  } else if (*rest != '\0' && strcmp(rest, "/") != 0) {
    return -EINVAL;
  }
  out->db = (int)v;
  return 0;
}

int redis_conn_resolve(const char *url, struct redis_addr *out, char *err, size_t errlen) {
  return redis_conn_resolve_var("VTS_REDIS_URL", url, out, err, errlen);
}

int redis_conn_resolve_var(const char *var, const char *url, struct redis_addr *out, char *err, size_t errlen) {
  char host[256];
  memset(out, 0, sizeof(*out));
  if (strncasecmp(url, "rediss://", 9) == 0) {
    snprintf(err, errlen,
             "%s: rediss:// (TLS) is not supported (hiredis 0.14 has no TLS): run a TLS sidecar such as "
             "stunnel next to the gateway and set %s to redis://127.0.0.1:<its local port>",
             var, var);
    return -EINVAL;
  }
  if (parse_url(url, host, sizeof(host), out) != 0) {
    /* The value is not repeated: it may hold a password. */
    memset(out, 0, sizeof(*out));
    snprintf(err, errlen, "%s: invalid value: expected redis://[[user]:password@]host[:port][/db]", var);
    return -EINVAL;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *res = NULL;
  int rv = getaddrinfo(host, NULL, &hints, &res);
  if (rv != 0 || res == NULL) {
    snprintf(err, errlen, "%s: cannot resolve host %s: %s", var, host, gai_strerror(rv));
    return -EHOSTUNREACH;
  }
  const void *a = res->ai_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr
                                             : (const void *)&((struct sockaddr_in *)res->ai_addr)->sin_addr;
  const char *ok = inet_ntop(res->ai_family, a, out->ip, sizeof(out->ip));
  freeaddrinfo(res);
  if (ok == NULL) {
    snprintf(err, errlen, "%s: cannot use the address of host %s", var, host);
    return -EHOSTUNREACH;
  }
  return 0;
}
