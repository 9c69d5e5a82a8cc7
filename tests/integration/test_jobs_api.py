"""Batch jobs, the API (POST /v1/jobs, GET and DELETE /v1/jobs/{id}, GET /v1/jobs/{id}/items) against a real gateway:
request bodies read under the HTTP limits (411, 413, 415, 408), each bad member's 400 naming it, duplicates folded,
202 with Location, a job visible only to its key, the open-jobs cap, the item cap, the short window counted once and
no unit of the month, and pages of a 1,000-item job in order. No fetcher runs here: the items stay queued."""
import http.client
import json
import re
import socket

import pytest

from conftest import ACTIVE_KEY, _contract_check, exchange_in_parts, parse_responses, raw_exchange, read_until_close
from contract import error_body

OTHER_KEY = "vts_test_key_other"
# Made-up ids: 11 characters of the id alphabet, none a real video.
IDS = ["jobtest%04d" % i for i in range(1000)]
JSON = {"content-type": "application/json"}
SOURCES = "Give exactly one of video_ids, playlist_id and channel_id."


def keys(*extra):
    return [("test-active", ACTIVE_KEY, "active", 1000000, 60, 1000000000),
            ("test-other", OTHER_KEY, "active", 1000000, 60, 1000000000)] + list(extra)


def call(gw, method, path, body=None, headers=None, key=ACTIVE_KEY):
    """One request with an optional body on a new connection; the answer checked against the OpenAPI document."""
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
    try:
        h = {"x-api-key": key} if key else {}
        h.update(headers or {})
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        conn.request(method, path, body=data, headers=h)
        resp = conn.getresponse()
        raw = resp.read()
        hdrs = {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()
    _contract_check(method, path, resp.status, hdrs, raw)
    return resp.status, hdrs, json.loads(raw) if raw else None


def post(gw, body, key=ACTIVE_KEY, headers=None):
    h = dict(JSON)
    h.update(headers or {})
    return call(gw, "POST", "/v1/jobs", body, h, key)


def err(code, message=None):
    body = error_body(code)
    if message is not None:
        body["error"]["message"] = message
    return body


def test_a_job_of_ids_and_urls_is_accepted_with_duplicates_folded(make_gateway):
    gw = make_gateway(keys=keys())
    status, h, body = post(gw, {"video_ids": [IDS[0], "https://youtu.be/" + IDS[1], IDS[0],
                                              "https://www.youtube.com/watch?v=" + IDS[0], IDS[2]],
                                "format": "text", "language": "en"})
    assert status == 202, body
    assert set(body) == {"id", "status", "total", "created", "quota_remaining"}
    assert body["quota_remaining"] == 1000000000
    assert body["status"] == "queued" and body["total"] == 3
    assert re.fullmatch(r"j[0-9a-f]{24}", body["id"])
    assert h["location"] == "/v1/jobs/" + body["id"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", body["created"])

    status, _, job = call(gw, "GET", h["location"])
    assert status == 200
    assert job == {"id": body["id"], "status": "queued", "total": 3,
                   "counts": {"queued": 3, "running": 0, "done": 0, "failed": 0, "cancelled": 0},
                   "created": body["created"], "updated": body["created"], "format": "text", "language": "en"}
    status, _, page = call(gw, "GET", h["location"] + "/items")
    assert status == 200
    assert page == {"items": [{"video_id": v, "status": "queued"} for v in IDS[:3]], "next_cursor": None}

    status, _, job = call(gw, "DELETE", h["location"])
    assert status == 200
    assert job["status"] == "cancelled"
    assert job["counts"] == {"queued": 0, "running": 0, "done": 0, "failed": 0, "cancelled": 3}
    status, _, page = call(gw, "GET", h["location"] + "/items?limit=2")
    assert page == {"items": [{"video_id": v, "status": "cancelled"} for v in IDS[:2]], "next_cursor": "2"}


@pytest.mark.parametrize("body,status,code,message", [
    ("not json", 400, "invalid_json", None),
    ("[1,2]", 400, "invalid_json", None),
    ("", 400, "invalid_json", None),
    ({"video_ids": [IDS[0]], "color": "red"}, 400, "invalid_request", "color is not a member of a job request."),
    ('{"video_ids":["%s"],"video_ids":["%s"]}' % (IDS[0], IDS[1]), 400, "invalid_request",
     "video_ids is given more than once."),
    ({}, 400, "ambiguous_request", SOURCES),
    ({"video_ids": [IDS[0]], "playlist_id": "PLx"}, 400, "ambiguous_request", SOURCES),
    ({"video_ids": []}, 400, "invalid_request", "video_ids must be a non-empty array of video ids or video URLs."),
    ({"video_ids": IDS[0]}, 400, "invalid_request", "video_ids must be a non-empty array of video ids or video URLs."),
    ({"video_ids": [IDS[0], IDS[1], "nope", 7]}, 400, "invalid_video_id",
     "video_ids[2] is neither a video id nor a recognised video URL."),
    ({"video_ids": [IDS[0], 7]}, 400, "invalid_video_id",
     "video_ids[1] is neither a video id nor a recognised video URL."),
    ({"video_ids": ["https://www.youtube.com/playlist?list=PLx"]}, 400, "invalid_video_id",
     "video_ids[0] is neither a video id nor a recognised video URL."),
    ({"video_ids": [IDS[0]], "language": "english"}, 400, "invalid_language",
     "language must be a string matching ^[a-z]{2,3}(?:-[a-zA-Z]{2,8})?$."),
    ({"video_ids": [IDS[0]], "translate": 3}, 400, "invalid_language",
     "translate must be a string matching ^[a-z]{2,3}(?:-[a-zA-Z]{2,8})?$."),
    ({"video_ids": [IDS[0]], "format": "pdf"}, 400, "invalid_request", "format must be one of json, text, srt, vtt."),
    ({"video_ids": [IDS[0]], "limit": 0}, 400, "invalid_request",
     "limit must be an integer from 1 to 5000 (VTS_JOB_MAX_ITEMS)."),
    ({"video_ids": [IDS[0]], "webhook_url": 7}, 400, "invalid_request",
     "webhook_url must be an absolute http or https URL of at most 2047 bytes."),
])
def test_each_bad_body_gets_its_code_and_a_message_naming_the_member(make_gateway, body, status, code, message):
    gw = make_gateway(keys=keys())
    got, h, answer = post(gw, body)
    assert (got, answer) == (status, err(code, message))
    assert "location" not in h
    assert h["x-ratelimit-limit"] == "1000000"


def test_limit_keeps_the_first_distinct_videos(make_gateway):
    gw = make_gateway(keys=keys())
    status, h, body = post(gw, {"video_ids": [IDS[0], IDS[0], IDS[1], IDS[2], IDS[3]], "limit": 2})
    assert status == 202 and body["total"] == 2
    _, _, page = call(gw, "GET", h["location"] + "/items")
    assert [i["video_id"] for i in page["items"]] == IDS[:2]


def test_the_item_cap_counts_distinct_videos(make_gateway):
    gw = make_gateway(env={"VTS_JOB_MAX_ITEMS": "3"}, keys=keys())
    status, _, body = post(gw, {"video_ids": IDS[:4]})
    assert (status, body) == (400, err("too_many_items", "video_ids holds more than 3 distinct videos "
                                                         "(VTS_JOB_MAX_ITEMS)."))
    status, _, body = post(gw, {"video_ids": IDS[:3] + [IDS[0], IDS[2]]})
    assert status == 202 and body["total"] == 3


def test_media_type_length_and_size_of_the_body(make_gateway):
    gw = make_gateway(keys=keys())
    ids = json.dumps({"video_ids": [IDS[0]]})
    # The message names what came.
    assert post(gw, ids, headers={"content-type": "text/plain"})[::2] == (415, err(
        "unsupported_media_type", "The request body must be application/json; got text/plain."))
    assert call(gw, "POST", "/v1/jobs", ids)[::2] == (415, err(
        "unsupported_media_type", "The request body must be application/json; got no Content-Type."))
    assert post(gw, ids, headers={"content-encoding": "gzip"})[::2] == (415, err(
        "unsupported_media_type", "The request body must be application/json without a Content-Encoding."))
    assert post(gw, ids, headers={"content-type": "application/x-www-form-urlencoded; charset=\"x\""})[::2] == (
        415, err("unsupported_media_type",
                 "The request body must be application/json; got application/x-www-form-urlencoded; charset=?x?."))
    assert post(gw, ids, headers={"content-type": "Application/JSON; charset=utf-8"})[0] == 202

    # No Content-Length: 411 (a chunked body is refused as any Transfer-Encoding is: 400).
    head = "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\ncontent-type: application/json\r\n" % ACTIVE_KEY
    [(status, h, body)] = parse_responses(raw_exchange(gw.port, (head + "\r\n").encode()))
    assert (status, json.loads(body)) == (411, err("length_required"))
    assert h["connection"] == "close"
    [(status, _, body)] = parse_responses(raw_exchange(
        gw.port, (head + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n").encode()))
    assert (status, json.loads(body)) == (400, err("bad_request"))

    # Over 1 MiB: 413 at once, the body unread, and the connection closed.
    with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as s:
        s.sendall((head + "Content-Length: %d\r\n\r\n" % (1024 * 1024 + 1)).encode())
        [(status, h, body)] = parse_responses(read_until_close(s))
    assert (status, json.loads(body)) == (413, err("payload_too_large", "The request body is larger than 1 MiB."))
    assert h["connection"] == "close"
    # Exactly 1 MiB is read (and is a bad body here: padding after the object is not JSON).
    big = ids.encode() + b" " * (1024 * 1024 - len(ids) - 1) + b"x"
    assert post(gw, big)[::2] == (400, err("invalid_json"))
    # Spaces alone are JSON's whitespace: a 1 MiB body that parses.
    big = ids.encode() + b"\n" * (1024 * 1024 - len(ids))
    assert post(gw, big)[0] == 202

    # Another route still takes no body: its method first (405), then 413 as before.
    assert call(gw, "POST", "/v1/video/transcript", "x")[::2] == (405, err("method_not_allowed"))
    assert call(gw, "GET", "/v1/video/transcript?video_id=" + IDS[0], "x")[::2] == (413, err("payload_too_large"))


def test_a_body_in_pieces_with_line_breaks_then_a_pipelined_request(make_gateway):
    gw = make_gateway(keys=keys())
    body = json.dumps({"video_ids": IDS[:3]}, indent=2).replace("\n", "\r\n  \n\t").encode()
    head = ("POST /v1/jobs HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\ncontent-type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % (ACTIVE_KEY, len(body))).encode()
    nxt = ("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").encode()
    data = exchange_in_parts(gw.port, [head + body[:5], body[5:20], body[20:] + nxt])
    answers = parse_responses(data)
    assert len(answers) == 2, (data, gw.log_text()[-3000:])
    [(s1, h1, b1), (s2, _, _)] = answers
    assert s1 == 202, b1
    assert json.loads(b1)["total"] == 3 and s2 == 200


def test_a_body_ending_in_cr_leaves_the_next_request_on_the_connection_whole(make_gateway):
    gw = make_gateway(keys=keys())
    body = json.dumps({"video_ids": IDS[:1]}).encode() + b"\r"  # a CR is JSON whitespace
    head = ("POST /v1/jobs HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\ncontent-type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % (ACTIVE_KEY, len(body))).encode()
    nxt = ("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").encode()
    [(s1, _, b1), (s2, _, b2)] = parse_responses(raw_exchange(gw.port, head + body + nxt, 10))
    assert (s1, json.loads(b1)["total"]) == (202, 1)
    assert (s2, json.loads(b2)["status"]) == (200, "ok")


@pytest.mark.parametrize("body", [
    '{"video_ids":' + "[" * 400000 + "]" * 400000 + "}",  # deeper than any job request: yajl frees by recursion
    '{"video_ids":[[[[[[[[["x"]]]]]]]]]}',
    '{"video_ids":["%s\\u0000junk"]}' % IDS[0],  # an escaped NUL would cut the value short, silently
    '{"video_ids":["%s"],"language":"en\\u0000zz"}' % IDS[0],
], ids=["400000-deep", "9-deep", "escaped-nul-in-id", "escaped-nul-in-language"])
def test_a_body_too_deep_or_with_an_escaped_nul_is_invalid_json_and_the_worker_lives(make_gateway, body):
    gw = make_gateway(keys=keys())
    workers = sorted(gw.worker_pids())
    status, _, answer = post(gw, body)
    assert (status, answer) == (400, err("invalid_json"))
    assert call(gw, "GET", "/health", key=None)[0] == 200
    assert sorted(gw.worker_pids()) == workers


def test_a_body_that_stops_coming_is_408(make_gateway):
    gw = make_gateway(env={"VTS_HEADER_TIMEOUT_MS": "300"}, keys=keys())
    head = ("POST /v1/jobs HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\ncontent-type: application/json\r\n"
            "Content-Length: 100\r\n\r\n{\"video" % ACTIVE_KEY).encode()
    with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as s:
        s.sendall(head)
        [(status, h, body)] = parse_responses(read_until_close(s))
    assert (status, json.loads(body)) == (408, err("request_timeout", "The request body took too long."))
    assert h["connection"] == "close"


def test_a_job_is_visible_only_to_its_key(make_gateway):
    gw = make_gateway(keys=keys())
    _, h, body = post(gw, {"video_ids": IDS[:2]})
    loc = h["location"]
    for method, path in (("GET", loc), ("HEAD", loc), ("GET", loc + "/items"), ("DELETE", loc)):
        status, _, answer = call(gw, method, path, key=OTHER_KEY)
        assert status == 404, (method, path)
        if method != "HEAD":
            assert answer == err("not_found", "No such job.")
    # The other key's DELETE cancelled nothing.
    status, _, job = call(gw, "GET", loc)
    assert job["counts"]["queued"] == 2 and job["status"] == "queued"
    assert call(gw, "GET", "/v1/jobs/j000000000000000000000000")[::2] == (404, err("not_found", "No such job."))
    assert call(gw, "GET", loc, key=None)[::2] == (401, err("UNAUTHORIZED"))
    assert post(gw, {"video_ids": IDS[:2]}, key="vts_no_such_key")[::2] == (401, err("UNAUTHORIZED"))


def test_open_jobs_per_key_are_capped(make_gateway):
    gw = make_gateway(env={"VTS_JOBS_MAX_OPEN": "2"}, keys=keys())
    locs = [post(gw, {"video_ids": [IDS[i]]})[1]["location"] for i in range(2)]
    status, h, body = post(gw, {"video_ids": [IDS[2]]})
    assert (status, body) == (429, err("too_many_open_jobs"))
    assert post(gw, {"video_ids": [IDS[2]]}, key=OTHER_KEY)[0] == 202, "the cap is per key"
    assert call(gw, "DELETE", locs[0])[0] == 200
    assert post(gw, {"video_ids": [IDS[2]]})[0] == 202


def test_the_job_request_counts_once_in_the_window_and_costs_no_unit_of_the_month(make_gateway):
    # A key with 3 requests a window and a month of 1 unit.
    gw = make_gateway(keys=[("small", ACTIVE_KEY, "active", 3, 3600, 1)])
    remaining = []
    for i in range(3):
        status, h, body = post(gw, {"video_ids": IDS[i * 5:(i + 1) * 5]})
        assert status == 202, body
        remaining.append(h["x-ratelimit-remaining"])
    assert remaining == ["2", "1", "0"]
    status, h, body = post(gw, {"video_ids": [IDS[20]]})
    assert (status, body) == (429, err("rate_limited"))
    assert int(h["retry-after"]) >= 1


def test_a_thousand_items_page_in_order(make_gateway):
    gw = make_gateway(keys=keys())
    status, h, body = post(gw, {"video_ids": IDS})
    assert status == 202 and body["total"] == 1000
    loc = h["location"]
    status, _, page = call(gw, "GET", loc + "/items?limit=1000")
    assert [i["video_id"] for i in page["items"]] == IDS and page["next_cursor"] is None
    seen, cursor, pages = [], None, 0
    while True:
        status, _, page = call(gw, "GET", loc + "/items?limit=300" + ("&cursor=" + cursor if cursor else ""))
        assert status == 200
        pages += 1
        seen += [i["video_id"] for i in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == IDS and pages == 4
    status, _, page = call(gw, "GET", loc + "/items")
    assert len(page["items"]) == 100 and page["next_cursor"] == "100"


@pytest.mark.parametrize("query,code", [("limit=0", "invalid_limit"), ("limit=1001", "invalid_limit"),
                                        ("limit=x", "invalid_limit"), ("limit=5&limit=6", "invalid_limit"),
                                        ("cursor=abc", "invalid_cursor"), ("cursor=-1", "invalid_cursor"),
                                        ("cursor=", "invalid_cursor")])
def test_bad_page_parameters_are_400(make_gateway, query, code):
    gw = make_gateway(keys=keys())
    loc = post(gw, {"video_ids": IDS[:2]})[1]["location"]
    assert call(gw, "GET", loc + "/items?" + query)[::2] == (400, err(code))


def test_methods_of_the_job_routes(make_gateway):
    gw = make_gateway(keys=keys())
    loc = post(gw, {"video_ids": IDS[:1]})[1]["location"]
    for method, path, allow in (("GET", "/v1/jobs", "POST"), ("DELETE", "/v1/jobs", "POST"),
                                ("POST", loc, "DELETE, GET, HEAD"), ("DELETE", loc + "/items", "GET, HEAD")):
        status, h, body = call(gw, method, path)
        assert (status, body, h["allow"]) == (405, err("method_not_allowed"), allow)
    assert call(gw, "GET", "/v1/jobs/" + "a" * 65)[0] == 404
    assert call(gw, "GET", "/v1/jobs/a/b/items")[0] == 404


def test_expect_100_continue_is_answered_before_the_body(make_gateway):
    gw = make_gateway(keys=keys())
    body = json.dumps({"video_ids": IDS[:2]}).encode()
    head = ("POST /v1/jobs HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\ncontent-type: application/json\r\n"
            "Expect: 100-continue\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (ACTIVE_KEY, len(body)))
    with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as s:
        s.sendall(head.encode())
        interim = b""
        while not interim.endswith(b"\r\n\r\n"):
            chunk = s.recv(1)
            assert chunk, interim
            interim += chunk
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        s.sendall(body)
        [(status, h, answer)] = parse_responses(read_until_close(s))
    assert status == 202 and json.loads(answer)["total"] == 2


def test_an_ended_job_is_deleted_after_its_ttl_and_an_open_one_kept(make_gateway):
    import time
    from vtsproc import wait_for
    gw = make_gateway(env={"VTS_JOB_TTL_S": "1"}, keys=keys())
    ended = post(gw, {"video_ids": IDS[:2]})[1]["location"]
    waiting = post(gw, {"video_ids": IDS[2:4]})[1]["location"]
    assert call(gw, "DELETE", ended)[0] == 200
    t_end = time.time() + 1.2
    assert wait_for(lambda: time.time() > t_end, 5)  # until the TTL has passed for both jobs
    # The dispatcher deletes what expired at its start and every minute after: restart to see it now.
    gw.stop()
    gw.start()

    def gone():
        return call(gw, "GET", ended)[0] == 404
    assert wait_for(gone, 10)
    assert call(gw, "GET", ended)[::2] == (404, err("not_found", "No such job."))
    status, _, job = call(gw, "GET", waiting)
    assert status == 200 and job["counts"]["queued"] == 2
