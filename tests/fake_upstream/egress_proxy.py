#!/usr/bin/env python3
"""A small HTTP forward proxy for the egress tests (standard library only).

    python3 egress_proxy.py --port N --source ADDR [--source ADDR...]   (0 picks a free port; prints "READY <port>")

It listens on 127.0.0.1 and makes every outgoing connection from the source address ADDR (127.0.0.2, 127.0.0.3...:
Linux answers the whole 127.0.0.0/8 on loopback), so the fake platform sees which egress a request took. Given
several sources it is a rotating proxy, as the ones sold behind one gateway URL: each client connection goes out
from the next source in turn (the first connection from the first), so a new connection is a new address. It speaks
both forms a client uses: CONNECT host:port (a tunnel) and an absolute-URI request ("GET http://host:port/path"),
which is passed on as it came, with the rest of that client connection piped to the same origin (every test here
talks to one origin). GET /__count answers how many client connections it accepted.
"""

import argparse
import socket
import sys
import threading

CONNECTIONS = [0]
LOCK = threading.Lock()


def next_source(sources):
    """The source of the connection being accepted: the sources in turn, one per client connection."""
    with LOCK:
        source = sources[CONNECTIONS[0] % len(sources)]
        CONNECTIONS[0] += 1
    return source


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def read_head(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
        if len(data) > 65536:
            return None
    return data


def serve(conn, sources):
    upstream = None
    try:
        head = read_head(conn)
        if head is None:
            return
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        method, target, _ = line.split(" ", 2)
        if method == "GET" and target == "/__count":
            with LOCK:
                body = str(CONNECTIONS[0]).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
            return
        source = next_source(sources)
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            rest = head.split(b"\r\n\r\n", 1)[1]
        else:
            hostport = target.split("://", 1)[1].split("/", 1)[0]
            host, port = hostport.rsplit(":", 1) if ":" in hostport else (hostport, "80")
            rest = head
        upstream = socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))
        upstream.settimeout(None)
        if method == "CONNECT":
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        if rest:
            upstream.sendall(rest)
        t = threading.Thread(target=pipe, args=(upstream, conn), daemon=True)
        t.start()
        pipe(conn, upstream)
        t.join(timeout=30)
    except (OSError, ValueError):
        try:
            conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        except OSError:
            pass
    finally:
        conn.close()
        if upstream is not None:
            upstream.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--source", action="append", required=True,
                        help="source address of outgoing connections; repeated: one per connection, in turn")
    args = parser.parse_args()
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", args.port))
    lsock.listen(128)
    print("READY %d" % lsock.getsockname()[1], flush=True)
    try:
        while True:
            conn, _ = lsock.accept()
            threading.Thread(target=serve, args=(conn, args.source), daemon=True).start()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
