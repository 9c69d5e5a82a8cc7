"""A video the clients cannot play is a 404 transcript_not_available whose message says the case its reply names
(age-restricted, members-only, private, removed, live not yet archived, not in the region), and
vts_upstream_outcomes_total counts each case under its own kind. The fake platform answers with the real captured
refusals (read at start from ../shared/fixtures, never copied)."""

import os

import pytest

from conftest import ACTIVE_KEY, CAPTURES_HOWTO, not_here
from stack import Stack, harness, metric
from vtsproc import wait_metric

FIXTURES = os.environ.get("VTS_SHARED_FIXTURES", os.path.join(harness.ROOT, "..", "shared", "fixtures"))
CAPTURES = os.path.join(FIXTURES, "youtube-transcript-api")
PLAYER = "POST /youtubei/v1/player "


def not_available(message):
    return b'{"error":{"code":"transcript_not_available","message":"%s"}}' % message.encode()


# Each captured refusal: the 404's message and the kind it is counted under.
CASES = {
    "realPrivat1": ("The video is private.", "private"),
    "realMember1": ("The video is for channel members only.", "members_only"),
    "realGeoRes1": ("The video is not available in this region.", "geo_restricted"),
    "realAgeRes1": ("The video is age-restricted.", "age_restricted"),
    "realUnavai1": ("No accessible transcript was found for this video.", "not_available"),
}
KINDS = ("private", "members_only", "geo_restricted", "age_restricted", "removed", "live_not_archived",
         "not_available")


@pytest.fixture(autouse=True)
def captures_present():
    if not os.path.isdir(os.path.join(FIXTURES, "newpipe", "reel")) or not os.path.isdir(CAPTURES):
        not_here("captures", f"the platform's refusals are the captured ones; {CAPTURES_HOWTO}")


def test_captured_refusals_say_their_case_and_are_counted_apart(tmp_path):
    s = Stack(tmp_path, upstream_args=["--captures", CAPTURES], fetchers=1)
    try:
        s.upstream.reset()
        answers = {video: s.get(video) for video in CASES}
        # Asked again: the answer kept (one entry for the video) says the same, and the platform is not asked.
        again = {video: s.get(video) for video in CASES}
        # Every kind of the page, once the last job is counted.
        wait_metric(s.gateway.metrics_port, "vts_upstream_outcomes_total", 1, kind="not_available")
        text = s.metrics()
        requests = s.requests()
    finally:
        s.close()
    for video, (message, _) in CASES.items():
        assert answers[video].status == 404, (video, answers[video])
        assert answers[video].body == not_available(message), video
        assert again[video].status == 404 and again[video].body == answers[video].body, video
    # Every default client was asked once (each may be allowed what another is refused), and no caption was.
    assert requests == {PLAYER + video: 2 for video in CASES}
    counted = {kind: metric(text, "vts_upstream_outcomes_total", kind=kind) for kind in KINDS}
    assert counted == {"private": 1, "members_only": 1, "geo_restricted": 1, "age_restricted": 1, "removed": 0,
                       "live_not_archived": 0, "not_available": 1}


def test_track_lists_of_captured_refusals_say_their_case(tmp_path):
    s = Stack(tmp_path, upstream_args=["--captures", CAPTURES], fetchers=1)
    try:
        r = s.gateway.request("GET", "/v1/video/tracks?video_id=realMember1", headers={"x-api-key": ACTIVE_KEY})
    finally:
        s.close()
    assert r.status == 404, r
    assert r.body == not_available("The video is for channel members only.")
