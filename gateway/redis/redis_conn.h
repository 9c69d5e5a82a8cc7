/*
 * What every Redis user in the gateway shares: where Redis is (VTS_REDIS_URL parsed and resolved once), how a
 * connection is opened and prepared (the database selected), and our own libuv binding for hiredis 0.14's async API.
 * Its users open connections only through the one session above it (redis_session.h), so a setting of the
 * connection (a database, credentials) is handled in one place.
 */
#ifndef VTS_REDIS_CONN_H
#define VTS_REDIS_CONN_H

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stddef.h>
#include <uv.h>

/* Room for a Redis user name and password, decoded. */
#define REDIS_CONN_USER_BYTES 128
#define REDIS_CONN_PASSWORD_BYTES 512

/*
 * Where Redis is: an address literal, resolved once at start (hiredis resolves names synchronously), and the
 * credentials a connection authenticates with. The password never goes into a log line or an error message.
 */
struct redis_addr {
  char ip[64];
  int port;
  int db;
  char user[REDIS_CONN_USER_BYTES];         /* "" with a password alone: the server's requirepass */
  char password[REDIS_CONN_PASSWORD_BYTES]; /* "" for none: no AUTH */
};

/*
 * Parses redis://[[user]:password@]host[:port][/db] (port 6379 and db 0 by default; host a name, an IPv4 literal
 * or an IPv6 literal in brackets; user and password percent-decoded) and resolves host. With a user, connections
 * authenticate as that ACL user, with a password alone against requirepass. rediss:// is refused: hiredis 0.14 has
 * no TLS (the message says to run a TLS sidecar). Returns 0, or -EINVAL / -EHOSTUNREACH with one line naming
 * VTS_REDIS_URL in err, never the password.
 */
int redis_conn_resolve(const char *url, struct redis_addr *out, char *err, size_t errlen);
/* The same for the URL of another variable (VTS_REDIS_CACHE_URL), which err names instead. */
int redis_conn_resolve_var(const char *var, const char *url, struct redis_addr *out, char *err, size_t errlen);

/*
 * Starts an async connection on loop: the socket is watched by our binding (below), connect and disconnect call
 * on_connect / on_disconnect with ac->data = data, and the preparing commands are queued at once, each answered to
 * setup_cb(ac, reply, setup_arg); commands the caller queues afterwards are sent behind them. Returns the context, or
 * NULL with a short reason in err (nothing to free then).
 */
redisAsyncContext *redis_conn_open_async(uv_loop_t *loop, const struct redis_addr *addr, void *data,
                                         redisConnectCallback *on_connect, redisDisconnectCallback *on_disconnect,
                                         redisCallbackFn *setup_cb, void *setup_arg, char *err, size_t errlen);

/*
 * A blocking connection, for a caller that waits for each reply (the job store): the connect and every command are
 * bounded by timeout_ms (a reply not there by then is an error, and the context is then unusable), and it is prepared
 * (AUTH, SELECT) before it is returned. Returns the context, or NULL with a short reason in err (never the password).
 */
redisContext *redis_conn_open_sync(const struct redis_addr *addr, int timeout_ms, char *err, size_t errlen);

/*
 * Writes the commands ac holds now instead of at the socket's next writable event: no watch for writability is
 * added and removed (two epoll changes) and the commands leave this loop turn. Only on an established connection.
 * A write error disconnects ac here (its disconnect callback runs and its pending commands are answered NULL).
 */
void redis_conn_write_now(redisAsyncContext *ac);

#endif
