"""GET /v1/video/transcript?format=chunks end to end: the longest transcript of the fake platform cut at the defaults
and at other sizes; every chunk is whole segments within chunk_chars, starts with at most chunk_overlap characters of
the chunk before, and the chunks without their overlaps are the transcript; bad values are 400 naming the parameter.
Every answer is checked against the OpenAPI document."""
import json

import pytest

from conftest import ACTIVE_KEY
from stack import Stack

LONGEST = "longHour248"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    s = Stack(tmp_path_factory.mktemp("chunks"), fetchers=1, workers=1)
    yield s
    s.close()


def joined(segments):
    return " ".join(s["text"] for s in segments if s["text"])


def check_chunks(transcript, answer, chars, overlap):
    segs = transcript["segments"]
    assert (answer["language"], answer["source"]) == (transcript["language"], transcript["source"])
    assert (answer["chunk_chars"], answer["chunk_overlap"]) == (chars, overlap)
    chunks = answer["chunks"]
    assert [c["index"] for c in chunks] == list(range(len(chunks)))
    assert chunks[0]["first_segment"] == 0 and chunks[-1]["end_segment"] == len(segs)
    pieces = []
    prev_end = 0
    for c in chunks:
        first, end = c["first_segment"], c["end_segment"]
        assert first < end
        assert c["text"] == joined(segs[first:end])
        assert len(c["text"]) <= chars or end - first == 1
        assert c["start"] == segs[first]["start"]
        assert c["end"] == pytest.approx(segs[end - 1]["start"] + segs[end - 1]["duration"], abs=0.0005)
        # It starts inside the chunk before (its overlap, at most chunk_overlap characters) and goes past it.
        assert first <= prev_end < end
        assert len(joined(segs[first:prev_end])) <= overlap
        pieces.append(joined(segs[prev_end:end]))
        prev_end = end
    assert " ".join(p for p in pieces if p) == transcript["text"]
    return chunks


def get(stack, query):
    return stack.gateway.request("GET", "/v1/video/transcript?" + query, headers={"x-api-key": ACTIVE_KEY})


def test_chunks_at_the_defaults_are_the_transcript(stack):
    transcript = get(stack, "video_id=" + LONGEST).json()
    r = get(stack, "video_id=%s&format=chunks" % LONGEST)
    assert r.status == 200 and r.headers["content-type"] == "application/json"
    chunks = check_chunks(transcript, r.json(), 2000, 200)
    assert len(chunks) >= len(transcript["text"]) // 2000
    assert any(c["first_segment"] < p["end_segment"] for p, c in zip(chunks, chunks[1:]))


@pytest.mark.parametrize("chars,overlap", [(200, 0), (500, 250), (20000, 1000)])
def test_chunks_at_other_sizes(stack, chars, overlap):
    transcript = get(stack, "video_id=" + LONGEST).json()
    r = get(stack, "video_id=%s&format=chunks&chunk_chars=%d&chunk_overlap=%d" % (LONGEST, chars, overlap))
    assert r.status == 200
    chunks = check_chunks(transcript, r.json(), chars, overlap)
    if overlap == 0:
        assert all(c["first_segment"] == p["end_segment"] for p, c in zip(chunks, chunks[1:]))


def test_a_short_chunk_size_lowers_the_default_overlap(stack):
    r = get(stack, "video_id=capJson3xx1&format=chunks&chunk_chars=300")
    assert r.status == 200 and r.json()["chunk_overlap"] == 150


@pytest.mark.parametrize("query,message", [
    ("chunk_chars=199", "chunk_chars must be an integer from 200 to 20000."),
    ("chunk_chars=20001", "chunk_chars must be an integer from 200 to 20000."),
    ("chunk_chars=abc", "chunk_chars must be an integer from 200 to 20000."),
    ("chunk_chars=500&chunk_chars=600", "chunk_chars must be an integer from 200 to 20000."),
    ("chunk_chars=500&chunk_overlap=251", "chunk_overlap must be an integer from 0 to half of chunk_chars."),
    ("chunk_overlap=-1", "chunk_overlap must be an integer from 0 to half of chunk_chars."),
])
def test_bad_values_are_400_naming_the_parameter(stack, query, message):
    r = get(stack, "video_id=capJson3xx1&format=chunks&" + query)
    assert r.status == 400
    assert json.loads(r.body) == {"error": {"code": "bad_request", "message": message}}
