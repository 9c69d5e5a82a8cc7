"""Answers that tell the truth about what a client got, through the whole service (gateway with one worker,
fetchers, the fake platform): a client that resets before its answer is logged 499, counted and not charged, while a
half-close still gets every answer; If-None-Match: * on a video the service does not hold is an ordinary request
with its unit of the month; Vary names Accept wherever Accept chose the body, so a real client cache (one on http-cache-semantics, in
tests/contract) never serves a cached JSON transcript to a request for WebVTT."""
import json
import shutil
import socket
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import ACTIVE_KEY, parse_responses, read_until_close
from stack import Stack
from vtsproc import wait_for

TRANSCRIPT = "/v1/video/transcript"
GONE_KEY = "vts_test_key_gone2"  # a large window, 2 units a month
STAR_KEY = "vts_test_key_star2"  # the same
KEYS = [("gone2", GONE_KEY, "active", 1000000, 3600, 2), ("star2", STAR_KEY, "active", 1000000, 3600, 2)]
CONTRACT_DIR = Path(__file__).resolve().parents[2] / "tests" / "contract"
QUOTA_EXCEEDED = b'{"error":{"code":"quota_exceeded","message":"The monthly quota of this API key is used up."}}'


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    s = Stack(tmp_path_factory.mktemp("honest"), workers=1, keys=KEYS)
    yield s
    s.close()


def platform_asked(stack, video):
    """How many requests the fake platform received for video."""
    return sum(n for k, n in stack.upstream.stats()["requests"].items() if k.endswith(" " + video))


def access_lines(stack, **match):
    return [rec for rec in stack.gateway.log_records()
            if rec.get("msg") == "request" and all(rec.get(k) == v for k, v in match.items())]


def request_bytes(video, key, extra=""):
    return (f"GET {TRANSCRIPT}?video_id={video} HTTP/1.1\r\nHost: t\r\nx-api-key: {key}\r\n{extra}\r\n").encode()


def test_a_client_reset_before_its_answer_is_499_refunded_and_counted(stack):
    gw = stack.gateway
    video = "slowGone001"  # the platform answers it after 1.5 s
    gone_before = gw.metric("vts_http_requests_total", route=TRANSCRIPT, status="499")
    refunds_before = gw.metric("vts_ratelimit_quota_refunds_total")
    s = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
    s.sendall(request_bytes(video, GONE_KEY, "X-Request-Id: gone-before-answer\r\n"))
    # The job is at the platform: the answer is seconds away. Now the client resets (RST, not FIN).
    assert wait_for(lambda: platform_asked(stack, video) > 0, 10), "the job never reached the platform"
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()

    assert wait_for(lambda: access_lines(stack, request_id="gone-before-answer"), 5), "no access line"
    [line] = access_lines(stack, request_id="gone-before-answer")
    assert (line["status"], line["path"], line["key_id"]) == (499, TRANSCRIPT, "gone2")
    assert wait_for(lambda: gw.metric("vts_http_requests_total", route=TRANSCRIPT, status="499") == gone_before + 1,
                    5)
    # The unit reserved at admission goes back once the job ends (the answer had no one to go to).
    assert wait_for(lambda: gw.metric("vts_ratelimit_quota_refunds_total") == refunds_before + 1, 10)

    # Both units of the month are still there: two transcripts, then the month is used up.
    first = stack.get(video, key=GONE_KEY)
    assert first.status == 200, first
    # The window counted the request that went (it was admitted); the month did not.
    assert first.headers["x-ratelimit-remaining"] == "999998"
    second = stack.get("benchGone02", key=GONE_KEY)
    assert second.status == 200, second
    assert second.headers["x-ratelimit-remaining"] == "999997"
    over = stack.get("benchGone03", key=GONE_KEY)
    assert over.status == 429 and over.body == QUOTA_EXCEEDED
    # Access lines are written once the worker's loop turn ends, maybe just after the client has its answer.
    assert wait_for(lambda: [rec["status"] for rec in access_lines(stack, key_id="gone2")] == [499, 200, 200, 429],
                    5), [rec["status"] for rec in access_lines(stack, key_id="gone2")]


def test_a_half_close_after_pipelined_requests_still_gets_every_answer(stack):
    gw = stack.gateway
    gone_before = gw.metric("vts_http_requests_total", route=TRANSCRIPT, status="499")
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
        s.sendall(request_bytes("slowHalf001", ACTIVE_KEY, "X-Request-Id: half-1\r\n") +
                  request_bytes("benchHalf01", ACTIVE_KEY, "X-Request-Id: half-2\r\nConnection: close\r\n"))
        s.shutdown(socket.SHUT_WR)  # the client has said everything; it still reads
        data = read_until_close(s, 10)
    answers = parse_responses(data)
    assert [st for st, _, _ in answers] == [200, 200], data[:300]
    assert [h["x-request-id"] for _, h, _ in answers] == ["half-1", "half-2"]
    assert all(json.loads(body)["source"] == "captions" for _, _, body in answers)
    assert gw.metric("vts_http_requests_total", route=TRANSCRIPT, status="499") == gone_before


def test_if_none_match_star_on_a_video_never_fetched_is_an_ordinary_request(stack):
    video = "benchStar01"
    assert platform_asked(stack, video) == 0
    first = stack.get(video, key=STAR_KEY, headers={"If-None-Match": "*"})
    # The platform had to work for it: a 200 with the transcript, and its unit of the month.
    assert first.status == 200, first
    assert json.loads(first.body)["language"] == "en"
    assert platform_asked(stack, video) > 0
    asked = platform_asked(stack, video)
    # Now the service holds it: the same revalidation is a 304, answered without the platform and free.
    again = stack.get(video, key=STAR_KEY, headers={"If-None-Match": "*"})
    assert again.status == 304 and again.body == b""
    assert again.headers["etag"] == first.headers["etag"]
    assert platform_asked(stack, video) == asked
    # One unit of the month was spent (the first answer), one is left.
    assert stack.get(video, key=STAR_KEY).status == 200
    over = stack.get(video, key=STAR_KEY)
    assert over.status == 429 and over.body == QUOTA_EXCEEDED


@pytest.mark.parametrize("query,accept,content_type,vary", [
    ("", None, "application/json", "Accept, Accept-Encoding"),
    ("", "application/json", "application/json", "Accept, Accept-Encoding"),
    ("", "text/vtt", "text/vtt; charset=utf-8", "Accept"),
    ("", "application/x-subrip", "application/x-subrip; charset=utf-8", "Accept"),
    ("&format=json", "text/vtt", "application/json", "Accept-Encoding"),
    ("&format=vtt", "application/json", "text/vtt; charset=utf-8", None),
])
def test_vary_names_accept_wherever_accept_chose_the_format(stack, query, accept, content_type, vary):
    headers = {"Accept": accept} if accept else {}
    r = stack.get(query="video_id=capJson3xx1" + query, headers=headers)
    assert r.status == 200, r
    assert r.headers["content-type"] == content_type
    assert r.headers.get("vary") == vary


def test_a_304_varies_as_its_200(stack):
    first = stack.get("capJson3xx1")
    r = stack.get("capJson3xx1", headers={"If-None-Match": first.headers["etag"]})
    assert r.status == 304 and r.headers["vary"] == "Accept, Accept-Encoding"


def test_a_track_list_varies_on_accept_encoding_only(stack):
    r = stack.gateway.request("GET", "/v1/video/tracks?video_id=capJson3xx1", headers={"x-api-key": ACTIVE_KEY,
                                                                                        "Accept": "text/vtt"})
    assert r.status == 200, r
    assert r.headers["content-type"] == "application/json"
    assert r.headers["vary"] == "Accept-Encoding"


def client_cache(stack, path, accepts):
    """Runs tests/contract/client_cache.mjs (a private client cache on http-cache-semantics): one answer dict per Accept
    value."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the client cache (tests/contract) cannot run")
    if not (CONTRACT_DIR / "node_modules" / "http-cache-semantics").is_dir():
        npm = shutil.which("npm")
        assert npm is not None, "node is installed but npm is not: cannot install tests/contract"
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=CONTRACT_DIR, check=True,
                       timeout=300)
    run = subprocess.run([node, "client_cache.mjs", stack.gateway.url, ACTIVE_KEY, path, *accepts], cwd=CONTRACT_DIR,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()]


def test_a_client_cache_keeps_json_and_webvtt_apart(stack):
    path = f"{TRANSCRIPT}?video_id=capJson3xx1&cc=1"
    json_a, vtt, json_b, srt = client_cache(stack, path, ["application/json", "text/vtt", "application/json",
                                                          "application/x-subrip"])
    assert (json_a["status"], json_a["contentType"]) == (200, "application/json")
    assert json.loads(json_a["body"])["language"] == "en"
    # Asked for WebVTT, the client gets WebVTT from the gateway, not the JSON its cache holds for the same URL.
    assert (vtt["status"], vtt["contentType"]) == (200, "text/vtt; charset=utf-8"), vtt
    assert vtt["body"].startswith("WEBVTT\n")
    assert vtt["requestId"] != json_a["requestId"]
    # Asked for JSON again, the cache answers with what it stored: the same answer, the same request id.
    assert json_b["body"] == json_a["body"] and json_b["requestId"] == json_a["requestId"]
    assert (srt["contentType"], srt["vary"]) == ("application/x-subrip; charset=utf-8", "Accept")
    assert srt["body"].startswith("1\n00:00:00,120 --> ")
