"""Cached transcripts as a client sees them, through the real binaries: today's bytes for a client that asks for no
encoding, gzip and brotli forms that decode to exactly those bytes, ETag and If-None-Match revalidation (304 with the
rate-limit headers, counted by the short window and not by the monthly quota), Cache-Control, Vary, and a client
that never reads its answer losing its connection at the write deadline.

The gateway runs one worker, so that a revalidation reaches the worker whose cache holds the transcript."""
import gzip
import os
import re
import signal
import socket
import threading
import time
from pathlib import Path

import brotli  # Debian's python3-brotli (deploy/deps.sh)
import pytest

from conftest import ACTIVE_KEY, parse_responses, raw_exchange
from stack import Stack
from vtsproc import wait_for

SMALL = "capJson3xx1"  # a 200 body under 1 KB: never compressed
LONG = "long1500seg"  # a 200 body of tens of KB
HOUR = "longHour248"  # a 248 KB body, an hour of talk
SMALL_BODY = (b'{"language":"en","source":"captions","text":"Hello and welcome to the fake platform",'
              b'"segments":[{"text":"Hello and welcome","start":0.12,"duration":2.4},'
              b'{"text":"to the fake platform","start":2.52,"duration":3}]}')
WINDOW_KEY = "vts_test_key_window4"  # 4 requests per hour-long window, a large quota
QUOTA_KEY = "vts_test_key_quota2"  # a large window, 2 requests a month
# Besides the stack's own unlimited key (ACTIVE_KEY).
KEYS = [
    ("window4", WINDOW_KEY, "active", 4, 3600, 1000000),
    ("quota2", QUOTA_KEY, "active", 1000000, 3600, 2),
]
ETAG = re.compile(r'^"[0-9a-f]{32}(-gz|-br)?"$')
LATE_KEY = "vts_test_key_quota1"  # a large window, 2 requests a month
KEYS.append(("quota1", LATE_KEY, "active", 1000000, 3600, 2))
BURST_KEY = "vts_test_key_quota9"  # a large window, 9 requests a month
KEYS.append(("quota9", BURST_KEY, "active", 1000000, 3600, 9))
FAIL_KEY = "vts_test_key_quota4"  # a large window, 4 requests a month
KEYS.append(("quota4", FAIL_KEY, "active", 1000000, 3600, 4))
LIMITS_H = Path(__file__).resolve().parents[2] / "common" / "limits.h"
# How long a worker's own cache (L1) keeps a body, from the one place it is declared.
L1_TTL_S = int(re.search(r"#define VTS_L1_CACHE_TTL_MS (\d+)", LIMITS_H.read_text()).group(1)) / 1000


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    s = Stack(tmp_path_factory.mktemp("cached"), workers=1, keys=KEYS,
              gateway_env={"VTS_JOB_TIMEOUT_MS": "4000", "VTS_WRITE_TIMEOUT_MS": "500"})
    yield s
    s.close()


def get(stack, video, key=ACTIVE_KEY, **headers):
    h = {"x-api-key": key}
    h.update({k.replace("_", "-"): v for k, v in headers.items()})
    return stack.get(video, headers=h)


def raw_get(stack, video, extra=b""):
    req = (b"GET /v1/video/transcript?video_id=" + video.encode() + b" HTTP/1.1\r\nHost: t\r\nx-api-key: " +
           ACTIVE_KEY.encode() + b"\r\n" + extra + b"Connection: close\r\n\r\n")
    data = raw_exchange(stack.gateway.port, req)
    head = data.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    return head[0], [line.split(":", 1)[0] for line in head[1:]], parse_responses(data)[0]


def test_no_accept_encoding_answer_is_todays_body_and_headers_plus_validators(stack):
    status_line, names, (status, headers, body) = raw_get(stack, SMALL)
    assert status_line == "HTTP/1.1 200 OK"
    # Today's headers in today's order and values, then the three this change adds, then Connection as before.
    assert names == ["Content-Type", "Content-Length", "Date", "X-Request-Id", "X-RateLimit-Limit",
                     "X-RateLimit-Remaining", "X-RateLimit-Reset", "ETag", "Cache-Control", "Vary", "Connection"]
    assert body == SMALL_BODY
    assert headers["content-type"] == "application/json"
    assert headers["content-length"] == str(len(SMALL_BODY))
    assert ETAG.match(headers["etag"]) and not headers["etag"].endswith(('-gz"', '-br"')), headers["etag"]
    assert headers["vary"] == "Accept, Accept-Encoding"
    assert "content-encoding" not in headers


def test_gzip_and_brotli_forms_decode_to_exactly_the_identity_body(stack):
    plain = get(stack, LONG)
    assert plain.status == 200, plain
    assert "content-encoding" not in plain.headers
    assert len(plain.body) > 20000
    tag = plain.headers["etag"][1:-1]

    gz = get(stack, LONG, accept_encoding="gzip")
    assert gz.status == 200, gz
    assert gz.headers["content-encoding"] == "gzip"
    assert gz.headers["content-length"] == str(len(gz.body))
    assert len(gz.body) < len(plain.body) // 4
    assert gzip.decompress(gz.body) == plain.body
    assert gz.headers["etag"] == f'"{tag}-gz"'
    assert gz.headers["vary"] == "Accept, Accept-Encoding"

    br = get(stack, LONG, accept_encoding="gzip, deflate, br")
    assert br.status == 200, br
    assert br.headers["content-encoding"] == "br"
    assert br.headers["content-length"] == str(len(br.body))
    assert brotli.decompress(br.body) == plain.body
    assert br.headers["etag"] == f'"{tag}-br"'


def test_compressed_answer_headers_in_order(stack):
    status_line, names, (status, headers, body) = raw_get(stack, LONG, b"Accept-Encoding: gzip\r\n")
    assert status_line == "HTTP/1.1 200 OK"
    assert names == ["Content-Type", "Content-Length", "Date", "X-Request-Id", "X-RateLimit-Limit",
                     "X-RateLimit-Remaining", "X-RateLimit-Reset", "ETag", "Cache-Control", "Vary", "Content-Encoding",
                     "Connection"]
    assert headers["content-encoding"] == "gzip" and headers["content-length"] == str(len(body))
    assert gzip.decompress(body) == get(stack, LONG).body


def test_accept_encoding_lines_are_joined_and_an_overlong_one_is_ignored(stack):
    # Two lines are one list: "identity;q=0.1, gzip".
    _, _, (_, headers, _) = raw_get(stack, LONG, b"Accept-Encoding: identity;q=0.1\r\nAccept-Encoding: gzip\r\n")
    assert headers["content-encoding"] == "gzip"
    # Past VTS_MAX_ACCEPT_ENCODING_BYTES (256) the header is ignored: the body as it is.
    long_value = b"x-unknown-coding;q=0.1, " * 11 + b"gzip"
    assert len(long_value) > 256
    _, _, (status, headers, body) = raw_get(stack, LONG, b"Accept-Encoding: " + long_value + b"\r\n")
    assert status == 200 and "content-encoding" not in headers
    assert body == get(stack, LONG).body


@pytest.mark.parametrize("accept,coding", [
    ("br;q=0.5, gzip", "gzip"),
    ("gzip;q=0, br;q=0.1", "br"),
    ("identity", None),
    ("gzip;q=0.4, identity;q=0.5", None),
    ("*", "br"),
    ("*;q=0", None),
    ("deflate, zstd", None),
    ("X-GZIP", "gzip"),
])
def test_accept_encoding_q_values_pick_the_form(stack, accept, coding):
    r = get(stack, LONG, accept_encoding=accept)
    assert r.status == 200, r
    assert r.headers.get("content-encoding") == coding, (accept, r.headers)
    assert r.headers["content-length"] == str(len(r.body))


def test_head_with_gzip_announces_the_encoded_length(stack):
    gz = get(stack, LONG, accept_encoding="gzip")
    h = {"x-api-key": ACTIVE_KEY, "accept-encoding": "gzip"}
    r = stack.gateway.request("HEAD", "/v1/video/transcript?video_id=" + LONG, headers=h)
    assert r.status == 200 and r.body == b""
    assert r.headers["content-encoding"] == "gzip"
    assert r.headers["content-length"] == str(len(gz.body))


def test_small_bodies_and_errors_are_never_compressed(stack):
    small = get(stack, SMALL, accept_encoding="gzip, br")
    assert small.status == 200 and small.body == SMALL_BODY
    assert "content-encoding" not in small.headers
    assert small.headers["vary"] == "Accept, Accept-Encoding"

    missing = get(stack, "noCaptions1", accept_encoding="gzip, br")
    assert missing.status == 404
    assert missing.body == (b'{"error":{"code":"transcript_not_available",'
                            b'"message":"No accessible transcript was found for this video."}}')
    for h in ("content-encoding", "etag", "cache-control", "vary"):
        assert h not in missing.headers, (h, missing.headers)

    bad = get(stack, "short", accept_encoding="gzip")
    assert bad.status == 400 and "content-encoding" not in bad.headers and "etag" not in bad.headers

    unauth = stack.gateway.request("GET", "/v1/video/transcript?video_id=" + LONG, headers={"accept-encoding": "gzip"})
    assert unauth.status == 401 and "content-encoding" not in unauth.headers


def test_cache_control_is_private_with_the_remaining_lifetime(stack):
    r = get(stack, LONG)
    m = re.fullmatch(r"private, max-age=(\d+)", r.headers["cache-control"])
    assert m, r.headers["cache-control"]
    # The dispatcher keeps a transcript for VTS_CACHE_TTL_S (default 86400 s); the entry is seconds old.
    assert 86000 <= int(m.group(1)) <= 86400, m.group(1)


def test_if_none_match_answers_304_with_rate_limit_headers_and_no_body(stack):
    first = get(stack, LONG, accept_encoding="gzip")
    etag = first.headers["etag"]
    status_line, names, (status, headers, body) = raw_get(
        stack, LONG, b"Accept-Encoding: gzip\r\nIf-None-Match: " + etag.encode() + b"\r\n")
    assert status_line == "HTTP/1.1 304 Not Modified"
    assert names == ["Date", "X-Request-Id", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
                     "ETag", "Cache-Control", "Vary", "Connection"]
    assert body == b""
    assert headers["etag"] == etag
    assert headers["vary"] == "Accept, Accept-Encoding"
    assert headers["cache-control"].startswith("private, max-age=")

    # The contract check of the harness sees the 304 as well.
    r = get(stack, LONG, accept_encoding="gzip", if_none_match=f'"nope", W/{etag}')
    assert r.status == 304 and r.body == b""
    assert r.headers["etag"] == etag

    # The tag of another form, or of nothing we hold, is a full answer.
    other = get(stack, LONG, if_none_match=etag)
    assert other.status == 200 and "content-encoding" not in other.headers
    assert other.headers["etag"] == etag.replace("-gz", "")
    stale = get(stack, LONG, accept_encoding="gzip", if_none_match='"0123"')
    assert stale.status == 200 and stale.headers["content-encoding"] == "gzip"
    star = get(stack, LONG, if_none_match="*")
    assert star.status == 304


def test_a_304_is_counted_under_its_own_status(stack):
    etag = get(stack, LONG).headers["etag"]

    def counts():
        return {st: stack.gateway.metric("vts_http_requests_total", route="/v1/video/transcript", status=st)
                for st in ("304", "other")}

    before = counts()
    r = get(stack, LONG, if_none_match=etag)
    assert r.status == 304, r
    # The worker counts an answer once it has been written, which may be just after the client read it.
    want = {"304": before["304"] + 1, "other": before["other"]}
    assert wait_for(lambda: counts() == want, 5), f"before {before}, now {counts()}, expected {want}"


def test_a_304_counts_in_the_short_window(stack):
    first = get(stack, SMALL, key=WINDOW_KEY)
    assert first.status == 200 and first.headers["x-ratelimit-remaining"] == "3"
    etag = first.headers["etag"]
    for left in ("2", "1", "0"):
        r = get(stack, SMALL, key=WINDOW_KEY, if_none_match=etag)
        assert r.status == 304, r
        assert r.headers["x-ratelimit-remaining"] == left
        assert r.headers["x-ratelimit-limit"] == "4"
    limited = get(stack, SMALL, key=WINDOW_KEY, if_none_match=etag)
    assert limited.status == 429 and limited.json()["error"]["code"] == "rate_limited"
    assert "retry-after" in limited.headers


def test_a_304_does_not_count_against_the_monthly_quota(stack):
    # QUOTA_KEY: a window of 1,000,000 requests, a month of 2.
    first = get(stack, SMALL, key=QUOTA_KEY)
    assert first.status == 200 and first.headers["x-ratelimit-remaining"] == "999999"
    etag = first.headers["etag"]
    refunds = stack.gateway.metric("vts_ratelimit_quota_refunds_total")
    for n in range(5):
        r = get(stack, SMALL, key=QUOTA_KEY, if_none_match=etag)
        assert r.status == 304, r
        # Counted in the window (its remainder is what the header says), not in the month.
        assert r.headers["x-ratelimit-remaining"] == str(999998 - n)
    # Matched before the limiter, so no unit was reserved and none was given back.
    assert stack.gateway.metric("vts_ratelimit_quota_refunds_total") == refunds
    second = get(stack, SMALL, key=QUOTA_KEY)
    assert second.status == 200 and second.headers["x-ratelimit-remaining"] == "999993"
    over = get(stack, SMALL, key=QUOTA_KEY)
    assert over.status == 429 and over.json()["error"]["code"] == "quota_exceeded"
    # A month used up refuses a revalidation as it refuses any request.
    reval = get(stack, SMALL, key=QUOTA_KEY, if_none_match=etag)
    assert reval.status == 429 and reval.json()["error"]["code"] == "quota_exceeded"


def test_a_late_revalidation_is_a_304_without_quota_after_the_body_left_the_worker(stack):
    video = "multiLang01"  # a transcript no other test of this module asks for
    first = get(stack, video, key=LATE_KEY, accept_encoding="br")
    assert first.status == 200  # the first of the month's two requests
    etag = first.headers["etag"]
    # The worker's own cache drops the body after L1_TTL_S; what this test is about is what comes after that.
    time.sleep(L1_TTL_S + 0.5)  # the wait is the test: the worker's cache holds the body L1_TTL_S
    l1_hits = stack.gateway.metric("vts_cache_l1_hits_total")
    dispatcher_hits = stack.gateway.metric("vts_cache_hits_total")
    for _ in range(3):
        r = get(stack, video, key=LATE_KEY, accept_encoding="br", if_none_match=etag)
        assert r.status == 304, r
        assert r.headers["etag"] == etag
        assert int(re.fullmatch(r"private, max-age=(\d+)", r.headers["cache-control"]).group(1)) > 86000
    # Answered from the validator the worker keeps: neither its L1 nor the dispatcher was asked.
    assert stack.gateway.metric("vts_cache_l1_hits_total") == l1_hits
    assert stack.gateway.metric("vts_cache_hits_total") == dispatcher_hits
    # The three 304s took nothing of the month: its second request is served, a third is refused.
    assert get(stack, video, key=LATE_KEY).status == 200
    over = get(stack, video, key=LATE_KEY)
    assert over.status == 429 and over.json()["error"]["code"] == "quota_exceeded"


def test_a_client_that_never_reads_is_closed_at_the_write_deadline(stack):
    assert get(stack, HOUR).status == 200
    gw = stack.gateway
    before = gw.metric("vts_http_connections_open")
    s = socket.socket()
    # A tiny receive window: the answers pile up in the server's send buffer and then in the writer.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", gw.port))
    try:
        req = (b"GET /v1/video/transcript?video_id=" + HOUR.encode() + b" HTTP/1.1\r\nHost: t\r\nx-api-key: " +
               ACTIVE_KEY.encode() + b"\r\n\r\n")
        # 15 MB of answers: more than the kernel buffers of both ends hold.
        s.sendall(req * 60)
        assert wait_for(lambda: gw.metric("vts_http_connections_open") == before + 1, 5)
        # VTS_WRITE_TIMEOUT_MS is 500: the stuck write ends the connection without a byte read by us.
        assert wait_for(lambda: gw.metric("vts_http_connections_open") == before, 5), \
            "the connection of a client that does not read stayed open past the write deadline"
    finally:
        s.close()
    assert get(stack, SMALL).status == 200


def body_files(pid, state_dir):
    """The files holding cached bodies that process pid has open: unnamed files of the state directory (O_TMPFILE,
    which /proc names "<dir>/#<inode> (deleted)"), and memory files, which a gateway uses where that cannot be."""
    fds = Path("/proc/%d/fd" % pid)
    names = []
    for fd in fds.iterdir():
        try:
            names.append(os.readlink(fd))
        except OSError:
            pass  # closed meanwhile
    unnamed = [n for n in names if n.startswith(str(state_dir) + "/#") and n.endswith(" (deleted)")]
    return unnamed, [n for n in names if n.startswith("/memfd:vts-body")]


def test_a_large_body_goes_out_from_an_unnamed_file_of_the_state_directory_byte_for_byte(stack):
    gzipped = get(stack, HOUR, accept_encoding="gzip")
    assert gzipped.status == 200 and gzipped.headers["content-encoding"] == "gzip"
    want = gzip.decompress(gzipped.body)  # the gzip form is made from the bytes the worker holds in memory
    assert len(want) > 64 * 1024
    # The one worker holds the body in an unnamed file of the state directory, which it sends from; a smaller body
    # stays in memory; no memory file is used where the state directory can hold unnamed files (ext4, tmpfs).
    (worker,) = stack.gateway.worker_pids()
    unnamed, memfds = body_files(worker, stack.gateway.state_dir)
    assert len(unnamed) >= 1 and memfds == []  # this one's, and maybe another large body earlier tests left cached
    assert get(stack, SMALL).status == 200 and body_files(worker, stack.gateway.state_dir) == (unnamed, [])
    assert [p.name for p in stack.gateway.state_dir.iterdir() if p.name.startswith("#")] == []
    # Three answers on one connection (keep-alive, pipelined): each is exactly the body, after exactly its head.
    req = (b"GET /v1/video/transcript?video_id=" + HOUR.encode() + b" HTTP/1.1\r\nHost: t\r\nx-api-key: " +
           ACTIVE_KEY.encode() + b"\r\n\r\n")
    data = raw_exchange(stack.gateway.port, req * 2 + req.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
    answers = parse_responses(data)
    assert [(status, headers["content-length"], body == want) for status, headers, body in answers] == \
        [(200, str(len(want)), True)] * 3
    # A reader with a tiny window asking for 6 MB, more than the server's socket holds: a file is sent in part (the
    # socket full), its rest by the usual write once the reader makes room, and the next answer's file after it.
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(10)
        s.connect(("127.0.0.1", stack.gateway.port))
        s.sendall(req * 23 + req.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        time.sleep(0.2)  # the wait is the test: a reader that holds back while the server fills the socket
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    answers = parse_responses(b"".join(chunks))
    assert [(status, body == want) for status, _, body in answers] == [(200, True)] * 24
    # HEAD announces the length and sends no body.
    head = raw_exchange(stack.gateway.port, req.replace(b"GET ", b"HEAD ", 1).replace(
        b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
    ((status, headers, body),) = parse_responses(head, methods=["HEAD"])
    assert status == 200 and headers["content-length"] == str(len(want)) and body == b""
    assert head.endswith(b"\r\n\r\n")


def test_concurrent_misses_on_one_worker_make_one_dispatch_and_each_answer_is_its_own(stack):
    video = "slowSingle1"  # the platform takes 1.5 s: every request misses while the first is in flight
    names = ["vts_cache_misses_total", "vts_cache_hits_total", "vts_coalesced_requests_total",
             "vts_cache_l1_waits_total", "vts_cache_l1_hits_total"]
    before = {n: stack.gateway.metric(n) for n in names}
    # Eight requests of one month's key at once, each with its own form: identity, gzip, and the text format.
    asks = [{}, {}, {}, {"accept-encoding": "gzip"}, {"accept-encoding": "gzip"}, {"accept-encoding": "br"},
            {"format": "text"}, {"format": "text"}]
    answers = [None] * len(asks)
    start = threading.Barrier(len(asks))

    def ask(i):
        h = {"x-api-key": BURST_KEY}
        h.update({k: v for k, v in asks[i].items() if k != "format"})
        query = "video_id=" + video + ("&format=text" if "format" in asks[i] else "")
        start.wait()
        answers[i] = stack.get(query=query, headers=h)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(asks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert [a.status for a in answers] == [200] * len(asks), answers
    assert stack.requests().get("POST /youtubei/v1/player " + video) == 1
    after = {n: stack.gateway.metric(n) for n in names}
    moved = {n: after[n] - before[n] for n in names}
    # One request reached the dispatcher (one miss there, nothing coalesced there); the seven others waited on it in
    # the worker.
    assert moved == {"vts_cache_misses_total": 1, "vts_cache_hits_total": 0, "vts_coalesced_requests_total": 0,
                     "vts_cache_l1_waits_total": 7, "vts_cache_l1_hits_total": 0}, moved
    json_bodies = [a.body for a, h in zip(answers, asks) if not h]
    assert json_bodies == [SMALL_BODY] * 3
    for a, h in zip(answers, asks):
        if "format" in h:
            assert a.headers["content-type"] == "text/plain; charset=utf-8"
            assert a.body == b"Hello and welcome to the fake platform"
            continue
        enc = h.get("accept-encoding")
        # A body under 1 KB is never compressed: every JSON answer is the identity form, with its one ETag.
        assert "content-encoding" not in a.headers, (enc, a.headers)
        assert a.body == SMALL_BODY
        assert ETAG.match(a.headers["etag"])
    assert len({a.headers["etag"] for a, h in zip(answers, asks) if "format" not in h}) == 1
    # Each of the eight spent its own unit, as if it had asked alone: the month's ninth is served, the tenth refused.
    assert get(stack, video, key=BURST_KEY).status == 200
    over = get(stack, video, key=BURST_KEY)
    assert over.status == 429 and over.json()["error"]["code"] == "quota_exceeded"


def test_concurrent_misses_that_fail_share_the_failure_and_each_gets_its_unit_back(stack):
    video = "hangPlayer1"  # the platform never answers: the fetcher gives up on it within the job's 4 s
    names = ["vts_cache_misses_total", "vts_coalesced_requests_total", "vts_cache_l1_waits_total"]
    before = {n: stack.gateway.metric(n) for n in names}
    answers = [None] * 4
    start = threading.Barrier(len(answers))

    def ask(i):
        start.wait()
        answers[i] = get(stack, video, key=FAIL_KEY)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(answers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    moved = {n: stack.gateway.metric(n) - before[n] for n in names}
    assert moved == {"vts_cache_misses_total": 1, "vts_coalesced_requests_total": 0, "vts_cache_l1_waits_total": 3}, \
        moved
    # The first one's answer is every one's, each with its own request's id.
    assert [a.status for a in answers] == [502] * 4, answers
    assert [a.json()["error"]["code"] for a in answers] == ["upstream_transcript_failed"] * 4
    assert len({a.headers["x-request-id"] for a in answers}) == 4
    # None of the four spent a unit: the month's four are all still there.
    assert [get(stack, SMALL, key=FAIL_KEY).status for _ in range(4)] == [200] * 4
    over = get(stack, SMALL, key=FAIL_KEY)
    assert over.status == 429 and over.json()["error"]["code"] == "quota_exceeded"


REFRESH_AHEAD_S = int(re.search(r"#define VTS_L1_REFRESH_AHEAD_MS (\d+)", LIMITS_H.read_text()).group(1)) / 1000


def test_a_hot_transcript_stays_in_the_workers_cache_renewed_by_a_304_from_the_dispatcher(stack):
    """A transcript asked for every 100 ms for two and a half of L1's lifetimes: after the first request, every one is
    answered from the worker's own cache, and none waits for the dispatcher. The worker refreshes the entry in its last
    part (one refresh a lifetime, at most one in flight), each a hit of the dispatcher's cache answered with a 304
    there; without it, the entry would end under the requests and the next one would wait for the whole body back."""
    video = "benchL1Refr"  # a transcript no other test of this module asks for
    first = get(stack, video)
    assert first.status == 200
    etag = first.headers["etag"]
    names = ["vts_cache_l1_hits_total", "vts_cache_l1_refreshes_total", "vts_cache_hits_total",
             "vts_dispatch_not_modified_total", "vts_cache_misses_total", "vts_cache_l1_waits_total"]
    before = {n: stack.gateway.metric(n) for n in names}
    asked = 0
    until = time.monotonic() + 2.5 * L1_TTL_S
    while time.monotonic() < until:
        r = get(stack, video)
        assert (r.status, r.headers["etag"], r.body) == (200, etag, first.body)
        asked += 1
        time.sleep(0.1)  # the wait is the test: the pace of a hot transcript's requests
    moved = {n: stack.gateway.metric(n) - before[n] for n in names}
    refreshes = moved["vts_cache_l1_refreshes_total"]
    # One a lifetime: the first in the first lifetime's last part, then one in each renewed lifetime's.
    assert 2 <= refreshes <= 2.5 * L1_TTL_S / (L1_TTL_S - REFRESH_AHEAD_S), moved
    assert moved == {"vts_cache_l1_hits_total": asked, "vts_cache_l1_refreshes_total": refreshes,
                     "vts_cache_hits_total": refreshes, "vts_dispatch_not_modified_total": refreshes,
                     "vts_cache_misses_total": 0, "vts_cache_l1_waits_total": 0}, moved


def test_a_transcript_whose_copy_just_ended_is_answered_from_it_while_a_304_renews_it(stack):
    """No request came in the copy's last part, so it ended; asked again within L1's lifetime after that (the shared
    entry alive), the worker answers from the copy at once and sends one refresh, which the dispatcher's 304 answers:
    the next request is an ordinary hit of the renewed copy, with no refresh."""
    video = "benchL1Stal"  # a transcript no other test of this module asks for
    first = get(stack, video)
    assert first.status == 200
    names = ["vts_cache_l1_hits_total", "vts_cache_l1_refreshes_total", "vts_cache_hits_total",
             "vts_dispatch_not_modified_total", "vts_cache_misses_total"]
    time.sleep(L1_TTL_S + 1)  # the wait is the test: the copy has ended, a second ago
    before = {n: stack.gateway.metric(n) for n in names}
    r = get(stack, video)
    assert (r.status, r.headers["etag"], r.body) == (200, first.headers["etag"], first.body)
    assert wait_for(lambda: stack.gateway.metric("vts_dispatch_not_modified_total") ==
                    before["vts_dispatch_not_modified_total"] + 1, 5)
    r = get(stack, video)
    assert (r.status, r.headers["etag"], r.body) == (200, first.headers["etag"], first.body)
    moved = {n: stack.gateway.metric(n) - before[n] for n in names}
    assert moved == {"vts_cache_l1_hits_total": 2, "vts_cache_l1_refreshes_total": 1, "vts_cache_hits_total": 1,
                     "vts_dispatch_not_modified_total": 1, "vts_cache_misses_total": 0}, moved


def test_a_copy_the_dispatcher_no_longer_holds_is_dropped_when_its_refresh_says_so(tmp_path):
    """The dispatcher restarted while a worker held a transcript's copy, so its memory cache no longer holds the
    answer. The copy still answers in its last second and sends its refresh, which the new dispatcher answers from its
    memory cache alone: not held there, and nothing fetched for it. The worker drops the copy then, so the next request,
    within what was the copy's lifetime, is a miss that asks the dispatcher again (the platform's second fetch) instead
    of an answer from what the dispatcher no longer holds."""
    s = Stack(tmp_path, workers=1, fetchers=1)
    try:
        video = "benchL1Gone"
        player = "POST /youtubei/v1/player " + video
        first = s.get(video)
        copied = time.monotonic()
        assert first.status == 200
        assert s.requests()[player] == 1
        [dispatcher] = s.gateway.dispatcher_pids()
        os.kill(dispatcher, signal.SIGKILL)
        assert wait_for(lambda: [p for p in s.gateway.dispatcher_pids() if p != dispatcher], 3), "not replaced"
        assert wait_for(lambda: s.gateway.metric("vts_fetchers_connected") == 1, 3), "the fetcher did not come back"
        last_part = copied + L1_TTL_S - REFRESH_AHEAD_S / 2 - time.monotonic()
        assert last_part > 0, "the dispatcher took the copy's lifetime to come back"
        time.sleep(last_part)  # the wait is the test: into the copy's last part, where a hit sends its refresh
        names = ["vts_cache_l1_hits_total", "vts_cache_l1_refreshes_total", "vts_cache_l1_drops_total"]
        before = {n: s.gateway.metric(n) for n in names}
        r = s.get(video)
        assert (r.status, r.headers["etag"], r.body) == (200, first.headers["etag"], first.body)
        assert wait_for(lambda: s.gateway.metric("vts_cache_l1_drops_total") == before["vts_cache_l1_drops_total"] + 1,
                        3), "the copy was not dropped"
        assert s.requests()[player] == 1
        asked = time.monotonic()
        r = s.get(video)
        assert (r.status, r.headers["etag"], r.body) == (200, first.headers["etag"], first.body)
        assert asked < copied + L1_TTL_S - 0.1, "asked too late: the copy would have ended by itself"
        assert s.requests()[player] == 2
        moved = {n: s.gateway.metric(n) - before[n] for n in names}
        assert moved == {"vts_cache_l1_hits_total": 1, "vts_cache_l1_refreshes_total": 1,
                         "vts_cache_l1_drops_total": 1}, moved
    finally:
        s.close()
