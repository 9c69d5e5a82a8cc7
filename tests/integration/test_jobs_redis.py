"""Batch jobs with VTS_REDIS_URL: the real redis-server, several real gateways sharing it and one fetcher pool
dialing them all, the fake platform counting its requests per video. A job lives in Redis, so every gateway serves
its status and items; the items are spread over the gateways' runners through the stream's consumer group and each
video is asked of the platform once; the items a gateway killed with SIGKILL held are claimed by another within
seconds, none lost and none answered twice; each transcript delivered costs one unit of the key's month in the
counter the synchronous endpoint uses; a counter Redis cannot count in is not a month used up; another key sees
nothing; a long job does not starve a short one (on SQLite too); jobs go to the database of an ACL user with a
password, never logged, while a wrong password is a 503; a Redis stopped and started again is said down and back
by the job store's Redis session in the one wording of every user of Redis; a job's webhook, its delivery state in Redis, reaches its
receiver signed, retried by either gateway, and the job expires once it is delivered; and a playlist's pages after the
first, kept in Redis, are read by either gateway into every id of the capture in order."""
import hashlib
import json
import time
import urllib.parse

import pytest

from conftest import Gateway
from redisserver import Redis
from stack import UNLIMITED, Fetchers, harness
from test_jobs_run import call as jobs_call
from vtsproc import wait_for, write_keyfile

JOBKEY = "vts_test_key_jobs_redis"
OTHERKEY = "vts_test_key_jobs_other"
TRANSCRIPT = {"language": "en", "source": "captions", "text": "Hello and welcome to the fake platform",
              "segments": [{"text": "Hello and welcome", "start": 0.12, "duration": 2.4},
                           {"text": "to the fake platform", "start": 2.52, "duration": 3}]}
QUOTA_EXCEEDED = {"code": "quota_exceeded", "message": "The monthly quota of this API key is used up."}


def call(gw, method, path, body=None, key=JOBKEY):
    """test_jobs_run's request, with this file's key and a longer wait (three gateways share two cores)."""
    return jobs_call(gw, method, path, body, key=key, timeout=30)


def all_items(gw, loc, limit=1000):
    items, cursor = [], None
    while True:
        status, _, page = call(gw, "GET", loc + "/items?limit=%d" % limit + ("&cursor=" + cursor if cursor else ""))
        assert status == 200, page
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items


def month_counter(redis, key):
    """The key's month counter in Redis, the one the synchronous endpoint counts in (gateway/limits)."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return "vts:rl:{%s}:q:%s" % (digest, time.strftime("%Y%m", time.gmtime()))


def units_spent(redis, key):
    v = redis.call("GET", month_counter(redis, key))
    return int(v) if v is not None else 0


class Cluster:
    """n gateways sharing one Redis, one key file each (the same keys), one fetcher pool dialing every gateway."""

    def __init__(self, tmp_path, redis, n, fetchers, keys, upstream_args=(), gateway_env=None, workers=2,
                 fetcher_env=None, fetchers_later=False):
        """fetchers_later: the pool is started by start_fetchers, so no item can run (nor be charged) before then."""
        self.upstream = harness.FakeUpstream(upstream_args)
        self.gateways, self.fetchers = [], None
        self.tmp_path, self.n_fetchers, self.fetcher_env = tmp_path, fetchers, fetcher_env
        try:
            for i in range(n):
                d = tmp_path / ("gw%d" % i)
                d.mkdir()
                env = {"VTS_UPSTREAM_URL": self.upstream.url}
                if redis is not None:
                    env["VTS_REDIS_URL"] = redis.url
                env.update(gateway_env or {})
                gw = Gateway(d, env=env, workers=workers)
                write_keyfile(gw.keys_file, UNLIMITED + list(keys))
                gw.start()
                self.gateways.append(gw)
            if not fetchers_later:
                self.start_fetchers()
        except BaseException:
            self.close()
            raise

    def start_fetchers(self):
        urls = ",".join("tcp://127.0.0.1:%d" % g.jobs_port for g in self.gateways)
        fenv = {"VTS_JOBS_URL": urls, "VTS_JOB_TIMEOUT_MS": "30000"}
        fenv.update(self.fetcher_env or {})
        self.fetchers = Fetchers(self.tmp_path, self.gateways[0].jobs_port, self.upstream.url, self.n_fetchers, fenv)

        def all_ready():
            return all(g.request("GET", "/ready").status == 200 for g in self.gateways)
        assert wait_for(all_ready, 20), "the gateways did not see the fetchers"

    def requests(self):
        return self.upstream.stats()["requests"]

    def close(self):
        if self.fetchers is not None:
            self.fetchers.stop()
        for g in self.gateways:
            g.stop()
        self.upstream.close()


def start_job(gw, body, key=JOBKEY):
    status, h, job = call(gw, "POST", "/v1/jobs", body, key=key)
    assert status == 202, job
    assert h["location"] == "/v1/jobs/" + job["id"]
    return h["location"]


def wait_done(gw, loc, timeout, key=JOBKEY, interval=0.2):
    def done():
        status, _, job = call(gw, "GET", loc, key=key)
        return job if status == 200 and job["status"] == "done" else None
    job = wait_for(done, timeout, interval=interval)
    assert job, call(gw, "GET", loc, key=key)
    return job


def per_video(requests, video):
    """The platform's requests for one video, by kind."""
    return {k: n for k, n in requests.items() if k.endswith(" " + video)}


def item_runs(gw, job_id):
    """The items of job_id this gateway's dispatcher ran (its "job finished" lines)."""
    return [r for r in gw.log_records() if r.get("msg") == "job finished"
            and r.get("request_id", "").startswith(job_id + "-")]


def test_a_job_over_three_gateways_runs_each_video_once_and_every_gateway_serves_it(tmp_path, redis):
    ids = ["benchRd%04d" % i for i in range(1000)]
    unplayable = ["nonexistent"]
    keys = [("jobs", JOBKEY, "active", 100000, 60, 100000), ("other", OTHERKEY, "active", 100000, 60, 100000)]
    c = Cluster(tmp_path, redis, 3, 6, keys)
    try:
        a, b, d = c.gateways
        loc = start_job(a, {"video_ids": ids[:500] + unplayable + ids[500:]})
        job_id = loc.rsplit("/", 1)[1]
        # Served by a gateway that did not accept it, while it runs.
        status, _, job = call(b, "GET", loc)
        assert status == 200 and job["id"] == job_id and job["total"] == 1001
        job = wait_done(d, loc, 600)
        assert job["counts"] == {"queued": 0, "running": 0, "done": 1000, "failed": 1, "cancelled": 0}
        for gw in (b, d):
            items = all_items(gw, loc, limit=1000 if gw is b else 333)
            assert [i["video_id"] for i in items] == ids[:500] + unplayable + ids[500:]
            assert items[500] == {"video_id": "nonexistent", "status": "failed", "error": {
                "code": "transcript_not_available", "message": "No accessible transcript was found for this video."}}
            assert all(i == {"video_id": i["video_id"], "status": "done", "transcript": TRANSCRIPT}
                       for i in items[:500] + items[501:])
        # Each video was asked of the platform once: one player request and one caption request.
        reqs = c.requests()
        for v in ids:
            assert per_video(reqs, v) == {"POST /youtubei/v1/player " + v: 1, "GET /api/timedtext " + v: 1}, v
        # The work went through every gateway's runner, each item run by one of them only.
        runs = [item_runs(g, job_id) for g in c.gateways]
        assert all(len(r) > 0 for r in runs), [len(r) for r in runs]
        assert sum(len(r) for r in runs) == 1001
        # One unit of the month a transcript delivered, in the counter the synchronous endpoint counts in.
        assert units_spent(redis, JOBKEY) == 1000
        # Another key sees nothing of it, on any gateway.
        for gw in c.gateways:
            for method, path in (("GET", loc), ("GET", loc + "/items"), ("DELETE", loc)):
                status, _, body = call(gw, method, path, key=OTHERKEY)
                assert (status, body) == (404, {"error": {"code": "not_found", "message": "No such job."}}), (
                    gw.port, method, path, body)
        # The job's keys expire now that it has ended; the stream holds nothing.
        assert 0 < redis.call("TTL", "vts:job:" + job_id) <= 604800
        assert redis.call("XLEN", "vts:jobs:work") == 0
    finally:
        c.close()


def item_states(redis, job_id):
    """seq -> status digit of every item (0 queued, 1 running, 2 done, 3 failed, 4 cancelled); the other fields
    (t<seq> tries, u<seq> a unit held) are not items."""
    flat = redis.call("HGETALL", "vts:job:%s:it" % job_id)
    return {int(flat[i]): flat[i + 1][:1].decode() for i in range(0, len(flat), 2) if flat[i][:1].isdigit()}


def test_items_of_a_gateway_killed_mid_job_are_claimed_by_another_none_lost_none_answered_twice(tmp_path, redis):
    ids = ["benchRk%04d" % i for i in range(40)]
    keys = [("jobs", JOBKEY, "active", 100000, 60, 100000)]
    # Every platform request takes 300 ms, so the kill lands while items run; one fetcher pool for both gateways.
    c = Cluster(tmp_path, redis, 2, 4, keys, upstream_args=("--delay-ms", "300"))
    try:
        a, b = c.gateways
        loc = start_job(a, {"video_ids": ids})
        job_id = loc.rsplit("/", 1)[1]

        taker = wait_for(lambda: [r["taker"] for r in a.log_records() if r.get("msg") == "batch jobs runner ready"], 10)
        assert taker, a.log_text()[-2000:]

        def a_holds_items():
            # Entries of the work stream pending with a's runner while some items are done: a holds items now.
            pend = redis.call("XPENDING", "vts:jobs:work", "runners", "-", "+", "100", taker[0])
            done = list(item_states(redis, job_id).values()).count("2")
            return [p[0] for p in pend] if pend and done >= 4 else None
        held = wait_for(a_holds_items, 120)
        assert held, (redis.call("XPENDING", "vts:jobs:work", "runners"), item_states(redis, job_id))
        a.kill()
        t_kill = time.monotonic()
        at_kill = item_states(redis, job_id)
        held_seqs = set()
        for e in held:
            entry = redis.call("XRANGE", "vts:jobs:work", e, e)
            if entry:
                fields = entry[0][1]
                held_seqs.add(int(fields[fields.index(b"s") + 1]))
        done_at_kill = {s for s, v in at_kill.items() if v == "2"}
        running_at_kill = {s for s, v in at_kill.items() if v == "1"}
        assert held_seqs and held_seqs <= running_at_kill, (held_seqs, at_kill)
        assert len(done_at_kill) < len(ids), "the job ended before the kill: nothing was tested"
        job = wait_done(b, loc, 180)
        assert job["counts"] == {"queued": 0, "running": 0, "done": 40, "failed": 0, "cancelled": 0}
        items = all_items(b, loc)
        assert [i["video_id"] for i in items] == ids
        assert all(i["transcript"] == TRANSCRIPT for i in items)
        reqs = c.requests()
        for seq, v in enumerate(ids, 1):
            n = reqs.get("POST /youtubei/v1/player " + v, 0)
            if seq in done_at_kill:
                assert n == 1, (v, n)  # answered before the kill: never run again
            elif seq in running_at_kill:
                assert n in (1, 2), (v, n)  # in a fetcher's hands for the dead gateway: its answer died with it
            else:
                assert n == 1, (v, n)  # queued at the kill: run once, by the gateway left
        # The dead gateway's items were claimed and run by the other within seconds of the kill (idle 5 s, then the
        # next take), each once.
        claimed = [int(r["request_id"].rsplit("-", 1)[1]) for r in item_runs(b, job_id)]
        assert all(claimed.count(s) == 1 for s in held_seqs), (held_seqs, claimed)
        assert time.monotonic() - t_kill < 60
        assert redis.call("XLEN", "vts:jobs:work") == 0
        # Each transcript delivered cost one unit, the claimed ones included.
        assert units_spent(redis, JOBKEY) == 40
    finally:
        c.close()


def test_a_month_counter_redis_cannot_count_in_is_not_a_month_used_up(tmp_path, redis):
    ids = ["benchRq%04d" % i for i in range(3)]
    keys = [("jobs", JOBKEY, "active", 100000, 60, 100000)]
    # No fetcher yet: the runner takes no item (it has no room), so none is charged before the counter is a hash.
    c = Cluster(tmp_path, redis, 1, 1, keys, upstream_args=("--delay-ms", "400"), fetchers_later=True)
    try:
        gw = c.gateways[0]
        counter = month_counter(redis, JOBKEY)
        loc = start_job(gw, {"video_ids": ids})
        # The request read the month without making its counter, and no item was charged.
        assert redis.call("EXISTS", counter) == 0
        # The counter made a hash under the runner: counting in it is an error of Redis (WRONGTYPE), not a quota.
        assert redis.call("HSET", counter, "x", "1") == 1
        c.start_fetchers()

        def put_back():
            return [r for r in gw.log_records() if r.get("msg") == "batch item not charged: tried again later"]
        assert wait_for(put_back, 30), gw.log_text()[-2000:]
        status, _, job = call(gw, "GET", loc)
        assert job["counts"]["failed"] == 0 and job["counts"]["done"] == 0, job
        assert redis.call("DEL", counter) == 1
        job = wait_done(gw, loc, 60)
        assert job["counts"] == {"queued": 0, "running": 0, "done": 3, "failed": 0, "cancelled": 0}
        assert units_spent(redis, JOBKEY) == 3
    finally:
        c.close()


def test_jobs_requests_never_touch_the_month_in_redis(tmp_path, redis):
    # No fetcher: only the jobs API runs. A request, a status poll, a page and a cancel are counted in the window
    # only; the month is read, never reserved and given back, so its counter is never even made.
    gw = Gateway(tmp_path, env={"VTS_REDIS_URL": redis.url})
    write_keyfile(gw.keys_file, [("jobs", JOBKEY, "active", 100000, 60, 100000)])
    gw.start()
    try:
        loc = start_job(gw, {"video_ids": ["benchRn%04d" % i for i in range(3)]})
        for _ in range(5):
            assert call(gw, "GET", loc)[0] == 200
            assert call(gw, "GET", loc + "/items")[0] == 200
        assert call(gw, "GET", "/v1/jobs/j000000000000000000000000")[0] == 404
        assert call(gw, "DELETE", loc)[0] == 200
        counter = month_counter(redis, JOBKEY)
        assert redis.call("EXISTS", counter) == 0, "the month counter was made: %r" % redis.call("GET", counter)
        # Every request counted in the window (summed: the requests may straddle two windows).
        windows = [w for w in redis.call("KEYS", counter.split("}")[0] + "}:w:*") if not w.endswith(b":owed")]
        assert sum(int(redis.call("GET", w)) for w in windows) == 13, windows
    finally:
        gw.stop()


def test_items_past_the_month_fail_quota_exceeded_and_share_the_synchronous_endpoints_counter(tmp_path, redis):
    ids = ["benchRm%04d" % i for i in range(4)]
    # A month of 5 units: two synchronous transcripts on one gateway, then a job of 4 on another gets 3.
    keys = [("jobs", JOBKEY, "active", 100000, 60, 5)]
    c = Cluster(tmp_path, redis, 2, 2, keys)
    try:
        a, b = c.gateways
        for v in ("benchRsync1", "benchRsync2"):
            r = a.request("GET", "/v1/video/transcript?video_id=" + v, headers={"x-api-key": JOBKEY})
            assert r.status == 200
        loc = start_job(b, {"video_ids": ids})
        job = wait_done(a, loc, 60)
        assert job["counts"] == {"queued": 0, "running": 0, "done": 3, "failed": 1, "cancelled": 0}
        items = all_items(a, loc)
        # Items run at once on both gateways: whichever was answered last found the month used up.
        assert sorted(i["status"] for i in items) == ["done", "done", "done", "failed"]
        for i in items:
            want = {"error": QUOTA_EXCEEDED} if i["status"] == "failed" else {"transcript": TRANSCRIPT}
            assert i == dict({"video_id": i["video_id"], "status": i["status"]}, **want), i
        assert units_spent(redis, JOBKEY) == 5
        r = b.request("GET", "/v1/video/transcript?video_id=benchRsync3", headers={"x-api-key": JOBKEY})
        assert (r.status, json.loads(r.body)["error"]["code"]) == (429, "quota_exceeded")
    finally:
        c.close()


@pytest.mark.parametrize("backend", ["redis", "sqlite"])
def test_a_long_job_does_not_starve_a_short_one(tmp_path, backend, request):
    big = ["benchRb%04d" % i for i in range(300)]
    small = ["benchRs%04d" % i for i in range(10)]
    r = request.getfixturevalue("redis") if backend == "redis" else None
    keys = [("jobs", JOBKEY, "active", 100000, 60, 100000), ("other", OTHERKEY, "active", 100000, 60, 100000)]
    # Two fetchers, items on one of them (the default share): items run one at a time, 50 ms each.
    c = Cluster(tmp_path, r, 1, 2, keys, upstream_args=("--delay-ms", "50"))
    try:
        gw = c.gateways[0]
        loc_big = start_job(gw, {"video_ids": big})
        assert wait_for(lambda: call(gw, "GET", loc_big)[2]["counts"]["done"] >= 5, 60)
        loc_small = start_job(gw, {"video_ids": small}, key=OTHERKEY)
        before = call(gw, "GET", loc_big)[2]["counts"]["done"]
        wait_done(gw, loc_small, 120, key=OTHERKEY, interval=0.1)
        after = call(gw, "GET", loc_big)[2]["counts"]
        # Turns: the short job's 10 items went between the long one's, so at most about 10 of those (and the few in
        # hand at its making) ran meanwhile; in order of arrival it would have waited for the long job's ~290 left.
        assert after["done"] - before <= 14, (before, after)
        assert after["queued"] > 200, after
    finally:
        c.close()


PASSWORD = "j0bs:p@ss/word"


def test_jobs_live_in_the_database_of_an_acl_user_with_a_password_and_a_wrong_password_is_a_503(tmp_path, request):
    request.getfixturevalue("redis")  # skips, loudly, without redis-server
    acl = Redis(args=["--user", "default", "off", "--user", "vts", "on", ">" + PASSWORD, "~*", "&*", "+@all"],
                auth=("vts", PASSWORD))
    acl.start()
    request.addfinalizer(acl.stop)
    quoted = urllib.parse.quote(PASSWORD, safe="")

    class AclUrl:
        url = "redis://vts:%s@127.0.0.1:%d/3" % (quoted, acl.port)
    keys = [("jobs", JOBKEY, "active", 100000, 60, 100000)]
    c = Cluster(tmp_path, AclUrl, 1, 1, keys)
    try:
        gw = c.gateways[0]
        loc = start_job(gw, {"video_ids": ["benchRa0001", "benchRa0002"]})
        job = wait_done(gw, loc, 60)
        assert job["counts"]["done"] == 2
        job_id = loc.rsplit("/", 1)[1]
        count = "redis.call('SELECT', ARGV[1]) return redis.call('EXISTS', ARGV[2])"
        assert acl.call("EVAL", count, "0", "3", "vts:job:" + job_id) == 1
        assert acl.call("EVAL", count, "0", "0", "vts:job:" + job_id) == 0
        log = gw.log_text()
        assert PASSWORD not in log and quoted not in log
    finally:
        c.close()

    class WrongUrl:
        url = "redis://vts:n0t-the-one@127.0.0.1:%d/3" % acl.port
    (tmp_path / "wrong").mkdir()
    c = Cluster(tmp_path / "wrong", WrongUrl, 1, 1, keys, gateway_env={"VTS_RATE_LIMIT_FAIL_CLOSED": "false"})
    try:
        gw = c.gateways[0]
        status, _, body = call(gw, "GET", "/v1/jobs/j000000000000000000000000")
        unavailable = {"error": {"code": "jobs_unavailable", "message": "The job store is unavailable."}}
        assert (status, body) == (503, unavailable)
        refused = [r for r in gw.log_records() if r.get("msg") == "redis unavailable" and r.get("user") == "jobs"]
        assert refused and refused[0]["error"].startswith("WRONGPASS"), refused
        assert "n0t-the-one" not in gw.log_text()
    finally:
        c.close()


def test_the_job_stores_redis_session_says_it_is_down_and_back_in_the_one_wording(tmp_path, redis):
    c = Cluster(tmp_path, redis, 1, 1, [("jobs", JOBKEY, "active", 100000, 60, 100000)])
    path = "/v1/jobs/j000000000000000000000000"
    not_found = {"error": {"code": "not_found", "message": "No such job."}}
    unavailable = {"error": {"code": "jobs_unavailable", "message": "The job store is unavailable."}}
    try:
        gw = c.gateways[0]
        status, _, body = call(gw, "GET", path)
        assert (status, body) == (404, not_found)
        redis.stop()
        for _ in range(3):
            status, _, body = call(gw, "GET", path)
            assert (status, body) == (503, unavailable)
        redis.start()  # same port; the store is tried again after its backoff's wait (1 s, then 2, 4, 8 s)

        def said_by_pid():
            said = {}
            for rec in gw.log_records():
                if rec.get("msg") in ("redis unavailable", "redis available again") and rec.get("user") == "jobs":
                    said.setdefault(rec["pid"], []).append((rec["msg"], rec.get("error")))
            return said

        # Each process opens its store when it first needs it: one that saw no request during the outage finds its
        # old connection closed and opens a new one without a word (it was never down). So the requests go on (each
        # on a new connection, so on any worker) until a process that said it was down has said it is back.
        def back():
            answered = call(gw, "GET", path)[:3:2] == (404, not_found)
            return answered and any(lines[-1] == ("redis available again", None) for lines in said_by_pid().values())

        assert wait_for(back, 20), (call(gw, "GET", path), said_by_pid())
        said = said_by_pid()
        # Every process's session begins with a down line and never says the same line twice in a row (once per
        # outage and reason, not once per attempt).
        assert said, gw.log_text()[-2000:]
        for pid, lines in said.items():
            assert lines[0][0] == "redis unavailable", (pid, lines)
            for before, after in zip(lines, lines[1:]):
                assert before != after, (pid, lines)
        assert not [r for r in gw.log_records() if str(r.get("msg", "")).startswith("job store: Redis")]
    finally:
        c.close()

def test_a_jobs_webhook_is_delivered_signed_through_two_gateways_and_the_job_then_expires(tmp_path, redis):
    from test_webhooks import Receiver, check_payload
    rx = Receiver("127.0.0.2", "500,204")
    hooks = {"VTS_WEBHOOK_ALLOW": "127.0.0.2", "VTS_WEBHOOK_RETRY_MS": "400", "VTS_FETCHER_WEBHOOK_PORTS": str(rx.port)}
    keys = [("jobs", JOBKEY, "active", 100000, 60, 100000)]
    c = None
    try:
        c = Cluster(tmp_path, redis, 2, 2, keys, gateway_env=hooks, fetcher_env=hooks)
        a, b = c.gateways
        status, h, job = call(a, "POST", "/v1/jobs", {"video_ids": ["benchRw0001", "benchRw0002"],
                                                       "webhook_url": rx.url})
        assert status == 202, job
        loc = h["location"]
        done = wait_done(b, loc, 60)
        assert wait_for(lambda: len(rx.deliveries()) >= 2, 60), rx.deliveries()
        got = rx.deliveries(job["webhook_secret"])
        assert [d["status"] for d in got] == [500, 204]
        for d in got:
            check_payload(d, job["id"], done)
        k = "vts:job:" + job["id"]
        assert wait_for(lambda: redis.call("HGET", k, "hook_state") == b"1", 10), redis.call("HGETALL", k)
        assert redis.call("HGET", k, "hook_attempts") == b"2" and redis.call("HGET", k, "hook_status") == b"204"
        # Delivered: the job's keys expire now; nothing is owed or pending.
        assert 0 < redis.call("TTL", k) <= 604800
        assert redis.call("SCARD", "vts:jobs:hooks:owed") == 0 and redis.call("ZCARD", "vts:jobs:hooks") == 0
        tried = [r for g in c.gateways for r in g.log_records() if r.get("msg") == "webhook try"]
        assert sorted((r["attempt"], r["outcome"]) for r in tried) == [(1, "failed"), (2, "delivered")]
    finally:
        if c is not None:
            c.close()
        rx.close()


def test_a_playlist_with_continuations_on_redis_yields_every_id_in_order_served_by_either_gateway(tmp_path, redis):
    from conftest import shared_fixtures
    from test_jobs_browse import Captures, assert_items
    captures = Captures()
    sent, first = captures.named(r"vl-PLoumn5-page1\.continuation\.json")
    ids = captures.chain(first)
    assert len(ids) == 150
    keys = [("jobs", JOBKEY, "active", 100000, 60, 100000)]
    c = Cluster(tmp_path, redis, 2, 2, keys, upstream_args=("--captures", shared_fixtures("youtube-transcript-api")))
    try:
        a, b = c.gateways
        status, h, job = call(a, "POST", "/v1/jobs", {"playlist_id": captures.first_page_id(sent)})
        assert status == 202 and (job["status"], job["total"]) == ("queued", 100), job
        job_id = job["id"]
        done = wait_done(b, h["location"], 120)
        assert (done["total"], done["counts"]["failed"]) == (150, 150), done
        assert_items(all_items(b, h["location"]), ids)
        assert_items(all_items(a, h["location"]), ids)
        # The list's second page was read once, by either gateway's runner, and nothing of the list is left to read.
        assert c.requests().get("POST /youtubei/v1/browse", 0) == 2
        assert redis.call("HGET", "vts:job:" + job_id, "cont") == b""
        assert redis.call("ZSCORE", "vts:jobs:pages", job_id) is None
        assert 0 < redis.call("TTL", "vts:job:" + job_id) <= 604800
    finally:
        c.close()
