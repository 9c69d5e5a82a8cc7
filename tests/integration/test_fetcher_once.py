"""`vts-fetcher --once` against the fake platform: one scenario per test, asserting the outcome, the language, the
detail, the body and exactly which upstream requests the job made (none repeated)."""

import json
import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402
from conftest import shared_fixtures  # noqa: E402

OK, NOT_AVAILABLE, UPSTREAM_FAILED, INTERNAL, NO_CAPTIONS = 1, 2, 3, 4, 5
DEFAULT_CLIENTS = ["VISIONOS:1.02", "ANDROID:21.26.364"]
PAGE_CLIENT = "WEB:2.20260708.00.00"  # the built-in client that takes the watch page flow
PLAYER = "POST /youtubei/v1/player "
WATCH = "GET /watch "
TIMEDTEXT = "GET /api/timedtext "


@pytest.fixture(scope="module")
def upstream():
    fake = harness.FakeUpstream()
    yield fake
    fake.close()


class Run:
    def __init__(self, proc, elapsed, stats):
        self.returncode = proc.returncode
        self.stderr = proc.stderr
        self.stdout = proc.stdout
        self.elapsed = elapsed
        self.stats = stats
        last = [line for line in proc.stderr.splitlines() if line.startswith("outcome=")]
        assert last, "no outcome line on stderr:\n" + proc.stderr
        fields = dict(part.split("=", 1) for part in last[-1].split(" "))
        self.outcome = int(fields["outcome"])
        self.lang = fields["lang"]
        self.detail = fields["detail"]

    def body(self):
        return json.loads(self.stdout)

    def requests(self):
        return self.stats["requests"]


def run_once(upstream, video, lang=None, timeout=30, **env):
    upstream.reset()
    args = [harness.fetcher_binary(), "--once", video] + ([lang] if lang else [])
    t0 = time.monotonic()
    proc = subprocess.run(args, env=harness.fetcher_env(upstream.url, **env), capture_output=True, text=True,
                          timeout=timeout)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, "exit %d:\n%s" % (proc.returncode, proc.stderr)
    return Run(proc, elapsed, upstream.stats())


def segments(body):
    return [(s["text"], round(s["start"], 3), round(s["duration"], 3)) for s in body["segments"]]


# Captions found.

def test_json3_track_becomes_public_transcript(upstream):
    r = run_once(upstream, "capJson3xx1")
    assert (r.outcome, r.lang, r.detail) == (OK, "en", "ok")
    assert r.body() == {"language": "en", "source": "captions", "text": "Hello and welcome to the fake platform",
                        "segments": [{"text": "Hello and welcome", "start": 0.12, "duration": 2.4},
                                     {"text": "to the fake platform", "start": 2.52, "duration": 3}]}
    assert r.requests() == {PLAYER + "capJson3xx1": 1, TIMEDTEXT + "capJson3xx1": 1}


def test_timedtext_asked_as_json3_on_configured_origin_with_signed_params_kept(upstream):
    r = run_once(upstream, "capJson3xx1")
    (query,) = r.stats["timedtext"]["capJson3xx1"]
    assert query["fmt"] == ["json3"], "the track's fmt=srv3 must be replaced, not repeated"
    assert query["lang"] == ["en"]
    assert query["signature"][0].startswith("0A1B2C3D")
    assert query["sparams"] == ["ip,ipbits,expire,v,ei,caps,opi,xoaf"]


def test_srv3_body_is_accepted_when_json3_was_asked(upstream):
    r = run_once(upstream, "capSrv3xxx1")
    assert (r.outcome, r.lang, r.detail) == (OK, "en", "ok")
    assert r.body()["text"] == "hello and welcome to the fake platform automatic"
    assert segments(r.body()) == [("hello and welcome", 0.12, 2.4), ("to the fake platform automatic", 2.52, 3.0)]


def test_srv1_body_is_decoded_twice_and_stripped_of_tags(upstream):
    r = run_once(upstream, "capSrv1xxx1")
    assert (r.outcome, r.lang, r.detail) == (OK, "en", "ok")
    assert segments(r.body()) == [("It's fish & chips", 1.2, 3.4), ("is bold", 4.6, 2.0)]


@pytest.mark.parametrize("lang,want_lang,want_text", [
    ("en", "en", "Hello and welcome to the fake platform"),
    ("pt-BR", "pt-BR", "Olá e bem-vindo à plataforma falsa"),
    ("pt", "pt-BR", "Olá e bem-vindo à plataforma falsa"),
    ("fr", "de", "Hallo und willkommen auf der falschen Plattform"),
    (None, "de", "Hallo und willkommen auf der falschen Plattform"),
])
def test_track_choice_reports_the_language_returned(upstream, lang, want_lang, want_text):
    r = run_once(upstream, "multiLang01", lang)
    assert (r.outcome, r.lang, r.detail) == (OK, want_lang, "ok")
    assert r.body()["language"] == want_lang
    assert r.body()["text"] == want_text
    (query,) = r.stats["timedtext"]["multiLang01"]
    assert query["lang"] == [want_lang]
    assert "kind" not in query, "a manual track exists: the asr one must not be chosen"


def test_1500_segments_all_returned(upstream):
    r = run_once(upstream, "long1500seg")
    assert (r.outcome, r.lang, r.detail) == (OK, "en", "ok")
    segs = r.body()["segments"]
    assert len(segs) == 1500
    assert (segs[0]["text"], segs[0]["start"]) == ("line 1", 0)
    assert (segs[-1]["text"], segs[-1]["start"], segs[-1]["duration"]) == ("line 1500", 2998, 1.9)


def test_redirect_within_platform_hosts_is_followed(upstream):
    r = run_once(upstream, "redirOkxxx1")
    assert (r.outcome, r.lang, r.detail) == (OK, "en", "ok")
    assert r.requests() == {PLAYER + "redirOkxxx1": 1, TIMEDTEXT + "redirOkxxx1": 2}


# Clients, watch page, consent.

def test_first_client_refused_then_second_client_succeeds(upstream):
    r = run_once(upstream, "clientRefus")
    assert (r.outcome, r.lang, r.detail) == (OK, "en", "ok")
    assert r.stats["clients"]["clientRefus"] == DEFAULT_CLIENTS
    assert r.requests() == {PLAYER + "clientRefus": 2, TIMEDTEXT + "clientRefus": 1}


def test_page_client_sends_the_page_key_and_visitor_data(upstream):
    r = run_once(upstream, "clientRefus", VTS_INNERTUBE_CLIENTS="VISIONOS,WEB")
    assert (r.outcome, r.lang, r.detail) == (OK, "en", "ok")
    assert r.stats["clients"]["clientRefus"] == ["VISIONOS:1.02", PAGE_CLIENT]
    assert r.stats["player_keys"]["clientRefus"] == ["AIzaSyFakeKeyForTests0123456789abcdefgh"]
    assert r.stats["player_visitor"]["clientRefus"] == [True]
    assert r.requests() == {PLAYER + "clientRefus": 2, WATCH + "clientRefus": 1, TIMEDTEXT + "clientRefus": 1}


def test_client_without_page_needs_fetches_no_watch_page(upstream):
    r = run_once(upstream, "capJson3xx1", VTS_INNERTUBE_CLIENTS="IOS:19.45.4")
    assert (r.outcome, r.detail) == (OK, "ok")
    assert r.stats["clients"]["capJson3xx1"] == ["IOS:19.45.4"]
    assert WATCH + "capJson3xx1" not in r.requests()


def test_consent_wall_is_answered_once_with_its_v_value(upstream):
    r = run_once(upstream, "consentOk01", VTS_INNERTUBE_CLIENTS="WEB")
    assert (r.outcome, r.lang, r.detail) == (OK, "en", "ok")
    cookies = r.stats["cookies"]["consentOk01"]
    assert len(cookies) == 2 and cookies[0] == ""
    assert "CONSENT=YES+cb.20250115-07-p0.en+FX+412" in cookies[1]
    assert r.requests() == {WATCH + "consentOk01": 2, PLAYER + "consentOk01": 1, TIMEDTEXT + "consentOk01": 1}


# Upstream failures: (behaviour, video, environment, detail, exactly the requests made).
PAGE_ONLY = {"VTS_INNERTUBE_CLIENTS": "WEB"}
PAGE_FIRST = {"VTS_INNERTUBE_CLIENTS": "WEB,ANDROID"}
# Every refusal another client may not share falls through: with the two default clients, two player requests.
FAILURES = [
    ("consent_wall_without_v", "consentBad1", PAGE_ONLY, "consent", {WATCH: 1}),
    ("recaptcha_page", "recaptcha01", PAGE_ONLY, "recaptcha", {WATCH: 1}),
    ("recaptcha_page_then_429_for_the_next_client", "recaptcha01", PAGE_FIRST, "http_429", {WATCH: 1, PLAYER: 1}),
    ("http_429_from_every_client", "http429xxx1", {}, "http_429", {PLAYER: 2}),
    ("http_500_from_every_client", "http500xxx1", {}, "http_500", {PLAYER: 2}),
    ("bot_check_from_every_client", "botCheck001", {}, "bot_check", {PLAYER: 2}),
    ("every_track_needs_po_token", "poToken0001", {}, "po_token", {PLAYER: 2}),
    ("slow_player_past_deadline_tries_no_other_client", "slowPlayer1", {"VTS_JOB_TIMEOUT_MS": 700}, "timeout",
     {PLAYER: 1}),
    ("truncated_caption_body_for_every_client", "truncated01", {}, "truncated", {PLAYER: 2, TIMEDTEXT: 2}),
    ("player_reply_past_the_cap", "oversizePl1", {}, "too_large", {PLAYER: 2}),
    ("chunked_caption_body_past_the_cap", "oversizeCap", {}, "too_large", {PLAYER: 2, TIMEDTEXT: 2}),
    ("malformed_player_json", "malformed01", {}, "bad_player_reply", {PLAYER: 2}),
    ("redirect_to_foreign_host_not_followed", "redirEvil01", {}, "bad_redirect", {PLAYER: 2}),
    ("redirect_loop_stops_after_three_hops", "redirLoop01", {}, "too_many_redirects", {PLAYER: 8}),
]


@pytest.mark.parametrize("video,env,detail,requests", [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES])
def test_upstream_failure_is_reported_with_its_reason(upstream, video, env, detail, requests):
    r = run_once(upstream, video, **env)
    assert (r.outcome, r.lang, r.detail) == (UPSTREAM_FAILED, "", detail)
    assert r.stdout == ""
    assert r.requests() == {kind + video: n for kind, n in requests.items()}
    if requests.get(PLAYER) == 2:
        assert r.stats["clients"][video] == DEFAULT_CLIENTS


# Not available, no captions.

@pytest.mark.parametrize("video,detail", [
    ("ageRestr001", "login_required"),
    ("unavail0001", "unavailable"),
    ("unplayable1", "unplayable"),
    ("liveOffline", "live_offline"),
])
def test_unplayable_videos_are_not_available_once_every_client_agrees(upstream, video, detail):
    r = run_once(upstream, video)
    assert (r.outcome, r.lang, r.detail) == (NOT_AVAILABLE, "", detail)
    assert r.stdout == ""
    assert r.requests() == {PLAYER + video: 2}
    assert r.stats["clients"][video] == DEFAULT_CLIENTS


def test_playable_video_without_captions_is_no_captions_once_every_client_agrees(upstream):
    r = run_once(upstream, "noCaptions1")
    assert (r.outcome, r.lang, r.detail) == (NO_CAPTIONS, "", "no_captions")
    assert r.stdout == ""
    assert r.requests() == {PLAYER + "noCaptions1": 2}


# Broken, slow and hostile upstream.

def test_slow_player_within_deadline_succeeds(upstream):
    r = run_once(upstream, "slowPlayer1", VTS_JOB_TIMEOUT_MS=10000)
    assert (r.outcome, r.lang, r.detail) == (OK, "en", "ok")
    assert r.elapsed >= 1.5


def test_hanging_player_is_cut_at_the_job_deadline(upstream):
    r = run_once(upstream, "hangPlayer1", VTS_JOB_TIMEOUT_MS=1000)
    assert (r.outcome, r.lang, r.detail) == (UPSTREAM_FAILED, "", "timeout")
    assert 0.9 <= r.elapsed < 2.9, "took %.2f s for a 1 s deadline" % r.elapsed
    assert r.requests() == {PLAYER + "hangPlayer1": 1}


def test_upstream_not_listening_is_upstream_failure():
    port = harness.free_port()
    proc = subprocess.run([harness.fetcher_binary(), "--once", "capJson3xx1"],
                          env=harness.fetcher_env("http://127.0.0.1:%d" % port), capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0
    assert proc.stderr.splitlines()[-1] == "outcome=3 lang= detail=network"
    # A network failure is its own kind, and the log line carries curl's own words for it.
    failed = [json.loads(line) for line in proc.stderr.splitlines()[:-1]
              if json.loads(line).get("msg") == "upstream request failed"]
    assert len(failed) == 2 and all(f["reason"] == "network" for f in failed)
    assert all("Failed to connect to 127.0.0.1 port %d" % port in f["error"] for f in failed), failed


def test_logs_never_carry_query_strings(upstream):
    r = run_once(upstream, "truncated01")
    assert "signature" not in r.stderr and "prettyPrint" not in r.stderr and "AIza" not in r.stderr
    for line in r.stderr.splitlines()[:-1]:
        entry = json.loads(line)
        assert entry["request_id"].startswith("once-")


# Start-up checks.

@pytest.mark.parametrize("env,needle", [
    ({"VTS_INNERTUBE_CLIENTS": "FOO:1.0"}, "VTS_INNERTUBE_CLIENTS"),
    ({"VTS_INNERTUBE_CLIENTS": "ANDROID:20.10.38,ANDROID:20.10.38"}, "VTS_INNERTUBE_CLIENTS"),
    ({"VTS_INNERTUBE_CLIENTS": "ANDROID:x"}, "VTS_INNERTUBE_CLIENTS"),
    ({"VTS_UPSTREAM_URL": "http://example.com"}, "VTS_UPSTREAM_URL"),
    ({"VTS_UPSTREAM_URL": "https://www.youtube.com/some/path"}, "VTS_UPSTREAM_URL"),
    ({"VTS_UPSTREAM_PROXY": "ftp://proxy:21"}, "VTS_UPSTREAM_PROXY"),
    ({"VTS_UPSTREAM_PROXY": "http://a:1,,http://b:2"}, "VTS_UPSTREAM_PROXY"),
])
def test_bad_settings_stop_the_start_with_one_line(upstream, env, needle):
    full = harness.fetcher_env(upstream.url)
    full.update(env)
    proc = subprocess.run([harness.fetcher_binary(), "--once", "capJson3xx1"], env=full, capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr


@pytest.mark.parametrize("args", [["--once", "short"], ["--once", "capJson3xx1", "en us"], ["--workers", "0"],
                                  ["--bogus"]])
def test_bad_arguments_exit_2(upstream, args):
    proc = subprocess.run([harness.fetcher_binary(), *args], env=harness.fetcher_env(upstream.url),
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stdout == ""


# The real page shapes (captures, read at test time, never copied).

@pytest.fixture(scope="module")
def captures():
    path = shared_fixtures("youtube-transcript-api")
    fake = harness.FakeUpstream(["--captures", path])
    yield fake
    fake.close()


def test_real_watch_page_yields_key_and_visitor_data(captures):
    r = run_once(captures, "realWatch01", VTS_INNERTUBE_CLIENTS="WEB")
    assert (r.outcome, r.lang, r.detail) == (OK, "en", "ok")
    assert r.stats["player_keys"]["realWatch01"] == ["AIzaSyAO_FJ2SlqU8Q4STEHLGCilw_Y9_11qcW8"]
    assert r.stats["player_visitor"]["realWatch01"] == [True]


def test_real_consent_wall_is_answered(captures):
    r = run_once(captures, "realConsent", VTS_INNERTUBE_CLIENTS="WEB")
    assert (r.outcome, r.detail) == (OK, "ok")
    assert "CONSENT=YES+cb.20210328-17-p0.de+FX+119" in r.stats["cookies"]["realConsent"][1]


def test_real_consent_wall_without_v_is_upstream_failure(captures):
    r = run_once(captures, "realConsBad", VTS_INNERTUBE_CLIENTS="WEB")
    assert (r.outcome, r.detail) == (UPSTREAM_FAILED, "consent")


def test_real_recaptcha_page_is_upstream_failure(captures):
    r = run_once(captures, "realRecapt1", VTS_INNERTUBE_CLIENTS="WEB")
    assert (r.outcome, r.detail) == (UPSTREAM_FAILED, "recaptcha")
