"""Helpers for the fetcher's integration tests: the fake platform as a subprocess, the fetcher binary, and a fake
dispatcher that speaks nng's REP protocol over TCP (the SP wire format), so the job loop is tested with no C peer.

SP over TCP (as nng 1.5 implements it): each side sends 8 bytes 00 'S' 'P' 00 <u16 protocol> 00 00 (REQ0 = 0x30,
REP0 = 0x31), then messages as <u64 big-endian length><payload>. A REQ payload starts with a 4-byte request id whose
high bit is set; the REP answer carries the same 4 bytes first.
"""

import json
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

PROTO_VERSION = b"\x0b"
PROTO_JOB, PROTO_RESULT, PROTO_READY, PROTO_RESULT_LAST, PROTO_DECLINE = 1, 2, 3, 4, 5
PROTO_OK, PROTO_NOT_AVAILABLE, PROTO_UPSTREAM_FAILED, PROTO_INTERNAL, PROTO_NO_CAPTIONS = 1, 2, 3, 4, 5
KIND_CAPTIONS, KIND_SPEECH, KIND_TRACKS, KIND_METADATA = 1, 2, 3, 4
INCLUDE_CHAPTERS = 1
KIND_WEBHOOK, KIND_BROWSE = 5, 6
BROWSE_PLAYLIST, BROWSE_CHANNEL, BROWSE_CONTINUATION = 1, 2, 3
# enum proto_reason, by value; enum proto_attempt_result.
REASONS = ["none", "no_captions", "not_playable", "http_429", "recaptcha", "bot_check", "http_5xx", "http_other",
           "timeout", "consent", "po_token", "malformed", "network", "refused", "speech", "internal",
           "egress_budget", "rationed", "client_outdated", "wrong_video", "translation_throttled", "age_restricted",
           "members_only", "private", "removed", "live_not_archived", "geo_restricted", "playlist_missing",
           "playlist_private", "playlist_unviewable", "channel_missing", "channel_removed"]
ATTEMPT_OK, ATTEMPT_BLOCKED, ATTEMPT_FAILED = 0, 1, 2


def fetcher_binary():
    build = os.environ.get("VTS_BUILD_DIR", os.path.join(ROOT, "build"))
    path = os.path.join(build, "bin", "vts-fetcher")
    if not os.access(path, os.X_OK):
        raise RuntimeError("vts-fetcher not built at %s (set VTS_BUILD_DIR)" % path)
    return path


def start_fake(script, extra_args, what):
    """One of this folder's fake servers (script) on a free port of 127.0.0.1: (its process, its port)."""
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, script), "--port", "0", *extra_args],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError("%s did not start: %r" % (what, line))
    return proc, int(line.split()[1])


class FakeUpstream:
    """fake_upstream.py on a free port of 127.0.0.1."""

    def __init__(self, extra_args=()):
        self.proc, self.port = start_fake("fake_upstream.py", extra_args, "fake upstream")
        self.url = "http://127.0.0.1:%d" % self.port

    def stats(self):
        with urllib.request.urlopen(self.url + "/__stats", timeout=5) as r:
            return json.load(r)

    def reset(self):
        self.post("/__reset")

    def post(self, path):
        """POST to one of the fake's own paths (/__reset, /__browse_hold, ...)."""
        req = urllib.request.Request(self.url + path, data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            r.read()

    def close(self):
        self.proc.kill()
        self.proc.wait(timeout=5)
        self.proc.stdout.close()


class FakePotProvider:
    """fake_pot_provider.py on a free port of 127.0.0.1 (a PO-token provider speaking the bgutil HTTP protocol)."""

    def __init__(self, extra_args=()):
        self.proc, self.port = start_fake("fake_pot_provider.py", extra_args, "fake PO-token provider")
        self.url = "http://127.0.0.1:%d" % self.port

    def _post(self, path, obj):
        req = urllib.request.Request(self.url + path, data=json.dumps(obj).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.load(r)

    def stats(self):
        with urllib.request.urlopen(self.url + "/__stats", timeout=5) as r:
            return json.load(r)

    def set_mode(self, mode=None, ttl_s=None):
        knobs = {k: v for k, v in (("mode", mode), ("ttl_s", ttl_s)) if v is not None}
        return self._post("/__mode", knobs)

    def reset(self):
        self._post("/__reset", {})

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=5)
        self.proc.stdout.close()


class EgressProxy:
    """egress_proxy.py on a free port of 127.0.0.1, its outgoing connections from source; with more sources, a
    rotating proxy (each connection from the next source in turn)."""

    def __init__(self, source, *more_sources):
        args = [sys.executable, os.path.join(HERE, "egress_proxy.py"), "--port", "0"]
        for s in (source,) + more_sources:
            args += ["--source", s]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("READY "):
            self.proc.kill()
            raise RuntimeError("egress proxy did not start: %r" % line)
        self.port = int(line.split()[1])
        self.source = source

    def url(self, credentials=""):
        return "http://%s127.0.0.1:%d" % (credentials + "@" if credentials else "", self.port)

    def connections(self):
        """How many client connections it accepted (its GET /__count)."""
        with urllib.request.urlopen("http://127.0.0.1:%d/__count" % self.port, timeout=5) as r:
            return int(r.read())

    def close(self):
        self.proc.kill()
        self.proc.wait(timeout=5)
        self.proc.stdout.close()


# The standard proxy variables (either case): a fetcher honours them when VTS_UPSTREAM_PROXY is unset, so a test's
# fetcher gets only those the test sets.
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


def fetcher_env(upstream_url, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VTS_") and k.lower() not in PROXY_VARS}
    env["VTS_UPSTREAM_URL"] = upstream_url
    env["VTS_LOG_LEVEL"] = "info"
    # The fake platform rations nothing: unpaced unless the test sets a budget (tests/integration/test_egress_pacing.py).
    env["VTS_EGRESS_RATE"] = "0"
    env["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "detect_leaks=1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def free_port():
    """The one port picker of the tests (tests/integration/vtsproc.py): never a port this process was given before."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    from vtsproc import free_port as pick  # noqa: E402  (standard library only)
    return pick()


# proto.h messages.

def _str(s):
    b = s.encode()
    return struct.pack(">H", len(b)) + b


def encode_job(job_id, video_id, lang="", deadline_ms=30000, request_id="req-test", kind=KIND_CAPTIONS,
               translate="", declines=0, player=b"", hook_url=b"", hook_id="", hook_timestamp=0, hook_signature="",
               hook_body=b"", browse_what=0, browse=b"", include=0):
    """A JOB; the hook_* fields are a webhook delivery's (kind KIND_WEBHOOK, video_id ""), browse_what and browse a
    browse job's (kind KIND_BROWSE, video_id ""); include the bits of what a metadata job adds (1: its chapters)."""
    return (b"VT" + PROTO_VERSION + bytes([PROTO_JOB]) + struct.pack(">QBI", job_id, kind, deadline_ms) +
            _str(video_id) + _str(lang) + _str(translate) + _str(request_id) + bytes([declines, include]) +
            struct.pack(">I", len(player)) + player + struct.pack(">I", len(hook_url)) + hook_url + _str(hook_id) +
            struct.pack(">Q", hook_timestamp) + _str(hook_signature) + struct.pack(">I", len(hook_body)) + hook_body +
            bytes([browse_what]) + struct.pack(">I", len(browse)) + browse + struct.pack(">I", 0) + bytes([0]))


def _strings(msg, off, count):
    """count u16-length strings of msg from off: (the strings, the offset after them)."""
    fields = []
    for _ in range(count):
        (n,) = struct.unpack(">H", msg[off:off + 2])
        fields.append(msg[off + 2:off + 2 + n].decode())
        off += 2 + n
    return fields, off


def decode_result(msg, last=False):
    """A RESULT, or with last=True the RESULT_LAST of a stopping fetcher (the same fields under type 4)."""
    want = PROTO_RESULT_LAST if last else PROTO_RESULT
    assert msg[:4] == b"VT" + PROTO_VERSION + bytes([want]), "expected type %d, got %r" % (want, msg[:16])
    job_id, outcome, source, fetch_ms = struct.unpack(">QBBI", msg[4:18])
    fields, off = _strings(msg, 18, 2)
    reason, nattempts = msg[off], msg[off + 1]
    off += 2
    attempts = []
    for _ in range(nattempts):
        proxy, result = msg[off], msg[off + 1]
        (n,) = struct.unpack(">H", msg[off + 2:off + 4])
        attempts.append((proxy, result, msg[off + 4:off + 4 + n].decode()))
        off += 4 + n
    negress = msg[off]
    off += 1
    egress = {}
    for _ in range(negress):
        position, left, waits, declines = struct.unpack(">BIII", msg[off:off + 13])
        egress[position] = {"left": left, "waits": waits, "declines": declines}
        off += 13
    cache_ms, retry_after_s, pot_failures, sandbox, player_ttl_ms, player_len = struct.unpack(">IIBBII",
                                                                                               msg[off:off + 18])
    player = msg[off + 18:off + 18 + player_len]
    off += 18 + player_len
    notmod = msg[off]
    (etag,), off = _strings(msg, off + 1, 1)
    (body_len,) = struct.unpack(">I", msg[off:off + 4])
    body = msg[off + 4:]
    assert len(body) == body_len, "body length %d, header says %d" % (len(body), body_len)
    return {"job_id": job_id, "outcome": outcome, "source": source, "fetch_ms": fetch_ms, "lang": fields[0],
            "detail": fields[1], "reason": REASONS[reason], "attempts": attempts, "egress": egress, "cache_ms": cache_ms,
            "retry_after_s": retry_after_s, "pot_failures": pot_failures, "sandbox": sandbox,
            "player_ttl_ms": player_ttl_ms, "player": player, "notmod": notmod, "etag": etag, "body": body}


def encode_result(job_id, outcome, body=b"", source=1, lang="en", detail="ok", reason=0, fetch_ms=5,
                  retry_after_s=0):
    """A fetcher's RESULT without attempt records."""
    return (b"VT" + PROTO_VERSION + bytes([PROTO_RESULT]) + struct.pack(">QBBI", job_id, outcome, source, fetch_ms) +
            _str(lang) + _str(detail) + bytes([reason, 0, 0]) +
            struct.pack(">IIBBII", 0, retry_after_s, 0, 0, 0, 0) + bytes([0]) + _str("") + struct.pack(">I", len(body)) +
            body)


def decode_job(msg):
    """A JOB as a dict (job_id, kind, deadline_ms, video_id, lang, translate, request_id, declines, include, player)."""
    assert msg[:4] == b"VT" + PROTO_VERSION + bytes([PROTO_JOB]), "expected a job, got %r" % msg[:16]
    job_id, kind, deadline_ms = struct.unpack(">QBI", msg[4:17])
    fields, off = _strings(msg, 17, 4)
    declines, include = msg[off], msg[off + 1]
    off += 2
    (player_len,) = struct.unpack(">I", msg[off:off + 4])
    player = msg[off + 4:off + 4 + player_len]
    off += 4 + player_len
    (url_len,) = struct.unpack(">I", msg[off:off + 4])
    hook_url = msg[off + 4:off + 4 + url_len]
    (hook_id,), off = _strings(msg, off + 4 + url_len, 1)
    (hook_timestamp,) = struct.unpack(">Q", msg[off:off + 8])
    (hook_signature,), off = _strings(msg, off + 8, 1)
    (body_len,) = struct.unpack(">I", msg[off:off + 4])
    hook_body = msg[off + 4:off + 4 + body_len]
    off += 4 + body_len
    browse_what = msg[off]
    (browse_len,) = struct.unpack(">I", msg[off + 1:off + 5])
    browse = msg[off + 5:off + 5 + browse_len]
    off += 5 + browse_len
    (inm_len,) = struct.unpack(">I", msg[off:off + 4])
    off += 4 + inm_len
    refresh = msg[off]  # a worker's refresh of its cached answer: never sent to a fetcher
    assert refresh == 0 and off + 1 == len(msg), "a refresh, or trailing bytes after the job"
    return {"job_id": job_id, "kind": kind, "deadline_ms": deadline_ms, "video_id": fields[0], "lang": fields[1],
            "translate": fields[2], "request_id": fields[3], "declines": declines, "include": include, "player": player,
            "hook_url": hook_url, "hook_id": hook_id, "hook_timestamp": hook_timestamp,
            "hook_signature": hook_signature, "hook_body": hook_body, "browse_what": browse_what, "browse": browse}


READY = b"VT" + PROTO_VERSION + bytes([PROTO_READY])


DECLINE_BUSY, DECLINE_BUDGET = 0, 1


def encode_decline(job_id, why=DECLINE_BUSY):
    """A fetcher's DECLINE of job_id: busy, or (DECLINE_BUDGET) every egress budget spent."""
    return b"VT" + PROTO_VERSION + bytes([PROTO_DECLINE]) + struct.pack(">QB", job_id, why)

SP_REQ0_HELLO = b"\x00SP\x00\x00\x30\x00\x00"
SP_REP0_HELLO = b"\x00SP\x00\x00\x31\x00\x00"


class _SpStream:
    """Reading whole SP frames from a socket (plain or TLS)."""

    def _read(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise EOFError("connection closed")
            data += chunk
        return data

    def _recv_frame(self, timeout):
        self.sock.settimeout(timeout)
        (n,) = struct.unpack(">Q", self._read(8))
        return self._read(n)


class FakeFetcher(_SpStream):
    """A REQ0 peer dialing a dispatcher's jobs port on 127.0.0.1, answering jobs by hand. With ssl_context (a client
    context holding a certificate or not), it speaks tls+tcp: nng's SP frames inside TLS."""

    def __init__(self, port, ssl_context=None, timeout=10.0):
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        if ssl_context is not None:
            sock = ssl_context.wrap_socket(sock, server_hostname="127.0.0.1")
        self.sock = sock
        self.next_id = 0x80000000
        sock.sendall(SP_REQ0_HELLO)
        hello = self._read(8)
        assert hello == SP_REP0_HELLO, "peer is not an SP REP0 socket: %r" % hello

    def request(self, body):
        """Sends body as the next request (READY, RESULT)."""
        self.next_id += 1
        payload = struct.pack(">I", self.next_id) + body
        self.sock.sendall(struct.pack(">Q", len(payload)) + payload)

    def recv(self, timeout=10.0):
        """The body of the answer to the latest request."""
        payload = self._recv_frame(timeout)
        assert payload[:4] == struct.pack(">I", self.next_id), "answer to another request: %r" % payload[:4]
        return payload[4:]

    def close(self):
        self.sock.close()


class SpConn(_SpStream):
    """One accepted REQ peer."""

    def __init__(self, sock):
        self.sock = sock
        self.last_id = None
        sock.sendall(SP_REP0_HELLO)
        hello = self._read(8)
        assert hello == SP_REQ0_HELLO, "peer is not an SP REQ0 socket: %r" % hello

    def recv(self, timeout=10.0):
        """The body of the next request (its request id is kept for the reply)."""
        payload = self._recv_frame(timeout)
        assert len(payload) >= 4 and payload[0] & 0x80, "request without a request id"
        self.last_id = payload[:4]
        return payload[4:]

    def reply(self, body):
        payload = self.last_id + body
        self.sock.sendall(struct.pack(">Q", len(payload)) + payload)

    def closed_within(self, timeout):
        """True when the peer closes the connection within timeout seconds without sending anything."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (socket.timeout, TimeoutError):
            return False
        except OSError:
            return True

    def close(self):
        self.sock.close()


class FakeDispatcher:
    """A REP0 listener on 127.0.0.1 that hands out jobs by hand."""

    def __init__(self, port=None):
        self.port = port or free_port()
        self.url = "tcp://127.0.0.1:%d" % self.port
        self.lsock = None
        self.conns = []

    def listen(self):
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", self.port))
        self.lsock.listen(16)

    def accept(self, timeout=10.0):
        self.lsock.settimeout(timeout)
        sock, _ = self.lsock.accept()
        conn = SpConn(sock)
        self.conns.append(conn)
        return conn

    def close(self):
        for c in self.conns:
            c.close()
        if self.lsock is not None:
            self.lsock.close()


def wait_exit(proc, timeout):
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def stop_process(proc):
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=5)


def elapsed_since(t0):
    return time.monotonic() - t0
