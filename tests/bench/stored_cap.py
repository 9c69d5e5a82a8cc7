#!/usr/bin/env python3
"""Bytes one key keeps at VTS_JOBS_MAX_STORED_ITEMS: a key fills its cap with jobs of unavailable ids, cancels them
(ended jobs are kept until they expire), and the store's growth is read: Redis's used_memory (--redis, a
redis-server of its own) or the SQLite file with its WAL. No fetcher runs: the items are made and never run, the
abusive case the cap bounds. Prints the cap, the store's growth, bytes per item and the 429 past the cap.
    VTS_BUILD_DIR=build stored_cap.py [--redis]
"""
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from conftest import Gateway  # noqa: E402
from redisserver import Redis  # noqa: E402
from test_jobs_api import call  # noqa: E402
from vtsproc import write_keyfile  # noqa: E402

KEY = "vts_bench_stored_key"
CAP = 10000


def used_memory(redis):
    info = redis.call("INFO", "memory").decode()
    return int(next(line.split(":")[1] for line in info.splitlines() if line.startswith("used_memory:")))


def store_bytes(tmp, redis):
    if redis is not None:
        return used_memory(redis)
    return sum(p.stat().st_size for p in Path(tmp).rglob("jobs.db*"))


def main():
    use_redis = "--redis" in sys.argv
    tmp = tempfile.mkdtemp(prefix="vts-stored-")
    redis = Redis() if use_redis else None
    if redis is not None:
        redis.start()
    env = {"VTS_JOBS_MAX_STORED_ITEMS": str(CAP), "VTS_JOBS_MAX_OPEN": "100"}
    if redis is not None:
        env["VTS_REDIS_URL"] = redis.url
    gw = Gateway(Path(tmp), env=env)
    write_keyfile(gw.keys_file, [("stored", KEY, "active", 1000000, 60, 1000000)])
    gw.start()
    try:
        # One small job first: the store's own structures exist before the baseline.
        loc = call(gw, "POST", "/v1/jobs", json.dumps({"video_ids": ["warmup00000"]}),
                   {"content-type": "application/json"}, key=KEY)[1]["location"]
        call(gw, "DELETE", loc, key=KEY)
        before = store_bytes(tmp, redis)
        made = 1
        n = 0
        while made < CAP:
            size = min(5000, CAP - made)
            ids = ["zz%09d" % (n + i) for i in range(size)]
            n += size
            status, h, body = call(gw, "POST", "/v1/jobs", json.dumps({"video_ids": ids}),
                                   {"content-type": "application/json"}, key=KEY)
            assert status == 202, body
            call(gw, "DELETE", h["location"], key=KEY)
            made += size
        grown = store_bytes(tmp, redis) - before
        status, _, body = call(gw, "POST", "/v1/jobs", json.dumps({"video_ids": ["zzpastcap00"]}),
                               {"content-type": "application/json"}, key=KEY)
        print("backend=%s cap=%d items grown=%d B per_item=%.1f B past_cap=%d %s" % (
            "redis" if redis else "sqlite", CAP, grown, grown / (CAP - 1), status, body["error"]["code"]))
    finally:
        gw.stop()
        if redis is not None:
            redis.stop()


if __name__ == "__main__":
    main()
