"""Expiry of ended jobs runs off the dispatcher's loop (issue 31, item 3): in batches of 500 items on the store's
thread, so that no turn of the dispatcher's loop grows with the store's work.

Real parts: one gateway with its SQLite job store, a fetcher and the fake platform. EXPIRED items in ended jobs past
VTS_JOB_TTL_S are written into the gateway's jobs.db while it is stopped; started again, its dispatcher expires them
at once (its first expiry runs at its start) while a client makes uncached transcript requests through it.

The bound is asserted on vts_dispatcher_loop_turn_cpu_seconds, the CPU time the loop's thread used in each turn: the
expiry's work, were it on the loop, would be in it (one batch of 500 is several ms of SQLite's work; the whole
expiry in one transaction, as it was, far more), while a turn that a busy 2-core machine keeps off its core for a
while is not lengthened by that, so the assertion holds on a loaded CI machine. vts_dispatcher_loop_turn_seconds
(wall time less the loop's waits) is what a request waits through, preemptions included; the expiry bench
(tests/bench/expiry_stall.py) reports both.
"""
import time

import loopturns
from conftest import Gateway
from oldjobs import count, fill
from stack import Fetchers, harness
from vtsproc import scrape, wait_for, write_keyfile

KEY = "vts_test_expiry_key"
EXPIRED = 20000
# The bound on what expiry adds to another request.
BOUND_S = 0.01


def test_expiry_of_20000_items_adds_no_dispatcher_loop_turn_over_10_ms(tmp_path):
    upstream = harness.FakeUpstream()
    gw = Gateway(tmp_path, env={"VTS_UPSTREAM_URL": upstream.url})
    write_keyfile(gw.keys_file, [("expiry", KEY, "active", 1000000, 60, 1000000000)])
    fetchers = None
    try:
        gw.start()
        db = gw.state_dir / "jobs.db"
        assert wait_for(db.exists, 10), "the gateway made no job store"
        gw.stop()
        fill(db, EXPIRED)
        assert count(db) == EXPIRED
        gw.start()
        fetchers = Fetchers(tmp_path, gw.jobs_port, upstream.url, 1)
        statuses, i = {}, 0
        deadline = time.monotonic() + 120
        while count(db) > 0 and time.monotonic() < deadline:
            r = gw.request("GET", "/v1/video/transcript?video_id=benchX%05d" % i, headers={"x-api-key": KEY})
            statuses[r.status] = statuses.get(r.status, 0) + 1
            i += 1
        assert count(db) == 0, "the expiry did not end within 120 s"
        assert count(db, "jobs") == 0
        after = scrape(gw.metrics_port)
        # The dispatcher's turns since its start, which the expiry began at.
        cpu, wall = "vts_dispatcher_loop_turn_cpu_seconds", "vts_dispatcher_loop_turn_seconds"
        print("expired %d items beside %d requests; dispatcher turns: %d, longest by CPU in %s ms, by wall time in "
              "%s ms" % (EXPIRED, i, loopturns.turns(None, after, cpu), loopturns.longest(None, after, cpu),
                         loopturns.longest(None, after, wall)))
        assert statuses == {200: i}, statuses
        # Each batch's answer is a turn of the loop (the next batch is asked there), and so is each request's.
        assert loopturns.turns(None, after, cpu) >= EXPIRED // 500 + i
        assert loopturns.turns(None, after, cpu) == loopturns.turns(None, after, wall)
        assert loopturns.turns_over(None, after, cpu, BOUND_S) == 0
    finally:
        if fetchers is not None:
            fetchers.stop()
        gw.stop()
        upstream.close()
