#!/usr/bin/env python3
"""Platform requests for the metadata, the transcript and the track list of 20 videos, through the real binaries
(gateway, dispatcher, a fetcher) against the fake platform (the target: one player request a video).

    VTS_BUILD_DIR=build /usr/bin/python3 tests/bench/profile_requests.py [CLIENTS [N]]

CLIENTS is VTS_INNERTUBE_CLIENTS for the fetcher (default: its built-in order); N the number of videos (20). Each
video is a fresh id; its three requests go in the order metadata, transcript, tracks, each answered 200. Prints the
platform requests the fake platform counted, by kind, and per video. The warm-up job of the stack (and the visitor
call it makes for a client that fetches visitor data) is not counted.
"""

import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "fake_upstream"))
from stack import Stack  # noqa: E402


def main():
    clients = sys.argv[1] if len(sys.argv) > 1 else ""
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    env = {"VTS_INNERTUBE_CLIENTS": clients} if clients else {}
    stack = Stack(tempfile.mkdtemp(prefix="vts-bench-"), fetchers=1, fetcher_env=env)
    try:
        for i in range(n):
            video = "benchPR%04d" % i
            for path in ("/v1/video/metadata", "/v1/video/transcript", "/v1/video/tracks"):
                r = stack.gateway.request("GET", "%s?video_id=%s" % (path, video),
                                          headers={"x-api-key": stack.gateway.key}, timeout=30)
                if r.status != 200:
                    sys.exit("%s %s answered %d: %r" % (path, video, r.status, r.body[:200]))
        requests = stack.requests()
    finally:
        stack.close()
    kinds = {}
    for key, count in requests.items():
        kind = key.rsplit(" ", 1)[0] if key.split(" ")[-1].startswith("benchPR") else key
        kinds[kind] = kinds.get(kind, 0) + count
    total = sum(kinds.values())
    player = sum(c for k, c in kinds.items() if k.endswith(("/youtubei/v1/player", "/reel/reel_item_watch")))
    print("clients: %s; %d videos, metadata + transcript + tracks each" % (clients or "built-in order", n))
    for kind in sorted(kinds):
        print("  %-45s %4d  (%.2f a video)" % (kind, kinds[kind], kinds[kind] / n))
    print("platform requests: %d (%.2f a video); player requests: %d (%.2f a video)" % (total, total / n, player,
                                                                                      player / n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
