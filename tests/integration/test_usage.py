"""GET /v1/usage: a key sees its own use (its month, its short window, its open jobs, its stored items), every answer
validated against the OpenAPI document; counted in the window, no unit of the month, readable with the month used
up."""
import re

from conftest import http_request
from stack import Stack
from test_jobs_api import IDS, call, post

KEY = "vts_test_key_usage"
ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def usage(gw, key=KEY):
    status, h, body = call(gw, "GET", "/v1/usage", key=key)
    assert status == 200, body
    return h, body


def test_a_key_sees_its_month_window_open_jobs_and_stored_items(tmp_path):
    stack = Stack(tmp_path, keys=[("usage", KEY, "active", 100, 60, 2)], fetchers=1,
                  gateway_env={"VTS_JOBS_MAX_OPEN": "3", "VTS_JOBS_MAX_STORED_ITEMS": "50"})
    try:
        gw = stack.gateway
        h, body = usage(gw)
        for part in ("month", "window"):
            assert re.fullmatch(ISO, body[part].pop("reset")), body
        assert body == {"month": {"quota": 2, "used": 0, "remaining": 2},
                        "window": {"limit": 100, "seconds": 60, "remaining": 99},
                        "open_jobs": {"count": 0, "max": 3}, "stored_items": {"count": 0, "max": 50}}
        assert h["x-ratelimit-remaining"] == "99"

        # One transcript spends a unit of the month.
        r = http_request(gw.port, "GET", "/v1/video/transcript?video_id=benchUs0001", headers={"x-api-key": KEY})
        assert r.status == 200
        h, body = usage(gw)
        assert body["month"]["used"] == 1 and body["month"]["remaining"] == 1
        assert body["window"]["remaining"] == 97 and h["x-ratelimit-remaining"] == "97"

        # HEAD: the same headers, no body.
        r = http_request(gw.port, "HEAD", "/v1/usage", headers={"x-api-key": KEY})
        assert r.status == 200 and r.body == b"" and r.headers["x-ratelimit-remaining"] == "96"
        assert call(gw, "GET", "/v1/usage", key=None)[0] == 401
    finally:
        stack.close()


def test_open_jobs_and_stored_items_count_the_keys_jobs(make_gateway):
    gw = make_gateway(keys=[("usage", KEY, "active", 1000, 60, 1000)])
    a = post(gw, {"video_ids": IDS[:3]}, key=KEY)[1]["location"]
    post(gw, {"video_ids": IDS[3:10]}, key=KEY)
    body = usage(gw)[1]
    assert (body["open_jobs"], body["stored_items"]) == ({"count": 2, "max": 10}, {"count": 10, "max": 10000})
    # A cancelled job is no longer open; its items are kept until it expires.
    assert call(gw, "DELETE", a, key=KEY)[0] == 200
    body = usage(gw)[1]
    assert (body["open_jobs"]["count"], body["stored_items"]["count"]) == (1, 10)
    assert body["month"] == {"quota": 1000, "used": 0, "remaining": 1000, "reset": body["month"]["reset"]}
