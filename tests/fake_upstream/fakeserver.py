"""What the fake servers of this folder share: a threading HTTP server on a port of the caller's (0: a free one) that
prints "READY <port>" once listening and serves until it is killed, and the answer of a peer that hangs."""

import select
import socket
import time
from http.server import ThreadingHTTPServer


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def get_request(self):
        sock, addr = super().get_request()
        # Headers and body leave in separate writes: without this, Nagle waits for the client's delayed ACK (40 ms).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, addr


def serve(host, port, handler_class):
    """Listens on host:port, says READY with the port, and serves until interrupted. Returns the exit status."""
    server = Server((host, port), handler_class)
    print("READY %d" % server.server_address[1], flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def hang(handler, max_seconds):
    """Answers nothing on handler's connection until the client goes away (or max_seconds pass)."""
    deadline = time.monotonic() + max_seconds
    while time.monotonic() < deadline:
        readable, _, _ = select.select([handler.connection], [], [], 0.2)
        if readable:
            try:
                if not handler.connection.recv(1, 0x02):  # MSG_PEEK: EOF means the client closed
                    break
            except OSError:
                break
    handler.close_connection = True
