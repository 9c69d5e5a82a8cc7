"""Paid before spent: a job's item holds a unit of its key's month before the platform is asked, on both backends
(the limiter's shared table with SQLite, the key's month counter in Redis). With no unit left an item fails
quota_exceeded without a platform request; an item that ends without a transcript gives its unit back; the POST says
at once how many units the key has left. Platform requests are counted at the fake platform."""
import pytest

from stack import Stack
from test_jobs_redis import Cluster, units_spent
from test_jobs_run import JOBKEY, all_items, call, start_job, wait_job_done
from vtsproc import wait_for

QUOTA_EXCEEDED = {"code": "quota_exceeded", "message": "The monthly quota of this API key is used up."}


def platform_requests(requests, video):
    return sum(n for k, n in requests.items() if k.endswith(" " + video))


def post(gw, body):
    status, h, job = call(gw, "POST", "/v1/jobs", body, timeout=30)
    assert status == 202, job
    return h["location"], job


def run(backend, tmp_path, redis, keys, ids, fetchers=2):
    if backend == "redis":
        c = Cluster(tmp_path, redis, 1, fetchers, keys)
        return c, c.gateways[0]
    s = Stack(tmp_path, keys=keys, fetchers=fetchers)
    return s, s.gateway


@pytest.fixture(params=["sqlite", "redis"])
def backend(request):
    return request.param


def test_a_quota_3_keys_20_id_job_makes_at_most_3_pairs_of_platform_requests(tmp_path, backend, request):
    redis = request.getfixturevalue("redis") if backend == "redis" else None
    ids = ["benchPq%04d" % i for i in range(20)]
    stack, gw = run(backend, tmp_path, redis, [("jobs", JOBKEY, "active", 1000, 60, 3)], ids, fetchers=4)
    try:
        loc, job = post(gw, {"video_ids": ids})
        assert (job["total"], job["quota_remaining"]) == (20, 3)
        job = wait_job_done(gw, loc)
        assert job["counts"] == {"queued": 0, "running": 0, "done": 3, "failed": 17, "cancelled": 0}
        items = all_items(gw, loc)
        failed = [i["video_id"] for i in items if i["status"] == "failed"]
        assert all(i["error"] == QUOTA_EXCEEDED for i in items if i["status"] == "failed")
        reqs = stack.requests()
        per = {v: platform_requests(reqs, v) for v in ids}
        assert sum(per.values()) <= 6, per
        assert all(per[v] == 0 for v in failed), per
        if backend == "redis":
            assert units_spent(redis, JOBKEY) == 3
        # The month is spent: a new job is refused at once.
        status, _, body = call(gw, "POST", "/v1/jobs", {"video_ids": ["benchPqnext"]}, timeout=30)
        assert (status, body) == (429, {"error": QUOTA_EXCEEDED})
    finally:
        stack.close()


def test_an_item_that_ends_without_a_transcript_gives_its_unit_back(tmp_path, backend, request):
    redis = request.getfixturevalue("redis") if backend == "redis" else None
    # One item at a time (two fetchers, half of them for jobs): the unplayable video holds a unit, gives it back, and
    # three transcripts still fit a month of three; the fourth never reaches the platform.
    ids = ["nonexistent"] + ["benchPb%04d" % i for i in range(4)]
    stack, gw = run(backend, tmp_path, redis, [("jobs", JOBKEY, "active", 1000, 60, 3)], ids)
    try:
        loc, job = post(gw, {"video_ids": ids})
        assert job["quota_remaining"] == 3
        job = wait_job_done(gw, loc)
        assert job["counts"] == {"queued": 0, "running": 0, "done": 3, "failed": 2, "cancelled": 0}
        items = {i["video_id"]: i for i in all_items(gw, loc)}
        assert items["nonexistent"]["error"]["code"] == "transcript_not_available"
        assert [v for v in ids[1:] if items[v]["status"] == "failed"] == [ids[4]]
        assert items[ids[4]]["error"] == QUOTA_EXCEEDED
        assert platform_requests(stack.requests(), ids[4]) == 0
        if backend == "redis":
            assert wait_for(lambda: units_spent(redis, JOBKEY) == 3, 5), units_spent(redis, JOBKEY)
    finally:
        stack.close()
