"""The jobs link between the dispatcher and its fetchers: mutual TLS over tls+tcp (certificates made here with
openssl), the check of every result body, the start errors of a half-configured link, the warning of plain tcp on an
open address, and the private directory of the workers' socket to the dispatcher. The real gateway and fetcher run on
127.0.0.1; fetchers that misbehave are played by harness.FakeFetcher, which speaks nng's SP frames (inside TLS)."""
import os
import shutil
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import threading

import pytest

from certs import Certs
from conftest import ACTIVE_KEY, BUILD_DIR, Gateway, free_port, wait_for
from stack import Stack

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402
from harness import READY, FakeFetcher, decode_job, encode_result  # noqa: E402

TRANSCRIPT = (b'{"language":"en","source":"captions","text":"Hello and welcome to the fake platform",'
              b'"segments":[{"text":"Hello and welcome","start":0.12,"duration":2.4},'
              b'{"text":"to the fake platform","start":2.52,"duration":3}]}')
SERVICE_UNAVAILABLE = {"error": {"code": "service_unavailable", "message": "The service is not accepting requests now."}}
FETCH_FAILED = {"error": {"code": "transcript_fetch_failed", "message": "The transcript could not be fetched."}}


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def tls_gateway(tmp_path, certs):
    """A gateway whose dispatcher listens on tls+tcp with the gateway certificate; a short job deadline."""
    gw = Gateway(tmp_path, env=dict(certs.env("gateway"), VTS_JOB_TIMEOUT_MS="1500"))
    gw.env["VTS_JOBS_URL"] = "tls+tcp://127.0.0.1:%d" % gw.jobs_port
    gw.start()
    assert wait_for(lambda: dispatcher_started(gw), 5), gw.log_text()
    yield gw
    gw.stop()


def dispatcher_started(gw):
    """The dispatcher's "started" log records (its listeners are up once there is one)."""
    return [x for x in gw.log_records() if x.get("msg") == "dispatcher started"]


def get_transcript(gw, video):
    return gw.request("GET", "/v1/video/transcript?video_id=" + video, headers={"x-api-key": ACTIVE_KEY})


def in_thread(fn, *args):
    """Runs fn(*args) in a thread; returns (thread, box) where box["result"] is fn's return value once it ends."""
    box = {}

    def run():
        box["result"] = fn(*args)

    t = threading.Thread(target=run)
    t.start()
    return t, box


def test_fetcher_with_a_certificate_of_the_ca_serves_transcripts_over_tls(tmp_path, certs):
    stack = Stack(tmp_path, gateway_env=certs.env("gateway"), fetcher_env=certs.env("fetcher"), fetchers=1,
                  jobs_scheme="tls+tcp")
    try:
        r = stack.get("capJson3xx1")
        assert r.status == 200, r
        assert r.body == TRANSCRIPT
        assert stack.requests().get("POST /youtubei/v1/player capJson3xx1") == 1
        assert stack.gateway.env["VTS_JOBS_URL"].startswith("tls+tcp://")
    finally:
        stack.close()


def test_fetcher_with_a_certificate_of_another_ca_never_gets_a_job(tmp_path, tls_gateway, certs, upstream):
    upstream.reset()
    # The rogue fetcher trusts the real CA (its certificate is no secret) but holds a certificate of its own CA.
    log = open(tmp_path / "rogue-fetcher.log", "wb")
    rogue = subprocess.Popen([harness.fetcher_binary()], stdout=log, stderr=log,
                             env=harness.fetcher_env(upstream.url, VTS_JOBS_URL=tls_gateway.env["VTS_JOBS_URL"],
                                                     **certs.env("rogue", ca="ca")))
    try:
        # The job waits its whole deadline (1.5 s) for a fetcher, then is shed (503, Retry-After); the rogue one dials
        # every 0.1 to 2 s meanwhile.
        r = get_transcript(tls_gateway, "capJson3xx1")
        assert (r.status, r.json(), r.headers.get("retry-after")) == (503, SERVICE_UNAVAILABLE, "1")
        assert rogue.poll() is None, "the rogue fetcher is still trying"
        assert upstream.stats()["requests"] == {}, "the platform saw a request"
        assert tls_gateway.metric("vts_fetchers_connected") == 0
        finished = [x for x in tls_gateway.log_records() if x.get("msg") == "job finished"]
        assert [x.get("detail") for x in finished] == ["queue_timeout"]
    finally:
        harness.stop_process(rogue)
        log.close()


@pytest.mark.parametrize("leaf", [None, "rogue"], ids=["no_certificate", "rogue_certificate"])
def test_tls_handshake_without_a_certificate_of_the_ca_is_refused(tls_gateway, certs, leaf):
    with pytest.raises((ssl.SSLError, EOFError, ConnectionResetError)):
        FakeFetcher(tls_gateway.jobs_port, certs.client_context(leaf))
    # Plain SP bytes on the TLS port are no handshake at all.
    with pytest.raises((EOFError, ConnectionResetError)):
        FakeFetcher(tls_gateway.jobs_port)
    # With a certificate of the CA the same handshake goes through, and the dispatcher counts the fetcher.
    good = FakeFetcher(tls_gateway.jobs_port, certs.client_context("fetcher"))
    try:
        good.request(READY)
        assert wait_for(lambda: tls_gateway.metric("vts_fetchers_idle") == 1, 5)
    finally:
        good.close()


@pytest.mark.parametrize("server_leaf,accepted", [("gateway", True), ("rogue", False)])
def test_fetcher_talks_only_to_a_dispatcher_with_a_certificate_of_the_ca(tmp_path, certs, upstream, server_leaf,
                                                                          accepted):
    """A fake dispatcher (Python TLS) presents server_leaf's certificate; the real fetcher sends READY only to the one
    signed by its CA."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs.path(server_leaf + ".crt"), certs.path(server_leaf + ".key"))
    ctx.load_verify_locations(certs.path("ca.crt"))
    ctx.verify_mode = ssl.CERT_REQUIRED
    port = free_port()
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen(4)
    lsock.settimeout(10)
    log = open(tmp_path / "fetcher.log", "wb")
    fetcher = subprocess.Popen([harness.fetcher_binary()], stdout=log, stderr=log,
                               env=harness.fetcher_env(upstream.url, VTS_JOBS_URL="tls+tcp://127.0.0.1:%d" % port,
                                                       **certs.env("fetcher")))
    try:
        conn, _ = lsock.accept()
        if accepted:
            tls = ctx.wrap_socket(conn, server_side=True)
            assert harness.SpConn(tls).recv() == READY
            tls.close()
        else:
            with pytest.raises(ssl.SSLError):
                ctx.wrap_socket(conn, server_side=True)
            conn.close()
    finally:
        harness.stop_process(fetcher)
        log.close()
        lsock.close()


def test_result_that_is_not_a_transcript_fails_its_job_and_nothing_is_cached(tls_gateway, certs):
    fake = FakeFetcher(tls_gateway.jobs_port, certs.client_context("fetcher"))
    try:
        fake.request(READY)
        t, box = in_thread(get_transcript, tls_gateway, "capJson3xx1")
        job = decode_job(fake.recv())
        assert (job["video_id"], job["kind"]) == ("capJson3xx1", 1)
        fake.request(encode_result(job["job_id"], harness.PROTO_OK, body=b'{"videoId":"capJson3xx1","text":"x"}'))
        t.join(10)
        assert (box["result"].status, box["result"].json()) == (500, FETCH_FAILED)
        refused = [x for x in tls_gateway.log_records() if x.get("msg") == "fetcher result refused: not what its job asked for"]
        assert [(x["video_id"], x["why"]) for x in refused] == [("capJson3xx1", "not_a_transcript")]
        assert wait_for(lambda: tls_gateway.metric("vts_dispatch_results_refused_total") == 1, 5)

        # Nothing was kept: the next request for the video is a new job, and a real transcript is served as sent.
        t, box = in_thread(get_transcript, tls_gateway, "capJson3xx1")
        job2 = decode_job(fake.recv())
        assert job2["video_id"] == "capJson3xx1" and job2["job_id"] != job["job_id"]
        fake.request(encode_result(job2["job_id"], harness.PROTO_OK, body=TRANSCRIPT))
        t.join(10)
        assert (box["result"].status, box["result"].body) == (200, TRANSCRIPT)
    finally:
        fake.close()


def test_declined_job_goes_first_in_line_and_is_counted(tls_gateway, certs):
    fake = FakeFetcher(tls_gateway.jobs_port, certs.client_context("fetcher"))
    try:
        fake.request(READY)
        t, box = in_thread(get_transcript, tls_gateway, "capJson3xx1")
        job = decode_job(fake.recv())
        fake.request(harness.encode_decline(job["job_id"]))
        assert fake.recv() == READY  # given back: the fetcher is answered at once and asks again when it wants
        assert wait_for(lambda: tls_gateway.metric("vts_dispatch_jobs_declined_total") == 1, 5)
        fake.request(READY)
        again = decode_job(fake.recv())
        assert (again["job_id"], again["video_id"]) == (job["job_id"], "capJson3xx1")
        fake.request(encode_result(again["job_id"], harness.PROTO_OK, body=TRANSCRIPT))
        t.join(10)
        assert (box["result"].status, box["result"].body) == (200, TRANSCRIPT)
        assert tls_gateway.metric("vts_dispatch_jobs_declined_total") == 1
    finally:
        fake.close()


def test_connection_beyond_max_fetchers_is_closed_and_counted(tmp_path):
    gw = Gateway(tmp_path, env={"VTS_JOBS_MAX_FETCHERS": "1"})
    gw.start()
    first = second = None
    try:
        assert wait_for(lambda: dispatcher_started(gw), 5)
        first = FakeFetcher(gw.jobs_port)
        first.request(READY)
        assert wait_for(lambda: gw.metric("vts_fetchers_connected") == 1, 5)
        second = FakeFetcher(gw.jobs_port)
        second.request(READY)
        with pytest.raises((ConnectionError, EOFError, OSError, AssertionError)):
            second.recv(timeout=5)
        assert wait_for(lambda: gw.metric("vts_dispatch_fetchers_refused_total") == 1, 5)
        assert gw.metric("vts_fetchers_connected") == 1
    finally:
        for f in (first, second):
            if f is not None:
                f.close()
        gw.stop()


def run_binary(name, env, timeout=10):
    full = {k: v for k, v in os.environ.items() if not k.startswith("VTS_")}
    full.update(env)
    full["ASAN_OPTIONS"] = "detect_leaks=0"
    return subprocess.run([str(BUILD_DIR / "bin" / name)], env=full, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name", ["vts-gateway", "vts-fetcher"])
def test_tls_url_without_its_three_settings_is_a_start_error(tmp_path, certs, name):
    env = {"VTS_JOBS_URL": "tls+tcp://127.0.0.1:%d" % free_port(), "VTS_KEYS_FILE": str(tmp_path / "keys.db"),
           "VTS_JOBS_TLS_CA": certs.path("ca.crt")}
    r = run_binary(name, env)
    assert r.returncode == 2
    assert r.stderr == ("%s: VTS_JOBS_URL: a tls+tcp:// URL needs VTS_JOBS_TLS_CA, VTS_JOBS_TLS_CERT and "
                        "VTS_JOBS_TLS_KEY\n" % name)

    env.update(certs.env("gateway" if name == "vts-gateway" else "fetcher"))
    env["VTS_JOBS_TLS_KEY"] = str(tmp_path / "missing.key")
    r = run_binary(name, env)
    assert r.returncode == 2
    assert r.stderr == "%s: VTS_JOBS_TLS_KEY: cannot read %s: No such file or directory\n" % (
        name, env["VTS_JOBS_TLS_KEY"])


@pytest.mark.parametrize("name", ["vts-gateway", "vts-fetcher"])
def test_jobs_url_of_another_scheme_is_a_start_error(tmp_path, name):
    r = run_binary(name, {"VTS_JOBS_URL": "udp://127.0.0.1:7400", "VTS_KEYS_FILE": str(tmp_path / "keys.db")})
    assert r.returncode == 2
    assert r.stderr == ('%s: VTS_JOBS_URL: invalid value "udp://127.0.0.1:7400": expected tcp://HOST:PORT or '
                        'tls+tcp://HOST:PORT, comma-separated\n' % name)


PLAIN_WARNING = ("jobs link is plain tcp on a non-loopback address: any process that reaches it can take jobs and "
                 "answer them; use tls+tcp:// with VTS_JOBS_TLS_CA, VTS_JOBS_TLS_CERT and VTS_JOBS_TLS_KEY")


def _plain_refused(name, url):
    return ('%s: VTS_JOBS_URL: plain "%s" is off loopback, where any process that reaches it can take jobs and '
            'answer them: use tls+tcp:// with VTS_JOBS_TLS_CA, VTS_JOBS_TLS_CERT and VTS_JOBS_TLS_KEY, or set '
            'VTS_JOBS_INSECURE=true\n' % (name, url))


@pytest.mark.parametrize("name,urls,refused", [
    ("vts-gateway", "tcp://0.0.0.0:7400", "tcp://0.0.0.0:7400"),
    ("vts-gateway", "tcp://[::]:7400", "tcp://[::]:7400"),
    ("vts-gateway", "tcp://128.0.0.1:7400", "tcp://128.0.0.1:7400"),
    ("vts-fetcher", "tcp://gateway.example:7400", "tcp://gateway.example:7400"),
    ("vts-fetcher", "tcp://127.0.0.1:7400,tcp://gateway.example:7400", "tcp://gateway.example:7400"),
    ("vts-fetcher", "tls+tcp://gateway.example:7400,tcp://[::2]:7400", "tcp://[::2]:7400"),
])
def test_plain_tcp_off_loopback_is_a_start_error(tmp_path, certs, name, urls, refused):
    env = {"VTS_JOBS_URL": urls, "VTS_KEYS_FILE": str(tmp_path / "keys.db"), **certs.env(name.split("-")[1])}
    r = run_binary(name, env)
    assert (r.returncode, r.stderr) == (2, _plain_refused(name, refused))
    # VTS_JOBS_INSECURE=false is the default, said out loud.
    r = run_binary(name, dict(env, VTS_JOBS_INSECURE="false"))
    assert (r.returncode, r.stderr) == (2, _plain_refused(name, refused))


@pytest.mark.parametrize("url", ["tcp://127.0.0.1:%d", "tcp://127.8.9.10:%d", "tcp://localhost:%d", "tcp://[::1]:%d"])
def test_plain_tcp_on_loopback_starts_without_the_setting(tmp_path, url):
    gw = Gateway(tmp_path)
    gw.env["VTS_JOBS_URL"] = url % gw.jobs_port
    gw.start()
    try:
        assert wait_for(lambda: dispatcher_started(gw), 5)
        assert not [x for x in gw.log_records() if x.get("msg") == PLAIN_WARNING]
    finally:
        assert gw.stop() == 0


@pytest.mark.parametrize("host,warned", [("0.0.0.0", True), ("127.0.0.1", False)])
def test_plain_tcp_warns_only_off_loopback(tmp_path, host, warned):
    """With VTS_JOBS_INSECURE=true, plain tcp off loopback starts, with a warning."""
    gw = Gateway(tmp_path)
    gw.env["VTS_JOBS_URL"] = "tcp://%s:%d" % (host, gw.jobs_port)
    gw.env["VTS_JOBS_INSECURE"] = "true"
    gw.start()
    try:
        assert wait_for(lambda: dispatcher_started(gw), 5)
        warnings = [x for x in gw.log_records() if x.get("msg") == PLAIN_WARNING]
        assert [(x["level"], x["url"]) for x in warnings] == ([("warn", gw.env["VTS_JOBS_URL"])] if warned else [])
    finally:
        gw.stop()


def _runtime_dir():
    """A short runtime folder: a socket's path has at most 107 bytes, and the run's temporary folders nest deep (a
    longer XDG_RUNTIME_DIR is passed over for TMPDIR, which is not what these tests are about)."""
    return tempfile.mkdtemp(prefix="xdg-")


def test_dispatcher_socket_lives_in_a_private_directory_removed_at_stop(tmp_path):
    runtime = _runtime_dir()
    gw = Gateway(tmp_path, env={"XDG_RUNTIME_DIR": runtime})
    gw.start()
    stopped = False
    try:
        started = wait_for(lambda: dispatcher_started(gw), 5)
        url = started[0]["worker_url"]
        assert url.startswith("ipc://")
        path = url[len("ipc://"):]
        directory = os.path.dirname(path)
        assert os.path.basename(path) == "dispatcher.ipc"
        assert os.path.dirname(directory) == runtime  # XDG_RUNTIME_DIR
        assert os.path.basename(directory).startswith("vts-") and len(os.path.basename(directory)) == 10
        st = os.stat(directory)
        assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o700, os.getuid())
        assert stat.S_ISSOCK(os.stat(path).st_mode)
        assert gw.stop() == 0
        stopped = True
        assert not os.path.exists(directory)
    finally:
        if not stopped:
            gw.stop()
        shutil.rmtree(runtime, ignore_errors=True)


def test_two_gateways_of_one_user_get_different_directories(tmp_path):
    runtime = _runtime_dir()
    gws = []
    for i in range(2):
        (tmp_path / str(i)).mkdir()
        gw = Gateway(tmp_path / str(i), env={"XDG_RUNTIME_DIR": runtime})
        gws.append(gw)
        gw.start()
    try:
        urls = [wait_for(lambda gw=gw: dispatcher_started(gw), 5)[0]["worker_url"] for gw in gws]
        assert urls[0] != urls[1]
        assert all(os.path.dirname(os.path.dirname(u[len("ipc://"):])) == runtime for u in urls)
    finally:
        for gw in gws:
            gw.stop()
        shutil.rmtree(runtime, ignore_errors=True)


def test_gateway_refuses_a_list_of_jobs_urls(tmp_path):
    r = run_binary("vts-gateway", {"VTS_JOBS_URL": "tcp://127.0.0.1:%d,tcp://127.0.0.1:%d" % (free_port(), free_port()),
                                   "VTS_KEYS_FILE": str(tmp_path / "keys.db")})
    assert r.returncode == 2
    assert r.stderr == "vts-gateway: VTS_JOBS_URL: the gateway listens on one URL (a list is for fetchers)\n"
