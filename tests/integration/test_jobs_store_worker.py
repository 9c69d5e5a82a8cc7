"""A worker's job store calls run on a thread of their own (gateway/jobs/storeq.h), never on its loop: with the
store's Redis frozen (SIGSTOP), a jobs request waits for the store's timeout and gets its 503 jobs_unavailable, while
/health and a cached transcript on the same worker (one worker here) keep answering at once; after SIGCONT the jobs
API answers again."""
import threading
import time

from stack import UNLIMITED
from test_jobs_redis import JOBKEY, Cluster, call
from vtsproc import wait_for

VIDEO = "capJson3xx1"
TRANSCRIPT = "/v1/video/transcript?video_id=" + VIDEO


def timed(fn):
    t0 = time.monotonic()
    out = fn()
    return out, time.monotonic() - t0


def test_a_frozen_store_delays_only_the_jobs_requests_of_a_worker(tmp_path, redis):
    keys = [("jobs", JOBKEY, "active", 1000000, 60, 1000000000)]
    cluster = Cluster(tmp_path, redis, 1, 1, keys, workers=1)
    gw = cluster.gateways[0]
    key = {"x-api-key": UNLIMITED[0][1]}
    try:
        status, _, usage = call(gw, "GET", "/v1/usage")
        assert status == 200 and usage["open_jobs"]["count"] == 0, usage
        assert gw.request("GET", TRANSCRIPT, headers=key).status == 200
        redis.freeze()
        try:
            got = {}

            def jobs_request():
                got["answer"], got["took"] = timed(lambda: call(gw, "GET", "/v1/usage"))

            t = threading.Thread(target=jobs_request)
            t.start()
            health, cached = [], []
            while t.is_alive():
                r, took = timed(lambda: gw.request("GET", "/health"))
                health.append((r.status, took))
                r, took = timed(lambda: gw.request("GET", TRANSCRIPT, headers=key))
                cached.append((r.status, took))
            t.join()
            status, _, body = got["answer"]
            # The store's Redis timeout (VTS_JOBS_REDIS_TIMEOUT_MS, 250 ms) passed on the store's thread: 503.
            assert status == 503 and body["error"]["code"] == "jobs_unavailable", body
            assert got["took"] >= 0.25, got
            # Meanwhile the worker's loop answered everything else at once: each well inside the store's timeout
            # (the cached transcript's own limiter check gives up on the frozen Redis after 50 ms).
            assert len(health) >= 2 and {s for s, _ in health} == {200}, health
            assert max(took for _, took in health) < 0.125, health
            assert {s for s, _ in cached} == {200}, cached
            assert max(took for _, took in cached) < got["took"] - 0.05, (cached, got["took"])
        finally:
            redis.thaw()

        def usage_answers():
            status, _, body = call(gw, "GET", "/v1/usage")
            return body if status == 200 else None
        assert wait_for(usage_answers, 20), "the jobs API never answered again after the store's Redis came back"
        assert gw.request("GET", "/health").status == 200
        assert gw.request("GET", TRANSCRIPT, headers=key).status == 200
    finally:
        cluster.close()
