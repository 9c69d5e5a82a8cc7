"""The speech fallback through the whole service: a video without captions becomes a speech job in the dispatcher
when VTS_SPEECH_FALLBACK=true, and the answer says source "speech"; with the fallback off it is a 404."""
import time

import pytest

import speechdata
from stack import Stack, metric
from vtsproc import wait_for


@pytest.fixture(scope="module")
def audio(tmp_path_factory):
    return speechdata.make(str(tmp_path_factory.mktemp("audio")))


@pytest.fixture(scope="module")
def speech_stack(tmp_path_factory, audio):
    s = Stack(tmp_path_factory.mktemp("speech-on"), upstream_args=audio.upstream_args(),
              gateway_env={"VTS_SPEECH_FALLBACK": "true", "VTS_SPEECH_TIMEOUT_MS": "120000"})
    yield s
    s.close()


def test_health_says_the_fallback_is_enabled(speech_stack):
    r = speech_stack.gateway.request("GET", "/health")
    assert r.json()["speechFallbackEnabled"] is True


def test_video_without_captions_gets_a_speech_transcript(speech_stack, audio):
    speech_stack.upstream.reset()
    r = speech_stack.get("noCaptions1", timeout=120)
    assert r.status == 200, r
    doc = r.json()
    assert doc["source"] == "speech" and doc["language"] == "en"
    assert speechdata.word_error_rate(audio.reference, doc["text"]) <= 0.40, doc["text"]
    speechdata.check_segments(doc["segments"], audio.duration_ms / 1000)
    reqs = speech_stack.requests()
    # One captions job (both default clients agree: no captions) and one speech job (the first client playable).
    assert reqs["POST /youtubei/v1/player noCaptions1"] == 3
    assert wait_for(lambda: metric(speech_stack.metrics(), "vts_jobs_total", kind="speech") >= 1, 5)


def test_speech_transcript_is_cached_like_captions(speech_stack):
    speech_stack.get("noCaptions1", timeout=120)
    speech_stack.upstream.reset()
    r = speech_stack.get("noCaptions1")
    assert r.status == 200 and r.json()["source"] == "speech"
    assert speech_stack.requests() == {}


@pytest.mark.parametrize("video,status,code", [
    ("noAudio0001", 404, "transcript_not_available"),
    ("speechLong1", 404, "transcript_not_available"),
    ("audio403xx1", 502, "upstream_transcript_failed"),
])
def test_speech_failures_map_to_their_statuses(speech_stack, video, status, code):
    r = speech_stack.get(video, timeout=120)
    assert r.status == status, r
    assert r.json()["error"]["code"] == code


def test_captions_jobs_are_not_starved_by_a_speech_job(speech_stack):
    """With one speech job at a time, caption jobs keep flowing on the other fetcher meanwhile."""
    import threading
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", speech_stack.get(
        "noCaptions1", query="video_id=noCaptions1&language=en", timeout=120)))
    t.start()
    t0 = time.monotonic()
    r = speech_stack.get("benchStarve")
    assert r.status == 200 and time.monotonic() - t0 < 2.0
    t.join(120)
    assert box["r"].status == 200


def test_fallback_off_means_404_for_a_video_without_captions(tmp_path, audio):
    s = Stack(tmp_path, upstream_args=audio.upstream_args())
    try:
        r = s.get("noCaptions1")
        assert r.status == 404 and r.json()["error"]["code"] == "transcript_not_available"
        assert s.gateway.request("GET", "/health").json()["speechFallbackEnabled"] is False
        assert "GET /videoplayback noCaptions1" not in s.requests()
    finally:
        s.close()
