"""HTTP as RFC 9110 and 9112 ask of a server, through the real gateway on raw sockets: Host required and single,
absolute-form targets, WWW-Authenticate on a 401, 501 for an unknown method and 405 for a known one a route does not
take, whitespace before a header's colon refused; the access log stays valid JSON for any path bytes; a worker
killed with connections open leaves nothing in vts_http_connections_open."""
import json
import os
import signal

import pytest

from conftest import parse_responses, raw_exchange, wait_for

BAD_REQUEST = b'{"error":{"code":"bad_request","message":"Malformed HTTP request."}}'
NOT_IMPLEMENTED = b'{"error":{"code":"not_implemented","message":"The server does not support this method."}}'
METHOD_NOT_ALLOWED = b'{"error":{"code":"method_not_allowed","message":"Method not allowed for this resource."}}'
UNAUTHORIZED = b'{"error":{"code":"UNAUTHORIZED","message":"A valid x-api-key header is required."}}'
TRANSCRIPT = "/v1/video/transcript"


def exchange(gateway, data):
    """One raw exchange: (status line, header names in order, headers, body) of its only answer."""
    raw = raw_exchange(gateway.port, data)
    head = raw.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    [(_, headers, body)] = parse_responses(raw)
    return head[0], [line.split(":", 1)[0] for line in head[1:]], headers, body


def assert_bad_request(gateway, data):
    status_line, names, headers, body = exchange(gateway, data)
    assert status_line == "HTTP/1.1 400 Bad Request", (data, status_line)
    assert names == ["Content-Type", "Content-Length", "Date", "X-Request-Id", "Connection"]
    assert headers["connection"] == "close"
    assert body == BAD_REQUEST


@pytest.mark.parametrize("head", [
    b"",                                  # no Host at all
    b"Host: t\r\nHost: t\r\n",            # two lines
    b"Host: a\r\nhost: b\r\n",            # two lines, another spelling
    b"Host: a b\r\n",                     # not a host
    b"Host: a/b\r\n",
    b"Host: user@h\r\n",
    b"Host: [::1\r\n",
    b"Host: h:8o\r\n",
    b"Host: a\r\n b\r\n",                 # folded (obs-fold)
    b"Host: %4\r\n",                      # a cut escape
])
def test_http11_request_without_exactly_one_valid_host_is_400(gateway, head):
    assert_bad_request(gateway, b"GET /health HTTP/1.1\r\n" + head + b"\r\n")


def test_http11_request_with_a_valid_host_is_served(gateway):
    for host in (b"t", b"example.com:8080", b"127.0.0.1", b"[::1]:80", b""):
        status_line, _, _, _ = exchange(gateway, b"GET /health HTTP/1.1\r\nHost: " + host +
                                        b"\r\nConnection: close\r\n\r\n")
        assert status_line == "HTTP/1.1 200 OK", host


def test_http10_request_without_host_is_served(gateway):
    status_line, _, headers, body = exchange(gateway, b"GET /health HTTP/1.0\r\n\r\n")
    assert status_line == "HTTP/1.1 200 OK"
    assert json.loads(body)["status"] == "ok"


def test_absolute_form_target_is_served_by_its_path(gateway):
    status_line, _, _, body = exchange(gateway, b"GET http://vts.example/health HTTP/1.1\r\nHost: vts.example\r\n"
                                                b"Connection: close\r\n\r\n")
    assert status_line == "HTTP/1.1 200 OK"
    assert json.loads(body)["service"] == "api"
    # The query travels with the path: the transcript route sees it (and asks for a key first).
    status_line, _, _, body = exchange(gateway, ("GET HTTPS://vts.example:443" + TRANSCRIPT +
                                                 "?video_id=abcdefghijk HTTP/1.1\r\nHost: vts.example\r\n"
                                                 "Connection: close\r\n\r\n").encode())
    assert status_line == "HTTP/1.1 401 Unauthorized"
    assert body == UNAUTHORIZED


def test_absolute_form_target_without_a_host_is_400(gateway):
    assert_bad_request(gateway, b"GET http:///health HTTP/1.1\r\nHost: t\r\n\r\n")
    assert_bad_request(gateway, b"GET http://a b/health HTTP/1.1\r\nHost: t\r\n\r\n")


@pytest.mark.parametrize("key", [None, "not-a-key", "vts_test_key_revoked"])
def test_every_401_says_how_to_send_the_key(gateway, key):
    head = f"x-api-key: {key}\r\n" if key else ""
    status_line, names, headers, body = exchange(gateway, (f"GET {TRANSCRIPT}?video_id=abcdefghijk HTTP/1.1\r\n"
                                                           f"Host: t\r\n{head}Connection: close\r\n\r\n").encode())
    assert status_line == "HTTP/1.1 401 Unauthorized"
    assert names == ["Content-Type", "Content-Length", "Date", "X-Request-Id", "WWW-Authenticate", "Connection"]
    assert headers["www-authenticate"] == 'ApiKey header="x-api-key"'
    assert body == UNAUTHORIZED


@pytest.mark.parametrize("method", [b"FOO", b"get", b"PROPFIND", b"MKCOL", b"PURGE", b"BREW"])
def test_unknown_method_is_501(gateway, method):
    for path in (b"/health", b"/nope"):
        status_line, names, headers, body = exchange(gateway, method + b" " + path + b" HTTP/1.1\r\nHost: t\r\n\r\n")
        assert status_line == "HTTP/1.1 501 Not Implemented", (method, path)
        assert names == ["Content-Type", "Content-Length", "Date", "X-Request-Id", "Connection"]
        assert body == NOT_IMPLEMENTED


@pytest.mark.parametrize("method", [b"POST", b"PUT", b"DELETE", b"OPTIONS", b"TRACE", b"PATCH"])
def test_known_method_a_route_does_not_take_is_405_with_allow(gateway, method):
    status_line, names, headers, body = exchange(gateway, method + b" /health HTTP/1.1\r\nHost: t\r\n"
                                                                   b"Connection: close\r\n\r\n")
    assert status_line == "HTTP/1.1 405 Method Not Allowed"
    assert names == ["Content-Type", "Content-Length", "Date", "X-Request-Id", "Allow", "Connection"]
    assert headers["allow"] == "GET, HEAD"
    assert body == METHOD_NOT_ALLOWED


@pytest.mark.parametrize("line", [b"Host : t", b"Host\t: t", b"X-Thing : 1", b"x-api-key  : k"])
def test_whitespace_before_a_header_colon_is_400(gateway, line):
    head = b"" if line.startswith(b"Host") else b"Host: t\r\n"
    assert_bad_request(gateway, b"GET /health HTTP/1.1\r\n" + head + line + b"\r\n\r\n")


def test_access_log_escapes_invalid_utf8_of_a_path(gateway):
    # A valid character stays as it is; a lone byte, an overlong form and a cut character each become U+FFFD.
    raw = exchange(gateway, b"GET /caf\xc3\xa9/\xff/\xc0\xaf/\xe2\x82 HTTP/1.1\r\nHost: t\r\n"
                            b"X-Request-Id: utf8-log-check\r\nConnection: close\r\n\r\n")
    assert raw[0] == "HTTP/1.1 404 Not Found"

    def line():
        with open(gateway.log_path, "rb") as f:
            for ln in f:
                if b'"utf8-log-check"' in ln:
                    return ln
        return None
    assert wait_for(lambda: line() is not None, 5), "no access line"
    text = line().decode("utf-8")  # strict: the line is UTF-8 whatever the client sent
    rec = json.loads(text)
    assert rec["status"] == 404
    assert rec["path"] == "/caf\u00e9/\ufffd/\ufffd\ufffd/\ufffd\ufffd"


def test_a_killed_worker_leaves_nothing_in_the_connection_gauge(make_gateway):
    import socket
    gw = make_gateway(workers=1)
    # The scrape's own connection is the one the gauge shows once the harness's probes are gone.
    assert wait_for(lambda: gw.metric("vts_http_connections_open") == 1, 5)
    held = []
    try:
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
            assert s.recv(65536).startswith(b"HTTP/1.1 200 ")
            held.append(s)
        assert wait_for(lambda: gw.metric("vts_http_connections_open") == 4, 5)
        [old] = gw.worker_pids()
        os.kill(old, signal.SIGKILL)
        assert wait_for(lambda: len(gw.worker_pids()) == 1 and gw.worker_pids() != [old], 10), "no new worker"
        # The new worker counts only the scrape; the dead one's three (and its scrape) are gone with it. Its process
        # shows before it listens (under ASan by some 300 ms): until then a scrape is refused, and the poll goes on.
        def gauge():
            try:
                return gw.metric("vts_http_connections_open")
            except ConnectionRefusedError:
                return None
        assert wait_for(lambda: gauge() == 1, 5), gauge()
    finally:
        for s in held:
            s.close()
