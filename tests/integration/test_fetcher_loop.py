"""The fetcher's job loop against a fake dispatcher written in Python (nng's REP protocol over TCP, see harness.py):
READY -> JOB -> RESULT, bad messages, dialing before the dispatcher listens, SIGTERM when idle and when busy (the
RESULT_LAST and its acknowledgement), and the --workers supervisor restarting a killed child; and a stopping fetcher
against the real dispatcher, whose queued job goes to another fetcher."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402
from harness import READY, decode_result, encode_job  # noqa: E402
from conftest import ACTIVE_KEY, Gateway, wait_for, wait_metric, write_keyfile  # noqa: E402


@pytest.fixture(scope="module")
def upstream():
    fake = harness.FakeUpstream()
    yield fake
    fake.close()


@pytest.fixture
def dispatcher():
    d = harness.FakeDispatcher()
    yield d
    d.close()


def job_reached_platform(upstream, video, before):
    """Waits until the fake platform has seen one more player request for video than before (the job is running)."""
    key = "POST /youtubei/v1/player " + video
    assert wait_for(lambda: upstream.stats()["requests"].get(key, 0) > before, 5), "the job never reached the platform"


def player_requests(upstream, video):
    return upstream.stats()["requests"].get("POST /youtubei/v1/player " + video, 0)


@pytest.fixture
def start_fetcher(upstream):
    procs = []

    def start(dispatcher, *args, **env):
        proc = subprocess.Popen([harness.fetcher_binary(), *args],
                                env=harness.fetcher_env(upstream.url, VTS_JOBS_URL=dispatcher.url, **env),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        return proc

    yield start
    for p in procs:
        harness.stop_process(p)
        p.stderr.close()


def test_ready_job_result_cycle_returns_transcript(dispatcher, start_fetcher, upstream):
    dispatcher.listen()
    start_fetcher(dispatcher)
    conn = dispatcher.accept()
    assert conn.recv() == READY
    conn.reply(encode_job(41, "capJson3xx1", "en", request_id="req-41"))
    res = decode_result(conn.recv())
    # A fetcher never says how long to keep an answer: that is the dispatcher's to say to its workers.
    assert (res["job_id"], res["outcome"], res["source"], res["lang"], res["detail"], res["cache_ms"]) == \
        (41, 1, 1, "en", "ok", 0)
    body = json.loads(res["body"])
    assert body["language"] == "en" and body["text"] == "Hello and welcome to the fake platform"

    # The RESULT is also the request for the next job: answering it with a job runs that job.
    conn.reply(encode_job(42, "ageRestr001", "", request_id="req-42"))
    res = decode_result(conn.recv())
    assert (res["job_id"], res["outcome"], res["source"], res["lang"], res["detail"], res["reason"], res["body"]) == \
        (42, 2, 0, "", "login_required", "age_restricted", b"")


def test_a_metadata_job_with_its_chapters_makes_one_next_request(dispatcher, start_fetcher, upstream):
    """A job that includes the chapters (protocol 10's include byte) adds them after the details; the player
    summary handed with a job serves the details, so the watch-next call is then its only request."""
    dispatcher.listen()
    start_fetcher(dispatcher)
    conn = dispatcher.accept()
    assert conn.recv() == READY
    upstream.reset()
    conn.reply(encode_job(51, "chaptShort1", kind=harness.KIND_METADATA, include=harness.INCLUDE_CHAPTERS))
    res = decode_result(conn.recv())
    assert (res["job_id"], res["outcome"], res["source"], res["detail"]) == (51, 1, 0, "ok")
    body = json.loads(res["body"])
    assert body["chapters"] == [{"title": "Hello", "start": 0, "end": 2}, {"title": "Caf\u00e9 talk", "start": 2,
                                                                           "end": 12}]
    assert upstream.stats()["requests"] == {"POST /youtubei/v1/player chaptShort1": 1,
                                            "POST /youtubei/v1/next chaptShort1": 1}
    next_call = [c for c in upstream.stats()["calls"] if c["path"] == "/youtubei/v1/next"][0]
    assert next_call["body"]["videoId"] == "chaptShort1"
    assert next_call["body"]["context"]["client"]["clientName"] == "WEB"
    # The same job without the bit: no watch-next request, no chapters.
    conn.reply(encode_job(52, "chaptShort1", kind=harness.KIND_METADATA, player=res["player"]))
    plain = decode_result(conn.recv())
    assert plain["outcome"] == 1 and "chapters" not in json.loads(plain["body"])
    conn.reply(encode_job(53, "chaptShort1", kind=harness.KIND_METADATA, include=harness.INCLUDE_CHAPTERS,
                          player=res["player"]))
    again = decode_result(conn.recv())
    assert again["body"] == res["body"]
    assert upstream.stats()["requests"] == {"POST /youtubei/v1/player chaptShort1": 1,
                                            "POST /youtubei/v1/next chaptShort1": 2}


def test_bad_message_is_ignored_and_ready_sent_again(dispatcher, start_fetcher):
    dispatcher.listen()
    proc = start_fetcher(dispatcher)
    conn = dispatcher.accept()
    assert conn.recv() == READY
    conn.reply(b"VT\x01\x01garbage")
    assert conn.recv() == READY
    conn.reply(encode_job(7, "noCaptions1"))
    res = decode_result(conn.recv())
    assert (res["job_id"], res["outcome"], res["detail"]) == (7, 5, "no_captions")
    assert proc.poll() is None


def test_speech_job_runs_the_speech_flow_over_the_job_loop(dispatcher, start_fetcher, upstream):
    dispatcher.listen()
    start_fetcher(dispatcher)
    conn = dispatcher.accept()
    assert conn.recv() == READY
    upstream.reset()
    conn.reply(encode_job(9, "noAudio0001", kind=harness.KIND_SPEECH))
    res = decode_result(conn.recv())
    assert (res["job_id"], res["outcome"], res["detail"]) == (9, 2, "no_audio_format")
    # A reply without audio sends speech to the next client's reply: each client is asked once, none has audio.
    assert upstream.stats()["requests"] == {"POST /youtubei/v1/player noAudio0001": 2}


def test_fetcher_started_before_dispatcher_keeps_dialing(dispatcher, start_fetcher):
    proc = start_fetcher(dispatcher)
    time.sleep(0.6)  # the wait is the test: a fetcher with no dispatcher to dial lives on
    assert proc.poll() is None, "the fetcher must wait for the dispatcher, not exit"
    dispatcher.listen()
    conn = dispatcher.accept(timeout=5)
    assert conn.recv(timeout=5) == READY


def test_sigterm_when_idle_exits_zero_at_once(dispatcher, start_fetcher):
    dispatcher.listen()
    proc = start_fetcher(dispatcher)
    conn = dispatcher.accept()
    assert conn.recv() == READY
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert harness.wait_exit(proc, 5) == 0
    assert time.monotonic() - t0 < 1.5
    assert conn.closed_within(2)


def test_sigterm_when_busy_sends_a_last_result_and_exits_once_acknowledged(dispatcher, start_fetcher, upstream):
    dispatcher.listen()
    proc = start_fetcher(dispatcher)
    conn = dispatcher.accept()
    assert conn.recv() == READY
    before = player_requests(upstream, "hangPlayer1")
    conn.reply(encode_job(11, "hangPlayer1", deadline_ms=1500))
    job_reached_platform(upstream, "hangPlayer1", before)
    proc.send_signal(signal.SIGTERM)
    # A stopping fetcher's result is a RESULT_LAST: "done, and leaving", not "idle".
    res = decode_result(conn.recv(timeout=5), last=True)
    assert (res["job_id"], res["outcome"], res["detail"]) == (11, 3, "timeout")
    time.sleep(0.1)  # the wait is the test: unacknowledged, the fetcher stays
    assert proc.poll() is None, "the fetcher must wait for the acknowledgement"
    t0 = time.monotonic()
    conn.reply(READY)
    assert harness.wait_exit(proc, 5) == 0
    # The acknowledgement ends the wait at once (unacknowledged, the wait is VTS_FETCHER_STOP_LINGER_MS, 500 ms).
    assert time.monotonic() - t0 < 0.4
    err = proc.stderr.read()
    assert "stop requested: finishing the job" in err
    assert "not acknowledged" not in err


def test_sigterm_when_busy_without_acknowledgement_leaves_after_a_short_wait(dispatcher, start_fetcher, upstream):
    dispatcher.listen()
    proc = start_fetcher(dispatcher)
    conn = dispatcher.accept()
    assert conn.recv() == READY
    before = player_requests(upstream, "hangPlayer1")
    conn.reply(encode_job(13, "hangPlayer1", deadline_ms=800))
    job_reached_platform(upstream, "hangPlayer1", before)
    proc.send_signal(signal.SIGTERM)
    res = decode_result(conn.recv(timeout=5), last=True)
    t0 = time.monotonic()
    assert (res["job_id"], res["outcome"], res["detail"]) == (13, 3, "timeout")
    assert harness.wait_exit(proc, 5) == 0
    assert 0.4 <= time.monotonic() - t0 < 1.5
    assert conn.closed_within(2)
    assert "last result not acknowledged" in proc.stderr.read()


def test_job_deadline_bounds_the_job(dispatcher, start_fetcher):
    dispatcher.listen()
    start_fetcher(dispatcher)
    conn = dispatcher.accept()
    assert conn.recv() == READY
    t0 = time.monotonic()
    conn.reply(encode_job(12, "hangPlayer1", deadline_ms=800))
    res = decode_result(conn.recv(timeout=5))
    elapsed = time.monotonic() - t0
    assert (res["job_id"], res["outcome"], res["detail"]) == (12, 3, "timeout")
    assert 0.7 <= elapsed < 2.0, "took %.2f s for an 800 ms deadline" % elapsed
    assert 700 <= res["fetch_ms"] < 2000


def children_of(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        return [int(x) for x in f.read().split()]


def test_workers_supervisor_restarts_a_killed_child_and_stops_all(dispatcher, start_fetcher):
    dispatcher.listen()
    proc = start_fetcher(dispatcher, "--workers", "2")
    conns = [dispatcher.accept(), dispatcher.accept()]
    for c in conns:
        assert c.recv() == READY
    kids = children_of(proc.pid)
    assert len(kids) == 2
    t0 = time.monotonic()
    os.kill(kids[0], signal.SIGKILL)
    replacement = dispatcher.accept(timeout=5)
    assert replacement.recv(timeout=5) == READY
    assert time.monotonic() - t0 < 1.5, "a dead child must be replaced within 1 s"
    new_kids = children_of(proc.pid)
    assert len(new_kids) == 2 and kids[0] not in new_kids and kids[1] in new_kids

    # The new child works.
    replacement.reply(encode_job(21, "capJson3xx1"))
    assert decode_result(replacement.recv())["outcome"] == 1

    proc.send_signal(signal.SIGTERM)
    assert harness.wait_exit(proc, 5) == 0
    for k in new_kids:
        assert not os.path.exists("/proc/%d" % k) or open("/proc/%d/stat" % k).read().split()[2] == "Z"


def test_proxies_are_rotated_per_job(dispatcher, start_fetcher, upstream):
    proxies = [harness.FakeUpstream(), harness.FakeUpstream()]
    try:
        dispatcher.listen()
        upstream.reset()
        start_fetcher(dispatcher, VTS_UPSTREAM_PROXY=",".join(p.url for p in proxies))
        conn = dispatcher.accept()
        assert conn.recv() == READY
        for job_id in (1, 2, 3):
            conn.reply(encode_job(job_id, "capJson3xx1"))
            res = decode_result(conn.recv())
            assert (res["job_id"], res["outcome"]) == (job_id, 1)
        player = "POST /youtubei/v1/player capJson3xx1"
        assert proxies[0].stats()["requests"][player] == 2
        assert proxies[1].stats()["requests"][player] == 1
        assert upstream.stats()["requests"] == {}, "with proxies set, nothing goes to the upstream directly"
    finally:
        for p in proxies:
            p.close()


def test_dispatcher_restart_gets_a_new_ready(dispatcher, start_fetcher):
    dispatcher.listen()
    proc = start_fetcher(dispatcher)
    conn = dispatcher.accept()
    assert conn.recv() == READY
    conn.close()
    dispatcher.lsock.close()
    time.sleep(0.3)  # the wait is the test: a fetcher whose dispatcher went away lives on
    assert proc.poll() is None, "a lost dispatcher must not end the fetcher"
    restarted = harness.FakeDispatcher(dispatcher.port)
    try:
        restarted.listen()
        conn = restarted.accept(timeout=5)
        assert conn.recv(timeout=5) == READY
        conn.reply(encode_job(31, "unavail0001"))
        res = decode_result(conn.recv())
        assert (res["job_id"], res["outcome"], res["detail"]) == (31, 2, "unavailable")
    finally:
        restarted.close()


def test_children_do_not_outlive_a_killed_supervisor(dispatcher, start_fetcher):
    dispatcher.listen()
    proc = start_fetcher(dispatcher, "--workers", "2")
    for c in (dispatcher.accept(), dispatcher.accept()):
        assert c.recv() == READY
    kids = children_of(proc.pid)
    assert len(kids) == 2
    proc.kill()
    proc.wait(timeout=5)
    assert wait_for(lambda: not any(os.path.exists("/proc/%d" % k) for k in kids), 3), \
        "children survived their supervisor"


def test_watchdog_kills_a_job_that_overran_its_deadline(dispatcher, start_fetcher, upstream):
    # A stopped process cannot honour its deadline; the real-time watchdog fires as soon as it runs again.
    dispatcher.listen()
    proc = start_fetcher(dispatcher)
    conn = dispatcher.accept()
    assert conn.recv() == READY
    before = player_requests(upstream, "hangPlayer1")
    conn.reply(encode_job(51, "hangPlayer1", deadline_ms=500, request_id="req-watchdog"))
    job_reached_platform(upstream, "hangPlayer1", before)
    proc.send_signal(signal.SIGSTOP)
    time.sleep(0.5 + 2.0 + 0.5)  # the wait is the test: stopped past deadline + VTS_FETCHER_WATCHDOG_GRACE_MS
    proc.send_signal(signal.SIGCONT)
    assert harness.wait_exit(proc, 5) == 124
    assert conn.closed_within(2), "the dispatcher must see the connection drop"
    # The job's own thread may log its failed platform request in the same instant, before or after the watchdog's.
    lines = [json.loads(line) for line in proc.stderr.read().splitlines()]
    killed = [line for line in lines if line["msg"] == "job overran its deadline: killed by the watchdog"]
    assert len(killed) == 1, lines
    assert (killed[0]["request_id"], killed[0]["job_id"], killed[0]["level"]) == ("req-watchdog", 51, "error")
    assert lines.index(killed[0]) >= len(lines) - 2, lines


def test_stopping_fetcher_leaves_the_queued_job_to_another_fetcher(tmp_path, upstream):
    """Fetcher A runs a 1.5 s job, B a 3 s one, a third job waits. A gets SIGTERM: its result goes through, and the
    waiting job goes to B when B is free instead of into A's closing connection (which was a 500)."""
    gw = Gateway(tmp_path, env={"VTS_UPSTREAM_URL": upstream.url, "VTS_LOG_LEVEL": "info"})
    write_keyfile(gw.keys_file, [("loop", ACTIVE_KEY, "active", 1000, 60, 1000000)])
    fetchers = []
    try:
        gw.start()
        env = harness.fetcher_env(upstream.url, VTS_JOBS_URL="tcp://127.0.0.1:%d" % gw.jobs_port)
        for n in (1, 2):
            # One at a time: the dispatcher gives a job to the fetcher idle the longest, so A gets the first.
            fetchers.append(subprocess.Popen([harness.fetcher_binary()], env=env, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.PIPE, text=True))
            wait_metric(gw.metrics_port, "vts_fetchers_idle", n)
        results = {}

        def get(video):
            results[video] = gw.request("GET", "/v1/video/transcript?video_id=" + video,
                                        headers={"x-api-key": ACTIVE_KEY}, timeout=20)

        threads = []
        for video, in_flight, queued in (("slowStopA01", 1, 0), ("lazyStopB01", 2, 0), ("benchStopC1", 2, 1)):
            t = threading.Thread(target=get, args=(video,))
            t.start()
            threads.append(t)
            wait_metric(gw.metrics_port, "vts_jobs_in_flight", in_flight)
            wait_metric(gw.metrics_port, "vts_jobs_queued", queued)
        fetchers[0].send_signal(signal.SIGTERM)
        for t in threads:
            t.join(timeout=20)
        for video in ("slowStopA01", "lazyStopB01", "benchStopC1"):
            assert results[video].status == 200, (video, results[video], gw.log_text()[-3000:])
            assert results[video].json()["text"] == "Hello and welcome to the fake platform"
        assert harness.wait_exit(fetchers[0], 5) == 0
        assert fetchers[1].poll() is None
        err = fetchers[0].stderr.read()
        assert "job dropped" not in err and "not acknowledged" not in err, err
        assert gw.metric("vts_fetchers_lost_total") == 0
    finally:
        for p in fetchers:
            harness.stop_process(p)
            p.stderr.close()
        gw.stop()
