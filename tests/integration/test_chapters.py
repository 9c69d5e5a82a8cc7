"""Chapters end to end: GET /v1/video/metadata?include=chapters reads them from the fake platform's watch-next reply
(POST /youtubei/v1/next), exactly one request a video and only when asked, cached apart from the metadata without
them; a video without chapters has []; include's bad values are 400 naming it. format=chunks of a video with chapters
never lets a chunk cross one, and its chunks without their overlaps are still the transcript. Every answer is checked
against the OpenAPI document."""
import pytest

from conftest import ACTIVE_KEY
from contract import check_response, error_body
from stack import Stack

PLAYER = "POST /youtubei/v1/player "
NEXT = "POST /youtubei/v1/next "
META = "/v1/video/metadata"
# The fake platform's chapters (its NEXT_CHAPTERS): chaptLong01 is 1200 s long, 600 segments of 2 s.
LONG_CHAPTERS = [{"title": "Opening", "start": 0, "end": 95}, {"title": "The problem", "start": 95, "end": 400},
                 {"title": "A first answer", "start": 400, "end": 777},
                 {"title": 'Questions "live"', "start": 777, "end": 1200}]
SHORT_BODY = (b'{"videoId":"chaptShort1","title":"A fake video","channelId":"UCfakechannel000000000000",'
              b'"channelName":"Fake","lengthSeconds":12,"isLive":false,"isLiveContent":false,"viewCount":1234,'
              b'"publishDate":null,"description":null,"keywords":[],"thumbnails":[],"captionLanguages":["en"],'
              b'"chapters":[{"title":"Hello","start":0,"end":2},{"title":"Caf\xc3\xa9 talk","start":2,"end":12}]}')


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    s = Stack(tmp_path_factory.mktemp("chapters"), fetchers=1, workers=1)
    yield s
    s.close()


def get(stack, path, query):
    r = stack.gateway.request("GET", path + "?" + query, headers={"x-api-key": ACTIVE_KEY})
    check_response("GET", path, r.status, r.headers, r.body)
    return r


def test_chapters_exactly_with_one_next_request_and_none_cached(stack):
    stack.upstream.reset()
    first = get(stack, META, "video_id=chaptShort1&include=chapters")
    assert first.status == 200, first
    assert first.body == SHORT_BODY
    assert stack.upstream.stats()["requests"] == {PLAYER + "chaptShort1": 1, NEXT + "chaptShort1": 1}
    # The cached second ask asks the platform nothing.
    again = get(stack, META, "include=chapters&video_url=https%3A%2F%2Fyoutu.be%2FchaptShort1")
    assert again.status == 200 and again.body == SHORT_BODY
    assert again.headers["etag"] == first.headers["etag"]
    assert stack.upstream.stats()["requests"] == {PLAYER + "chaptShort1": 1, NEXT + "chaptShort1": 1}


def test_without_include_there_is_no_next_request_and_no_chapters(stack):
    stack.upstream.reset()
    r = get(stack, META, "video_id=chaptLong01")
    assert r.status == 200 and "chapters" not in r.json()
    assert stack.upstream.stats()["requests"] == {PLAYER + "chaptLong01": 1}
    # Asked afterwards, the chapters cost the watch-next request alone (the player reply is reused).
    r = get(stack, META, "video_id=chaptLong01&include=chapters")
    assert r.status == 200
    assert r.json()["chapters"] == LONG_CHAPTERS
    assert r.json()["lengthSeconds"] == 1200
    assert stack.upstream.stats()["requests"] == {PLAYER + "chaptLong01": 1, NEXT + "chaptLong01": 1}
    # The two answers are cached apart: each again costs nothing.
    plain = get(stack, META, "video_id=chaptLong01")
    assert plain.status == 200 and "chapters" not in plain.json()
    assert get(stack, META, "video_id=chaptLong01&include=chapters").json()["chapters"] == LONG_CHAPTERS
    assert stack.upstream.stats()["requests"] == {PLAYER + "chaptLong01": 1, NEXT + "chaptLong01": 1}


def test_a_video_without_chapters_has_an_empty_list(stack):
    stack.upstream.reset()
    r = get(stack, META, "video_id=capJson3xx1&include=chapters")
    assert r.status == 200
    assert r.body == (b'{"videoId":"capJson3xx1","title":"A fake video","channelId":"UCfakechannel000000000000",'
                      b'"channelName":"Fake","lengthSeconds":12,"isLive":false,"isLiveContent":false,'
                      b'"viewCount":1234,"publishDate":null,"description":null,"keywords":[],"thumbnails":[],'
                      b'"captionLanguages":["en"],"chapters":[]}')
    assert stack.upstream.stats()["requests"] == {PLAYER + "capJson3xx1": 1, NEXT + "capJson3xx1": 1}


def test_a_failed_next_request_is_502_and_the_metadata_alone_still_served(stack):
    stack.upstream.reset()
    r = get(stack, META, "video_id=chaptFail01&include=chapters")
    assert r.status == 502, r
    assert r.json() == error_body("upstream_transcript_failed")
    assert get(stack, META, "video_id=chaptFail01").status == 200
    assert stack.upstream.stats()["requests"][NEXT + "chaptFail01"] == 1


@pytest.mark.parametrize("query", ["include=bogus", "include=", "include", "include=chapters&include=chapters",
                                   "include=chapters,title", "include=CHAPTERS"])
def test_an_unknown_include_is_400_naming_it(stack, query):
    stack.upstream.reset()
    r = get(stack, META, "video_id=chaptShort1&" + query)
    assert r.status == 400, r
    assert r.body == b'{"error":{"code":"bad_request","message":"include must be chapters."}}'
    assert stack.upstream.stats()["requests"] == {}


def test_the_video_rules_come_before_include(stack):
    r = get(stack, META, "video_id=short&include=bogus")
    assert r.status == 400
    assert r.json()["error"]["code"] == "invalid_video_id"


def test_include_is_a_list_of_chapters(stack):
    r = get(stack, META, "video_id=chaptShort1&include=chapters%2Cchapters")
    assert r.status == 200 and r.body == SHORT_BODY


def joined(segments):
    return " ".join(s["text"] for s in segments if s["text"])


@pytest.mark.parametrize("chars,overlap", [(2000, 200), (500, 250), (20000, 0)])
def test_chunks_never_cross_a_chapter_and_join_to_the_transcript(stack, chars, overlap):
    transcript = get(stack, "/v1/video/transcript", "video_id=chaptLong01").json()
    segs = transcript["segments"]
    r = get(stack, "/v1/video/transcript",
            "video_id=chaptLong01&format=chunks&chunk_chars=%d&chunk_overlap=%d" % (chars, overlap))
    assert r.status == 200, r
    chunks = r.json()["chunks"]
    starts = [c["start"] for c in LONG_CHAPTERS]

    def chapter_of(segment):
        return max(i for i, s in enumerate(starts) if segs[segment]["start"] >= s)

    pieces, prev_end = [], 0
    for c in chunks:
        first, end = c["first_segment"], c["end_segment"]
        assert chapter_of(first) == chapter_of(end - 1), c
        assert c["text"] == joined(segs[first:end])
        assert len(c["text"]) <= chars or end - first == 1
        assert first <= prev_end < end
        # A chapter's first chunk overlaps nothing of the chapter before.
        if prev_end > 0 and chapter_of(prev_end) != chapter_of(prev_end - 1):
            assert first == prev_end, c
        pieces.append(joined(segs[prev_end:end]))
        prev_end = end
    assert prev_end == len(segs)
    assert " ".join(p for p in pieces if p) == transcript["text"]
    # Every chapter starts a chunk: the segments 48 (96 s), 200 (400 s) and 389 (778 s) begin chapters 2 to 4.
    firsts = [c["first_segment"] for c in chunks]
    assert all(s in firsts for s in (0, 48, 200, 389))


def test_chunks_of_a_video_ask_its_chapters_once(stack):
    stack.upstream.reset()
    video = "chaptOnce01"
    for _ in range(2):
        r = get(stack, "/v1/video/transcript", "video_id=%s&format=chunks" % video)
        assert r.status == 200, r
        assert [(c["first_segment"], c["end_segment"]) for c in r.json()["chunks"]] == [(0, 1), (1, 2)]
    # The transcript's player reply serves the chapters' job too: one watch-next request, and none the second time.
    assert stack.upstream.stats()["requests"] == {PLAYER + video: 1, "GET /api/timedtext " + video: 1,
                                                  NEXT + video: 1}
