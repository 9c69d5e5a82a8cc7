#!/usr/bin/env python3
"""Cache misses through a fetcher: what vts adds over the fake platform's own time.

For N fresh video ids (each a cache miss), times the transcript request through the gateway, and separately the
same two upstream calls (player, then timedtext) made directly to the fake platform from this client on a
keep-alive connection. Prints both medians and their difference (the time vts adds: HTTP front, dispatcher,
fetcher, parsing, serialisation).
    cache_miss.py GATEWAY_PORT UPSTREAM_PORT API_KEY [N]
"""
import http.client
import json
import random
import socket
import string
import sys
import time

from benchhttp import timed


def main():
    gw_port, up_port, key = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 200
    gw = http.client.HTTPConnection("127.0.0.1", gw_port, timeout=30)
    up = http.client.HTTPConnection("127.0.0.1", up_port, timeout=30)
    for conn in (gw, up):
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    service, upstream = [], []
    for i in range(n):
        vid = "bench" + "".join(random.choice(string.ascii_letters) for _ in range(6))
        t, status, _ = timed(gw, "GET", "/v1/video/transcript?video_id=" + vid, headers={"x-api-key": key})
        if status != 200:
            sys.exit("miss %s answered %d" % (vid, status))
        service.append(t)
        body = json.dumps({"context": {"client": {"clientName": "VISIONOS", "clientVersion": "1.02"}},
                           "videoId": vid})
        t1, s1, player = timed(up, "POST", "/youtubei/v1/player?prettyPrint=false", body=body,
                               headers={"Content-Type": "application/json"})
        track = json.loads(player)["captions"]["playerCaptionsTracklistRenderer"]["captionTracks"][0]["baseUrl"]
        path = track.split("youtube.com", 1)[1] + "&fmt=json3"
        t2, s2, _ = timed(up, "GET", path)
        if (s1, s2) != (200, 200):
            sys.exit("direct upstream calls failed: %d %d" % (s1, s2))
        upstream.append(t1 + t2)
    service.sort()
    upstream.sort()
    p50s, p50u = service[n // 2] * 1000, upstream[n // 2] * 1000
    print("cache miss (%d fresh ids, sequential): service p50 %.2f ms, platform's own p50 %.2f ms, vts adds %.2f ms"
          % (n, p50s, p50u, p50s - p50u))


if __name__ == "__main__":
    main()
