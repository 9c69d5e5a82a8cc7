#!/usr/bin/env python3
"""RSS of the gateway's workers while N connections have each asked for a transcript and never read the answer:
what a cached body costs per stuck reader (it is shared by reference, so it should cost nearly nothing). Prints the
workers' RSS before and once it has settled, and the growth in all.
    slow_readers.py PORT MASTER_PID KEY VIDEO_ID [N]
"""
import resource
import socket
import sys
import time

from idle_conns import worker_rss_kib

SETTLE_SAMPLES = 5  # RSS unchanged over this many samples, 200 ms apart: the writes have stalled


def main():
    port, master, key, video = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    n = int(sys.argv[5]) if len(sys.argv) > 5 else 1000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 1024), hard))
    before, workers = worker_rss_kib(master)
    req = ("GET /v1/video/transcript?video_id=%s HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\n\r\n" % (video, key)).encode()
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a reader that does not read
        s.connect(("127.0.0.1", port))
        s.sendall(req)
        socks.append(s)
    samples, after = [], before
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        after, _ = worker_rss_kib(master)
        samples.append(after)
        if len(samples) >= SETTLE_SAMPLES and len(set(samples[-SETTLE_SAMPLES:])) == 1:
            break
        time.sleep(0.2)  # poll interval: the workers' memory again until it settles, within the deadline
    print("%d connections that never read a transcript answer: workers' RSS %.1f MB -> %.1f MB, %.1f MB more in all "
          "(%d workers; target <= 50 MB)" % (n, before / 1024, after / 1024, (after - before) / 1024, workers))
    for s in socks:
        s.close()


if __name__ == "__main__":
    main()
