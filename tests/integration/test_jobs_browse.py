"""Batch jobs of a playlist or a channel, end to end: the real gateway (its worker reads the first page through the
dispatcher and a fetcher before the 202; its runner reads the rest), a fetcher pool and the fake platform serving
the recorded browse replies of ../shared/fixtures/newpipe (playlist/ and channel/). The captures are read here at
run time, never copied: the ids a job must hold are those of the recorded pages, in order, and every id the test
names (a playlist, a channel) is read from a recorded request. Without the captures these tests do not run and say
how to get them (not_here("captures")); the checks of bad members need no capture."""
import base64
import concurrent.futures
import glob
import json
import os
import re
import sqlite3
import urllib.parse

import pytest

from conftest import shared_fixtures
from stack import Stack
from test_jobs_api import err as api_err
from test_jobs_run import JOBKEY, all_items, call, wait_job_done
from vtsproc import wait_for

# The key of test_jobs_run's helpers (call, all_items), whose answers they validate against the OpenAPI document.
KEYS = [("jobs", JOBKEY, "active", 1000000, 60, 1000000)]
SOURCES = "Give exactly one of video_ids, playlist_id and channel_id."
PLAYLIST_MSG = "playlist_id must be 2 to 64 characters of A-Z, a-z, 0-9, _ or -."
CHANNEL_MSG = "channel_id must be a channel id: UC and 22 characters of A-Z, a-z, 0-9, _ or -."
LIMIT_MSG = "limit must be an integer from 1 to 5000 (VTS_JOB_MAX_ITEMS)."
UNAVAILABLE = {"code": "transcript_not_available", "message": "No accessible transcript was found for this video."}


def err(code, message):
    return {"error": {"code": code, "message": message}}


def wait_done(gw, loc):
    return wait_job_done(gw, loc, timeout=120)


# ---- the captures, read the way a reader of newpipe/README.md would ----

class Captures:
    """The recorded browse exchanges: each request's browseId or continuation, and the reply's video ids."""

    def __init__(self):
        root = os.path.dirname(shared_fixtures("newpipe/playlist"))
        shared_fixtures("newpipe/channel")
        self.files = {}
        for path in sorted(glob.glob(os.path.join(root, "playlist", "*", "*.json")) +
                           glob.glob(os.path.join(root, "channel", "*", "*.json"))):
            with open(path, encoding="utf-8") as f:
                exchange = json.load(f)
            req = exchange["request"]
            if "/youtubei/v1/browse" not in req["url"] or "$fields" in req["url"]:
                continue
            sent = json.loads(bytes(b & 0xff for b in req["dataToSend"]).decode("utf-8"))
            self.files[os.path.basename(path)] = (sent, exchange["response"])

    def named(self, pattern):
        found = [name for name in self.files if re.fullmatch(pattern, name)]
        assert len(found) == 1, (pattern, sorted(self.files))
        return self.files[found[0]]

    def by_token(self, token):
        for sent, response in self.files.values():
            if sent.get("continuation") == token:
                return response
        return None

    @staticmethod
    def first_page_id(sent):
        """The playlist id a recorded first page names: its "VL" browseId, or the one its client-built token holds."""
        if "browseId" in sent:
            return sent["browseId"][2:]
        raw = base64.urlsafe_b64decode(urllib.parse.unquote(sent["continuation"]) + "==")
        return re.search(rb"\x12.VL([A-Za-z0-9_-]+)", raw).group(1).decode()

    @staticmethod
    def page(response):
        """The video ids of a recorded reply in document order, and the continuation tokens it holds."""
        body = json.loads(response["responseBody"])
        ids, tokens = [], []

        def walk(node, parent_key=None):
            if isinstance(node, dict):
                if parent_key in ("playlistVideoRenderer", "videoRenderer") and "videoId" in node:
                    ids.append(node["videoId"])
                if parent_key == "lockupViewModel" and node.get("contentType") == "LOCKUP_CONTENT_TYPE_VIDEO":
                    ids.append(node["contentId"])
                if parent_key == "continuationCommand" and "token" in node:
                    tokens.append(node["token"])
                for k, v in node.items():
                    walk(v, k)
            elif isinstance(node, list):
                for v in node:
                    walk(v, parent_key)
        walk(body)
        return ids, tokens

    def chain(self, first):
        """Every id of the recorded pages from first on, following each page's continuation to a recorded one."""
        ids, response = [], first
        while response is not None:
            page_ids, tokens = self.page(response)
            ids += [i for i in page_ids if i not in ids]
            response = next((self.by_token(t) for t in tokens if self.by_token(t) is not None), None)
        return ids


@pytest.fixture(scope="module")
def captures():
    return Captures()


def captures_stack(tmp_path, gateway_env=None):
    """The stack with the fake platform serving the captures."""
    return Stack(tmp_path, keys=KEYS, fetchers=2, gateway_env=gateway_env,
                 upstream_args=("--captures", shared_fixtures("youtube-transcript-api")))


@pytest.fixture
def stack(tmp_path, captures):
    s = captures_stack(tmp_path)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def plain_stack(tmp_path):
    """The stack with a fake platform that reads no capture (for what needs none)."""
    s = Stack(tmp_path, keys=KEYS, fetchers=2)
    try:
        yield s
    finally:
        s.close()


def browse_requests(stack):
    return stack.requests().get("POST /youtubei/v1/browse", 0)


def run_job(stack, body, first_total):
    status, h, job = call(stack.gateway, "POST", "/v1/jobs", body)
    assert status == 202, job
    assert (job["status"], job["total"]) == ("queued", first_total), job
    assert h["location"] == "/v1/jobs/" + job["id"]
    return h["location"]


def assert_items(items, ids):
    assert [i["video_id"] for i in items] == ids
    # The fake platform plays none of the recorded videos: each item ran, as a video_ids item, to the 404 it gets.
    assert all(i == {"video_id": i["video_id"], "status": "failed", "error": UNAVAILABLE} for i in items), items[:3]


# ---- the lists ----

def test_a_playlist_with_continuations_yields_every_id_of_the_capture_in_order(stack, captures):
    sent, first = captures.named(r"vl-PLoumn5-page1\.continuation\.json")
    ids = captures.chain(first)
    assert len(ids) == 150
    loc = run_job(stack, {"playlist_id": captures.first_page_id(sent)}, 100)
    job = wait_done(stack.gateway, loc)
    assert (job["total"], job["counts"]["failed"]) == (150, 150), job
    assert_items(all_items(stack.gateway, loc), ids)
    assert browse_requests(stack) == 2
    # The first page was asked with the very token the platform's web client sent for it, not read back to its id.
    assert "POST /youtubei/v1/browse token read" not in stack.requests()


def test_a_continuation_beside_the_list_is_not_a_next_page(stack, captures):
    # The recorded 49-video playlist holds one continuation, in another shelf beside its list: the list ends there.
    sent, first = captures.named(r"vl-PL8dPuua-49videos\.browse\.json")
    ids, tokens = captures.page(first)
    assert (len(ids), len(tokens)) == (49, 1)
    loc = run_job(stack, {"playlist_id": captures.first_page_id(sent)}, 49)
    assert wait_done(stack.gateway, loc)["total"] == 49
    assert_items(all_items(stack.gateway, loc), ids)
    assert browse_requests(stack) == 1


def test_a_channel_uploads_playlist_is_read_as_a_playlist(stack, captures):
    sent, first = captures.named(r"uploads-VLUU.*-page1\.continuation\.json")
    ids = captures.chain(first)
    assert len(ids) == 150
    playlist = captures.first_page_id(sent)
    assert playlist.startswith("UU")
    loc = run_job(stack, {"playlist_id": playlist}, 100)
    assert wait_done(stack.gateway, loc)["total"] == 150
    assert_items(all_items(stack.gateway, loc), ids)


def test_limit_is_honoured_exactly_across_a_continuation(stack, captures):
    sent, first = captures.named(r"vl-PLWwAypA-5000videos-page1\.browse\.json")
    ids = captures.chain(first)
    assert len(ids) > 150
    loc = run_job(stack, {"playlist_id": captures.first_page_id(sent), "limit": 150}, len(captures.page(first)[0]))
    assert wait_done(stack.gateway, loc)["total"] == 150
    assert_items(all_items(stack.gateway, loc), ids[:150])
    # The job was full after the second page: the third (which no capture holds) was never asked for.
    assert browse_requests(stack) == 2
    # A limit the first page fills reads nothing more.
    loc = run_job(stack, {"playlist_id": captures.first_page_id(sent), "limit": 7}, 7)
    assert wait_done(stack.gateway, loc)["total"] == 7
    assert_items(all_items(stack.gateway, loc), ids[:7])
    assert browse_requests(stack) == 3


@pytest.mark.parametrize("tab", [r"UCTwECeG-videos-tab\.browse\.json", r"UCsXVk37-videos-tab\.browse\.json"],
                         ids=["lockup_items", "video_renderer_items"])
def test_a_channel_reads_its_videos_tab_in_either_item_shape(stack, captures, tab):
    sent, first = captures.named(tab)
    ids = captures.chain(first)
    assert len(ids) == 60
    loc = run_job(stack, {"channel_id": sent["browseId"], "limit": 45}, 30)
    assert wait_done(stack.gateway, loc)["total"] == 45
    assert_items(all_items(stack.gateway, loc), ids[:45])
    assert browse_requests(stack) == 2


# ---- what cannot be read: answers to the POST itself ----

def no_jobs(stack):
    db = sqlite3.connect(str(stack.gateway.state_dir / "jobs.db"))
    try:
        return db.execute("SELECT count(*) FROM jobs").fetchone()[0] == 0
    finally:
        db.close()


@pytest.mark.parametrize("capture,member,message", [
    (r"vl-PL1111-nonexistent\.browse\.json", "playlist_id", "The playlist does not exist."),
    (r"vl-INVALID_ID\.browse\.json", "playlist_id", "The playlist cannot be viewed."),
    (r"UCoaO4U-removed-channel\.browse\.json", "channel_id", "The channel has been removed."),
], ids=["missing_playlist", "unviewable_playlist", "removed_channel"])
def test_a_list_that_cannot_be_read_is_a_404_naming_the_case(stack, captures, capture, member, message):
    sent, _ = captures.named(capture)
    target = sent["browseId"][2:] if member == "playlist_id" else sent["browseId"]
    status, h, body = call(stack.gateway, "POST", "/v1/jobs", {member: target})
    assert (status, body) == (404, err("transcript_not_available", message))
    assert "location" not in h
    assert no_jobs(stack)


def test_a_private_playlist_is_a_404_naming_the_case(stack):
    # The fake's private playlist: the recorded refusal of a missing one, its alert saying "This playlist is private."
    status, _, body = call(stack.gateway, "POST", "/v1/jobs", {"playlist_id": "PLprivate0123456789"})
    assert (status, body) == (404, err("transcript_not_available", "The playlist is private."))
    assert no_jobs(stack)


def test_a_channel_the_platform_does_not_know_is_a_404(stack, captures):
    # The fake answers a channel id no capture names with the recorded 400 of a browseId the platform rejects.
    status, _, body = call(stack.gateway, "POST", "/v1/jobs", {"channel_id": "UC" + "Zz0_-" * 4 + "ab"})
    assert (status, body) == (404, err("transcript_not_available", "The channel does not exist."))
    assert no_jobs(stack)


def test_a_platform_failure_on_the_first_page_is_the_transcript_endpoints_502(plain_stack):
    stack = plain_stack
    status, h, body = call(stack.gateway, "POST", "/v1/jobs", {"playlist_id": "PLfail500abcdefgh"})
    assert (status, body) == (502, err("upstream_transcript_failed",
                                       "The video platform did not return the transcript."))
    assert "retry-after" not in h and "location" not in h
    assert h["x-ratelimit-limit"] == "1000000"
    assert no_jobs(stack)
    assert browse_requests(stack) == 1


# ---- a restart mid-list ----

@pytest.fixture
def wide_stack(tmp_path, captures):
    """Every fetcher may hold a job's page or item (VTS_JOBS_FETCHER_SHARE=100): a page held by the platform leaves
    the other fetcher to the items."""
    s = captures_stack(tmp_path, gateway_env={"VTS_JOBS_FETCHER_SHARE": "100"})
    try:
        yield s
    finally:
        s.close()


def test_a_gateway_killed_mid_continuation_resumes_and_holds_every_id_once(wide_stack, captures):
    stack = wide_stack
    sent, first = captures.named(r"vl-PLoumn5-page1\.continuation\.json")
    ids = captures.chain(first)
    gw = stack.gateway
    stack.upstream.post("/__browse_hold")
    try:
        loc = run_job(stack, {"playlist_id": captures.first_page_id(sent)}, 100)
        # The second page is asked for and held by the platform: the gateway dies while it is being read.
        assert wait_for(lambda: stack.requests().get("POST /youtubei/v1/browse held", 0) >= 1, 60), stack.requests()
        # Every item of the first page ends meanwhile; the list is not read to its end, so the job is not done.
        assert wait_for(lambda: call(gw, "GET", loc)[2]["counts"]["failed"] == 100, 60), call(gw, "GET", loc)
        status, _, job = call(gw, "GET", loc)
        assert (status, job["status"], job["total"]) == (200, "running", 100), job
        gw.kill()
        gw.start()
    finally:
        stack.upstream.post("/__browse_release")
    job = wait_done(gw, loc)
    assert (job["total"], job["counts"]["failed"]) == (150, 150), job
    items = all_items(gw, loc)
    assert_items(items, ids)
    assert len({i["video_id"] for i in items}) == len(items) == 150
    # The first page, the second held while the gateway died, and the second again from the kept continuation.
    assert browse_requests(stack) == 3
    assert "batch page read" in gw.log_text()


# ---- the cap of open jobs ----

@pytest.fixture
def slow_capped_stack(tmp_path, captures):
    """One open job a key, and a platform that takes a while over every page: several POSTs of a list are all
    between their check and their first page at once."""
    s = Stack(tmp_path, keys=KEYS, fetchers=2, gateway_env={"VTS_JOBS_MAX_OPEN": "1"},
              upstream_args=("--captures", shared_fixtures("youtube-transcript-api"), "--delay-ms", "1500"))
    try:
        yield s
    finally:
        s.close()


def test_lists_posted_at_once_while_their_first_pages_are_read_keep_the_cap_of_open_jobs(slow_capped_stack, captures):
    stack = slow_capped_stack
    sent, _ = captures.named(r"vl-PLoumn5-page1\.continuation\.json")
    body = {"playlist_id": captures.first_page_id(sent)}
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda _: call(stack.gateway, "POST", "/v1/jobs", body), range(3)))
    statuses = sorted(a[0] for a in answers)
    assert statuses == [202, 429, 429], [(a[0], a[2]) for a in answers]
    assert all(a[2] == api_err("too_many_open_jobs") for a in answers if a[0] == 429), answers
    db = sqlite3.connect(str(stack.gateway.state_dir / "jobs.db"))
    try:
        assert db.execute("SELECT count(*) FROM jobs").fetchone()[0] == 1
    finally:
        db.close()


# ---- bad members: no platform needed ----

@pytest.mark.parametrize("body,code,message", [
    ({"playlist_id": "P"}, "invalid_request", PLAYLIST_MSG),
    ({"playlist_id": "PL" + "a" * 63}, "invalid_request", PLAYLIST_MSG),
    ({"playlist_id": "PL!abcdef"}, "invalid_request", PLAYLIST_MSG),
    ({"playlist_id": 12345}, "invalid_request", PLAYLIST_MSG),
    ({"playlist_id": ""}, "invalid_request", PLAYLIST_MSG),
    ({"channel_id": "UCshort"}, "invalid_request", CHANNEL_MSG),
    ({"channel_id": "HC" + "a" * 22}, "invalid_request", CHANNEL_MSG),
    ({"channel_id": "UC" + "a" * 21 + "."}, "invalid_request", CHANNEL_MSG),
    ({"channel_id": None}, "invalid_request", CHANNEL_MSG),
    ({"playlist_id": "PLabcdef", "limit": 0}, "invalid_request", LIMIT_MSG),
    ({"playlist_id": "PLabcdef", "limit": 5001}, "invalid_request", LIMIT_MSG),
    ({"playlist_id": "PLabcdef", "limit": "10"}, "invalid_request", LIMIT_MSG),
    ({"channel_id": "UC" + "a" * 22, "limit": 1.5}, "invalid_request", LIMIT_MSG),
    ({"playlist_id": "PLabcdef", "channel_id": "UC" + "a" * 22}, "ambiguous_request", SOURCES),
], ids=["one_char", "too_long", "bad_char", "number", "empty", "channel_short", "channel_prefix", "channel_char",
        "channel_null", "limit_0", "limit_past_max", "limit_string", "limit_fraction", "both"])
def test_a_bad_playlist_channel_or_limit_is_a_400_naming_it(make_gateway, body, code, message):
    gw = make_gateway(keys=KEYS)
    status, _, answer = call(gw, "POST", "/v1/jobs", body)
    assert (status, answer) == (400, err(code, message))
