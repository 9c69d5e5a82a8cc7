"""The job store on a thread of its own in the dispatcher (gateway/jobs/storeq.h): no store call on its loop.

Real parts: two gateways sharing a real redis-server, the fake platform, fetchers dialing one gateway only. A job made
on a gateway starts there at once, even after the gateway sat idle: its worker tells the dispatcher through the
master's eventfd. A job made on the gateway with no fetchers starts on the other within about a second (that runner
finds it by asking the store, every RUNNER_POLL_MS while there is work and twice as long after each empty look, up to
RUNNER_IDLE_POLL_MS), and an idle dispatcher wakes a few times a second, not 170. A Redis frozen under a running job
delays the job, not the synchronous requests of the same dispatcher, and the job ends once Redis answers again.
"""
import contextlib
import os
import statistics
import time

import loopturns
from conftest import Gateway
from redisserver import Redis
from stack import UNLIMITED, Fetchers, harness
from test_jobs_redis import JOBKEY, start_job, wait_done
from test_jobs_run import call as jobs_call
from vtsproc import scrape, wait_for, write_keyfile

KEYS = [("jobs", JOBKEY, "active", 100000, 60, 100000)]
# The bound of the time from a job's 202 to its first platform request, for the median of ROUNDS jobs, each made after
# IDLE_S of nothing (the runner's polls have grown to RUNNER_IDLE_POLL_MS, 1 s): made on the gateway that runs it
# (its worker wakes the runner: 50 ms would do, a busy 2-core machine adds scheduling delays), and made on another
# gateway (the runner finds it at its next poll: half a second on average, a second at most).
START_BOUND_S = 0.2
ELSEWHERE_BOUND_S = 1.2
ROUNDS = 5
IDLE_S = 3.0
# An idle dispatcher's wake-ups a second at most: its loop's and its store thread's runs (/proc schedstat). Polling
# the store every 50 ms for items and every 100 ms and 250 ms for webhooks made about 170 a second; at the idle
# polls' 1 s, and the key file's look every 500 ms, there are about 20.
IDLE_RUNS_PER_S = 40
# What the limiter may add to a request while its Redis is frozen (a 50 ms command timeout, then its memory fallback),
# with room for a loaded 2-core machine; a job store call on the dispatcher's loop, bounded by the store's 250 ms,
# would add that.
LIMITER_WAIT_S = 0.2
# How long Redis stays frozen under the dispatcher's own use of it (its runner's takes, ends and renewals), and the
# longest turn of its loop's own (vts_dispatcher_loop_turn_own_seconds: less the time its thread waited for a core)
# meanwhile: a store call on the loop blocked it up to the Redis command's bound (50 ms and more), while a turn with no
# store call in it is well under a millisecond of work.
FREEZE_S = 2.0
TURN_BOUND_S = 0.02


class Pair:
    """Gateway a (no fetchers) and gateway b (the fetchers), sharing one Redis and one key file's keys."""

    def __init__(self, tmp_path, redis):
        self.upstream = harness.FakeUpstream()
        self.gateways, self.fetchers = [], None
        try:
            for name in ("a", "b"):
                d = tmp_path / name
                d.mkdir()
                gw = Gateway(d, env={"VTS_UPSTREAM_URL": self.upstream.url, "VTS_REDIS_URL": redis.url})
                write_keyfile(gw.keys_file, UNLIMITED + KEYS)
                gw.start()
                self.gateways.append(gw)
            self.a, self.b = self.gateways
            self.fetchers = Fetchers(tmp_path, self.b.jobs_port, self.upstream.url, 2)
            assert wait_for(lambda: self.b.request("GET", "/ready").status == 200, 20), "b did not see its fetchers"
        except BaseException:
            self.close()
            raise

    def asked(self, video):
        return self.upstream.stats()["requests"].get("POST /youtubei/v1/player " + video, 0)

    def close(self):
        if self.fetchers is not None:
            self.fetchers.stop()
        for g in self.gateways:
            g.stop()
        self.upstream.close()


def start_delays(p, made_on, prefix):
    """The time from each of ROUNDS jobs' 202 on made_on to the platform's first request for its video (b's fetchers
    run it), each job made after IDLE_S of nothing and done before the next."""
    delays = []
    for i in range(ROUNDS):
        time.sleep(IDLE_S)  # the wait is the test: the runner's polls grow while nothing is due
        video = "%s%04d" % (prefix, i)
        loc = start_job(made_on, {"video_ids": [video]})
        t0 = time.monotonic()
        # Looked at every 2 ms: the platform's first request for the video is the job's start.
        assert wait_for(lambda: p.asked(video) > 0, 10, interval=0.002), "the job never started on b"
        delays.append(time.monotonic() - t0)
        job = wait_done(made_on, loc, 10, interval=0.05)
        assert job["counts"] == {"queued": 0, "running": 0, "done": 1, "failed": 0, "cancelled": 0}
    print("%s: median %.1f ms of %s" % (prefix, statistics.median(delays) * 1000, ["%.1f" % (d * 1000) for d in delays]))
    return delays


def test_a_job_made_on_an_idle_gateway_starts_at_once(tmp_path, redis):
    p = Pair(tmp_path, redis)
    try:
        delays = start_delays(p, p.b, "benchSh")
        assert statistics.median(delays) < START_BOUND_S, delays
    finally:
        p.close()


def test_a_job_made_on_one_gateway_starts_on_another_within_a_second(tmp_path, redis):
    p = Pair(tmp_path, redis)
    try:
        delays = start_delays(p, p.a, "benchSt")
        assert statistics.median(delays) < ELSEWHERE_BOUND_S, delays
        # a ran nothing: it has no fetcher, and only b's runner took the items.
        assert not [r for r in p.a.log_records() if r.get("msg") == "job finished"]
    finally:
        p.close()


def dispatcher_runs(gw):
    """How many times the dispatcher's loop thread and its store's thread have run (schedstat's third field)."""
    pid, = gw.dispatcher_pids()
    runs = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
            name = f.read().strip()
        if name in ("vts-dispatcher", "vts-jobstore"):
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                runs += int(f.read().split()[2])
    return runs


def test_an_idle_dispatcher_wakes_a_few_times_a_second(tmp_path, redis):
    p = Pair(tmp_path, redis)
    try:
        # b has fetchers (its runner has room, so it asks the store); a job ran and ended there, and its polls grew.
        loc = start_job(p.b, {"video_ids": ["benchSi0000"]})
        wait_done(p.b, loc, 10, interval=0.05)
        time.sleep(IDLE_S)  # the wait is the test: the runner's polls grow while nothing is due
        seconds = 5.0
        before = dispatcher_runs(p.b)
        time.sleep(seconds)  # the wait is the test: the idle dispatcher's runs are counted over it
        rate = (dispatcher_runs(p.b) - before) / seconds
        print("idle dispatcher: %.1f runs a second" % rate)
        assert rate < IDLE_RUNS_PER_S, rate
        # And it still finds a job made elsewhere.
        loc = start_job(p.a, {"video_ids": ["benchSi0001"]})
        wait_done(p.a, loc, 10, interval=0.05)
    finally:
        p.close()


@contextlib.contextmanager
def redis_stack(tmp_path, redis, fetchers, upstream_args=()):
    """A gateway whose job store and limiter use redis and whose cache has a Redis of its own (so that freezing redis
    leaves the cache answering), with fetchers against a fake platform; yields the gateway and the platform once a fetcher is ready."""
    cache = Redis()
    cache.start()
    upstream = harness.FakeUpstream(list(upstream_args))
    gw = group = None
    try:
        gw = Gateway(tmp_path, env={"VTS_UPSTREAM_URL": upstream.url, "VTS_REDIS_URL": redis.url,
                                    "VTS_REDIS_CACHE_URL": cache.url})
        write_keyfile(gw.keys_file, UNLIMITED + KEYS)
        gw.start()
        group = Fetchers(tmp_path, gw.jobs_port, upstream.url, fetchers)
        assert wait_for(lambda: gw.request("GET", "/ready").status == 200, 20), "no fetcher"
        yield gw, upstream
    finally:
        if group is not None:
            group.stop()
        if gw is not None:
            gw.stop()
        upstream.close()
        cache.stop()


def timed_get(gw, path, key):
    t0 = time.monotonic()
    r = gw.request("GET", path, headers={"x-api-key": key})
    return time.monotonic() - t0, r


def test_a_frozen_redis_delays_only_the_jobs_and_they_end_once_it_answers(tmp_path, redis):
    """Redis (the job store and the limiter; the cache in a Redis of its own) frozen while a 200-item job runs: the same
    dispatcher keeps answering cached and uncached synchronous requests within their usual time, plus the limiter's
    own bounded wait; thawed, the job ends with every item done once."""
    with redis_stack(tmp_path, redis, 4, ("--delay-ms", "20")) as (gw, upstream):
        cached = "benchFz0000"
        assert timed_get(gw, "/v1/video/transcript?video_id=" + cached, gw.key)[1].status == 200

        def round_of(tag, n):
            hits, misses = [], []
            for i in range(n):
                took, r = timed_get(gw, "/v1/video/transcript?video_id=" + cached, gw.key)
                assert r.status == 200, r.body
                hits.append(took)
                took, r = timed_get(gw, "/v1/video/transcript?video_id=benchF%s%04d" % (tag, i), gw.key)
                assert r.status == 200, r.body
                misses.append(took)
            return hits, misses

        base_hits, base_misses = round_of("b", 20)
        ids = ["benchFj%04d" % i for i in range(200)]
        loc = start_job(gw, {"video_ids": ids})
        # Frozen once the job runs: the runner is then busy with the store (takes, ends, renewals).
        assert wait_for(lambda: gw_counts(gw, loc)["done"] >= 5, 30), gw_counts(gw, loc)
        redis.freeze()
        try:
            frozen_at = time.monotonic()
            hits, misses = round_of("f", 20)
            frozen_for = time.monotonic() - frozen_at
        finally:
            redis.thaw()
        print("hits: %.1f ms worst before, %.1f ms worst frozen; misses: %.1f ms worst before, %.1f ms worst frozen "
              "(frozen %.1f s)" % (max(base_hits) * 1000, max(hits) * 1000, max(base_misses) * 1000,
                                   max(misses) * 1000, frozen_for))
        # The limiter's Redis wait (50 ms a command, then its memory fallback) is the only store wait a request has.
        assert max(hits) < max(base_hits) + LIMITER_WAIT_S, (base_hits, hits)
        assert max(misses) < max(base_misses) + LIMITER_WAIT_S, (base_misses, misses)
        job = wait_done(gw, loc, 90, interval=0.2)
        assert job["counts"] == {"queued": 0, "running": 0, "done": 200, "failed": 0, "cancelled": 0}
        reqs = upstream.stats()["requests"]
        assert all(reqs.get("POST /youtubei/v1/player " + v, 0) == 1 for v in ids), "a video was fetched twice"
        # The store queue's depth is a gauge, back to nothing once the runner is idle (a take every 50 ms may be in flight).
        assert "# TYPE vts_jobs_store_calls gauge\n" in scrape(gw.metrics_port)
        assert wait_for(lambda: gw.metric("vts_jobs_store_calls") == 0, 5)


def test_a_frozen_redis_makes_no_long_turn_of_the_dispatchers_loop(tmp_path, redis):
    """Redis (the job store and the limiter) frozen for FREEZE_S while a job runs and uncached transcript requests cross
    the same dispatcher: vts_dispatcher_loop_turn_own_seconds counts no turn over TURN_BOUND_S meanwhile. That measure
    keeps the time a turn blocked in a call (a store call on the loop waits without using the CPU) and leaves out the
    time a busy machine kept the loop's thread off its core, which the wall-time histogram counts."""
    with redis_stack(tmp_path, redis, 2) as (gw, upstream):
        loc = start_job(gw, {"video_ids": ["benchFt%04d" % i for i in range(200)]})
        assert wait_for(lambda: gw_counts(gw, loc)["done"] >= 5, 30), gw_counts(gw, loc)
        own = "vts_dispatcher_loop_turn_own_seconds"
        before = scrape(gw.metrics_port)
        redis.freeze()
        try:
            statuses, n = {}, 0
            until = time.monotonic() + FREEZE_S
            while time.monotonic() < until:
                r = gw.request("GET", "/v1/video/transcript?video_id=benchFu%04d" % n, headers={"x-api-key": gw.key})
                statuses[r.status] = statuses.get(r.status, 0) + 1
                n += 1
            during = scrape(gw.metrics_port)
        finally:
            redis.thaw()
        print("frozen %.1f s: %d requests, %d dispatcher turns, the longest in %s ms" % (
            FREEZE_S, n, loopturns.turns(before, during, own), loopturns.longest(before, during, own)))
        assert statuses == {200: n}, statuses
        assert loopturns.turns(before, during, own) >= n
        over = loopturns.turns_over(before, during, own, TURN_BOUND_S)
        assert over == 0, "%d turns over %g s, the longest in %s ms" % (over, TURN_BOUND_S,
                                                                     loopturns.longest(before, during, own))
        # The job was held by the freeze, not lost: it ends once Redis answers.
        job = wait_done(gw, loc, 90, interval=0.2)
        assert job["counts"] == {"queued": 0, "running": 0, "done": 200, "failed": 0, "cancelled": 0}


def gw_counts(gw, loc):
    status, _, job = jobs_call(gw, "GET", loc, key=JOBKEY)
    return job["counts"] if status == 200 else {"done": -1}
