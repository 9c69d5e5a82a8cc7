"""What an independent contract pass (a mock server, linters, a generated client) found between the document and the
service, each checked here from the real gateway's answers and the document itself: a 501 declared where it is sent,
a job's bad language coded as the transcript endpoint codes it, a limit that is an integer by value, cursor as the item
offset it is, no default that makes a generated client require a member, an introduction naming every keyed endpoint,
405 wording true to each path's Allow, and a 415 naming the type it got."""
import http.client
import json
import re

import pytest

from conftest import ACTIVE_KEY
from contract import allow_of, check_response, load_document
from test_jobs_api import IDS, call, err, keys, post


@pytest.mark.parametrize("path", ["/health", "/ready", "/openapi.json"])
def test_an_unknown_method_on_a_public_path_gets_a_501_its_operations_declare(make_gateway, path):
    gw = make_gateway(keys=keys())
    conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
    try:
        conn.request("FOO", path)
        resp = conn.getresponse()
        raw = resp.read()
        hdrs = {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()
    assert (resp.status, json.loads(raw)) == (501, err("not_implemented"))
    # The path's own operations declare it, body and code included.
    for method in ("GET", "HEAD"):
        check_response(method, path, 501, hdrs, raw if method == "GET" else b"")


@pytest.mark.parametrize("member,value", [("language", "english"), ("language", ""), ("translate", 3),
                                          ("translate", "en_US")])
def test_a_jobs_bad_language_is_invalid_language_as_on_the_transcript_endpoint(make_gateway, member, value):
    gw = make_gateway(keys=keys())
    status, _, body = post(gw, {"video_ids": [IDS[0]], member: value})
    assert (status, body) == (400, err("invalid_language",
                                       "%s must be a string matching ^[a-z]{2,3}(?:-[a-zA-Z]{2,8})?$." % member))
    r = call(gw, "GET", "/v1/video/transcript?video_id=%s&%s=en_US" % (IDS[0], "lang" if member == "language"
                                                                       else "translate"))
    assert r[0] == 400 and r[2]["error"]["code"] == "invalid_language"


@pytest.mark.parametrize("raw,total", [("2", 2), ("2.0", 2), ("1e0", 1), ("3E0", 3), ("2.50e0", None), ("0.0", None),
                                       ("1e400", None), ("-1.0", None)])
def test_a_limit_is_an_integer_by_its_value(make_gateway, raw, total):
    gw = make_gateway(keys=keys())
    status, _, body = post(gw, '{"video_ids":["%s","%s","%s","%s"],"limit":%s}' % (*IDS[:4], raw))
    if total is None:
        assert (status, body) == (400, err("invalid_request",
                                           "limit must be an integer from 1 to 5000 (VTS_JOB_MAX_ITEMS)."))
    else:
        assert (status, body["total"]) == (202, total)


def test_cursor_is_an_item_offset(make_gateway):
    gw = make_gateway(keys=keys())
    loc = post(gw, {"video_ids": IDS[:5]})[1]["location"]
    status, _, page = call(gw, "GET", loc + "/items?cursor=3")
    assert (status, [i["video_id"] for i in page["items"]], page["next_cursor"]) == (200, IDS[3:5], None)
    status, _, page = call(gw, "GET", loc + "/items?cursor=1&limit=2")
    assert ([i["video_id"] for i in page["items"]], page["next_cursor"]) == (IDS[1:3], "3")
    for at_or_past in ("5", "6", "9999"):
        assert call(gw, "GET", loc + "/items?cursor=" + at_or_past)[::2] == (200, {"items": [], "next_cursor": None})
    assert call(gw, "GET", loc + "/items?cursor=0")[::2] == (
        400, err("invalid_cursor", "cursor must be an item offset: a decimal integer from 1."))
    doc = load_document()
    [cursor] = [p for p in doc["paths"]["/v1/jobs/{id}/items"]["get"]["parameters"] if p.get("name") == "cursor"]
    assert cursor["description"].startswith("An item offset: ")


def test_a_job_requests_members_have_no_default_a_generated_client_would_require(make_gateway):
    doc = load_document()
    props = doc["components"]["schemas"]["JobRequest"]["properties"]
    assert [name for name, p in props.items() if "default" in p] == []
    # Absent, format is json.
    gw = make_gateway(keys=keys())
    loc = post(gw, {"video_ids": [IDS[0]]})[1]["location"]
    assert call(gw, "GET", loc)[2]["format"] == "json"


def test_the_introduction_names_every_keyed_endpoint():
    doc = load_document()
    intro = doc["info"]["description"]
    assert "read-only" not in intro
    keyed = ["`%s %s`" % (m.upper(), p) for p, item in doc["paths"].items() for m, op in item.items()
             if m in ("get", "post") and op.get("security") != []]
    assert keyed, "no keyed operation"
    for op in keyed:
        method, path = op.strip("`").split(" ")
        assert ("`%s %s`" % (method, path)) in intro or ("`%s` and `DELETE %s`" % (method, path)) in intro, op


def _descriptions(node, at=""):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "description" and isinstance(v, str):
                yield at, v
            else:
                yield from _descriptions(v, at + "/" + str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _descriptions(v, at + "/" + str(i))


def test_the_405_wording_is_true_to_each_paths_allow(make_gateway):
    doc = load_document()
    for path, item in doc["paths"].items():
        for at, text in _descriptions(item, path):
            if "Allow: GET, HEAD" in text:
                assert allow_of(path) == "GET, HEAD", (at, allow_of(path))
    for at, text in _descriptions(doc["components"], "/components"):
        assert "other than GET or HEAD" not in text and "Allow: GET, HEAD" not in text, at
    gw = make_gateway(keys=keys())
    status, h, body = call(gw, "GET", "/v1/jobs")
    assert (status, body, h["allow"]) == (405, err("method_not_allowed"), "POST")


def test_a_415_names_the_type_it_got(make_gateway):
    gw = make_gateway(keys=keys())
    status, _, body = post(gw, json.dumps({"video_ids": [IDS[0]]}), headers={"content-type": "text/csv"})
    assert (status, body) == (415, err("unsupported_media_type",
                                       "The request body must be application/json; got text/csv."))
    assert re.search(r"names the `Content-Type` received",
                     load_document()["paths"]["/v1/jobs"]["post"]["responses"]["415"]["description"])
