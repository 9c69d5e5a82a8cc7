"""deploy/supervisord.conf under the real supervisord (Debian's supervisor), started exactly as deploy/run-local.sh
starts it (supervisord -c deploy/supervisord.conf with VTS_RUN_DIR, VTS_BIN, VTS_FETCHERS and the service's VTS_*
in its environment), against the fake platform: serving, `supervisorctl status`, a killed fetcher replaced, and the
two ways to stop (`supervisorctl stop all`, and supervisord's own shutdown on Ctrl-C) without failing a request.

supervisord runs in the foreground (nodaemon=true) in its own session; its children get process groups of their
own but stay in that session, so the teardown kills every process of the session."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import ACTIVE_KEY, BUILD_DIR, REPO, free_port, http_request, wait_for, write_keyfile
from vtsproc import session_pids

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402

SUPERVISORD = shutil.which("supervisord") or "/usr/bin/supervisord"
SUPERVISORCTL = shutil.which("supervisorctl") or "/usr/bin/supervisorctl"
pytestmark = pytest.mark.skipif(
    not (os.access(SUPERVISORD, os.X_OK) and os.access(SUPERVISORCTL, os.X_OK)),
    reason="supervisord not installed (Debian package 'supervisor'): deploy/supervisord.conf cannot be run")

CONF = REPO / "deploy" / "supervisord.conf"
FETCHERS = 3
FETCHER_NAMES = ["fetcher:fetcher_%02d" % i for i in range(FETCHERS)]
UNLIMITED = [("ops", ACTIVE_KEY, "active", 1000000, 60, 1000000000)]
# The public body of every fake video with the one English track (capJson3xx1, and the slow* and bench* ids).
BODY = (b'{"language":"en","source":"captions","text":"Hello and welcome to the fake platform",'
        b'"segments":[{"text":"Hello and welcome","start":0.12,"duration":2.4},'
        b'{"text":"to the fake platform","start":2.52,"duration":3}]}')


class Supervised:
    """supervisord running deploy/supervisord.conf with a fresh run directory and free ports."""

    def __init__(self):
        # Short: the control socket lives here and a unix socket path must fit 108 bytes.
        self.run_dir = Path(tempfile.mkdtemp(prefix="vts-sv-"))
        self.upstream = harness.FakeUpstream()
        self.port, self.jobs_port, self.metrics_port = free_port(), free_port(), free_port()
        keys = self.run_dir / "keys.db"
        write_keyfile(keys, UNLIMITED)
        (self.run_dir / "state").mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("VTS_")}
        self.env.update({
            # What deploy/run-local.sh exports before it starts supervisord -c deploy/supervisord.conf.
            "VTS_RUN_DIR": str(self.run_dir),
            "VTS_BIN": str(BUILD_DIR / "bin"),
            "VTS_FETCHERS": str(FETCHERS),
            "VTS_KEYS_FILE": str(keys),
            "VTS_STATE_DIR": str(self.run_dir / "state"),
            # The gateway's IPC socket goes here too, and with the folder when the test ends.
            "XDG_RUNTIME_DIR": str(self.run_dir),
            # The service's own configuration.
            "VTS_LISTEN": "127.0.0.1:%d" % self.port,
            "VTS_WORKERS": "2",
            "VTS_JOBS_URL": "tcp://127.0.0.1:%d" % self.jobs_port,
            "VTS_METRICS_LISTEN": "127.0.0.1:%d" % self.metrics_port,
            "VTS_UPSTREAM_URL": self.upstream.url,
            "VTS_ENV": "test",
            "ASAN_OPTIONS": "detect_leaks=0",
        })
        self.out = open(self.run_dir / "supervisord.out", "wb")
        self.proc = subprocess.Popen([SUPERVISORD, "-c", str(CONF)], env=self.env, stdout=self.out,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.close()
            raise

    def _wait_ready(self, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("supervisord exited with %s:\n%s" % (self.proc.returncode, self.text("*")))
            st = self.status()
            if (len(st) == FETCHERS + 1 and all(state == "RUNNING" for state, _ in st.values()) and
                    self.metric("vts_fetchers_idle") == FETCHERS):
                return
            time.sleep(0.1)  # poll interval: the status and the gauge again, until timeout
        raise AssertionError("not ready within %ss: %r\n%s" % (timeout, self.status(), self.text("*")))

    def ctl(self, *args, timeout=60):
        return subprocess.run([SUPERVISORCTL, "-c", str(CONF), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def status(self):
        """{name: (state, pid or None)} from `supervisorctl status`."""
        out = {}
        for line in self.ctl("status", timeout=10).stdout.splitlines():
            m = re.match(r"(\S+)\s+([A-Z]+)\s*(?:pid (\d+),)?", line)
            if m and m.group(2) in ("RUNNING", "STARTING", "STOPPED", "STOPPING", "EXITED", "FATAL", "BACKOFF"):
                out[m.group(1)] = (m.group(2), int(m.group(3)) if m.group(3) else None)
        return out

    def metric(self, name):
        try:
            text = http_request(self.metrics_port, "GET", "/metrics", timeout=2).body.decode()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def wait_metric(self, name, value, timeout=10):
        if wait_for(lambda: self.metric(name) == value, timeout):
            return
        raise AssertionError("%s never reached %s (last %s)" % (name, value, self.metric(name)))

    def get(self, video_id, timeout=30):
        return http_request(self.port, "GET", "/v1/video/transcript?video_id=" + video_id,
                            headers={"x-api-key": ACTIVE_KEY}, timeout=timeout)

    def text(self, pattern):
        """The logs of the run directory matching pattern, concatenated."""
        return "".join("== %s\n%s" % (p.name, p.read_text(errors="replace"))
                       for p in sorted(self.run_dir.glob(pattern)) if p.is_file())

    def service_pids(self):
        """Processes of the session other than supervisord itself."""
        return [p for p in session_pids(self.proc.pid) if p != self.proc.pid]

    def close(self):
        pids = session_pids(self.proc.pid)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and session_pids(self.proc.pid):
            time.sleep(0.05)  # poll interval: until the session's processes are gone, within 10 s
        self.out.close()
        self.upstream.close()
        shutil.rmtree(self.run_dir, ignore_errors=True)


@pytest.fixture
def sv():
    s = Supervised()
    try:
        yield s
    finally:
        s.close()


def _get_all(sv, videos):
    """Requests every video at once, each on its own connection; returns {video: Response or exception}."""
    results = {}

    def one(video):
        try:
            results[video] = sv.get(video)
        except Exception as e:  # noqa: BLE001 - a failure is reported per request below
            results[video] = e

    threads = [threading.Thread(target=one, args=(v,)) for v in videos]
    for t in threads:
        t.start()
    return threads, results


def _comm(pid):
    try:
        return Path("/proc/%d/comm" % pid).read_text().strip()
    except OSError:
        return ""


def test_supervisord_serves_transcripts_and_status_shows_gateway_and_fetchers_running(sv):
    r = sv.get("capJson3xx1")
    assert r.status == 200, r
    assert r.body == BODY
    st = sv.status()
    assert sorted(st) == sorted(["gateway"] + FETCHER_NAMES), st
    assert all(state == "RUNNING" and pid for state, pid in st.values()), st
    assert _comm(st["gateway"][1]) == "vts-gateway"
    for name in FETCHER_NAMES:
        assert _comm(st[name][1]) == "vts-fetcher"
    # Each process logs JSON lines into its own file in VTS_RUN_DIR.
    assert '"msg":"gateway starting"' in (sv.run_dir / "gateway.log").read_text()
    for i in range(FETCHERS):
        assert '"msg":"fetcher ready"' in (sv.run_dir / ("fetcher_%02d.log" % i)).read_text()


def _wait_restarted(sv, old, timeout=2.0):
    """Waits until every name of old {name: pid} runs again with another pid; returns the new status."""
    deadline = time.monotonic() + timeout
    while True:
        st = sv.status()
        if all(st.get(n, ("", None))[0] == "RUNNING" and st[n][1] not in (None, pid) for n, pid in old.items()):
            return st
        if time.monotonic() > deadline:
            raise AssertionError("not restarted within %ss: %r" % (timeout, st))
        time.sleep(0.05)  # poll interval: the status again, until timeout


def test_killed_fetcher_is_restarted_within_2s_and_the_next_request_is_served(sv):
    before = sv.status()
    victim = FETCHER_NAMES[1]
    os.kill(before[victim][1], signal.SIGKILL)
    after = _wait_restarted(sv, {victim: before[victim][1]})
    for name in ["gateway"] + FETCHER_NAMES:
        if name != victim:
            assert after[name][1] == before[name][1], "only the killed fetcher is replaced"
    r = sv.get("benchKill01")
    assert r.status == 200, r
    assert r.body == BODY

    # Every fetcher killed at once: the next request can only be served by replacements.
    pids = {n: after[n][1] for n in FETCHER_NAMES}
    for pid in pids.values():
        os.kill(pid, signal.SIGKILL)
    _wait_restarted(sv, pids)
    r = sv.get("benchKill02")
    assert r.status == 200, r
    assert r.body == BODY


def test_stop_all_lets_every_in_flight_request_finish(sv):
    """`supervisorctl stop all` signals every program at once (supervisor sends them in ascending priority, without
    waiting between them): the gateway drains, and each busy fetcher finishes its job and delivers it first."""
    videos = ["slowDrain%02d" % i for i in range(FETCHERS)]
    threads, results = _get_all(sv, videos)
    # Every job is at a fetcher (the fake holds each player request for 1.5 s).
    sv.wait_metric("vts_jobs_in_flight", FETCHERS)
    assert sv.metric("vts_jobs_queued") == 0
    out = sv.ctl("stop", "all")
    for t in threads:
        t.join(timeout=30)
    for v in videos:
        r = results[v]
        assert not isinstance(r, Exception) and r.status == 200, (v, r, sv.text("*.log")[-4000:])
        assert r.body == BODY
    assert out.returncode == 0, out
    st = sv.status()
    assert all(state == "STOPPED" for state, _ in st.values()), st
    assert sv.service_pids() == [], "every program must have exited"
    gateway_log = (sv.run_dir / "gateway.log").read_text()
    assert '"msg":"gateway stopped"' in gateway_log
    assert '"status":500' not in gateway_log and '"status":502' not in gateway_log
    for i in range(FETCHERS):
        log = (sv.run_dir / ("fetcher_%02d.log" % i)).read_text()
        assert '"msg":"fetcher stopped"' in log
        assert "job dropped" not in log and "not acknowledged" not in log, log


def test_supervisord_shutdown_stops_the_gateway_first_and_queued_requests_are_served(sv):
    """Ctrl-C on deploy/run-local.sh (SIGINT to supervisord) stops programs by descending priority, each group only
    after the previous one has exited: the gateway (20) drains while every fetcher (10) still serves, so even jobs
    still waiting in the queue are answered."""
    videos = ["slowQueue%02d" % i for i in range(2 * FETCHERS)]
    threads, results = _get_all(sv, videos)
    sv.wait_metric("vts_jobs_in_flight", FETCHERS)
    sv.wait_metric("vts_jobs_queued", FETCHERS)
    sv.proc.send_signal(signal.SIGINT)
    for t in threads:
        t.join(timeout=30)
    for v in videos:
        r = results[v]
        assert not isinstance(r, Exception) and r.status == 200, (v, r, sv.text("*.log")[-4000:])
        assert r.body == BODY
    assert sv.proc.wait(timeout=60) == 0
    assert sv.service_pids() == []
    events = [line for line in (sv.run_dir / "supervisord.log").read_text().splitlines()
              if re.search(r"(waiting for|stopped: )(gateway|fetcher_\d+)", line)]
    first_fetcher = next(i for i, line in enumerate(events) if "fetcher_" in line)
    gateway_stopped = next(i for i, line in enumerate(events) if "stopped: gateway" in line)
    assert gateway_stopped < first_fetcher, "\n".join(events)
    for i in range(FETCHERS):
        log = (sv.run_dir / ("fetcher_%02d.log" % i)).read_text()
        assert '"msg":"fetcher stopped"' in log and "job dropped" not in log
