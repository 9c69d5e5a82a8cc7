#!/usr/bin/env python3
"""Figures for "when the platform pushes back", on 127.0.0.1 with the release or ASan build (VTS_BUILD_DIR).

1. One of two proxies blocked: the whole service (gateway, `vts-fetcher --workers 2`) behind two forward proxies
   whose outgoing connections come from 127.0.0.2 and 127.0.0.3, the fake platform answering 429 to 127.0.0.2.
   N distinct uncached videos, CONCURRENCY at a time: how many answered 200, and how many of their requests reached
   the platform through the blocked proxy.
2. The cost of a fall-through: `vts-fetcher --once` on a video the first client may not play (one more player
   request) and on one it may, RUNS times each; the difference of the fetcher's CPU time per job (user + system,
   the process's whole life) is what one fall-through costs in our own time, whatever the platform's.

    VTS_BUILD_DIR=build python3 tests/bench/pushback.py [N] [CONCURRENCY] [RUNS]
"""
import concurrent.futures
import os
import resource
import subprocess
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


def cpu_of(args, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=30)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert "outcome=1 " in proc.stderr, proc.stderr
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def fall_through_cost(runs):
    fake = harness.FakeUpstream()
    try:
        env = harness.fetcher_env(fake.url, VTS_LOG_LEVEL="warn")
        binary = harness.fetcher_binary()
        direct, through = [], []
        for _ in range(runs):
            direct.append(cpu_of([binary, "--once", "capJson3xx1"], env))
            through.append(cpu_of([binary, "--once", "visionUnpl1"], env))
        fake.reset()
        subprocess.run([binary, "--once", "visionUnpl1"], env=env, capture_output=True, timeout=30)
        players = fake.stats()["requests"].get("POST /youtubei/v1/player visionUnpl1", 0)
    finally:
        fake.close()
    direct.sort()
    through.sort()
    med_d, med_t = direct[len(direct) // 2], through[len(through) // 2]
    print("fall-through: player requests for the job %d (1 without); fetcher CPU per job: median %.2f ms without, "
          "%.2f ms with one fall-through: %.2f ms more" % (players, med_d * 1000, med_t * 1000, (med_t - med_d) * 1000))


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    concurrency = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    ok = blocked_proxy(n, concurrency)
    fall_through_cost(runs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
