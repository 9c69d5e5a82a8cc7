"""GET /v1/video/tracks end to end: the caption tracks and translation languages of a video, in the platform's order,
from the fake platform's replies and from real captured track lists; the transcript endpoint's key, limits, video
rules and errors; one player request, cached apart from transcripts."""
import json
import os
import urllib.parse

import pytest

from conftest import ACTIVE_KEY, CAPTURES_HOWTO, not_here
from stack import Stack, harness, metric

NOT_AVAILABLE = (b'{"error":{"code":"transcript_not_available",'
                 b'"message":"No accessible transcript was found for this video."}}')
FAKE_TRANSLATIONS = [{"language": "fr", "name": "French"}, {"language": "es", "name": "Spanish"},
                     {"language": "zh-Hant", "name": "Chinese (Traditional)"}]
FIXTURES = os.environ.get("VTS_SHARED_FIXTURES", os.path.join(harness.ROOT, "..", "shared", "fixtures"))
CAPTURES = {"realTracks1": os.path.join(FIXTURES, "youtube-transcript-api", "youtube.innertube.json.static"),
            "realTracks2": os.path.join(FIXTURES, "newpipe", "audiotracklanguage.player.json")}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    # The real track lists are served only with the captures; every other case runs on the fake's own replies.
    captures = os.path.join(FIXTURES, "youtube-transcript-api")
    args = ["--captures", captures] if all(os.path.exists(p) for p in CAPTURES.values()) else []
    s = Stack(tmp_path_factory.mktemp("tracks"), upstream_args=args)
    yield s
    s.close()


def tracks(stack, query, headers=None, method="GET"):
    h = {"x-api-key": ACTIVE_KEY}
    h.update(headers or {})
    return stack.gateway.request(method, "/v1/video/tracks?" + query, headers=h)


def track(language, name, kind="manual", translatable=True):
    return {"language": language, "name": name, "kind": kind, "translatable": translatable}


def test_four_languages_yield_the_same_four_tracks_in_order(stack):
    r = tracks(stack, "video_id=fourLangs01")
    assert r.status == 200, r
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {"tracks": [track("en", "English"), track("es", "Spanish"), track("ja", "Japanese"),
                                   track("pt-BR", "Portuguese (Brazil)")],
                        "translationLanguages": FAKE_TRANSLATIONS}
    for h in ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"):
        assert h in r.headers, f"{h} missing from a tracks answer"


def test_manual_and_asr_tracks_keep_the_platforms_order_and_exact_body(stack):
    r = tracks(stack, "video_id=multiLang01")
    assert r.status == 200, r
    assert r.body == (
        b'{"tracks":[{"language":"en","name":"English","kind":"manual","translatable":true},'
        b'{"language":"en","name":"English (auto-generated)","kind":"asr","translatable":true},'
        b'{"language":"pt-BR","name":"Portuguese (Brazil)","kind":"manual","translatable":true},'
        b'{"language":"de","name":"German","kind":"manual","translatable":true}],'
        b'"translationLanguages":[{"language":"fr","name":"French"},{"language":"es","name":"Spanish"},'
        b'{"language":"zh-Hant","name":"Chinese (Traditional)"}]}')


def test_a_track_that_is_not_translatable_says_so(stack):
    r = tracks(stack, "video_id=noTranslat1")
    assert r.status == 200, r
    assert r.json()["tracks"] == [track("en", "English", translatable=False)]


@pytest.mark.parametrize("video", ["realTracks1", "realTracks2"])
def test_real_captured_track_lists_come_back_whole(stack, video):
    if not os.path.exists(CAPTURES[video]):
        not_here("captures", f"{CAPTURES[video]} is missing (the real track lists are compared); {CAPTURES_HOWTO}")
    with open(CAPTURES[video], encoding="utf-8") as f:
        renderer = json.load(f)["captions"]["playerCaptionsTracklistRenderer"]

    def name(n):
        return n.get("simpleText") or "".join(run["text"] for run in n["runs"])
    want = {"tracks": [track(t["languageCode"], name(t["name"]), "asr" if t.get("kind") == "asr" else "manual",
                             t.get("isTranslatable", False)) for t in renderer["captionTracks"]],
            "translationLanguages": [{"language": t["languageCode"], "name": name(t["languageName"])}
                                     for t in renderer["translationLanguages"]]}
    r = tracks(stack, "video_id=" + video)
    assert r.status == 200, r
    got = r.json()
    assert len(got["tracks"]) == len(want["tracks"]) and len(got["translationLanguages"]) == len(
        want["translationLanguages"])
    assert got == want


def test_playable_video_without_captions_has_empty_lists(stack):
    r = tracks(stack, "video_id=noCaptions1")
    assert r.status == 200, r
    assert r.body == b'{"tracks":[],"translationLanguages":[]}'


@pytest.mark.parametrize("video,message", [
    ("unavail0001", b"No accessible transcript was found for this video."),
    ("ageRestr001", b"The video is age-restricted."),
    ("unplayable1", b"The video is not available in this region."),
    ("liveOffline", b"The live stream is not archived yet."),
])
def test_unplayable_video_is_404_transcript_not_available(stack, video, message):
    r = tracks(stack, "video_id=" + video)
    assert r.status == 404, r
    assert r.body == NOT_AVAILABLE.replace(b"No accessible transcript was found for this video.", message)


def test_blocked_platform_is_502(stack):
    r = tracks(stack, "video_id=recaptcha01")
    assert r.status == 502, r
    assert r.json()["error"]["code"] == "upstream_transcript_failed"


def test_one_player_request_no_caption_download_and_cached(stack):
    stack.upstream.reset()
    first = tracks(stack, "video_id=benchTrk001")
    assert first.status == 200, first
    again = tracks(stack, "video_id=benchTrk001")
    assert again.status == 200 and again.body == first.body
    stats = stack.upstream.stats()
    assert stats["requests"].get("POST /youtubei/v1/player benchTrk001") == 1, stats["requests"]
    assert "benchTrk001" not in stats["timedtext"], "a tracks request downloaded captions"


def test_tracks_and_transcript_are_cached_apart(stack):
    transcript = stack.get("benchTrk002")
    assert transcript.status == 200 and "segments" in transcript.json()
    r = tracks(stack, "video_id=benchTrk002")
    assert r.status == 200, r
    assert r.json() == {"tracks": [track("en", "English")], "translationLanguages": FAKE_TRANSLATIONS}
    assert stack.get("benchTrk002").body == transcript.body


@pytest.mark.parametrize("query,code", [
    ("", "ambiguous_request"),
    ("video_id=fourLangs01&video_url=https%3A%2F%2Fyoutu.be%2FfourLangs01", "ambiguous_request"),
    ("video_id=fourLangs01&video_id=fourLangs01", "ambiguous_request"),
    ("video_id=short", "invalid_video_id"),
    ("video_url=https%3A%2F%2Fexample.com%2Fwatch%3Fv%3DfourLangs01", "invalid_video_url"),
])
def test_video_rules_and_codes_are_the_transcript_endpoints(stack, query, code):
    r = tracks(stack, query)
    assert r.status == 400, r
    assert r.json()["error"]["code"] == code


def test_video_url_and_transcript_only_parameters(stack):
    url = urllib.parse.quote("https://www.youtube.com/watch?v=fourLangs01&t=3s", safe="")
    r = tracks(stack, "video_url=" + url + "&language=EN&format=xml&translate=!!")
    assert r.status == 200, r
    assert [t["language"] for t in r.json()["tracks"]] == ["en", "es", "ja", "pt-BR"]


def test_tracks_need_a_key(stack):
    r = stack.gateway.request("GET", "/v1/video/tracks?video_id=fourLangs01")
    assert r.status == 401, r
    assert r.json()["error"]["code"] == "UNAUTHORIZED"
    r = tracks(stack, "video_id=fourLangs01", headers={"x-api-key": "not-a-key"})
    assert r.status == 401, r


def test_tracks_are_json_whatever_accept_says_and_head_has_no_body(stack):
    r = tracks(stack, "video_id=fourLangs01", headers={"accept": "text/vtt"})
    assert r.status == 200 and r.headers["content-type"] == "application/json"
    head = tracks(stack, "video_id=fourLangs01", method="HEAD")
    assert head.status == 200 and head.body == b""
    assert head.headers["content-length"] == str(len(r.body))


def test_other_methods_are_405_with_allow(stack):
    r = stack.gateway.request("POST", "/v1/video/tracks?video_id=fourLangs01", headers={"x-api-key": ACTIVE_KEY})
    assert r.status == 405, r
    assert r.headers["allow"] == "GET, HEAD"


def test_tracks_answers_are_counted_under_their_own_route(stack):
    before = metric(stack.metrics(), "vts_http_requests_total", route="/v1/video/tracks", status="200")
    assert tracks(stack, "video_id=fourLangs01").status == 200
    after = metric(stack.metrics(), "vts_http_requests_total", route="/v1/video/tracks", status="200")
    assert after == before + 1, (before, after)
