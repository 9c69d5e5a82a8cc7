"""Rate limit and monthly quota through the real gateway, for both providers (memory and a real redis-server that
the test starts on a free port): exactness across workers, window reset and header values, quota exhaustion and
its survival across a restart, Redis stopped, frozen and restarted, two gateways sharing one Redis.

The limiter runs before validation and dispatch, so every answer that is not a 429 (or a 503 from the limiter)
was admitted by the window, whatever happens to the request afterwards (without a fetcher it ends in a 5xx): the
window tests count answers that are not 429. Only a 200 keeps its unit of the monthly quota, so the quota tests run
the whole service (fetchers and the fake platform). Windows are a few seconds long and bursts start just after a window boundary, so a
burst never straddles two windows."""
import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import Gateway, free_port
from stack import Stack
from vtsproc import metric, wait_for

PATH = "/v1/video/transcript?video_id=Rl0aBcDeF_g"
PROVIDERS = ["memory", "redis"]
# Requests that pass the limiter must not wait long for a fetcher that is not there.
BASE_ENV = {"VTS_JOB_TIMEOUT_MS": "100"}
# The command timeout is 50 ms; the gateway may run under ASan on a loaded 2-core machine.
STORE_FAULT_BUDGET_S = 0.25


@pytest.fixture
def gateways():
    """Every gateway a test starts, stopped at teardown whatever happened."""
    started = []
    yield started
    for gw in started:
        try:
            gw.stop(signal.SIGTERM)
        except Exception:  # a gateway the test already stopped
            pass


def start_gateway(gateways, tmp_path, provider, redis=None, workers=4, **env):
    """Starts a gateway with the given VTS_* settings (names without the prefix, lowercase)."""
    full = dict(BASE_ENV)
    full["VTS_STATE_DIR"] = str(tmp_path / "state")
    for name, value in env.items():
        full["VTS_" + name.upper()] = str(value)
    if provider == "redis":
        if redis is None:
            raise AssertionError("the redis provider needs the redis fixture")
        full["VTS_REDIS_URL"] = redis.url
    tmp_path.mkdir(parents=True, exist_ok=True)
    gw = Gateway(tmp_path, env=full, workers=workers)
    gateways.append(gw)
    gw.start()
    return gw


def provider_redis(request, provider):
    """The redis fixture for the redis provider, None for memory."""
    return request.getfixturevalue("redis") if provider == "redis" else None


def get(gw, key=None):
    r = gw.request("GET", PATH, headers={"x-api-key": key or gw.key})
    return r


def refused(r):
    """Whether the limiter refused r: 429, or 503 rate_limit_unavailable. No fetcher runs beside these gateways, so a
    request the limiter admits is shed by the dispatcher (503 service_unavailable with Retry-After), which is not a
    refusal of the limiter."""
    return r.status == 429 or (r.status == 503 and code_of(r) == "rate_limit_unavailable")


def assert_admitted(r):
    """r passed the limiter and was then shed by the dispatcher, which has no fetcher."""
    assert (r.status, code_of(r)) == (503, "service_unavailable"), r.body


def assert_redis_answers(gw):
    """Until a request is decided by Redis: a worker answers 503 in fail-closed mode while its connection is still
    being set up (a slow start under load), and a test of a fault must begin from a store that works."""
    assert wait_for(lambda: not refused(get(gw)), 5), "Redis never answered the gateway"


def assert_unavailable_within(gw, budget_s, count):
    """count requests, each a 503 rate_limit_unavailable with Retry-After 1, each answered within budget_s."""
    for _ in range(count):
        t0 = time.monotonic()
        r = get(gw)
        took = time.monotonic() - t0
        assert r.status == 503, r.body
        assert code_of(r) == "rate_limit_unavailable"
        assert r.headers["retry-after"] == "1"
        assert took < budget_s, "503 took %.0f ms, expected under %.0f" % (took * 1000, budget_s * 1000)


def code_of(r):
    try:
        return r.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def burst(port, key, total, conns):
    """Sends total requests over conns keep-alive connections at once; returns (status, headers, body) tuples."""
    results = []
    lock = threading.Lock()
    errors = []

    def run(count):
        out = []
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            for _ in range(count):
                c.request("GET", PATH, headers={"x-api-key": key})
                r = c.getresponse()
                body = r.read()
                out.append((r.status, {k.lower(): v for k, v in r.getheaders()}, body))
        except Exception as e:  # reported below: a lost answer would make the count meaningless
            errors.append(repr(e))
        finally:
            c.close()
        with lock:
            results.extend(out)

    threads = [threading.Thread(target=run, args=(total // conns + (1 if i < total % conns else 0),))
               for i in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, "requests failed: %s" % errors[:3]
    assert len(results) == total
    return results


def align(window):
    """Sleeps until just after the next window boundary; returns the reset (end) of the window that then begins."""
    now = time.time()
    time.sleep(window - now % window + 0.05)  # the wait is the test: the window is wall-clock time
    return (int(time.time()) // window + 1) * window


def admitted(results):
    return sum(1 for status, _, _ in results if status != 429)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_exactly_limit_requests_pass_per_window_across_workers(request, tmp_path, gateways, provider):
    redis = provider_redis(request, provider)
    limit, window = 25, 6
    gw = start_gateway(gateways, tmp_path, provider, redis, workers=4, rate_limit=limit, rate_window_s=window,
                       monthly_quota=100000)
    reset = align(window)
    t0 = time.time()
    results = burst(gw.port, gw.key, 300, 12)
    took = time.time() - t0
    assert time.time() < reset, "the burst took %.2f s and crossed the window end: the count means nothing" % took
    assert admitted(results) == limit, "expected exactly %d admitted, got %d" % (limit, admitted(results))
    for status, headers, body in results:
        if status == 429:
            assert json.loads(body)["error"]["code"] == "rate_limited"
            assert headers["x-ratelimit-limit"] == str(limit)
            assert headers["x-ratelimit-remaining"] == "0"
            assert headers["x-ratelimit-reset"] == str(reset)
            assert 1 <= int(headers["retry-after"]) <= window
        else:
            assert (status, json.loads(body)["error"]["code"]) == (503, "service_unavailable"), body
            assert headers["x-ratelimit-limit"] == str(limit)
            assert 0 <= int(headers["x-ratelimit-remaining"]) < limit
    remaining = sorted(int(h["x-ratelimit-remaining"]) for s, h, _ in results if s != 429)
    assert remaining == list(range(limit)), "each admitted request saw its own remaining count"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_window_resets_at_the_announced_time_with_exact_headers(request, tmp_path, gateways, provider):
    redis = provider_redis(request, provider)
    window = 3
    gw = start_gateway(gateways, tmp_path, provider, redis, workers=2, rate_limit=2, rate_window_s=window,
                       monthly_quota=100000)
    reset = align(window)
    first, second = get(gw), get(gw)
    assert (first.status != 429, second.status != 429) == (True, True)
    assert [first.headers["x-ratelimit-remaining"], second.headers["x-ratelimit-remaining"]] == ["1", "0"]
    for r in (first, second):
        assert_admitted(r)
        assert r.headers["x-ratelimit-limit"] == "2"
        assert r.headers["x-ratelimit-reset"] == str(reset)
    before = int(time.time())
    third = get(gw)
    after = int(time.time())
    assert third.status == 429
    assert code_of(third) == "rate_limited"
    assert third.headers["x-ratelimit-reset"] == str(reset)
    assert third.headers["x-ratelimit-remaining"] == "0"
    retry_after = int(third.headers["retry-after"])
    assert retry_after >= 1
    assert retry_after in (max(1, reset - before), max(1, reset - after)), (retry_after, reset, before)
    # Exactly at the reset the next window admits again.
    time.sleep(max(0.0, reset - time.time()) + 0.05)  # the wait is the test: the window ends at its reset
    fourth = get(gw)
    assert fourth.status != 429
    assert fourth.headers["x-ratelimit-remaining"] == "1"
    assert fourth.headers["x-ratelimit-reset"] == str(reset + window)


QUOTA_KEY = "vts_test_key_quota"


def quota_stack(tmp_path, redis, quota, window=3600, **gateway_env):
    """The whole service (fetchers and fake platform: answers are real 200s, 404s and 502s) with the key QUOTA_KEY
    of rate 100 per window and this monthly quota, the redis provider when redis is given. Keeps clear of a window
    boundary so that one test's requests share one window."""
    env = dict(BASE_ENV, VTS_JOB_TIMEOUT_MS="30000", VTS_STATE_DIR=str(tmp_path / "state"))
    env.update({"VTS_" + k.upper(): str(v) for k, v in gateway_env.items()})
    if redis is not None:
        env["VTS_REDIS_URL"] = redis.url
    if time.time() % window > window - 20:
        align(window)
    return Stack(tmp_path, gateway_env=env, fetchers=1, keys=[("quota", QUOTA_KEY, "active", 100, window, quota)])


def quota_get(stack, video_id=None, query=None):
    return stack.get(video_id, query=query, key=QUOTA_KEY)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_only_answers_with_a_transcript_consume_quota(request, tmp_path, provider):
    stack = quota_stack(tmp_path, provider_redis(request, provider), quota=3)
    try:
        answers = [quota_get(stack, query="video_id=short"), quota_get(stack, "liveOffline"),
                   quota_get(stack, "http500xxx1")]
        assert [r.status for r in answers] == [400, 404, 502]
        answers += [quota_get(stack, "capJson3xx1") for _ in range(3)]
        assert [r.status for r in answers[3:]] == [200, 200, 200]
        refused = quota_get(stack, "capJson3xx1")
        assert refused.status == 429
        assert code_of(refused) == "quota_exceeded"
        # X-RateLimit-Remaining is the window's remainder, and the window counts every request, refused or not.
        answers.append(refused)
        assert [r.headers["x-ratelimit-remaining"] for r in answers] == ["99", "98", "97", "96", "95", "94", "93"]
        assert {r.headers["x-ratelimit-limit"] for r in answers} == {"100"}
        assert "retry-after" not in refused.headers
        assert quota_get(stack, query="video_id=short").status == 429
        # The 400, the 404 and the 502 gave their units back; the 200s and the 429s had none to give.
        assert metric(stack.metrics(), "vts_ratelimit_quota_refunds_total") == 3
    finally:
        stack.close()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_quota_survives_a_gateway_restart(request, tmp_path, provider):
    stack = quota_stack(tmp_path, provider_redis(request, provider), quota=5)
    try:
        assert [quota_get(stack, "capJson3xx1").status for _ in range(3)] == [200, 200, 200]
        # At once: the memory provider's last usage reaches the disk with the shutdown snapshot.
        stack.gateway.stop(signal.SIGTERM)
        if provider == "memory":
            snapshot = tmp_path / "state" / "quota.snapshot"
            assert snapshot.exists(), "no quota snapshot after shutdown"
        stack.gateway.start()
        stack.wait_ready(1)
        assert [quota_get(stack, "capJson3xx1").status for _ in range(2)] == [200, 200]
        last = quota_get(stack, "capJson3xx1")
        assert last.status == 429
        assert code_of(last) == "quota_exceeded"
    finally:
        stack.close()


def month_counts(redis, key):
    """(What Redis counted itself of the key's month, the sum of what gateways' fallbacks wrote back for it).

    The month's counter holds both; the fallback hash holds each gateway's count (and, under "<id>:seq", its number).
    """
    base = "vts:rl:{%s}:q:%s" % (hashlib.sha256(key.encode()).hexdigest()[:16], time.strftime("%Y%m", time.gmtime()))
    total = redis.command("EVAL", "return tonumber(redis.call('GET', KEYS[1]) or '0')", "1", base)
    fallback = redis.command("EVAL", "local s, h = 0, redis.call('HGETALL', KEYS[1]) for i = 1, #h, 2 do "
                             "if not h[i]:find(':seq$') then s = s + tonumber(h[i + 1]) end end return s", "1",
                             base + ":owed")
    return int(total[1:]) - int(fallback[1:]), int(fallback[1:])


def assert_quota_spent_after_redis_returns(stack, redis, fallback_count):
    """Once Redis answers again (it then holds what the fallback counted), no request of QUOTA_KEY is admitted."""
    def written_back():
        r = quota_get(stack, "capJson3xx1")
        assert r.status == 429, "admitted past the quota after Redis returned: %s" % r
        return month_counts(redis, QUOTA_KEY)[1] == fallback_count
    assert wait_for(written_back, 5), "the fallback's counts never reached Redis: %s" % (month_counts(redis, QUOTA_KEY),)
    refused = [quota_get(stack, "capJson3xx1") for _ in range(5)]
    assert [(r.status, code_of(r)) for r in refused] == [(429, "quota_exceeded")] * 5


def test_quota_stays_exact_through_a_redis_freeze(tmp_path, redis):
    stack = quota_stack(tmp_path, redis, quota=10)
    try:
        assert [quota_get(stack, "capJson3xx1").status for _ in range(5)] == [200] * 5
        assert month_counts(redis, QUOTA_KEY) == (5, 0)
        redis.freeze()
        try:
            assert [quota_get(stack, "capJson3xx1").status for _ in range(5)] == [200] * 5
            assert quota_get(stack, "capJson3xx1").status == 429
        finally:
            redis.thaw()
        # Written back once, under this gateway's id. (A worker's request in flight when Redis froze timed out but
        # still runs when Redis thaws: Redis's own count may exceed 5 by one a worker, billed, never served, twice.)
        assert_quota_spent_after_redis_returns(stack, redis, 5)
    finally:
        stack.close()


def test_quota_stays_exact_through_a_redis_stop_and_restart_with_its_data(tmp_path, gateways):
    from redisserver import Redis
    (tmp_path / "redis").mkdir()
    redis = Redis(data_dir=tmp_path / "redis")
    redis.start()
    stack = None
    try:
        stack = quota_stack(tmp_path, redis, quota=10)
        assert [quota_get(stack, "capJson3xx1").status for _ in range(5)] == [200] * 5
        redis.stop()
        assert [quota_get(stack, "capJson3xx1").status for _ in range(5)] == [200] * 5
        assert quota_get(stack, "capJson3xx1").status == 429
        redis.start()
        assert month_counts(redis, QUOTA_KEY) == (5, 0), "the restarted Redis lost its data"
        assert_quota_spent_after_redis_returns(stack, redis, 5)
        # Exact: Redis's five and the fallback's five, nothing counted twice.
        assert month_counts(redis, QUOTA_KEY) == (5, 5)
    finally:
        if stack is not None:
            stack.close()
        redis.stop()


def test_unwritable_state_dir_stops_the_gateway_naming_the_variable(tmp_path):
    build = os.environ.get("VTS_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
    binary = os.path.join(build, "bin", "vts-gateway")
    if not os.path.exists(binary):
        pytest.skip("no gateway binary at %s" % binary)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    env = dict(os.environ, VTS_LISTEN="127.0.0.1:%d" % free_port(), VTS_JOBS_URL="tcp://127.0.0.1:%d" % free_port(),
               VTS_METRICS_LISTEN="", VTS_WORKERS="1", VTS_KEYS_FILE=str(tmp_path / "keys.db"),
               VTS_STATE_DIR=str(blocker / "state"))
    env.pop("VTS_REDIS_URL", None)
    proc = subprocess.Popen([binary], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("the gateway kept running with an unusable VTS_STATE_DIR")
    assert proc.returncode != 0
    assert b"VTS_STATE_DIR" in err, err[-500:]


def test_redis_stopped_fail_closed_answers_503_fast(tmp_path, gateways, redis):
    gw = start_gateway(gateways, tmp_path, "redis", redis, workers=4, rate_limit=100, rate_window_s=60,
                       rate_limit_fail_closed="true")
    assert_redis_answers(gw)
    redis.stop()
    assert_unavailable_within(gw, 0.1, 12)


def test_redis_stopped_fail_open_serves_with_the_memory_limiter(tmp_path, gateways, redis):
    window = 30
    if time.time() % window > window - 8:
        align(window)
    gw = start_gateway(gateways, tmp_path, "redis", redis, workers=4, rate_limit=4, rate_window_s=window,
                       monthly_quota=1000)
    assert [get(gw).status != 429 for _ in range(2)] == [True, True]
    redis.stop()
    # The fallback continues from what Redis counted: two more, then the limit.
    served = [get(gw) for _ in range(2)]
    for r in served:
        assert_admitted(r)
    assert [r.headers["x-ratelimit-remaining"] for r in served] == ["1", "0"]
    limited = get(gw)
    assert limited.status == 429
    assert code_of(limited) == "rate_limited"


def test_frozen_redis_fail_closed_answers_503_within_the_timeout(tmp_path, gateways, redis):
    gw = start_gateway(gateways, tmp_path, "redis", redis, workers=4, rate_limit=100, rate_window_s=60,
                       rate_limit_fail_closed="true")
    assert_redis_answers(gw)
    redis.freeze()
    try:
        assert_unavailable_within(gw, STORE_FAULT_BUDGET_S, 8)
    finally:
        redis.thaw()
    # Thawed: back to normal.
    wait_for(lambda: not refused(get(gw)), 2)
    assert_redis_answers(gw)


def test_frozen_redis_fail_open_serves_within_the_timeout(tmp_path, gateways, redis):
    gw = start_gateway(gateways, tmp_path, "redis", redis, workers=4, rate_limit=100, rate_window_s=60)
    assert_redis_answers(gw)
    redis.freeze()
    try:
        for _ in range(8):
            t0 = time.monotonic()
            r = get(gw)
            took = time.monotonic() - t0
            assert_admitted(r)
            assert r.headers["x-ratelimit-limit"] == "100"
            assert took < STORE_FAULT_BUDGET_S + 0.15, "answer took %.0f ms with Redis frozen" % (took * 1000)
    finally:
        redis.thaw()


def test_redis_restart_is_back_to_normal_within_one_second(tmp_path, gateways, redis):
    gw = start_gateway(gateways, tmp_path, "redis", redis, workers=4, rate_limit=1000, rate_window_s=60,
                       rate_limit_fail_closed="true")
    assert_redis_answers(gw)
    redis.stop()
    assert code_of(get(gw)) == "rate_limit_unavailable"
    time.sleep(1.5)  # the wait is the test: every worker's reconnect backoff reaches its ceiling
    redis.start()  # same port, empty data and script cache
    time.sleep(1.0)  # the wait is the test: back to normal within one second of the restart
    codes = [code_of(get(gw)) for _ in range(16)]
    assert "rate_limit_unavailable" not in codes, "still unavailable 1 s after the restart: %s" % codes
    # Each worker's session said the outage and its end in the one wording, naming its user: a down line once per
    # reason (not once per reconnect attempt), and the back line last, after a down line.
    said = {}
    for rec in gw.log_records():
        if rec.get("msg") in ("redis unavailable", "redis available again") and rec.get("user") == "limiter":
            said.setdefault(rec["pid"], []).append((rec["msg"], rec.get("error")))
    assert said, gw.log_text()[-2000:]
    for pid, lines in said.items():
        assert lines[0][0] == "redis unavailable", (pid, lines)
        assert lines[-1] == ("redis available again", None), (pid, lines)
        for before, after in zip(lines, lines[1:]):
            assert before != after, (pid, lines)


def test_script_flush_is_recovered_without_a_fault(tmp_path, gateways, redis):
    gw = start_gateway(gateways, tmp_path, "redis", redis, workers=2, rate_limit=1000, rate_window_s=60,
                       rate_limit_fail_closed="true")
    assert_redis_answers(gw)
    assert redis.command("SCRIPT", "FLUSH") == b"+OK"
    answers = [get(gw) for _ in range(8)]
    assert not any(refused(r) for r in answers), [(r.status, code_of(r)) for r in answers]


def test_two_gateways_sharing_one_redis_share_one_limit(tmp_path, gateways, redis):
    limit, window = 10, 6
    one = start_gateway(gateways, tmp_path / "one", "redis", redis, workers=2, rate_limit=limit,
                        rate_window_s=window, monthly_quota=100000)
    two = start_gateway(gateways, tmp_path / "two", "redis", redis, workers=2, rate_limit=limit,
                        rate_window_s=window, monthly_quota=100000, keys_file=one.keys_file)
    align(window)
    statuses = []
    for _ in range(limit):
        statuses.append(get(one, one.key).status)
        statuses.append(get(two, one.key).status)
    assert sum(1 for s in statuses if s != 429) == limit, statuses


if __name__ == "__main__":
    raise SystemExit(pytest.main([os.path.abspath(__file__), "-q"]))
