"""The whole service on 127.0.0.1 for end-to-end tests: the fake platform, a gateway (master, workers, dispatcher)
and a fetcher pool dialing its dispatcher, each a real process started and stopped by the test."""
import os
import signal
import subprocess
import sys
import time

from conftest import ACTIVE_KEY, Gateway, write_keyfile, children_of, process_gone
from vtsproc import metric, scrape  # noqa: F401 (metric: for the tests that import it from here)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402

# A key whose limits never get in the way of a functional test.
UNLIMITED = [("e2e", ACTIVE_KEY, "active", 1000000, 60, 1000000000)]


class Fetchers:
    """vts-fetcher --workers N dialing the gateway's dispatcher, in its own process group."""

    def __init__(self, tmp_path, jobs_port, upstream_url, workers=2, env=None, jobs_scheme="tcp"):
        self.log_path = os.path.join(str(tmp_path), "fetcher.log")
        # The fake platform rations nothing: unpaced unless the test sets a budget (test_egress_pacing.py). No standard
        # proxy variable of the caller's reaches the fetchers: they would make it their egress.
        full = {k: v for k, v in os.environ.items() if k.lower() not in harness.PROXY_VARS}
        full.update(VTS_JOBS_URL="%s://127.0.0.1:%d" % (jobs_scheme, jobs_port), VTS_UPSTREAM_URL=upstream_url,
                    ASAN_OPTIONS="detect_leaks=0", VTS_EGRESS_RATE="0")
        full.update({k: str(v) for k, v in (env or {}).items()})
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([harness.fetcher_binary(), "--workers", str(workers)], env=full,
                                     stdout=self._log, stderr=self._log, start_new_session=True)

    def child_pids(self):
        return children_of(self.proc.pid)

    def log_text(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)
        self._log.close()


class Stack:
    def __init__(self, tmp_path, gateway_env=None, fetcher_env=None, fetchers=2, upstream_args=(), workers=2,
                 keys=(), jobs_scheme="tcp"):
        """keys: key file entries (see write_keyfile) besides UNLIMITED, the key of get() and of the warm-up.
        jobs_scheme: "tcp", or "tls+tcp" with the VTS_JOBS_TLS_* variables in gateway_env and fetcher_env."""
        self.upstream = harness.FakeUpstream(upstream_args)
        env = {"VTS_UPSTREAM_URL": self.upstream.url}
        env.update(gateway_env or {})
        self.gateway = Gateway(tmp_path, env=env, workers=workers)
        self.gateway.env["VTS_JOBS_URL"] = "%s://127.0.0.1:%d" % (jobs_scheme, self.gateway.jobs_port)
        write_keyfile(self.gateway.keys_file, UNLIMITED + list(keys))
        self.fetchers = None
        try:
            self.gateway.start()
            fenv = {"VTS_JOB_TIMEOUT_MS": env.get("VTS_JOB_TIMEOUT_MS", "30000")}
            fenv.update(fetcher_env or {})
            self.fetchers = Fetchers(tmp_path, self.gateway.jobs_port, self.upstream.url, fetchers, fenv, jobs_scheme)
            self.wait_ready(fetchers)
        except BaseException:
            self.close()
            raise

    def wait_ready(self, n, timeout=10):
        """Until n fetcher processes run and a transcript goes through end to end."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.fetchers.child_pids()) == n:
                r = self.get("benchWarmup")
                if r.status == 200:
                    self.upstream.reset()
                    return
            time.sleep(0.05)  # poll interval: until the pool serves, within timeout
        raise AssertionError("the stack did not serve a transcript within %ss:\n%s\n%s" % (
            timeout, self.gateway.log_text()[-3000:], self.fetchers.log_text()[-3000:]))

    def get(self, video_id=None, query=None, headers=None, timeout=30, key=ACTIVE_KEY):
        q = query if query is not None else "video_id=" + video_id
        h = {"x-api-key": key}
        h.update(headers or {})
        return self.gateway.request("GET", "/v1/video/transcript?" + q, headers=h, timeout=timeout)

    def requests(self):
        return self.upstream.stats()["requests"]

    def metrics(self):
        """The gateway's /metrics text."""
        return scrape(self.gateway.metrics_port)

    def close(self):
        if self.fetchers is not None:
            self.fetchers.stop()
        self.gateway.stop()
        self.upstream.close()
