"""Honest under overload: a request the fetchers cannot serve before its deadline is answered at once, 503
service_unavailable with Retry-After, never held to its deadline for a 500 or a 502; cached answers are never shed.

Two fetchers, a platform that takes 0.5 s a call (two calls a transcript), a 4 s deadline: about eight of 120 fresh
requests sent at once can be served in time, the others are told so at once."""
import threading
import time

from stack import Stack, metric

DEADLINE_MS = 4000
SERVICE_UNAVAILABLE = {"error": {"code": "service_unavailable", "message": "The service is not accepting requests now."}}
TRANSCRIPT_OK = b'"text":"Hello and welcome to the fake platform'


def burst(stack, ids):
    """Sends one request per id at once, each on its own connection; returns [(id, response, seconds)] in id order."""
    out = [None] * len(ids)
    go = threading.Event()

    def one(i, vid):
        go.wait()
        t0 = time.monotonic()
        r = stack.get(vid, timeout=DEADLINE_MS / 1000 + 10)
        out[i] = (vid, r, time.monotonic() - t0)

    threads = [threading.Thread(target=one, args=(i, v)) for i, v in enumerate(ids)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join(DEADLINE_MS / 1000 + 20)
    assert all(x is not None for x in out), "a request was never answered"
    return out


def test_requests_beyond_what_the_fetchers_can_serve_in_time_are_shed_at_once_with_retry_after(tmp_path):
    stack = Stack(tmp_path, gateway_env={"VTS_JOB_TIMEOUT_MS": str(DEADLINE_MS)}, fetchers=2,
                  upstream_args=("--delay-ms", "500"))
    try:
        # wait_ready's warm-up (benchWarmup) ran one job: the dispatcher knows the time a job takes, and holds its
        # answer. Five requests for it ride in the burst: a cached answer is never shed.
        fresh = ["benchOv%04d" % i for i in range(120)]
        results = burst(stack, fresh + ["benchWarmup"] * 5)
        statuses = sorted({r.status for _, r, _ in results})
        assert statuses == [200, 503], statuses
        for vid, r, took in results:
            if vid == "benchWarmup":
                assert r.status == 200, (vid, r)
            if r.status == 200:
                assert TRANSCRIPT_OK in r.body, (vid, r)
                assert "retry-after" not in r.headers, (vid, r)
                continue
            assert r.json() == SERVICE_UNAVAILABLE, (vid, r)
            assert r.headers.get("retry-after", "").isdigit() and int(r.headers["retry-after"]) >= 1, (vid, r)
            assert took < DEADLINE_MS / 1000 * 0.75, "a 503 came after %.2f s, not at once: %s" % (took, vid)
        served = [vid for vid, r, _ in results[:120] if r.status == 200]
        shed = [(vid, took) for vid, r, took in results if r.status == 503]
        # Two fetchers at about 1 s a job serve about 4 each in 4 s; every other request was told at once.
        assert 2 <= len(served) <= 16, served
        shed_at_once = sorted(took for _, took in shed)[len(shed) // 2]
        assert shed_at_once < 1.0, "the median 503 came after %.2f s" % shed_at_once

        text = stack.metrics()
        by_cause = {c: metric(text, "vts_dispatch_shed_total", cause=c) for c in ("arrival", "queued", "deadline",
                                                                                   "batch")}
        assert sum(by_cause.values()) == len(shed), (by_cause, len(shed))
        assert by_cause["arrival"] >= len(shed) / 2, by_cause
        assert (by_cause["deadline"], by_cause["batch"]) == (0, 0), by_cause
        counted = {st: metric(text, "vts_http_requests_total", route="/v1/video/transcript", status=st)
                   for st in ("500", "502", "503")}
        assert counted == {"500": 0, "502": 0, "503": len(shed)}, counted

        # What was served is cached: asked again during no overload, each is a 200 at once, no job spent.
        again = burst(stack, served)
        assert [r.status for _, r, _ in again] == [200] * len(served)
    finally:
        stack.close()
