#!/usr/bin/env python3
"""The longest stall another request sees while the dispatcher expires ended jobs (SQLite store).

One gateway with one fetcher and the fake platform. ITEMS items in ended jobs that last changed past VTS_JOB_TTL_S
are written into the gateway's jobs.db directly (as a store full of old jobs is), then one client makes cache-miss
transcript requests (fresh ids: each goes through the dispatcher to a fetcher) and GET /health in turn, without
pause, while another connection counts the items left. The dispatcher's expiry runs every 60 s from its start, in
batches of 500 items. Prints the worst and the median latency of each kind before the expiry began and while it ran,
and how long it ran.
    VTS_BUILD_DIR=build tests/bench/expiry_stall.py [ITEMS]
"""
import http.client
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from conftest import Gateway  # noqa: E402
from stack import Fetchers, harness  # noqa: E402
from vtsproc import wait_for, write_keyfile  # noqa: E402

KEY = "vts_bench_expiry_key"
PER_JOB = 5000
DAY_MS = 86400 * 1000


def fill(db_path, items):
    """Ended jobs of PER_JOB failed items each, last changed 8 days ago (past the default 7 days' TTL)."""
    old = int(time.time() * 1000) - 8 * DAY_MS
    con = sqlite3.connect(str(db_path), timeout=30)
    with con:
        for j in range(items // PER_JOB):
            job = "j%012xold%06d" % (old, j)
            con.execute("INSERT INTO jobs(id, key_id, created_ms, updated_ms, total, language, translate, format,"
                        " webhook_url, webhook_secret, source) VALUES(?,?,?,?,?,'en','','json','','','video_ids')",
                        (job, "expiry", old, old, PER_JOB))
            con.executemany("INSERT INTO items(job_id, seq, video_id, status, error_code, error_message)"
                            " VALUES(?,?,?,3,'transcript_not_available','No accessible transcript.')",
                            ((job, s + 1, "zz%09d" % (j * PER_JOB + s)) for s in range(PER_JOB)))
    con.close()


def count_items(db_path):
    con = sqlite3.connect(str(db_path), timeout=30)
    try:
        return con.execute("SELECT count(*) FROM items").fetchone()[0]
    finally:
        con.close()


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

        def watch():
            while not state["stop"]:
                n = count_items(db)
                now = time.monotonic()
                if n < total and state["began"] is None:
                    state["began"] = now
                if n == 0 and state["ended"] is None:
                    state["ended"] = now
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
        return 0
    finally:
        fetchers.stop()
        gw.stop()
        upstream.close()


if __name__ == "__main__":
    sys.exit(main())
