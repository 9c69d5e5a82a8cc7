"""Batch jobs run end to end: the real gateway (its dispatcher's runner), a fetcher pool and the fake platform. Items
go through the same cache and fetchers as synchronous requests, each transcript delivered costs one unit of the
month and no more, items past the month fail quota_exceeded, the job's format decides what an item's transcript is,
and a gateway killed with SIGKILL mid-job resumes it on restart from the store, losing no item and running none
twice."""
import json
import sqlite3

from conftest import ACTIVE_KEY, _contract_check, http_request
from stack import Stack
from vtsproc import wait_for

# The fake platform answers every "bench…" id as its one-track English video.
TRANSCRIPT = {"language": "en", "source": "captions", "text": "Hello and welcome to the fake platform",
              "segments": [{"text": "Hello and welcome", "start": 0.12, "duration": 2.4},
                           {"text": "to the fake platform", "start": 2.52, "duration": 3}]}
JOBKEY = "vts_test_key_jobs"


def call(gw, method, path, body=None, key=JOBKEY, timeout=10):
    """One request with an optional JSON body on a new connection; the answer checked against the OpenAPI document."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=timeout)
    try:
        headers = {"x-api-key": key}
        if body is not None:
            headers["content-type"] = "application/json"
        conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        hdrs = {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()
    _contract_check(method, path, resp.status, hdrs, raw)
    return resp.status, hdrs, json.loads(raw) if raw else None


def start_job(gw, body):
    status, h, job = call(gw, "POST", "/v1/jobs", body)
    assert status == 202, job
    return h["location"]


def wait_job_done(gw, loc, timeout=60):
    def done():
        status, _, job = call(gw, "GET", loc)
        return job if status == 200 and job["status"] == "done" else None
    job = wait_for(done, timeout)
    assert job, call(gw, "GET", loc)
    return job


def all_items(gw, loc):
    items, cursor = [], None
    while True:
        status, _, page = call(gw, "GET", loc + "/items?limit=7" + ("&cursor=" + cursor if cursor else ""))
        assert status == 200
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items


def player_requests(stack, video):
    return stack.requests().get("POST /youtubei/v1/player " + video, 0)


def sync_get(stack, video):
    return http_request(stack.gateway.port, "GET", "/v1/video/transcript?video_id=" + video,
                        headers={"x-api-key": JOBKEY})


def test_items_run_through_the_cache_and_each_transcript_costs_one_unit(tmp_path):
    # Eight transcripts and one video the platform cannot play; a month of 8 + 1 units.
    ids = ["benchJr%04d" % i for i in range(8)]
    stack = Stack(tmp_path, keys=[("jobs", JOBKEY, "active", 1000, 60, 9)], fetchers=2)
    try:
        loc = start_job(stack.gateway, {"video_ids": ids[:4] + ["nonexistent"] + ids[4:]})
        job = wait_job_done(stack.gateway, loc)
        assert job["counts"] == {"queued": 0, "running": 0, "done": 8, "failed": 1, "cancelled": 0}
        items = all_items(stack.gateway, loc)
        assert [i["video_id"] for i in items] == ids[:4] + ["nonexistent"] + ids[4:]
        for i in items:
            if i["video_id"] == "nonexistent":
                assert i == {"video_id": "nonexistent", "status": "failed", "error": {
                    "code": "transcript_not_available",
                    "message": "No accessible transcript was found for this video."}}
            else:
                assert i == {"video_id": i["video_id"], "status": "done", "transcript": TRANSCRIPT}
        for v in ids:
            assert player_requests(stack, v) == 1, v
        # The month: 8 units spent by the job, 1 left for one synchronous transcript (served from the cache the job
        # filled: no platform request), then none.
        r = sync_get(stack, ids[0])
        assert r.status == 200 and json.loads(r.body) == TRANSCRIPT
        assert player_requests(stack, ids[0]) == 1
        r = sync_get(stack, ids[1])
        assert (r.status, json.loads(r.body)["error"]["code"]) == (429, "quota_exceeded")
    finally:
        stack.close()


def test_items_past_the_month_fail_quota_exceeded_and_format_decides_the_transcript(tmp_path):
    ids = ["benchJq%04d" % i for i in range(5)]
    stack = Stack(tmp_path, keys=[("jobs", JOBKEY, "active", 1000, 60, 3)], fetchers=2)
    try:
        loc = start_job(stack.gateway, {"video_ids": ids, "format": "text"})
        job = wait_job_done(stack.gateway, loc)
        assert job["counts"] == {"queued": 0, "running": 0, "done": 3, "failed": 2, "cancelled": 0}
        items = all_items(stack.gateway, loc)
        done = [i for i in items if i["status"] == "done"]
        failed = [i for i in items if i["status"] == "failed"]
        assert all(i["transcript"] == TRANSCRIPT["text"] for i in done)
        assert all(i["error"] == {"code": "quota_exceeded",
                                  "message": "The monthly quota of this API key is used up."} for i in failed)
        r = sync_get(stack, ids[0])
        assert (r.status, json.loads(r.body)["error"]["code"]) == (429, "quota_exceeded")
    finally:
        stack.close()


def statuses(db_path):
    db = sqlite3.connect(str(db_path))
    try:
        return dict(db.execute("SELECT video_id, status FROM items").fetchall())
    finally:
        db.close()


def test_a_gateway_killed_mid_job_resumes_it_losing_no_item_and_running_none_twice(tmp_path):
    ids = ["benchJk%04d" % i for i in range(24)]
    # Every platform request takes 150 ms, so the kill lands while items run.
    stack = Stack(tmp_path, keys=[("jobs", JOBKEY, "active", 1000, 60, 1000)], fetchers=2,
                  upstream_args=("--delay-ms", "150"))
    gw = stack.gateway
    try:
        loc = start_job(gw, {"video_ids": ids})
        db = gw.state_dir / "jobs.db"
        assert wait_for(lambda: list(statuses(db).values()).count(2) >= 4, 60), statuses(db)
        gw.kill()
        at_kill = statuses(db)
        done_at_kill = {v for v, s in at_kill.items() if s == 2}
        running_at_kill = {v for v, s in at_kill.items() if s == 1}
        assert len(done_at_kill) < len(ids), "the job ended before the kill: nothing was tested"
        before = {v: player_requests(stack, v) for v in ids}
        gw.start()
        job = wait_job_done(gw, loc, timeout=90)
        assert job["counts"] == {"queued": 0, "running": 0, "done": 24, "failed": 0, "cancelled": 0}
        items = all_items(gw, loc)
        assert [i["video_id"] for i in items] == ids
        assert all(i["transcript"] == TRANSCRIPT for i in items)
        for v in ids:
            n = player_requests(stack, v)
            if v in done_at_kill:
                assert n == 1 and before[v] == 1, (v, n)  # recorded before the kill: never run again
            elif v in running_at_kill:
                assert n in (1, 2), (v, n)  # in a fetcher's hands at the kill: its answer was lost with the gateway
            else:
                assert n == 1, (v, n)  # queued at the kill: run once, after the restart
    finally:
        stack.close()


def test_synchronous_misses_never_wait_for_job_items(tmp_path, share=None):
    # Two fetchers, items on half of them: one fetcher is always free, so a synchronous miss is handed to a fetcher
    # at once (queue_ms, in the dispatcher's log line of its job) while the job runs, never after an item's fetch.
    ids = ["benchJs%04d" % i for i in range(16)]
    stack = Stack(tmp_path, keys=[("jobs", JOBKEY, "active", 1000, 60, 1000)], fetchers=2,
                  upstream_args=("--delay-ms", "300"),
                  gateway_env={"VTS_JOBS_FETCHER_SHARE": share} if share is not None else None)
    gw = stack.gateway
    try:
        loc = start_job(gw, {"video_ids": ids})
        job_id = loc.rsplit("/", 1)[1]
        assert wait_for(lambda: call(gw, "GET", loc)[2]["counts"]["done"] >= 1, 30)
        misses = ["benchSy%04d" % i for i in range(3)]
        for v in misses:
            r = sync_get(stack, v)
            assert r.status == 200 and json.loads(r.body) == TRANSCRIPT
        assert call(gw, "GET", loc)[2]["status"] == "running", "the job ended before the misses: nothing was tested"
        wait_job_done(gw, loc)
        finished = [r for r in gw.log_records() if r.get("msg") == "job finished"]
        sync = [r for r in finished if r["video_id"] in misses]
        items = [r for r in finished if r["request_id"].startswith(job_id + "-")]
        assert len(sync) == 3 and len(items) == 16
        # One platform request takes 300 ms: a miss that waited for an item would show at least that.
        assert all(r["queue_ms"] < 300 for r in sync), [(r["video_id"], r["queue_ms"]) for r in sync]
    finally:
        stack.close()


def test_an_item_that_meets_a_ration_goes_back_to_the_queue_instead_of_failing(tmp_path):
    import os
    import time
    from stack import harness
    captures = os.path.join(os.environ.get("VTS_SHARED_FIXTURES", os.path.join(harness.ROOT, "..", "shared",
                                                                                "fixtures")), "youtube-transcript-api")
    ids = ["benchJr%04d" % i for i in range(4)]
    # The platform rations past two player requests; one fetcher, so the items run one after the other.
    stack = Stack(tmp_path, keys=[("jobs", JOBKEY, "active", 1000, 60, 1000)], fetchers=1,
                  upstream_args=("--captures", captures, "--ration-limit", "2"))
    gw = stack.gateway
    try:
        loc = start_job(gw, {"video_ids": ids})
        db = gw.state_dir / "jobs.db"

        def both_rationed_back():
            con = sqlite3.connect(str(db))
            try:
                rows = con.execute("SELECT video_id, status, tries, not_before_ms FROM items ORDER BY seq").fetchall()
            finally:
                con.close()
            return rows if [r[1] for r in rows] == [2, 2, 0, 0] and all(r[2] == 1 for r in rows[2:]) else None
        rows = wait_for(both_rationed_back, 60)
        assert rows, statuses(db)
        now_ms = time.time() * 1000
        # Put back for later (30 s for a ration that named no time, the 502's Retry-After otherwise), not failed.
        assert all(now_ms < r[3] <= now_ms + 120000 for r in rows[2:]), rows
        status, _, job = call(gw, "GET", loc)
        assert job["status"] == "running"
        assert job["counts"] == {"queued": 2, "running": 0, "done": 2, "failed": 0, "cancelled": 0}
        assert sum(stack.upstream.stats()["rationed"].values()) >= 2
    finally:
        stack.close()


def test_delete_cancels_what_has_not_started_and_the_platform_never_sees_it(tmp_path):
    ids = ["benchJc%04d" % i for i in range(10)]
    stack = Stack(tmp_path, keys=[("jobs", JOBKEY, "active", 1000, 60, 1000)], fetchers=1,
                  upstream_args=("--delay-ms", "200"))
    gw = stack.gateway
    try:
        loc = start_job(gw, {"video_ids": ids})
        assert wait_for(lambda: call(gw, "GET", loc)[2]["counts"]["done"] >= 1, 30)
        status, _, job = call(gw, "DELETE", loc)
        assert status == 200 and job["status"] == "cancelled"
        cancelled = job["counts"]["cancelled"]
        assert cancelled >= 1 and job["counts"]["queued"] == 0

        def settled():
            j = call(gw, "GET", loc)[2]
            return j if j["counts"]["running"] == 0 else None
        job = wait_for(settled, 30)
        assert job and job["status"] == "cancelled"
        assert job["counts"]["cancelled"] == cancelled and job["counts"]["done"] == 10 - cancelled
        items = all_items(gw, loc)
        for i in items:
            assert i["status"] in ("done", "cancelled")
            assert player_requests(stack, i["video_id"]) == (1 if i["status"] == "done" else 0), i
        assert [i["status"] for i in items] == ["done"] * (10 - cancelled) + ["cancelled"] * cancelled
    finally:
        stack.close()
