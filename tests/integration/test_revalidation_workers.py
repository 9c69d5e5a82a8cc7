"""A revalidation is a 304 on every worker: a worker that never saw the answer hands the request's If-None-Match to
the dispatcher, which decides the 304 from its cache, and no unit of the month is spent."""
from stack import Stack
from vtsproc import wait_for

QUOTA_KEY = "vts_test_key_quota2"  # a large window, 2 requests a month
KEYS = [("quota2", QUOTA_KEY, "active", 1000000, 3600, 2)]
WORKERS = 4
CONDITIONALS = 40  # each on a new connection: SO_REUSEPORT spreads them over the workers


def test_every_worker_answers_a_revalidation_304_without_spending_the_month(tmp_path):
    stack = Stack(tmp_path, workers=WORKERS, keys=KEYS, gateway_env={"VTS_JOB_TIMEOUT_MS": "4000"})
    try:
        first = stack.get("capJson3xx1", key=QUOTA_KEY, headers={"X-Request-Id": "reval-first"})
        assert first.status == 200, first  # the month's first unit
        etag = first.headers["etag"]
        fetches = stack.requests().get("POST /youtubei/v1/player capJson3xx1")
        for n in range(CONDITIONALS):
            r = stack.get("capJson3xx1", key=QUOTA_KEY,
                          headers={"If-None-Match": etag, "X-Request-Id": "reval-%02d" % n})
            assert (r.status, r.body, r.headers.get("etag")) == (304, b"", etag), (n, r)
            assert r.headers["cache-control"].startswith("private, max-age="), r
        assert stack.requests().get("POST /youtubei/v1/player capJson3xx1") == fetches, "the platform was asked again"

        def answered():
            lines = [x for x in stack.gateway.log_records() if x.get("msg") == "request" and
                     x.get("request_id", "").startswith("reval-")]
            return lines if len(lines) == CONDITIONALS + 1 else None

        assert wait_for(answered, 5), "every request has its access line"
        lines = answered()
        by_worker = {}
        for x in lines:
            by_worker.setdefault(x["pid"], []).append((x["request_id"], x["status"]))
        assert len(by_worker) == WORKERS, "the requests reached %d of %d workers" % (len(by_worker), WORKERS)
        for pid, seen in by_worker.items():
            conditional = [st for rid, st in seen if rid != "reval-first"]
            # The first conditional request each worker saw (and every later one) was a 304.
            assert conditional and set(conditional) == {304}, (pid, seen)
        # The workers that never held the answer asked the dispatcher, which decided their 304s.
        first_worker = next(pid for pid, seen in by_worker.items() if ("reval-first", 200) in seen)
        from_others = sum(len(seen) for pid, seen in by_worker.items() if pid != first_worker)
        assert stack.gateway.metric("vts_dispatch_not_modified_total") >= from_others

        # The month did not move: its second unit is served, a third is refused.
        assert stack.get("capJson3xx1", key=QUOTA_KEY).status == 200
        over = stack.get("capJson3xx1", key=QUOTA_KEY)
        assert (over.status, over.json()["error"]["code"]) == (429, "quota_exceeded")
    finally:
        stack.close()
