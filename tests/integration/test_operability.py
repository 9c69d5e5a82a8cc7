"""What an operator sees when things go wrong: a request cut by the end of the drain gets 503 with Retry-After and its
access line, and the default drain covers a job's deadline; /ready answers 503 until a fetcher is connected and the
gateway warns when none has come after 10 s; a platform failure is logged at warn with its kind (a name that does
not resolve is `network`, never a block); the standard proxy variables are the egress when VTS_UPSTREAM_PROXY is
unset, and the fetcher says at start which egress it uses; a misspelt VTS_* variable is a warning naming the nearest
known one. Real binaries, the fake platform and its egress proxies, all on 127.0.0.1."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

from conftest import REPO, Gateway, free_port
from contract import error_body
from stack import Fetchers, Stack
from vtsproc import wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402

PLAYER = "POST /youtubei/v1/player "
SERVED = "127.0.0.3"
NO_FETCHER_MSG = "no fetcher connected: transcript requests wait for one and fail at their deadline"


def records(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


# ---- the drain ----

def test_a_request_still_running_when_the_drain_ends_gets_503_with_retry_after_and_its_access_line(tmp_path):
    s = Stack(tmp_path, gateway_env={"VTS_DRAIN_TIMEOUT_MS": "1000"}, fetchers=1)
    try:
        answer = {}

        def ask():
            answer["r"] = s.get("hangPlayer1", headers={"X-Request-Id": "cut-by-drain"}, timeout=20)

        asking = threading.Thread(target=ask)
        asking.start()
        # The job is at the fetcher once the fake platform has its player request (it never answers it).
        assert wait_for(lambda: s.requests().get(PLAYER + "hangPlayer1", 0) == 1, 10), s.requests()
        t0 = time.monotonic()
        s.gateway.proc.send_signal(signal.SIGTERM)
        asking.join(timeout=15)
        took = time.monotonic() - t0
        r = answer["r"]
        assert r.status == 503, r
        assert r.json() == error_body("service_unavailable")
        assert (r.headers["retry-after"], r.headers["connection"], r.headers["x-request-id"]) == \
            ("1", "close", "cut-by-drain")
        assert 0.9 <= took < 5, "answered %.2f s after SIGTERM, with a 1 s drain" % took
        assert s.gateway.proc.wait(timeout=10) == 0
        access = [(e["status"], e["path"]) for e in s.gateway.log_records()
                  if e.get("msg") == "request" and e.get("request_id") == "cut-by-drain"]
        assert access == [(503, "/v1/video/transcript")]
    finally:
        s.close()


def _table_default(name):
    text = (REPO / "common" / "config.c").read_text()
    return int(re.search(r'"%s", "(\d+)"' % name, text).group(1))


def test_the_default_drain_covers_a_jobs_deadline_and_the_workers_margin():
    margin = int(re.search(r"#define VTS_DISPATCH_CLIENT_MARGIN_MS (\d+)",
                           (REPO / "common" / "limits.h").read_text()).group(1))
    drain, job = _table_default("VTS_DRAIN_TIMEOUT_MS"), _table_default("VTS_JOB_TIMEOUT_MS")
    assert drain >= job + margin, (drain, job, margin)
    readme = (REPO / "docs" / "REFERENCE.md").read_text()
    assert "| `VTS_DRAIN_TIMEOUT_MS` | %d |" % drain in readme


# ---- /ready and a gateway without fetchers ----

def test_ready_is_503_until_a_fetcher_connects_then_200_and_503_again_when_it_goes(tmp_path):
    fake = harness.FakeUpstream()
    gw = Gateway(tmp_path, env={"VTS_UPSTREAM_URL": fake.url})
    fetchers = None
    try:
        gw.start()
        for method in ("GET", "HEAD"):
            r = gw.request(method, "/ready")
            assert r.status == 503, r
            assert r.body == (json.dumps(error_body("service_unavailable"), separators=(",", ":")).encode()
                              if method == "GET" else b"")
        r = gw.request("POST", "/ready")
        assert (r.status, r.headers["allow"]) == (405, "GET, HEAD"), r
        # /ready is a route of its own in the metrics, not "other"
        assert gw.metric("vts_http_requests_total", route="/ready", status="503") == 2
        assert gw.metric("vts_http_requests_total", route="/ready", status="405") == 1
        assert gw.request("GET", "/health").status == 200, "liveness stays as the contract says"
        fetchers = Fetchers(tmp_path, gw.jobs_port, fake.url, workers=1)
        assert wait_for(lambda: gw.request("GET", "/ready").status == 200, 10), gw.log_text()[-2000:]
        r = gw.request("GET", "/ready")
        assert (r.status, r.json(), r.headers["content-type"]) == (200, {"status": "ready", "fetchers": 1},
                                                                   "application/json")
        fetchers.stop()
        fetchers = None
        assert wait_for(lambda: gw.request("GET", "/ready").status == 503, 10)
    finally:
        if fetchers is not None:
            fetchers.stop()
        gw.stop()
        fake.close()


def test_a_gateway_without_a_fetcher_after_10_s_warns_and_one_with_a_fetcher_does_not(tmp_path):
    fake = harness.FakeUpstream()
    (tmp_path / "alone").mkdir()
    (tmp_path / "served").mkdir()
    alone = Gateway(tmp_path / "alone")
    served = Gateway(tmp_path / "served", env={"VTS_UPSTREAM_URL": fake.url})
    fetchers = None
    try:
        alone.start()
        t_alone = time.monotonic()
        served.start()
        t_served = time.monotonic()
        fetchers = Fetchers(tmp_path / "served", served.jobs_port, fake.url, workers=1)

        def warnings(gw):
            return [e for e in gw.log_records() if e.get("msg") == NO_FETCHER_MSG]

        assert wait_for(lambda: warnings(alone), 16), alone.log_text()[-2000:]
        took = time.monotonic() - t_alone
        [w] = warnings(alone)
        assert (w["level"], w["component"], w["after_s"], w["jobs_url"]) == \
            ("warn", "dispatcher", 10, "tcp://127.0.0.1:%d" % alone.jobs_port)
        assert 9.5 <= took < 16, took
        # The gateway with a fetcher passes the same 10 s without a word (the wait proves an absence: a poll until
        # its own 10 s and a margin are over).
        assert wait_for(lambda: time.monotonic() - t_served > 11, 15)
        assert warnings(served) == []
    finally:
        if fetchers is not None:
            fetchers.stop()
        alone.stop()
        served.stop()
        fake.close()


# ---- the platform's failures and the egress ----

def run_once(upstream_url, video="capJson3xx1", **env):
    proc = subprocess.run([harness.fetcher_binary(), "--once", video], env=harness.fetcher_env(upstream_url, **env),
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_a_name_that_does_not_resolve_is_a_network_warning_never_a_block():
    proc = run_once("https://vts-no-such-host.invalid")
    assert proc.stderr.splitlines()[-1] == "outcome=3 lang= detail=network"
    logs = records(proc.stderr)
    assert not [e for e in logs if "blocked" in e["msg"]], logs
    refusals = [(e["level"], e["msg"], e["reason"]) for e in logs if e.get("client")]
    assert refusals == [("warn", "platform unreachable", "network")] * 2, refusals
    failed = [e for e in logs if e["msg"] == "upstream request failed"]
    assert [(e["level"], e["reason"]) for e in failed] == [("warn", "network")] * 2
    assert all("resolve" in e["error"].lower() for e in failed), failed


def test_http_proxy_is_the_egress_when_vts_upstream_proxy_is_unset_and_no_proxy_turns_it_off():
    fake = harness.FakeUpstream()
    proxy = harness.EgressProxy(SERVED)
    try:
        fake.reset()
        run_once(fake.url, http_proxy=proxy.url())
        assert fake.stats()["sources"] == {SERVED: 2}, "every request through the proxy"
        for no_proxy in ({"NO_PROXY": "127.0.0.1"}, {"no_proxy": "localhost, .example, 127.0.0.1"}):
            fake.reset()
            run_once(fake.url, http_proxy=proxy.url(), **no_proxy)
            assert fake.stats()["sources"] == {"127.0.0.1": 2}, no_proxy
        # VTS_UPSTREAM_PROXY, when set, is the egress whatever the standard variables say.
        fake.reset()
        run_once(fake.url, http_proxy="http://127.0.0.1:%d" % free_port(), VTS_UPSTREAM_PROXY=proxy.url())
        assert fake.stats()["sources"] == {SERVED: 2}
    finally:
        proxy.close()
        fake.close()


def test_a_standard_proxy_spends_the_egress_budget_and_its_value_is_one_plain_url():
    """The standard variable's proxy is an egress like any other: it waits for VTS_EGRESS_RATE's units (one at once,
    one a second: the caption download waits for the next). rotating+ and ;rate= are VTS_UPSTREAM_PROXY's alone."""
    fake = harness.FakeUpstream()
    proxy = harness.EgressProxy(SERVED)
    try:
        fake.reset()
        proc = run_once(fake.url, http_proxy=proxy.url(), VTS_EGRESS_RATE="3600", VTS_EGRESS_BURST="1")
        assert proc.stderr.splitlines()[-1] == "outcome=1 lang=en detail=ok"
        assert fake.stats()["sources"] == {SERVED: 2}
        waits = [e for e in records(proc.stderr) if e["msg"] == "waiting for the egress budget"]
        assert [(e["proxy"], 900 <= e["wait_ms"] <= 1000) for e in waits] == [(1, True)], waits
    finally:
        proxy.close()
        fake.close()
    for value in ("rotating+http://127.0.0.1:1", "http://127.0.0.1:1;rate=5"):
        env = harness.fetcher_env("http://127.0.0.1:%d" % free_port(), http_proxy=value)
        r = subprocess.run([harness.fetcher_binary(), "--once", "capJson3xx1"], env=env, capture_output=True,
                           text=True, timeout=30)
        if value.startswith("rotating+"):
            assert (r.returncode, r.stderr) == (2, "vts-fetcher: http_proxy: invalid value: entry 1 is not an "
                                                   "http://, https://, socks5:// or socks5h:// URL\n"), value
        else:
            # curl is given the value whole, as any other tool reading the variable would be: no option of ours is
            # cut from it (curl refuses it, and each client's request fails on the network through that proxy).
            assert r.returncode == 0, r.stderr
            assert r.stderr.splitlines()[-1] == "outcome=3 lang= detail=network"
            failed = [e for e in records(r.stderr) if e["msg"] == "upstream request failed"]
            assert [(e["proxy"], e["reason"], "127.0.0.1:1;rate=5" in e["error"]) for e in failed] == \
                [(1, "network", True)] * 2, r.stderr


def _egress_line(tmp_path, **env):
    """The fetcher's "upstream egress" line at start (serving, its dispatcher not there) and its whole log."""
    log_path = tmp_path / ("fetcher-%d.log" % free_port())
    full = harness.fetcher_env("http://127.0.0.1:%d" % free_port(), VTS_JOBS_URL="tcp://127.0.0.1:%d" % free_port(),
                               ASAN_OPTIONS="detect_leaks=0", **env)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([harness.fetcher_binary()], env=full, stdout=log, stderr=log, start_new_session=True)
    try:
        def line():
            return [e for e in records(log_path.read_text()) if e["msg"] == "upstream egress"]
        assert wait_for(line, 10), log_path.read_text()
        return line()[0], log_path.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def test_the_fetcher_says_at_start_which_egress_it_uses_without_credentials(tmp_path):
    port = free_port()
    line, _ = _egress_line(tmp_path)
    assert (line["level"], line["egress"]) == ("info", "direct")
    line, log = _egress_line(tmp_path, http_proxy="http://vtsuser:s3cret@127.0.0.1:%d" % port)
    assert line["egress"] == "http_proxy http://127.0.0.1:%d" % port
    assert "s3cret" not in log and "vtsuser" not in log
    line, _ = _egress_line(tmp_path, http_proxy="127.0.0.1:%d" % port, NO_PROXY="*")
    assert line["egress"] == "direct"
    line, log = _egress_line(tmp_path, http_proxy="http://127.0.0.1:1",
                             VTS_UPSTREAM_PROXY="http://a:b@127.0.0.1:%d,socks5h://127.0.0.1:%d" % (port, port + 1))
    assert line["egress"] == "VTS_UPSTREAM_PROXY http://127.0.0.1:%d,socks5h://127.0.0.1:%d" % (port, port + 1)


# ---- misspelt variables ----

def test_an_unknown_vts_variable_is_a_warning_naming_the_nearest_known_one(tmp_path):
    gw = Gateway(tmp_path, env={"VTS_JOB_TIMOUT_MS": "5000", "VTS_RUN_DIR": str(tmp_path)})
    try:
        gw.start()
        warned = [(e["level"], e["variable"], e["nearest"]) for e in gw.log_records()
                  if e.get("msg") == "unknown variable ignored"]
        # VTS_RUN_DIR (deploy/run-local.sh's) and VTS_BUILD_DIR (the tests') are known: no warning.
        assert warned == [("warn", "VTS_JOB_TIMOUT_MS", "VTS_JOB_TIMEOUT_MS")]
    finally:
        gw.stop()
    proc = run_once("http://127.0.0.1:%d" % free_port(), VTS_UPSTREAM_PROXI="http://127.0.0.1:1")
    warned = [(e["level"], e["variable"], e["nearest"]) for e in records(proc.stderr)
              if e["msg"] == "unknown variable ignored"]
    assert warned == [("warn", "VTS_UPSTREAM_PROXI", "VTS_UPSTREAM_PROXY")]


def test_a_standard_proxy_variable_that_is_no_proxy_url_stops_the_fetcher_naming_it():
    env = harness.fetcher_env("http://127.0.0.1:%d" % free_port(), http_proxy="ftp://vtsuser:s3cret@127.0.0.1:21")
    r = subprocess.run([harness.fetcher_binary(), "--once", "capJson3xx1"], env=env, capture_output=True, text=True,
                       timeout=30)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == ("vts-fetcher: http_proxy: invalid value: entry 1 is not an http://, https://, socks5:// or "
                        "socks5h:// URL\n")
