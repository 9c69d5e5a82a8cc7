"""POST /mcp end to end with the official MCP TypeScript SDK as the client (tests/contract/mcp_client.mjs): each
revision initialises, the tools list validates in the SDK's own schemas, every tool is called, the longest transcript
of the fake platform is paged to its end and compared with the REST answer, and the units of the month are counted
exactly (one per transcript, across its pages and across get_transcript and REST). The transport's own rules are
checked on the wire: Origin, the key as Bearer or x-api-key, 401 before JSON-RPC, a batch array, an unknown tool, a
bad cursor, notifications, GET. A job of fixture ids is started, polled to its end and its items paged through
start_transcript_job and get_transcript_job, as GET /v1/jobs/{id}/items has them."""
import http.client
import json
import shutil
import subprocess

import pytest

from conftest import ACTIVE_KEY
from contract import check_response
from stack import Stack

CONTRACT_DIR = __import__("pathlib").Path(__file__).resolve().parents[1] / "contract"
LONGEST = "longHour248"
QUOTA_KEY = "vts_test_key_quota2"
RATE_KEY = "vts_test_key_rate3"
JOB_RATE_KEY = "vts_test_key_jobrate2"
ALLOWED_ORIGIN = "https://agent.example"
VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    keys = [("quota2", QUOTA_KEY, "active", 1000, 60, 2), ("rate3", RATE_KEY, "active", 3, 3600, 1000),
            ("jobrate2", JOB_RATE_KEY, "active", 2, 3600, 1000)]
    # One worker: the REST revalidation after the pages is answered 304 by the worker that holds the validator.
    s = Stack(tmp_path_factory.mktemp("mcp"), fetchers=1, workers=1, keys=keys,
              gateway_env={"VTS_MCP_ALLOWED_ORIGINS": ALLOWED_ORIGIN + ", https://other.example"})
    yield s
    s.close()


def sdk(stack, steps, headers=None, version=None):
    """Runs the SDK client with a plan; returns its output object."""
    node = shutil.which("node")
    assert node is not None, "node is not installed: the MCP SDK client (tests/contract) cannot run"
    if not (CONTRACT_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        npm = shutil.which("npm")
        assert npm is not None, "node is installed but npm is not: cannot install tests/contract"
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=CONTRACT_DIR, check=True,
                       timeout=300)
    plan = {"headers": headers if headers is not None else {"Authorization": "Bearer " + ACTIVE_KEY},
            "steps": steps}
    if version:
        plan["version"] = version
    run = subprocess.run([node, "mcp_client.mjs", stack.gateway.url + "/mcp"], cwd=CONTRACT_DIR,
                         input=json.dumps(plan), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def post(stack, body, headers=None, method="POST"):
    """One raw request to /mcp: (status, headers, body bytes), checked against the OpenAPI document."""
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
         "Authorization": "Bearer " + ACTIVE_KEY}
    h.update(headers or {})
    h = {k: v for k, v in h.items() if v is not None}
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn = http.client.HTTPConnection("127.0.0.1", stack.gateway.port, timeout=30)
    try:
        conn.request(method, "/mcp", body=data if method == "POST" else None, headers=h)
        r = conn.getresponse()
        payload = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()
    check_response(method, "/mcp", r.status, hdrs, payload)
    return r.status, hdrs, payload


def rest(stack, video, key=ACTIVE_KEY, headers=None):
    return stack.get(video, key=key, headers=headers)


def tool_error(result):
    assert result["isError"] is True and "structuredContent" not in result
    return json.loads(result["content"][0]["text"])["error"]


@pytest.mark.parametrize("version", VERSIONS)
def test_each_revision_initialises_and_is_sent_back(stack, version):
    out = sdk(stack, [{"op": "ping"}, {"op": "listTools"}], version=version)
    assert "connectError" not in out, out
    assert out["protocolVersion"] == version
    assert out["server"]["name"] == "vts"
    assert out["steps"][0] == {}
    # Every request after initialize carried the negotiated revision, and the SDK's GET for a stream got 405.
    assert out["sentVersions"] and set(out["sentVersions"]) == {version}
    assert ["GET", 405] in out["statuses"]


def test_an_unknown_revision_is_offered_the_newest(stack):
    status, _, body = post(stack, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                   "params": {"protocolVersion": "2024-01-01", "capabilities": {},
                                              "clientInfo": {"name": "t", "version": "1"}}})
    assert status == 200
    result = json.loads(body)["result"]
    assert result["protocolVersion"] == "2025-11-25"
    assert result["capabilities"] == {"tools": {"listChanged": False}}


def test_the_tools_list_names_every_tool_with_schemas(stack):
    out = sdk(stack, [{"op": "listTools"}])
    tools = {t["name"]: t for t in out["steps"][0]["tools"]}
    assert sorted(tools) == ["get_transcript", "get_transcript_job", "get_video_metadata", "list_caption_tracks",
                             "search_transcript", "start_transcript_job"]
    for t in tools.values():
        assert t["inputSchema"]["type"] == "object" and t["outputSchema"]["type"] == "object" and t["description"]
    for name in ("get_transcript", "get_video_metadata", "list_caption_tracks", "search_transcript"):
        assert tools[name]["inputSchema"]["required"][0] == "video" and tools[name]["annotations"]["readOnlyHint"]
    assert tools["get_transcript_job"]["inputSchema"]["required"] == ["job_id"]
    assert tools["get_transcript_job"]["annotations"]["readOnlyHint"] is True
    assert tools["start_transcript_job"]["annotations"]["readOnlyHint"] is False
    assert sorted(tools["start_transcript_job"]["inputSchema"]["properties"]) == [
        "channel_id", "format", "language", "limit", "playlist_id", "translate", "video_ids", "webhook_url"]
    assert tools["get_transcript"]["inputSchema"]["properties"]["max_chars"]["maximum"] == 100000


def test_every_tool_answers(stack):
    out = sdk(stack, [{"op": "listTools"},
                      {"op": "call", "name": "get_transcript", "args": {"video": "capJson3xx1"}},
                      {"op": "call", "name": "get_transcript",
                       "args": {"video": "https://youtu.be/capJson3xx1", "format": "segments"}},
                      {"op": "call", "name": "search_transcript", "args": {"video": "capJson3xx1", "query": "HELLO"}},
                      {"op": "call", "name": "get_video_metadata", "args": {"video": "capJson3xx1"}},
                      {"op": "call", "name": "list_caption_tracks", "args": {"video": "capJson3xx1"}}])
    _, text, segs, search, meta, tracks = out["steps"]
    want = rest(stack, "capJson3xx1").json()
    assert text["isError"] is False
    sc = text["structuredContent"]
    assert (sc["video_id"], sc["language"], sc["source"], sc["format"]) == ("capJson3xx1", want["language"],
                                                                            want["source"], "text")
    assert sc["next_cursor"] is None and sc["first_segment"] == 0 and sc["end_segment"] == len(want["segments"])
    assert text["content"][0]["text"] == sc["text"]
    assert [line.split("] ", 1)[1] for line in sc["text"].splitlines()] == [s["text"] for s in want["segments"]]
    assert segs["structuredContent"]["segments"] == want["segments"]
    assert json.loads(segs["content"][0]["text"]) == segs["structuredContent"]
    matches = search["structuredContent"]["matches"]
    hello = [s for s in want["segments"] if "hello" in s["text"].lower()]
    assert hello and [m["text"] for m in matches] == [s["text"] for s in hello]
    assert matches[0]["url"] == "https://www.youtube.com/watch?v=capJson3xx1&t=%ds" % int(hello[0]["start"])
    meta_rest = stack.gateway.request("GET", "/v1/video/metadata?video_id=capJson3xx1",
                                      headers={"x-api-key": ACTIVE_KEY}).json()
    assert meta.get("structuredContent") == meta_rest, meta
    tracks_rest = stack.gateway.request("GET", "/v1/video/tracks?video_id=capJson3xx1",
                                        headers={"x-api-key": ACTIVE_KEY}).json()
    assert tracks.get("structuredContent") == tracks_rest, tracks


def test_the_metadata_tool_gives_the_chapters_when_asked(stack):
    # listTools first: the SDK then checks each result's structuredContent against the tool's outputSchema.
    out = sdk(stack, [{"op": "listTools"},
                      {"op": "call", "name": "get_video_metadata",
                       "args": {"video": "chaptShort1", "include_chapters": True}},
                      {"op": "call", "name": "get_video_metadata",
                       "args": {"video": "https://youtu.be/chaptShort1", "include_chapters": False}},
                      {"op": "call", "name": "get_video_metadata", "args": {"video": "chaptShort1",
                                                                            "include_chapters": "yes"}}])
    listed, with_chapters, without, bad = out["steps"]
    tool = next(t for t in listed["tools"] if t["name"] == "get_video_metadata")
    assert tool["inputSchema"]["properties"]["include_chapters"] == {
        "type": "boolean", "default": False,
        "description": "Add the video's chapters (chapters: title, start, end in seconds)."}
    assert tool["outputSchema"]["properties"]["chapters"]["items"]["required"] == ["title", "start", "end"]
    want = stack.gateway.request("GET", "/v1/video/metadata?video_id=chaptShort1&include=chapters",
                                 headers={"x-api-key": ACTIVE_KEY}).json()
    assert want["chapters"] == [{"title": "Hello", "start": 0, "end": 2}, {"title": "Caf\u00e9 talk", "start": 2,
                                                                            "end": 12}]
    assert with_chapters["isError"] is False and with_chapters["structuredContent"] == want
    assert json.loads(with_chapters["content"][0]["text"]) == want
    assert without["structuredContent"] == {k: v for k, v in want.items() if k != "chapters"}
    assert bad["error"]["code"] == -32602
    assert bad["error"]["message"] == "MCP error -32602: include_chapters must be true or false."


@pytest.mark.parametrize("fmt", ["segments", "text"])
def test_the_longest_transcript_pages_to_its_end_as_rest_has_it(stack, fmt):
    want = rest(stack, LONGEST).json()
    out = sdk(stack, [{"op": "pages", "args": {"video": LONGEST, "format": fmt}}])
    pages = out["steps"][0]["pages"]
    assert len(pages) > 1
    assert pages[-1]["next_cursor"] is None and all(p["next_cursor"] for p in pages[:-1])
    assert [p["first_segment"] for p in pages[1:]] == [p["end_segment"] for p in pages[:-1]]
    if fmt == "segments":
        joined = [s for p in pages for s in p["segments"]]
        assert joined == want["segments"]
        assert all(len(json.dumps(p["segments"], ensure_ascii=False, separators=(",", ":"))) <= 20000 + 1 for p in pages)
    else:
        lines = [line for p in pages for line in p["text"].splitlines()]
        assert [line.split("] ", 1)[1] for line in lines] == [s["text"] for s in want["segments"]]
        assert all(len(p["text"]) <= 20000 for p in pages)


def test_one_unit_per_transcript_across_pages_and_rest(stack):
    # quota2: two units a month. Every page of the longest transcript costs one unit in all; a REST revalidation with
    # the ETag the pages named costs none; one more REST answer costs the second; then the month is spent.
    out = sdk(stack, [{"op": "pages", "args": {"video": LONGEST, "format": "segments", "max_chars": 5000}}],
              headers={"x-api-key": QUOTA_KEY})
    pages = out["steps"][0]["pages"]
    assert len(pages) > 10
    etag = pages[0]["etag"]
    r = rest(stack, LONGEST, key=QUOTA_KEY, headers={"If-None-Match": etag})
    assert r.status == 304
    r = rest(stack, LONGEST, key=QUOTA_KEY)
    assert r.status == 200 and r.headers["etag"] == etag
    out = sdk(stack, [{"op": "call", "name": "get_transcript", "args": {"video": "capJson3xx1"}},
                      {"op": "call", "name": "get_transcript",
                       "args": {"video": LONGEST, "cursor": pages[0]["next_cursor"], "format": "segments"}}],
              headers={"x-api-key": QUOTA_KEY})
    err = tool_error(out["steps"][0])
    assert err == {"code": "quota_exceeded", "message": "The monthly quota of this API key is used up.",
                   "status": 429, "retry_after_s": err["retry_after_s"]}
    assert err["retry_after_s"] > 0
    # A spent month refuses every call, a page its cursor covers included (as it refuses a revalidation).
    assert tool_error(out["steps"][1])["code"] == "quota_exceeded"


def test_every_tool_call_counts_in_the_short_window(stack):
    steps = [{"op": "call", "name": "list_caption_tracks", "args": {"video": "capJson3xx1"}}] * 4
    out = sdk(stack, steps, headers={"Authorization": "Bearer " + RATE_KEY})
    assert [s["isError"] for s in out["steps"][:3]] == [False, False, False]
    err = tool_error(out["steps"][3])
    assert err["code"] == "rate_limited" and err["status"] == 429 and 0 < err["retry_after_s"] <= 3600


def test_an_unavailable_video_is_a_tool_error(stack):
    out = sdk(stack, [{"op": "call", "name": "get_transcript", "args": {"video": "unavail0001"}}])
    assert tool_error(out["steps"][0]) == {"code": "transcript_not_available",
                                           "message": "No accessible transcript was found for this video.",
                                           "status": 404, "retry_after_s": None}


def test_unknown_tool_and_bad_arguments_are_invalid_params(stack):
    out = sdk(stack, [{"op": "call", "name": "no_such_tool", "args": {}},
                      {"op": "call", "name": "get_transcript", "args": {"video": "capJson3xx1", "cursor": "0.1.x.y"}},
                      {"op": "call", "name": "get_transcript", "args": {"video": "nope"}},
                      {"op": "call", "name": "get_transcript", "args": {"video": "capJson3xx1", "max_chars": 10}},
                      {"op": "call", "name": "list_caption_tracks", "args": {"video": "capJson3xx1", "query": "x"}}])
    codes = [s["error"]["code"] for s in out["steps"]]
    assert codes == [-32602] * 5
    assert "Unknown tool" in out["steps"][0]["error"]["message"]
    assert "cursor" in out["steps"][1]["error"]["message"]
    assert out["steps"][4]["error"]["message"] == "MCP error -32602: query is not an argument of list_caption_tracks."


def test_a_cursor_is_bound_to_its_key_and_video(stack):
    first = sdk(stack, [{"op": "call", "name": "get_transcript", "args": {"video": LONGEST}}])
    cursor = first["steps"][0]["structuredContent"]["next_cursor"]
    out = sdk(stack, [{"op": "call", "name": "get_transcript", "args": {"video": LONGEST, "cursor": cursor}},
                      {"op": "call", "name": "get_transcript", "args": {"video": "capJson3xx1", "cursor": cursor}},
                      {"op": "call", "name": "get_transcript",
                       "args": {"video": LONGEST, "cursor": cursor[:-1] + ("0" if cursor[-1] != "0" else "1")}}])
    assert out["steps"][0]["isError"] is False
    assert [s["error"]["code"] for s in out["steps"][1:]] == [-32602, -32602]
    other = sdk(stack, [{"op": "call", "name": "get_transcript", "args": {"video": LONGEST, "cursor": cursor}}],
                headers={"x-api-key": RATE_KEY})
    assert other["steps"][0]["error"]["code"] == -32602


def test_without_a_key_401_before_any_json_rpc(stack):
    for headers in ({"Authorization": None}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic eDp5"}):
        status, hdrs, body = post(stack, b"not json at all", headers=headers)
        assert status == 401 and hdrs["www-authenticate"] == "Bearer"
        assert json.loads(body)["error"]["code"] == "UNAUTHORIZED"
    status, _, body = post(stack, {"jsonrpc": "2.0", "id": 7, "method": "ping"},
                           headers={"Authorization": None, "x-api-key": ACTIVE_KEY})
    assert (status, json.loads(body)) == (200, {"jsonrpc": "2.0", "id": 7, "result": {}})


def test_origin_is_checked(stack):
    ping = {"jsonrpc": "2.0", "id": "a", "method": "ping"}
    status, _, body = post(stack, ping, headers={"Origin": "https://evil.example"})
    assert status == 403 and json.loads(body)["error"]["code"] == "forbidden_origin"
    status, _, body = post(stack, ping, headers={"Origin": "null"})
    assert status == 403
    for origin in (ALLOWED_ORIGIN, "https://other.example"):
        status, _, body = post(stack, ping, headers={"Origin": origin})
        assert (status, json.loads(body)["id"]) == (200, "a")


def test_transport_rules(stack):
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    status, _, body = post(stack, [ping, ping])
    assert status == 400 and json.loads(body) == {
        "jsonrpc": "2.0", "id": None,
        "error": {"code": -32600, "message": "Batches are not supported: send one message a request."}}
    status, _, body = post(stack, b"{\"jsonrpc\": ")
    assert status == 400 and json.loads(body)["error"]["code"] == -32700
    status, hdrs, body = post(stack, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert (status, body) == (202, b"")
    status, _, body = post(stack, {"jsonrpc": "2.0", "id": 2, "method": "resources/list"})
    assert status == 200 and json.loads(body)["error"]["code"] == -32601
    status, _, body = post(stack, ping, headers={"MCP-Protocol-Version": "1999-01-01"})
    assert status == 400 and json.loads(body)["error"]["code"] == "unsupported_protocol_version"
    status, _, body = post(stack, ping, headers={"MCP-Protocol-Version": "2025-06-18"})
    assert status == 200
    status, _, _ = post(stack, ping, headers={"Accept": "text/event-stream"})
    assert status == 406
    status, _, _ = post(stack, ping, headers={"Content-Type": "text/plain"})
    assert status == 415
    status, hdrs, _ = post(stack, None, method="GET")
    assert status == 405 and hdrs["allow"] == "POST"


def test_a_job_is_started_polled_to_its_end_and_its_items_paged(stack):
    ids = ["capJson3xx1", LONGEST, "unavail0001"]
    out = sdk(stack, [{"op": "job", "args": {"video_ids": [ids[0], "https://youtu.be/" + LONGEST, ids[2], ids[0]]},
                       "max_chars": 5000}])
    step = out["steps"][0]
    start = step["start"]
    assert start["isError"] is False, start
    job = start["structuredContent"]
    assert (job["status"], job["total"]) == ("queued", 3) and job["quota_remaining"] >= 0
    assert start["content"][0]["text"].startswith("Job %s is queued with 3 videos." % job["id"])
    assert json.loads(start["content"][0]["text"].split("\n", 1)[1]) == job
    # The poll ended at the job's end: two transcripts and one video without one.
    final = step["status"]["structuredContent"]["job"]
    assert (final["id"], final["status"], final["total"]) == (job["id"], "done", 3)
    assert (final["counts"]["done"], final["counts"]["failed"]) == (2, 1)
    pages = [p["structuredContent"] for p in step["pages"]]
    assert all(p["job"]["id"] == job["id"] for p in pages)
    assert pages[-1]["next_cursor"] is None and all(p["next_cursor"] for p in pages[:-1])
    items = [it for p in pages for it in p["items"]]
    assert [(it["video_id"], it["status"]) for it in items] == [(ids[0], "done"), (LONGEST, "done"),
                                                                (ids[2], "failed")]
    # Within max_chars: a page past its first item never goes over it; the 248 KB transcript is a page of its own.
    for p in pages:
        size = len(json.dumps(p["items"], ensure_ascii=False, separators=(",", ":")))
        assert len(p["items"]) == 1 or size <= 5000, (len(p["items"]), size)
    assert [len(p["items"]) for p in pages] == [1, 1, 1]
    assert items[0]["transcript"] == rest(stack, ids[0]).json()
    assert items[1]["transcript"] == rest(stack, LONGEST).json()
    assert items[2]["error"]["code"] == "transcript_not_available"
    # The same items as the REST API pages them.
    r = stack.gateway.request("GET", "/v1/jobs/%s/items" % job["id"], headers={"x-api-key": ACTIVE_KEY})
    assert r.status == 200 and r.json() == {"items": items, "next_cursor": None}
    text = step["pages"][0]["content"][0]["text"]
    assert text.startswith("Job %s is done: 2 of 3 videos done, 1 failed.\n" % job["id"])
    assert json.loads(text.split("\n", 1)[1]) == pages[0]


def test_job_tools_refuse_as_the_jobs_api_does(stack):
    out = sdk(stack, [{"op": "call", "name": "start_transcript_job", "args": {"video_ids": ["nope"]}},
                      {"op": "call", "name": "start_transcript_job", "args": {"playlist_id": "PLx", "video_ids": []}},
                      {"op": "call", "name": "get_transcript_job", "args": {"job_id": "nosuchjob"}},
                      {"op": "call", "name": "get_transcript_job", "args": {"job_id": "x", "cursor": "1&limit=5"}},
                      {"op": "call", "name": "get_transcript_job", "args": {"job_id": "x", "max_chars": 10}}])
    s = out["steps"]
    # A malformed member is invalid params with the REST API's message.
    assert s[0]["error"] == {"code": -32602, "message": "MCP error -32602: video_ids[0] is neither a video id nor a "
                                                        "recognised video URL."}
    assert s[1]["error"] == {"code": -32602,
                             "message": "MCP error -32602: Give exactly one of video_ids, playlist_id and channel_id."}
    assert [x["error"]["code"] for x in s[3:5]] == [-32602, -32602]
    assert "cursor" in s[3]["error"]["message"] and "max_chars" in s[4]["error"]["message"]
    # A job of another key, or none, is the REST API's 404 as a tool error.
    assert tool_error(s[2]) == {"code": "not_found", "message": "No such job.", "status": 404, "retry_after_s": None}
    # Each call counts once in the key's short window (2 an hour here), as a REST jobs request does.
    out = sdk(stack, [{"op": "call", "name": "start_transcript_job", "args": {"video_ids": ["capJson3xx1"]}},
                      {"op": "call", "name": "get_transcript_job", "args": {"job_id": "nosuchjob"}},
                      {"op": "call", "name": "start_transcript_job", "args": {"video_ids": ["capJson3xx1"]}}],
              headers={"x-api-key": JOB_RATE_KEY})
    s = out["steps"]
    assert s[0]["isError"] is False and s[0]["structuredContent"]["total"] == 1
    assert tool_error(s[1])["code"] == "not_found"
    err = tool_error(s[2])
    assert (err["code"], err["status"]) == ("rate_limited", 429) and 0 < err["retry_after_s"] <= 3600
