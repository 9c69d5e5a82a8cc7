"""Spending the fewest platform requests: what one player reply tells (its caption tracks with their URLs, its
translation languages) is kept by the dispatcher beside the transcript cache and handed with the video's next jobs,
whatever their kind, language or translation, so that a video costs one player request and one caption download a
track. A caption URL that no longer answers is fetched once more after a fresh player reply."""

import json
import urllib.request

import pytest

from stack import Stack

PLAYER = "POST /youtubei/v1/player "
TIMEDTEXT = "GET /api/timedtext "


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    s = Stack(tmp_path_factory.mktemp("reuse"))
    yield s
    s.close()


def tracks(stack, video):
    return stack.gateway.request("GET", "/v1/video/tracks?video_id=" + video,
                                 headers={"x-api-key": stack.gateway.key}, timeout=30)


def mix(stack, video):
    """The mix of the issue for one video: its tracks, its transcript, a second language, a translation and the text
    format; each answer must be a 200."""
    answers = [tracks(stack, video),
               stack.get(video),
               stack.get(query="video_id=%s&language=en" % video),
               stack.get(query="video_id=%s&translate=fr" % video),
               stack.get(query="video_id=%s&format=text" % video)]
    for r in answers:
        assert r.status == 200, r
    return answers


def caption_queries(stack, video):
    """(lang, tlang) of each timedtext request for video, in order."""
    return [(q["lang"][0], q.get("tlang", [""])[0]) for q in stack.upstream.stats()["timedtext"].get(video, [])]


def test_one_player_request_serves_every_job_of_a_video(stack):
    stack.upstream.reset()
    answers = mix(stack, "mlangReu001")
    assert json.loads(answers[0].body)["tracks"][3] == {"language": "de", "name": "German", "kind": "manual",
                                                        "translatable": True}
    assert answers[1].json()["language"] == "de"
    assert answers[2].json()["language"] == "en"
    assert answers[3].json()["language"] == "fr"
    assert answers[4].body.decode() == answers[1].json()["text"]
    assert stack.requests() == {PLAYER + "mlangReu001": 1, TIMEDTEXT + "mlangReu001": 3}
    # The default track, the English one, the default track translated: one download each.
    assert caption_queries(stack, "mlangReu001") == [("de", ""), ("en", ""), ("de", "fr")]


def test_the_mix_costs_the_floor_of_platform_requests(stack):
    """The figure of the issue: 20 videos, five answers each, uncached: 0.80 platform requests an answer."""
    stack.upstream.reset()
    videos = ["mlangMix%03d" % i for i in range(20)]
    for v in videos:
        mix(stack, v)
    requests = stack.requests()
    players = sum(n for k, n in requests.items() if k.startswith(PLAYER))
    captions = sum(n for k, n in requests.items() if k.startswith(TIMEDTEXT))
    assert (players, captions) == (20, 60), requests
    assert set(requests) == {PLAYER + v for v in videos} | {TIMEDTEXT + v for v in videos}
    assert (players + captions) / (5 * len(videos)) == 0.80


def test_a_caption_url_that_no_longer_answers_is_fetched_after_a_fresh_player_reply(stack):
    stack.upstream.reset()
    assert stack.get("staleReuse1").status == 200
    # The platform starts new caption URLs for the video: those of the kept reply answer 404 from now on.
    req = urllib.request.Request(stack.upstream.url + "/__renew?v=staleReuse1", data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=5) as r:
        assert json.load(r) == {"gen": 1}
    second = stack.get(query="video_id=staleReuse1&language=en")
    assert second.status == 200, second
    assert second.json()["language"] == "en"
    # The kept reply serves the next job again, with the fresh URLs.
    third = stack.get(query="video_id=staleReuse1&translate=fr")
    assert third.status == 200, third
    assert stack.requests() == {PLAYER + "staleReuse1": 2, TIMEDTEXT + "staleReuse1": 4}
    gens = [q["gen"][0] for q in stack.upstream.stats()["timedtext"]["staleReuse1"]]
    assert gens == ["0", "0", "1", "1"]
    assert caption_queries(stack, "staleReuse1") == [("de", ""), ("en", ""), ("en", ""), ("de", "fr")]


def test_metadata_transcript_and_tracks_cost_one_player_request_a_video(stack):
    """The figure of the metadata issue: 20 uncached videos, each asked for its metadata, its transcript and its
    track list: one player request a video, one caption download a video, nothing more."""
    stack.upstream.reset()
    videos = ["mlangMeta%02d" % i for i in range(20)]
    for v in videos:
        meta = stack.gateway.request("GET", "/v1/video/metadata?video_id=" + v,
                                     headers={"x-api-key": stack.gateway.key}, timeout=30)
        assert meta.status == 200, meta
        assert stack.get(v).status == 200
        assert tracks(stack, v).status == 200
    requests = stack.requests()
    assert requests == {**{PLAYER + v: 1 for v in videos}, **{TIMEDTEXT + v: 1 for v in videos}}, requests
