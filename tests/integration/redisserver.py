"""A real redis-server for integration tests: started by the test on a free port, without persistence."""
import signal
import socket
import subprocess
import time

from conftest import free_port


def _resp(args):
    args = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def _read_line(s):
    """Reads one reply line (a status or an error) byte by byte, so nothing after it is consumed."""
    line = b""
    while not line.endswith(b"\r\n"):
        c = s.recv(1)
        if not c:
            break
        line += c
    return line


class Redis:
    """A redis-server of our own on a free port, killed at teardown. Without data_dir it keeps no data across a
    restart; with one, every write is in its append-only file there (fsync always), so a restart keeps them.
    args: more redis-server arguments (a password, ACL users); auth: (user, password) the test's own commands
    authenticate with (user None: the requirepass password). conf: a redis.conf to start from (a file shipped in
    deploy/redis/); the test's own port, address and persistence override it."""

    def __init__(self, data_dir=None, args=(), auth=None, conf=None):
        self.port = free_port()
        self.conf = conf
        self.proc = None
        self.data_dir = data_dir
        self.args = list(args)
        self.auth = auth

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def start(self):
        persist = (["--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.data_dir)] if self.data_dir
                   else ["--appendonly", "no"])
        self.proc = subprocess.Popen(
            ["redis-server"] + ([str(self.conf)] if self.conf else [])
            + ["--port", str(self.port), "--bind", "127.0.0.1", "--save", ""] + persist + self.args,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                if self.command("PING") == b"+PONG":
                    return
            except OSError:
                pass
            time.sleep(0.02)  # poll interval: PING again until the deadline
        self.stop()
        raise AssertionError("redis-server did not start on port %d" % self.port)

    def stop(self):
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def freeze(self):
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self):
        self.proc.send_signal(signal.SIGCONT)

    def _request(self, args):
        """The bytes of one command, after AUTH when the server wants it."""
        req = _resp(args)
        if self.auth is not None:
            user, password = self.auth
            req = _resp(("AUTH", password) if user is None else ("AUTH", user, password)) + req
        return req

    def command(self, *args):
        """Sends one command (RESP), after AUTH when the server wants it, and returns the first line of the answer."""
        req = self._request(args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
            s.sendall(req)
            if self.auth is not None:
                _read_line(s)
            buf = b""
            while b"\r\n" not in buf:
                chunk = s.recv(4096)
                if not chunk:
                    break
                buf += chunk
        return buf.split(b"\r\n", 1)[0]

    def call(self, *args):
        """Sends one command and returns its whole answer: bytes, an int, None, a list, or an Exception for an error."""
        req = self._request(args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(req)
            f = s.makefile("rb")
            if self.auth is not None:
                _parse(f)
            return _parse(f)


def _parse(f):
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest
    if kind == b"-":
        return Exception(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_parse(f) for _ in range(n)]
    raise AssertionError("not a RESP reply: %r" % line)
