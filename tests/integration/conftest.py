"""Integration harness: runs the real vts binaries on 127.0.0.1 with free ports and stops every process it started.

API (shared by every integration test module):
  BUILD_DIR, REPO                      paths (BUILD_DIR from VTS_BUILD_DIR, default <repo>/build)
  free_port()                          a TCP port free on 127.0.0.1
  write_keyfile(path, entries)         key file of gateway/keys/keys.h from (name, plain_key, status, rate, window, quota)
  Gateway(tmp_path, env=None, workers=2)
      .start() .stop(sig=SIGTERM) -> exit code, .port .url .pid .child_pids() .worker_pids() .log_text()
      .key .revoked_key .keys_file .request(method, path, headers=None, timeout=10) -> Response
  Response: .status .headers (dict, lowercase names) .body (bytes) .json()
  fixture gateway                      a started Gateway with 2 workers, stopped at teardown
  fixture make_gateway                 make_gateway(env=None, workers=2, keys=None) -> started Gateway, stopped at
                                       teardown (keys: write_keyfile entries replacing the default test keys)
  fixture upstream                     the fake platform (harness.FakeUpstream) for a test module
  raw_exchange(port, data, timeout)    bytes the server sent until it closed or the timeout passed
  read_until_close(sock, timeout)      the same on a socket of your own
  exchange_in_parts(port, parts)       raw_exchange with each part in its own write, 0.1 s apart
  parse_responses(data, methods=None)  raw bytes -> [(status, headers, body)]
After every Gateway.request, tests/integration/contract.py's check_response(method, path, status, headers, body)
validates the response when that module exists.
"""

import atexit
import http.client
import importlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

# A test run leaves no bytecode in the checkout: every module imported from here on is compiled in memory only
# (tests/run.sh sets PYTHONDONTWRITEBYTECODE, which covers this file too).
sys.dont_write_bytecode = True

from vtsproc import (children_of, free_port, log_records, metric, process_gone, process_name, read_log,  # noqa: F401
                     scrape, wait_for, wait_metric, write_keyfile)

REPO = Path(__file__).resolve().parents[2]
BUILD_DIR = Path(os.environ.get("VTS_BUILD_DIR", str(REPO / "build")))

ACTIVE_KEY = "vts_test_key_active"
REVOKED_KEY = "vts_test_key_revoked"
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 30.0

_live_processes = []


def _kill_everything():
    """Last resort (interpreter exit): SIGKILL every process group the harness started."""
    for proc in list(_live_processes):
        _kill_group(proc)


atexit.register(_kill_everything)


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    if proc in _live_processes:
        _live_processes.remove(proc)


# A skip is a test that did not run. Under CI=true (tests/run.sh in CI) it fails the run instead, so a missing tool or
# fixture cannot pass for green; every skip is also written to $VTS_SKIP_LOG (one line each) for the stages summary.
CI_SKIPS_FAIL = os.environ.get("CI", "").lower() == "true"
# The fake platform rations nothing: every fetcher a test starts is unpaced unless the test sets a budget.
os.environ.setdefault("VTS_EGRESS_RATE", "0")


def _skip_reason(longrepr):
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason


# Some tests need what a checkout or a user may lack by design, not a tool to install: the platform captures, kept
# outside the repository ("captures"), or root ("root": root itself, or sudo that asks no password). Without it such a
# test does not run and says so: "not run here (WHAT): how to get it", listed and counted by tests/run.sh apart from
# the skips, and no failure under CI=true. A run that must have them names them in VTS_REQUIRE (comma-separated; .ci/run
# sets captures,root): there a missing one fails its test.
NOT_HERE = "not run here"
REQUIRED = {w.strip() for w in os.environ.get("VTS_REQUIRE", "").split(",") if w.strip()}
CAPTURES_HOWTO = ("the platform captures are kept outside the repository: put their folder (youtube-transcript-api/, "
                  "newpipe/) at ../shared/fixtures beside the checkout, or set VTS_SHARED_FIXTURES to it")


def not_here(what, why):
    """Ends the calling test for a missing requirement what ("captures", "root"), or fails it when VTS_REQUIRE names
    what."""
    if what in REQUIRED:
        pytest.fail(f"{what} is required here (VTS_REQUIRE={','.join(sorted(REQUIRED))}) but missing: {why}",
                    pytrace=False)
    pytest.skip(f"{NOT_HERE} ({what}): {why}")


def root_is_a_mount_point():
    """Whether / is a mount point as this process sees its mounts. It is not inside a chroot made on a plain folder
    (debootstrap's), where a container runtime cannot remount the root it works from ("remount /: invalid
    argument"). Without /proc nothing can be told: True."""
    try:
        with open("/proc/self/mountinfo") as f:
            return any(line.split()[4] == "/" for line in f if len(line.split()) > 4)
    except OSError:
        return True


def shared_fixtures(sub):
    """The folder sub of the platform captures (VTS_SHARED_FIXTURES, else ../shared/fixtures beside the checkout);
    not_here("captures") when it is missing."""
    root = os.environ.get("VTS_SHARED_FIXTURES", str(REPO.parent / "shared" / "fixtures"))
    path = os.path.join(root, sub)
    if not os.path.isdir(path):
        not_here("captures", f"{path} is not a folder; {CAPTURES_HOWTO}")
    return path


def _skip_seen(report):
    reason = _skip_reason(report.longrepr)
    log = os.environ.get("VTS_SKIP_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{report.nodeid}: {reason}\n")
    if CI_SKIPS_FAIL and not reason.startswith(NOT_HERE + " ("):
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, which makes a skip a failure: {reason}"


# Every file a test makes lives in one folder of the run, removed at its end (pytest alone keeps its last three runs'
# folders in /tmp/pytest-of-USER). Given --basetemp, the caller's folder is used and kept.
_run_tmp = None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    global _run_tmp
    if config.option.basetemp is not None or _run_tmp is not None:
        return
    _run_tmp = tempfile.mkdtemp(prefix="vts-tests-")
    # Others may pass through (not list): the key file tests hand a folder inside to another user.
    os.chmod(_run_tmp, 0o711)
    config.option.basetemp = os.path.join(_run_tmp, "pytest")
    tempfile.tempdir = _run_tmp
    os.environ["TMPDIR"] = _run_tmp


def pytest_unconfigure(config):
    global _run_tmp
    if _run_tmp is not None:
        shutil.rmtree(_run_tmp, ignore_errors=True)
        _run_tmp = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        _skip_seen(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if report.skipped:
        _skip_seen(report)


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"Response({self.status}, {self.headers!r}, {self.body[:200]!r})"


_contract = None


def _contract_check(method, path, status, headers, body):
    """Calls contract.check_response when tests/integration/contract.py exists (imported on first use)."""
    global _contract
    if _contract is None:
        if not (Path(__file__).parent / "contract.py").exists():
            return
        _contract = importlib.import_module("contract")
    check = getattr(_contract, "check_response", None)
    if check is not None:
        check(method, path, status, headers, body)


def http_request(port, method, path, headers=None, timeout=10):
    """One request on a new connection to 127.0.0.1:port; returns a Response."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        body = resp.read()
        hdrs = {k.lower(): v for k, v in resp.getheaders()}
        return Response(resp.status, hdrs, body)
    finally:
        conn.close()


class Gateway:
    """vts-gateway (master, workers, dispatcher) in its own process group, logging to <tmp_path>/gateway.log."""

    def __init__(self, tmp_path, env=None, workers=2):
        self.tmp_path = Path(tmp_path)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.key = ACTIVE_KEY
        self.revoked_key = REVOKED_KEY
        self.keys_file = self.tmp_path / "keys.db"
        self.state_dir = self.tmp_path / "state"
        self.log_path = self.tmp_path / "gateway.log"
        self.jobs_port = free_port()
        self.metrics_port = free_port()
        self.proc = None
        self.env = dict(os.environ)
        self.env.update({
            "VTS_LISTEN": f"127.0.0.1:{self.port}",
            "VTS_WORKERS": str(workers),
            "VTS_KEYS_FILE": str(self.keys_file),
            "VTS_STATE_DIR": str(self.state_dir),
            "VTS_JOBS_URL": f"tcp://127.0.0.1:{self.jobs_port}",
            "VTS_METRICS_LISTEN": f"127.0.0.1:{self.metrics_port}",
            "VTS_ENV": "test",
            "XDG_RUNTIME_DIR": str(self.tmp_path),
            # The drain of the harness's gateways stays at 10 s (the service's default covers a 30 s job): a test that
            # stops a gateway with a request held does not wait 35 s for it. Tests of the drain set their own.
            "VTS_DRAIN_TIMEOUT_MS": "10000",
        })
        # Leak reports of sanitizer builds would turn every clean exit into a failure of unrelated tests.
        self.env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
        if env:
            self.env.update({k: str(v) for k, v in env.items()})

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def start(self):
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if not self.keys_file.exists():
            write_keyfile(self.keys_file, [
                ("test-active", ACTIVE_KEY, "active", 0, 0, 0),
                ("test-revoked", REVOKED_KEY, "revoked", 0, 0, 0),
            ])
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([str(BUILD_DIR / "bin" / "vts-gateway")], env=self.env, stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        _live_processes.append(self.proc)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.kill()
                pytest.fail(f"vts-gateway exited with {self.proc.returncode} at start:\n{self.log_text()}")
            try:
                if http_request(self.port, "GET", "/health", timeout=1).status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)  # poll interval: /health again until START_TIMEOUT_S
        self.kill()
        pytest.fail(f"vts-gateway did not answer /health within {START_TIMEOUT_S} s:\n{self.log_text()}")

    def child_pids(self):
        """Workers and dispatcher (the master's live children)."""
        return children_of(self.proc.pid) if self.proc else []

    def worker_pids(self):
        return [p for p in self.child_pids() if process_name(p) == "vts-worker"]

    def dispatcher_pids(self):
        return [p for p in self.child_pids() if process_name(p) == "vts-dispatcher"]

    def metric(self, name, **labels):
        """The value of a sample of this gateway's /metrics (0 when absent)."""
        return metric(scrape(self.metrics_port), name, **labels)

    def log_text(self):
        return read_log(self.log_path)

    def log_records(self):
        """The gateway's JSON log lines, parsed (other lines are skipped)."""
        return log_records(self.log_text())

    def request(self, method, path, headers=None, timeout=10):
        resp = http_request(self.port, method, path, headers, timeout)
        _contract_check(method, path, resp.status, resp.headers, resp.body)
        return resp

    def stop(self, sig=signal.SIGTERM):
        """Signals the master, waits for it, then kills whatever of its group is left. Returns the exit code."""
        if self.proc is None:
            return None
        rc = self.proc.poll()
        if rc is None:
            try:
                self.proc.send_signal(sig)
                rc = self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                rc = None
        self.kill()
        return rc

    def kill(self):
        if self.proc is not None:
            _kill_group(self.proc)
        if getattr(self, "_log", None) is not None:
            self._log.close()
            self._log = None


def read_until_close(sock, timeout=5.0):
    """Every byte the peer sends on sock until it closes (or resets) the connection or timeout passes."""
    chunks = []
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except (socket.timeout, ConnectionResetError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def raw_exchange(port, data, timeout=5.0):
    """Sends data on a new connection; returns every byte the server sent until it closed or timeout passed."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        return read_until_close(s, timeout)


def exchange_in_parts(port, parts, pause=0.1, timeout=5.0):
    """Like raw_exchange, but sends parts as separate writes with a pause between them (separate reads)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        for i, part in enumerate(parts):
            if i:
                time.sleep(pause)  # the wait is the test: each part arrives in a read of its own
            s.sendall(part)
        return read_until_close(s, timeout)


def parse_responses(data, methods=None):
    """Splits raw bytes into a list of (status, headers dict lowercase, body) by Content-Length.

    methods: the request methods in order, when some are HEAD (whose answers carry a Content-Length but no body).
    """
    out = []
    methods = list(methods or [])
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            raise AssertionError(f"incomplete response head: {data[:200]!r}")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        n = int(headers.get("content-length", "0"))
        if len(out) < len(methods) and methods[len(out)] == "HEAD":
            n = 0
        out.append((status, headers, rest[:n]))
        data = rest[n:]
    return out


@pytest.fixture(scope="module")
def upstream():
    import sys
    sys.path.insert(0, str(REPO / "tests" / "fake_upstream"))
    import harness
    fake = harness.FakeUpstream()
    yield fake
    fake.close()


@pytest.fixture
def gateway(tmp_path):
    gw = Gateway(tmp_path, workers=2)
    try:
        gw.start()
        yield gw
    finally:
        gw.stop()


@pytest.fixture
def make_gateway(tmp_path):
    """Factory for gateways with a custom environment; every one is stopped at teardown."""
    made = []

    def make(env=None, workers=2, keys=None):
        """keys: key file entries (see write_keyfile) instead of the default active and revoked test keys."""
        path = tmp_path / f"gw{len(made)}"
        path.mkdir(parents=True, exist_ok=True)
        gw = Gateway(path, env=env, workers=workers)
        if keys is not None:
            write_keyfile(gw.keys_file, keys)
        made.append(gw)
        return gw.start()

    try:
        yield make
    finally:
        for gw in made:
            gw.stop()


@pytest.fixture
def redis():
    """A started redis-server of the test's own (redisserver.Redis); skips when redis-server is not installed."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed: the redis provider cannot be tested")
    from redisserver import Redis
    r = Redis()
    r.start()
    yield r
    r.stop()
