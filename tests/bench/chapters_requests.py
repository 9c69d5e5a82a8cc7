#!/usr/bin/env python3
"""Platform requests of GET /v1/video/metadata?include=chapters, through the real binaries against the fake platform:
for each video, the requests the first ask makes (player and watch-next), then a cached second ask, then the metadata
without chapters and the transcript's chunks after it; and the first ask after a transcript of the video (its player
reply kept). Prints a Markdown table of the fake platform's counts per step.
    VTS_BUILD_DIR=build python3 tests/bench/chapters_requests.py
"""
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from conftest import ACTIVE_KEY  # noqa: E402
from stack import Stack  # noqa: E402


def counts(stack, video):
    got = stack.upstream.stats()["requests"]
    return (got.get("POST /youtubei/v1/player " + video, 0), got.get("POST /youtubei/v1/next " + video, 0),
            got.get("GET /api/timedtext " + video, 0))


def main():
    steps = [("metadata include=chapters, first ask", "/v1/video/metadata?include=chapters&video_id="),
             ("metadata include=chapters, cached ask", "/v1/video/metadata?include=chapters&video_id="),
             ("metadata without include", "/v1/video/metadata?video_id="),
             ("transcript format=chunks", "/v1/video/transcript?format=chunks&video_id=")]
    with tempfile.TemporaryDirectory() as tmp:
        stack = Stack(Path(tmp), fetchers=1, workers=1)
        try:
            print("| video | step | status | player | next | timedtext |")
            print("|---|---|---|---|---|---|")
            for video in ("chaptShort1", "chaptLong01", "capJson3xx1"):
                for name, path in steps:
                    stack.upstream.reset()
                    r = stack.gateway.request("GET", path + video, headers={"x-api-key": ACTIVE_KEY})
                    print("| %s | %s | %d | %d | %d | %d |" % ((video, name, r.status) + counts(stack, video)))
            # The chapters asked after a transcript: its kept player reply serves the details.
            stack.upstream.reset()
            stack.gateway.request("GET", "/v1/video/transcript?video_id=chaptOnce01", headers={"x-api-key": ACTIVE_KEY})
            before = counts(stack, "chaptOnce01")
            r = stack.gateway.request("GET", "/v1/video/metadata?include=chapters&video_id=chaptOnce01",
                                      headers={"x-api-key": ACTIVE_KEY})
            after = counts(stack, "chaptOnce01")
            print("| chaptOnce01 | metadata include=chapters after a transcript | %d | %d | %d | %d |" %
                  ((r.status,) + tuple(a - b for a, b in zip(after, before))))
        finally:
            stack.close()


if __name__ == "__main__":
    main()
