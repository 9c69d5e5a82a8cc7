"""Webhooks of batch jobs, end to end: the real gateway signs each try and hands it to a real fetcher, which POSTs it
to a receiver that verifies the signature with the Standard Webhooks reference verifier (npm standardwebhooks,
tests/contract/webhook_receiver.mjs). A receiver that fails twice gets a third try, spaced by the doubling backoff
(VTS_WEBHOOK_RETRY_MS, measured by the receiver's own clock); a restart of the gateway between tries still delivers;
a webhook_url to a loopback address that VTS_WEBHOOK_ALLOW does not permit is a 400 at POST, a redirect is never
followed, and a name that resolves to such an address is refused by the fetcher when it connects. Every address here
is in 127.0.0.0/8; the classification of private and public addresses is tests/unit/test_netaddr.c's."""
import json
import sqlite3
import subprocess
import time
import urllib.request

import pytest

from contract import error_body
from stack import Stack, harness
from test_contract_openapi import CONTRACT_DIR, contract_tools
from test_jobs_run import JOBKEY, call, wait_job_done
from vtsproc import wait_for

HOOKKEY = JOBKEY  # the key wait_job_done reads with
KEYS = [("hooks", HOOKKEY, "active", 1000, 60, 1000)]
IDS = ["benchWh%04d" % i for i in range(3)]


class Receiver:
    """tests/contract/webhook_receiver.mjs on host, answering deliveries by plan (see the script)."""

    def __init__(self, host, plan):
        node = contract_tools("standardwebhooks")
        self.host = host
        self.proc = subprocess.Popen([node, "webhook_receiver.mjs", host, plan], cwd=CONTRACT_DIR,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("listening "), (line, self.proc.stderr.read() if self.proc.poll() is not None else "")
        self.port = int(line.split()[1])
        self.url = "http://%s:%d/hook" % (host, self.port)

    def log(self, secret=None):
        q = "?secret=" + urllib.request.quote(secret, safe="") if secret else ""
        with urllib.request.urlopen("http://%s:%d/_log%s" % (self.host, self.port, q), timeout=5) as r:
            return json.loads(r.read())

    def deliveries(self, secret=None):
        return self.log(secret)["deliveries"]

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture
def parts():
    """What a test makes (receivers, stacks), closed at its end, the last made first."""
    made = []
    yield made
    for part in reversed(made):
        part.close()


def receiver(parts, host, plan):
    rx = Receiver(host, plan)
    parts.append(rx)
    return rx


def hook_stack(parts, tmp_path, retry_ms, env=None, **kwargs):
    """The whole service, VTS_WEBHOOK_ALLOW=127.0.0.2 and the first retry delay retry_ms for gateway and fetchers. The
    fetchers' sandbox lets them connect to the ports of the receivers made so far (VTS_FETCHER_WEBHOOK_PORTS)."""
    ports = ",".join(str(p.port) for p in parts if isinstance(p, Receiver))
    full = {"VTS_WEBHOOK_ALLOW": "127.0.0.2", "VTS_WEBHOOK_RETRY_MS": str(retry_ms), "VTS_FETCHER_WEBHOOK_PORTS": ports}
    full.update(env or {})
    stack = Stack(tmp_path, keys=KEYS, gateway_env=dict(full), fetcher_env=dict(full), **kwargs)
    parts.append(stack)
    return stack


def start(stack, body):
    status, h, job = call(stack.gateway, "POST", "/v1/jobs", body, key=HOOKKEY)
    assert status == 202, job
    assert set(job) == {"id", "status", "total", "created", "quota_remaining", "webhook_secret"}
    return h["location"], job


def hook_rows(gw):
    con = sqlite3.connect(str(gw.state_dir / "jobs.db"))
    try:
        return con.execute("SELECT job_id, state, attempts, http_status FROM hooks").fetchall()
    finally:
        con.close()


def tries(gw):
    return [r for r in gw.log_records() if r.get("msg") == "webhook try"]


def check_payload(d, job_id, loc_job):
    """One delivery: the job's status object as GET shows it, with "type" first, signed and verified."""
    assert d["verified"] is True, d
    assert d["method"] == "POST" and d["path"] == "/hook"
    assert d["headers"]["content-type"] == "application/json"
    assert d["headers"]["webhook-id"] == "msg_" + job_id
    body = json.loads(d["body"])
    assert list(body)[0] == "type" and body["type"] == "job.done"
    del body["type"]
    assert body == loc_job


def test_a_receiver_that_fails_twice_gets_the_third_try_signed_and_spaced_by_the_backoff(tmp_path, parts):
    rx = receiver(parts, "127.0.0.2", "500,503,204")
    stack = hook_stack(parts, tmp_path, 400, fetchers=2)
    loc, job = start(stack, {"video_ids": IDS, "webhook_url": rx.url})
    secret = job["webhook_secret"]
    assert secret.startswith("whsec_") and len(secret) == 38
    done = wait_job_done(stack.gateway, loc)
    assert "webhook_secret" not in done and "webhook_url" not in done
    assert wait_for(lambda: len(rx.deliveries()) >= 3, 60), rx.deliveries()
    assert wait_for(lambda: [r[1:] for r in hook_rows(stack.gateway)] == [(1, 3, 204)], 10), \
        hook_rows(stack.gateway)
    got = rx.deliveries(secret)
    assert [d["status"] for d in got] == [500, 503, 204]
    for d in got:
        check_payload(d, job["id"], done)
    # The same message every try (one webhook-id, one body), each signed at its own time.
    assert len({d["headers"]["webhook-id"] for d in got}) == 1 and len({d["body"] for d in got}) == 1
    # The backoff: 400 ms after the first failure, 800 ms after the second, by the receiver's clock.
    at = [d["at_ms"] for d in got]
    assert at[1] - at[0] >= 400 and at[2] - at[1] >= 800, at
    # A wrong secret does not verify: the check above could fail.
    other = rx.deliveries("whsec_" + "A" * 32)
    assert [d["verified"] for d in other] == [False] * 3
    logged = [(r["attempt"], r["outcome"], r["http_status"]) for r in tries(stack.gateway)]
    assert logged == [(1, "failed", 500), (2, "failed", 503), (3, "delivered", 204)]
    assert all(r["job_id"] == job["id"] and secret not in json.dumps(r) for r in tries(stack.gateway))
    assert secret not in stack.gateway.log_text() and secret not in stack.fetchers.log_text()
    assert stack.gateway.metric("vts_webhook_deliveries_total", outcome="failed") == 2
    assert stack.gateway.metric("vts_webhook_deliveries_total", outcome="delivered") == 1
    assert stack.gateway.metric("vts_webhook_deliveries_total", outcome="given_up") == 0
    # The receiver is not the platform: its 500 and 503 are no upstream outcome.
    assert stack.gateway.metric("vts_upstream_outcomes_total", kind="http_5xx") == 0
    # GET never shows the secret again.
    status, _, again = call(stack.gateway, "GET", loc, key=HOOKKEY)
    assert status == 200 and "webhook_secret" not in again


def test_a_gateway_restarted_between_tries_still_delivers(tmp_path, parts):
    rx = receiver(parts, "127.0.0.2", "500,204")
    stack = hook_stack(parts, tmp_path, 1500, fetchers=1)
    gw = stack.gateway
    loc, job = start(stack, {"video_ids": IDS[:1], "webhook_url": rx.url})
    # The first try failed and is recorded (the next due 1.5 s later): the gateway dies now, with SIGKILL.
    assert wait_for(lambda: [r[1:] for r in hook_rows(gw)] == [(0, 1, 500)], 60), hook_rows(gw)
    gw.kill()
    assert len(rx.deliveries()) == 1
    gw.start()
    assert wait_for(lambda: [r[1:] for r in hook_rows(gw)] == [(1, 2, 204)], 60), hook_rows(gw)
    got = rx.deliveries(job["webhook_secret"])
    assert [d["status"] for d in got] == [500, 204]
    done = wait_job_done(gw, loc)
    for d in got:
        check_payload(d, job["id"], done)
    assert got[1]["at_ms"] - got[0]["at_ms"] >= 1500


def test_a_cancelled_job_sends_job_cancelled_once_its_running_item_ends(tmp_path, parts):
    rx = receiver(parts, "127.0.0.2", "204")
    ids = ["benchWc%04d" % i for i in range(6)]
    # One fetcher and a slow platform: the DELETE lands while items wait.
    stack = hook_stack(parts, tmp_path, 200, fetchers=1, upstream_args=("--delay-ms", "300"))
    gw = stack.gateway
    loc, job = start(stack, {"video_ids": ids, "webhook_url": rx.url})
    assert wait_for(lambda: call(gw, "GET", loc, key=HOOKKEY)[2]["counts"]["done"] >= 1, 30)
    status, _, cancelled = call(gw, "DELETE", loc, key=HOOKKEY)
    assert status == 200 and cancelled["counts"]["cancelled"] >= 1
    assert wait_for(lambda: len(rx.deliveries()) == 1, 60), rx.deliveries()
    _, _, final = call(gw, "GET", loc, key=HOOKKEY)
    assert final["status"] == "cancelled" and final["counts"]["running"] == 0
    (d,) = rx.deliveries(job["webhook_secret"])
    assert d["verified"] is True and d["headers"]["webhook-id"] == "msg_" + job["id"]
    body = json.loads(d["body"])
    assert list(body)[0] == "type" and body.pop("type") == "job.cancelled"
    assert body == final


def test_a_redirect_is_not_followed_and_its_target_sees_nothing(tmp_path, parts):
    target = receiver(parts, "127.0.0.3", "204")
    rx = receiver(parts, "127.0.0.2", "302=" + target.url)
    stack = hook_stack(parts, tmp_path, 200, fetchers=1)
    # Named directly, the receiver that VTS_WEBHOOK_ALLOW does not permit is refused at POST.
    status, h, body = call(stack.gateway, "POST", "/v1/jobs", {"video_ids": IDS[:1], "webhook_url": target.url},
                           key=HOOKKEY)
    assert (status, body) == (400, err("webhook_url_refused", ADDRESS_MSG)) and "location" not in h
    _, job = start(stack, {"video_ids": IDS[:1], "webhook_url": rx.url})
    assert wait_for(lambda: len(rx.deliveries()) >= 2, 60), rx.deliveries()
    failed = wait_for(lambda: [r for r in tries(stack.gateway) if r["outcome"] == "failed"], 10)
    assert failed and all((r["detail"], r["reason"], r["http_status"]) == ("redirect_302", "refused", 302)
                          for r in failed), failed
    assert all(d["verified"] for d in rx.deliveries(job["webhook_secret"]))
    assert target.log() == {"connections": 0, "deliveries": []}


def test_a_receiver_that_never_answers_fails_the_try_at_its_bound_and_a_long_answer_is_not_read(tmp_path, parts):
    # A try is bounded by 10 s and by the job's deadline (VTS_JOB_TIMEOUT_MS, 2 s here): the hung first try fails
    # with reason timeout; the second is answered 200 with 1 MiB, of which the fetcher reads 4 KiB: delivered.
    rx = receiver(parts, "127.0.0.2", "hang,200big")
    stack = hook_stack(parts, tmp_path, 200, env={"VTS_JOB_TIMEOUT_MS": "2000"}, fetchers=1)
    gw = stack.gateway
    _, job = start(stack, {"video_ids": IDS[:1], "webhook_url": rx.url})
    assert wait_for(lambda: [r[1:] for r in hook_rows(gw)] == [(1, 2, 200)], 60), hook_rows(gw)
    first, second = tries(gw)
    assert (first["attempt"], first["outcome"], first["reason"], first["http_status"]) == (1, "failed", "timeout", 0)
    assert (second["attempt"], second["outcome"], second["http_status"]) == (2, "delivered", 200)
    got = rx.deliveries(job["webhook_secret"])
    assert [d["verified"] for d in got] == [True, True]
    # The first try ended at its bound: 2 s, not the receiver's pleasure.
    assert 2000 <= got[1]["at_ms"] - got[0]["at_ms"] < 2000 + 8000


def test_a_name_resolving_to_a_loopback_address_not_allowed_is_refused_when_the_fetcher_connects(tmp_path, parts):
    # "localhost" is a name: https to it passes the POST, and the fetcher refuses 127.0.0.1 (allowed: 127.0.0.2 only)
    # before a connection is made.
    rx = receiver(parts, "127.0.0.1", "204")
    stack = hook_stack(parts, tmp_path, 200, fetchers=1)
    start(stack, {"video_ids": IDS[:1], "webhook_url": "https://localhost:%d/hook" % rx.port})
    assert wait_for(lambda: len([r for r in tries(stack.gateway) if r["outcome"] == "failed"]) >= 2, 60)
    failed = [r for r in tries(stack.gateway) if r["outcome"] == "failed"]
    assert all((r["detail"], r["reason"], r["http_status"]) == ("address_refused", "refused", 0)
               for r in failed), failed
    assert rx.log() == {"connections": 0, "deliveries": []}


def test_the_fetcher_refuses_what_a_gateway_should_not_have_sent(tmp_path, parts):
    # A fake dispatcher hands a real fetcher webhook jobs by hand: the fetcher posts the signed message it is given to
    # an allowed receiver, and refuses a receiver outside VTS_WEBHOOK_ALLOW, named by its address or by a name that
    # leads to one, whatever the dispatcher says, without a connection.
    allowed = receiver(parts, "127.0.0.2", "202")
    other = receiver(parts, "127.0.0.3", "204")
    d = harness.FakeDispatcher()
    d.listen()
    proc = subprocess.Popen([harness.fetcher_binary()], env=harness.fetcher_env(
        "http://127.0.0.1:9", VTS_JOBS_URL=d.url, VTS_WEBHOOK_ALLOW="127.0.0.2",
        VTS_FETCHER_WEBHOOK_PORTS="%d,%d" % (allowed.port, other.port)), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        conn = d.accept()
        assert conn.recv() == harness.READY
        body = b'{"type":"job.done","id":"j0"}'
        now = int(time.time())
        results = []
        for n, url in enumerate([allowed.url, other.url, "http://localhost:%d/hook" % allowed.port]):
            conn.reply(harness.encode_job(n + 1, "", kind=harness.KIND_WEBHOOK, deadline_ms=5000, hook_url=url.encode(),
                                          hook_id="msg_j0", hook_timestamp=now, hook_signature="v1,c2ln",
                                          hook_body=body))
            results.append(harness.decode_result(conn.recv()))
        assert [(r["job_id"], r["outcome"], r["source"], r["reason"], r["detail"], r["body"]) for r in results] == [
            (1, 1, 3, "none", "", b"202"),
            (2, 3, 3, "refused", "address_refused", b""),
            (3, 3, 3, "refused", "address_refused", b"")]
        (got,) = allowed.deliveries()
        assert got["headers"] == {"content-type": "application/json", "webhook-id": "msg_j0",
                                  "webhook-timestamp": str(now), "webhook-signature": "v1,c2ln"}
        assert got["body"] == body.decode()
        assert allowed.log()["connections"] == 1
        assert other.log() == {"connections": 0, "deliveries": []}
    finally:
        harness.stop_process(proc)
        d.close()


HTTPS_MSG = "webhook_url must use https (plain http only to an address of VTS_WEBHOOK_ALLOW)."
ADDRESS_MSG = "webhook_url names an address that is not public and not in VTS_WEBHOOK_ALLOW."
URL_MSG = "webhook_url must be an absolute http or https URL of at most 2047 bytes."
HOST_MSG = "webhook_url must name a host (a DNS name or an IP address) and at most a valid port."
USERINFO_MSG = "webhook_url must not carry a user name or password."


def err(code, message):
    body = error_body(code)
    body["error"]["message"] = message
    return body


@pytest.mark.parametrize("url,code,message", [
    ("http://127.0.0.3:9/hook", "webhook_url_refused", ADDRESS_MSG),
    ("https://127.0.0.3/hook", "webhook_url_refused", ADDRESS_MSG),
    ("http://localhost:9/hook", "webhook_url_refused", HTTPS_MSG),
    ("http://hooks.example/hook", "webhook_url_refused", HTTPS_MSG),
    ("ftp://hooks.example/hook", "invalid_request", URL_MSG),
    ("hooks.example/hook", "invalid_request", URL_MSG),
    ("https://hooks.example/a b", "invalid_request", URL_MSG),
    ("https://" + "a" * 2040 + ".example/", "invalid_request", URL_MSG),
    (7, "invalid_request", URL_MSG),
    ("", "invalid_request", URL_MSG),
    ("https://user:pw@hooks.example/", "invalid_request", USERINFO_MSG),
    ("http://x@127.0.0.2/", "invalid_request", USERINFO_MSG),
    ("https:///hook", "invalid_request", HOST_MSG),
    ("https://hooks.example:0/", "invalid_request", HOST_MSG),
    ("https://hooks.example:65536/", "invalid_request", HOST_MSG),
    ("https://hooks.example:/", "invalid_request", HOST_MSG),
    ("https://2130706433/", "invalid_request", HOST_MSG),
    ("https://127.1/", "invalid_request", HOST_MSG),
    ("https://[::1/", "invalid_request", HOST_MSG),
    ("https://-bad-.example/", "invalid_request", HOST_MSG),
])
def test_a_bad_webhook_url_is_a_400_naming_it(make_gateway, url, code, message):
    gw = make_gateway(env={"VTS_WEBHOOK_ALLOW": "127.0.0.2"}, keys=[KEYS[0]])
    status, h, body = call(gw, "POST", "/v1/jobs", {"video_ids": IDS[:1], "webhook_url": url}, key=HOOKKEY)
    assert (status, body) == (400, err(code, message))
    assert "location" not in h


@pytest.mark.parametrize("url", ["http://127.0.0.2:9/hook", "https://127.0.0.2/", "https://hooks.example/in?x=1",
                                 "HTTPS://Hooks.Example:8443/a/b#frag"])
def test_an_allowed_webhook_url_is_accepted_with_its_secret_once(make_gateway, url):
    gw = make_gateway(env={"VTS_WEBHOOK_ALLOW": "127.0.0.2"}, keys=[KEYS[0]])
    status, h, body = call(gw, "POST", "/v1/jobs", {"video_ids": IDS[:1], "webhook_url": url}, key=HOOKKEY)
    assert status == 202 and body["webhook_secret"].startswith("whsec_"), body
    status, _, got = call(gw, "GET", h["location"], key=HOOKKEY)
    assert status == 200 and "webhook_secret" not in got


def test_a_job_without_a_webhook_gets_no_secret(make_gateway):
    gw = make_gateway(keys=[KEYS[0]])
    status, _, body = call(gw, "POST", "/v1/jobs", {"video_ids": IDS[:1]}, key=HOOKKEY)
    assert status == 202 and set(body) == {"id", "status", "total", "created", "quota_remaining"}
