"""The logs of the whole service (gateway: master, workers, dispatcher; fetchers) at DEBUG level, read after a run of
varied traffic through stack.Stack: one JSON object per line, one access line per request, the client's request id
carried to the dispatcher and the fetcher, and no secret or upstream content anywhere (API key, the client's Cookie,
the raw query string, caption text, the watch page's INNERTUBE_API_KEY, visitor data, the consent cookie)."""
import json
import os
import secrets
import sys

import pytest

from conftest import ACTIVE_KEY
from stack import Stack

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import fake_upstream  # noqa: E402  (its constants: what the fake platform sends)

ACCESS_FIELDS = ("request_id", "method", "path", "status", "dur_ms", "key_id")
TAG = secrets.token_hex(6)
COOKIE_SECRET = "cookie-secret-" + TAG
QUERY_SECRET = "query-secret-" + TAG


def rid(name):
    return "ops-%s-%s" % (name, TAG)


# (request id, method, target, headers, expected status, expected key_id)
REQUESTS = [
    (rid("json3"), "GET", "/v1/video/transcript?video_id=capJson3xx1&utm_token=" + QUERY_SECRET,
     {"x-api-key": ACTIVE_KEY, "cookie": "session=" + COOKIE_SECRET}, 200, "e2e"),
    (rid("refus"), "GET", "/v1/video/transcript?video_id=clientRefus&language=en&trace=" + QUERY_SECRET,
     {"x-api-key": ACTIVE_KEY}, 200, "e2e"),
    # The consent wall, answered with the CONSENT cookie.
    (rid("consent"), "GET", "/v1/video/transcript?video_id=consentOk01", {"x-api-key": ACTIVE_KEY}, 200, "e2e"),
    (rid("unavail"), "GET", "/v1/video/transcript?video_id=unavail0001", {"x-api-key": ACTIVE_KEY}, 404, "e2e"),
    (rid("upstream"), "GET", "/v1/video/transcript?video_id=http500xxx1", {"x-api-key": ACTIVE_KEY}, 502, "e2e"),
    (rid("cached"), "GET", "/v1/video/transcript?video_id=capJson3xx1&x=" + QUERY_SECRET,
     {"x-api-key": ACTIVE_KEY}, 200, "e2e"),
    (rid("head"), "HEAD", "/v1/video/transcript?video_id=capSrv3xxx1", {"x-api-key": ACTIVE_KEY}, 200, "e2e"),
    (rid("nokey"), "GET", "/v1/video/transcript?video_id=capJson3xx1&k=" + QUERY_SECRET,
     {"cookie": "sid=" + COOKIE_SECRET}, 401, ""),
    (rid("badkey"), "GET", "/v1/video/transcript?video_id=capJson3xx1", {"x-api-key": "wrong-" + QUERY_SECRET},
     401, ""),
    (rid("invalid"), "GET", "/v1/video/transcript?video_id=short&s=" + QUERY_SECRET, {"x-api-key": ACTIVE_KEY},
     400, "e2e"),
    (rid("health"), "GET", "/health?probe=" + QUERY_SECRET, {}, 200, ""),
    (rid("nowhere"), "GET", "/nowhere?q=" + QUERY_SECRET, {}, 404, ""),
]
# Jobs that reach a fetcher (the rest are answered by the cache or before the dispatcher).
FETCHED = [rid("json3"), rid("refus"), rid("consent"), rid("unavail"), rid("upstream"), rid("head")]


def _parse(text):
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        records.append((n, line, json.loads(line) if line.strip() else None))
    return records


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Runs the traffic once at DEBUG level, stops everything, and returns the complete logs."""
    # WEB only: every job takes the watch page flow (page, INNERTUBE_API_KEY, visitor data, consent cookie).
    s = Stack(tmp_path_factory.mktemp("logs"), gateway_env={"VTS_LOG_LEVEL": "debug"},
              fetcher_env={"VTS_LOG_LEVEL": "debug", "VTS_INNERTUBE_CLIENTS": "WEB"})
    try:
        answers = {}
        for request_id, method, target, headers, _, _ in REQUESTS:
            h = dict(headers, **{"x-request-id": request_id})
            answers[request_id] = s.gateway.request(method, target, headers=h, timeout=30)
        stats = s.upstream.stats()
    finally:
        s.close()
    return {"answers": answers, "stats": stats, "gateway": s.gateway.log_text(),
            "fetcher": s.fetchers.log_text()}


def test_the_traffic_got_its_expected_answers(run):
    for request_id, _, target, _, status, _ in REQUESTS:
        r = run["answers"][request_id]
        assert r.status == status, (target, r)
        assert r.headers["x-request-id"] == request_id
    # The secrets the logs must not hold really went through: the fetcher used the page's key and consent cookie.
    for video in ("capJson3xx1", "clientRefus", "consentOk01"):
        assert fake_upstream.API_KEY in run["stats"]["player_keys"][video]
    assert any(fake_upstream.CONSENT_V in c for c in run["stats"]["cookies"]["consentOk01"])


def test_every_log_line_is_one_json_object(run):
    for name in ("gateway", "fetcher"):
        lines = run[name].splitlines()
        assert len(lines) > 20, name
        for n, line in enumerate(lines, 1):
            try:
                rec = json.loads(line)
            except ValueError as e:
                raise AssertionError("%s.log line %d is not JSON (%s): %r" % (name, n, e, line[:300]))
            assert isinstance(rec, dict), (name, n, line)
            for field in ("ts", "level", "component", "pid", "msg"):
                assert field in rec, (name, n, field, line)
            assert rec["level"] in ("debug", "info", "warn", "error")
    components = {json.loads(line)["component"] for line in run["gateway"].splitlines()}
    assert {"gateway", "worker", "dispatcher"} <= components
    assert {json.loads(line)["component"] for line in run["fetcher"].splitlines()} == {"fetcher"}
    # DEBUG was on: the fetcher logged each upstream request.
    assert any(json.loads(line)["level"] == "debug" for line in run["fetcher"].splitlines())


def test_exactly_one_access_line_per_request_with_its_fields(run):
    access = [json.loads(line) for line in run["gateway"].splitlines() if json.loads(line)["msg"] == "request"]
    for request_id, method, target, _, status, key_id in REQUESTS:
        mine = [a for a in access if a.get("request_id") == request_id]
        assert len(mine) == 1, (request_id, mine)
        a = mine[0]
        for field in ACCESS_FIELDS:
            assert field in a, (field, a)
        assert (a["method"], a["path"], a["status"], a["key_id"]) == (method, target.split("?")[0], status, key_id)
        assert isinstance(a["dur_ms"], int) and 0 <= a["dur_ms"] < 30000
        assert a["component"] == "worker"


def test_client_request_id_reaches_the_dispatcher_and_the_fetcher(run):
    gateway = [json.loads(line) for line in run["gateway"].splitlines()]
    fetcher = [json.loads(line) for line in run["fetcher"].splitlines()]
    for request_id in FETCHED:
        disp = {r["msg"] for r in gateway if r["component"] == "dispatcher" and r.get("request_id") == request_id}
        assert {"job queued", "job assigned", "job finished"} <= disp, (request_id, disp)
        fetch = {r["msg"] for r in fetcher if r.get("request_id") == request_id}
        assert {"job done", "upstream request"} <= fetch, (request_id, fetch)
    # A cache hit is answered by the dispatcher (or the worker's own cache) without a fetcher.
    assert not [r for r in fetcher if r.get("request_id") == rid("cached")]


@pytest.mark.parametrize("what,secret", [
    ("API key", ACTIVE_KEY),
    ("client cookie", COOKIE_SECRET),
    ("query parameter value", QUERY_SECRET),
    ("raw query string", "video_id=capJson3xx1&utm_token="),
    ("raw query string", "video_id=clientRefus&language=en"),
    ("caption text", "Hello and welcome"),
    ("caption text", "fake platform"),
    ("watch page INNERTUBE_API_KEY", fake_upstream.API_KEY),
    ("watch page visitor data", fake_upstream.VISITOR_DATA.split("%")[0]),
    ("consent cookie value", fake_upstream.CONSENT_V),
    ("watch page title", "A fake video"),
])
def test_no_secret_or_upstream_content_is_ever_logged(run, what, secret):
    for name in ("gateway", "fetcher"):
        hits = [line for line in run[name].splitlines() if secret in line]
        assert hits == [], "%s (%r) in %s.log:\n%s" % (what, secret, name, "\n".join(hits[:3]))
