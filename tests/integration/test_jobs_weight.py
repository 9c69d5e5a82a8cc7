"""A key's weight in the key file (vts-keys --weight) is its share of batch work against the other keys': the real
gateway and fetchers, the fake platform answering slowly, two keys of weights 2 and 1 both with far more items
waiting than the run can start."""
import collections
import time

from stack import Stack
from test_jobs_fair import batch_work, post_job
from vtsproc import wait_for

HEAVY, LIGHT = "vts_test_key_heavy", "vts_test_key_light"
# heavy weighs 2 (a seventh field), light has no weight field at all: 1, as in a file of an earlier release.
KEYS = [("heavy", HEAVY, "active", 1000000, 60, 1000000000, 2), ("light", LIGHT, "active", 1000000, 60, 1000000000)]


def player_requests(stack, prefix):
    """The platform's player requests for the ids of a prefix (each key's ids have their own)."""
    return sum(v for k, v in stack.requests().items() if k.startswith("POST /youtubei/v1/player " + prefix))


def test_weights_2_and_1_get_platform_requests_2_to_1_while_both_wait(tmp_path):
    """Three batch slots (3 fetchers, VTS_JOBS_FETCHER_SHARE 100): weights 2 and 1 hold 2 and 1 of them, and take
    turns 2:1. Every item is an id the platform calls unavailable after 100 ms a request, so each key's items make
    the same requests and take the same time, and the platform's requests of each key over a window go 2:1.

    Tolerance: at each end of the window each key may have items part-way (at most its slots: 2 and 1), whose
    requests fall on either side of it. An item makes r player requests (measured: the requests over the items
    ended), so at each end the heavy key's count H moves by at most 2r and twice the light key's, 2L, by at most
    2 x r: over both ends |H - 2L| <= 4r + 4r = 8r, about a sixth of 2L over 6 s."""
    stack = Stack(tmp_path, keys=KEYS, fetchers=3, upstream_args=("--delay-ms", "100"),
                  gateway_env={"VTS_JOBS_FETCHER_SHARE": "100", "VTS_LOG_LEVEL": "debug", "VTS_JOB_TIMEOUT_MS": "5000"})
    gw = stack.gateway
    try:
        post_job(gw, LIGHT, {"video_ids": ["uL%09d" % i for i in range(1000)]})
        post_job(gw, HEAVY, {"video_ids": ["uH%09d" % i for i in range(1000)]})
        assert wait_for(lambda: player_requests(stack, "uH") >= 6 and player_requests(stack, "uL") >= 3, 30)
        h0, l0 = player_requests(stack, "uH"), player_requests(stack, "uL")
        t0 = time.monotonic()
        time.sleep(6)  # the wait is the test: both keys' items run side by side for 6 s
        h, l = player_requests(stack, "uH") - h0, player_requests(stack, "uL") - l0
        span = time.monotonic() - t0
        work = batch_work(gw)
        ended = collections.Counter(key for _, what, key, kind, _ in work if what == "ended" and kind == "item")
        started = collections.Counter(key for _, what, key, kind, _ in work if what == "started" and kind == "item")
        r = (player_requests(stack, "uH") + player_requests(stack, "uL")) / max(1, sum(ended.values()))
        print("figures: over %.1f s the heavy key (weight 2) made %d player requests, the light key (weight 1) %d: "
              "%.2f to 1; items started %d and %d; %.2f player requests an item" % (
                  span, h, l, h / max(1, l), started["heavy"], started["light"], r))
        # Both waited the whole time: neither ran out of items.
        assert started["heavy"] < 1000 and started["light"] < 1000, started
        assert l >= 10, (h, l)
        assert abs(h - 2 * l) <= 8 * r, (h, l, r)
    finally:
        stack.close()
