"""Processes and sockets for the fault battery (standard library only): the gateway, a fetcher pool, the fake
platform and a redis-server, each started on 127.0.0.1 with free ports in its own process group and stopped by
the battery; raw HTTP helpers; what /proc says about processes and sockets."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BUILD_DIR = Path(os.environ.get("VTS_BUILD_DIR", str(REPO / "build")))
sys.path.insert(0, str(REPO / "tests" / "fake_upstream"))
import harness  # noqa: E402  (the fake platform as a subprocess; standard library only)
sys.path.insert(0, str(REPO / "tests" / "integration"))
from vtsproc import free_port, write_keyfile, process_gone, children_of, log_records, read_log  # noqa: E402,F401
from vtsproc import process_name as comm  # noqa: E402

KEY = "vts_fault_key_0001"
START_TIMEOUT_S = 15.0

_live = []


def kill_all():
    """SIGKILL every process group the battery started and has not stopped yet."""
    for proc in list(_live):
        _kill_group(proc)


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    if proc in _live:
        _live.remove(proc)


def _spawn(argv, env, log_path):
    log = open(log_path, "ab")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    log.close()
    _live.append(proc)
    return proc


def _stop(proc, sig=signal.SIGTERM, timeout=20):
    if proc is None:
        return None
    rc = proc.poll()
    if rc is None:
        try:
            proc.send_signal(sig)
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
    _kill_group(proc)
    return rc


def rss_kb(pid, field="VmRSS"):
    """VmRSS (or VmHWM, the peak) of pid in KiB, 0 when it is gone."""
    try:
        for line in Path("/proc/%d/status" % pid).read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


TCP_STATES = {"01": "ESTABLISHED", "06": "TIME_WAIT", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN",
              "04": "FIN_WAIT1", "05": "FIN_WAIT2", "07": "CLOSE", "0B": "CLOSING", "02": "SYN_SENT", "03": "SYN_RECV"}


def tcp_sockets(port):
    """[(state, remote_port, inode)] of the IPv4 sockets whose local port is port (the server side)."""
    out = []
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            parts = line.split()
            lport = int(parts[1].split(":")[1], 16)
            if lport != port:
                continue
            rport = int(parts[2].split(":")[1], 16)
            out.append((TCP_STATES.get(parts[3], parts[3]), rport, int(parts[9])))
    return out


def client_ports_of(pid, port):
    """Remote (client) ports of the connections to port held by process pid."""
    inodes = set()
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    except (FileNotFoundError, ProcessLookupError):
        return set()
    return {rport for state, rport, inode in tcp_sockets(port) if inode in inodes and state != "LISTEN"}


# ---- HTTP ----

class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "Response(%d, %r)" % (self.status, self.body[:120])


def parse_head(head):
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


class Conn:
    """A keep-alive client connection with raw sockets (fast, and it reports exactly what the server did)."""

    def __init__(self, port, timeout=10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.local_port = self.sock.getsockname()[1]
        self.buf = b""

    def request(self, path, headers=None, method="GET"):
        lines = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1"]
        lines += ["%s: %s" % kv for kv in (headers or {}).items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        return self.read_response(method)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed by the server")
        self.buf += chunk

    def read_response(self, method="GET"):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        status, headers = parse_head(head)
        n = 0 if method == "HEAD" else int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return Response(status, headers, body)

    def closed_within(self, timeout):
        """True when the server closes the connection within timeout seconds (sending nothing more)."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except socket.timeout:
            return False
        except OSError:
            return True

    def close(self):
        self.sock.close()


def get(port, path, headers=None, timeout=10.0):
    c = Conn(port, timeout)
    try:
        return c.request(path, headers)
    finally:
        c.close()


# ---- the service ----

class Gateway:
    """vts-gateway (master, workers, dispatcher) logging to <dir>/gateway.log."""

    def __init__(self, workdir, env=None, workers=2, keys=None):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.jobs_port = free_port()
        self.metrics_port = free_port()
        self.log_path = self.dir / "gateway.log"
        if self.log_path.exists():
            self.log_path.unlink()  # a reused directory: figures come from this run's log only
        self.keys_file = self.dir / "keys.db"
        write_keyfile(self.keys_file, keys or [("fault", KEY, "active", 1000000, 60, 1000000000)])
        (self.dir / "state").mkdir(exist_ok=True)
        self.env = dict(os.environ)
        self.env.update({
            "VTS_LISTEN": "127.0.0.1:%d" % self.port, "VTS_WORKERS": str(workers),
            "VTS_KEYS_FILE": str(self.keys_file), "VTS_STATE_DIR": str(self.dir / "state"),
            "VTS_JOBS_URL": "tcp://127.0.0.1:%d" % self.jobs_port,
            "VTS_METRICS_LISTEN": "127.0.0.1:%d" % self.metrics_port, "VTS_ENV": "fault",
            "XDG_RUNTIME_DIR": str(self.dir), "ASAN_OPTIONS": "detect_leaks=0",
        })
        self.env.update({k: str(v) for k, v in (env or {}).items()})
        self.proc = None

    def start(self):
        self.proc = _spawn([str(BUILD_DIR / "bin" / "vts-gateway")], self.env, self.log_path)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("vts-gateway exited at start:\n" + self.log_text()[-2000:])
            try:
                if get(self.port, "/health", timeout=1).status == 200 and len(self.worker_pids()) >= 1:
                    return self
            except OSError:
                pass
            time.sleep(0.05)  # poll interval: until the deadline
        raise RuntimeError("vts-gateway did not answer /health:\n" + self.log_text()[-2000:])

    def worker_pids(self):
        return [p for p in children_of(self.proc.pid) if comm(p) == "vts-worker"]

    def dispatcher_pids(self):
        return [p for p in children_of(self.proc.pid) if comm(p) == "vts-dispatcher"]

    def wait_workers(self, n, timeout=5.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.worker_pids()) == n:
                return True
            time.sleep(0.05)  # poll interval: until the deadline
        return False

    def log_text(self):
        return read_log(self.log_path)

    def log_records(self):
        return log_records(self.log_text())

    def metrics(self):
        c = Conn(self.metrics_port, 5)
        try:
            return c.request("/metrics").body.decode()
        finally:
            c.close()

    def stop(self):
        return _stop(self.proc)


class Fetchers:
    """vts-fetcher --workers N dialing the gateway's dispatcher."""

    def __init__(self, workdir, jobs_port, upstream_url, workers=2, env=None):
        self.log_path = Path(workdir) / "fetcher.log"
        if self.log_path.exists():
            self.log_path.unlink()
        # The fake platform rations nothing: the fetchers are unpaced unless a case says otherwise.
        full = dict(os.environ, VTS_JOBS_URL="tcp://127.0.0.1:%d" % jobs_port, VTS_UPSTREAM_URL=upstream_url,
                    ASAN_OPTIONS="detect_leaks=0", VTS_EGRESS_RATE="0")
        full.update({k: str(v) for k, v in (env or {}).items()})
        self.workers = workers
        self.proc = _spawn([harness.fetcher_binary(), "--workers", str(workers)], full, self.log_path)

    def child_pids(self):
        return children_of(self.proc.pid)

    def log_records(self):
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def stop(self):
        return _stop(self.proc, timeout=10)


class Stack:
    """The fake platform, a gateway and a fetcher pool: the whole service."""

    def __init__(self, workdir, gateway_env=None, fetcher_env=None, fetchers=2, workers=2):
        self.upstream = harness.FakeUpstream()
        env = {"VTS_UPSTREAM_URL": self.upstream.url}
        env.update(gateway_env or {})
        self.gateway = Gateway(workdir, env=env, workers=workers)
        self.fetchers = None
        try:
            self.gateway.start()
            fenv = {"VTS_JOB_TIMEOUT_MS": env.get("VTS_JOB_TIMEOUT_MS", "30000")}
            fenv.update(fetcher_env or {})
            self.fetchers = Fetchers(workdir, self.gateway.jobs_port, self.upstream.url, fetchers, fenv)
            self.wait_pool(fetchers)
        except BaseException:
            self.close()
            raise

    def transcript(self, video, conn=None, headers=None):
        h = {"x-api-key": KEY}
        h.update(headers or {})
        path = "/v1/video/transcript?video_id=" + video
        if conn is not None:
            return conn.request(path, h)
        return get(self.gateway.port, path, h, timeout=60)

    def wait_pool(self, n, timeout=10.0):
        """Until n fetchers run and a transcript goes through end to end. Returns the seconds it took."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if len(self.fetchers.child_pids()) == n:
                try:
                    if self.transcript("benchWarm%02d" % int((time.monotonic() - t0) * 10 % 100)).status == 200:
                        return time.monotonic() - t0
                except OSError:
                    pass
            time.sleep(0.05)  # poll interval: until the deadline
        raise RuntimeError("the pool did not serve a transcript within %ss" % timeout)

    def close(self):
        if self.fetchers is not None:
            self.fetchers.stop()
        self.gateway.stop()
        self.upstream.close()


class Redis:
    """redis-server on a free port of 127.0.0.1, no persistence."""

    def __init__(self, workdir):
        self.port = free_port()
        self.url = "redis://127.0.0.1:%d" % self.port
        self.dir = Path(workdir)
        self.proc = None

    def start(self):
        self.proc = _spawn(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "no", "--dir", str(self.dir)], dict(os.environ),
                           self.dir / "redis.log")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.05)  # poll interval: until the deadline
        raise RuntimeError("redis-server did not start")

    def signal(self, sig):
        os.kill(self.proc.pid, sig)

    def stop(self):
        return _stop(self.proc, timeout=5)


def cpu_seconds(pid):
    """User plus system CPU seconds used by pid so far (0 when it is gone)."""
    try:
        data = Path("/proc/%d/stat" % pid).read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    rest = data[data.rfind(")") + 2:].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
