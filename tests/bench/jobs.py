#!/usr/bin/env python3
"""Batch jobs' figures on the real binaries and the fake platform (every platform request taking DELAY_MS):
items per second through FETCHERS fetchers; p50/p99 of synchronous cache misses alone and while a job runs; the
store's growth per 1,000 transcripts (the SQLite file, or with --redis the job's keys by MEMORY USAGE and Redis's
used_memory); the gateway's resident memory (workers and dispatcher) while every item of the job is paged out.
    VTS_BUILD_DIR=build jobs.py [ITEMS] [FETCHERS] [DELAY_MS] [--redis]
With --redis, a redis-server of its own on a free port holds the jobs (VTS_REDIS_URL).
"""
import http.client
import json
import os
import random
import sqlite3
import string
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from redisserver import Redis  # noqa: E402
from stack import Stack  # noqa: E402
from vtsproc import wait_for  # noqa: E402

KEY = "vts_bench_jobs_key"


def call(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"x-api-key": KEY}
    if body is not None:
        headers["content-type"] = "application/json"
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, resp.getheader("location"), data


def fresh(prefix):
    return prefix + "".join(random.choice(string.ascii_letters) for _ in range(11 - len(prefix)))


def sync_misses(port, n):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        status, _, _ = call(port, "GET", "/v1/video/transcript?video_id=" + fresh("bench"))
        times.append(time.perf_counter() - t0)
        if status != 200:
            sys.exit("a synchronous miss answered %d" % status)
    times.sort()
    return times[len(times) // 2] * 1000, times[min(len(times) - 1, int(len(times) * 0.99))] * 1000


def db_bytes(path):
    """The database's size once its WAL is checkpointed into it (the WAL's own size is a working buffer)."""
    if not os.path.exists(path):
        return 0
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return os.path.getsize(path)


def redis_used(redis):
    """Redis's used_memory (INFO memory), bytes."""
    info = redis.call("INFO", "memory").decode()
    return int(next(line.split(":")[1] for line in info.split("\r\n") if line.startswith("used_memory:")))


def redis_job_bytes(redis, job_id):
    """What the job's own keys take (MEMORY USAGE, every element counted)."""
    return sum(redis.call("MEMORY", "USAGE", "vts:job:" + job_id + suffix, "SAMPLES", "0") or 0
               for suffix in ("", ":it", ":res"))


def rss_kib(pids):
    total = 0
    for pid in pids:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


def main():
    args = [a for a in sys.argv[1:] if a != "--redis"]
    use_redis = "--redis" in sys.argv[1:]
    items = int(args[0]) if len(args) > 0 else 1000
    fetchers = int(args[1]) if len(args) > 1 else 8
    delay = int(args[2]) if len(args) > 2 else 100
    tmp = tempfile.mkdtemp(prefix="vts-jobs-bench-")
    redis = None
    env = None
    if use_redis:
        redis = Redis()
        redis.start()
        env = {"VTS_REDIS_URL": redis.url}
    stack = Stack(tmp, keys=[("bench", KEY, "active", 1000000, 60, 1000000000)], fetchers=fetchers,
                  upstream_args=("--delay-ms", str(delay)), gateway_env=env)
    try:
        port = stack.gateway.port
        alone = sync_misses(port, 50)
        db = os.path.join(str(stack.gateway.state_dir), "jobs.db")
        size0 = db_bytes(db) if redis is None else redis_used(redis)
        ids = [fresh("benchJ") for _ in range(items)]
        t0 = time.perf_counter()
        status, loc, body = call(port, "POST", "/v1/jobs", {"video_ids": ids})
        if status != 202:
            sys.exit("POST /v1/jobs answered %d: %s" % (status, body))
        during = sync_misses(port, 50)

        def done():
            return json.loads(call(port, "GET", loc)[2])["status"] == "done"
        if not wait_for(done, 3600, interval=0.2):
            sys.exit("the job did not end")
        elapsed = time.perf_counter() - t0
        size1 = db_bytes(db) if redis is None else redis_used(redis)
        pids = stack.gateway.child_pids()
        before = rss_kib(pids)
        peak, cursor = before, None
        while True:
            status, _, page = call(port, "GET", loc + "/items?limit=1000" + ("&cursor=" + cursor if cursor else ""))
            peak = max(peak, rss_kib(pids))
            cursor = json.loads(page)["next_cursor"]
            if cursor is None:
                break
        print("items=%d fetchers=%d platform_delay_ms=%d store=%s" % (items, fetchers, delay,
                                                                     "redis" if redis else "sqlite"))
        print("items_per_s=%.1f (job of %d items in %.1f s, synchronous misses interleaved)" % (
            items / elapsed, items, elapsed))
        print("sync_miss_ms alone p50=%.1f p99=%.1f; during the job p50=%.1f p99=%.1f" % (alone + during))
        if redis is None:
            print("sqlite_bytes_per_1000_transcripts=%d" % ((size1 - size0) * 1000 // items))
        else:
            job_bytes = redis_job_bytes(redis, loc.rsplit("/", 1)[1])
            print("redis_bytes_per_1000_transcripts memory_usage=%d used_memory_delta=%d" % (
                job_bytes * 1000 // items, (size1 - size0) * 1000 // items))
        print("gateway_rss_kib before_paging=%d peak_while_paging=%d (+%d)" % (before, peak, peak - before))
    finally:
        stack.close()
        if redis is not None:
            redis.stop()


if __name__ == "__main__":
    main()
