"""HTTP front of the gateway: routing, methods, keep-alive, pipelining, HTTP/1.0, common headers, /health, auth."""

import email.utils
import json
import re
import socket
import threading
import time
from datetime import datetime, timezone

import pytest

from conftest import exchange_in_parts, parse_responses, raw_exchange, read_until_close, wait_for

NOT_FOUND = b'{"error":{"code":"not_found","message":"No such resource."}}'
METHOD_NOT_ALLOWED = b'{"error":{"code":"method_not_allowed","message":"Method not allowed for this resource."}}'
UNAUTHORIZED = b'{"error":{"code":"UNAUTHORIZED","message":"A valid x-api-key header is required."}}'
HEALTH_FIELDS = {"environment", "nodeVersion", "rateLimitProvider", "service", "status", "timestamp", "uptime",
                 "version", "speechFallbackEnabled"}
TRANSCRIPT = "/v1/video/transcript"


def read_response(sock, method="GET", timeout=5.0):
    """Reads exactly one response from a connected socket; returns (status, headers, body)."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed before a full response head: {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    n = 0 if method == "HEAD" else int(headers["content-length"])
    while len(rest) < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError("connection closed inside a body")
        rest += chunk
    assert len(rest) == n, f"bytes after the response: {rest[n:]!r}"
    return int(lines[0].split(" ")[1]), headers, rest


def closed_by_server(sock, timeout=3.0):
    """True when the server closes the connection within timeout (EOF or reset)."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def half_close_and_read(s):
    """Shuts the client's side and returns every byte the server sends until it closes (within 3 s)."""
    s.shutdown(socket.SHUT_WR)
    start = time.monotonic()
    data = read_until_close(s, 5)
    assert time.monotonic() - start < 3, "the server did not close"
    return data


def server_unread_bytes(server_port, client_port):
    """Bytes the kernel holds unread on the server's side of a loopback connection (/proc/net/tcp rx_queue)."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, remote, queues = fields[1], fields[2], fields[4]
            if int(local.split(":")[1], 16) == server_port and int(remote.split(":")[1], 16) == client_port:
                return int(queues.split(":")[1], 16)
    raise AssertionError(f"no server socket for client port {client_port}")


def test_unknown_path_gets_404_not_found(gateway):
    for path in ("/nope", "/health/", "/v1/video/transcript/x", "/"):
        r = gateway.request("GET", path)
        assert r.status == 404, path
        assert r.body == NOT_FOUND
        assert r.headers["content-type"] == "application/json"


def test_known_path_with_other_method_gets_405_and_allow(gateway):
    for method, path in (("POST", "/health"), ("DELETE", TRANSCRIPT), ("PUT", "/openapi.json"),
                         ("OPTIONS", "/health")):
        r = gateway.request(method, path)
        assert r.status == 405, (method, path)
        assert r.headers["allow"] == "GET, HEAD"
        assert r.body == METHOD_NOT_ALLOWED


def test_unknown_path_with_other_method_is_404_not_405(gateway):
    r = gateway.request("POST", "/nope")
    assert r.status == 404
    assert "allow" not in r.headers


def test_head_has_get_headers_and_no_body(gateway):
    get = gateway.request("GET", "/openapi.json")
    assert get.status == 200 and len(get.body) > 0
    head = gateway.request("HEAD", "/openapi.json")
    assert head.status == 200
    assert head.headers["content-length"] == str(len(get.body))
    assert head.headers["content-type"] == "application/json"
    assert head.body == b""
    # On the wire: nothing follows the head.
    data = raw_exchange(gateway.port, b"HEAD /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    assert data.endswith(b"\r\n\r\n") and data.count(b"\r\n\r\n") == 1, data
    assert int(re.search(rb"Content-Length: (\d+)", data).group(1)) > 0


def test_keep_alive_serves_several_requests_on_one_connection(gateway):
    with socket.create_connection(("127.0.0.1", gateway.port)) as s:
        for i in range(5):
            path = "/health" if i % 2 == 0 else "/nope"
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nX-Request-Id: ka-{i}\r\n\r\n".encode())
            status, headers, _ = read_response(s)
            assert status == (200 if i % 2 == 0 else 404)
            assert headers["x-request-id"] == f"ka-{i}"
            assert "connection" not in headers
        assert not closed_by_server(s, timeout=0.3)


def test_pipelined_requests_are_answered_in_order(gateway):
    data = (b"GET /health HTTP/1.1\r\nHost: t\r\nX-Request-Id: p1\r\n\r\n"
            b"GET /nope HTTP/1.1\r\nHost: t\r\nX-Request-Id: p2\r\n\r\n"
            b"HEAD /openapi.json HTTP/1.1\r\nHost: t\r\nX-Request-Id: p3\r\n\r\n"
            b"GET /openapi.json HTTP/1.1\r\nHost: t\r\nX-Request-Id: p4\r\nConnection: close\r\n\r\n")
    got = parse_responses(raw_exchange(gateway.port, data), methods=["GET", "GET", "HEAD", "GET"])
    assert [(st, h["x-request-id"]) for st, h, _ in got] == [(200, "p1"), (404, "p2"), (200, "p3"), (200, "p4")]
    assert got[1][2] == NOT_FOUND
    assert got[2][2] == b"" and got[2][1]["content-length"] == str(len(got[3][2]))
    assert got[3][1]["connection"] == "close"


def test_pipelined_requests_split_across_writes(gateway):
    data = exchange_in_parts(gateway.port, [b"GET /health HTTP/1.1\r\nHost: t\r\n\r\nGET /no",
                                            b"pe HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"])
    assert [st for st, _, _ in parse_responses(data)] == [200, 404]


def test_pipelined_requests_then_half_close_are_all_answered(gateway):
    # The client sends its requests and shuts its side at once: every complete request is answered in order, then
    # the server closes.
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=5) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\nX-Request-Id: h1\r\n\r\n"
                  b"GET /nope HTTP/1.1\r\nHost: t\r\nX-Request-Id: h2\r\n\r\n"
                  b"GET /health HTTP/1.1\r\nHost: t\r\nX-Request-Id: h3\r\n\r\n")
        data = half_close_and_read(s)
    got = parse_responses(data)
    assert [(st, h["x-request-id"]) for st, h, _ in got] == [(200, "h1"), (404, "h2"), (200, "h3")]
    assert got[1][2] == NOT_FOUND


def test_request_sent_while_the_previous_is_answered_is_served_after_it(make_gateway):
    # No fetcher runs: the transcript request waits for its job's deadline (then 503, shed unserved) while the client
    # sends the next request on the same connection, and half-closes; both are answered, in order.
    gateway = make_gateway(env={"VTS_JOB_TIMEOUT_MS": "600"})
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=5) as s:
        s.sendall(f"GET {TRANSCRIPT}?video_id=abcdefghijk HTTP/1.1\r\nHost: t\r\nx-api-key: {gateway.key}\r\n"
                  "X-Request-Id: slow\r\n\r\n".encode())
        assert wait_for(lambda: gateway.metric("vts_cache_misses_total") == 1, 5), "the request never reached a job"
        s.sendall(b"GET /nope HTTP/1.1\r\nHost: t\r\nX-Request-Id: next\r\n\r\nGET /hea")
        time.sleep(0.1)  # the wait is the test: the rest of the request comes in a later read
        s.sendall(b"lth HTTP/1.1\r\nHost: t\r\nX-Request-Id: last\r\n\r\n")
        data = half_close_and_read(s)
    got = parse_responses(data)
    assert [(st, h["x-request-id"]) for st, h, _ in got] == [(503, "slow"), (404, "next"), (200, "last")]
    assert json.loads(got[0][2])["error"]["code"] == "service_unavailable"
    assert got[1][2] == NOT_FOUND


def test_more_input_than_is_held_while_a_request_is_answered_is_read_after_it(make_gateway):
    # While the transcript request waits for its deadline, the client pipelines about 190 KB of requests: the server
    # holds 64 KiB and stops reading, then answers everything in order once the first answer is out.
    gateway = make_gateway(env={"VTS_JOB_TIMEOUT_MS": "600"})
    n = 2000
    follow = b"".join(b"GET /health HTTP/1.1\r\nHost: t\r\nX-Request-Id: f%04d\r\nX-Pad: %s\r\n\r\n" % (i, b"p" * 40)
                      for i in range(n))
    assert len(follow) > 3 * 65536
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as s:
        s.sendall(f"GET {TRANSCRIPT}?video_id=abcdefghijk HTTP/1.1\r\nHost: t\r\nx-api-key: {gateway.key}\r\n"
                  "X-Request-Id: slow\r\n\r\n".encode())
        assert wait_for(lambda: gateway.metric("vts_cache_misses_total") == 1, 5), "the request never reached a job"
        # A second thread sends while this one reads: the answers must not fill the socket's buffers unread.
        sender = threading.Thread(target=lambda: (s.sendall(follow), s.shutdown(socket.SHUT_WR)))
        sender.start()
        # Still answering the first request: the server has stopped reading, so the rest waits in its socket.
        assert wait_for(lambda: server_unread_bytes(gateway.port, s.getsockname()[1]) > 0, 5)
        data = read_until_close(s, 10)
        sender.join(5)
        assert not sender.is_alive()
    got = parse_responses(data)
    assert len(got) == n + 1
    assert (got[0][0], got[0][1]["x-request-id"]) == (503, "slow")
    assert [(st, h["x-request-id"]) for st, h, _ in got[1:]] == [(200, "f%04d" % i) for i in range(n)]


def test_half_close_with_an_unfinished_request_closes_after_the_answer(make_gateway):
    gateway = make_gateway(env={"VTS_JOB_TIMEOUT_MS": "300"})
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=5) as s:
        s.sendall(f"GET {TRANSCRIPT}?video_id=abcdefghijk HTTP/1.1\r\nHost: t\r\nx-api-key: {gateway.key}\r\n"
                  "X-Request-Id: only\r\n\r\nGET /health HTTP/1.1\r\nHo".encode())
        data = half_close_and_read(s)
    got = parse_responses(data)
    assert [(st, h["x-request-id"]) for st, h, _ in got] == [(503, "only")]


def test_generated_request_ids_are_distinct_across_workers(gateway):
    # More ids than one draw of random bytes holds, from both workers.
    ids = []
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=5) as s:
            s.sendall(b"GET /nope HTTP/1.1\r\nHost: t\r\n\r\n" * 29 + b"GET /nope HTTP/1.1\r\nHost: t\r\n"
                      b"Connection: close\r\n\r\n")
            got = parse_responses(read_until_close(s, 5))
        assert [st for st, _, _ in got] == [404] * 30
        ids += [h["x-request-id"] for _, h, _ in got]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == 600
    def pids():
        return {json.loads(line)["pid"] for line in gateway.log_path.read_text().splitlines()
                if line.startswith("{") and json.loads(line).get("msg") == "request"}
    assert wait_for(lambda: len(pids()) == 2, 5), "both workers should have answered some of the connections"


def test_http10_closes_without_keep_alive(gateway):
    start = time.monotonic()
    data = raw_exchange(gateway.port, b"GET /health HTTP/1.0\r\n\r\n", timeout=5)
    assert time.monotonic() - start < 3, "server did not close an HTTP/1.0 connection"
    [(status, headers, body)] = parse_responses(data)
    assert status == 200 and headers["connection"] == "close"
    assert json.loads(body)["status"] == "ok"


def test_http10_keep_alive_when_asked(gateway):
    with socket.create_connection(("127.0.0.1", gateway.port)) as s:
        for _ in range(2):
            s.sendall(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            status, headers, _ = read_response(s)
            assert status == 200 and headers["connection"] == "keep-alive"
        assert not closed_by_server(s, timeout=0.3)


def test_http11_connection_close_is_honoured(gateway):
    with socket.create_connection(("127.0.0.1", gateway.port)) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        status, headers, _ = read_response(s)
        assert status == 200 and headers["connection"] == "close"
        assert closed_by_server(s)


def test_request_id_is_echoed_when_valid(gateway):
    for rid in ("abc", "A.b_c-1", "x" * 64):
        r = gateway.request("GET", "/health", headers={"X-Request-Id": rid})
        assert r.headers["x-request-id"] == rid


def test_request_id_is_generated_when_absent_or_invalid(gateway):
    seen = set()
    for rid in (None, "", "x" * 65, "bad id", "a/b", "ü"):
        headers = {} if rid is None else {"X-Request-Id": rid}
        r = gateway.request("GET", "/nope", headers=headers)
        got = r.headers["x-request-id"]
        assert re.fullmatch(r"[0-9a-f]{32}", got), (rid, got)
        seen.add(got)
    assert len(seen) == 6, "generated request ids repeat"


def test_every_response_has_date_length_type_and_no_server(gateway):
    cases = [("GET", "/health"), ("GET", "/nope"), ("POST", "/health"), ("GET", TRANSCRIPT),
             ("GET", "/openapi.json")]
    for method, path in cases:
        r = gateway.request(method, path)
        assert r.headers["content-type"] == "application/json"
        assert r.headers["content-length"] == str(len(r.body))
        date = email.utils.parsedate_to_datetime(r.headers["date"])
        assert abs((datetime.now(timezone.utc) - date).total_seconds()) < 5
        assert re.fullmatch(r"[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT", r.headers["date"])
        assert "server" not in r.headers
        assert "x-request-id" in r.headers


def test_health_has_exactly_the_spec_fields(gateway):
    r = gateway.request("GET", "/health")
    assert r.status == 200
    h = r.json()
    assert set(h) == HEALTH_FIELDS
    assert h["environment"] == "test"
    assert h["nodeVersion"].startswith("libuv/") and len(h["nodeVersion"]) > len("libuv/")
    assert h["rateLimitProvider"] == "memory"
    assert h["service"] == "api" and h["status"] == "ok"
    ts = datetime.strptime(h["timestamp"], "%Y-%m-%dT%H:%M:%S.%f%z")
    assert abs((datetime.now(timezone.utc) - ts).total_seconds()) < 5
    assert isinstance(h["uptime"], (int, float)) and not isinstance(h["uptime"], bool)
    assert 0 <= h["uptime"] < 60
    assert isinstance(h["version"], str) and h["version"]
    assert h["speechFallbackEnabled"] is False


def test_health_uptime_counts_from_master_start(gateway):
    first = gateway.request("GET", "/health").json()["uptime"]
    time.sleep(1.1)  # the wait is the test: the uptime moves with the clock
    second = gateway.request("GET", "/health").json()["uptime"]
    assert 1.0 <= second - first < 3.0


def test_health_reports_speech_fallback_setting(make_gateway):
    gw = make_gateway(env={"VTS_SPEECH_FALLBACK": "true", "VTS_ENV": "staging \"q\""}, workers=1)
    h = gw.request("GET", "/health").json()
    assert h["speechFallbackEnabled"] is True
    assert h["environment"] == 'staging "q"'


def test_openapi_json_is_served_as_json(gateway):
    r = gateway.request("GET", "/openapi.json")
    assert r.status == 200
    assert r.headers["content-type"] == "application/json"
    doc = r.json()
    assert doc["openapi"].startswith("3.1")


@pytest.mark.parametrize("headers", [{}, {"x-api-key": "not-a-key"}, {"x-api-key": "vts_test_key_revoked"},
                                     {"x-api-key": "k" * 300}])
def test_transcript_without_valid_key_gets_401(gateway, headers):
    r = gateway.request("GET", TRANSCRIPT + "?video_id=abcdefghijk", headers=headers)
    assert r.status == 401
    assert r.body == UNAUTHORIZED
    assert "x-ratelimit-limit" not in r.headers


def test_repeated_key_header_gets_401(gateway):
    data = raw_exchange(gateway.port, (f"GET {TRANSCRIPT}?video_id=abcdefghijk HTTP/1.1\r\nHost: t\r\n"
                                       f"x-api-key: {gateway.key}\r\nx-api-key: {gateway.key}\r\n"
                                       "Connection: close\r\n\r\n").encode())
    [(status, _, body)] = parse_responses(data)
    assert status == 401 and body == UNAUTHORIZED


def test_active_key_passes_auth_and_gets_rate_limit_headers(make_gateway):
    # No fetcher runs here: the request passes auth and the limiter, and is shed at dispatch (503) or refused at
    # validation.
    gateway = make_gateway(env={"VTS_JOB_TIMEOUT_MS": "500"})
    r = gateway.request("GET", TRANSCRIPT + "?video_id=abcdefghijk", headers={"x-api-key": gateway.key})
    assert r.status == 503, r
    assert r.json()["error"]["code"] == "service_unavailable"
    for h in ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"):
        assert re.fullmatch(r"\d+", r.headers[h]), (h, r.headers)
    r = gateway.request("GET", TRANSCRIPT, headers={"x-api-key": gateway.key})
    assert r.status == 400 and r.json()["error"]["code"] == "ambiguous_request"
    assert "x-ratelimit-limit" in r.headers


def test_access_log_has_one_line_per_request_without_secrets(make_gateway):
    gateway = make_gateway(env={"VTS_JOB_TIMEOUT_MS": "500"})
    # The validated video id may be logged (it names the job); the raw query, with what else it carries, never is.
    secret_query = "video_id=abcdefghijk&note=zzSECRETzzz"
    r1 = gateway.request("GET", f"{TRANSCRIPT}?{secret_query}", headers={"x-api-key": gateway.key})
    gateway.request("GET", "/nope?token=hidden", headers={"X-Request-Id": "log-check-2"})
    r3 = gateway.request("GET", TRANSCRIPT, headers={"x-api-key": "wrong-key-value"})
    ids = {r1.headers["x-request-id"], "log-check-2", r3.headers["x-request-id"]}

    def access_records():
        return {rec.get("request_id"): rec for rec in gateway.log_records() if rec.get("msg") == "request"}
    assert wait_for(lambda: ids <= set(access_records()), 5), "an access line is missing"
    records = access_records()
    rec1 = records[r1.headers["x-request-id"]]
    assert rec1["method"] == "GET" and rec1["path"] == TRANSCRIPT and rec1["status"] == r1.status
    assert rec1["key_id"] == "test-active"
    assert isinstance(rec1["dur_ms"], int)
    rec2 = records["log-check-2"]
    assert rec2["path"] == "/nope" and rec2["status"] == 404 and rec2["key_id"] == ""
    rec3 = records[r3.headers["x-request-id"]]
    assert rec3["status"] == 401 and rec3["key_id"] == ""
    text = gateway.log_text()
    for secret in (gateway.key, "wrong-key-value", "zzSECRETzzz", "hidden"):
        assert secret not in text
    lines = [rec for rec in gateway.log_records() if rec.get("msg") == "request"]
    assert len([rec for rec in lines if rec["request_id"] == "log-check-2"]) == 1
