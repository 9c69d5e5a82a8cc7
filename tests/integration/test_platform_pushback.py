"""When the platform pushes back: client-specific refusals fall through to the next client, blocks of an egress
address move the job to another proxy, proxies blocked in a row rest for every child of a fetcher, client profiles
are data reloaded without a restart, and `vts-fetcher --probe` reports every client/proxy pair. Each case asserts the
exact outcome and the exact upstream requests (by the fake platform's counts, by source address where it matters)."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402
from stack import Stack, metric  # noqa: E402
from vtsproc import shared_dir  # noqa: E402

OK, NOT_AVAILABLE, UPSTREAM_FAILED, INTERNAL, NO_CAPTIONS = 1, 2, 3, 4, 5
DEFAULT_CLIENTS = ["VISIONOS:1.02", "ANDROID:21.26.364"]
PLAYER = "POST /youtubei/v1/player "
WATCH = "GET /watch "
TIMEDTEXT = "GET /api/timedtext "
BLOCKED, SERVED = "127.0.0.2", "127.0.0.3"


class Run:
    def __init__(self, proc, stats):
        self.stderr = proc.stderr
        self.stdout = proc.stdout
        self.stats = stats
        last = [line for line in proc.stderr.splitlines() if line.startswith("outcome=")]
        assert last, "no outcome line on stderr:\n" + proc.stderr
        fields = dict(part.split("=", 1) for part in last[-1].split(" "))
        self.outcome, self.lang, self.detail = int(fields["outcome"]), fields["lang"], fields["detail"]
        self.logs = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]

    def requests(self):
        return self.stats["requests"]


def run_once(upstream, video, **env):
    upstream.reset()
    proc = subprocess.run([harness.fetcher_binary(), "--once", video], env=harness.fetcher_env(upstream.url, **env),
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, "exit %d:\n%s" % (proc.returncode, proc.stderr)
    return Run(proc, upstream.stats())


@pytest.fixture(scope="module")
def upstream():
    fake = harness.FakeUpstream()
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def proxies():
    p = [harness.EgressProxy(BLOCKED), harness.EgressProxy(SERVED)]
    yield p
    for x in p:
        x.close()


def blocking_upstream(mode, *sources):
    args = ["--block-mode", mode]
    for s in sources:
        args += ["--block-source", s]
    return harness.FakeUpstream(args)


# Fall-through: the client named in the request body decides the reply.

def test_unplayable_for_visionos_falls_through_to_android(upstream):
    r = run_once(upstream, "visionUnpl1")
    assert (r.outcome, r.lang, r.detail) == (OK, "en", "ok")
    assert json.loads(r.stdout)["text"] == "Hello and welcome to the fake platform"
    assert r.requests() == {PLAYER + "visionUnpl1": 1 + 1, TIMEDTEXT + "visionUnpl1": 1}
    assert r.stats["clients"]["visionUnpl1"] == DEFAULT_CLIENTS
    assert r.stats["client_ids"]["visionUnpl1"] == ["101", "3"]
    refused = [e for e in r.logs if e["msg"] == "player client refused"]
    assert [(e["client"], e["reason"], e["detail"]) for e in refused] == [
        ("VISIONOS:1.02", "not_playable", "unplayable")]


VISION_UA = ("Mozilla/5.0 (Macintosh; Intel Mac OS X 15_7_3) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/26.0 "
             "Safari/605.1.15")
ANDROID_UA = "com.google.android.youtube/21.26.364 (Linux; U; Android 11) gzip"


def test_each_client_sends_its_whole_profile(upstream):
    r = run_once(upstream, "visionUnpl1")
    vision, android = r.stats["contexts"]["visionUnpl1"]
    assert vision == {"client": {"clientName": "VISIONOS", "clientVersion": "1.02", "deviceMake": "Apple",
                                 "deviceModel": "RealityDevice17,1", "osName": "visionOS", "osVersion": "26.5.23O471",
                                 "hl": "en", "gl": "US", "utcOffsetMinutes": 0, "userAgent": VISION_UA},
                      "user_agent": VISION_UA, "version_header": "1.02"}
    assert android == {"client": {"clientName": "ANDROID", "clientVersion": "21.26.364", "androidSdkVersion": 30,
                                  "osName": "Android", "osVersion": "11", "platform": "MOBILE", "hl": "en", "gl": "US",
                                  "utcOffsetMinutes": 0, "userAgent": ANDROID_UA},
                       "user_agent": ANDROID_UA, "version_header": "21.26.364"}


def test_xpv_tracks_fall_through_without_asking_for_them(upstream):
    r = run_once(upstream, "visionXpv01")
    assert (r.outcome, r.lang, r.detail) == (OK, "en", "ok")
    assert r.requests() == {PLAYER + "visionXpv01": 2, TIMEDTEXT + "visionXpv01": 1}
    assert [q["c"] for q in r.stats["timedtext"]["visionXpv01"]] == [["ANDROID"]]


def test_empty_caption_body_for_the_first_client_falls_through(upstream):
    r = run_once(upstream, "emptyCap001")
    assert (r.outcome, r.lang, r.detail) == (OK, "en", "ok")
    assert r.requests() == {PLAYER + "emptyCap001": 2, TIMEDTEXT + "emptyCap001": 2}
    assert [q["c"] for q in r.stats["timedtext"]["emptyCap001"]] == [["VISIONOS"], ["ANDROID"]]


def test_caption_403_without_another_proxy_falls_through(upstream):
    r = run_once(upstream, "cap403First")
    assert (r.outcome, r.lang, r.detail) == (OK, "en", "ok")
    assert r.requests() == {PLAYER + "cap403First": 2, TIMEDTEXT + "cap403First": 2}


def test_one_client_alone_refused_is_final(upstream):
    r = run_once(upstream, "visionUnpl1", VTS_INNERTUBE_CLIENTS="VISIONOS")
    assert (r.outcome, r.lang, r.detail) == (NOT_AVAILABLE, "", "unplayable")
    assert r.requests() == {PLAYER + "visionUnpl1": 1}


# Egress: two forward proxies, the platform blocking the address of the first.

def test_429_moves_the_same_client_to_the_next_proxy(proxies):
    fake = blocking_upstream("429", BLOCKED)
    try:
        creds = proxies[0].url("vtsuser:s3cretpass")
        r = run_once(fake, "capJson3xx1", VTS_UPSTREAM_PROXY=creds + "," + proxies[1].url())
    finally:
        fake.close()
    assert (r.outcome, r.lang, r.detail) == (OK, "en", "ok")
    assert r.stats["sources"] == {BLOCKED: 1, SERVED: 2}
    assert r.stats["blocked"] == {BLOCKED: 1}
    assert r.requests() == {PLAYER + "capJson3xx1": 2, TIMEDTEXT + "capJson3xx1": 1}
    # The same client, through the other proxy: a block is the address's, not the client's.
    assert r.stats["clients"]["capJson3xx1"] == ["VISIONOS:1.02", "VISIONOS:1.02"]
    blocked = [e for e in r.logs if e["msg"] == "player client blocked"]
    assert [(e["proxy"], e["reason"]) for e in blocked] == [(1, "http_429")]
    assert "s3cretpass" not in r.stderr and "vtsuser" not in r.stderr


def test_recaptcha_on_the_watch_page_moves_the_job(proxies):
    fake = blocking_upstream("recaptcha", BLOCKED)
    try:
        r = run_once(fake, "capJson3xx1", VTS_INNERTUBE_CLIENTS="WEB",
                     VTS_UPSTREAM_PROXY=proxies[0].url() + "," + proxies[1].url())
    finally:
        fake.close()
    assert (r.outcome, r.detail) == (OK, "ok")
    assert r.stats["sources"] == {BLOCKED: 1, SERVED: 3}
    assert r.requests() == {WATCH + "capJson3xx1": 2, PLAYER + "capJson3xx1": 1, TIMEDTEXT + "capJson3xx1": 1}


def test_one_attempt_only_falls_through_on_the_same_proxy(proxies):
    fake = blocking_upstream("429", BLOCKED)
    try:
        r = run_once(fake, "capJson3xx1", VTS_UPSTREAM_ATTEMPTS=1,
                     VTS_UPSTREAM_PROXY=proxies[0].url() + "," + proxies[1].url())
    finally:
        fake.close()
    assert (r.outcome, r.detail) == (UPSTREAM_FAILED, "http_429")
    assert r.stats["sources"] == {BLOCKED: 2}
    assert r.stats["clients"]["capJson3xx1"] == DEFAULT_CLIENTS


def test_every_proxy_blocked_is_upstream_failure_after_the_attempts(proxies):
    fake = blocking_upstream("429", BLOCKED, SERVED)
    try:
        r = run_once(fake, "capJson3xx1", VTS_UPSTREAM_PROXY=proxies[0].url() + "," + proxies[1].url())
    finally:
        fake.close()
    assert (r.outcome, r.detail) == (UPSTREAM_FAILED, "http_429")
    # VISIONOS through each proxy, then ANDROID on the last one: three player requests, no more.
    assert r.stats["sources"] == {BLOCKED: 1, SERVED: 2}
    assert r.requests() == {PLAYER + "capJson3xx1": 3}


def test_a_dead_proxy_is_a_network_failure_and_the_job_moves_on(proxies):
    fake = harness.FakeUpstream()
    try:
        dead = "http://vtsuser:deadsecret@127.0.0.1:%d" % harness.free_port()
        r = run_once(fake, "capJson3xx1", VTS_UPSTREAM_PROXY=dead + "," + proxies[1].url())
    finally:
        fake.close()
    assert (r.outcome, r.detail) == (OK, "ok")
    failed = [e for e in r.logs if e["msg"] == "upstream request failed"]
    assert [(e["proxy"], e["reason"]) for e in failed] == [(1, "network")]
    assert "Failed to connect" in failed[0]["error"]
    assert "deadsecret" not in r.stderr and "vtsuser" not in r.stderr
    assert r.stats["sources"] == {SERVED: 2}


def test_blocked_proxy_rests_for_every_child_and_metrics_count_it(tmp_path, proxies):
    stack = Stack(tmp_path, upstream_args=("--block-source", BLOCKED),
                  fetcher_env={"VTS_UPSTREAM_PROXY": proxies[0].url() + "," + proxies[1].url()})
    try:
        stack.upstream.reset()
        for i in range(20):
            r = stack.get("benchRest%02d" % i)
            assert r.status == 200, r
        stats = stack.upstream.stats()
        text = stack.metrics()
    finally:
        stack.close()
    # The warm-up job met the block once; the second block in a row sent proxy 1 to rest for both children.
    assert stats["blocked"] == {BLOCKED: 1}
    assert stats["sources"] == {BLOCKED: 1, SERVED: 40}
    assert metric(text, "vts_upstream_proxy_attempts_total", proxy="1") == 2
    assert metric(text, "vts_upstream_proxy_blocks_total", proxy="1") == 2
    assert metric(text, "vts_upstream_proxy_successes_total", proxy="1") == 0
    assert metric(text, "vts_upstream_proxy_successes_total", proxy="2") == 21
    assert metric(text, "vts_upstream_client_blocks_total", client="VISIONOS") == 2
    assert metric(text, "vts_upstream_client_successes_total", client="VISIONOS") == 21
    assert metric(text, "vts_upstream_outcomes_total", kind="ok") == 21
    assert "127.0.0.1:%d" % proxies[0].port not in text


# Client profiles as data.

def profile_doc(version, model, client_id=101):
    return json.dumps({"profiles": [{"name": "VISIONOS", "client_id": client_id, "version": version,
                                     "user_agent": "Mozilla/5.0 (Vision) {version}",
                                     "context": {"deviceMake": "Apple", "deviceModel": model, "osName": "visionOS",
                                                 "osVersion": "27.0", "hl": "en", "gl": "US"}}]})


def test_profiles_file_is_reloaded_by_the_next_job_and_a_broken_one_is_refused(tmp_path):
    # The fetcher reads the file again as VTS_FETCHER_USER (it drops root before its first job): a folder it may read.
    shared = shared_dir("vts-profiles-")
    path = shared / "profiles.json"
    path.write_text(profile_doc("1.50", "RealityDevice15,1"))
    stack = Stack(tmp_path, fetchers=1, fetcher_env={"VTS_CLIENT_PROFILES": str(path),
                                                     "VTS_INNERTUBE_CLIENTS": "VISIONOS"})
    try:
        assert stack.get("benchProf01").status == 200
        # A new version of the file, written beside and renamed over it (a new inode).
        tmp = shared / "profiles.json.new"
        tmp.write_text(profile_doc("2.25", "RealityDevice16,1", client_id=102))
        os.replace(tmp, path)
        assert stack.get("benchProf02").status == 200
        # Broken in place: refused with one line, the previous profiles stay.
        path.write_text('{"profiles": [{"name": "VISIONOS", "version": 7}')
        assert stack.get("benchProf03").status == 200
        assert stack.get("benchProf04").status == 200
        stats = stack.upstream.stats()
        clients, client_ids = stats["clients"], stats["client_ids"]
        log = stack.fetchers.log_text()
    finally:
        stack.close()
        shutil.rmtree(shared, ignore_errors=True)
    assert clients["benchProf01"] == ["VISIONOS:1.50"]
    assert clients["benchProf02"] == ["VISIONOS:2.25"]
    assert clients["benchProf03"] == ["VISIONOS:2.25"]
    assert clients["benchProf04"] == ["VISIONOS:2.25"]
    assert [client_ids[v] for v in ("benchProf01", "benchProf02", "benchProf04")] == [["101"], ["102"], ["102"]]
    refused = [json.loads(line) for line in log.splitlines()
               if line.startswith("{") and json.loads(line)["msg"].startswith("client profiles refused")]
    assert len(refused) == 1, refused
    assert refused[0]["error"].startswith("not JSON")


def test_a_broken_profiles_file_stops_the_start(tmp_path):
    path = tmp_path / "profiles.json"
    path.write_text('{"profiles": [{"name": "VISIONOS", "client_id": 101, "version": "1", "user_agent": "u", '
                    '"colour": "red"}]}')
    proc = subprocess.run([harness.fetcher_binary(), "--once", "capJson3xx1"],
                          env=harness.fetcher_env("http://127.0.0.1:9", VTS_CLIENT_PROFILES=str(path)),
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr == ('vts-fetcher: VTS_CLIENT_PROFILES: refused: %s: profile VISIONOS: unknown member "colour" '
                           '(known: name, client_name, client_id, version, user_agent, user_agent_in_context, '
                           'context, context_members, headers, origin, needs_page, host, path, query, '
                           'request_members, wrapper, visitor_data, visitor_renew_s)\n' % path)


# The probe.

def probe(fake, *videos, **env):
    proc = subprocess.run([harness.fetcher_binary(), "--probe", *videos],
                          env=harness.fetcher_env(fake.url, **env), capture_output=True, text=True, timeout=60)
    rows = [line.split() for line in proc.stdout.splitlines()]
    return proc.returncode, rows


def test_probe_reports_every_client_through_every_proxy(proxies):
    fake = blocking_upstream("429", BLOCKED)
    try:
        code, rows = probe(fake, "capJson3xx1", "visionUnpl1",
                           VTS_UPSTREAM_PROXY=proxies[0].url("u:probesecret") + "," + proxies[1].url())
    finally:
        fake.close()
    assert code == 0
    assert rows[0] == ["client", "proxy", "video", "outcome", "reason", "detail", "ms"]
    assert [r[:6] for r in rows[1:]] == [
        ["VISIONOS", "1", "capJson3xx1", "upstream_failed", "http_429", "http_429"],
        ["VISIONOS", "1", "visionUnpl1", "upstream_failed", "http_429", "http_429"],
        ["VISIONOS", "2", "capJson3xx1", "captions", "none", "ok"],
        ["VISIONOS", "2", "visionUnpl1", "not_available", "not_playable", "unplayable"],
        ["ANDROID", "1", "capJson3xx1", "upstream_failed", "http_429", "http_429"],
        ["ANDROID", "1", "visionUnpl1", "upstream_failed", "http_429", "http_429"],
        ["ANDROID", "2", "capJson3xx1", "captions", "none", "ok"],
        ["ANDROID", "2", "visionUnpl1", "captions", "none", "ok"],
    ]


def test_probe_fails_when_no_pair_returns_captions(proxies):
    fake = blocking_upstream("429", BLOCKED, SERVED)
    try:
        code, rows = probe(fake, "capJson3xx1", VTS_UPSTREAM_PROXY=proxies[0].url() + "," + proxies[1].url())
    finally:
        fake.close()
    assert code == 1
    assert [r[3] for r in rows[1:]] == ["upstream_failed"] * 4
