"""deploy/run-local.sh itself, as a newcomer runs it (its package check and build are no-ops on the suite's build): it
says "serving" only once /ready answers (a fetcher is connected), refuses a second instance and a port anyone holds
with one line naming them, stops with a program's own error line and exit status 1 when that program cannot start
(supervisord gives up: FATAL), and a closed terminal (SIGHUP) stops everything it started. Against the fake
platform, on free ports of 127.0.0.1, with a run folder of the test's own."""
import fcntl
import os
import pty
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from conftest import BUILD_DIR, REPO, free_port, http_request
from vtsproc import session_pids, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402

SCRIPT = REPO / "deploy" / "run-local.sh"


def hangup_as_a_terminal_sends_it():
    # A run of the suite started under nohup (or by anything that ignores SIGHUP) hands that down to the script, and a
    # shell cannot trap a signal ignored when it starts: the script gets SIGHUP's default, as from a login terminal.
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
ME = "deploy/run-local.sh"
# The package check, a no-op build and supervisord's start; then the start tries of a program that cannot start.
START_TIMEOUT_S = 90
pytestmark = pytest.mark.skipif(shutil.which("supervisord") is None,
                                reason="supervisord not installed (Debian package 'supervisor'): run-local needs it")


class RunLocal:
    """deploy/run-local.sh in a session of its own (its terminal), output to files."""

    def __init__(self, run_dir, upstream_url, port=None, env=None):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("VTS_")}
        self.env.update({
            "VTS_BUILD_DIR": str(BUILD_DIR), "VTS_RUN_DIR": str(self.run_dir), "VTS_FETCHERS": "1",
            "VTS_LISTEN": "127.0.0.1:%d" % self.port, "VTS_JOBS_URL": "tcp://127.0.0.1:%d" % free_port(),
            "VTS_METRICS_LISTEN": "127.0.0.1:%d" % free_port(), "VTS_UPSTREAM_URL": upstream_url,
            "VTS_WORKERS": "1", "XDG_RUNTIME_DIR": str(self.run_dir), "ASAN_OPTIONS": "detect_leaks=0",
        })
        self.env.update(env or {})
        n = len(list(self.run_dir.glob("script-*.out")))
        self.out_path = self.run_dir / ("script-%d.out" % n)
        self.err_path = self.run_dir / ("script-%d.err" % n)
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(["bash", str(SCRIPT)], env=self.env, stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL, start_new_session=True, cwd=str(REPO),
                                         preexec_fn=hangup_as_a_terminal_sends_it)

    def out(self):
        return self.out_path.read_text(errors="replace")

    def err(self):
        return self.err_path.read_text(errors="replace")

    def wait(self, timeout=START_TIMEOUT_S):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("run-local still running after %ss:\n%s\n%s" % (timeout, self.out(), self.err()))

    def supervisord_pid(self):
        try:
            return int((self.run_dir / "supervisord.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def kill(self):
        """Teardown: whatever is left of the script's session and of supervisord's."""
        sv = self.supervisord_pid()
        for sid in (self.proc.pid, sv):
            for pid in session_pids(sid) if sid else []:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


@pytest.fixture(scope="module")
def upstream():
    fake = harness.FakeUpstream()
    yield fake
    fake.close()


def _ready(port):
    try:
        return http_request(port, "GET", "/ready", timeout=2).status
    except OSError:
        return None


def test_serving_only_when_ready_a_second_one_refused_and_sighup_stops_everything(tmp_path, upstream):
    first = RunLocal(tmp_path / "run", upstream.url)
    try:
        assert wait_for(lambda: "serving on" in first.out() or first.proc.poll() is not None, START_TIMEOUT_S), \
            first.out() + first.err()
        assert first.proc.poll() is None, first.out() + first.err()
        # Said once /ready answers: a fetcher is connected, a transcript request would be served.
        assert _ready(first.port) == 200
        lines = first.out().splitlines()
        assert lines[0] == "demo API key, shown once (only its digest is kept). In the shell where you try the service:"
        assert "serving on 127.0.0.1:%d; logs in %s/*.log" % (first.port, first.run_dir) in lines

        # A second run-local on the same run folder: refused at once, naming the first.
        second = RunLocal(tmp_path / "run", upstream.url, env={"VTS_LISTEN": "127.0.0.1:%d" % free_port()})
        assert second.wait() == 1
        assert second.err() == ("%s: another run-local is running with %s (pid %d); stop it first (Ctrl-C in its "
                                "terminal)\n" % (ME, first.run_dir, first.proc.pid))
        # Another checkout's (another run folder) on the same port: refused, naming who listens there.
        third = RunLocal(tmp_path / "other", upstream.url, port=first.port)
        assert third.wait() == 1
        err = third.err()
        assert err.startswith("%s: port %d (VTS_LISTEN) is already in use by vts-" % (ME, first.port)), err
        assert err.endswith(", run by supervisord (pid %d), an earlier run-local's: stop it with \"kill %d\", or set "
                            "VTS_LISTEN to another address\n" % (first.supervisord_pid(), first.supervisord_pid())), err
        assert err.count("\n") == 1, err
        assert not (tmp_path / "other" / "supervisord.pid").exists(), "nothing was started"

        # Closing the terminal: SIGHUP to the script's process group, as the kernel sends it.
        sv = first.supervisord_pid()
        started = session_pids(sv)
        assert len(started) >= 4, started  # supervisord, the gateway's master, worker and dispatcher, the fetcher
        os.killpg(first.proc.pid, signal.SIGHUP)
        status = first.wait(timeout=60)
        assert status == 129, first.trace_tail()
        assert wait_for(lambda: not session_pids(sv), 10), session_pids(sv)
        assert _ready(first.port) is None, "the port still answers"
    finally:
        first.kill()


# A setting only one program refuses: the other starts, the one exits 2 at each try until supervisord gives up.
@pytest.mark.parametrize("program,binary,bad", [
    ("gateway", "vts-gateway", {"VTS_REDIS_URL": "rediss://127.0.0.1:1"}),
    ("fetcher:fetcher_00", "vts-fetcher", {"VTS_CLIENT_PROFILES": "/nonexistent/profiles.json"}),
])
def test_a_program_that_cannot_start_stops_run_local_with_its_own_line(tmp_path, upstream, program, binary, bad):
    env = dict(os.environ, VTS_KEYS_FILE=str(tmp_path / "keys.db"), VTS_JOBS_URL="tcp://127.0.0.1:%d" % free_port(),
               **bad)
    own = subprocess.run([str(BUILD_DIR / "bin" / binary)], env=env, capture_output=True, text=True, timeout=30)
    assert own.returncode == 2 and own.stderr.count("\n") == 1, own
    r = RunLocal(tmp_path / "run", upstream.url, env=bad)
    try:
        t0 = time.monotonic()
        assert r.wait() == 1
        took = time.monotonic() - t0
        assert "serving" not in r.out()
        assert r.err().splitlines()[0] == "%s: %s cannot start: %s" % (ME, program, own.stderr.strip())
        assert took < START_TIMEOUT_S
        sv = r.supervisord_pid()
        assert sv is None or wait_for(lambda: not session_pids(sv), 10), "left running: %s" % session_pids(sv)
    finally:
        r.kill()


class RunLocalOnTerminal(RunLocal):
    """deploy/run-local.sh with a pseudo-terminal as its controlling terminal (stdin, stdout and stderr), as a newcomer
    runs it; closing the terminal's master side is closing the terminal window."""

    def __init__(self, run_dir, upstream_url):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("VTS_")}
        self.env.update({
            "VTS_BUILD_DIR": str(BUILD_DIR), "VTS_RUN_DIR": str(self.run_dir), "VTS_FETCHERS": "1",
            "VTS_LISTEN": "127.0.0.1:%d" % self.port, "VTS_JOBS_URL": "tcp://127.0.0.1:%d" % free_port(),
            "VTS_METRICS_LISTEN": "127.0.0.1:%d" % free_port(), "VTS_UPSTREAM_URL": upstream_url,
            "VTS_WORKERS": "1", "XDG_RUNTIME_DIR": str(self.run_dir), "ASAN_OPTIONS": "detect_leaks=0",
        })
        self.master, slave = pty.openpty()
        self.seen = b""

        def take_terminal():
            hangup_as_a_terminal_sends_it()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        # The script's trace goes to a file of its own (the terminal is gone when it matters): what it ran last says
        # why it ended, should it end otherwise than the hang-up's way.
        self.trace_path = self.run_dir / "xtrace"
        trace = open(self.trace_path, "w")
        self.env["BASH_XTRACEFD"] = str(trace.fileno())
        self.proc = subprocess.Popen(["bash", "-x", str(SCRIPT)], env=self.env, stdin=slave, stdout=slave,
                                     stderr=slave, start_new_session=True, preexec_fn=take_terminal, cwd=str(REPO),
                                     pass_fds=(trace.fileno(),))
        trace.close()
        os.close(slave)

    def trace_tail(self, lines=40):
        return "\n".join(self.trace_path.read_text(errors="replace").splitlines()[-lines:])

    def out(self):
        while self.master is not None and select.select([self.master], [], [], 0)[0]:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.seen += chunk
        return self.seen.decode(errors="replace")

    def err(self):
        return ""

    def close_terminal(self):
        os.close(self.master)
        self.master = None


def test_a_closed_terminal_stops_everything_and_a_leftover_is_named_with_how_to_stop_it(tmp_path, upstream):
    first = RunLocalOnTerminal(tmp_path / "run", upstream.url)
    try:
        assert wait_for(lambda: "serving on" in first.out() or first.proc.poll() is not None, START_TIMEOUT_S), \
            first.out()
        assert first.proc.poll() is None, first.out()
        sv = first.supervisord_pid()
        assert len(session_pids(sv)) >= 4, session_pids(sv)
        # The terminal goes away: the kernel hangs it up (SIGHUP to the script) and every later write to it fails.
        first.close_terminal()
        status = first.wait(timeout=60)
        assert status == 129, first.trace_tail()
        assert wait_for(lambda: not session_pids(sv), 10), "left running: %s" % session_pids(sv)
        assert _ready(first.port) is None, "the port still answers"
    finally:
        first.kill()


def test_a_leftover_service_is_named_with_how_to_stop_it(tmp_path, upstream):
    # What a run-local killed outright leaves behind: supervisord and its programs, without the script.
    first = RunLocal(tmp_path / "run", upstream.url)
    try:
        assert wait_for(lambda: "serving on" in first.out() or first.proc.poll() is not None, START_TIMEOUT_S), \
            first.out() + first.err()
        sv = first.supervisord_pid()
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(timeout=10)
        assert _ready(first.port) == 200
        again = RunLocal(tmp_path / "run", upstream.url, port=first.port)
        assert again.wait() == 1
        holder = again.err().split(" is already in use by ")[1].split(",")[0]
        assert again.err() == ("%s: port %d (VTS_LISTEN) is already in use by %s, run by supervisord (pid %d), an "
                               "earlier run-local's: stop it with \"kill %d\", or set VTS_LISTEN to another address\n"
                               % (ME, first.port, holder, sv, sv)), again.err()
        assert re.fullmatch(r"vts-\w+ \(pid \d+\)", holder), holder
        # The command it names stops the leftover.
        os.kill(sv, signal.SIGTERM)
        assert wait_for(lambda: not session_pids(sv), 30), "left running: %s" % session_pids(sv)
    finally:
        first.kill()


def test_a_port_anyone_holds_is_refused_before_anything_starts(tmp_path, upstream):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        r = RunLocal(tmp_path / "run", upstream.url, port=port)
        try:
            assert r.wait() == 1
        finally:
            r.kill()
    me = Path("/proc/self/comm").read_text().strip()
    assert r.err() == ("%s: port %d (VTS_LISTEN) is already in use by %s (pid %d): stop it, or set VTS_LISTEN to "
                       "another address\n" % (ME, port, me, os.getpid()))
    assert not (tmp_path / "run" / "supervisord.pid").exists()
