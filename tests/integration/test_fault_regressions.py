"""Regressions of faults the fault battery (tests/fault/) and fuzz_http found, each pinned by the smallest case."""
import http.client

import pytest

from conftest import ACTIVE_KEY, free_port, parse_responses, raw_exchange


def scrape_value(gw, name):
    conn = http.client.HTTPConnection("127.0.0.1", gw.metrics_port, timeout=5)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("%s is not in /metrics" % name)


@pytest.mark.parametrize("version", [b"HTTP/2.0", b"HTTP/0.9"])
def test_request_line_of_another_http_version_gets_400(gateway, version):
    # llhttp 8.1.0 accepts these versions; they were answered 200 as if they were HTTP/1.1.
    data = raw_exchange(gateway.port, b"GET /health " + version + b"\r\nHost: a\r\n\r\n", timeout=5)
    [(status, headers, body)] = parse_responses(data)
    assert status == 400
    assert headers["connection"] == "close"
    assert body == b'{"error":{"code":"bad_request","message":"Malformed HTTP request."}}'


@pytest.mark.parametrize("version", [b"HTTP/1.0", b"HTTP/1.1"])
def test_http1_request_lines_are_still_served(gateway, version):
    data = raw_exchange(gateway.port, b"GET /health " + version + b"\r\nHost: a\r\nConnection: close\r\n\r\n",
                        timeout=5)
    [(status, _, _)] = parse_responses(data)
    assert status == 200


def test_unreachable_redis_fail_open_counts_a_store_error_and_a_fallback(make_gateway):
    # The counters existed but nothing incremented them: an outage was invisible in /metrics.
    gw = make_gateway(env={"VTS_REDIS_URL": "redis://127.0.0.1:%d" % free_port()})
    r = gw.request("GET", "/v1/video/transcript?video_id=bad", headers={"x-api-key": ACTIVE_KEY})
    assert r.status == 400 and r.json()["error"]["code"] == "invalid_video_id"
    assert scrape_value(gw, "vts_ratelimit_store_errors_total") == 1
    assert scrape_value(gw, "vts_ratelimit_fallbacks_total") == 1


def test_unreachable_redis_fail_closed_counts_a_store_error_and_no_fallback(make_gateway):
    gw = make_gateway(env={"VTS_REDIS_URL": "redis://127.0.0.1:%d" % free_port(),
                           "VTS_RATE_LIMIT_FAIL_CLOSED": "true"})
    r = gw.request("GET", "/v1/video/transcript?video_id=bad", headers={"x-api-key": ACTIVE_KEY})
    assert r.status == 503 and r.json()["error"]["code"] == "rate_limit_unavailable"
    assert r.headers["retry-after"] == "1"
    assert scrape_value(gw, "vts_ratelimit_store_errors_total") == 1
    assert scrape_value(gw, "vts_ratelimit_fallbacks_total") == 0
