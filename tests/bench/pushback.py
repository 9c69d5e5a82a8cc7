#!/usr/bin/env python3
"""Figures for "when the platform pushes back", on 127.0.0.1 with the release or ASan build (VTS_BUILD_DIR).

1. One of two proxies blocked: the whole service (gateway, `vts-fetcher --workers 2`) behind two forward proxies
   whose outgoing connections come from 127.0.0.2 and 127.0.0.3, the fake platform answering 429 to 127.0.0.2.
   N distinct uncached videos, CONCURRENCY at a time: how many answered 200, and how many of their requests reached
   the platform through the blocked proxy.
2. The cost of a fall-through: one fetcher process (`--workers 1`) serves RUNS uncached videos the first client may
   play, then RUNS it may not (one more player request each); the difference of the fetcher child's CPU time
   (user + system, from /proc) per job is what one fall-through costs in our own time, whatever the platform's.

    VTS_BUILD_DIR=build python3 tests/bench/pushback.py [N] [CONCURRENCY] [RUNS]
"""
import concurrent.futures
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "fake_upstream"))
import harness  # noqa: E402
from stack import Stack  # noqa: E402


def blocked_proxy(n, concurrency):
    proxies = [harness.EgressProxy("127.0.0.2"), harness.EgressProxy("127.0.0.3")]
    tmp = tempfile.mkdtemp(prefix="vts-pushback-")
    stack = Stack(tmp, upstream_args=("--block-source", "127.0.0.2"),
                  fetcher_env={"VTS_UPSTREAM_PROXY": ",".join(p.url() for p in proxies)})
    try:
        stack.upstream.reset()
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            statuses = list(pool.map(lambda i: stack.get("benchP%05d" % i).status, range(n)))
        stats = stack.upstream.stats()
    finally:
        stack.close()
        for p in proxies:
            p.close()
    ok = sum(1 for s in statuses if s == 200)
    print("blocked proxy: %d/%d answered 200; requests through the blocked proxy: %d (all refused), through the "
          "other: %d" % (ok, n, stats["sources"].get("127.0.0.2", 0), stats["sources"].get("127.0.0.3", 0)))
    return ok == n


def cpu_ms(pid):
    """User + system CPU time of a process so far, in ms."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def fall_through_cost(runs):
    tmp = tempfile.mkdtemp(prefix="vts-fallthrough-")
    stack = Stack(tmp, fetchers=1, fetcher_env={"VTS_LOG_LEVEL": "warn"})
    try:
        (child,) = stack.fetchers.child_pids()
        per_job = {}
        for name, prefix in (("direct", "benchF"), ("fall-through", "vunpl")):
            stack.upstream.reset()
            before = cpu_ms(child)
            for i in range(runs):
                r = stack.get("%s%0*d" % (prefix, 11 - len(prefix), i))
                assert r.status == 200, r
            per_job[name] = (cpu_ms(child) - before) / runs
            players = sum(n for k, n in stack.upstream.stats()["requests"].items() if k.startswith("POST /youtubei"))
            print("%s: %d player requests for %d jobs, fetcher CPU %.2f ms per job" % (name, players, runs,
                                                                                     per_job[name]))
    finally:
        stack.close()
    print("fall-through: %.2f ms more of our own CPU per job" % (per_job["fall-through"] - per_job["direct"]))


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    concurrency = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    ok = blocked_proxy(n, concurrency)
    fall_through_cost(runs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
