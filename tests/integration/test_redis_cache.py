"""The transcript cache in Redis: gateways that share one Redis share transcripts (the second gateway's request
makes no upstream request), and a stopped Redis costs nothing but the sharing."""
from stack import Stack
from vtsproc import wait_for

LIVE_NOT_ARCHIVED = (b'{"error":{"code":"transcript_not_available",'
                     b'"message":"The live stream is not archived yet."}}')


def test_two_gateways_sharing_redis_share_transcripts(tmp_path, redis):
    env = {"VTS_REDIS_URL": redis.url}
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    a = Stack(tmp_path / "a", gateway_env=env, fetchers=1)
    try:
        b = Stack(tmp_path / "b", gateway_env=env, fetchers=1)
        try:
            a.upstream.reset()
            first = a.get("capJson3xx1")
            assert first.status == 200
            assert a.requests()["POST /youtubei/v1/player capJson3xx1"] == 1
            second = b.get("capJson3xx1")
            assert second.status == 200 and second.body == first.body
            assert "POST /youtubei/v1/player capJson3xx1" not in b.requests(), "gateway b fetched again"
            # 404s are shared for their shorter lifetime too; 502s never.
            live = a.get("liveOffline")
            assert live.status == 404
            shared = b.get("liveOffline")
            # The case the reply said is shared with the answer.
            assert shared.status == 404 and shared.body == live.body == LIVE_NOT_ARCHIVED
            assert "POST /youtubei/v1/player liveOffline" not in b.requests()
            assert a.get("http500xxx1").status == 502
            assert b.get("http500xxx1").status == 502
            assert b.requests()["POST /youtubei/v1/player http500xxx1"] == 2  # b's own job, two clients
        finally:
            b.close()
    finally:
        a.close()


def test_stopped_redis_leaves_transcripts_served(tmp_path, redis):
    s = Stack(tmp_path, gateway_env={"VTS_REDIS_URL": redis.url}, fetchers=1)
    try:
        redis.stop()
        r = s.get("benchNoRedi")
        assert r.status == 200
        assert s.get("benchNoRedi").status == 200
    finally:
        s.close()


def test_a_bad_entry_in_redis_is_deleted_and_refetched(tmp_path, redis):
    key = "vts:transcript:{capJson3xx1}:-"
    s = Stack(tmp_path, gateway_env={"VTS_REDIS_URL": redis.url}, fetchers=1)
    try:
        # The shape of an entry (a 200 from captions in "en") around a body that is not ours.
        assert redis.command("SET", key, "VC1\x01\x01\x02en<html>not a transcript</html>", "PX", "60000") == b"+OK"
        r = s.get("capJson3xx1")
        assert r.status == 200, r
        assert r.json()["segments"][0]["text"] == "Hello and welcome"
        assert s.requests()["POST /youtubei/v1/player capJson3xx1"] == 1, "not refetched"
        # The bad entry is gone and the fetch stored a good one in its place: the key an alias of the transcript's
        # entry (one per served track), which holds the transcript.
        stored = redis.command("EVAL", "local v = redis.call('GET', KEYS[1]) "
                               "if string.sub(v, 1, 4) ~= 'VA1=' then return 0 end "
                               "local e = redis.call('GET', 'vts:transcript:{capJson3xx1}:' .. string.sub(v, 4)) "
                               "return string.find(e, 'Hello and welcome', 1, true) ~= nil and 1 or 0", "1", key)
        assert stored == b":1"
        log = s.gateway.log_text()
        assert "bad transcript cache entry in Redis deleted" in log
    finally:
        s.close()
