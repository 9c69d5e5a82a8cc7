"""PO tokens (VTS_POT_PROVIDER_URL): the whole service against the fake platform and the fake PO-token provider
(tests/fake_upstream/fake_pot_provider.py, the bgutil HTTP protocol). A caption track whose exp list holds xpe or xpv
is fetched with a token bound to its video (pot, potc=1, c=<client>), the token is kept for its lifetime, and a
provider that hangs, refuses or is down gives no token: the job goes on as without a provider, reason po_token, and
vts_pot_provider_failures_total counts each failure. The provider URL's credentials reach no log line."""
import os
import subprocess
import sys
import time

import pytest

from conftest import shared_fixtures
from stack import Stack
from vtsproc import log_records, metric, wait_for, wait_metric

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402

UPSTREAM_FAILED = (b'{"error":{"code":"upstream_transcript_failed","message":'
                   b'"The video platform did not return the transcript."}}')
POT_FAILURES = "vts_pot_provider_failures_total"
MARGIN_S = 2.0  # VTS_POT_EXPIRY_MARGIN_MS (common/limits.h): a kept token is not used this close to its expiry


@pytest.fixture
def provider():
    p = harness.FakePotProvider()
    yield p
    p.close()


def pot_stack(tmp_path, provider_url, upstream_args=(), **fetcher_env):
    """The service with one fetcher process (one token cache) asking provider_url for tokens."""
    env = {"VTS_POT_PROVIDER_URL": provider_url} if provider_url else {}
    env.update(fetcher_env)
    return Stack(tmp_path, fetcher_env=env, fetchers=1, upstream_args=upstream_args)


def transcript(stack, video, lang):
    return stack.get(query="video_id=%s&language=%s" % (video, lang))


def caption_queries(stack, video):
    return stack.upstream.stats()["timedtext"].get(video, [])


def job_lines(stack, video):
    """The dispatcher's "job finished" lines of video."""
    return [r for r in stack.gateway.log_records() if r.get("msg") == "job finished" and r.get("video_id") == video]


def fetcher_records(stack, msg):
    return [r for r in log_records(stack.fetchers.log_text()) if r.get("msg") == msg]


def test_a_token_goes_only_on_the_track_that_needs_it(tmp_path, provider):
    stack = pot_stack(tmp_path, provider.url)
    try:
        # The German track has no exp list: no token is asked for, none is sent.
        r = transcript(stack, "potMixed001", "de")
        assert r.status == 200, r
        assert r.json()["language"] == "de"
        assert provider.stats()["requests"] == 0
        (de,) = caption_queries(stack, "potMixed001")
        assert "pot" not in de and "potc" not in de and "c" not in de, de
        # The English track's exp list holds xpe: one token bound to the video, on its URL with the reply's client.
        r = transcript(stack, "potMixed001", "en")
        assert r.status == 200, r
        assert r.json()["language"] == "en"
        assert [s["text"] for s in r.json()["segments"]] == ["Hello and welcome", "to the fake platform"]
        st = provider.stats()
        assert st["requests"] == 1
        assert st["bodies"] == [{"content_binding": "potMixed001"}]
        assert st["paths"] == ["/get_pot"]
        assert st["content_types"] == ["application/json"]
        (issued,) = st["issued"]
        en = caption_queries(stack, "potMixed001")[1]
        assert (en["lang"], en["exp"], en["pot"], en["potc"], en["c"]) == (
            ["en"], ["xpo,xpe"], [issued["token"]], ["1"], ["VISIONOS"]), en
        assert metric(stack.metrics(), POT_FAILURES) == 0
    finally:
        stack.close()


@pytest.mark.parametrize("with_provider", [True, False])
def test_the_captured_track_that_wants_a_token_is_served_only_with_one(tmp_path, provider, with_provider):
    # The captured reply's tracks (youtube_po_token_required): only its manual "en" track has exp=xpe.
    captures = shared_fixtures("youtube-transcript-api")
    stack = pot_stack(tmp_path, provider.url if with_provider else None, upstream_args=("--captures", captures))
    try:
        r = transcript(stack, "realPoTokn1", "en")
        assert r.status == 200, r
        (query,) = caption_queries(stack, "realPoTokn1")
        if with_provider:
            # The manual track, with a token for the video.
            assert [s["text"] for s in r.json()["segments"]] == ["Hello and welcome", "to the fake platform"]
            assert (query["exp"], query["pot"], query["potc"]) == (["xpe"], [provider.stats()["issued"][0]["token"]],
                                                                   ["1"]), query
            assert "kind" not in query
        else:
            # As before: the manual track is skipped, the automatic one (no exp) served without a token.
            assert [s["text"] for s in r.json()["segments"]] == ["hello and welcome",
                                                                 "to the fake platform automatic"]
            assert query["kind"] == ["asr"] and "pot" not in query and "exp" not in query, query
            assert provider.stats()["requests"] == 0
    finally:
        stack.close()


def test_a_token_is_reused_within_its_lifetime(tmp_path, provider):
    stack = pot_stack(tmp_path, provider.url)
    try:
        # Three tracks of one video, each wanting a token, three jobs: the provider is asked once.
        for lang in ("en", "de", "es"):
            r = transcript(stack, "potLangs001", lang)
            assert r.status == 200, r
            assert r.json()["language"] == lang
        st = provider.stats()
        assert st["requests"] == 1, st
        token = st["issued"][0]["token"]
        queries = caption_queries(stack, "potLangs001")
        assert [(q["lang"], q["pot"], q["potc"]) for q in queries] == [
            (["en"], [token], ["1"]), (["de"], [token], ["1"]), (["es"], [token], ["1"])]
    finally:
        stack.close()


def test_a_token_is_asked_again_after_its_expiry(tmp_path):
    provider = harness.FakePotProvider(["--ttl-s", "4"])
    stack = pot_stack(tmp_path, provider.url)
    try:
        assert transcript(stack, "potLangs001", "en").status == 200
        (first,) = provider.stats()["issued"]
        # The token is kept until MARGIN_S before its expiry: wait for the clock to pass that point.
        assert wait_for(lambda: time.time() * 1000 >= first["expires_ms"] - MARGIN_S * 1000 + 50, timeout=10)
        r = transcript(stack, "potLangs001", "de")
        assert r.status == 200, r
        st = provider.stats()
        assert st["requests"] == 2, st
        second = st["issued"][1]
        assert second["token"] != first["token"]
        assert [q["pot"] for q in caption_queries(stack, "potLangs001")] == [[first["token"]], [second["token"]]]
    finally:
        stack.close()
        provider.close()


def test_a_token_the_platform_refuses_is_asked_again(tmp_path, provider):
    # The provider's tokens are refused by the platform (an empty 200 for the track): none of them is kept.
    provider.set_mode("unbound")
    stack = pot_stack(tmp_path, provider.url)
    try:
        r = transcript(stack, "potLangs001", "en")
        assert r.status == 502, r
        refused = [i["token"] for i in provider.stats()["issued"]]
        assert len(refused) >= 1
        assert [q["pot"] for q in caption_queries(stack, "potLangs001")] == [[t] for t in refused]
        assert len(fetcher_records(stack, "po token refused by the platform: forgotten")) == len(refused)
        # Once the provider's tokens are good again, the next job asks for one instead of reusing a refused one.
        provider.set_mode("ok")
        r = transcript(stack, "potLangs001", "en")
        assert r.status == 200, r
        assert r.json()["language"] == "en"
        st = provider.stats()
        assert st["requests"] == len(refused) + 1, st
        good = st["issued"][-1]["token"]
        assert good not in refused
        assert caption_queries(stack, "potLangs001")[-1]["pot"] == [good]
    finally:
        stack.close()


def test_a_hanging_provider_costs_no_more_than_its_deadline(tmp_path, provider):
    provider.set_mode("hang")
    pot_ms, job_ms = 800, 20000
    stack = pot_stack(tmp_path, provider.url, VTS_POT_TIMEOUT_MS=pot_ms, VTS_JOB_TIMEOUT_MS=job_ms)
    try:
        r = transcript(stack, "poToken0001", "en")
        assert r.status == 502, r
        assert r.body == UPSTREAM_FAILED
        (job,) = job_lines(stack, "poToken0001")
        assert (job["status"], job["reason"]) == (502, "po_token"), job
        assert job["fetch_ms"] < job_ms, job
        # The provider was asked once (the next client did not wait on it again) and cost its own deadline.
        assert provider.stats()["requests"] == 1
        (failure,) = fetcher_records(stack, "po token provider gave no token")
        assert failure["detail"] == "pot_timeout", failure
        assert pot_ms <= failure["dur_ms"] < pot_ms + 1500, failure
        wait_metric(stack.gateway.metrics_port, POT_FAILURES, 1)
    finally:
        stack.close()


def test_a_refusing_provider_falls_through_with_reason_po_token(tmp_path, provider):
    provider.set_mode("refuse")
    stack = pot_stack(tmp_path, provider.url)
    try:
        # Every track wants a token: 502, reason po_token, as without a provider.
        r = transcript(stack, "poToken0001", "en")
        assert r.status == 502, r
        assert r.body == UPSTREAM_FAILED
        # VISIONOS's track wants one, ANDROID's does not: the next client serves it, as without a provider.
        r = transcript(stack, "visionXpv01", "en")
        assert r.status == 200, r
        assert [q["c"] for q in caption_queries(stack, "visionXpv01")] == [["ANDROID"]]
        r = transcript(stack, "poToken0001", "en")
        assert r.status == 502, r
        assert [(j["status"], j["reason"]) for j in job_lines(stack, "poToken0001")] == [(502, "po_token")] * 2
        assert provider.stats()["requests"] == 3
        wait_metric(stack.gateway.metrics_port, POT_FAILURES, 3)
        assert [f["detail"] for f in fetcher_records(stack, "po token provider gave no token")] == ["pot_refused"] * 3
        assert caption_queries(stack, "poToken0001") == []
    finally:
        stack.close()


def test_provider_credentials_reach_no_log_line(tmp_path):
    user, password, key = "potuser7", "S3cretPass9", "Q5ecretKey3"
    provider = harness.FakePotProvider(["--user", user, "--password", password, "--query-key", key])
    url = "http://%s:%s@127.0.0.1:%d/?key=%s" % (user, password, provider.port, key)
    stack = pot_stack(tmp_path, url, VTS_LOG_LEVEL="debug")
    try:
        # The credentials reach the provider (it answers only with them)...
        r = transcript(stack, "potMixed001", "en")
        assert r.status == 200, r
        st = provider.stats()
        assert (st["authorized"], st["paths"]) == ([True], ["/get_pot?key=" + key])
        token = st["issued"][0]["token"]
        # ... and a refusal and a provider that is down are logged by its origin alone.
        provider.set_mode("refuse")
        assert transcript(stack, "poToken0001", "en").status == 502
        provider.close()
        assert transcript(stack, "visionXpv01", "en").status == 200
        origin = "http://127.0.0.1:%d" % provider.port
        failures = fetcher_records(stack, "po token provider gave no token")
        assert [(f["detail"], f["provider"]) for f in failures] == [("pot_refused", origin), ("pot_unreachable", origin)]
        assert [r["provider"] for r in fetcher_records(stack, "po token provider")] == [origin]
        wait_metric(stack.gateway.metrics_port, POT_FAILURES, 2)
        logs = stack.fetchers.log_text() + stack.gateway.log_text()
        for secret in (user, password, key, token):
            leaked = [line for line in logs.splitlines() if secret in line]
            assert leaked == [], "%s in the logs: %s" % (secret, leaked[:3])
    finally:
        stack.close()
        provider.close()


def test_a_bad_provider_url_stops_the_start_without_its_secret():
    env = harness.fetcher_env("http://127.0.0.1:9", VTS_POT_PROVIDER_URL="gopher://potuser7:S3cretPass9@host/")
    p = subprocess.run([harness.fetcher_binary(), "--once", "poToken0001"], env=env, capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 2, p
    assert p.stderr == ("vts-fetcher: VTS_POT_PROVIDER_URL: invalid value: expected an http:// or https:// URL with "
                        "a host and no fragment\n"), p.stderr


def test_without_a_provider_tracks_that_need_a_token_are_skipped_as_before(tmp_path, provider):
    stack = pot_stack(tmp_path, None)
    try:
        r = transcript(stack, "poToken0001", "en")
        assert r.status == 502, r
        assert [(j["status"], j["reason"]) for j in job_lines(stack, "poToken0001")] == [(502, "po_token")]
        # The English track wants a token: the German one, which does not, is served instead.
        r = transcript(stack, "potMixed001", "en")
        assert r.status == 200, r
        assert r.json()["language"] == "de"
        assert [q["lang"] for q in caption_queries(stack, "potMixed001")] == [["de"]]
        assert all("pot" not in q for q in caption_queries(stack, "potMixed001"))
        assert provider.stats()["requests"] == 0
        assert metric(stack.metrics(), POT_FAILURES) == 0
        assert fetcher_records(stack, "po token provider") == []
    finally:
        stack.close()
