"""The roles of the jobs link's certificates, and its failed handshakes. A gateway's certificate carries
extendedKeyUsage serverAuth and a fetcher's clientAuth (tests/integration/certs.py makes them with openssl as the
reference shows); each end refuses to start with a certificate that is not of its role, and refuses a peer whose
certificate names the other role or comes from another CA. A failed
handshake is logged by the end that refused it (at most one line per peer every 10 s, saying how many it left out, and
the rest as the 10 s end or at stop) and counted by the gateway in vts_link_handshake_failures_total; a fetcher that
never got through never says "fetcher ready". Real gateway and fetcher on 127.0.0.1; the other end is played by Python's TLS when the test needs
to decide exactly how many handshakes happen."""
import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from certs import Certs
from conftest import BUILD_DIR, Gateway, free_port, wait_for
from stack import Stack
from vtsproc import log_records

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402
from harness import READY, FakeFetcher  # noqa: E402

FAILED = "jobs link handshake failed: a certificate was refused by one end, or TLS failed"
METRIC = "vts_link_handshake_failures_total"
WINDOW_S = 10  # VTS_LINK_HANDSHAKE_LOG_MS: one line per peer this often
TLS_REFUSED = (ssl.SSLError, EOFError, ConnectionResetError, BrokenPipeError)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs(tmp_path_factory.mktemp("certs"), odd_roles=True)


def tls_gateway(tmp_path, certs):
    gw = Gateway(tmp_path, env=dict(certs.env("gateway"), VTS_JOB_TIMEOUT_MS="1500"))
    gw.env["VTS_JOBS_URL"] = "tls+tcp://127.0.0.1:%d" % gw.jobs_port
    gw.start()
    # /health answers before the dispatcher listens: wait for it.
    assert wait_for(lambda: [x for x in gw.log_records() if x.get("msg") == "dispatcher started"], 10), gw.log_text()
    return gw


def start_fetcher(tmp_path, upstream, url, tls_env, name="fetcher"):
    log_path = tmp_path / (name + ".log")
    log = open(log_path, "wb")
    proc = subprocess.Popen([harness.fetcher_binary()], stdout=log, stderr=log,
                            env=harness.fetcher_env(upstream.url, VTS_JOBS_URL=url, **tls_env))
    log.close()
    return proc, log_path


def records(path, msg):
    return [x for x in log_records(path.read_text(errors="replace")) if x.get("msg") == msg]


def failed_lines(records_):
    """(url, failed, suppressed) of each handshake failure line."""
    return [(x["url"], x["failed"], x["suppressed"]) for x in records_ if x.get("msg") == FAILED]


def first_line_tells_all_so_far(lines, url):
    """The first line of a peer covers every failure up to it (one second's worth at most, as the count is read every
    second): all but one of them suppressed."""
    got_url, failed, suppressed = lines[0]
    return got_url == url and failed >= 1 and suppressed == failed - 1


def stop(proc):
    proc.terminate()
    proc.wait(timeout=15)


@pytest.mark.parametrize("leaf", ["gateway", "rogue", None],
                         ids=["server_role_certificate", "certificate_of_another_ca", "no_certificate"])
def test_gateway_refuses_a_fetcher_without_a_client_certificate_of_its_ca_and_counts_it(tmp_path, certs, leaf):
    gw = tls_gateway(tmp_path, certs)
    url = gw.env["VTS_JOBS_URL"]
    try:
        # Three refused handshakes, one at a time: each is counted before the next begins.
        first = time.monotonic()
        for n in (1, 2, 3):
            with pytest.raises(TLS_REFUSED):
                FakeFetcher(gw.jobs_port, certs.client_context(leaf)).request(READY)
            assert wait_for(lambda: gw.metric(METRIC) == n, 5), (n, gw.metric(METRIC))
        # One line for the first; the next two fall in its 10 s and wait (told as the window ends, or at stop).
        if time.monotonic() - first < WINDOW_S - 1:
            assert failed_lines(gw.log_records()) == [(url, 1, 0)]
        # The fetcher's own certificate goes through, and is no failure.
        good = FakeFetcher(gw.jobs_port, certs.client_context("fetcher"))
        try:
            good.request(READY)
            assert wait_for(lambda: gw.metric("vts_fetchers_idle") == 1, 5)
            assert gw.metric(METRIC) == 3
        finally:
            good.close()
    finally:
        assert gw.stop() == 0
    # At stop the gateway tells what no line told: two more failures, one of them without a line of its own.
    assert failed_lines(gw.log_records()) == [(url, 1, 0), (url, 3, 1)]


@pytest.mark.parametrize("server_leaf", ["fetcher", "rogue-gateway"],
                         ids=["client_role_certificate", "certificate_of_another_ca"])
def test_fetcher_refuses_a_dispatcher_without_a_server_certificate_of_its_ca_and_logs_it(tmp_path, certs, upstream,
                                                                                           server_leaf):
    """A fake dispatcher (Python TLS, asking for the fetcher's certificate) presents server_leaf's certificate to the
    real fetcher for exactly two connections."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs.path(server_leaf + ".crt"), certs.path(server_leaf + ".key"))
    ctx.load_verify_locations(certs.path("ca.crt"))
    ctx.verify_mode = ssl.CERT_REQUIRED
    port = free_port()
    url = "tls+tcp://127.0.0.1:%d" % port
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen(4)
    lsock.settimeout(10)
    fetcher, log = start_fetcher(tmp_path, upstream, url, certs.env("fetcher"))
    try:
        first = time.monotonic()
        for n in (1, 2):
            conn, _ = lsock.accept()
            with pytest.raises(ssl.SSLError):
                ctx.wrap_socket(conn, server_side=True)
            conn.close()
            if n == 1:
                assert wait_for(lambda: records(log, FAILED), 5), log.read_text()
        # No third connection: the port is closed (a refused connection is no handshake).
        lsock.close()
        if time.monotonic() - first < WINDOW_S - 1:
            assert failed_lines(records(log, FAILED)) == [(url, 1, 0)]
        # The second is told as the first line's 10 s end, with no later failure to bring it.
        assert wait_for(lambda: len(records(log, FAILED)) == 2, WINDOW_S + 5), log.read_text()
    finally:
        lsock.close()
        stop(fetcher)
    # Nothing was left to tell at stop.
    assert failed_lines(records(log, FAILED)) == [(url, 1, 0), (url, 2, 0)]
    assert records(log, "fetcher ready") == []
    assert upstream.stats()["requests"] == {}


@pytest.mark.parametrize("name,leaf", [("vts-gateway", "fetcher"), ("vts-gateway", "roleless"),
                                       ("vts-gateway", "both-roles"), ("vts-fetcher", "gateway"),
                                       ("vts-fetcher", "roleless"), ("vts-fetcher", "both-roles")])
def test_an_end_holding_a_certificate_not_of_its_role_does_not_start(tmp_path, certs, name, leaf):
    """The TLS library refuses a peer of the wrong role only when its certificate names a role: each end makes sure its
    own names its role and only that one, so no certificate in use can stand for the other end."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VTS_")}
    env.update({"VTS_JOBS_URL": "tls+tcp://127.0.0.1:%d" % free_port(), "VTS_KEYS_FILE": str(tmp_path / "keys.db"),
                "ASAN_OPTIONS": "detect_leaks=0"})
    env.update(certs.env(leaf))
    r = subprocess.run([str(BUILD_DIR / "bin" / name)], env=env, capture_output=True, text=True, timeout=30)
    whose, mine, other = ("gateway's", "serverAuth", "clientAuth") if name == "vts-gateway" else \
        ("fetcher's", "clientAuth", "serverAuth")
    assert (r.returncode, r.stderr) == (2, "%s: VTS_JOBS_TLS_CERT: %s is not a %s certificate: its extendedKeyUsage "
                                           "must name %s and not %s (make it as docs/REFERENCE.md shows)\n"
                                        % (name, certs.path(leaf + ".crt"), whose, mine, other))


def gateway_final_count(gw, url):
    """Stops the gateway: its last line (at stop at the latest) says its final count, at least what /metrics said
    before (a failure in the last second is read at stop). Returns (final count, lines); 0 when it logged none."""
    published = gw.metric(METRIC)
    assert gw.stop() == 0
    lines = failed_lines(gw.log_records())
    final = lines[-1][1] if lines else 0
    assert all(line[0] == url for line in lines) and final >= published, (lines, published)
    return final, len(lines)


def test_fetcher_trusting_another_ca_logs_its_failed_handshakes_and_is_never_ready(tmp_path, certs, upstream):
    """The fetcher trusts another CA (and holds a certificate of it): it refuses the gateway's certificate at every
    dial, logs and counts that, and never says it is ready. The gateway sees the fetcher's refusal as an alert, counted,
    or, as a rule, as a reset before its own check (what it has not yet read is left unread), which nng counts with
    every other reset and is no failed handshake here: its count is at most the fetcher's."""
    upstream.reset()
    gw = tls_gateway(tmp_path, certs)
    url = gw.env["VTS_JOBS_URL"]
    fetcher, log = start_fetcher(tmp_path, upstream, url, certs.env("rogue", ca="rogue-ca"))
    try:
        assert wait_for(lambda: records(log, FAILED), 10), log.read_text()
        assert gw.metric("vts_fetchers_connected") == 0
    finally:
        stop(fetcher)
    fetcher_lines = failed_lines(records(log, FAILED))
    assert first_line_tells_all_so_far(fetcher_lines, url), fetcher_lines
    fetcher_total = fetcher_lines[-1][1]
    assert records(log, "fetcher ready") == []
    assert upstream.stats()["requests"] == {}
    counted, nlines = gateway_final_count(gw, url)
    assert counted <= fetcher_total, (counted, fetcher_total)
    print("\nfetcher trusting another CA: the fetcher counted %d failed handshakes in %d lines, the gateway %d in %d"
          % (fetcher_total, len(fetcher_lines), counted, nlines))


def test_fetcher_holding_a_certificate_of_another_ca_is_counted_by_the_gateway(tmp_path, certs, upstream):
    """The fetcher trusts the gateway's CA but holds a certificate of another: the gateway refuses it at every dial,
    logs and counts that; the fetcher never says it is ready."""
    upstream.reset()
    gw = tls_gateway(tmp_path, certs)
    url = gw.env["VTS_JOBS_URL"]
    fetcher, log = start_fetcher(tmp_path, upstream, url, certs.env("rogue", ca="ca"))
    try:
        assert wait_for(lambda: gw.metric(METRIC) >= 2, 10), gw.log_text()
        assert first_line_tells_all_so_far(failed_lines(gw.log_records()), url), gw.log_text()
        assert gw.metric("vts_fetchers_connected") == 0
    finally:
        stop(fetcher)
    assert records(log, "fetcher ready") == []
    assert upstream.stats()["requests"] == {}
    counted, nlines = gateway_final_count(gw, url)
    assert counted >= 2
    print("\nfetcher holding a certificate of another CA: the gateway counted %d failed handshakes in %d lines"
          % (counted, nlines))


def test_right_roles_serve_transcripts_with_no_failure(tmp_path, certs):
    stack = Stack(tmp_path, gateway_env=certs.env("gateway"), fetcher_env=certs.env("fetcher"), fetchers=1,
                  jobs_scheme="tls+tcp")
    try:
        r = stack.get("capJson3xx1")
        assert r.status == 200, r
        assert stack.gateway.metric(METRIC) == 0
        assert failed_lines(stack.gateway.log_records()) == []
        # The fetcher said it was ready once, when its link to the gateway was made.
        ready = records(Path(stack.fetchers.log_path), "fetcher ready")
        assert [x["url"] for x in ready] == [stack.gateway.env["VTS_JOBS_URL"]], stack.fetchers.log_text()
        assert failed_lines(records(Path(stack.fetchers.log_path), FAILED)) == []
    finally:
        stack.close()
