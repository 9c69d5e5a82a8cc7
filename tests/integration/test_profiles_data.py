"""Client profiles that say everything a client sends, through the real fetcher against the fake platform: the exact
requests of every built-in profile (host, path, query, body, headers with visitor data and Origin), a custom wrapped
client from a profile file, bad members refused at start with exact messages, visitor data fetched once per fetcher
and renewed on its schedule, the reel call's refusals, and speech for a video reached through ANDROID_REEL taking its
audio from the next client's reply."""

import json
import os
import re
import subprocess
import sys
import time
import urllib.parse

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402
import speechdata  # noqa: E402
from stack import Stack  # noqa: E402

OK, NOT_AVAILABLE, UPSTREAM_FAILED = 1, 2, 3
PLAYER, REEL, VISITOR = "/youtubei/v1/player", "/youtubei/v1/reel/reel_item_watch", "/youtubei/v1/visitor_id"
API_HOST = "youtubei.googleapis.com"
BROWSER_UA = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
              "Chrome/138.0.0.0 Safari/537.36")
ANDROID_UA = "com.google.android.youtube/21.26.364 (Linux; U; Android 11) gzip"
# The watch page's values (fake_upstream.py), for the WEB client.
PAGE_KEY = "AIzaSyFakeKeyForTests0123456789abcdefgh"
PAGE_VISITOR = "CgtGYWtlVmlzaXRvcijAgICABjIKCgJVUxIEGgAgZA%3D%3D"
CHECKS = {"videoId": "capJson3xx1", "contentCheckOk": True, "racyCheckOk": True}

# ANDROID_REEL as the README writes it: the profile file of the custom clients below starts from it.
REEL_PROFILE = {
    "name": "ANDROID_REEL", "client_name": "ANDROID", "client_id": 3, "version": "21.26.364",
    "user_agent": "com.google.android.youtube/{version} (Linux; U; Android 11) gzip",
    "context": {"clientScreen": "WATCH", "platform": "MOBILE", "osName": "Android", "osVersion": "11",
                "androidSdkVersion": 30, "hl": "en", "gl": "US", "utcOffsetMinutes": 0},
    "context_members": {"request": {"internalExperimentFlags": [], "useSsl": True},
                        "user": {"lockedSafetyMode": False}},
    "headers": {"X-Goog-Api-Format-Version": "2"},
    "host": API_HOST, "path": REEL,
    "query": {"t": "{nonce:12}", "id": "{video_id}", "$fields": "playerResponse"},
    "request_members": {"cpn": "{nonce:16}"},
    "wrapper": {"request": "playerRequest", "reply": "playerResponse",
                "members": {"disablePlayerResponse": False}},
    "visitor_data": "fetch",
}
REEL_CONTEXT = {"clientName": "ANDROID", "clientVersion": "21.26.364", "clientScreen": "WATCH", "platform": "MOBILE",
                "osName": "Android", "osVersion": "11", "androidSdkVersion": 30, "hl": "en", "gl": "US",
                "utcOffsetMinutes": 0}
REEL_CONTEXT_MEMBERS = {"request": {"internalExperimentFlags": [], "useSsl": True}, "user": {"lockedSafetyMode": False}}


@pytest.fixture(scope="module")
def upstream():
    fake = harness.FakeUpstream()
    yield fake
    fake.close()


def run_once(upstream, video, lang=None, timeout=60, **env):
    upstream.reset()
    args = [harness.fetcher_binary(), "--once", video] + ([lang] if lang else [])
    proc = subprocess.run(args, env=harness.fetcher_env(upstream.url, **env),
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, "exit %d:\n%s" % (proc.returncode, proc.stderr)
    last = [line for line in proc.stderr.splitlines() if line.startswith("outcome=")][-1]
    fields = dict(part.split("=", 1) for part in last.split(" "))
    return int(fields["outcome"]), fields["detail"], upstream.stats()


def nonce(value, n):
    """The value, checked to be n characters of the nonce alphabet, as "N" * n."""
    assert re.fullmatch(r"[A-Za-z0-9_-]{%d}" % n, value), "not a nonce of %d: %r" % (n, value)
    return "N" * n


def headers(ua, client_id, version, **more):
    h = {"User-Agent": ua, "Accept": "*/*", "Content-Type": "application/json", "X-YouTube-Client-Name": client_id,
         "X-YouTube-Client-Version": version}
    h.update({k.replace("_", "-"): v for k, v in more.items()})
    return h


def expected_calls(name, origin_host, visitors):
    """The youtubei calls of one capJson3xx1 job of the built-in profile name, as the fake records them."""
    android = {"clientName": "ANDROID", "clientVersion": "21.26.364", "androidSdkVersion": 30, "osName": "Android",
               "osVersion": "11", "platform": "MOBILE", "hl": "en", "gl": "US", "utcOffsetMinutes": 0}
    if name == "VISIONOS":
        ua = ("Mozilla/5.0 (Macintosh; Intel Mac OS X 15_7_3) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/26.0 "
              "Safari/605.1.15")
        client = {"clientName": "VISIONOS", "clientVersion": "1.02", "deviceMake": "Apple",
                  "deviceModel": "RealityDevice17,1", "osName": "visionOS", "osVersion": "26.5.23O471", "hl": "en",
                  "gl": "US", "utcOffsetMinutes": 0, "userAgent": ua}
        return [{"host": origin_host, "path": PLAYER, "query": {"prettyPrint": ["false"]},
                 "body": dict({"context": {"client": client}}, **CHECKS), "headers": headers(ua, "101", "1.02")}]
    if name == "ANDROID":
        client = dict(android, userAgent=ANDROID_UA)
        return [{"host": origin_host, "path": PLAYER, "query": {"prettyPrint": ["false"]},
                 "body": dict({"context": {"client": client}}, **CHECKS), "headers": headers(ANDROID_UA, "3",
                                                                                             "21.26.364")}]
    if name == "IOS":
        ua = "com.google.ios.youtube/21.26.4 (iPhone16,2; U; CPU iOS 18_3_2 like Mac OS X;)"
        client = {"clientName": "IOS", "clientVersion": "21.26.4", "deviceMake": "Apple", "deviceModel": "iPhone16,2",
                  "osName": "iPhone", "osVersion": "18.3.2.22D82", "platform": "MOBILE", "hl": "en", "gl": "US",
                  "utcOffsetMinutes": 0, "userAgent": ua}
        return [{"host": origin_host, "path": PLAYER, "query": {"prettyPrint": ["false"]},
                 "body": dict({"context": {"client": client}}, **CHECKS), "headers": headers(ua, "5", "21.26.4")}]
    if name == "WEB":
        client = {"clientName": "WEB", "clientVersion": "2.20260708.00.00", "platform": "DESKTOP", "hl": "en",
                  "gl": "US", "utcOffsetMinutes": 0, "visitorData": PAGE_VISITOR}
        return [{"host": origin_host, "path": PLAYER, "query": {"prettyPrint": ["false"], "key": [PAGE_KEY]},
                 "body": dict({"context": {"client": client}}, **CHECKS),
                 "headers": headers(BROWSER_UA, "1", "2.20260708.00.00", X_Goog_Visitor_Id=PAGE_VISITOR)}]
    if name == "WEB_EMBEDDED":
        client = {"clientName": "WEB_EMBEDDED_PLAYER", "clientVersion": "2.20260708.00.00", "clientScreen": "EMBED",
                  "platform": "DESKTOP", "hl": "en", "gl": "US", "utcOffsetMinutes": 0}
        third = {"thirdParty": {"embedUrl": "https://www.reddit.com/"}}
        web_headers = {"Origin": "https://www.youtube.com", "Referer": "https://www.reddit.com/"}
        visitor_headers = headers(BROWSER_UA, "56", "2.20260708.00.00")
        visitor_headers.update(web_headers)
        player_headers = headers(BROWSER_UA, "56", "2.20260708.00.00", X_Goog_Visitor_Id=visitors[-1])
        player_headers.update(web_headers)
        return [{"host": origin_host, "path": VISITOR, "query": {"prettyPrint": ["false"]},
                 "body": {"context": dict({"client": client}, **third)}, "headers": visitor_headers},
                {"host": origin_host, "path": PLAYER, "query": {"prettyPrint": ["false"]},
                 "body": dict({"context": dict({"client": dict(client, visitorData=visitors[-1])},
                                               **third)},
                              **CHECKS),
                 "headers": player_headers}]
    assert name == "ANDROID_REEL"
    return [{"host": API_HOST, "path": VISITOR, "query": {"prettyPrint": ["false"]},
             "body": {"context": dict({"client": REEL_CONTEXT}, **REEL_CONTEXT_MEMBERS)},
             "headers": headers(ANDROID_UA, "3", "21.26.364", X_Goog_Api_Format_Version="2")},
            {"host": API_HOST, "path": REEL,
             "query": {"prettyPrint": ["false"], "t": ["N" * 12], "id": ["capJson3xx1"],
                       "$fields": ["playerResponse"]},
             "body": {"context": dict({"client": dict(REEL_CONTEXT, visitorData=visitors[-1])},
                                      **REEL_CONTEXT_MEMBERS),
                      "playerRequest": dict(CHECKS, cpn="N" * 16), "disablePlayerResponse": False},
             "headers": headers(ANDROID_UA, "3", "21.26.364", X_Goog_Visitor_Id=visitors[-1],
                                X_Goog_Api_Format_Version="2")}]


@pytest.mark.parametrize("name", ["VISIONOS", "ANDROID", "ANDROID_REEL", "IOS", "WEB", "WEB_EMBEDDED"])
def test_each_builtin_profile_sends_exactly_its_requests(upstream, name):
    outcome, detail, stats = run_once(upstream, "capJson3xx1", VTS_INNERTUBE_CLIENTS=name)
    assert (outcome, detail) == (OK, "ok")
    calls = stats["calls"]
    for call in calls:
        if call["path"] == REEL:
            call["query"]["t"] = [nonce(call["query"]["t"][0], 12)]
            call["body"]["playerRequest"]["cpn"] = nonce(call["body"]["playerRequest"]["cpn"], 16)
    assert calls == expected_calls(name, "127.0.0.1:%d" % upstream.port, stats["visitors"])
    # The one caption request of the job, whatever the client.
    assert [k for k in stats["requests"] if k.startswith("GET /api/timedtext")] == ["GET /api/timedtext capJson3xx1"]


def profile_file(tmp_path, *profiles):
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps({"profiles": list(profiles)}))
    return str(path)


def custom_reel(name, **changes):
    p = json.loads(json.dumps(REEL_PROFILE))
    p["name"] = name
    for k, v in changes.items():
        if v is None:
            p.pop(k, None)
        else:
            p[k] = v
    return p


def test_a_custom_wrapped_client_from_a_profile_file_serves_transcripts_end_to_end(tmp_path):
    # A client of our own: the reel call with another embedder beside client, a player request member of its own, a
    # local-less fetched visitor renewed hourly, and Origin.
    mine = custom_reel("MY_REEL", version="21.30.100", context_members={
        "thirdParty": {"embedUrl": "https://example.org/page"}, "user": {"lockedSafetyMode": False}},
        request_members={"cpn": "{nonce:16}", "playbackContext": {"contentPlaybackContext": {"vis": 0}}},
        origin="https://www.youtube.com", visitor_renew_s=3600)
    path = profile_file(tmp_path, mine)
    stack = Stack(tmp_path, fetchers=1, fetcher_env={"VTS_CLIENT_PROFILES": path, "VTS_INNERTUBE_CLIENTS": "MY_REEL"})
    try:
        r = stack.get("capJson3xx1")
        stats = stack.upstream.stats()
    finally:
        stack.close()
    assert r.status == 200
    assert json.loads(r.body)["text"] == "Hello and welcome to the fake platform"
    # The warm-up fetched the visitor data: this job used it, with no visitor call of its own.
    assert stats["requests"] == {"POST %s capJson3xx1" % REEL: 1, "GET /api/timedtext capJson3xx1": 1}
    [call] = stats["calls"]
    ua = "com.google.android.youtube/21.30.100 (Linux; U; Android 11) gzip"
    assert call["host"] == API_HOST and call["path"] == REEL
    assert call["headers"] == headers(ua, "3", "21.30.100", X_Goog_Visitor_Id=stats["visitors"][-1],
                                      Origin="https://www.youtube.com", X_Goog_Api_Format_Version="2")
    body = call["body"]
    body["playerRequest"]["cpn"] = nonce(body["playerRequest"]["cpn"], 16)
    assert body == {
        "context": {"client": dict(REEL_CONTEXT, clientVersion="21.30.100", visitorData=stats["visitors"][-1]),
                    "thirdParty": {"embedUrl": "https://example.org/page"}, "user": {"lockedSafetyMode": False}},
        "playerRequest": dict(CHECKS, cpn="N" * 16, playbackContext={"contentPlaybackContext": {"vis": 0}}),
        "disablePlayerResponse": False}


def test_visitor_data_is_fetched_once_per_fetcher_while_fresh(tmp_path):
    path = profile_file(tmp_path, custom_reel("MY_REEL", visitor_renew_s=3600))
    stack = Stack(tmp_path, fetchers=1, fetcher_env={"VTS_CLIENT_PROFILES": path, "VTS_INNERTUBE_CLIENTS": "MY_REEL"})
    try:
        issued_at_start = stack.upstream.stats()["visitors"]
        statuses = [stack.get("bench%06d" % i).status for i in range(5)]
        stats = stack.upstream.stats()
    finally:
        stack.close()
    assert statuses == [200] * 5
    # One visitor call for the fetcher (its warm-up job), none for the five jobs after it.
    assert len(issued_at_start) == 1 and stats["visitors"] == issued_at_start
    assert "POST %s" % VISITOR not in stats["requests"]
    sent = [c["body"]["context"]["client"]["visitorData"] for c in stats["calls"]]
    assert sent == [issued_at_start[0]] * 5


def test_visitor_data_is_renewed_on_its_schedule(tmp_path):
    renew_s = 1
    path = profile_file(tmp_path, custom_reel("MY_REEL", visitor_renew_s=renew_s))
    stack = Stack(tmp_path, fetchers=1, fetcher_env={"VTS_CLIENT_PROFILES": path, "VTS_INNERTUBE_CLIENTS": "MY_REEL"})
    try:
        deadline = time.monotonic() + 20
        n = 0
        while len(stack.upstream.stats()["visitors"]) < 3 and time.monotonic() < deadline:
            assert stack.get("bench%06d" % n).status == 200
            n += 1
            time.sleep(0.1)  # poll interval: jobs until the schedule has renewed the visitor data twice
        stats = stack.upstream.stats()
    finally:
        stack.close()
    visitors, times = stats["visitors"], stats["visitor_times"]
    assert len(visitors) >= 3, "renewed %d times in 20 s" % (len(visitors) - 1)
    # Never renewed before its time (the fake notes when each call arrived, a few ms after it left).
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert all(g >= renew_s - 0.05 for g in gaps), gaps
    # Many jobs, few renewals: each reel call carries the visitor data of the latest visitor call before it.
    reel_calls = [c for c in stats["calls"] if c["path"] == REEL]
    assert len(reel_calls) == n > len(visitors)
    # The visitor calls recorded since the warm-up are the last ones issued; the one before them was in force.
    recorded = sum(1 for c in stats["calls"] if c["path"] == VISITOR)
    at = len(visitors) - recorded - 1
    assert at >= 0
    for call in stats["calls"]:
        if call["path"] == VISITOR:
            at += 1
        else:
            assert call["body"]["context"]["client"]["visitorData"] == visitors[at]
            assert call["headers"]["X-Goog-Visitor-Id"] == visitors[at]
    latest = visitors[at]
    assert latest == visitors[-1]


def test_local_visitor_data_is_made_without_a_visitor_call(upstream, tmp_path):
    local = {"name": "VISIONOS", "client_id": 101, "version": "1.02", "user_agent": "ua",
             "visitor_data": "local"}
    outcome, detail, stats = run_once(upstream, "capJson3xx1", VTS_CLIENT_PROFILES=profile_file(tmp_path, local),
                                      VTS_INNERTUBE_CLIENTS="VISIONOS")
    assert (outcome, detail) == (OK, "ok")
    [call] = stats["calls"]
    assert call["path"] == PLAYER
    visitor = call["headers"]["X-Goog-Visitor-Id"]
    assert re.fullmatch(r"[A-Za-z0-9_-]+(%3D){0,2}", visitor), visitor
    assert call["body"]["context"]["client"]["visitorData"] == visitor
    import base64
    raw = base64.urlsafe_b64decode(urllib.parse.unquote(visitor))
    assert raw[:2] == b"\x0a\x0b" and re.fullmatch(rb"[A-Za-z0-9_-]{11}", raw[2:13]) and raw[13] == 0x28


@pytest.mark.parametrize("profile, video, outcome, detail, counted", [
    # The platform refuses a reel call without visitor data, and one without the wrapper (no id it can read).
    (custom_reel("REEL_BARE", visitor_data="none"), "capJson3xx1", NOT_AVAILABLE, "unplayable", "capJson3xx1"),
    (custom_reel("REEL_FLAT", wrapper=None), "capJson3xx1", UPSTREAM_FAILED, "http_400", "?"),
    # An id the reel call does not know: an empty object, no reply.
    (REEL_PROFILE, "reelNone001", NOT_AVAILABLE, "no_player_reply", "reelNone001"),
], ids=["without_visitor_data", "without_wrapper", "unknown_id"])
def test_reel_refusals(upstream, tmp_path, profile, video, outcome, detail, counted):
    got = run_once(upstream, video, VTS_CLIENT_PROFILES=profile_file(tmp_path, profile),
                   VTS_INNERTUBE_CLIENTS=profile["name"])
    assert got[:2] == (outcome, detail)
    assert got[2]["requests"] == dict({"POST %s %s" % (REEL, counted): 1},
                                      **({} if profile.get("visitor_data") == "none" else {"POST %s" % VISITOR: 1}))


def test_a_po_token_track_reached_through_a_client_names_the_client_name_it_sent(upstream):
    provider = harness.FakePotProvider()
    try:
        outcomes = [run_once(upstream, "potMixed001", "en", VTS_INNERTUBE_CLIENTS=name,
                             VTS_POT_PROVIDER_URL=provider.url)
                    for name in ("ANDROID_REEL", "WEB_EMBEDDED")]
    finally:
        provider.close()
    # c= is the clientName the reply was asked with (the profile's client_name), not the profile's own name.
    for (outcome, detail, stats), client in zip(outcomes, ("ANDROID", "WEB_EMBEDDED_PLAYER")):
        assert (outcome, detail) == (OK, "ok")
        (en,) = stats["timedtext"]["potMixed001"]
        assert (en["lang"], en["potc"], en["c"]) == (["en"], ["1"], [client]), en


BASE = {"name": "MINE", "client_id": 3, "version": "1.0", "user_agent": "ua"}


@pytest.mark.parametrize("member, says", [
    ({"host": "evil.example.com"}, '"host" must be a platform host: www.youtube.com, youtubei.googleapis.com, '
                                   'm.youtube.com or music.youtube.com'),
    ({"path": "/api/timedtext"}, '"path" must start with /youtubei/ and hold letters, digits, / _ . and - (no ..), '
                                 'at most 95 bytes'),
    ({"path": "/youtubei/../x"}, '"path" must start with /youtubei/ and hold letters, digits, / _ . and - (no ..), '
                                 'at most 95 bytes'),
    ({"query": {"key": "x"}}, 'query parameter "key" is not allowed (letters, digits, _, $, . and -; not '
                              'prettyPrint or key)'),
    ({"query": {"id": "{videoid}"}}, 'query parameter id must be letters, digits, _ . , ~ - and the placeholders '
                                     '{video_id} and {nonce:N}, at most 63 bytes'),
    ({"query": {"t": "{nonce:65}"}}, 'query parameter t must be letters, digits, _ . , ~ - and the placeholders '
                                     '{video_id} and {nonce:N}, at most 63 bytes'),
    ({"context_members": {"client": {}}}, '"context_members" may not hold "client" (the fetcher writes it)'),
    ({"context_members": {"a": {"b": {"c": {"d": {}}}}}}, '"context_members" is nested too deep (at most 4 levels)'),
    ({"context_members": {"a": 1.5}}, '"context_members" has a number that is not an integer'),
    ({"context_members": []}, '"context_members" must be an object'),
    ({"request_members": {"videoId": "x"}}, '"request_members" may not hold "videoId" (the fetcher writes it)'),
    ({"request_members": {"cpn": "{nonce}"}}, '"request_members" has a string that is not printable ASCII of at '
                                              'most 255 bytes with only {video_id} and {nonce:N} placeholders'),
    ({"wrapper": {"reply": "playerResponse"}}, '"wrapper.request" is required'),
    ({"wrapper": {"request": "playerRequest", "extra": 1}}, 'unknown member "wrapper.extra" (known: request, '
                                                            'reply, members)'),
    ({"wrapper": {"request": "player request"}}, '"wrapper.request" must be letters, digits and _ of at most 31 '
                                                 'bytes'),
    ({"wrapper": {"request": "playerRequest", "members": {"playerRequest": 1}}},
     '"wrapper.members" may not hold "playerRequest" (the fetcher writes it)'),
    ({"visitor_data": "cookie"}, '"visitor_data" must be "none", "page", "local" or "fetch"'),
    ({"visitor_data": "page"}, '"visitor_data": "page" needs "needs_page": true'),
    ({"visitor_renew_s": 0}, '"visitor_renew_s" must be an integer of seconds from 1 to 2592000'),
    ({"origin": "http://www.youtube.com"}, '"origin" must be https:// and a host name (letters, digits, . and -), '
                                           'at most 79 bytes'),
    ({"client_name": "android"}, '"client_name" must be A-Z, 0-9 and _ of at most 39 bytes'),
])
def test_a_bad_profile_member_stops_the_start_naming_file_profile_and_member(tmp_path, member, says):
    path = profile_file(tmp_path, dict(BASE, **member))
    proc = subprocess.run([harness.fetcher_binary(), "--once", "capJson3xx1"],
                          env=harness.fetcher_env("http://127.0.0.1:9", VTS_CLIENT_PROFILES=path),
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr == "vts-fetcher: VTS_CLIENT_PROFILES: refused: %s: profile MINE: %s\n" % (path, says)


# Speech through the reel: its reply has captions but no downloadable audio.

@pytest.fixture(scope="module")
def speech_upstream(tmp_path_factory):
    audio = speechdata.make(str(tmp_path_factory.mktemp("speech")))
    fake = harness.FakeUpstream(audio.upstream_args())
    yield fake
    fake.close()


def test_speech_for_a_video_reached_through_the_reel_takes_audio_from_the_next_client(speech_upstream):
    speech_upstream.reset()
    env = dict(os.environ, VTS_UPSTREAM_URL=speech_upstream.url, VTS_LOG_LEVEL="warn", ASAN_OPTIONS="detect_leaks=0",
               VTS_SPEECH_TIMEOUT_MS="120000", VTS_EGRESS_RATE="0", VTS_INNERTUBE_CLIENTS="ANDROID_REEL,ANDROID")
    env.pop("VTS_CLIENT_PROFILES", None)
    proc = subprocess.run([harness.fetcher_binary(), "--once-speech", "noCaptions1"], env=env, capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    last = [line for line in proc.stderr.splitlines() if line.startswith("outcome=")][-1]
    assert last == "outcome=1 lang=en detail="
    assert json.loads(proc.stdout)["source"] == "speech"
    reqs = speech_upstream.stats()["requests"]
    # The reel's reply (no audio url) passed the job on; ANDROID's reply gave the audio.
    assert reqs["POST %s" % VISITOR] == 1
    assert reqs["POST %s noCaptions1" % REEL] == 1
    assert reqs["POST %s noCaptions1" % PLAYER] == 1
    assert reqs["GET /videoplayback noCaptions1"] >= 1
