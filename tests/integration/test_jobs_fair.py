"""One key cannot starve the others: the real gateway (its runner and webhook sender), a fetcher pool and the fake
platform, with one key ("abuser") running big jobs of unavailable ids, webhooks to receivers that never answer and a
playlist whose pages never end, beside another key ("other"). The other key's synchronous misses keep their latency
and its job its pace; the abuser's platform requests stay within its share of the batch egress budget; a list is
read within VTS_JOB_MAX_PAGES pages and stops at a page that adds no id, saying why; a revoked key's jobs stop within
2 s, on SQLite and on Redis shared by two gateways."""
import collections
import datetime
import json
import socket
import threading
import time
import http.server

from conftest import write_keyfile
from stack import Stack, UNLIMITED
from test_jobs_run import call
from vtsproc import wait_for

ABUSER, OTHER = "vts_test_key_abuser", "vts_test_key_other"
KEYS = [("abuser", ABUSER, "active", 1000000, 60, 1000000000), ("other", OTHER, "active", 1000000, 60, 1000000000)]
REVOKED = [("abuser", ABUSER, "revoked", 1000000, 60, 1000000000), KEYS[1]]
HOOK_HOST = "127.0.0.2"  # VTS_WEBHOOK_ALLOW names it: the receivers listen there


class HangingReceiver:
    """Accepts webhook connections on HOOK_HOST and never answers; notes when each opened and closed."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((HOOK_HOST, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = "http://%s:%d/hook" % (HOOK_HOST, self.port)
        self.lock = threading.Lock()
        self.accepted = 0
        self.spans = []  # [opened, closed or None] by connection, time.monotonic()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            span = [time.monotonic(), None]
            with self.lock:
                self.accepted += 1
                self.spans.append(span)
            threading.Thread(target=self._hold, args=(conn, span), daemon=True).start()

    def most_open(self, slack=0.1):
        """The most connections open at once, a connection made within slack of another's close not overlapping
        it (the sender's close and its next connect race on the way here)."""
        with self.lock:
            spans = [(a, b if b is not None else float("inf")) for a, b in self.spans]
        return max((sum(1 for a, b in spans if a <= t < b - slack) for t, _ in spans), default=0)

    def _hold(self, conn, span):
        """Reads what the sender sends and never answers, until the sender gives up and closes."""
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass
        finally:
            conn.close()
            with self.lock:
                span[1] = time.monotonic()

    def close(self):
        self.sock.close()


class QuickReceiver:
    """Answers every webhook delivery 204 at once, noting when each came (time.monotonic())."""

    def __init__(self):
        got = self.got = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                got.append((time.monotonic(), json.loads(body)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((HOOK_HOST, 0), Handler)
        self.port = self.server.server_address[1]
        self.url = "http://%s:%d/hook" % (HOOK_HOST, self.port)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def post_job(gw, key, body):
    status, h, job = call(gw, "POST", "/v1/jobs", body, key=key)
    assert status == 202, job
    return h["location"], job


def job_of(gw, key, loc):
    status, _, job = call(gw, "GET", loc, key=key)
    assert status == 200, job
    return job


def timed_job(gw, key, body, timeout=60):
    """Seconds from a job's POST to its status done."""
    t0 = time.monotonic()
    loc, _ = post_job(gw, key, body)
    assert wait_for(lambda: job_of(gw, key, loc)["status"] == "done", timeout, interval=0.02), job_of(gw, key, loc)
    return time.monotonic() - t0, loc


def miss_latencies(stack, prefix, n):
    """The other key's synchronous misses, one after another: each one's seconds, sorted."""
    out = []
    for i in range(n):
        t0 = time.monotonic()
        r = stack.get("%s%04d" % (prefix, i), key=OTHER)
        out.append(time.monotonic() - t0)
        assert r.status == 200, r.body
    return sorted(out)


def pct(sorted_values, p):
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p / 100))]


def unavailable_ids(tag, n):
    """n fresh ids of 11 characters that the fake platform answers "This video is unavailable"."""
    return ["u%s%07d" % (tag, i) for i in range(n)]


def abuser_requests(stack):
    """The platform requests made for the abuser's work: its unavailable ids' player calls and its endless pages."""
    reqs = stack.requests()
    n = sum(v for k, v in reqs.items() if k.startswith("POST /youtubei/v1/player u"))
    return n + reqs.get("POST /youtubei/v1/browse endless", 0)


def start_abuse(gw, hang, big=5000, jobs=10, hooked=6):
    """The abuser's load: big jobs of unavailable ids, hooked jobs whose webhook never answers (hang's), an endless
    playlist."""
    for j in range(jobs):
        post_job(gw, ABUSER, {"video_ids": unavailable_ids("%03d" % j, big)})
    for j in range(hooked):
        post_job(gw, ABUSER, {"video_ids": unavailable_ids("h%02d" % j, 1), "webhook_url": hang.url})
    loc, _ = post_job(gw, ABUSER, {"playlist_id": "PLendlessAbuser"})
    return loc


def hook_env(receivers):
    """VTS_WEBHOOK_ALLOW for the receivers' host, and the fetchers' sandbox letting them connect to the receivers'
    ports (VTS_FETCHER_WEBHOOK_PORTS)."""
    return {"VTS_WEBHOOK_ALLOW": HOOK_HOST, "VTS_FETCHER_WEBHOOK_PORTS": ",".join(str(r.port) for r in receivers)}


# The abuser's ten 5,000-item jobs are more than the default stored-items cap allows one key.
JOB_LIMITS = {"VTS_JOBS_MAX_OPEN": "30", "VTS_JOBS_MAX_STORED_ITEMS": "100000", "VTS_JOB_TIMEOUT_MS": "3000"}


def fair_stack(tmp_path, receivers=(), fetchers=4, env=None, fetcher_env=None, **kwargs):
    genv = dict(hook_env(receivers), **JOB_LIMITS)
    genv.update(env or {})
    fenv = hook_env(receivers)
    fenv.update(fetcher_env or {})
    return Stack(tmp_path, keys=KEYS, gateway_env=genv, fetcher_env=fenv, fetchers=fetchers, **kwargs)


def batch_work(gw):
    """The dispatcher's "batch work started" and "batch work ended" lines (VTS_LOG_LEVEL debug), in order: (seconds,
    "started" or "ended", key name, kind, job id)."""
    out = []
    for r in gw.log_records():
        if r.get("msg") in ("batch work started", "batch work ended"):
            t = datetime.datetime.strptime(r["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
            out.append((t.timestamp(), r["msg"].split()[-1], r["key_id"], r["kind"], r["job_id"]))
    return out


def item_spans(work, job_id):
    """Seconds from each start of the job's items to the next end of one: each item's time when one runs at once."""
    started, out = [], []
    for t, what, _, kind, j in work:
        if j == job_id and kind == "item":
            if what == "started":
                started.append(t)
            elif started:
                out.append(t - started.pop(0))
    return out


def shared_part(work, job_id):
    """From the first start of the job's items to the last end of one: (seconds, start, last start, end)."""
    starts = [t for t, what, _, kind, j in work if j == job_id and kind == "item" and what == "started"]
    ends = [t for t, what, _, kind, j in work if j == job_id and kind == "item" and what == "ended"]
    return max(ends) - min(starts), min(starts), max(starts), max(ends)


# Room for the time the abuser's load adds to each of the other key's items (its pages, failing items and webhook tries
# take CPU time of the same two cores): measured beside it, the shared part took 1.79x to 2.07x its time alone in nine
# runs. A share of a third (the unfairness this is meant to catch) would take 3x.
JITTER = 1.1


def test_one_keys_load_leaves_anothers_latency_and_job_time(tmp_path):
    """The other key's 100-item job, alone and beside the abuser's load (which never runs out of work), is timed the
    same way twice: from its POST to a status poll that reads done (what a client sees), and on the shared part,
    from its first item's start to its last item's end as the dispatcher logs them, which leaves out the POST, the
    first take and the end's detection (a poll every 20 ms), fixed costs that are no share of anything.

    Equal shares make 2x the exact expectation, not a bound with room: alone the job has both batch slots
    (VTS_JOBS_FETCHER_SHARE 50 % of 4 fetchers), beside the abuser one of them, so on a machine where two items at once
    take no longer than one, the shared part takes twice as long, and any jitter tips it either side of 2x. So the
    share itself is asserted exactly: while both keys wait (from the other's first start to its last), the other
    key's starts are at least half of all batch starts (the abuser's items, pages and webhook tries), less one for
    the turn in hand when it joined. And the time on the shared part within 2x of its time alone (and JITTER), give
    or take one of its items (its median item beside): alone its two slots start a take apart and end as luck has it, so the
    last round may hold one item, not two. The whole time from the POST is held to the same bound, and the wait for
    the first item is bounded in the abuser's list pages started meanwhile (at most 3): that wait was where a real
    unfairness showed (a take looked for a list's page before any item, so the abuser's endless playlist hid the
    other key's new job from the shares until its pages ran out: 14 to 16 pages, 0.6 s, with takes made that way)."""
    hang, quick = HangingReceiver(), QuickReceiver()
    stack = fair_stack(tmp_path, (hang, quick), upstream_args=("--delay-ms", "20"), env={"VTS_LOG_LEVEL": "debug"})
    gw = stack.gateway
    try:
        alone = miss_latencies(stack, "benchFa", 40)
        t_alone, loc_alone = timed_job(gw, OTHER, {"video_ids": ["benchFj%04d" % i for i in range(100)],
                                                   "webhook_url": quick.url})
        assert wait_for(lambda: len(quick.got) == 1, 10), quick.got

        start_abuse(gw, hang)
        # The load is in motion: a webhook try hangs and the abuser's items fail one after another.
        assert wait_for(lambda: hang.accepted >= 1 and abuser_requests(stack) >= 20, 30), (hang.accepted,
                                                                                            abuser_requests(stack))
        beside = miss_latencies(stack, "benchFb", 40)
        posted = time.time()
        t_beside, loc = timed_job(gw, OTHER, {"video_ids": ["benchFk%04d" % i for i in range(100)],
                                              "webhook_url": quick.url})
        done_at = time.monotonic()
        assert wait_for(lambda: len(quick.got) == 2, 10), quick.got
        work = batch_work(gw)
        s_alone, _, _, _ = shared_part(work, loc_alone.rsplit("/", 1)[1])
        s_beside, first, last, _ = shared_part(work, loc.rsplit("/", 1)[1])
        both = [(key, kind) for t, what, key, kind, _ in work if what == "started" and first <= t <= last]
        mine = sum(1 for key, _ in both if key == "other")
        one_item = sorted(item_spans(work, loc.rsplit("/", 1)[1]))[50]
        # The abuser's list pages started between the other job's POST and its first item: the takes alternate
        # between looking for a page first and an item first, so a new job is seen within a take or two; a take
        # that always looked for a page first started the abuser's pages until its list ran out.
        pages = [t for t, what, key, kind, _ in work if what == "started" and key == "abuser" and kind == "page"]
        pages_before = sum(1 for t in pages if posted <= t <= first)
        print("figures: other key alone p50 %.1f ms p99 %.1f ms, beside the abuser p50 %.1f ms p99 %.1f ms; "
              "100-item job alone %.2f s, beside %.2f s (%.2fx) from POST to done; on the shared part %.2f s and "
              "%.2f s (%.2fx); first item %.3f s after the POST, %d abuser pages before it; other's starts while "
              "both waited %d of %d (%s); webhook %.2f s after its job's end; abuser's tries open at once at most "
              "%d" % (
                  pct(alone, 50) * 1000, pct(alone, 99) * 1000, pct(beside, 50) * 1000, pct(beside, 99) * 1000,
                  t_alone, t_beside, t_beside / t_alone, s_alone, s_beside, s_beside / s_alone, first - posted,
                  pages_before, mine, len(both), dict(collections.Counter(both)), quick.got[1][0] - done_at,
                  hang.most_open()))
        assert pct(beside, 50) <= 1.25 * pct(alone, 50), (alone, beside)
        assert pct(beside, 99) <= 2 * pct(alone, 99), (alone, beside)
        assert 2 * mine >= len(both) - 2, collections.Counter(both)
        assert any(t >= posted for t in pages), "the abuser's list had ended before the other job's POST: no race"
        assert pages_before <= 3, (pages_before, first - posted)
        assert s_beside <= 2 * JITTER * s_alone + one_item, (s_alone, s_beside, one_item)
        # And as a client sees it, from the POST to a poll that reads done: the fixed costs are the same both times.
        assert t_beside <= 2 * JITTER * t_alone + one_item, (t_alone, t_beside, one_item)
        # The other key's webhook came at once, whatever the abuser's receiver does; the abuser's tries came one at
        # a time.
        assert quick.got[1][1]["type"] == "job.done" and quick.got[1][1]["id"] == loc.rsplit("/", 1)[1]
        assert quick.got[1][0] - done_at < 2.0
        assert hang.most_open() == 1
    finally:
        stack.close()
        hang.close()
        quick.close()


def test_a_keys_platform_requests_stay_within_its_share_of_the_batch_budget(tmp_path):
    # 72000 requests an hour (20 a second), 10 at once; batch work gets half (VTS_JOBS_FETCHER_SHARE 50): 10 a
    # second, 5 at once, and each of two keys with work half of that: 5 a second, 2 at once.
    # No webhook of the abuser's here: a try its receiver never answers holds a batch slot (4 fetchers at 50%: 2 slots,
    # one a key while both share) for 10 s with no platform request, so the abuser's items would have no slot of their
    # own while the other key's run, and the budget's share would not be what is measured.
    pace = {"VTS_EGRESS_RATE": "72000", "VTS_EGRESS_BURST": "10"}
    stack = fair_stack(tmp_path, (), env=pace, fetcher_env=pace)
    gw = stack.gateway
    try:
        start_abuse(gw, None, big=500, jobs=2, hooked=0)
        # Alone, the abuser spends the batch budget: 10 a second with 5 at once.
        assert wait_for(lambda: abuser_requests(stack) >= 5, 10)
        t0, n0 = time.monotonic(), abuser_requests(stack)
        time.sleep(3)  # the wait is the test: the abuser alone for 3 s
        alone = abuser_requests(stack) - n0
        alone_s = time.monotonic() - t0
        # The other key's 20 transcripts (40 requests): the abuser's share is half the batch budget meanwhile.
        t1, n1 = time.monotonic(), abuser_requests(stack)
        t_other, _ = timed_job(gw, OTHER, {"video_ids": ["benchFp%04d" % i for i in range(20)]}, timeout=60)
        beside = abuser_requests(stack) - n1
        beside_s = time.monotonic() - t1
        print("figures: abuser alone %d platform requests in %.1f s (batch budget 10/s, burst 5); beside the other "
              "key %d in %.1f s (its share 5/s, burst 2), the other's 20 items in %.1f s" % (
                  alone, alone_s, beside, beside_s, t_other))
        # Within its share: rate x time, its burst, and what its pieces of work in hand (2 slots, at most 3 player
        # calls each) spent past the check that let them start.
        assert alone <= 10 * alone_s + 5 + 6, (alone, alone_s)
        assert beside <= 5 * beside_s + 2 + 6, (beside, beside_s)
        # The abuser was not stopped either: it kept its slot and at least a fifth of its share of the budget (about 4
        # a second measured, on the sanitizer build).
        assert beside >= 1 * beside_s, (beside, beside_s)
    finally:
        stack.close()


def test_a_list_is_read_within_its_bounds_and_says_why_it_stopped(tmp_path):
    stack = fair_stack(tmp_path, env={"VTS_JOB_MAX_PAGES": "4"})
    gw = stack.gateway
    try:
        loc, _ = post_job(gw, OTHER, {"playlist_id": "PLendlessPages"})
        assert wait_for(lambda: job_of(gw, OTHER, loc)["status"] == "done", 30), job_of(gw, OTHER, loc)
        job = job_of(gw, OTHER, loc)
        # Four pages of ten new ids each, then a stop though the fourth named a fifth.
        assert (job["total"], job["stop_reason"]) == (40, "max_pages"), job
        assert job["counts"] == {"queued": 0, "running": 0, "done": 0, "failed": 40, "cancelled": 0}
        assert stack.requests().get("POST /youtubei/v1/browse endless") == 4
        # A list whose second page repeats the first: read twice, then it stops.
        loc, _ = post_job(gw, OTHER, {"playlist_id": "PLsameidsPages"})
        assert wait_for(lambda: job_of(gw, OTHER, loc)["status"] == "done", 30), job_of(gw, OTHER, loc)
        job = job_of(gw, OTHER, loc)
        assert (job["total"], job["stop_reason"]) == (10, "no_new_ids"), job
        assert stack.requests().get("POST /youtubei/v1/browse endless") == 6
        # A list that ends by itself says nothing of a stop.
        loc, _ = post_job(gw, OTHER, {"video_ids": ["benchFl0001"]})
        assert wait_for(lambda: job_of(gw, OTHER, loc)["status"] == "done", 30)
        assert "stop_reason" not in job_of(gw, OTHER, loc)
    finally:
        stack.close()


def revocation_reaches_jobs(stack, gateways, keys_files, hang):
    """The abuser's load runs; its key is revoked in every gateway's key file; 2 s later its jobs make no platform
    request, its queued items are cancelled with the reason, its list stopped, and its webhooks (to hang, a
    HangingReceiver the stack's fetchers may connect to) are tried no more."""
    gw = gateways[0]
    try:
        for j in range(2):
            post_job(gw, ABUSER, {"video_ids": unavailable_ids("r%02d" % j, 2000)})
        hooked, _ = post_job(gw, ABUSER, {"video_ids": unavailable_ids("rh0", 1), "webhook_url": hang.url})
        listed, _ = post_job(gw, ABUSER, {"playlist_id": "PLendlessRevoked"})
        other, _ = post_job(gw, OTHER, {"video_ids": ["benchFr%04d" % i for i in range(30)]})
        assert wait_for(lambda: abuser_requests(stack) >= 20 and hang.accepted >= 1, 30), abuser_requests(stack)
        for path in keys_files:
            write_keyfile(path, UNLIMITED + REVOKED)
        changed = time.monotonic()
        time.sleep(2)  # the wait is the test: revocation reaches the jobs within 2 s
        n, tries = abuser_requests(stack), hang.accepted
        time.sleep(2)  # the wait is the test: no platform request of the revoked key's jobs after that
        assert abuser_requests(stack) == n, (n, abuser_requests(stack))
        assert hang.accepted == tries
        print("figures: revoked key's platform requests 2 s after the change %d, 4 s after %d (%.1f s measured)" % (
            n, abuser_requests(stack), time.monotonic() - changed))
        # Seen through the other key's eyes nothing changed; the abuser's jobs, read from the store, say why.
        assert wait_for(lambda: job_of(gw, OTHER, other)["status"] == "done", 30)
        for g in gateways:
            assert any(r.get("msg") == "batch jobs of a revoked key stopped" and r.get("key_id") == "abuser"
                       for r in g.log_records())
        hang.close()
        return hooked, listed
    except BaseException:
        hang.close()
        raise


def stored_jobs(gw, key_name):
    """The abuser's jobs as the SQLite store holds them: (stop_reason, cancelled items, queued items) by job."""
    import sqlite3
    db = sqlite3.connect(str(gw.state_dir / "jobs.db"))
    try:
        return db.execute("SELECT j.id, j.stop_reason, (SELECT count(*) FROM items i WHERE i.job_id=j.id AND "
                          "i.status=4), (SELECT count(*) FROM items i WHERE i.job_id=j.id AND i.status=0), "
                          "(SELECT state FROM hooks h WHERE h.job_id=j.id) FROM jobs j WHERE j.key_id=?",
                          (key_name,)).fetchall()
    finally:
        db.close()


def test_a_revoked_keys_jobs_stop_within_2_s(tmp_path):
    hang = HangingReceiver()
    try:
        stack = fair_stack(tmp_path, (hang,), upstream_args=("--delay-ms", "20"))
    except BaseException:
        hang.close()
        raise
    gw = stack.gateway
    try:
        hooked, listed = revocation_reaches_jobs(stack, [gw], [gw.keys_file], hang)
        rows = {r[0]: r[1:] for r in stored_jobs(gw, "abuser")}
        assert len(rows) == 4
        for job_id, (reason, cancelled, queued, hook) in rows.items():
            assert queued == 0, rows
            if job_id == hooked.rsplit("/", 1)[1]:
                assert hook == 2, rows  # given up: never tried again
            else:
                assert reason == "key_revoked", rows
        big = [r for j, r in rows.items() if j not in (hooked.rsplit("/", 1)[1], listed.rsplit("/", 1)[1])]
        assert all(r[1] > 1000 for r in big), rows  # most of its 2000 items never ran: cancelled
    finally:
        stack.close()


def test_a_revoked_keys_jobs_stop_within_2_s_on_two_gateways_sharing_redis(tmp_path, redis):
    from test_jobs_redis import Cluster
    hang = HangingReceiver()
    try:
        c = Cluster(tmp_path, redis, 2, 4, KEYS, upstream_args=("--delay-ms", "20"),
                    gateway_env=dict(hook_env([hang]), **JOB_LIMITS),
                    fetcher_env=hook_env([hang]))
    except BaseException:
        hang.close()
        raise
    try:
        hooked, listed = revocation_reaches_jobs(c, c.gateways, [g.keys_file for g in c.gateways], hang)

        def field(loc, name):
            v = redis.call("HGET", "vts:job:" + loc.rsplit("/", 1)[1], name)
            return v.decode() if isinstance(v, bytes) else v
        # The store says why: the list stopped with the reason, its continuation dropped; the delivery given up.
        assert (field(listed, "stop"), field(listed, "cont")) == ("key_revoked", "")
        assert field(hooked, "hook_state") == "2"
    finally:
        c.close()
