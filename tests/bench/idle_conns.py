#!/usr/bin/env python3
"""RSS of the gateway's workers with N idle keep-alive connections: each connection makes one request, reads the
answer and stays open. Prints the workers' RSS before and after, and the cost per worker.
    idle_conns.py PORT MASTER_PID [N]
"""
import os
import resource
import socket
import sys
import time


def worker_rss_kib(master):
    total, pids = 0, []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open("/proc/%s/comm" % entry) as f:
                comm = f.read().strip()
        except OSError:
            continue
        if int(fields[1]) == master and comm == "vts-worker":
            with open("/proc/%s/status" % entry) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        pids.append(entry)
    return total, len(pids)


def main():
    port, master = int(sys.argv[1]), int(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 10000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 1024), hard))
    before, workers = worker_rss_kib(master)
    socks = []
    req = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(req)
        socks.append(s)
    for s in socks:
        data = b""
        while b"\r\n\r\n" not in data:
            data += s.recv(4096)
    time.sleep(0.5)  # the wait is the test: the connections stay idle while the workers' memory is read
    after, _ = worker_rss_kib(master)
    print("%d idle keep-alive connections: workers' RSS %.1f MB -> %.1f MB, %.1f MB more per worker (%d workers)"
          % (n, before / 1024, after / 1024, (after - before) / 1024 / max(workers, 1), workers))
    for s in socks:
        s.close()


if __name__ == "__main__":
    main()
