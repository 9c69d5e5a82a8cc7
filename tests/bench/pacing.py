#!/usr/bin/env python3
"""The figure of "pace every egress", on 127.0.0.1 with the release or ASan build (VTS_BUILD_DIR).

The whole service (gateway, one `vts-fetcher --workers W`) behind two forward proxies whose outgoing connections
come from 127.0.0.2 and 127.0.0.3, each egress with a budget of RATE requests a minute (VTS_EGRESS_RATE = 60 RATE an
hour) and BURST at once. N distinct uncached videos are asked at once. Printed: the answers by status (and error
code), the requests the platform saw from each address, and the largest excess over the budget found in any span of
arrivals (a token bucket admits at most BURST + RATE x span / 60 s; a positive excess is a request past the budget).

    VTS_BUILD_DIR=build python3 tests/bench/pacing.py [N] [WORKERS] [RATE] [BURST]
"""
import collections
import concurrent.futures
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "fake_upstream"))
import harness  # noqa: E402
from stack import Stack  # noqa: E402

# The fetcher spends a unit just before it sends; an arrival may lag its spending by up to this much (scheduling, the
# proxy), so two arrivals may be closer than their spendings were: the span they allow is widened by it.
ARRIVAL_SLACK_S = 0.25


def worst_excess(times, per_minute, burst):
    """The largest count of arrivals in a span beyond what the bucket admits over it (<= 0: never past the budget)."""
    times = sorted(times)
    worst = -burst
    for i in range(len(times)):
        for j in range(i, len(times)):
            span = times[j] - times[i] + ARRIVAL_SLACK_S
            worst = max(worst, (j - i + 1) - (burst + per_minute * span / 60.0))
    return worst


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    rate = int(sys.argv[3]) if len(sys.argv) > 3 else 60
    burst = int(sys.argv[4]) if len(sys.argv) > 4 else 60
    proxies = [harness.EgressProxy("127.0.0.2"), harness.EgressProxy("127.0.0.3")]
    tmp = tempfile.mkdtemp(prefix="vts-pacing-")
    # The stack's warm-up spends two units of one egress before the measure (its arrivals are not counted below).
    stack = Stack(tmp, fetchers=workers, gateway_env={"VTS_LOG_LEVEL": "warn"},
                  fetcher_env={"VTS_UPSTREAM_PROXY": ",".join(p.url() for p in proxies), "VTS_LOG_LEVEL": "warn",
                               "VTS_EGRESS_RATE": rate * 60, "VTS_EGRESS_BURST": burst})
    try:
        stack.upstream.reset()
        start = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            answers = list(pool.map(lambda i: stack.get("benchP%05d" % i, timeout=120), range(n)))
        took = time.monotonic() - start
        stats = stack.upstream.stats()
    finally:
        stack.close()
        for p in proxies:
            p.close()
    by_status = collections.Counter()
    retry_after = 0
    for r in answers:
        code = json.loads(r.body)["error"]["code"] if r.status != 200 else ""
        by_status["%d %s" % (r.status, code)] += 1
        retry_after += r.status == 502 and "retry-after" in {k.lower() for k in r.headers}
    print("%d videos at once, --workers %d, budget %d/min burst %d on each of two egresses, %.1f s:" % (
        n, workers, rate, burst, took))
    for k, v in sorted(by_status.items()):
        print("  %s: %d" % (k.strip(), v))
    print("  502 answers carrying Retry-After: %d" % retry_after)
    worst = 0
    for src in ("127.0.0.2", "127.0.0.3"):
        times = stats["source_times"].get(src, [])
        excess = worst_excess(times, rate, burst) if times else -burst
        worst = max(worst, excess)
        span = (max(times) - min(times)) if times else 0.0
        print("  platform requests from %s: %d over %.1f s (budget over that span: %.0f); worst excess %+.1f" % (
            src, len(times), span, burst + rate * span / 60.0, excess))
    ok = worst <= 0 and all(k.split()[0] in ("200", "502") for k in by_status)
    print("no request past the budget, every answer 200 or 502: %s" % ("yes" if ok else "NO"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
