"""A TCP proxy on 127.0.0.1 that delivers every chunk a client sends to its server delay_s late (replies go back at
once), without holding back the chunks behind it: a Redis whose every command takes that much longer."""
import heapq
import socket
import threading
import time


class DelayProxy:
    def __init__(self, target_port, delay_s):
        self.target_port = target_port
        self.delay_s = delay_s
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.closed = threading.Event()
        self.lock = threading.Condition()
        self.due = []  # (when, seq, server socket, bytes)
        self.seq = 0
        self.socks = []
        threading.Thread(target=self._accept, daemon=True).start()
        threading.Thread(target=self._deliver, daemon=True).start()

    def _accept(self):
        while not self.closed.is_set():
            try:
                client, _ = self.lsock.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            self.socks += [client, server]
            threading.Thread(target=self._upstream, args=(client, server), daemon=True).start()
            threading.Thread(target=self._downstream, args=(server, client), daemon=True).start()

    def _upstream(self, client, server):
        while True:
            try:
                data = client.recv(65536)
            except OSError:
                data = b""
            with self.lock:
                self.seq += 1
                # An empty chunk is the client's end: passed on in order, after what it sent before.
                heapq.heappush(self.due, (time.monotonic() + self.delay_s, self.seq, server, data))
                self.lock.notify()
            if not data:
                return

    def _downstream(self, server, client):
        while True:
            try:
                data = server.recv(65536)
                if not data:
                    break
                client.sendall(data)
            except OSError:
                break
        with _quiet():
            client.shutdown(socket.SHUT_RDWR)

    def _deliver(self):
        while not self.closed.is_set():
            with self.lock:
                while not self.due and not self.closed.is_set():
                    self.lock.wait(0.1)
                if not self.due:
                    continue
                when, _, server, data = self.due[0]
                wait = when - time.monotonic()
                if wait > 0:
                    self.lock.wait(wait)
                    continue
                heapq.heappop(self.due)
            with _quiet():
                if data:
                    server.sendall(data)
                else:
                    server.shutdown(socket.SHUT_WR)

    def close(self):
        self.closed.set()
        with _quiet():
            self.lsock.close()
        for s in self.socks:
            with _quiet():
                s.close()


class _quiet:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return exc[0] is not None and issubclass(exc[0], OSError)
