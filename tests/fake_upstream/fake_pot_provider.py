#!/usr/bin/env python3
"""A fake PO-token provider speaking the bgutil HTTP protocol, for the fetcher's tests (standard library only).

    python3 fake_pot_provider.py --port N [--ttl-s S] [--user U --password P] [--query-key K] [--mode M]
    (0 picks a free port; prints "READY <port>" once listening)

The protocol, as the bgutil server 2.0.x answers it:
  POST /get_pot   a JSON object: content_binding (the video id for captions), and optionally proxy, bypass_cache,
                  source_address, disable_tls_verification, challenge, innertube_context. The deprecated members
                  visitor_data, data_sync_id and disable_innertube are answered 400 {"error": "... is deprecated ..."}.
                  200 {"poToken": "<base64url>", "contentBinding": "<as sent>", "expiresAt": "<ISO 8601, ms, Z>"};
                  a failure is 500 {"error": "<message>"}. (The real server mints visitor data when content_binding
                  is missing; this fake answers 400, which the fetcher never meets since it always sends one.)
  GET /ping       {"server_uptime": <s>, "version": "2.0.2"}

A token is bound to its content binding and expiry: base64url of 6 random bytes, the expiry (unix ms, 8 bytes) and
16 bytes of HMAC-SHA256 over them and the binding under SECRET. token_valid(token, binding) is how the fake platform
(fake_upstream.py) checks that a caption URL's pot was issued for its video by this provider and has not expired.
Every request mints a new token (the real server keeps one per binding: the fetcher's own cache is what tests count).

Knobs:
  --mode ok|refuse|hang|unbound   refuse: 500 {"error"}; hang: no answer until the client leaves (or
                          HANG_MAX_SECONDS); unbound: a 200 as in ok whose token the platform refuses (minted for
                          another binding, as a provider whose tokens the platform stopped honouring).
  --ttl-s S               the lifetime of issued tokens (default 21600, the real server's 6 hours).
  --user U --password P   requests without this HTTP Basic authorization get 401 {"error": "unauthorized"}.
  --query-key K           requests without ?key=K get 403 {"error": "forbidden"}.
  POST /__mode {"mode": M, "ttl_s": S}   changes mode and lifetime at run time.
  GET /__stats   {"requests": <POST /get_pot count, refused and hung ones included>, "bodies": [<each body parsed>],
                  "paths": [<each path with its query>], "authorized": [<each request's Basic credentials
                  matched, or null when none are required>], "content_types": [...],
                  "issued": [{"binding", "token", "expires_ms"}]}
  POST /__reset  clears the stats.
"""

import argparse
import base64
import hashlib
import hmac
import json
import os
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

import fakeserver

SECRET = b"vts-fake-pot-provider"
VERSION = "2.0.2"
HANG_MAX_SECONDS = 60
STARTED = time.monotonic()


def _mac(binding, nonce, expires_ms):
    return hmac.new(SECRET, nonce + struct.pack(">Q", expires_ms) + binding.encode(), hashlib.sha256).digest()[:16]


def mint(binding, ttl_s):
    """A token bound to binding, valid ttl_s seconds from now: (token, expiry in unix ms)."""
    expires_ms = int(time.time() * 1000) + int(ttl_s * 1000)
    nonce = os.urandom(6)
    raw = nonce + struct.pack(">Q", expires_ms) + _mac(binding, nonce, expires_ms)
    return base64.urlsafe_b64encode(raw).decode(), expires_ms


def token_valid(token, binding, now_ms=None):
    """Whether token was minted (by any fake provider of this file) for binding and has not expired."""
    try:
        raw = base64.urlsafe_b64decode(token.encode())
    except (ValueError, TypeError):
        return False
    if len(raw) != 30:
        return False
    nonce, (expires_ms,), mac = raw[:6], struct.unpack(">Q", raw[6:14]), raw[14:]
    if not hmac.compare_digest(mac, _mac(binding, nonce, expires_ms)):
        return False
    return expires_ms > (now_ms if now_ms is not None else int(time.time() * 1000))


def iso_ms(unix_ms):
    """As a JavaScript Date's toJSON writes it: 2026-11-26T23:55:47.123Z."""
    t = time.gmtime(unix_ms // 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", t) + ".%03dZ" % (unix_ms % 1000)


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.mode = "ok"
        self.ttl_s = 21600.0
        self.user = None
        self.password = None
        self.query_key = None
        self.reset()

    def reset(self):
        self.requests = 0
        self.bodies = []
        self.paths = []
        self.authorized = []
        self.content_types = []
        self.issued = []

    def snapshot(self):
        with self.lock:
            return {"requests": self.requests, "bodies": list(self.bodies), "paths": list(self.paths),
                    "authorized": list(self.authorized), "content_types": list(self.content_types),
                    "issued": list(self.issued), "mode": self.mode, "ttl_s": self.ttl_s}


STATE = State()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakePotProvider/1.0"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    def send_json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def basic_ok(self):
        if STATE.user is None:
            return None
        want = "Basic " + base64.b64encode(("%s:%s" % (STATE.user, STATE.password)).encode()).decode()
        return hmac.compare_digest(self.headers.get("Authorization", ""), want)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/ping":
            self.send_json(200, {"server_uptime": time.monotonic() - STARTED, "version": VERSION})
        elif url.path == "/__stats":
            self.send_json(200, STATE.snapshot())
        elif url.path == "/":
            body = b"This is a PO-token provider: POST /get_pot"
            self.send_response(400)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_json(404, {"error": "not found"})

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length) if length else b""
        if url.path == "/__reset":
            with STATE.lock:
                STATE.reset()
            self.send_json(200, {"ok": True})
            return
        if url.path == "/__mode":
            knobs = json.loads(raw or b"{}")
            with STATE.lock:
                STATE.mode = knobs.get("mode", STATE.mode)
                STATE.ttl_s = float(knobs.get("ttl_s", STATE.ttl_s))
            self.send_json(200, {"mode": STATE.mode, "ttl_s": STATE.ttl_s})
            return
        if url.path != "/get_pot":
            self.send_json(404, {"error": "not found"})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        authorized = self.basic_ok()
        with STATE.lock:
            STATE.requests += 1
            STATE.bodies.append(body)
            STATE.paths.append(self.path)
            STATE.authorized.append(authorized)
            STATE.content_types.append(self.headers.get("Content-Type", ""))
            mode, ttl_s = STATE.mode, STATE.ttl_s
        if authorized is False:
            self.send_json(401, {"error": "unauthorized"})
            return
        if STATE.query_key is not None and urllib.parse.parse_qs(url.query).get("key") != [STATE.query_key]:
            self.send_json(403, {"error": "forbidden"})
            return
        if not isinstance(body, dict):
            self.send_json(400, {"error": "the body is not a JSON object"})
            return
        for old in ("data_sync_id", "visitor_data"):
            if body.get(old):
                self.send_json(400, {"error": "%s is deprecated, use content_binding instead" % old})
                return
        if "disable_innertube" in body:
            self.send_json(400, {"error": "disable_innertube is deprecated because the /Create endpoint doesn't work "
                                          "anymore"})
            return
        binding = body.get("content_binding")
        if not isinstance(binding, str) or not binding:
            self.send_json(400, {"error": "content_binding is required"})
            return
        if mode == "hang":
            fakeserver.hang(self, HANG_MAX_SECONDS)
            return
        if mode == "refuse":
            self.send_json(500, {"error": "Failed to mint POT for %s: the fake refuses" % binding})
            return
        token, expires_ms = mint(binding + "-unbound" if mode == "unbound" else binding, ttl_s)
        with STATE.lock:
            STATE.issued.append({"binding": binding, "token": token, "expires_ms": expires_ms})
        self.send_json(200, {"poToken": token, "contentBinding": binding, "expiresAt": iso_ms(expires_ms)})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--mode", choices=("ok", "refuse", "hang", "unbound"), default="ok")
    parser.add_argument("--ttl-s", type=float, default=21600.0)
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument("--query-key")
    args = parser.parse_args()
    STATE.mode, STATE.ttl_s = args.mode, args.ttl_s
    STATE.user, STATE.password, STATE.query_key = args.user, args.password, args.query_key
    return fakeserver.serve(args.host, args.port, Handler)


if __name__ == "__main__":
    sys.exit(main())
