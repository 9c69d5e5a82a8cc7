"""Prometheus metrics on VTS_METRICS_LISTEN: the format passes promtool, and each counter moves with its event."""
import http.client
import os
import shutil
import signal
import subprocess

import pytest

from stack import metric as value
from vtsproc import wait_for


def scrape(gw):
    conn = http.client.HTTPConnection("127.0.0.1", gw.metrics_port, timeout=5)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        body = resp.read().decode()
        assert resp.status == 200, f"/metrics answered {resp.status}"
        assert resp.getheader("Content-Type") == "text/plain; version=0.0.4; charset=utf-8"
        return body
    finally:
        conn.close()


def test_metrics_text_passes_promtool(gateway):
    if shutil.which("promtool") is None:
        pytest.skip("promtool (Debian package prometheus) is not installed")
    gateway.request("GET", "/health")
    gateway.request("GET", "/nowhere")
    text = scrape(gateway)
    res = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, f"promtool check metrics failed:\n{res.stdout}\n{res.stderr}"


def test_request_counters_and_histogram_move_with_requests(gateway):
    before = scrape(gateway)
    for _ in range(3):
        assert gateway.request("GET", "/health").status == 200
    assert gateway.request("GET", "/v1/video/transcript?video_id=abcdefghijk").status == 401
    assert gateway.request("POST", "/health").status == 405
    after = scrape(gateway)
    assert value(after, "vts_http_requests_total", route="/health", status="200") - \
        value(before, "vts_http_requests_total", route="/health", status="200") == 3
    assert value(after, "vts_http_requests_total", route="/v1/video/transcript", status="401") - \
        value(before, "vts_http_requests_total", route="/v1/video/transcript", status="401") == 1
    assert value(after, "vts_http_requests_total", route="/health", status="405") - \
        value(before, "vts_http_requests_total", route="/health", status="405") == 1
    assert value(after, "vts_http_request_duration_seconds_count", route="/health") - \
        value(before, "vts_http_request_duration_seconds_count", route="/health") == 4


def test_worker_loop_turns_are_counted(gateway):
    """Every turn of a worker's loop lands in vts_worker_loop_turn_seconds: a request takes at least one."""
    bounds = ["0.0001", "0.00025", "0.0005", "0.001", "0.002", "0.005", "0.01", "0.02", "0.05", "0.1", "+Inf"]
    before = scrape(gateway)
    for _ in range(3):
        assert gateway.request("GET", "/health").status == 200
    after = scrape(gateway)
    assert "# TYPE vts_worker_loop_turn_seconds histogram\n" in after
    count = value(after, "vts_worker_loop_turn_seconds_count")
    assert count - value(before, "vts_worker_loop_turn_seconds_count") >= 3
    cumulative = [value(after, "vts_worker_loop_turn_seconds_bucket", le=b) for b in bounds]
    assert cumulative == sorted(cumulative)
    assert cumulative[-1] == count
    assert value(after, "vts_worker_loop_turn_seconds_sum") > value(before, "vts_worker_loop_turn_seconds_sum")


def test_metrics_port_answers_only_metrics(gateway):
    conn = http.client.HTTPConnection("127.0.0.1", gateway.metrics_port, timeout=5)
    conn.request("GET", "/health")
    resp = conn.getresponse()
    assert resp.status == 404
    assert resp.read() == b'{"error":{"code":"not_found","message":"No such resource."}}'
    conn.request("POST", "/metrics")
    resp = conn.getresponse()
    assert resp.status == 405
    assert resp.getheader("Allow") == "GET, HEAD"
    assert resp.read() == b'{"error":{"code":"method_not_allowed","message":"Method not allowed for this resource."}}'
    conn.close()


def test_public_port_does_not_answer_metrics(gateway):
    resp = gateway.request("GET", "/metrics")
    assert resp.status == 404
    assert resp.body == b'{"error":{"code":"not_found","message":"No such resource."}}'


def test_worker_restart_is_counted(gateway):
    before = value(scrape(gateway), "vts_worker_restarts_total")
    victim = gateway.worker_pids()[0]
    os.kill(victim, signal.SIGKILL)

    def counted():
        try:
            return value(scrape(gateway), "vts_worker_restarts_total") == before + 1
        except ConnectionError:
            return False  # the scrape reached the killed worker's socket before it was gone

    if not wait_for(counted, 5):
        pytest.fail(f"vts_worker_restarts_total did not move from {before} after a worker was killed")


def test_open_connections_gauge_counts_clients(gateway):
    conns = []
    try:
        for _ in range(5):
            c = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=5)
            c.request("GET", "/health")
            c.getresponse().read()
            conns.append(c)
        # The scrape's own connection is open while it is counted.
        assert value(scrape(gateway), "vts_http_connections_open") >= 6
    finally:
        for c in conns:
            c.close()
