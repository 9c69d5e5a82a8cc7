"""Transcripts end to end through the real binaries: gateway (workers, dispatcher), a fetcher pool and the fake
platform. Each row of ARCHITECTURE.md's outcome table comes from a real scenario; coalescing, the cache, a killed
fetcher and a hanging platform are measured from outside."""
import json
import os
import signal
import threading
import time
import urllib.parse

import pytest

from stack import Stack, metric
from vtsproc import wait_for


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    s = Stack(tmp_path_factory.mktemp("e2e"), gateway_env={"VTS_JOB_TIMEOUT_MS": "4000"})
    yield s
    s.close()


def error_code(resp):
    return resp.json()["error"]["code"]


def test_json3_captions_return_the_exact_public_body(stack):
    r = stack.get("capJson3xx1")
    assert r.status == 200, r
    assert r.body == (b'{"language":"en","source":"captions","text":"Hello and welcome to the fake platform",'
                      b'"segments":[{"text":"Hello and welcome","start":0.12,"duration":2.4},'
                      b'{"text":"to the fake platform","start":2.52,"duration":3}]}')
    assert r.headers["content-type"] == "application/json"
    for h in ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"):
        assert h in r.headers


@pytest.mark.parametrize("video,text", [
    ("capSrv3xxx1", "hello and welcome to the fake platform automatic"),
    ("capSrv1xxx1", "It's fish & chips is bold"),
    ("consentOk01", "Hello and welcome to the fake platform"),
    ("redirOkxxx1", "Hello and welcome to the fake platform"),
    ("clientRefus", "Hello and welcome to the fake platform"),
])
def test_each_caption_shape_and_flow_returns_200(stack, video, text):
    r = stack.get(video)
    assert r.status == 200, r
    assert r.json()["text"] == text
    assert r.json()["source"] == "captions"


@pytest.mark.parametrize("query,language,first", [
    ("video_id=multiLang01&language=pt-BR", "pt-BR", "Olá e bem-vindo"),
    ("video_id=multiLang01&lang=pt", "pt-BR", "Olá e bem-vindo"),
    ("video_id=multiLang01&language=en", "en", "Hello and welcome"),
    ("video_id=multiLang01", "de", "Hallo und willkommen"),
    ("video_id=multiLang01&language=fr", "de", "Hallo und willkommen"),
])
def test_track_choice_and_the_language_actually_returned(stack, query, language, first):
    r = stack.get(query=query)
    assert r.status == 200, r
    assert r.json()["language"] == language
    assert r.json()["segments"][0]["text"] == first


def test_video_url_resolves_to_the_same_transcript(stack):
    by_id = stack.get("capJson3xx1")
    url = urllib.parse.quote("https://youtu.be/capJson3xx1?t=42", safe="")
    by_url = stack.get(query="video_url=" + url)
    assert by_url.status == 200 and by_url.body == by_id.body


@pytest.mark.parametrize("video,message", [
    ("ageRestr001", "The video is age-restricted."),
    ("unavail0001", "No accessible transcript was found for this video."),
    ("unplayable1", "The video is not available in this region."),
    ("liveOffline", "The live stream is not archived yet."),
    ("noCaptions1", "No accessible transcript was found for this video."),
])
def test_unavailable_videos_are_404_transcript_not_available(stack, video, message):
    r = stack.get(video)
    assert r.status == 404, r
    assert r.body == b'{"error":{"code":"transcript_not_available","message":"%s"}}' % message.encode()


@pytest.mark.parametrize("video", ["recaptcha01", "http429xxx1", "http500xxx1", "botCheck001", "consentBad1",
                                   "poToken0001", "malformed01", "oversizePl1", "redirEvil01", "truncated01"])
def test_platform_refusals_are_502_upstream_transcript_failed(stack, video):
    r = stack.get(video)
    assert r.status == 502, r
    assert r.body == b'{"error":{"code":"upstream_transcript_failed","message":"The video platform did not return the transcript."}}'


def test_upstream_failures_are_not_cached(stack):
    stack.upstream.reset()
    assert stack.get("http500xxx1").status == 502
    assert stack.get("http500xxx1").status == 502
    assert stack.requests()["POST /youtubei/v1/player http500xxx1"] == 4  # two jobs, two clients each


def test_not_available_is_cached_briefly(stack):
    # An id no other test asks for: the fake answers any unknown id as an unavailable video.
    stack.upstream.reset()
    assert stack.get("zzNegCache1").status == 404
    assert stack.get("zzNegCache1").status == 404
    # Each of the two default clients was asked once (the answer is final only when they agree), then the cache.
    assert stack.requests() == {"POST /youtubei/v1/player zzNegCache1": 2}


def test_a_cached_transcript_makes_no_upstream_request(stack):
    assert stack.get("benchCache1").status == 200
    stack.upstream.reset()
    for _ in range(5):
        assert stack.get("benchCache1").status == 200
    assert stack.requests() == {}


def test_one_job_makes_each_upstream_request_once(stack):
    stack.upstream.reset()
    assert stack.get("benchOnce01").status == 200
    assert stack.requests() == {"POST /youtubei/v1/player benchOnce01": 1, "GET /api/timedtext benchOnce01": 1}


def test_100_concurrent_requests_for_one_video_make_one_player_request(stack):
    stack.upstream.reset()
    results = []
    lock = threading.Lock()

    def one():
        r = stack.get("slowPlayer1", timeout=30)
        with lock:
            results.append((r.status, r.body))

    threads = [threading.Thread(target=one) for _ in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 100
    assert {s for s, _ in results} == {200}
    assert len({b for _, b in results}) == 1
    assert stack.requests()["POST /youtubei/v1/player slowPlayer1"] == 1


def test_1500_segment_transcript_round_trips_exactly(stack):
    r = stack.get("long1500seg")
    assert r.status == 200
    doc = r.json()
    assert len(doc["segments"]) == 1500
    for i, seg in enumerate(doc["segments"]):
        assert seg == {"text": "line %d" % (i + 1), "start": i * 2, "duration": 1.9}
    assert doc["text"] == " ".join("line %d" % (i + 1) for i in range(1500))


def test_request_id_travels_to_the_fetcher_logs(stack):
    r = stack.get("benchTrace1", headers={"X-Request-Id": "e2e-trace-0001"})
    assert r.status == 200 and r.headers["x-request-id"] == "e2e-trace-0001"
    lines = wait_for(lambda: [json.loads(l) for l in stack.fetchers.log_text().splitlines() if "e2e-trace-0001" in l], 3)
    if not lines:
        pytest.fail("no fetcher log line carries the request id")
    assert all(l["request_id"] == "e2e-trace-0001" for l in lines)


def test_hanging_platform_is_502_at_the_deadline_and_the_pool_recovers(stack):
    t0 = time.monotonic()
    r = stack.get("hangPlayer1", timeout=30)
    elapsed = time.monotonic() - t0
    assert r.status == 502, r
    assert 3.5 <= elapsed <= 8, "answered after %.2f s with a 4 s job deadline" % elapsed
    assert stack.get("benchAfter1").status == 200


def test_kill9_of_the_fetcher_holding_a_job_is_500_at_once_and_the_pool_is_whole_again(tmp_path):
    s = Stack(tmp_path, fetchers=1, gateway_env={"VTS_JOB_TIMEOUT_MS": "20000"})
    try:
        holder = s.fetchers.child_pids()[0]
        box = {}

        def ask():
            box["r"] = s.get("hangPlayer1", timeout=30)
            box["t"] = time.monotonic()

        t = threading.Thread(target=ask)
        t.start()
        assert wait_for(lambda: "POST /youtubei/v1/player hangPlayer1" in s.requests(), 10, interval=0.005), \
            "the job never reached the platform"
        killed_at = time.monotonic()
        os.kill(holder, signal.SIGKILL)
        t.join(30)
        assert box["r"].status == 500, box["r"]
        assert box["r"].json()["error"]["code"] == "transcript_fetch_failed"
        print("500 after the kill: %.1f ms" % ((box["t"] - killed_at) * 1000))
        assert box["t"] - killed_at < 0.1, "500 came %.3f s after the kill" % (box["t"] - killed_at)
        # The pool is whole again: a new process serves the next job.
        wait_for(lambda: s.fetchers.child_pids() and s.fetchers.child_pids()[0] != holder, 1.5)
        assert s.fetchers.child_pids() and s.fetchers.child_pids()[0] != holder
        assert s.get("benchKill01").status == 200
        assert s.requests()["POST /youtubei/v1/player hangPlayer1"] == 1, "the job must not run twice"
    finally:
        s.close()


def test_dispatcher_metrics_move_with_cache_jobs_and_outcomes(stack):
    before = stack.metrics()
    assert metric(before, "vts_fetchers_connected") == 2
    assert stack.get("benchMetric").status == 200   # miss: a job
    assert stack.get("benchMetric").status == 200   # hit (worker or dispatcher cache)
    assert stack.get("http429xxx1").status == 502

    def settled():
        # The dispatcher publishes its counters after each event: the last one, the 502's job, frees its fetcher.
        m = stack.metrics()
        moved = metric(m, "vts_upstream_outcomes_total", kind="http_429") - \
            metric(before, "vts_upstream_outcomes_total", kind="http_429")
        return m if moved == 1 and metric(m, "vts_fetchers_idle") == 2 and metric(m, "vts_jobs_in_flight") == 0 else None

    after = wait_for(settled, 5) or stack.metrics()
    assert metric(after, "vts_cache_misses_total") - metric(before, "vts_cache_misses_total") == 2
    hits = (metric(after, "vts_cache_hits_total") + metric(after, "vts_cache_l1_hits_total")) - \
        (metric(before, "vts_cache_hits_total") + metric(before, "vts_cache_l1_hits_total"))
    assert hits == 1
    assert metric(after, "vts_jobs_total", kind="captions") - metric(before, "vts_jobs_total", kind="captions") == 2
    assert metric(after, "vts_upstream_outcomes_total", kind="ok") - \
        metric(before, "vts_upstream_outcomes_total", kind="ok") == 1
    assert metric(after, "vts_upstream_outcomes_total", kind="http_429") - \
        metric(before, "vts_upstream_outcomes_total", kind="http_429") == 1
    assert metric(after, "vts_fetchers_idle") == 2 and metric(after, "vts_jobs_in_flight") == 0
