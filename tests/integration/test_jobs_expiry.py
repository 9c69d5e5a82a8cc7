"""Expiry of ended jobs runs off the dispatcher's loop (issue 31, item 3): in batches of 500 items on the store's
thread, so that no turn of the dispatcher's loop grows with the store's work.

Real parts: one gateway with its SQLite job store, a fetcher and the fake platform. EXPIRED items in ended jobs past
VTS_JOB_TTL_S are written into the gateway's jobs.db while it is stopped; started again, its dispatcher expires them
at once (its first expiry runs at its start) while a client makes uncached transcript requests through it. The turns
are counted from the first answered request on, while at least MEASURED items are still to expire: the loop's first
turns with a fetcher and a request are its own cold start (a sanitizer build's first use of its code and memory takes
milliseconds of CPU), which no expiry is part of.

The bound is asserted on vts_dispatcher_loop_turn_own_seconds, each turn less the time the loop's thread waited for a
core: the expiry's work, were it on the loop, would be in it (one batch of 500 is several ms of SQLite's work; the
whole expiry in one transaction, as it was, far more), and so would a wait on the store's lock, while a turn that a
busy 2-core machine keeps off its core for a while is not lengthened by that (the wall-time histogram,
vts_dispatcher_loop_turn_seconds, showed turns of 20 to over 100 ms on a loaded machine). The issue's 10 ms is not
the bound here: on a loaded 2-core virtual machine the longest turn of the loop's own during the expiry was 0.5 to
10 ms in the release build and once 10 to 20 ms in the sanitizer build (a virtual CPU the host takes away still counts
as the thread's), so 10 ms would fail now and then with no expiry on the loop. BOUND_S, 50 ms, tells the loop's own
work from the expiry's: the whole expiry in one transaction on the loop, as it was, held it about a second for 300,000
items. The 10 ms figure is the bench's (tests/bench/expiry_stall.py, docs/REFERENCE.md), which reports both measures.
"""
import time

import loopturns
from conftest import Gateway
from oldjobs import count, fill
from stack import Fetchers, harness
from vtsproc import scrape, wait_for, write_keyfile

KEY = "vts_test_expiry_key"
EXPIRED = 200000
MEASURED = 20000
# The longest turn of the loop's own during the expiry (see above for why not the 10 ms).
BOUND_S = 0.05


def test_expiry_holds_no_dispatcher_loop_turn_of_its_own_over_50_ms(tmp_path):
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

        def get(i):
            return gw.request("GET", "/v1/video/transcript?video_id=benchX%05d" % i, headers={"x-api-key": KEY})
        assert get(0).status == 200
        before = scrape(gw.metrics_port)
        left = count(db)
        assert left >= MEASURED, "the expiry was almost over before the first answer: %d items left" % left
        statuses, i = {}, 1
        deadline = time.monotonic() + 120
        # A job's row goes in the batch after its last items'.
        while (count(db) > 0 or count(db, "jobs") > 0) and time.monotonic() < deadline:
            r = get(i)
            statuses[r.status] = statuses.get(r.status, 0) + 1
            i += 1
        assert count(db) == 0, "the expiry did not end within 120 s"
        assert count(db, "jobs") == 0
        after = scrape(gw.metrics_port)
        own, wall = "vts_dispatcher_loop_turn_own_seconds", "vts_dispatcher_loop_turn_seconds"
        print("expired %d items (%d measured) beside %d requests; dispatcher turns: %d, longest of its own in %s ms, by "
              "wall time in %s ms" % (EXPIRED, left, i - 1, loopturns.turns(before, after, own),
                                      loopturns.longest(before, after, own), loopturns.longest(before, after, wall)))
        assert statuses == {200: i - 1}, statuses
        # Each batch's answer is a turn of the loop (the next batch is asked there), and so is each request's.
        assert loopturns.turns(before, after, own) >= left // 500 + i - 1
        over = loopturns.turns_over(before, after, own, BOUND_S)
        top = loopturns.longest(before, after, own)
        assert over == 0, "%d turns over %g s, the longest in %s ms" % (over, BOUND_S, top)
    finally:
        if fetchers is not None:
            fetchers.stop()
        gw.stop()
        upstream.close()
