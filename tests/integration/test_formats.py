"""Transcript formats end to end: format=json|text|srt|vtt and the Accept header, rendered by the worker from the
cached JSON body. SubRip and WebVTT are read back by ffmpeg, which must find the JSON's cues at the JSON's times to
the millisecond; another format of a cached transcript is still a cache hit (no second fetch)."""
import re
import shutil
import subprocess

import pytest

from conftest import ACTIVE_KEY, parse_responses, raw_exchange
from stack import Stack

FORMAT_ERROR = b'{"error":{"code":"bad_request","message":"format must be one of json, text, srt, vtt."}}'
NOT_AVAILABLE = (b'{"error":{"code":"transcript_not_available",'
                 b'"message":"No accessible transcript was found for this video."}}')
CUE = re.compile(r"(\d+)\n(\d\d):(\d\d):(\d\d),(\d{3}) --> (\d\d):(\d\d):(\d\d),(\d{3})\n(.*?)\n\n", re.S)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    s = Stack(tmp_path_factory.mktemp("formats"))
    yield s
    s.close()


def ms_of(seconds):
    return round(seconds * 1000)


def json_cues(body):
    return [(ms_of(s["start"]), ms_of(s["start"]) + ms_of(s["duration"]), s["text"]) for s in body["segments"]]


def ffmpeg_cues(tmp_path, data, ext):
    """The cues ffmpeg reads from a subtitle file, as (start_ms, end_ms, text), via its own SubRip writer."""
    ffmpeg = shutil.which("ffmpeg")
    assert ffmpeg is not None, "ffmpeg is not installed (deploy/deps.sh VTS_TEST_PACKAGES lists it)"
    src = tmp_path / ("in." + ext)
    src.write_bytes(data)
    run = subprocess.run([ffmpeg, "-v", "error", "-nostdin", "-i", str(src), "-f", "srt", "-"], capture_output=True,
                         timeout=60)
    assert run.returncode == 0, f"ffmpeg could not read the {ext} answer: {run.stderr.decode()[:500]}"
    text = run.stdout.decode("utf-8").replace("\r\n", "\n")
    cues = []
    for m in CUE.finditer(text):
        g = [int(x) for x in m.groups()[1:9]]
        start = ((g[0] * 60 + g[1]) * 60 + g[2]) * 1000 + g[3]
        end = ((g[4] * 60 + g[5]) * 60 + g[6]) * 1000 + g[7]
        cues.append((start, end, m.group(10)))
    return cues


@pytest.mark.parametrize("fmt,ext", [("srt", "srt"), ("vtt", "vtt")])
def test_ffmpeg_reads_back_every_cue_at_its_millisecond(stack, tmp_path, fmt, ext):
    # 1,500 cues of the fake platform, every one 1.9 s long and 2 s apart.
    as_json = stack.get(query="video_id=long1500seg")
    assert as_json.status == 200, as_json
    want = json_cues(as_json.json())
    assert len(want) == 1500
    r = stack.get(query="video_id=long1500seg&format=" + fmt)
    assert r.status == 200, r
    got = ffmpeg_cues(tmp_path, r.body, ext)
    assert len(got) == len(want), f"ffmpeg read {len(got)} cues, the JSON has {len(want)}"
    assert got == want, next((g, w) for g, w in zip(got, want) if g != w)


def test_srt_and_vtt_bodies_are_exact(stack):
    r = stack.get(query="video_id=capJson3xx1&format=srt")
    assert r.status == 200, r
    assert r.headers["content-type"] == "application/x-subrip; charset=utf-8"
    assert r.body == (b"1\n00:00:00,120 --> 00:00:02,520\nHello and welcome\n\n"
                      b"2\n00:00:02,520 --> 00:00:05,520\nto the fake platform\n\n")
    for h in ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"):
        assert h in r.headers, f"{h} missing from a SubRip answer"
    r = stack.get(query="video_id=capJson3xx1&format=vtt")
    assert r.status == 200, r
    assert r.headers["content-type"] == "text/vtt; charset=utf-8"
    assert r.body == (b"WEBVTT\n\n00:00:00.120 --> 00:00:02.520\nHello and welcome\n\n"
                      b"00:00:02.520 --> 00:00:05.520\nto the fake platform\n\n")


def test_vtt_text_with_reserved_characters_reads_back_as_written(stack, tmp_path):
    # srv1 captions whose text holds '&' and an apostrophe.
    as_json = stack.get(query="video_id=capSrv1xxx1").json()
    r = stack.get(query="video_id=capSrv1xxx1&format=vtt")
    assert r.status == 200, r
    assert r.body == (b"WEBVTT\n\n00:00:01.200 --> 00:00:04.600\nIt's fish &amp; chips\n\n"
                      b"00:00:04.600 --> 00:00:06.600\nis bold\n\n")
    got = ffmpeg_cues(tmp_path, r.body, "vtt")
    assert [(s, e) for s, e, _ in got] == [(s, e) for s, e, _ in json_cues(as_json)]
    assert got[0][2] == as_json["segments"][0]["text"] == "It's fish & chips"


def test_text_is_the_transcripts_text(stack):
    as_json = stack.get(query="video_id=multiLang01&language=pt-BR").json()
    r = stack.get(query="video_id=multiLang01&language=pt-BR&format=text")
    assert r.status == 200, r
    assert r.headers["content-type"] == "text/plain; charset=utf-8"
    assert r.body.decode("utf-8") == as_json["text"] == "Olá e bem-vindo à plataforma falsa"


@pytest.mark.parametrize("accept,ctype", [
    ("text/plain", "text/plain; charset=utf-8"),
    ("application/x-subrip", "application/x-subrip; charset=utf-8"),
    ("text/vtt", "text/vtt; charset=utf-8"),
    ("text/vtt;q=0.4, text/plain;q=0.9", "text/plain; charset=utf-8"),
    ("application/json", "application/json"),
    ("text/html,application/xhtml+xml,*/*;q=0.8", "application/json"),
])
def test_accept_header_chooses_the_format_when_format_is_absent(stack, accept, ctype):
    r = stack.get(query="video_id=capJson3xx1", headers={"accept": accept})
    assert r.status == 200, r
    assert r.headers["content-type"] == ctype


def test_format_parameter_wins_over_accept(stack):
    r = stack.get(query="video_id=capJson3xx1&format=json", headers={"accept": "text/vtt"})
    assert r.status == 200, r
    assert r.headers["content-type"] == "application/json"
    assert r.json()["language"] == "en"


@pytest.mark.parametrize("query", [
    "video_id=capJson3xx1&format=xml", "video_id=capJson3xx1&format=", "video_id=capJson3xx1&format=SRT",
    "video_id=capJson3xx1&format=srt&format=vtt",
])
def test_unknown_or_repeated_format_is_400_listing_the_values(stack, query):
    r = stack.get(query=query)
    assert r.status == 400, r
    assert r.body == FORMAT_ERROR
    assert r.headers["content-type"] == "application/json"


def test_earlier_rules_answer_before_format(stack):
    r = stack.get(query="video_id=short&format=xml")
    assert r.status == 400, r
    assert r.json()["error"]["code"] == "invalid_video_id"


def test_errors_stay_json_in_any_format(stack):
    for query, headers in (("video_id=unavail0001&format=srt", {}), ("video_id=unavail0001", {"accept": "text/vtt"})):
        r = stack.get(query=query, headers=headers)
        assert r.status == 404, r
        assert r.headers["content-type"] == "application/json"
        assert r.body == NOT_AVAILABLE


def test_every_format_of_a_cached_transcript_is_a_cache_hit(stack):
    stack.upstream.reset()
    first = stack.get(query="video_id=benchFmt001")
    assert first.status == 200, first
    for fmt in ("text", "srt", "vtt", "json"):
        r = stack.get(query="video_id=benchFmt001&format=" + fmt)
        assert r.status == 200, (fmt, r)
    assert stack.requests().get("POST /youtubei/v1/player benchFmt001") == 1, stack.requests()
    assert len(stack.upstream.stats()["timedtext"]["benchFmt001"]) == 1


def test_head_announces_the_length_of_the_rendered_body(stack):
    get = stack.get(query="video_id=capJson3xx1&format=vtt")
    head = stack.gateway.request("HEAD", "/v1/video/transcript?video_id=capJson3xx1&format=vtt",
                                 headers={"x-api-key": ACTIVE_KEY})
    assert head.status == 200, head
    assert head.body == b""
    assert head.headers["content-length"] == str(len(get.body))
    assert head.headers["content-type"] == "text/vtt; charset=utf-8"


def test_repeated_accept_lines_form_one_list_and_an_oversized_one_is_ignored(stack):
    def content_type(accept_lines):
        head = "".join("Accept: %s\r\n" % a for a in accept_lines)
        raw = raw_exchange(stack.gateway.port, (
            "GET /v1/video/transcript?video_id=capJson3xx1 HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\n%s"
            "Connection: close\r\n\r\n" % (ACTIVE_KEY, head)).encode())
        (status, headers, _), = parse_responses(raw)
        assert status == 200, raw[:300]
        return headers["content-type"]
    assert content_type(["text/html;q=0.9", "text/vtt"]) == "text/vtt; charset=utf-8"
    # Past 512 bytes the header is not read at all: the answer is JSON.
    assert content_type(["application/x-foo;q=0.1, " * 25 + "text/plain"]) == "application/json"
    assert content_type(["application/x-foo;q=0.1, " * 15 + "text/plain"]) == "text/plain; charset=utf-8"
