#!/usr/bin/env python3
"""The longest stall another request sees while the dispatcher expires ended jobs (SQLite store).

One gateway with one fetcher and the fake platform. ITEMS items in ended jobs that last changed past VTS_JOB_TTL_S
are written into the gateway's jobs.db directly (as a store full of old jobs is), then one client makes cache-miss
transcript requests (fresh ids: each goes through the dispatcher to a fetcher) and GET /health in turn, without
pause, while another connection counts the items left. The dispatcher's expiry runs every 60 s from its start, in
batches of 500 items. Prints the worst and the median latency of each kind before the expiry began and while it ran,
and how long it ran; then, from /metrics scraped when the traffic began, when the expiry began and when it ended, the
longest dispatcher and worker loop turn in each span (the bounds of the bucket it fell in: by wall time less the
loop's waits, and the dispatcher's also less the time its thread waited for a core).
    VTS_BUILD_DIR=build tests/bench/expiry_stall.py [ITEMS]
"""
import http.client
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import loopturns  # noqa: E402
from conftest import Gateway  # noqa: E402
from oldjobs import count as count_items  # noqa: E402
from oldjobs import fill  # noqa: E402
from stack import Fetchers, harness  # noqa: E402
from vtsproc import scrape, wait_for, write_keyfile  # noqa: E402

KEY = "vts_bench_expiry_key"
TURNS = (("dispatcher", "vts_dispatcher_loop_turn_seconds"), ("dispatcher own", "vts_dispatcher_loop_turn_own_seconds"),
         ("worker", "vts_worker_loop_turn_seconds"))


def report_turns(scrapes):
    """The longest loop turn of each kind in the span before the expiry and in the expiry's."""
    for label, name in TURNS:
        spans = []
        for first, last in (("traffic", "began"), ("began", "ended")):
            n = loopturns.turns(scrapes[first], scrapes[last], name)
            top = loopturns.longest(scrapes[first], scrapes[last], name)
            over = loopturns.turns_over(scrapes[first], scrapes[last], name, 0.01)
            spans.append("n=%d longest in (%g, %g] ms, %d over 10 ms" % (n, top[0], top[1], over) if top else "none")
        print("%-14s loop turns before: %s | during: %s" % (label, spans[0], spans[1]))


def main():
    items = int(sys.argv[1]) if len(sys.argv) > 1 else 300000
    tmp = Path(tempfile.mkdtemp(prefix="vts-expiry-"))
    upstream = harness.FakeUpstream()
    gw = Gateway(tmp, env={"VTS_UPSTREAM_URL": upstream.url})
    write_keyfile(gw.keys_file, [("expiry", KEY, "active", 1000000, 60, 1000000000)])
    gw.start()
    started = time.monotonic()
    fetchers = Fetchers(tmp, gw.jobs_port, upstream.url, 1)
    try:
        assert wait_for(lambda: gw.request("GET", "/ready").status == 200, 20), "no fetcher"
        db = gw.state_dir / "jobs.db"
        fill(db, items)
        total = count_items(db)
        print("items written: %d (%.1f s after the gateway started; its expiry runs every 60 s)" % (
            total, time.monotonic() - started))
        state = {"left": total, "began": None, "ended": None, "stop": False}
        scrapes = {"traffic": scrape(gw.metrics_port)}

        def watch():
            while not state["stop"]:
                n = count_items(db)
                now = time.monotonic()
                if n < total and state["began"] is None:
                    state["began"] = now
                    scrapes["began"] = scrape(gw.metrics_port)
                if n == 0 and state["ended"] is None:
                    state["ended"] = now
                    scrapes["ended"] = scrape(gw.metrics_port)
                state["left"] = n
                time.sleep(0.05)  # poll interval: between two counts of the items left
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=30)
        samples = []  # (time, kind, latency)
        i = 0
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if state["ended"] is not None and time.monotonic() > state["ended"] + 2:
                break
            for kind, path in (("miss", "/v1/video/transcript?video_id=benchE%05d" % i), ("health", "/health")):
                t0 = time.perf_counter()
                conn.request("GET", path, headers={"x-api-key": KEY})
                resp = conn.getresponse()
                resp.read()
                samples.append((time.monotonic(), kind, time.perf_counter() - t0, resp.status))
            i += 1
        state["stop"] = True
        watcher.join()
        if state["began"] is None or state["ended"] is None:
            print("the expiry did not run to its end within the bench's time: %d items left" % state["left"])
            return 1
        bad = [s for s in samples if s[3] != 200]
        print("expiry of %d items ran %.2f s; %d requests, %d not 200" % (
            total, state["ended"] - state["began"], len(samples), len(bad)))
        for kind in ("miss", "health"):
            before = [s[2] for s in samples if s[1] == kind and s[0] < state["began"]]
            during = [s[2] for s in samples if s[1] == kind and state["began"] <= s[0] <= state["ended"]]
            print("%-6s before: n=%d p50 %.2f ms worst %.2f ms | during: n=%d p50 %.2f ms worst %.2f ms" % (
                kind, len(before), statistics.median(before) * 1000, max(before) * 1000,
                len(during), statistics.median(during) * 1000, max(during) * 1000))
        report_turns(scrapes)
        return 0
    finally:
        fetchers.stop()
        gw.stop()
        upstream.close()


if __name__ == "__main__":
    sys.exit(main())
