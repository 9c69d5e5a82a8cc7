#!/usr/bin/env python3
"""Goodput under overload: what the service serves at 1x, 2x and 10x the rate its fetchers can serve.

Starts the fake platform (every call takes DELAY_MS), a gateway and FETCHERS fetchers (tests/integration/stack.py),
measures the capacity (fresh ids, FETCHERS clients in a closed loop), then offers fresh ids open-loop (each request
sent at its planned time on its own connection, whatever the earlier ones became) at 1x, 2x and 10x that rate for
SECONDS each, with a stream of cached requests at CACHED_RATE beside it (bench_openloop: open loop, latency from
each request's due time). Prints, per rate: the answers by status,
their latency (p50 / p99 from the planned send time), whether every 503 carried Retry-After, the goodput (200s a
second) and its share of the goodput at 1x, and the cached stream's p99 against its p99 with no overload.
    VTS_BUILD_DIR=build python3 tests/bench/overload.py
Environment: DELAY_MS (500), FETCHERS (2), BENCH_SECONDS (15), DEADLINE_MS (VTS_JOB_TIMEOUT_MS, 5000), CACHED_RATE
(200).
Reported, not asserted: the machine's load changes the figures (print `uptime` beside them).
"""
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from conftest import ACTIVE_KEY, BUILD_DIR  # noqa: E402
from stack import Stack  # noqa: E402

DELAY_MS = int(os.environ.get("DELAY_MS", "500"))
FETCHERS = int(os.environ.get("FETCHERS", "2"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "15"))
DEADLINE_MS = int(os.environ.get("DEADLINE_MS", "5000"))
CACHED_RATE = int(os.environ.get("CACHED_RATE", "200"))
# The open-loop generator of tests/bench (an older build measured may not have it: BENCH_OPENLOOP names another).
GENERATOR = os.environ.get("BENCH_OPENLOOP", str(BUILD_DIR / "bin" / "bench_openloop"))


class Cached:
    """The cached stream: bench_openloop at CACHED_RATE on 8 connections for SECONDS; its p99 in ms."""

    def __init__(self, stack, video):
        self.proc = subprocess.Popen(
            [GENERATOR, str(stack.gateway.port), "/v1/video/transcript?video_id=" +
             video, str(CACHED_RATE), str(SECONDS), "8", "200", "x-api-key: " + ACTIVE_KEY],
            stdout=subprocess.PIPE, text=True)

    def p99_ms(self):
        out = self.proc.communicate(timeout=SECONDS + 30)[0].split()
        fields = dict(zip(out[::2], out[1::2]))
        if fields.get("errors") != "0":
            sys.exit("the cached stream had errors: %s" % " ".join(out))
        return int(fields["p99"]) / 1000.0


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


class Run:
    """Open-loop: request i is planned at start + i / rate; its latency counts from that plan (no coordinated
    omission: a slow answer never delays the next send, each request has its own thread and connection)."""

    def __init__(self, stack, rate, seconds, ids):
        self.stack, self.rate, self.seconds, self.ids = stack, rate, seconds, ids
        self.out, self.lock = [], threading.Lock()

    def one(self, vid, planned):
        try:
            r = self.stack.get(vid, timeout=DEADLINE_MS / 1000 + 15)
            status, ra = r.status, r.headers.get("retry-after")
        except OSError:
            status, ra = 0, None
        with self.lock:
            self.out.append((status, time.monotonic() - planned, ra))

    def start(self):
        self.threads = []
        t0 = time.monotonic()
        n = int(self.rate * self.seconds)

        def pace():
            for i in range(n):
                planned = t0 + i / self.rate
                delay = planned - time.monotonic()
                if delay > 0:
                    time.sleep(delay)  # the wait is the test: the open loop's planned send time
                t = threading.Thread(target=self.one, args=(next(self.ids), planned), daemon=True)
                t.start()
                self.threads.append(t)

        self.pacer = threading.Thread(target=pace)
        self.pacer.start()
        return self

    def wait(self):
        self.pacer.join()
        for t in self.threads:
            t.join(DEADLINE_MS / 1000 + 30)
        return self.out


def fresh_ids(prefix):
    n = 0
    while True:
        yield "%s%05d" % (prefix, n)
        n += 1


def capacity(stack, ids):
    """Served a second with FETCHERS clients asking fresh ids back to back for SECONDS."""
    done = [0]
    lock = threading.Lock()
    end = time.monotonic() + SECONDS

    def loop():
        while time.monotonic() < end:
            with lock:
                vid = next(ids)
            if stack.get(vid, timeout=DEADLINE_MS / 1000 + 15).status == 200:
                with lock:
                    done[0] += 1

    ts = [threading.Thread(target=loop) for _ in range(FETCHERS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return done[0] / SECONDS


def main():
    with tempfile.TemporaryDirectory(prefix="vts-overload-") as tmp:
        stack = Stack(tmp, gateway_env={"VTS_JOB_TIMEOUT_MS": str(DEADLINE_MS), "VTS_LOG_LEVEL": "warn"},
                      fetchers=FETCHERS, upstream_args=("--delay-ms", str(DELAY_MS)))
        try:
            ids = fresh_ids("benchO")
            cached = ["capJson3xx1"]
            assert stack.get(cached[0]).status == 200
            cap = capacity(stack, ids)
            print("capacity: %.2f transcripts/s (%d fetchers, platform %d ms a call, deadline %d ms); load: %s"
                  % (cap, FETCHERS, DELAY_MS, DEADLINE_MS, os.getloadavg()))
            quiet_p99 = Cached(stack, cached[0]).p99_ms()
            rows, base = [], None
            for mult in (1, 2, 10):
                time.sleep(DEADLINE_MS / 1000 + 1)  # the wait is the test: the previous rate's queue drains
                side = Cached(stack, cached[0])
                res = Run(stack, cap * mult, SECONDS, ids).start().wait()
                cp99 = side.p99_ms()
                by = {}
                for st, lat, ra in res:
                    by.setdefault(st, []).append((lat, ra))
                good = len(by.get(200, [])) / SECONDS
                base = base or good
                rows.append((mult, cap * mult, by, good, good / base, cp99))
            print("| offered | answers by status | latency p50 / p99 (s) | 503 with Retry-After | goodput /s | "
                  "of 1x | cached p99 (ms), %d/s beside it; alone %.2f |" % (CACHED_RATE, quiet_p99))
            print("|---|---|---|---|---|---|---|")
            for mult, rate, by, good, share, cp99 in rows:
                statuses = ", ".join("%s: %d" % (st, len(v)) for st, v in sorted(by.items()))
                lats = "; ".join("%s: %.2f / %.2f" % (st, pct([x for x, _ in v], 50), pct([x for x, _ in v], 99))
                                 for st, v in sorted(by.items()))
                shed = by.get(503, [])
                ra = "%d of %d" % (sum(1 for _, r in shed if r), len(shed)) if shed else "-"
                print("| %dx (%.1f/s) | %s | %s | %s | %.2f | %.0f%% | %.1f (%.2fx) |"
                      % (mult, rate, statuses, lats, ra, good, share * 100, cp99, cp99 / quiet_p99))
        finally:
            stack.close()


if __name__ == "__main__":
    main()
