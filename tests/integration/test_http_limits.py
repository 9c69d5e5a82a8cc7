"""Limits of the HTTP front (common/limits.h and config): sizes, framing, timeouts, connection cap, memory."""

import re
import resource
import socket
import time
from pathlib import Path

from conftest import exchange_in_parts, parse_responses, raw_exchange, wait_for

BAD_REQUEST = b'{"error":{"code":"bad_request","message":"Malformed HTTP request."}}'
URI_TOO_LONG = b'{"error":{"code":"uri_too_long","message":"The request line is too long."}}'
HEADERS_TOO_LARGE = b'{"error":{"code":"headers_too_large","message":"The request headers are too large."}}'
PAYLOAD_TOO_LARGE = b'{"error":{"code":"payload_too_large","message":"This endpoint takes no request body."}}'
SERVICE_UNAVAILABLE = b'{"error":{"code":"service_unavailable","message":"The service is not accepting requests now."}}'
REQUEST_TIMEOUT = b'{"error":{"code":"request_timeout","message":"The request headers took too long."}}'

MAX_URL = 8 * 1024
MAX_HEADER_BYTES = 16 * 1024
MAX_HEADERS = 64


def one_answer(port, data, timeout=5.0):
    """Sends data, expects exactly one response and the connection closed well before timeout."""
    start = time.monotonic()
    raw = raw_exchange(port, data, timeout=timeout)
    assert time.monotonic() - start < timeout - 0.5, f"server kept the connection open: {raw[:300]!r}"
    got = parse_responses(raw)
    assert len(got) == 1, got
    return got[0]


def assert_error(port, data, status, body):
    st, headers, got = one_answer(port, data)
    assert (st, got) == (status, body)
    assert headers["connection"] == "close"
    assert headers["content-type"] == "application/json"


def test_url_over_limit_gets_414(gateway):
    path = "/" + "a" * (MAX_URL + 10)
    assert_error(gateway.port, f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode(), 414, URI_TOO_LONG)


def test_url_under_limit_is_routed(gateway):
    path = "/health?" + "a" * (MAX_URL - 200)
    st, _, _ = one_answer(gateway.port, f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
    assert st == 200


def test_header_bytes_over_limit_get_431(gateway):
    big = "b" * (MAX_HEADER_BYTES + 1)
    assert_error(gateway.port, f"GET /health HTTP/1.1\r\nHost: t\r\nX-Big: {big}\r\n\r\n".encode(), 431,
                 HEADERS_TOO_LARGE)


def test_header_bytes_just_under_limit_are_accepted(gateway):
    big = "b" * (MAX_HEADER_BYTES - 200)
    st, _, _ = one_answer(gateway.port,
                          f"GET /health HTTP/1.1\r\nHost: t\r\nX-Big: {big}\r\nConnection: close\r\n\r\n".encode())
    assert st == 200


def test_header_count_over_limit_gets_431(gateway):
    headers = "".join(f"X-H{i}: v\r\n" for i in range(MAX_HEADERS))
    assert_error(gateway.port, f"GET /health HTTP/1.1\r\nHost: t\r\n{headers}\r\n".encode(), 431, HEADERS_TOO_LARGE)


def test_header_count_at_limit_is_accepted(gateway):
    headers = "".join(f"X-H{i}: v\r\n" for i in range(MAX_HEADERS - 2))
    st, _, _ = one_answer(gateway.port,
                          f"GET /health HTTP/1.1\r\nHost: t\r\n{headers}Connection: close\r\n\r\n".encode())
    assert st == 200


def test_request_body_gets_413(gateway):
    assert_error(gateway.port, b"GET /health HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello", 413,
                 PAYLOAD_TOO_LARGE)


def test_request_body_on_a_route_without_that_method_is_405_not_413(gateway):
    # RFC 9110 15.5.6: the method is refused first; the body is never read (the connection closes).
    for path in ("/health", "/v1/video/transcript?video_id=abcdefghijk"):
        data = raw_exchange(gateway.port, f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello".encode())
        head = data.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
        assert head[0] == "HTTP/1.1 405 Method Not Allowed", data
        [(st, headers, body)] = parse_responses(data)
        assert headers["allow"] == "GET, HEAD"
        assert headers["connection"] == "close"
        assert body == b'{"error":{"code":"method_not_allowed","message":"Method not allowed for this resource."}}'


def test_request_body_on_an_unknown_path_is_404(gateway):
    st, headers, body = one_answer(gateway.port,
                                   b"PUT /nope HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello")
    assert st == 404 and headers["connection"] == "close"
    assert body == b'{"error":{"code":"not_found","message":"No such resource."}}'


def test_zero_content_length_is_accepted(gateway):
    st, _, _ = one_answer(gateway.port,
                          b"GET /health HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    assert st == 200


def test_transfer_encoding_gets_400(gateway):
    for te in ("chunked", "identity", "gzip, chunked"):
        assert_error(gateway.port,
                     f"GET /health HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: {te}\r\n\r\n0\r\n\r\n".encode(), 400,
                     BAD_REQUEST)


def test_transfer_encoding_with_content_length_gets_400(gateway):
    assert_error(gateway.port,
                 b"GET /health HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                 400, BAD_REQUEST)


def test_duplicate_content_length_gets_400(gateway):
    assert_error(gateway.port, b"GET /health HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
                 400, BAD_REQUEST)


def test_bare_cr_in_header_value_gets_400(gateway):
    assert_error(gateway.port, b"GET /health HTTP/1.1\r\nHost: t\r\nX-A: a\rb\r\n\r\n", 400, BAD_REQUEST)


def test_bare_cr_as_header_line_end_gets_400(gateway):
    # CVE-2023-30589 shape: a CR alone must not end a header line (and so cannot start a smuggled one).
    assert_error(gateway.port, b"GET /health HTTP/1.1\r\nHost: t\r\nX-A: a\rTransfer-Encoding: chunked\r\n\r\n",
                 400, BAD_REQUEST)


def test_bare_cr_split_across_reads_gets_400(gateway):
    data = exchange_in_parts(gateway.port, [b"GET /health HTTP/1.1\r\nHost: t\r\nX-A: a\r", b"X-B: b\r\n\r\n"])
    [(st, _, body)] = parse_responses(data)
    assert (st, body) == (400, BAD_REQUEST)


def test_obs_fold_gets_400(gateway):
    assert_error(gateway.port, b"GET /health HTTP/1.1\r\nHost: t\r\nX-A: a\r\n b\r\n\r\n", 400, BAD_REQUEST)


def test_bare_lf_line_ends_get_400(gateway):
    assert_error(gateway.port, b"GET /health HTTP/1.1\nHost: t\nX-A: a\n\n", 400, BAD_REQUEST)


def test_garbage_gets_400(gateway):
    assert_error(gateway.port, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n", 400, BAD_REQUEST)


def test_error_after_good_pipelined_request_keeps_order(gateway):
    raw = raw_exchange(gateway.port, b"GET /health HTTP/1.1\r\nHost: t\r\nX-Request-Id: good\r\n\r\n"
                                     b"GET /health HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
    got = parse_responses(raw)
    assert [(st, h["x-request-id"] == "good") for st, h, _ in got] == [(200, True), (400, False)]


def test_slowloris_gets_408_and_close(make_gateway):
    gw = make_gateway(env={"VTS_HEADER_TIMEOUT_MS": "500"}, workers=1)
    with socket.create_connection(("127.0.0.1", gw.port)) as s:
        start = time.monotonic()
        s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n")
        data = b""
        s.settimeout(0.1)
        # Trickle a header line every 100 ms: the deadline counts from the first byte, not from the last.
        while time.monotonic() - start < 5:
            try:
                s.sendall(b"X-Slow: 1\r\n")
            except (BrokenPipeError, ConnectionResetError):
                break
            try:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            except socket.timeout:
                pass
            except ConnectionResetError:
                break
        elapsed = time.monotonic() - start
    [(st, headers, body)] = parse_responses(data)
    assert (st, body) == (408, REQUEST_TIMEOUT)
    assert headers["connection"] == "close"
    assert 0.4 <= elapsed < 2.5, elapsed


def test_silent_connection_is_closed_after_header_timeout(make_gateway):
    gw = make_gateway(env={"VTS_HEADER_TIMEOUT_MS": "400"}, workers=1)
    start = time.monotonic()
    data = raw_exchange(gw.port, b"", timeout=5)
    assert data == b""
    assert 0.3 <= time.monotonic() - start < 2.5


def test_idle_keep_alive_connection_is_closed(make_gateway):
    gw = make_gateway(env={"VTS_IDLE_TIMEOUT_MS": "600"}, workers=1)
    with socket.create_connection(("127.0.0.1", gw.port)) as s:
        s.settimeout(5)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        first = s.recv(65536)
        assert first.startswith(b"HTTP/1.1 200 ")
        time.sleep(0.2)  # the wait is the test: idle, but less than the idle timeout
        s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 200 "), "closed before the idle timeout"
        idle_from = time.monotonic()
        try:
            assert s.recv(1) == b""
        except ConnectionResetError:
            pass
        idle = time.monotonic() - idle_from
    assert 0.5 <= idle < 2.5, idle


def test_connection_over_the_cap_gets_503_with_retry_after(make_gateway):
    gw = make_gateway(env={"VTS_MAX_CONNS": "2"}, workers=1)
    # Wait until the harness's own health probes are gone from the worker: the scrape's own connection is the one
    # left open.
    assert wait_for(lambda: gw.metric("vts_http_connections_open") == 1, 5)
    held = []
    try:
        for _ in range(2):
            s = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
            assert s.recv(65536).startswith(b"HTTP/1.1 200 ")
            held.append(s)
        # Told at once (before its request is read), then closed: not served, and not reset.
        start = time.monotonic()
        data = raw_exchange(gw.port, b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n", timeout=5)
        assert time.monotonic() - start < 4, "the refused connection was kept open"
        head = data.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
        assert head[0] == "HTTP/1.1 503 Service Unavailable", data
        assert [line.split(":", 1)[0] for line in head[1:]] == ["Content-Type", "Content-Length", "Date",
                                                                  "X-Request-Id", "Retry-After", "Connection"]
        [(st, headers, body)] = parse_responses(data)
        assert headers["retry-after"] == "1"
        assert headers["connection"] == "close"
        assert body == SERVICE_UNAVAILABLE
        held.pop().close()
        assert wait_for(lambda: gw.metric("vts_http_connections_open") == 2, 5)  # one held, and the scrape
        [(st, _, _)] = parse_responses(raw_exchange(gw.port, b"GET /health HTTP/1.1\r\nHost: t\r\n"
                                                             b"Connection: close\r\n\r\n"))
        assert st == 200
    finally:
        for s in held:
            s.close()


def rss_kb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_ten_thousand_idle_keep_alive_connections_cost_under_50_mb(make_gateway):
    n = 10000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < n + 200:
        import pytest
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} is below {n + 200}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    gw = make_gateway(workers=1)
    [worker] = gw.worker_pids()
    socks = []
    try:
        # Warm up so that the baseline holds the allocator's steady state.
        gw.request("GET", "/health")
        before = rss_kb(worker)
        req = b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n"
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", gw.port), timeout=10)
            s.sendall(req)
            socks.append(s)
        for s in socks:
            head = s.recv(65536)
            assert head.startswith(b"HTTP/1.1 200 "), head[:100]
        after = rss_kb(worker)
        cost_mb = (after - before) / 1024
        print(f"{n} idle connections: worker RSS {before} kB -> {after} kB")
        assert cost_mb <= 50, f"{n} idle connections cost {cost_mb:.1f} MB of worker RSS"
        assert re.fullmatch(r"vts-worker", Path(f"/proc/{worker}/comm").read_text().strip())
    finally:
        for s in socks:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
