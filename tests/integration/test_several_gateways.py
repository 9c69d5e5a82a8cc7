"""Several gateways sharing every fetcher: a fetcher lists every jobs URL, offers itself to each dispatcher, runs one
job at a time and gives back (DECLINE) a job that reaches it while it is busy; three real gateways over mutual TLS
keep answering when one of them is killed, and the killed one serves again once it is back."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from certs import Certs
from conftest import Gateway, http_request, wait_for, wait_metric, write_keyfile
from stack import UNLIMITED

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402
from harness import READY, decode_result, encode_decline, encode_job  # noqa: E402
from vtsproc import children_of, log_records, read_log  # noqa: E402

HELLO = "Hello and welcome to the fake platform"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs(tmp_path_factory.mktemp("certs"))


def player_requests(upstream, video):
    return upstream.stats()["requests"].get("POST /youtubei/v1/player " + video, 0)


def test_busy_fetcher_gives_a_second_dispatchers_job_straight_back(tmp_path, upstream):
    d1, d2 = harness.FakeDispatcher(), harness.FakeDispatcher()
    d1.listen()
    d2.listen()
    log = open(tmp_path / "fetcher.log", "wb")
    proc = subprocess.Popen([harness.fetcher_binary()], stdout=log, stderr=log,
                            env=harness.fetcher_env(upstream.url, VTS_JOBS_URL="%s,%s" % (d1.url, d2.url)))
    try:
        c1, c2 = d1.accept(), d2.accept()
        assert c1.recv() == READY and c2.recv() == READY, "the fetcher offers itself to both dispatchers"
        before = player_requests(upstream, "hangPlayer1")
        served = player_requests(upstream, "capJson3xx1")
        c1.reply(encode_job(31, "hangPlayer1", deadline_ms=1500, request_id="req-31"))
        assert wait_for(lambda: player_requests(upstream, "hangPlayer1") > before, 5), "job 31 never started"
        t0 = time.monotonic()
        c2.reply(encode_job(77, "capJson3xx1", request_id="req-77"))
        # Given back at once, while job 31 still runs (it ends at its 1.5 s deadline), and never run here.
        assert c2.recv(timeout=5) == encode_decline(77)
        assert time.monotonic() - t0 < 1.0
        c2.reply(READY)
        res = decode_result(c1.recv(timeout=5))
        assert (res["job_id"], res["outcome"], res["detail"]) == (31, 3, "timeout")
        # Idle again: offered to the dispatcher that was turned down, and the first one's RESULT means idle too.
        assert c2.recv(timeout=5) == READY
        c1.reply(encode_job(32, "capJson3xx1", request_id="req-32"))
        res = decode_result(c1.recv(timeout=5))
        assert (res["job_id"], res["outcome"]) == (32, 1)
        assert player_requests(upstream, "capJson3xx1") == served + 1, "the declined job must not have run"
        assert proc.poll() is None
    finally:
        harness.stop_process(proc)
        log.close()
        d1.close()
        d2.close()


def test_one_fetcher_url_list_reaches_every_address_of_a_name(tmp_path, upstream):
    """localhost: one dispatcher per address it resolves to; the one that listens gets the READY."""
    d = harness.FakeDispatcher()
    d.listen()
    log = open(tmp_path / "fetcher.log", "wb")
    proc = subprocess.Popen([harness.fetcher_binary()], stdout=log, stderr=log,
                            env=harness.fetcher_env(upstream.url, VTS_JOBS_URL="tcp://localhost:%d" % d.port))
    try:
        assert d.accept().recv() == READY
        text = (tmp_path / "fetcher.log").read_text()
        assert '"msg":"dispatcher added","url":"tcp://127.0.0.1:%d"' % d.port in text, text
    finally:
        harness.stop_process(proc)
        log.close()
        d.close()


class Load:
    """Threads asking each gateway for fresh (uncached) transcripts until stopped; every answer is recorded."""

    def __init__(self, gateways, per_gateway=2):
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.answers = {i: [] for i in range(len(gateways))}  # (time, status or exception name)
        self.threads = [threading.Thread(target=self.run, args=(i, gw, k), daemon=True)
                        for i, gw in enumerate(gateways) for k in range(per_gateway)]
        for t in self.threads:
            t.start()

    def run(self, i, gw, k):
        n = 0
        while not self.stop.is_set():
            n += 1
            video = "bench%d%d%04d" % (i, k, n % 10000)
            try:
                r = http_request(gw.port, "GET", "/v1/video/transcript?video_id=" + video,
                                 headers={"x-api-key": gw.key}, timeout=15)
                status = r.status if r.status != 200 or r.json()["text"] == HELLO else "wrong body"
            except OSError as e:
                status = type(e).__name__
            with self.lock:
                self.answers[i].append((time.monotonic(), status))

    def count(self, i, since=0.0):
        with self.lock:
            return len([a for a in self.answers[i] if a[0] >= since])

    def statuses(self, i):
        with self.lock:
            return [a[1] for a in self.answers[i]]

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(30)


def stop_fetcher_group(proc):
    """Stops a fetcher started in a session of its own: SIGTERM, then whatever of its group is left is killed."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


def start_gateway(path, certs, jobs_port=None, env=None):
    path.mkdir(parents=True, exist_ok=True)
    gw = Gateway(path, env=dict(certs.env("gateway"), **(env or {})), workers=1)
    if jobs_port is not None:
        gw.jobs_port = jobs_port
    gw.env["VTS_JOBS_URL"] = "tls+tcp://127.0.0.1:%d" % gw.jobs_port
    write_keyfile(gw.keys_file, UNLIMITED)
    return gw.start()


def test_three_gateways_share_the_fetchers_and_outlive_a_killed_one(tmp_path, certs, upstream):
    gws = [start_gateway(tmp_path / ("gw%d" % i), certs) for i in range(3)]
    log = open(tmp_path / "fetchers.log", "wb")
    urls = ",".join(gw.env["VTS_JOBS_URL"] for gw in gws)
    fetchers = subprocess.Popen([harness.fetcher_binary(), "--workers", "3"], stdout=log, stderr=log,
                                start_new_session=True,
                                env=harness.fetcher_env(upstream.url, VTS_JOBS_URL=urls, VTS_JOBS_RESOLVE_S=1,
                                                        **certs.env("fetcher")))
    load = None
    try:
        for gw in gws:
            wait_metric(gw.metrics_port, "vts_fetchers_connected", 3, timeout=20)
        kids = children_of(fetchers.pid)
        assert len(kids) == 3
        for i, gw in enumerate(gws):
            r = http_request(gw.port, "GET", "/v1/video/transcript?video_id=benchFirst%d" % i,
                             headers={"x-api-key": gw.key})
            assert r.status == 200, (i, r, gw.log_text()[-2000:])
            assert r.json()["text"] == HELLO

        load = Load(gws)
        assert wait_for(lambda: all(load.count(i) >= 5 for i in range(3)), 30), "the load never got going"
        killed_at = time.monotonic()
        jobs_port = gws[0].jobs_port
        gws[0].kill()  # SIGKILL to the whole gateway: master, workers and dispatcher
        assert wait_for(lambda: all(load.count(i, since=killed_at + 0.5) >= 10 for i in (1, 2)), 60), \
            "the other gateways stopped answering"
        load.close()
        for i in (1, 2):
            statuses = load.statuses(i)
            assert statuses and set(statuses) == {200}, (i, sorted(set(map(str, statuses))))
        assert fetchers.poll() is None
        assert children_of(fetchers.pid) == kids, "the same fetcher processes serve on"

        # Back on its jobs port, the gateway is dialed again by the same fetchers and serves.
        t0 = time.monotonic()
        gws[0] = start_gateway(tmp_path / "gw0-again", certs, jobs_port=jobs_port)
        wait_metric(gws[0].metrics_port, "vts_fetchers_connected", 3, timeout=10)
        r = http_request(gws[0].port, "GET", "/v1/video/transcript?video_id=benchAgain0",
                         headers={"x-api-key": gws[0].key})
        back_s = time.monotonic() - t0
        assert r.status == 200 and r.json()["text"] == HELLO, r
        assert children_of(fetchers.pid) == kids
        # Resolved again every second all along, the same three addresses kept their links: none was dropped or doubled.
        records = log_records(read_log(tmp_path / "fetchers.log"))
        added = sorted(r["url"] for r in records if r.get("msg") == "dispatcher added")
        assert added == sorted(gw.env["VTS_JOBS_URL"] for gw in gws for _ in kids)
        assert [r for r in records if r.get("msg") == "dispatcher removed"] == []
        print("restarted gateway served after %.2f s" % back_s)
        assert back_s < 5, "the restarted gateway served after %.2f s" % back_s
    finally:
        if load is not None:
            load.close()
        stop_fetcher_group(fetchers)
        log.close()
        for gw in gws:
            gw.stop()
