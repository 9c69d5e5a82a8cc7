"""Refusals of POST /v1/jobs cost the service almost nothing: a missing or bad key, a spent short window and a full
cap of open jobs are answered when the head ends, before a byte of the body is read. Asserted on the raw bytes: no
100 Continue, the refusal, and the connection closed while the body is still to come; a worker that refused a hundred
1 MiB bodies holds no more memory than before."""
import json
import socket
from pathlib import Path

from conftest import ACTIVE_KEY, parse_responses, read_until_close
from contract import error_body

IDS = ["refusal%04d" % i for i in range(100)]
MIB = 1 << 20


def keys(rate=1000000):
    return [("test-active", ACTIVE_KEY, "active", rate, 3600, 1000000000)]


def head(key, length, expect=True):
    lines = ["POST /v1/jobs HTTP/1.1", "Host: x", "content-type: application/json", "Content-Length: %d" % length]
    if key is not None:
        lines.append("x-api-key: " + key)
    if expect:
        lines.append("Expect: 100-continue")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def refused_at_head(gw, key, length=MIB, expect=True, sent=b""):
    """Sends a head (and sent, the start of its body), never the rest: returns every byte the gateway answered before
    it closed the connection, and whether it closed (rather than waiting for the body)."""
    with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as s:
        s.sendall(head(key, length, expect) + sent)
        data = read_until_close(s, timeout=5)
        s.settimeout(0.5)
        try:
            closed = s.recv(1) == b""
        except ConnectionResetError:
            closed = True
        except socket.timeout:
            closed = False
    return data, closed


def post_small(gw, body):
    raw = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as s:
        s.sendall(head(ACTIVE_KEY, len(raw), expect=False) + raw)
        s.shutdown(socket.SHUT_WR)
        [(status, h, answer)] = parse_responses(read_until_close(s))
    return status, h, json.loads(answer)


def assert_refused(data, closed, status, code):
    assert not data.startswith(b"HTTP/1.1 100"), data[:200]
    [(got, h, body)] = parse_responses(data)
    assert (got, json.loads(body)) == (status, error_body(code)), data[:400]
    assert h["connection"] == "close"
    assert closed, "the connection stays open waiting for a body that is never read"


def test_a_post_without_a_key_is_401_before_its_body(make_gateway):
    gw = make_gateway(keys=keys())
    data, closed = refused_at_head(gw, None)
    assert_refused(data, closed, 401, "UNAUTHORIZED")
    # Without Expect, with the body's first 64 KiB already sent: the same answer, the rest never asked for.
    data, closed = refused_at_head(gw, None, expect=False, sent=b"[" * 65536)
    assert_refused(data, closed, 401, "UNAUTHORIZED")


def test_a_post_with_a_bad_key_is_401_before_its_body(make_gateway):
    gw = make_gateway(keys=keys())
    data, closed = refused_at_head(gw, "vts_no_such_key")
    assert_refused(data, closed, 401, "UNAUTHORIZED")


def test_a_spent_window_is_429_before_the_body(make_gateway):
    gw = make_gateway(keys=keys(rate=1))
    assert post_small(gw, {"video_ids": IDS[:1]})[0] == 202
    data, closed = refused_at_head(gw, ACTIVE_KEY)
    assert_refused(data, closed, 429, "rate_limited")


def test_a_full_cap_of_open_jobs_is_429_before_the_body(make_gateway):
    gw = make_gateway(env={"VTS_JOBS_MAX_OPEN": "1"}, keys=keys())
    assert post_small(gw, {"video_ids": IDS[:1]})[0] == 202
    data, closed = refused_at_head(gw, ACTIVE_KEY)
    assert_refused(data, closed, 429, "too_many_open_jobs")


def test_an_admitted_post_hears_100_continue_and_keeps_its_connection(make_gateway):
    gw = make_gateway(keys=keys())
    body = json.dumps({"video_ids": IDS[:3]}).encode()
    with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as s:
        s.sendall(head(ACTIVE_KEY, len(body)))
        interim = b""
        while not interim.endswith(b"\r\n\r\n"):
            chunk = s.recv(1)
            assert chunk, interim
            interim += chunk
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        # The body in two writes, then a second request on the same connection.
        s.sendall(body[:5])
        s.sendall(body[5:] + b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        [(status, _, answer), (health, _, _)] = parse_responses(read_until_close(s))
    assert (status, json.loads(answer)["total"], health) == (202, 3, 200)


def rss_kib(pids):
    total = 0
    for pid in pids:
        for line in Path("/proc/%d/status" % pid).read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def test_a_hundred_unauthenticated_mib_bodies_grow_no_worker(make_gateway):
    # Under ASan, freed memory waits in a quarantine that would count as growth: none here.
    gw = make_gateway(env={"ASAN_OPTIONS": "detect_leaks=0:quarantine_size_mb=0"}, keys=keys(), workers=1)
    body = b"x" * MIB
    # One round first, so that what a first request allocates once (buffers, log lines) is in the baseline.
    refused_at_head(gw, None, expect=False, sent=body[:65536])
    before = rss_kib(gw.worker_pids())
    for i in range(100):
        with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as s:
            try:
                s.sendall(head(None, MIB, expect=bool(i % 2)) + body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused and closed before the whole body went: what the test wants
            read_until_close(s, timeout=5)
    grown = rss_kib(gw.worker_pids()) - before
    # Reading each body whole would hold a MiB per request at once and leave the heap far larger.
    assert grown < 8 * 1024, "the worker grew by %d KiB over 100 refused MiB bodies" % grown
