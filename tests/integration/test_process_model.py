"""The gateway's process model: supervision, restarts, signals (SIGTERM drain, SIGHUP key reload), bad config."""

import os
import signal
import socket
import subprocess
import tempfile
import threading
import time

from conftest import (BUILD_DIR, free_port, http_request, parse_responses, process_gone, read_until_close, wait_for,
                      write_keyfile)

TRANSCRIPT = "/v1/video/transcript?video_id=abcdefghijk"


class Load:
    """Sequential requests on fresh connections in a thread, recording (status or exception name, time sent).

    done holds the time each answer (or refusal) arrived, in the same order, so a test can tell a request that was
    answered before an event from one that was merely sent before it and still in flight."""

    def __init__(self, port, path, headers=None):
        self.port, self.path, self.headers = port, path, headers or {}
        self.results = []
        self.done = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            t = time.monotonic()
            try:
                r = http_request(self.port, "GET", self.path, self.headers, timeout=5)
                status = r.status
            except OSError as e:
                status = type(e).__name__
            self.done.append(time.monotonic())
            self.results.append((status, t))
            time.sleep(0.005)  # the wait is the test: the client's pace

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)

    def wait_answers(self, n, after=0.0, timeout=10):
        """Waits until n more requests, sent after the monotonic time after, have been answered or refused."""
        assert wait_for(lambda: sum(1 for _, t in list(self.results) if t > after) >= n, timeout), \
            f"fewer than {n} requests answered in {timeout} s"


def test_master_runs_workers_and_one_dispatcher(gateway):
    assert len(gateway.worker_pids()) == 2
    assert len(gateway.dispatcher_pids()) == 1
    assert sorted(gateway.worker_pids() + gateway.dispatcher_pids()) == gateway.child_pids()


def test_killed_worker_is_replaced_within_1s_while_others_serve(gateway):
    workers = gateway.worker_pids()
    victim, survivor = workers[0], workers[1]
    with Load(gateway.port, "/health") as load:
        load.wait_answers(20)
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        replaced = wait_for(lambda: [p for p in gateway.worker_pids() if p not in workers], timeout=1.0)
        replaced_after = time.monotonic() - killed_at
        load.wait_answers(20, after=killed_at + 0.2)
    assert replaced, f"no new worker within 1 s; workers now {gateway.worker_pids()}"
    assert replaced_after <= 1.0
    assert survivor in gateway.worker_pids()
    assert len(gateway.worker_pids()) == 2
    # Answered before the kill: a request sent just before it may still be in flight on the victim.
    before = [s for (s, _), done in zip(load.results, load.done) if done < killed_at]
    after = [s for s, t in load.results if t > killed_at + 0.2]
    assert before and all(s == 200 for s in before), before
    assert len(after) >= 20 and all(s == 200 for s in after), after
    # Only requests queued on the killed worker's socket at the instant of the kill may fail.
    failures = [s for s, _ in load.results if s != 200]
    assert len(failures) <= 2, failures


def test_killed_dispatcher_is_replaced(gateway):
    [dispatcher] = gateway.dispatcher_pids()
    os.kill(dispatcher, signal.SIGKILL)
    new = wait_for(lambda: [p for p in gateway.dispatcher_pids() if p != dispatcher], timeout=1.5)
    assert len(new) == 1
    assert gateway.request("GET", "/health").status == 200


def wait_accepted(gw):
    """Waits until a worker holds the test's one client connection: the gauge counts it and this scrape's own."""
    assert wait_for(lambda: gw.metric("vts_http_connections_open") == 2, 5), "the connection was not accepted"


def test_sigterm_finishes_request_in_progress_then_exits_0(make_gateway):
    gw = make_gateway(env={"VTS_DRAIN_TIMEOUT_MS": "5000", "VTS_HEADER_TIMEOUT_MS": "20000"})
    children = gw.child_pids()
    slow = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
    try:
        slow.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\nX-Request-Id: in-flight\r\n")
        wait_accepted(gw)
        gw.proc.send_signal(signal.SIGTERM)
        # Both workers stop accepting.
        def refused():
            try:
                socket.create_connection(("127.0.0.1", gw.port), timeout=1).close()
                return False
            except ConnectionRefusedError:
                return True
            except ConnectionResetError:
                # Queued on a listener that closed meanwhile: ask again.
                return False
        assert wait_for(refused, timeout=3), "still accepting after SIGTERM"
        assert gw.proc.poll() is None, "master exited with a request in progress"
        slow.sendall(b"\r\n")
        data = read_until_close(slow, timeout=10)
    finally:
        slow.close()
    [(status, headers, body)] = parse_responses(data)
    assert status == 200 and headers["x-request-id"] == "in-flight"
    assert headers["connection"] == "close"
    assert gw.proc.wait(timeout=10) == 0
    assert all(process_gone(p) for p in children)
    assert "draining" in gw.log_text()


def test_drain_deadline_bounds_shutdown(make_gateway):
    gw = make_gateway(env={"VTS_DRAIN_TIMEOUT_MS": "1000", "VTS_HEADER_TIMEOUT_MS": "60000"})
    stuck = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
    try:
        stuck.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n")
        wait_accepted(gw)
        start = time.monotonic()
        gw.proc.send_signal(signal.SIGTERM)
        rc = gw.proc.wait(timeout=10)
        took = time.monotonic() - start
        assert stuck.recv(65536) == b""
    finally:
        stuck.close()
    assert rc == 0
    assert 0.8 <= took < 4.0, took


def test_sigint_stops_like_sigterm(gateway):
    assert gateway.stop(signal.SIGINT) == 0


def keyset(*extra):
    return [("test-active", "vts_test_key_active", "active", 0, 0, 0),
            ("test-revoked", "vts_test_key_revoked", "revoked", 0, 0, 0), *extra]


def reloads(gw, msg):
    """How many workers logged msg for a SIGHUP reload."""
    return sum(1 for r in gw.log_records() if r.get("msg") == msg and r.get("reason") == "SIGHUP")


def auth_status(gw, key):
    return gw.request("GET", TRANSCRIPT, headers={"x-api-key": key}).status


def test_sighup_reloads_keys_without_failing_requests(make_gateway):
    gw = make_gateway(env={"VTS_JOB_TIMEOUT_MS": "200"},
                      keys=keyset(("old-key", "vts_test_key_old", "active", 0, 0, 0)))
    assert auth_status(gw, "vts_test_key_old") != 401
    assert auth_status(gw, "vts_test_key_new") == 401
    with Load(gw.port, TRANSCRIPT, {"x-api-key": gw.key}) as load:
        load.wait_answers(5)
        write_keyfile(gw.keys_file, keyset(("old-key", "vts_test_key_old", "revoked", 0, 0, 0),
                                           ("new-key", "vts_test_key_new", "active", 0, 0, 0)))
        gw.proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: reloads(gw, "keys loaded") == 2, 5), "not every worker reloaded its keys"
        # New connections land on either worker: every worker has the new keys.
        for _ in range(10):
            assert auth_status(gw, "vts_test_key_new") != 401
            assert auth_status(gw, "vts_test_key_old") == 401
        load.wait_answers(5, after=time.monotonic())
    statuses = [s for s, _ in load.results]
    assert len(statuses) >= 10
    assert all(isinstance(s, int) and s != 401 for s in statuses), statuses
    assert len(gw.worker_pids()) == 2


def test_key_file_change_is_picked_up_without_signal(make_gateway):
    gw = make_gateway(env={"VTS_JOB_TIMEOUT_MS": "200"})
    assert auth_status(gw, "vts_test_key_new") == 401
    write_keyfile(gw.keys_file, keyset(("new-key", "vts_test_key_new", "active", 0, 0, 0)))
    assert wait_for(lambda: all(auth_status(gw, "vts_test_key_new") != 401 for _ in range(6)), timeout=3.5)


def test_broken_key_file_keeps_current_keys(make_gateway):
    gw = make_gateway(env={"VTS_JOB_TIMEOUT_MS": "200"})
    assert auth_status(gw, gw.key) != 401
    tmp = gw.keys_file.with_name("broken.tmp")
    tmp.write_text("this is\tnot a key file\n")
    os.replace(tmp, gw.keys_file)
    gw.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: reloads(gw, "key file reload failed; keeping the current keys") == 2, 5)
    for _ in range(6):
        assert auth_status(gw, gw.key) != 401
    assert "reload failed" in gw.log_text()


def run_gateway_expecting_exit(env, timeout=10):
    # The state folder is the test's own: a master that stops writes its quota snapshot there, not in the checkout.
    with tempfile.TemporaryDirectory(prefix="vts-state-") as state:
        full = dict(os.environ)
        full.update({"VTS_LISTEN": f"127.0.0.1:{free_port()}", "VTS_WORKERS": "1",
                     "VTS_KEYS_FILE": "/nonexistent/keys", "VTS_METRICS_LISTEN": "", "VTS_STATE_DIR": state})
        full.update(env)
        return subprocess.run([str(BUILD_DIR / "bin" / "vts-gateway")], env=full, capture_output=True,
                              timeout=timeout, start_new_session=True)


def test_bad_env_value_stops_with_one_line_naming_it():
    for name, value in (("VTS_WORKERS", "many"), ("VTS_RATE_LIMIT", "-1"), ("VTS_LISTEN", "nohost"),
                        ("VTS_LISTEN", "localhost:80"), ("VTS_SPEECH_FALLBACK", "yes"),
                        ("VTS_HEADER_TIMEOUT_MS", "10s")):
        r = run_gateway_expecting_exit({name: value})
        lines = r.stderr.decode().strip().splitlines()
        assert r.returncode == 2, (name, value, r.returncode, r.stderr)
        assert len(lines) == 1 and name in lines[0], (name, value, lines)


def test_listen_address_in_use_stops_gateway():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        r = run_gateway_expecting_exit({"VTS_LISTEN": f"127.0.0.1:{port}"}, timeout=15)
    assert r.returncode == 1, r.stderr
    assert b"cannot listen" in r.stderr


def test_dispatcher_start_failure_names_its_step_address_and_error(make_gateway):
    """A dispatcher that cannot listen on VTS_JOBS_URL says so in one line: the step that failed (the fetchers'
    socket), its address, and nng's words for the error; the master keeps the workers serving meanwhile."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        url = "tcp://127.0.0.1:%d" % holder.getsockname()[1]
        gw = make_gateway(env={"VTS_JOBS_URL": url})
        assert wait_for(lambda: any(r.get("msg") == "dispatcher cannot start" for r in gw.log_records()), 10)
    failed = [r for r in gw.log_records() if r.get("msg") == "dispatcher cannot start"][0]
    assert (failed["level"], failed["what"], failed["url"], failed["error"]) == \
        ("error", "fetcher socket", url, "Address in use"), failed


def test_workers_die_with_master(gateway):
    children = gateway.child_pids()
    assert len(children) == 3
    os.kill(gateway.pid, signal.SIGKILL)
    assert wait_for(lambda: all(process_gone(p) for p in children), timeout=2.0), \
        [p for p in children if not process_gone(p)]


def test_sighup_storm_while_workers_restart_kills_no_worker(gateway):
    """A SIGHUP that reaches a freshly forked worker before its handlers exist waits for them (signals stay blocked
    across fork): under a storm of reloads, the only workers that die are the ones the test kills."""
    master = gateway.pid
    stop = threading.Event()

    def storm():
        while not stop.is_set():
            os.kill(master, signal.SIGHUP)
            time.sleep(0.0005)  # the wait is the test: the storm's pace

    kills = 5
    thread = threading.Thread(target=storm, daemon=True)
    thread.start()
    try:
        for _ in range(kills):
            before = gateway.worker_pids()
            os.kill(before[0], signal.SIGKILL)
            replaced = wait_for(lambda: len(gateway.worker_pids()) == 2 and before[0] not in gateway.worker_pids(), 5)
            assert replaced, f"worker not replaced: {gateway.worker_pids()}"
            # A run shorter than the master's healthy run would back the next restart off: space the kills.
            time.sleep(1.1)  # the wait is the test: each worker outlives the master's healthy run
    finally:
        stop.set()
        thread.join(5)
    exits = [r for r in gateway.log_records() if r.get("msg") == "child exited"]
    assert [(r.get("role"), str(r.get("signal"))) for r in exits] == [("worker", "9")] * kills, exits
    assert gateway.metric("vts_worker_restarts_total") == kills
    assert gateway.request("GET", "/health").status == 200


def test_dispatcher_serves_the_draining_workers_when_the_master_dies(tmp_path):
    """Every child gets SIGTERM when the master dies; the dispatcher stays until the draining workers are gone, so
    their requests in flight are answered."""
    from stack import Stack
    stack = Stack(tmp_path, fetchers=1)
    try:
        [dispatcher] = stack.gateway.dispatcher_pids()
        workers = stack.gateway.worker_pids()
        answer = {}

        def slow():
            answer["r"] = stack.get("slowDrain01", timeout=20)

        t = threading.Thread(target=slow)
        t.start()
        assert wait_for(lambda: stack.gateway.metric("vts_jobs_in_flight") == 1, 5), "the job never started"
        os.kill(stack.gateway.pid, signal.SIGKILL)
        t.join(20)
        assert "r" in answer, "no answer"
        assert answer["r"].status == 200, answer["r"]
        assert answer["r"].json()["segments"], answer["r"]
        # Then everything goes: the workers drained, and the dispatcher after them.
        assert wait_for(lambda: all(process_gone(p) for p in workers + [dispatcher]), 15), \
            [p for p in workers + [dispatcher] if not process_gone(p)]
        log = stack.gateway.log_text()
        assert "stopping once the workers have drained" in log
    finally:
        stack.close()
