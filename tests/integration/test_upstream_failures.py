"""Two kinds of 502 told apart: a platform that cannot be reached (a name that does not resolve) is no block of our
address, so it rests no egress, its 502 carries no Retry-After and a batch item that meets it fails at once, as the
reference says; a block is, and every 502 it ends in says when to come back (Retry-After), the first block of a row
too, before the egress rests. Real gateway and fetcher; the fake platform for the blocks."""
import contextlib
import os
import sys

from conftest import Gateway, http_request
from stack import UNLIMITED, Fetchers
from test_jobs_run import JOBKEY, all_items, call, start_job, wait_job_done
from vtsproc import wait_for, write_keyfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402

KEYS = [("jobs", JOBKEY, "active", 1000, 60, 1000)]
UNREACHABLE = "https://vts-nowhere.invalid"
UPSTREAM_FAILED = {"code": "upstream_transcript_failed", "message": "The video platform did not return the transcript."}


@contextlib.contextmanager
def service(tmp_path, upstream_url, **fetcher_env):
    """A gateway and one fetcher of upstream_url, once the fetcher is connected (no transcript asked before)."""
    gw = Gateway(tmp_path, env={"VTS_UPSTREAM_URL": upstream_url}, workers=1)
    gw.env["VTS_JOBS_URL"] = "tcp://127.0.0.1:%d" % gw.jobs_port
    write_keyfile(gw.keys_file, UNLIMITED + KEYS)
    fetchers = None
    try:
        gw.start()
        fetchers = Fetchers(tmp_path, gw.jobs_port, upstream_url, 1, fetcher_env)
        assert wait_for(lambda: http_request(gw.port, "GET", "/ready").status == 200, 10), gw.log_text()[-2000:]
        yield gw, fetchers
    finally:
        if fetchers is not None:
            fetchers.stop()
        gw.stop()


def transcript(gw, video):
    status, h, body = call(gw, "GET", "/v1/video/transcript?video_id=" + video)
    return status, h.get("retry-after"), body


def test_an_unreachable_platform_rests_nothing_and_its_502_names_no_retry(tmp_path):
    with service(tmp_path, UNREACHABLE) as (gw, fetchers):
        for video in ("benchUnr001", "benchUnr002", "benchUnr003"):
            assert transcript(gw, video) == (502, None, {"error": UPSTREAM_FAILED}), video
        # A batch's items fail with the synchronous endpoint's code, not queued for a rest that is not one.
        loc = start_job(gw, {"video_ids": ["benchUnr004", "benchUnr005"]})
        job = wait_job_done(gw, loc, timeout=30)
        assert job["counts"] == {"queued": 0, "running": 0, "done": 0, "failed": 2, "cancelled": 0}
        assert [i["error"] for i in all_items(gw, loc)] == [UPSTREAM_FAILED] * 2
        log = fetchers.log_text()
    assert "platform unreachable" in log
    assert "proxy resting after blocks" not in log


def test_every_502_of_a_block_carries_retry_after_the_first_too(tmp_path):
    # Every request blocked (429) at the direct route: the first block of a row rests nothing yet, the second does.
    fake = harness.FakeUpstream(["--block-source", "127.0.0.1"])
    try:
        with service(tmp_path, fake.url, VTS_PROXY_REST_MS="60000") as (gw, fetchers):
            answers = [transcript(gw, "benchBlk%03d" % i) for i in range(4)]
            log = fetchers.log_text()
    finally:
        fake.close()
    assert [(status, body) for status, _, body in answers] == [(502, {"error": UPSTREAM_FAILED})] * 4
    # The first came before any rest (one block of the two in a row that rest an egress): a second; then the rest's
    # length, doubling with each block in a row.
    assert [retry_after for _, retry_after, _ in answers] == ["1", "60", "120", "240"], answers
    assert "proxy resting after blocks" in log
