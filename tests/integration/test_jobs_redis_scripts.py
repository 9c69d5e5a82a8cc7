"""The Redis job store's Lua scripts: each is loaded once per connection (SCRIPT LOAD) and every call runs it by its
SHA1 (EVALSHA), never sending its text again (EVAL); and when Redis has lost them (SCRIPT FLUSH here; a restart or a
failover alike), the call that meets NOSCRIPT loads its script again and is repeated once, so the next job, its
items' ends and its webhook run as if nothing happened, without an error logged."""
import re

import pytest

from redisserver import Redis
from test_jobs_redis import JOBKEY, Cluster, call, start_job, wait_done
from vtsproc import wait_for

KEYS = [("jobs", JOBKEY, "active", 100000, 60, 100000)]


def info(redis, section):
    text = redis.call("INFO", section)
    return text.decode() if isinstance(text, bytes) else str(text)


def commandstats(redis):
    """{command: calls} from INFO commandstats (subcommands as "script|load")."""
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"cmdstat_([\w|]+):calls=(\d+)", info(redis, "commandstats"))}


def noscript_errors(redis):
    m = re.search(r"errorstat_NOSCRIPT:count=(\d+)", info(redis, "errorstats"))
    return int(m.group(1)) if m else 0


def delta(before, after, name):
    return after.get(name, 0) - before.get(name, 0)


@pytest.fixture
def cache_redis(redis):
    """A redis-server of its own for the transcript cache (VTS_REDIS_CACHE_URL), whose commands are not the job
    store's: the job store's Redis then sees only the store and the rate limiter."""
    r = Redis()
    r.start()
    yield r
    r.stop()


def error_lines(c):
    return [r for g in c.gateways for r in g.log_records() if r.get("level") == "error"]


def test_a_job_on_redis_runs_its_scripts_by_sha_and_never_sends_their_text(tmp_path, redis, cache_redis):
    c = Cluster(tmp_path, redis, 1, 1, KEYS, gateway_env={"VTS_REDIS_CACHE_URL": cache_redis.url})
    try:
        gw = c.gateways[0]
        before = commandstats(redis)
        loc = start_job(gw, {"video_ids": ["benchRs0001", "benchRs0002", "nonexistent"]})
        done = wait_done(gw, loc, 30)
        assert (done["counts"]["done"], done["counts"]["failed"]) == (2, 1), done
        status, _, page = call(gw, "GET", loc + "/items")
        assert status == 200 and [i["status"] for i in page["items"]] == ["done", "done", "failed"], page
        after = commandstats(redis)
        # Made, taken, ended and read through scripts: every one by its SHA1, none by its text (this test's own
        # client sends no EVAL either).
        assert delta(before, after, "evalsha") > 0, (before, after)
        assert delta(before, after, "eval") == 0, (before, after)
        # Loaded as each connection opened (a worker's opens at its first request): no call met NOSCRIPT.
        assert delta(before, after, "script|load") > 0, (before, after)
        assert noscript_errors(redis) == 0, info(redis, "errorstats")
        assert error_lines(c) == []
    finally:
        c.close()


def run_hooked_job(gw, redis, rx, video, deliveries):
    """A job of video and a video that fails, with a webhook: run to its end and delivered once, signed, the delivery
    stored; deliveries is the receiver's count with this one. Its id."""
    from test_webhooks import check_payload
    status, h, job = call(gw, "POST", "/v1/jobs", {"video_ids": [video, "nonexistent"], "webhook_url": rx.url})
    assert status == 202, job
    done = wait_done(gw, h["location"], 30)
    assert (done["counts"]["done"], done["counts"]["failed"]) == (1, 1), done
    assert wait_for(lambda: len(rx.deliveries()) >= deliveries, 30), rx.deliveries()
    got = [d for d in rx.deliveries(job["webhook_secret"]) if d["headers"]["webhook-id"] == "msg_" + job["id"]]
    assert [d["status"] for d in got] == [204], got
    check_payload(got[0], job["id"], done)
    k = "vts:job:" + job["id"]
    assert wait_for(lambda: redis.call("HGET", k, "hook_state") == b"1", 10), redis.call("HGETALL", k)
    return job["id"]


def test_after_script_flush_the_next_job_and_its_webhook_still_run_to_their_end_without_an_error(tmp_path, redis,
                                                                                               cache_redis):
    from test_webhooks import Receiver
    rx = Receiver("127.0.0.2", "204,204")
    hooks = {"VTS_WEBHOOK_ALLOW": "127.0.0.2", "VTS_FETCHER_WEBHOOK_PORTS": str(rx.port)}
    c = None
    try:
        # One HTTP worker: its connection opens with the first job, before the flush, as the dispatcher's do; a
        # connection opened after it would load every script anew and leave the others nothing to meet.
        c = Cluster(tmp_path, redis, 1, 1, KEYS, gateway_env=dict(hooks, VTS_REDIS_CACHE_URL=cache_redis.url),
                    fetcher_env=hooks, workers=1)
        gw = c.gateways[0]
        first = run_hooked_job(gw, redis, rx, "benchRs0003", 1)
        before = commandstats(redis)
        assert redis.call("SCRIPT", "FLUSH") == b"OK"
        # The idle store's next take meets NOSCRIPT, loads its script again and is answered: no error, no reconnect.
        assert wait_for(lambda: noscript_errors(redis) > 0, 10), info(redis, "errorstats")
        second = run_hooked_job(gw, redis, rx, "benchRs0004", 2)
        assert second != first
        after = commandstats(redis)
        noscript = noscript_errors(redis)
        # The job was made, its items taken and ended, its webhook owed, added, taken and ended: each of the store's
        # scripts met NOSCRIPT once after the flush and was loaded again right then, and no connection was opened
        # anew (it would load every script). The rate limiter met one NOSCRIPT too, at the first request after the
        # flush, and answered it with one EVAL of its own (gateway/limits).
        assert delta(before, after, "eval") == 1, (before, after)
        assert noscript >= 6 + 1, info(redis, "errorstats")
        assert delta(before, after, "script|load") == noscript - 1, (before, after, noscript)
        assert error_lines(c) == []
        assert not [r for r in gw.log_records() if str(r.get("msg", "")).startswith("redis")], gw.log_records()
    finally:
        if c is not None:
            c.close()
        rx.close()
