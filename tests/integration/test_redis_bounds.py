"""What Redis holds and what the gateways admit through it, against real redis-servers started from the configuration
files in deploy/redis/, real gateways and fetchers, and the fake platform counting requests: every spelling of a
language is one key and one fetch, a transcript is one entry in Redis however many keys it answers, an unplayable
video one entry for all its keys; track lists are shared between gateways and a planted body is never served; three
gateways through a 10 s Redis freeze admit at most what a key had left; a killed claimant delays a waiter by
seconds."""
import itertools
import os
import signal
import sys
import threading
import time

import pytest

from certs import Certs
from conftest import REPO, Gateway, http_request, wait_for
from test_claims import fetchers
from test_several_gateways import HELLO, player_requests
from stack import UNLIMITED

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
from vtsproc import log_records, write_keyfile  # noqa: E402

FIFTY_KEY = "vts_test_key_fifty_units"
KEYS = UNLIMITED + [("fifty", FIFTY_KEY, "active", 1000000, 3600, 50)]


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs(tmp_path_factory.mktemp("certs"))


def started_redis(conf):
    from redisserver import Redis
    r = Redis(conf=REPO / "deploy" / "redis" / conf)
    r.start()
    return r


@pytest.fixture
def cache_redis():
    r = started_redis("cache.conf")
    yield r
    r.stop()


@pytest.fixture
def counters_redis():
    r = started_redis("counters.conf")
    yield r
    r.stop()


def gateway(path, certs, counters, cache=None, **env):
    path.mkdir(parents=True, exist_ok=True)
    more = {"VTS_REDIS_URL": counters.url}
    if cache is not None:
        more["VTS_REDIS_CACHE_URL"] = cache.url
    more.update(env)
    gw = Gateway(path, env=dict(certs.env("gateway"), **more), workers=1)
    gw.env["VTS_JOBS_URL"] = "tls+tcp://127.0.0.1:%d" % gw.jobs_port
    write_keyfile(gw.keys_file, KEYS)
    return gw.start()


def get(gw, query, key=None, kind="transcript", timeout=30):
    return http_request(gw.port, "GET", "/v1/video/%s?%s" % (kind, query), headers={"x-api-key": key or gw.key},
                        timeout=timeout)


def timedtext_requests(upstream, video):
    return sum(n for k, n in upstream.stats()["requests"].items() if k.startswith("GET /api/timedtext") and video in k)


def entries(redis, video):
    """The video's keys in Redis with the bytes each uses (MEMORY USAGE: key, value and Redis' own overhead)."""
    keys = redis.call("KEYS", "vts:transcript:{%s}:*" % video)
    return {k.decode(): redis.call("MEMORY", "USAGE", k) for k in keys}


def test_the_shipped_redis_configurations_bound_the_cache_and_never_evict_a_counter(cache_redis, counters_redis):
    assert cache_redis.call("CONFIG", "GET", "maxmemory") == [b"maxmemory", b"268435456"]
    assert cache_redis.call("CONFIG", "GET", "maxmemory-policy") == [b"maxmemory-policy", b"allkeys-lru"]
    assert counters_redis.call("CONFIG", "GET", "maxmemory") == [b"maxmemory", b"67108864"]
    assert counters_redis.call("CONFIG", "GET", "maxmemory-policy") == [b"maxmemory-policy", b"noeviction"]


def test_a_hundred_spellings_of_one_language_cost_one_fetch_and_one_entry(tmp_path, certs, upstream, cache_redis,
                                                                         counters_redis):
    """One gateway, the cache in its own Redis: 100 spellings of ca-valencia (BCP 47 casing makes them one key) of a
    248 KB transcript are one player request, one caption request, and in Redis one entry and one alias."""
    gw = gateway(tmp_path / "gw", certs, counters_redis, cache_redis)
    try:
        with fetchers(tmp_path, certs, upstream, [gw], 2):
            video = "longHour248"
            spellings = ["".join(c.upper() if bit else c for c, bit in zip("valencia", bits))
                         for bits in itertools.product((0, 1), repeat=8)][:100]
            assert len(set(spellings)) == 100
            bodies = set()
            for s in spellings:
                r = get(gw, "video_id=%s&language=ca-%s" % (video, s))
                assert r.status == 200, r.body[:200]
                bodies.add(r.body)
            assert len(bodies) == 1
            assert player_requests(upstream, video) == 1
            assert timedtext_requests(upstream, video) == 1
            assert wait_for(lambda: len(entries(cache_redis, video)) == 2, 5), entries(cache_redis, video)
            held = entries(cache_redis, video)
            track = [k for k in held if k.split("}:", 1)[1].startswith("=")]
            assert len(track) == 1 and len(held) == 2, held
            alias = "vts:transcript:{%s}:ca-valencia" % video
            assert alias in held, held
            assert held[alias] < 200, held
            body = len(next(iter(bodies)))
            # The body once, and the allocator's rounding of it (jemalloc size classes: at most 1/8 more).
            assert body > 240000 and held[track[0]] < body * 9 // 8, (body, held)
            # Nothing of the cache is in the counters' Redis.
            assert counters_redis.call("KEYS", "vts:transcript:*") == []
            print("\n100 spellings: %d player request, %d caption request, Redis %d keys, %d bytes (body %d)"
                  % (player_requests(upstream, video), timedtext_requests(upstream, video), len(held),
                     sum(held.values()), body))
    finally:
        gw.stop()


def test_languages_served_one_track_share_its_entry(tmp_path, certs, upstream, counters_redis):
    """Languages the video lacks are served its default track: with the video's player summary held, they are asked
    as that track's language, so Redis holds that transcript once with the one small alias of its language, and the
    platform is asked for its captions once (tests/integration/test_language_served.py counts more spellings)."""
    gw = gateway(tmp_path / "gw", certs, counters_redis)
    try:
        with fetchers(tmp_path, certs, upstream, [gw], 2):
            upstream.reset()
            video = "multiLang01"  # default track: de
            for lang in ("de", "xx", "yyy", "zz-Zz"):
                r = get(gw, "video_id=%s&language=%s" % (video, lang))
                assert r.status == 200 and r.json()["language"] == "de", r.body[:200]
            assert timedtext_requests(upstream, video) == 1
            # Written to Redis as the answer goes out: wait for the alias.
            assert wait_for(lambda: len(entries(counters_redis, video)) == 2, 5), entries(counters_redis, video)
            held = entries(counters_redis, video)
            full = [k for k in held if "}:=de#" in k]
            assert len(full) == 1, held
            aliases = sorted(k.split("}:", 1)[1] for k in held if k not in full)
            assert aliases == ["de"], held
            assert all(held[k] < 200 for k in held if k not in full), held
    finally:
        gw.stop()


def test_an_unplayable_video_is_fetched_once_for_every_kind_and_language(tmp_path, certs, upstream, counters_redis):
    gws = [gateway(tmp_path / ("gw%d" % i), certs, counters_redis) for i in range(2)]
    try:
        with fetchers(tmp_path, certs, upstream, gws, 2):
            video = "unplayable1"
            r = get(gws[0], "video_id=" + video)
            assert r.status == 404 and r.json()["error"]["code"] == "transcript_not_available", r.body
            asked = player_requests(upstream, video)
            assert asked >= 1
            for gw in gws:
                for query, kind in (("video_id=%s&language=en" % video, "transcript"),
                                    ("video_id=%s&language=pt-BR" % video, "transcript"),
                                    ("video_id=%s&language=de&translate=fr" % video, "transcript"),
                                    ("video_id=" + video, "tracks")):
                    r = get(gw, query, kind=kind)
                    assert r.status == 404 and r.json()["error"]["code"] == "transcript_not_available", r.body
            assert player_requests(upstream, video) == asked, "a kind or language of it asked the platform again"
            assert wait_for(lambda: list(entries(counters_redis, video)) == ["vts:transcript:{%s}:*gone" % video], 5), \
                entries(counters_redis, video)
    finally:
        for gw in gws:
            gw.stop()


def test_track_lists_are_shared_and_a_planted_body_is_never_served(tmp_path, certs, upstream, counters_redis):
    gws = [gateway(tmp_path / ("gw%d" % i), certs, counters_redis) for i in range(2)]
    try:
        with fetchers(tmp_path, certs, upstream, gws, 2):
            video = "fourLangs01"
            first = get(gws[0], "video_id=" + video, kind="tracks")
            assert first.status == 200, first.body
            asked = player_requests(upstream, video)
            second = get(gws[1], "video_id=" + video, kind="tracks")
            assert second.status == 200 and second.body == first.body
            assert player_requests(upstream, video) == asked, "the second gateway asked the platform again"
            assert gws[1].metric("vts_dispatch_redis_hits_total") == 1
            assert counters_redis.call("EXISTS", "vts:transcript:{%s}:*tracks" % video) == 1
            assert "bad transcript cache entry in Redis deleted" not in gws[1].log_text()
            # A body that starts as ours and is anything after: a miss, deleted, fetched again.
            video = "capJson3xx1"
            planted = b'VC1\x01\x01\x02en{"language":"en","text":"planted",<b>not json</b>}'
            assert counters_redis.call("SET", "vts:transcript:{%s}:en" % video, planted, "PX", "60000") == b"OK"
            r = get(gws[0], "video_id=%s&language=en" % video)
            assert r.status == 200 and r.json()["text"] == HELLO, r.body
            assert r.headers["content-type"].startswith("application/json")
            assert player_requests(upstream, video) == 1
            deleted = [x for x in log_records(gws[0].log_text())
                       if x.get("msg") == "bad transcript cache entry in Redis deleted"]
            assert [x["video_id"] for x in deleted] == [video]
    finally:
        for gw in gws:
            gw.stop()


def test_three_gateways_through_a_redis_freeze_admit_at_most_what_the_key_had_left(tmp_path, certs, upstream,
                                                                                   counters_redis):
    """A key with 50 units left, three gateways, Redis frozen (SIGSTOP) for 10 s while clients hammer every gateway:
    each falls back to its third (16), so 48 are served, never more than the 50."""
    gws = [gateway(tmp_path / ("gw%d" % i), certs, counters_redis) for i in range(3)]
    try:
        with fetchers(tmp_path, certs, upstream, gws, 2):
            video = "capJson3xx1"
            # Cached on every gateway (with a key of its own), so the freeze costs no fetch.
            for gw in gws:
                assert get(gw, "video_id=" + video).status == 200
            for gw in gws:
                assert wait_for(lambda gw=gw: any(x.get("msg") == "gateways sharing the rate limits" and
                                                  x.get("gateways") == 3 for x in log_records(gw.log_text())), 10), \
                    "gateway never counted three"
            served = []
            refused = []
            lock = threading.Lock()
            counters_redis.freeze()
            end = time.monotonic() + 10
            try:
                def hammer(gw):
                    while time.monotonic() < end:
                        r = get(gw, "video_id=" + video, key=FIFTY_KEY, timeout=10)
                        with lock:
                            (served if r.status == 200 else refused).append(r.status)

                threads = [threading.Thread(target=hammer, args=(gw,)) for gw in gws for _ in range(2)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(30)
            finally:
                counters_redis.thaw()
            assert set(refused) == {429}, refused[:5]
            print("\nthrough a 10 s freeze, three gateways: %d served, %d refused" % (len(served), len(refused)))
            assert len(served) == 48
            assert sum(gw.metric("vts_ratelimit_fallbacks_total") for gw in gws) >= len(served) + len(refused)
    finally:
        for gw in gws:
            gw.stop()


def test_a_killed_claimant_delays_a_waiter_by_seconds_and_the_waiter_fetches(tmp_path, certs, upstream,
                                                                            counters_redis):
    claimant = gateway(tmp_path / "claimant", certs, counters_redis)
    waiter = gateway(tmp_path / "waiter", certs, counters_redis)
    try:
        with fetchers(tmp_path, certs, upstream, [claimant, waiter], 2):
            video = "lazyKilled1"  # the platform takes 3 s

            def ask_claimant():
                try:
                    get(claimant, "video_id=" + video)
                except OSError:
                    pass  # it is killed before it answers

            t = threading.Thread(target=ask_claimant)
            t.start()
            assert wait_for(lambda: claimant.metric("vts_dispatch_claims_won_total") == 1, 10)
            answer = {}
            w = threading.Thread(target=lambda: answer.setdefault("r", get(waiter, "video_id=" + video, timeout=40)))
            w.start()
            assert wait_for(lambda: waiter.metric("vts_dispatch_claims_waited_total") == 1, 10)
            claimant.kill()  # SIGKILL to the whole gateway: its claim stays in Redis, no longer renewed
            killed = time.monotonic()
            assert wait_for(lambda: waiter.metric("vts_dispatch_claim_takeovers_total") == 1, 10)
            took = time.monotonic() - killed
            w.join(40)
            t.join(5)
            r = answer["r"]
            assert r.status == 200 and r.json()["text"] == HELLO, r.body
            print("\ntakeover of a killed claimant's video after %.2f s" % took)
            assert took < 5, "the takeover came %.1f s after the kill" % took
    finally:
        claimant.stop()
        waiter.stop()
