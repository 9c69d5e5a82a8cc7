"""The speech fallback in a real fetcher (`vts-fetcher --once-speech`) against the fake platform serving audio made
at test time from real read speech: the embedded engine's transcript, the openai engine against a fake server, and
each failure outcome from a real scenario."""
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402
import speechdata  # noqa: E402

OK, NOT_AVAILABLE, UPSTREAM_FAILED, INTERNAL = 1, 2, 3, 4
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def audio(tmp_path_factory):
    return speechdata.make(str(tmp_path_factory.mktemp("speech")))


@pytest.fixture(scope="module")
def upstream(audio):
    fake = harness.FakeUpstream(audio.upstream_args())
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def speech_server():
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "fake_speech", "fake_transcribe.py"),
                             "--port", "0", "--key", "sk-test"], stdout=subprocess.PIPE, stdin=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    assert line.startswith("READY "), "fake speech server did not start: %r" % line
    yield "http://127.0.0.1:%s" % line.split()[1]
    proc.kill()
    proc.wait(timeout=5)


def once_speech(upstream, video, **env):
    full = dict(os.environ, VTS_UPSTREAM_URL=upstream.url, VTS_LOG_LEVEL="warn", ASAN_OPTIONS="detect_leaks=0",
                VTS_SPEECH_TIMEOUT_MS="120000")
    full.update({k: str(v) for k, v in env.items()})
    proc = subprocess.run([harness.fetcher_binary(), "--once-speech", video], env=full, capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    last = [line for line in proc.stderr.splitlines() if line.startswith("outcome=")][-1]
    fields = dict(part.split("=", 1) for part in last.split(" "))
    return int(fields["outcome"]), fields["detail"], proc.stdout


def test_embedded_engine_transcribes_real_speech_within_40_percent_wer(upstream, audio):
    outcome, detail, body = once_speech(upstream, "noCaptions1")
    assert outcome == OK, detail
    doc = json.loads(body)
    assert list(doc) == ["language", "source", "text", "segments"]
    assert doc["source"] == "speech" and doc["language"] == "en"
    wer = speechdata.word_error_rate(audio.reference, doc["text"])
    assert wer <= 0.40, "word error rate %.1f%%: %r" % (wer * 100, doc["text"])
    speechdata.check_segments(doc["segments"], audio.duration_ms / 1000)
    assert doc["text"] == " ".join(s["text"] for s in doc["segments"])


def test_audio_is_downloaded_in_ranged_chunks_from_the_smallest_format(upstream):
    upstream.reset()
    outcome, detail, _ = once_speech(upstream, "noCaptions1")
    assert outcome == OK, detail
    reqs = upstream.stats()["requests"]
    assert reqs.get("GET /videoplayback noCaptions1", 0) >= 1
    assert reqs["POST /youtubei/v1/player noCaptions1"] == 1


def test_no_audio_format_is_not_available(upstream):
    assert once_speech(upstream, "noAudio0001")[:2] == (NOT_AVAILABLE, "no_audio_format")


def test_audio_longer_than_the_cap_is_not_available_without_download(upstream):
    upstream.reset()
    outcome, detail, _ = once_speech(upstream, "speechLong1", VTS_SPEECH_MAX_SECONDS=600)
    assert outcome == NOT_AVAILABLE, detail
    assert "GET /videoplayback speechLong1" not in upstream.stats()["requests"]


def test_refused_audio_download_is_upstream_failure(upstream):
    outcome, detail, _ = once_speech(upstream, "audio403xx1")
    assert (outcome, detail) == (UPSTREAM_FAILED, "audio_http_403")


def test_unplayable_video_is_not_available_for_speech_too(upstream):
    assert once_speech(upstream, "unavail0001")[0] == NOT_AVAILABLE


def test_openai_engine_segments_come_from_the_speech_server(upstream, speech_server):
    outcome, detail, body = once_speech(upstream, "noCaptions1", VTS_SPEECH_ENGINE="openai",
                                        VTS_SPEECH_URL=speech_server, VTS_SPEECH_API_KEY="sk-test")
    assert outcome == OK, detail
    doc = json.loads(body)
    assert doc["source"] == "speech" and doc["language"] == "en"
    assert doc["text"] == "hello world"
    assert doc["segments"] == [{"text": "hello", "start": 0, "duration": 1.25},
                               {"text": "world", "start": 1.25, "duration": 1.25}]


def test_failing_speech_server_is_upstream_failure(upstream, speech_server):
    outcome, detail, _ = once_speech(upstream, "noCaptions1", VTS_SPEECH_ENGINE="openai",
                                     VTS_SPEECH_URL=speech_server + "/500", VTS_SPEECH_API_KEY="sk-test")
    assert (outcome, detail) == (UPSTREAM_FAILED, "speech_http_500")
