"""GET /v1/video/metadata end to end: what the platform's player reply says of a video (videoDetails, and the
microformat where the reply carries it), field by field equal to real captured replies served by the fake platform;
the transcript endpoint's key, limits, video rules and errors; cached like a track list, and no player request when
the video's reply is kept from a transcript or track list (nor for those after it). Every answer is checked against
the OpenAPI document."""
import json
import os
import urllib.parse

import pytest

from conftest import ACTIVE_KEY, CAPTURES_HOWTO, not_here
from contract import check_response, error_body
from stack import Stack, harness

FIXTURES = os.environ.get("VTS_SHARED_FIXTURES", os.path.join(harness.ROOT, "..", "shared", "fixtures"))
CAPTURES = os.path.join(FIXTURES, "youtube-transcript-api")
# The captured replies the fake platform serves whole under these ids (its META_CAPTURES).
REAL = {"realMeta001": os.path.join(FIXTURES, "newpipe", "descriptionunboxing.player.json"),
        "realMeta002": os.path.join(CAPTURES, "youtube.html.static")}
PLAYER = "POST /youtubei/v1/player "
PATH = "/v1/video/metadata"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    args = ["--captures", CAPTURES] if all(os.path.exists(p) for p in REAL.values()) else []
    # One worker: a 304 comes only from the validators of the worker that served the answer (two workers would
    # share the revalidations between them, and the one that never served it answers 200).
    s = Stack(tmp_path_factory.mktemp("metadata"), upstream_args=args, fetchers=1, workers=1)
    yield s
    s.close()


def metadata(stack, query, headers=None, method="GET", key=ACTIVE_KEY):
    h = {"x-api-key": key} if key else {}
    h.update(headers or {})
    r = stack.gateway.request(method, PATH + "?" + query, headers=h)
    check_response(method, PATH, r.status, r.headers, r.body)
    return r


def captured_reply(path):
    """The player reply of a capture, read as the fake platform reads it."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if not path.endswith(".html.static"):
        return json.loads(text)
    start = text.index("ytInitialPlayerResponse = ") + len("ytInitialPlayerResponse = ")
    return json.JSONDecoder().raw_decode(text[start:])[0]


@pytest.mark.parametrize("video", sorted(REAL))
def test_metadata_fields_equal_those_of_the_real_reply(stack, video):
    if not os.path.exists(REAL[video]):
        not_here("captures", f"{REAL[video]} is missing (the real replies are compared); {CAPTURES_HOWTO}")
    reply = captured_reply(REAL[video])
    details = reply["videoDetails"]
    micro = reply.get("microformat", {}).get("playerMicroformatRenderer", {})
    tracks = reply.get("captions", {}).get("playerCaptionsTracklistRenderer", {}).get("captionTracks", [])
    languages = []
    for t in tracks:
        if t["languageCode"] not in languages:
            languages.append(t["languageCode"])
    stack.upstream.reset()
    r = metadata(stack, "video_id=" + video)
    assert r.status == 200, r
    assert r.headers["content-type"] == "application/json"
    got = r.json()
    assert got["videoId"] == video
    assert got["title"] == details["title"]
    assert got["channelId"] == details["channelId"]
    assert got["channelName"] == details["author"]
    assert got["lengthSeconds"] == int(details["lengthSeconds"])
    assert got["isLive"] == details.get("isLive", False)
    assert got["isLiveContent"] == details["isLiveContent"]
    assert got["viewCount"] == int(details["viewCount"])
    assert got["publishDate"] == micro.get("publishDate")
    assert got["description"] == details["shortDescription"]
    assert got["keywords"] == details.get("keywords", [])
    assert got["thumbnails"] == [{"url": t["url"], "width": t["width"], "height": t["height"]}
                                 for t in details["thumbnail"]["thumbnails"]]
    assert got["captionLanguages"] == languages
    assert len(got) == 13
    # One player request, no caption download.
    assert stack.upstream.stats()["requests"] == {PLAYER + video: 1}


def test_the_microformat_gives_the_publish_date(stack):
    if not os.path.exists(REAL["realMeta002"]):
        not_here("captures", f"{REAL['realMeta002']} is missing; {CAPTURES_HOWTO}")
    micro = captured_reply(REAL["realMeta002"])["microformat"]["playerMicroformatRenderer"]
    r = metadata(stack, "video_id=realMeta002")
    assert r.status == 200 and r.json()["publishDate"] == micro["publishDate"] is not None


def test_the_fake_platforms_reply_exactly(stack):
    r = metadata(stack, "video_id=multiLang01")
    assert r.status == 200, r
    assert r.body == (b'{"videoId":"multiLang01","title":"A fake video","channelId":"UCfakechannel000000000000",'
                      b'"channelName":"Fake","lengthSeconds":12,"isLive":false,"isLiveContent":false,'
                      b'"viewCount":1234,"publishDate":null,"description":null,"keywords":[],"thumbnails":[],'
                      b'"captionLanguages":["en","pt-BR","de"]}')
    for h in ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "etag"):
        assert h in r.headers, f"{h} missing from a metadata answer"


def test_cached_like_a_track_list_and_apart_from_it(stack):
    stack.upstream.reset()
    first = metadata(stack, "video_id=benchMeta01")
    again = metadata(stack, "video_url=" + urllib.parse.quote("https://youtu.be/benchMeta01", safe=""))
    assert first.status == again.status == 200 and again.body == first.body
    assert stack.upstream.stats()["requests"] == {PLAYER + "benchMeta01": 1}
    # The ETag revalidates: 304, nothing asked of the platform.
    notmod = metadata(stack, "video_id=benchMeta01", headers={"if-none-match": first.headers["etag"]})
    assert notmod.status == 304 and notmod.body == b""
    assert stack.upstream.stats()["requests"] == {PLAYER + "benchMeta01": 1}


def test_no_player_request_after_a_transcript_nor_before_one(stack):
    stack.upstream.reset()
    assert stack.get("benchMeta02").status == 200
    r = metadata(stack, "video_id=benchMeta02")
    assert r.status == 200 and r.json()["title"] == "A fake video" and r.json()["captionLanguages"] == ["en"]
    stats = stack.upstream.stats()
    assert stats["requests"] == {PLAYER + "benchMeta02": 1, "GET /api/timedtext benchMeta02": 1}
    # Metadata first: the transcript and the track list after it reuse its reply.
    stack.upstream.reset()
    assert metadata(stack, "video_id=benchMeta03").status == 200
    assert stack.get("benchMeta03").status == 200
    tracks = stack.gateway.request("GET", "/v1/video/tracks?video_id=benchMeta03", headers={"x-api-key": ACTIVE_KEY})
    assert tracks.status == 200
    assert stack.upstream.stats()["requests"] == {PLAYER + "benchMeta03": 1, "GET /api/timedtext benchMeta03": 1}


@pytest.mark.parametrize("video,message", [
    ("ageRestr001", "The video is age-restricted."),
    ("unavail0001", "No accessible transcript was found for this video."),
    ("liveOffline", "The live stream is not archived yet."),
])
def test_a_video_that_cannot_be_played_is_404(stack, video, message):
    r = metadata(stack, "video_id=" + video)
    assert r.status == 404, r
    assert r.body == b'{"error":{"code":"transcript_not_available","message":"%s"}}' % message.encode()


def test_platform_refusal_is_502(stack):
    r = metadata(stack, "video_id=http500xxx1")
    assert r.status == 502, r
    assert r.json() == error_body("upstream_transcript_failed")


@pytest.mark.parametrize("query,code", [
    ("video_id=short", "invalid_video_id"),
    ("", "ambiguous_request"),
    ("video_id=capJson3xx1&video_url=https%3A%2F%2Fyoutu.be%2FcapJson3xx1", "ambiguous_request"),
    ("video_url=https%3A%2F%2Fevil.example.com%2Fwatch%3Fv%3DcapJson3xx1", "invalid_video_url"),
])
def test_the_video_rules_of_the_transcript(stack, query, code):
    r = metadata(stack, query)
    assert r.status == 400, r
    assert r.json() == error_body(code)


def test_a_key_is_required(stack):
    r = metadata(stack, "video_id=capJson3xx1", key=None)
    assert r.status == 401, r
    assert r.json() == error_body("UNAUTHORIZED")


def test_head_is_get_without_a_body(stack):
    get = metadata(stack, "video_id=fourLangs01")
    head = metadata(stack, "video_id=fourLangs01", method="HEAD")
    assert get.status == head.status == 200 and head.body == b""
    assert head.headers["content-length"] == str(len(get.body))
