"""A ration is not an absence: the platform's ration of an address, a client version it retired, a reply for another
video and a throttled translation each end as 502 upstream_transcript_failed (never 404, never cached, in the
dispatcher or in Redis), counted under their own kind, with Retry-After when every egress (or every egress's
translations) rests. The fake platform rations like the real one, per source address, with replies shaped from the
real captures; each case asserts the exact requests it saw."""

import json
import os
import subprocess
import time

import pytest

from stack import Stack, harness, metric
from vtsproc import wait_metric

FIXTURES = os.environ.get("VTS_SHARED_FIXTURES", os.path.join(harness.ROOT, "..", "shared", "fixtures"))
CAPTURES = os.path.join(FIXTURES, "youtube-transcript-api")
PLAYER = "POST /youtubei/v1/player "
TIMEDTEXT = "GET /api/timedtext "
UPSTREAM_FAILED = (b'{"error":{"code":"upstream_transcript_failed",'
                   b'"message":"The video platform did not return the transcript."}}')
REST_MS = 60000
DIRECT, PROXY_A, PROXY_B = "127.0.0.1", "127.0.0.2", "127.0.0.3"


@pytest.fixture(autouse=True)
def captures_present():
    if not os.path.isdir(CAPTURES):
        pytest.skip("captures not found (set VTS_SHARED_FIXTURES): the platform's replies are shaped from them")


def ration_stack(tmp_path, *upstream_args, fetcher_env=None, gateway_env=None):
    """One fetcher process (its jobs in order, so the egress each takes is known) and the fake platform with args."""
    env = {"VTS_PROXY_REST_MS": REST_MS}
    env.update(fetcher_env or {})
    return Stack(tmp_path, upstream_args=["--captures", CAPTURES, *upstream_args], fetcher_env=env,
                 gateway_env=gateway_env, fetchers=1)


def assert_502(r, retry_after=None):
    assert r.status == 502, r
    assert r.body == UPSTREAM_FAILED
    assert r.headers.get("retry-after") == retry_after, r.headers


def fetcher_logs(stack, msg):
    return [json.loads(line) for line in stack.fetchers.log_text().splitlines()
            if line.startswith("{") and json.loads(line)["msg"].startswith(msg)]


def metrics_once(stack, name, value, **labels):
    """The /metrics text once name{labels} reads value (the dispatcher publishes its counters after each event)."""
    wait_metric(stack.gateway.metrics_port, name, value, **labels)
    return stack.metrics()


def test_rationed_direct_route_is_502_never_cached_and_rests_with_retry_after(tmp_path):
    s = ration_stack(tmp_path, "--ration-limit", "2")
    try:
        assert s.get("benchRat001").status == 200
        assert s.get("benchRat002").status == 200
        # Past two player requests in the window: both clients rationed; one block, the route does not rest yet, and
        # the 502 says to come back in a second.
        assert_502(s.get("benchRat003"), retry_after="1")
        # Not cached: asked again, the platform is asked again; a second block in a row rests the route 60 s.
        assert_502(s.get("benchRat003"), retry_after="60")
        # Resting, a job still tries (the platform may be back); a third block doubles the rest.
        assert_502(s.get("benchRat004"), retry_after="120")
        stats = s.upstream.stats()
        text = metrics_once(s, "vts_upstream_outcomes_total", 3, kind="rationed")
        resting = fetcher_logs(s, "proxy resting after blocks")
    finally:
        s.close()
    assert stats["requests"] == {PLAYER + "benchRat001": 1, TIMEDTEXT + "benchRat001": 1,
                                 PLAYER + "benchRat002": 1, TIMEDTEXT + "benchRat002": 1,
                                 PLAYER + "benchRat003": 4, PLAYER + "benchRat004": 2}
    assert stats["sources"] == {DIRECT: 10}
    assert stats["rationed"] == {DIRECT: 6}
    assert metric(text, "vts_upstream_outcomes_total", kind="rationed") == 3
    assert metric(text, "vts_upstream_outcomes_total", kind="ok") == 3  # the warm-up and two
    assert metric(text, "vts_upstream_outcomes_total", kind="not_available") == 0
    assert metric(text, "vts_upstream_proxy_blocks_total", proxy="0") == 6
    assert metric(text, "vts_upstream_client_blocks_total", client="VISIONOS") == 3
    assert metric(text, "vts_upstream_client_blocks_total", client="ANDROID") == 3
    assert [(e["proxy"], e["rest_ms"]) for e in resting] == [(0, REST_MS), (0, 2 * REST_MS)]


def test_rationed_proxies_move_the_job_then_rest_and_retry_after_says_when_the_first_is_back(tmp_path):
    proxies = [harness.EgressProxy(PROXY_A), harness.EgressProxy(PROXY_B)]
    try:
        s = ration_stack(tmp_path, "--ration-limit", "1",
                         fetcher_env={"VTS_UPSTREAM_PROXY": ",".join(p.url() for p in proxies)})
        try:
            # One player request per address in the window: one video through each proxy.
            assert s.get("benchPrx001").status == 200
            assert s.get("benchPrx002").status == 200
            # Rationed on one proxy, the same client moves to the other, then the next client there: one block each
            # (no rest yet: a second).
            assert_502(s.get("benchPrx003"), retry_after="1")
            # The second block in a row of each: both rest, and the answer says when the first comes back.
            assert_502(s.get("benchPrx004"), retry_after="60")
            assert_502(s.get("benchPrx005"), retry_after="120")
            stats = s.upstream.stats()
            text = metrics_once(s, "vts_upstream_outcomes_total", 3, kind="rationed")
        finally:
            s.close()
    finally:
        for p in proxies:
            p.close()
    assert stats["requests"] == {PLAYER + "benchPrx001": 1, TIMEDTEXT + "benchPrx001": 1,
                                 PLAYER + "benchPrx002": 1, TIMEDTEXT + "benchPrx002": 1,
                                 PLAYER + "benchPrx003": 3, PLAYER + "benchPrx004": 3, PLAYER + "benchPrx005": 3}
    # Nothing through the direct route; each proxy served once and was rationed on every later request.
    assert set(stats["sources"]) == {PROXY_A, PROXY_B}
    assert sum(stats["rationed"].values()) == 9
    assert sorted(stats["sources"][a] - stats["rationed"][a] for a in (PROXY_A, PROXY_B)) == [2, 2]
    assert metric(text, "vts_upstream_proxy_blocks_total", proxy="1") + \
        metric(text, "vts_upstream_proxy_blocks_total", proxy="2") == 9
    assert metric(text, "vts_upstream_proxy_blocks_total", proxy="0") == 0
    assert metric(text, "vts_upstream_outcomes_total", kind="rationed") == 3


def test_a_ration_is_not_cached_in_redis(tmp_path, redis):
    s = ration_stack(tmp_path, "--ration-limit", "1", gateway_env={"VTS_REDIS_URL": redis.url})
    try:
        assert s.get("benchRdis01").status == 200
        assert_502(s.get("benchRdis02"), retry_after="1")
        assert_502(s.get("benchRdis02"), retry_after="60")
        requests = s.requests()
    finally:
        s.close()
    assert requests == {PLAYER + "benchRdis01": 1, TIMEDTEXT + "benchRdis01": 1, PLAYER + "benchRdis02": 4}
    # The transcript went to Redis for the other gateways; the ration did not.
    assert redis.command("KEYS", "*benchRdis01*") != b"*0"
    assert redis.command("KEYS", "*benchRdis02*") == b"*0"


def test_a_reply_for_another_video_is_a_block_never_used_nor_cached(tmp_path):
    s = ration_stack(tmp_path, "--wrong-video", "benchWrong1")
    try:
        assert_502(s.get("benchWrong1"), retry_after="1")
        assert_502(s.get("benchWrong1"), retry_after="60")
        # A served job ends the route's rest: the next block is the first of a new row again.
        assert s.get("capJson3xx1").status == 200
        assert_502(s.get("benchWrong1"), retry_after="1")
        stats = s.upstream.stats()
        text = metrics_once(s, "vts_upstream_outcomes_total", 3, kind="wrong_video")
        blocked = fetcher_logs(s, "player client blocked")
    finally:
        s.close()
    # Every client was answered with the other video's reply; none of its caption tracks was ever asked for.
    assert stats["requests"] == {PLAYER + "benchWrong1": 6, PLAYER + "capJson3xx1": 1, TIMEDTEXT + "capJson3xx1": 1}
    assert list(stats["timedtext"]) == ["capJson3xx1"]
    assert metric(text, "vts_upstream_outcomes_total", kind="wrong_video") == 3
    assert metric(text, "vts_upstream_proxy_blocks_total", proxy="0") == 6
    assert {(e["reason"], e["detail"]) for e in blocked} == {("wrong_video", "wrong_video")}
    assert len(blocked) == 6


def test_a_retired_client_falls_through_and_is_never_a_block(tmp_path):
    fake = harness.FakeUpstream(["--captures", CAPTURES, "--outdated-client", "VISIONOS"])
    try:
        fake.reset()
        proc = subprocess.run([harness.fetcher_binary(), "--once", "capJson3xx1"],
                                      env=harness.fetcher_env(fake.url), capture_output=True, text=True, timeout=30)
        stats = fake.stats()
    finally:
        fake.close()
    assert proc.returncode == 0, proc.stderr
    assert "outcome=1 lang=en detail=ok" in proc.stderr
    assert json.loads(proc.stdout)["text"] == "Hello and welcome to the fake platform"
    assert stats["requests"] == {PLAYER + "capJson3xx1": 2, TIMEDTEXT + "capJson3xx1": 1}
    assert stats["clients"]["capJson3xx1"] == ["VISIONOS:1.02", "ANDROID:21.26.364"]
    logs = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    assert [(e["client"], e["reason"]) for e in logs if e["msg"] == "player client refused"] == [
        ("VISIONOS:1.02", "client_outdated")]
    assert [e["client"] for e in logs if e["msg"].startswith("client profile retired")] == ["VISIONOS:1.02"]
    assert not [e for e in logs if e["msg"] == "player client blocked"]


def test_a_retired_client_as_the_last_word_is_502_not_cached_and_warned_once_a_minute(tmp_path):
    s = ration_stack(tmp_path, "--outdated-client", "ANDROID")
    try:
        assert s.get("capJson3xx1").status == 200  # VISIONOS serves it: ANDROID is never asked
        # VISIONOS may not play it, ANDROID is retired: not an absence of the video.
        assert_502(s.get("visionUnpl1"))
        assert_502(s.get("visionUnpl1"))
        stats = s.upstream.stats()
        text = metrics_once(s, "vts_upstream_outcomes_total", 2, kind="client_outdated")
        warned = fetcher_logs(s, "client profile retired")
    finally:
        s.close()
    assert stats["requests"] == {PLAYER + "capJson3xx1": 1, TIMEDTEXT + "capJson3xx1": 1, PLAYER + "visionUnpl1": 4}
    assert stats["clients"]["visionUnpl1"] == ["VISIONOS:1.02", "ANDROID:21.26.364"] * 2
    assert metric(text, "vts_upstream_outcomes_total", kind="client_outdated") == 2
    assert metric(text, "vts_upstream_outcomes_total", kind="not_available") == 0
    assert metric(text, "vts_upstream_client_blocks_total", client="ANDROID") == 0
    assert metric(text, "vts_upstream_proxy_blocks_total", proxy="0") == 0
    assert [(e["level"], e["client"]) for e in warned] == [("warn", "ANDROID:21.26.364")]


def tlangs(stats, video):
    return [q.get("tlang", []) for q in stats["timedtext"].get(video, [])]


def test_a_throttled_translation_rests_translations_only_with_retry_after(tmp_path):
    s = ration_stack(tmp_path, "--throttle-tlang", "0")
    try:
        # Into the track's own language: the track itself, no tlang asked, nothing throttled.
        own = s.get(query="video_id=multiLang01&language=en&translate=en")
        assert own.status == 200, own
        assert own.json()["language"] == "en"
        assert own.json()["text"] == "Hello and welcome to the fake platform"
        s.upstream.reset()
        t0 = time.monotonic()
        assert_502(s.get(query="video_id=capJson3xx1&translate=fr"), retry_after="60")
        after_throttle = s.upstream.stats()
        # Untranslated jobs keep the route.
        plain = s.get("capJson3xx1")
        assert plain.status == 200, plain
        # Translations rest: the platform is not asked, and the answer says when they come back.
        again = s.get(query="video_id=capJson3xx1&translate=es")
        elapsed = time.monotonic() - t0
        assert again.status == 502 and again.body == UPSTREAM_FAILED
        assert 60 - int(elapsed) - 1 <= int(again.headers["retry-after"]) <= 60, again.headers
        stats = s.upstream.stats()
        text = metrics_once(s, "vts_upstream_outcomes_total", 2, kind="translation_throttled")
        resting = fetcher_logs(s, "translations resting after a throttle")
    finally:
        s.close()
    assert after_throttle["requests"] == {PLAYER + "capJson3xx1": 1, TIMEDTEXT + "capJson3xx1": 1}
    assert after_throttle["tlang_throttled"] == {DIRECT: 1}
    # The untranslated job used the player reply the throttled one read (kept by the dispatcher).
    assert stats["requests"] == {PLAYER + "capJson3xx1": 1, TIMEDTEXT + "capJson3xx1": 2}
    assert tlangs(stats, "capJson3xx1") == [["fr"], []]
    assert metric(text, "vts_upstream_outcomes_total", kind="translation_throttled") == 2
    assert metric(text, "vts_upstream_proxy_blocks_total", proxy="0") == 0  # the route itself never rested
    assert [(e["proxy"], e["rest_ms"]) for e in resting] == [(0, REST_MS)]


def test_an_empty_translation_is_a_throttle_and_never_cached(tmp_path):
    s = ration_stack(tmp_path, "--throttle-tlang", "0", "--tlang-throttle-mode", "empty",
                     fetcher_env={"VTS_PROXY_REST_MS": 100})
    try:
        assert_502(s.get(query="video_id=capJson3xx1&translate=fr"), retry_after="1")
        # Asked again until the rest is over and the platform is asked (and throttles) again: never a cached answer.
        deadline = time.monotonic() + 10
        answers = []
        while len(tlangs(s.upstream.stats(), "capJson3xx1")) < 2 and time.monotonic() < deadline:
            answers.append(s.get(query="video_id=capJson3xx1&translate=fr"))
        stats = s.upstream.stats()
        resting = fetcher_logs(s, "translations resting after a throttle")
    finally:
        s.close()
    assert tlangs(stats, "capJson3xx1") == [["fr"], ["fr"]]
    # The second try used the player reply the first one read (kept by the dispatcher).
    assert stats["requests"] == {PLAYER + "capJson3xx1": 1, TIMEDTEXT + "capJson3xx1": 2}
    assert stats["tlang_throttled"] == {DIRECT: 2}
    assert answers and all(a.status == 502 and a.headers.get("retry-after") == "1" for a in answers)
    # The second throttle in a row doubles the translations' rest.
    assert [e["rest_ms"] for e in resting] == [100, 200]
