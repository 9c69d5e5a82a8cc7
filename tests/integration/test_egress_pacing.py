"""Every egress spends a budget of platform requests (VTS_EGRESS_RATE an hour, VTS_EGRESS_BURST at once, or the
";rate=N;burst=N" of a proxy entry), shared by the children of one vts-fetcher; a request waits for its unit within
the job's deadline, and a job whose deadline comes first answers 502 with reason egress_budget, having sent nothing
past the budget. A rotating+ proxy gets a new connection (a new address) for every request, is retried after a block
on new connections, never rests, and is unpaced unless its entry says a rate. Each case counts the requests the fake
platform saw, by source address, and the connections the proxy accepted."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402
from stack import Fetchers, Stack, metric  # noqa: E402
from vtsproc import wait_for  # noqa: E402

OK, UPSTREAM_FAILED = 1, 3
PLAYER = "POST /youtubei/v1/player "
TIMEDTEXT = "GET /api/timedtext "
DIRECT = "127.0.0.1"
# A budget that never refills within a test: one unit every 100 seconds.
SLOW_RATE = 36
UPSTREAM_FAILED_BODY = {"error": {"code": "upstream_transcript_failed", "message": "The video platform did not return the transcript."}}


def run_once(upstream, video, **env):
    """vts-fetcher --once: a process of its own, so its budgets start full. Returns (outcome, detail, logs, seconds)."""
    upstream.reset()
    start = time.monotonic()
    proc = subprocess.run([harness.fetcher_binary(), "--once", video], env=harness.fetcher_env(upstream.url, **env),
                          capture_output=True, text=True, timeout=60)
    took = time.monotonic() - start
    assert proc.returncode == 0, "exit %d:\n%s" % (proc.returncode, proc.stderr)
    last = [line for line in proc.stderr.splitlines() if line.startswith("outcome=")]
    assert last, "no outcome line on stderr:\n" + proc.stderr
    fields = dict(part.split("=", 1) for part in last[-1].split(" "))
    logs = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    return int(fields["outcome"]), fields["detail"], logs, took


def messages(logs, msg):
    return [e for e in logs if e["msg"] == msg]


@pytest.fixture(scope="module")
def upstream():
    fake = harness.FakeUpstream()
    yield fake
    fake.close()


def blocking_upstream(*sources):
    args = ["--block-mode", "429"]
    for s in sources:
        args += ["--block-source", s]
    return harness.FakeUpstream(args)


# The budget of one process (vts-fetcher --once).

def test_a_request_waits_for_its_unit_within_the_deadline(upstream):
    # One unit at once, one a second: the player takes it, the caption download waits for the next.
    outcome, detail, logs, took = run_once(upstream, "capJson3xx1", VTS_EGRESS_RATE=3600, VTS_EGRESS_BURST=1)
    assert (outcome, detail) == (OK, "ok")
    assert upstream.stats()["requests"] == {PLAYER + "capJson3xx1": 1, TIMEDTEXT + "capJson3xx1": 1}
    waits = messages(logs, "waiting for the egress budget")
    assert len(waits) == 1, waits
    assert waits[0]["proxy"] == 0 and 900 <= waits[0]["wait_ms"] <= 1000, waits[0]
    assert took >= 0.9


def test_a_unit_due_past_the_deadline_is_502_and_nothing_is_sent(upstream, tmp_path):
    outcome, detail, logs, _ = run_once(upstream, "capJson3xx1", VTS_EGRESS_RATE=3600, VTS_EGRESS_BURST=1,
                                        VTS_JOB_TIMEOUT_MS=600)
    assert (outcome, detail) == (UPSTREAM_FAILED, "egress_budget")
    # The player request spent the only unit; the caption download was never sent.
    assert upstream.stats()["requests"] == {PLAYER + "capJson3xx1": 1}
    spent = messages(logs, "egress budget spent past the deadline")
    assert [(e["proxy"], 900 <= e["wait_ms"] <= 1000) for e in spent] == [(0, True)]
    assert messages(logs, "waiting for the egress budget") == []
    assert [e["reason"] for e in messages(logs, "job done")] == ["egress_budget"]

    # Through the service, the 502 says when the unit comes: one every 100 s, three at once; the warm-up spent two
    # (its player request and caption download), the player request below the third.
    stack = Stack(tmp_path, fetchers=1, gateway_env={"VTS_JOB_TIMEOUT_MS": "3000"},
                  fetcher_env={"VTS_EGRESS_RATE": SLOW_RATE, "VTS_EGRESS_BURST": 3})
    try:
        r = stack.get("capJson3xx1")
        requests = stack.requests()
    finally:
        stack.close()
    assert_502_budget(r)
    assert 95 <= int(r.headers["retry-after"]) <= 100, r.headers
    assert requests == {PLAYER + "capJson3xx1": 1}


def test_an_unpaced_direct_route_never_waits(upstream):
    outcome, detail, logs, _ = run_once(upstream, "capJson3xx1", VTS_EGRESS_RATE=0, VTS_EGRESS_BURST=1)
    assert (outcome, detail) == (OK, "ok")
    assert messages(logs, "waiting for the egress budget") == []


# Rotating proxies: a new connection, from the next address, for every request.

def test_a_rotating_proxy_is_retried_on_new_connections_and_never_rests():
    fake = blocking_upstream("127.0.0.4")
    proxy = harness.EgressProxy("127.0.0.4", "127.0.0.4", "127.0.0.5", "127.0.0.5")
    try:
        outcome, detail, logs, _ = run_once(fake, "capJson3xx1", VTS_UPSTREAM_PROXY="rotating+" + proxy.url("u:rotpw"))
        stats = fake.stats()
        connections = proxy.connections()
    finally:
        proxy.close()
        fake.close()
    assert (outcome, detail) == (OK, "ok")
    # Two blocked player requests, each on its own connection; the third connection's address serves the player,
    # the fourth the caption download: four requests, four connections, the same client every time.
    assert stats["sources"] == {"127.0.0.4": 2, "127.0.0.5": 2}
    assert stats["blocked"] == {"127.0.0.4": 2}
    assert stats["requests"] == {PLAYER + "capJson3xx1": 3, TIMEDTEXT + "capJson3xx1": 1}
    assert stats["clients"]["capJson3xx1"] == ["VISIONOS:1.02"] * 3
    assert connections == 4
    assert [(e["proxy"], e["reason"]) for e in messages(logs, "player client blocked")] == [(1, "http_429")] * 2
    # Two blocks in a row rest a proxy; a rotating one is many addresses and does not rest.
    assert messages(logs, "proxy resting after blocks") == []
    assert "rotpw" not in json.dumps(logs)


def test_the_same_proxy_without_rotating_keeps_its_connection_and_one_address():
    fake = blocking_upstream("127.0.0.4")
    proxy = harness.EgressProxy("127.0.0.4", "127.0.0.5")
    try:
        outcome, detail, _, _ = run_once(fake, "capJson3xx1", VTS_UPSTREAM_PROXY=proxy.url())
        stats = fake.stats()
        connections = proxy.connections()
    finally:
        proxy.close()
        fake.close()
    # One proxy, no other to move to: each client once, on the one kept-alive connection and its one address.
    assert (outcome, detail) == (UPSTREAM_FAILED, "http_429")
    assert stats["sources"] == {"127.0.0.4": 2}
    assert connections == 1


def test_a_rotating_proxy_is_unpaced_unless_its_entry_says_a_rate():
    fake = blocking_upstream("127.0.0.4")
    proxy = harness.EgressProxy("127.0.0.4", "127.0.0.4", "127.0.0.5", "127.0.0.5")
    try:
        # VTS_EGRESS_RATE and VTS_EGRESS_BURST would allow one request: they are not the rotating proxy's.
        unpaced = run_once(fake, "capJson3xx1", VTS_EGRESS_RATE=SLOW_RATE, VTS_EGRESS_BURST=1,
                           VTS_UPSTREAM_PROXY="rotating+" + proxy.url())
        unpaced_sources = fake.stats()["sources"]
        paced = run_once(fake, "capJson3xx1", VTS_JOB_TIMEOUT_MS=2000,
                         VTS_UPSTREAM_PROXY="rotating+" + proxy.url() + ";rate=%d;burst=2" % SLOW_RATE)
        paced_stats = fake.stats()
    finally:
        proxy.close()
        fake.close()
    assert unpaced[:2] == (OK, "ok")
    assert unpaced_sources == {"127.0.0.4": 2, "127.0.0.5": 2}
    assert messages(unpaced[2], "waiting for the egress budget") == []
    # Its own two units went to the two blocked attempts; the third attempt had none before the deadline.
    assert paced[:2] == (UPSTREAM_FAILED, "egress_budget")
    assert paced_stats["sources"] == {"127.0.0.4": 2}
    assert paced_stats["requests"] == {PLAYER + "capJson3xx1": 2}


# The budget of a fetcher with children, through the gateway.

def fetch_all(stack, videos):
    """Asks for every video at once; returns {video: response}."""
    out = {}

    def one(v):
        out[v] = stack.get(v, timeout=60)

    threads = [threading.Thread(target=one, args=(v,)) for v in videos]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    assert len(out) == len(videos), "some requests never answered"
    return out


def assert_502_budget(resp):
    assert resp.status == 502, resp
    assert json.loads(resp.body) == UPSTREAM_FAILED_BODY


def test_the_children_of_a_fetcher_share_one_budget(tmp_path):
    # Six units in all: the warm-up takes two, then two transcripts of two requests each. Were the budget each child's,
    # the two children would hold twelve and every transcript below would be served.
    stack = Stack(tmp_path, fetchers=2, gateway_env={"VTS_JOB_TIMEOUT_MS": "3000"},
                  fetcher_env={"VTS_EGRESS_RATE": SLOW_RATE, "VTS_EGRESS_BURST": 6})
    try:
        statuses = []
        for i in range(5):
            r = stack.get("benchPace%02d" % i)
            statuses.append(r.status)
            if r.status == 502:
                assert_502_budget(r)
        stats = stack.upstream.stats()
        text = stack.metrics()
        again = stack.get("benchPace04")
        log = stack.fetchers.log_text()
    finally:
        stack.close()
    assert statuses == [200, 200, 502, 502, 502]
    assert stats["sources"] == {DIRECT: 4}
    assert stats["requests"] == {PLAYER + "benchPace00": 1, TIMEDTEXT + "benchPace00": 1,
                                 PLAYER + "benchPace01": 1, TIMEDTEXT + "benchPace01": 1}
    assert metric(text, "vts_egress_budget_left", egress="0") == 0
    assert "vts_egress_budget_left{egress=\"0\"} 0" in text
    assert metric(text, "vts_egress_budget_waits_total", egress="0") == 0
    assert metric(text, "vts_egress_budget_declines_total", egress="0") == 0
    assert metric(text, "vts_upstream_outcomes_total", kind="egress_budget") == 3
    # A 502 for want of budget is not kept: the same video asked again is a new job.
    assert_502_budget(again)
    done = [json.loads(line) for line in log.splitlines() if line.startswith("{") and '"job done"' in line]
    assert [e["reason"] for e in done if e["video_id"] == "benchPace04"] == ["egress_budget", "egress_budget"]


def test_each_proxy_spends_its_own_entry_budget_and_nothing_passes_it(tmp_path):
    proxies = [harness.EgressProxy("127.0.0.2"), harness.EgressProxy("127.0.0.3")]
    entry = ";rate=%d;burst=3" % SLOW_RATE
    try:
        # VTS_EGRESS_BURST alone would allow a hundred requests on each: the entries' own budgets decide.
        stack = Stack(tmp_path, fetchers=2, gateway_env={"VTS_JOB_TIMEOUT_MS": "3000"},
                      fetcher_env={"VTS_EGRESS_RATE": 3600, "VTS_EGRESS_BURST": 100,
                                   "VTS_UPSTREAM_PROXY": ",".join(p.url() + entry for p in proxies)})
        try:
            answers = fetch_all(stack, ["benchProx%02d" % i for i in range(12)])
            stats = stack.upstream.stats()
            text = stack.metrics()
        finally:
            stack.close()
    finally:
        for p in proxies:
            p.close()
    statuses = sorted(r.status for r in answers.values())
    for r in answers.values():
        if r.status != 200:
            assert_502_budget(r)
    # Six units in all, two taken by the warm-up: four requests reached the platform, every one of them spent.
    assert sum(stats["sources"].values()) == 4
    assert sorted(stats["sources"].items()) in ([("127.0.0.2", 1), ("127.0.0.3", 3)],
                                                [("127.0.0.2", 3), ("127.0.0.3", 1)])
    served = statuses.count(200)
    assert served <= 2 and statuses == [200] * served + [502] * (12 - served)
    assert sum(1 for k in stats["requests"] if k.startswith(TIMEDTEXT)) == served
    assert metric(text, "vts_egress_budget_left", egress="1") == 0
    assert metric(text, "vts_egress_budget_left", egress="2") == 0
    assert "vts_egress_budget_left{egress=\"0\"}" not in text
    assert metric(text, "vts_upstream_outcomes_total", kind="egress_budget") == 12 - served
    for p in proxies:
        assert "127.0.0.1:%d" % p.port not in text


def test_a_fetcher_without_budget_gives_the_job_to_another_that_has_some(tmp_path):
    # Fetcher A (the stack's) spends its two units on the warm-up and gives back what it cannot pace; fetcher B, on
    # another address (a proxy on 127.0.0.3), is unpaced.
    stack = Stack(tmp_path, fetchers=1, gateway_env={"VTS_JOB_TIMEOUT_MS": "3000"},
                  fetcher_env={"VTS_EGRESS_RATE": SLOW_RATE, "VTS_EGRESS_BURST": 2, "VTS_EGRESS_DECLINE": "true"})
    proxy = harness.EgressProxy("127.0.0.3")
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    other = None
    try:
        other = Fetchers(other_dir, stack.gateway.jobs_port, stack.upstream.url, workers=1,
                         env={"VTS_UPSTREAM_PROXY": proxy.url(), "VTS_JOB_TIMEOUT_MS": "3000"})
        assert wait_for(lambda: metric(stack.metrics(), "vts_fetchers_idle") == 2, 15), "both fetchers idle"
        # A has been idle the longest: each job reaches it first, goes back once, and B serves it.
        statuses = [stack.get("benchDecl%02d" % i).status for i in range(3)]
        served = stack.upstream.stats()
        other.stop()
        other = None
        # B gone: A gives the job back until the job says it went back VTS_EGRESS_MAX_DECLINES (3) times, then
        # answers it.
        last = stack.get("benchDecl03")
        stats = stack.upstream.stats()
        text = stack.metrics()
        log = stack.fetchers.log_text()
    finally:
        if other is not None:
            other.stop()
        stack.close()
        proxy.close()
    assert statuses == [200, 200, 200]
    assert served["sources"] == {"127.0.0.3": 6}
    assert_502_budget(last)
    assert stats["sources"] == {"127.0.0.3": 6}
    declined = [json.loads(line) for line in log.splitlines() if "job declined: every egress budget spent" in line]
    assert len(declined) == 3 + 3
    assert metric(text, "vts_egress_budget_declines_total", egress="0") == 6
    assert metric(text, "vts_egress_budget_left", egress="0") == 0
    assert metric(text, "vts_upstream_outcomes_total", kind="egress_budget") == 1
