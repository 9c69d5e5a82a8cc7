#!/usr/bin/env python3
"""Jobs per second of one fetcher on the fake platform, with VTS_SANDBOX=on against off.

One bare vts-fetcher (started as the caller: as root it drops to VTS_FETCHER_USER) is given caption jobs one after the
other by a fake dispatcher, each for a fresh video id, so that every job makes its two platform requests (player and
caption track). Rounds of N jobs alternate between a fetcher with the sandbox on and one with it off, so that a
change of the machine's load falls on both; the best round of each is compared (the least disturbed one).
    sandbox.py [JOBS_PER_ROUND] [ROUNDS]        (VTS_BUILD_DIR: the build to measure, default build/)
Bounded: at most ROUNDS x 2 x JOBS_PER_ROUND jobs (default 5 x 2 x 300), each with a 30 s deadline.
"""
import os
import random
import string
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402
from harness import READY, FakeDispatcher, decode_result, encode_job  # noqa: E402


def cpu_seconds(pid):
    """User and system CPU time of a process so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def round_rate(upstream, sandbox, jobs):
    """(jobs per second, CPU ms per job) of one fetcher over jobs sequential caption jobs."""
    d = FakeDispatcher()
    d.listen()
    proc = subprocess.Popen([harness.fetcher_binary()], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=harness.fetcher_env(upstream.url, VTS_JOBS_URL=d.url, VTS_SANDBOX=sandbox,
                                                    VTS_LOG_LEVEL="warn", ASAN_OPTIONS="detect_leaks=0"))
    try:
        conn = d.accept(timeout=20)
        if conn.recv() != READY:
            sys.exit("the fetcher did not offer itself")
        prefix = "bench" + "".join(random.choice(string.ascii_letters) for _ in range(2))
        t0, c0 = time.perf_counter(), cpu_seconds(proc.pid)
        for i in range(jobs):
            conn.reply(encode_job(i + 1, "%s%04d" % (prefix, i), "en", request_id="bench-%d" % i))
            res = decode_result(conn.recv(timeout=30))
            if res["outcome"] != 1:
                sys.exit("job %d: outcome %d (%s)" % (i, res["outcome"], res["detail"]))
        return jobs / (time.perf_counter() - t0), (cpu_seconds(proc.pid) - c0) * 1000 / jobs
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stderr.close()
        d.close()


def main():
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    upstream = harness.FakeUpstream()
    try:
        rates = {"on": [], "off": []}
        cpu = {"on": [], "off": []}
        for r in range(rounds):
            for mode in (("on", "off") if r % 2 == 0 else ("off", "on")):
                rate, ms = round_rate(upstream, mode, jobs)
                rates[mode].append(rate)
                cpu[mode].append(ms)
        best = {m: max(v) for m, v in rates.items()}
        least = {m: min(v) for m, v in cpu.items()}
        print("one fetcher, %d sequential caption jobs a round, %d rounds each (jobs/s): on %s, off %s" % (
            jobs, rounds, " ".join("%.1f" % x for x in rates["on"]), " ".join("%.1f" % x for x in rates["off"])))
        print("best round: on %.1f jobs/s, off %.1f jobs/s, on/off %.3f" % (best["on"], best["off"],
                                                                             best["on"] / best["off"]))
        print("fetcher CPU per job, least of the rounds: on %.3f ms, off %.3f ms" % (least["on"], least["off"]))
    finally:
        upstream.close()


if __name__ == "__main__":
    main()
