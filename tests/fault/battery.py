#!/usr/bin/env python3
"""The fault battery (issue 7): the real binaries on 127.0.0.1 under slowloris, malformed input, kill -9 of
fetchers and workers, a stopped and frozen Redis, and a hostile platform. Bounded in count and time; every process
it starts is stopped at the end; prints a table of figures and exits non-zero when a check fails.

    tests/fault/battery.py [--only NAME[,NAME]] [--workdir DIR]      (tests/fault/run.sh picks the build)

Checks: slowloris, malformed, kill9, redis, upstream (see each function's docstring for what is asserted).
"""

import argparse
import asyncio
import multiprocessing
import os
import random
import resource
import selectors
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import procs  # noqa: E402
from procs import KEY, Conn, Gateway, Redis, Stack, get  # noqa: E402
from vtsproc import wait_for  # noqa: E402

MP = multiprocessing.get_context("fork")

# Slowloris.
SLOW_CONNS = 1000
SLOW_HEADER_TIMEOUT_MS = 2000
SLOW_DRIP_INTERVAL_S = 1.0        # one byte per connection this often, never a complete head
SLOW_CLOSE_SLACK_S = 1.0          # 408 and close expected within [timeout, timeout + slack] of the first byte
SLOW_ROUNDS = 3                   # rounds of (probe without, probe under attack): drift in the machine cancels
SLOW_SETTLE_S = 0.3
PROBE_SECONDS = 2.5
PROBE_CONNS = 32
# The probe is paced, not flat out: on a 2-core machine shared with other work, a saturating probe measures the
# machine's other tenants (baselines varied 17k-34k req/s between runs). Paced well inside the capacity of the
# sanitizer build, a server that slow connections starve misses the pace, and its latency shows it.
PROBE_RATE = 5000
PROBE_MIN_RATIO = 0.90

# Malformed requests.
MALFORMED_COUNT = 10000
MALFORMED_CONCURRENCY = 64
MALFORMED_TIMEOUT_S = 5.0
MALFORMED_HEADER_TIMEOUT_MS = 1500

# kill -9 under load.
KILL_LOAD_SECONDS = 8.0
KILL_CLIENTS = 24
KILL_FETCHERS = 4
KILL_JOB_TIMEOUT_MS = 5000
KILL_FETCHER_KILLS = 4
KILL_WORKER_KILLS = 2
KILL_HIT_IDS = 8                  # ids asked again and again (cache hits); the rest are fresh (misses)
KILL_ANSWER_SLACK_S = 1.0         # beyond the job deadline (the dispatcher's result grace)
# A connection the kernel queued on a killed worker's own SO_REUSEPORT socket (opened from just before the kill
# until that socket is gone, never answered) is reset: it was a connection on the killed worker, never accepted.
# (Linux can hand such connections to the surviving workers instead: sysctl net.ipv4.tcp_migrate_req=1.)
KILL_QUEUE_WINDOW_S = 0.05

# Redis.
REDIS_PHASE_SECONDS = 2.0
REDIS_CLIENTS = 4
REDIS_OUTAGE_SETTLE_S = 0.3       # an outage is seen within this (50 ms command timeout, connection in flight)
REDIS_RECOVERY_S = 1.5            # back to Redis within this of its return (reconnect backoff <= 500 ms)
REDIS_MAX_LATENCY_S = 1.0

# Hostile platform.
UPSTREAM_JOB_TIMEOUT_MS = 4000
UPSTREAM_SCENARIOS = ["dripPlayer1", "resetPlayer", "huge100mb01", "huge100mbCL"]
UPSTREAM_REPEATS = 2
UPSTREAM_RSS_GROWTH_MB = 32       # a fetcher's peak RSS over its idle RSS: the 8 MiB body cap, its buffer's last
                                  # doubling step, and the parse


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 65536)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


class Result:
    def __init__(self, name):
        self.name = name
        self.requests = 0
        self.outcomes = {}
        self.figures = []
        self.failures = []
        self.seconds = 0.0

    def count(self, outcome, n=1):
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + n
        self.requests += n

    def figure(self, text):
        self.figures.append(text)

    def expect(self, cond, what):
        if not cond:
            self.failures.append(what)
        return cond

    @property
    def passed(self):
        return not self.failures


def status_of(data):
    """Status code of the first response in data, or None."""
    if not data.startswith(b"HTTP/1.1 ") or len(data) < 12:
        return None
    try:
        return int(data[9:12])
    except ValueError:
        return None


def statuses_of(data):
    """The statuses of the responses in data, in order; "garbled" ends the tuple when the rest does not parse."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        try:
            status, headers = procs.parse_head(head)
            n = int(headers["content-length"])
        except (ValueError, IndexError, KeyError):
            return tuple(out) + ("garbled",)
        if not sep or len(rest) < n:
            return tuple(out) + ("garbled",)
        out.append(status)
        data = rest[n:]
    return tuple(out)


def metric(text, name, **labels):
    """The value of the sample of name with exactly these labels in Prometheus text, 0 when absent."""
    want = name + ("{" + ",".join('%s="%s"' % kv for kv in labels.items()) + "}" if labels else "")
    for line in text.splitlines():
        if line.startswith(want + " "):
            return float(line.split()[-1])
    return 0.0


def restarts_logged(gw):
    """Children of this gateway's master that exited (before its own stop)."""
    return sum(1 for r in gw.log_records() if r.get("msg") == "child exited" and r.get("pid") == gw.proc.pid)


# ---------------------------------------------------------------------------------------------------------------
# a. slowloris

def probe_main(port, seconds, conns, rate, out):
    """GET /health paced at `rate` requests per second over `conns` keep-alive connections (one request outstanding
    on each; a late answer delays that connection's next request, it never bursts to catch up), for `seconds`,
    from one thread. Puts (responses, errors, max_latency_s, p99_s)."""
    req = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    sel = selectors.DefaultSelector()
    n, err, lat = 0, 0, []
    interval = conns / rate
    start = time.monotonic()
    states = []

    def open_conn(i):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        st = {"sock": s, "buf": b"", "t0": None, "next": start + interval * i / conns}
        sel.register(s, selectors.EVENT_READ, st)
        return st

    for i in range(conns):
        states.append(open_conn(i))
    deadline = start + seconds
    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        wake = deadline
        for i, st in enumerate(states):
            if st["t0"] is None:
                if st["next"] <= now:
                    st["t0"] = now
                    st["sock"].send(req)
                else:
                    wake = min(wake, st["next"])
        for key, _ in sel.select(timeout=max(0.0, wake - time.monotonic())):
            st = key.data
            try:
                chunk = st["sock"].recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                chunk = b""
            if not chunk:
                err += 1
                sel.unregister(st["sock"])
                st["sock"].close()
                i = states.index(st)
                states[i] = open_conn(i)
                continue
            st["buf"] += chunk
            head_end = st["buf"].find(b"\r\n\r\n")
            if head_end < 0:
                continue
            status, headers = procs.parse_head(st["buf"][:head_end])
            total = head_end + 4 + int(headers.get("content-length", "0"))
            if len(st["buf"]) < total:
                continue
            st["buf"] = st["buf"][total:]
            done = time.monotonic()
            lat.append(done - st["t0"])
            if status == 200:
                n += 1
            else:
                err += 1
            st["next"] = max(st["next"] + interval, done)
            st["t0"] = None
    for st in states:
        st["sock"].close()
    lat.sort()
    lat = lat or [0.0]
    out.put((n, err, lat[-1], lat[max(0, int(len(lat) * 0.99) - 1)]))


def run_probe(port, seconds):
    """(responses, errors, max latency, p99 latency, the probe's CPU seconds, the machine's idle CPU seconds)."""
    q = MP.Queue()
    idle0 = system_idle_s()
    p = MP.Process(target=probe_main, args=(port, seconds, PROBE_CONNS, PROBE_RATE, q))
    p.start()
    res = q.get(timeout=seconds + 30)
    cpu = procs.cpu_seconds(p.pid)
    idle = system_idle_s() - idle0
    p.join(10)
    return res + (cpu, idle)


def system_idle_s():
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[4]) / os.sysconf("SC_CLK_TCK")


def slowloris_main(port, target, interval, mode, open_count, out):
    """While mode is 1, keeps `target` connections dripping one byte of a never-ending head every `interval`
    seconds, replacing each one that ends (408 and close); mode 0 closes them all (client side) and idles; mode 2
    ends. Puts [(status, seconds from first byte to the server's close)] of the connections the server ended."""
    raise_fd_limit()
    head = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 1000000
    sel = selectors.DefaultSelector()
    conns = {}
    results = []
    ramp_from = None
    ramp_s = SLOW_HEADER_TIMEOUT_MS / 1000

    def open_one():
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        st = {"sock": s, "sent": 0, "first": None, "next": time.monotonic(), "data": b""}
        conns[s.fileno()] = st
        sel.register(s, selectors.EVENT_READ, st)

    def drop(st):
        sel.unregister(st["sock"])
        del conns[st["sock"].fileno()]
        st["sock"].close()

    while mode.value != 2:
        if mode.value == 0:
            for st in list(conns.values()):
                drop(st)
            open_count.value = 0
            ramp_from = None
            time.sleep(0.02)  # poll interval: the attack's mode again
            continue
        now = time.monotonic()
        if ramp_from is None:
            ramp_from = now
        # The first `target` open over one header timeout, so that their 408s come spread out as well.
        allowed = target if now - ramp_from >= ramp_s else int(target * (now - ramp_from) / ramp_s)
        while len(conns) < allowed:
            open_one()
        for st in list(conns.values()):
            if st["next"] <= now:
                try:
                    if st["sock"].send(head[st["sent"]:st["sent"] + 1]) == 1:
                        if st["first"] is None:
                            st["first"] = now
                        st["sent"] += 1
                except OSError:
                    pass  # not connected yet, or closed by the server: the read side reports the close
                st["next"] = now + interval
        for key, _ in sel.select(timeout=0.02):
            st = key.data
            try:
                chunk = st["sock"].recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                chunk = b""
            if chunk:
                st["data"] += chunk
                continue
            drop(st)
            results.append((status_of(st["data"]), time.monotonic() - st["first"] if st["first"] else None))
        open_count.value = len(conns)
    for st in list(conns.values()):
        drop(st)
    out.put(results)


def check_slowloris(work):
    """1,000 slowloris connections held open (each replaced when the server ends it) against 2 workers, in
    SLOW_ROUNDS rounds alternating with rounds without them: the probe's /health throughput under attack stays
    >= 90% of its throughput without; every slow connection the server ends got 408, VTS_HEADER_TIMEOUT_MS after
    its first byte; no probe error; workers unchanged."""
    res = Result("a. slowloris")
    gw = Gateway(work / "slowloris", env={"VTS_HEADER_TIMEOUT_MS": SLOW_HEADER_TIMEOUT_MS}, workers=2).start()
    attacker = None
    mode = MP.Value("i", 0)
    try:
        workers = gw.worker_pids()
        open_count, q = MP.Value("i", 0), MP.Queue()
        attacker = MP.Process(target=slowloris_main,
                              args=(gw.port, SLOW_CONNS, SLOW_DRIP_INTERVAL_S, mode, open_count, q))
        attacker.start()
        base, under, held = [], [], []
        cpu = {"base": [0.0, 0.0], "under": [0.0, 0.0]}  # workers, attacker

        def cpu_now():
            return sum(procs.cpu_seconds(p) for p in workers), procs.cpu_seconds(attacker.pid)

        def probe(kind):
            c0 = cpu_now()
            r = run_probe(gw.port, PROBE_SECONDS)
            c1 = cpu_now()
            cpu[kind][0] += c1[0] - c0[0]
            cpu[kind][1] += c1[1] - c0[1]
            return r

        for _ in range(SLOW_ROUNDS):
            time.sleep(SLOW_SETTLE_S)  # the wait is the test: the gateway at rest between two rounds
            base.append(probe("base"))
            mode.value = 1
            # The attack ramps up over one header timeout; measure once the first of its 408s came.
            deadline = time.monotonic() + 10
            while open_count.value < SLOW_CONNS and time.monotonic() < deadline:
                time.sleep(0.02)  # poll interval: the attack's connections again, within 10 s
            time.sleep(SLOW_SETTLE_S)  # the wait is the test: the gateway under a settled attack
            samples = []
            stop = threading.Event()

            def sample():
                while not stop.is_set():
                    # The workers' own gauge: cheap, where /proc/net/tcp would walk thousands of TIME_WAITs.
                    samples.append(metric(gw.metrics(), "vts_http_connections_open"))
                    time.sleep(0.25)  # the wait is the test: one sample of the gauge every 250 ms

            sampler = threading.Thread(target=sample)
            sampler.start()
            under.append(probe("under"))
            stop.set()
            sampler.join()
            held += samples
            mode.value = 0
        mode.value = 2
        results = q.get(timeout=30)
        attacker.join(10)

        b_n, u_n = sum(r[0] for r in base), sum(r[0] for r in under)
        ratio = u_n / b_n if b_n else 0
        errors = sum(r[1] for r in base + under)
        res.count("probe 200", b_n + u_n)
        res.count("probe errors", errors)
        statuses = {}
        for st, _ in results:
            statuses[st] = statuses.get(st, 0) + 1
        for st, n in sorted(statuses.items(), key=lambda kv: str(kv[0])):
            res.count("slow %s" % (st if st is not None else "closed, no answer"), n)
        durs = [d for st, d in results if d is not None]
        # libuv timers count from the loop's cached time, up to a millisecond before the byte was read.
        lo, hi = SLOW_HEADER_TIMEOUT_MS / 1000 - 0.005, SLOW_HEADER_TIMEOUT_MS / 1000 + SLOW_CLOSE_SLACK_S
        off = [(st, d) for st, d in results if st != 408 or d is None or not lo <= d <= hi]
        secs = PROBE_SECONDS * SLOW_ROUNDS
        res.figure("probe /health %.0f req/s without vs %.0f req/s under attack: %.1f%% (rounds: %s vs %s)"
                   % (b_n / secs, u_n / secs, ratio * 100, "/".join(str(r[0]) for r in base),
                      "/".join(str(r[0]) for r in under)))
        res.figure("probe max latency %.1f ms without, %.1f ms under attack (p99 %.1f vs %.1f ms)"
                   % (max(r[2] for r in base) * 1000, max(r[2] for r in under) * 1000,
                      max(r[3] for r in base) * 1000, max(r[3] for r in under) * 1000))
        res.figure("CPU, %% of one core: workers %.0f%% without, %.0f%% under attack; attacker %.0f%%; probe %.0f%% "
                   "without, %.0f%% under attack; machine idle %.0f%% without, %.0f%% under attack"
                   % (cpu["base"][0] / secs * 100, cpu["under"][0] / secs * 100, cpu["under"][1] / secs * 100,
                      sum(r[4] for r in base) / secs * 100, sum(r[4] for r in under) / secs * 100,
                      sum(r[5] for r in base) / secs * 100, sum(r[5] for r in under) / secs * 100))
        res.figure("connections open at the server under attack: min %d, max %d (the probe's %d and the gauge's "
                   "own scrape included)"
                   % (min(held or [0]), max(held or [0]), PROBE_CONNS))
        if durs:
            res.figure("first byte -> 408 and close: min %.2f s, median %.2f s, max %.2f s"
                       % (min(durs), statistics.median(durs), max(durs)))
        res.expect(ratio >= PROBE_MIN_RATIO, "probe throughput %.1f%% of baseline (< %d%%)"
                   % (ratio * 100, PROBE_MIN_RATIO * 100))
        res.expect(errors == 0, "%d probe errors" % errors)
        res.expect(min(held or [0]) >= SLOW_CONNS * 0.9, "only %d connections held at the server" % min(held or [0]))
        res.expect(len(results) >= SLOW_CONNS * SLOW_ROUNDS * 0.9, "only %d slow connections ended by the server"
                   % len(results))
        res.expect(not off, "%d slow connections not answered 408 and closed within [%.1f, %.1f] s: e.g. %r"
                   % (len(off), lo, hi, off[:3]))
        res.expect(sorted(gw.worker_pids()) == sorted(workers) and restarts_logged(gw) == 0, "a worker restarted")
    finally:
        mode.value = 2
        if attacker is not None:
            attacker.join(5)
            if attacker.is_alive():
                attacker.kill()
        gw.stop()
    return res


# ---------------------------------------------------------------------------------------------------------------
# b. malformed requests

def malformed_cases(n, seed):
    """n generated requests: (class, bytes, expected, close_write). expected: the statuses the server may answer
    with, each a status (one answer, then the close), a tuple (several pipelined answers), or None (closed without
    an answer). close_write: the client shuts down its write side after the bytes."""
    rnd = random.Random(seed)
    key = "x-api-key: %s\r\n" % KEY
    tr = "/v1/video/transcript"

    def rid():
        return "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(11))

    def random_bytes():
        # A first byte that no method token holds (nor a CR or LF, skipped before a request line): llhttp refuses at
        # once, and it is not an unknown method (a token, 501) but a malformed request line.
        tchars = b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\r\n"
        first = bytes([rnd.choice([c for c in range(256) if c not in tchars])])
        return "random bytes", first + os.urandom(rnd.randint(0, 400)) + b"\r\n\r\n", {400}, True

    def truncated_line():
        full = "GET %s?video_id=%s HTTP/1.1\r\n" % (tr, rid())
        cut = full[:rnd.randint(1, len(full) - 1)]
        return "truncated request line, EOF", cut.encode(), {None}, True

    def truncated_timeout():
        full = "GET /health HTTP/1.1\r\nHost: a\r\n"
        return "truncated head, no EOF", full[:rnd.randint(1, len(full))].encode(), {408}, False

    def bad_method():
        m = rnd.choice(["FOO", "GETT", "G3T", "get", "BREW", "\x7fGET"])
        # A token is a method the server does not know (501); a byte no method may hold is a bad request line.
        return ("unknown method", ("%s /health HTTP/1.1\r\nHost: a\r\n\r\n" % m).encode(),
                {400} if m.startswith("\x7f") else {501}, True)

    def wrong_method():
        m = rnd.choice(["POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE"])
        p = rnd.choice(["/health", "/openapi.json", tr])
        return "other method", ("%s %s HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n" % (m, p)).encode(), {405}, True

    def huge_headers():
        if rnd.random() < 0.5:
            h = "X-Big: " + "b" * rnd.randint(16 * 1024 + 1, 40 * 1024) + "\r\n"
        else:
            h = "".join("X-H%d: v\r\n" % i for i in range(rnd.randint(65, 200)))
        return "huge headers", ("GET /health HTTP/1.1\r\n" + h + "\r\n").encode(), {431}, True

    def bare_cr():
        where = rnd.choice(["X-A: a\rb\r\n", "X-A\r: b\r\n", "X-A: b\r\r\n"])
        return "bare CR", ("GET /health HTTP/1.1\r\n" + where + "\r\n").encode(), {400}, True

    def obs_fold():
        fold = rnd.choice([" ", "\t"]) + "folded"
        return "obs-fold", ("GET /health HTTP/1.1\r\nX-A: a\r\n%s\r\n\r\n" % fold).encode(), {400}, True

    def transfer_encoding():
        te = rnd.choice(["chunked", "gzip, chunked", "identity", "chunked\r\nTransfer-Encoding: chunked"])
        body = "0\r\n\r\n" if "chunked" in te else ""
        return ("Transfer-Encoding", ("GET /health HTTP/1.1\r\nTransfer-Encoding: %s\r\n\r\n%s" % (te, body)).encode(),
                {400}, True)

    def bad_content_length():
        cl = rnd.choice(["abc", "-1", "1 2", "0x10", "1.5", "", "99999999999999999999999"])
        return ("bad Content-Length", ("GET /health HTTP/1.1\r\nContent-Length: %s\r\n\r\n" % cl).encode(), {400},
                True)

    def dup_content_length():
        return ("duplicate Content-Length",
                b"GET /health HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 3\r\n\r\nabc", {400}, True)

    def body_on_get():
        n = rnd.randint(1, 5000)
        return ("body on GET", ("GET /health HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n" % n).encode() + b"z" * n,
                {413}, True)

    def nul_bytes():
        where = rnd.choice(["url", "name", "value"])
        if where == "url":
            data = b"GET /hea\x00lth HTTP/1.1\r\n\r\n"
        elif where == "name":
            data = b"GET /health HTTP/1.1\r\nX-\x00A: b\r\n\r\n"
        else:
            data = b"GET /health HTTP/1.1\r\nX-A: \x00b\r\n\r\n"
        return "NUL byte", data, {400}, True

    def bad_escape_query():
        v = rnd.choice(["%zz", "%4", "%", "%G0abcdefghi", "abc%0", "%%%%"])
        return ("invalid percent escape (query)",
                ("GET %s?video_id=%s HTTP/1.1\r\nHost: a\r\n%s\r\n" % (tr, v, key)).encode(), {400}, True)

    def bad_escape_path():
        return "invalid percent escape (path)", b"GET /he%zzalth HTTP/1.1\r\nHost: a\r\n\r\n", {404}, True

    def overlong_url():
        n = rnd.randint(8 * 1024 + 1, 20 * 1024)
        return "overlong URL", ("GET /" + "u" * n + " HTTP/1.1\r\n\r\n").encode(), {414}, True

    def unknown_path():
        return "unknown path", ("GET /%s HTTP/1.1\r\nHost: a\r\n\r\n" % rid()).encode(), {404}, True

    def bad_version():
        v = rnd.choice(["HTTP/2.0", "HTTP/1.2", "HTTX/1.1", "HTTP/11", "HTTP/1.1 x"])
        return "bad version", ("GET /health %s\r\n\r\n" % v).encode(), {400}, True

    def pipelined_then_bad():
        bad = rnd.choice([b"X-A: a\rb\r\n", b"Transfer-Encoding: chunked\r\n", b"Content-Length: 1\r\n"])
        expect = 413 if bad.startswith(b"Content-Length") else 400
        return ("good, then bad, pipelined",
                b"GET /health HTTP/1.1\r\nHost: a\r\n\r\nGET /health HTTP/1.1\r\nHost: a\r\n" + bad +
                b"\r\nGET /health HTTP/1.1\r\nHost: a\r\n\r\n",
                {(200, expect)}, True)

    def pipelined_many():
        k = rnd.randint(2, 40)
        return "pipelined, %s" % ("over 32" if k > 32 else "up to 32"), b"GET /nope HTTP/1.1\r\nHost: a\r\n\r\n" * k, \
            {(404,) * k}, True

    gens = [random_bytes, truncated_line, bad_method, wrong_method, huge_headers, bare_cr, obs_fold,
            transfer_encoding, bad_content_length, dup_content_length, body_on_get, nul_bytes, bad_escape_query,
            bad_escape_path, overlong_url, unknown_path, bad_version, pipelined_then_bad, pipelined_many]
    cases = [truncated_timeout() for _ in range(50)]
    while len(cases) < n:
        cases.append(gens[len(cases) % len(gens)]())
    rnd.shuffle(cases)
    norm = [(cls, data, {e if isinstance(e, tuple) else (() if e is None else (e,)) for e in expected}, cw)
            for cls, data, expected, cw in cases]
    return norm


async def malformed_one(port, case, sem):
    cls, data, expected, close_write = case
    async with sem:
        t0 = time.monotonic()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError as e:
            return cls, ("connect error %s" % type(e).__name__,), expected, 0.0
        try:
            try:
                writer.write(data)
                if close_write:
                    writer.write_eof()
                await writer.drain()
            except OSError:
                pass  # the server answered and closed before taking everything: its answer is still read
            got = b""
            try:
                got = await asyncio.wait_for(reader.read(-1), MALFORMED_TIMEOUT_S)
            except asyncio.TimeoutError:
                return cls, ("no close within %.0f s" % MALFORMED_TIMEOUT_S,), expected, time.monotonic() - t0
            except OSError:
                pass
            return cls, statuses_of(got), expected, time.monotonic() - t0
        finally:
            writer.close()


async def malformed_all(port, cases):
    sem = asyncio.Semaphore(MALFORMED_CONCURRENCY)
    return await asyncio.gather(*(malformed_one(port, c, sem) for c in cases))


def check_malformed(work):
    """10,000 generated malformed requests: each answered with the status of its class or closed, 0 crashes (worker
    pids unchanged, no restart logged), and /health still served at the end."""
    res = Result("b. malformed")
    gw = Gateway(work / "malformed", env={"VTS_HEADER_TIMEOUT_MS": MALFORMED_HEADER_TIMEOUT_MS}, workers=2).start()
    try:
        workers = gw.worker_pids()
        cases = malformed_cases(MALFORMED_COUNT, seed=int(os.environ.get("VTS_FAULT_SEED", "7")))
        t0 = time.monotonic()
        outcomes = asyncio.run(malformed_all(gw.port, cases))
        elapsed = time.monotonic() - t0
        wrong = {}
        for cls, got, expected, dur in outcomes:
            res.count("/".join(sorted(set(map(str, got)))) if got else "closed")
            if got not in expected:
                wrong.setdefault(cls, []).append(got)
        res.figure("%d requests in %.1f s (%d classes, %d at a time)" % (
            len(cases), elapsed, len({c[0] for c in cases}), MALFORMED_CONCURRENCY))
        per_class = {}
        for cls, got, expected, dur in outcomes:
            label = "/".join(map(str, dict.fromkeys(got))) if got else "closed"
            per_class.setdefault(cls, {}).setdefault(label, 0)
            per_class[cls][label] += 1
        res.figure("per class (answers in order; pipelined ones checked one by one): " + "; ".join(
            "%s %s" % (cls, ", ".join("%s x%d" % kv for kv in sorted(outs.items())))
            for cls, outs in sorted(per_class.items())))
        slow = max([d for cls, got, exp, d in outcomes if got == (408,)] or [0])
        res.figure("408 for heads left incomplete: at most %.2f s (VTS_HEADER_TIMEOUT_MS %d)"
                   % (slow, MALFORMED_HEADER_TIMEOUT_MS))
        for cls, got in sorted(wrong.items()):
            res.expect(False, "%s: %d unexpected outcomes %r" % (cls, len(got), sorted(set(map(str, got)))))
        health = get(gw.port, "/health")
        res.expect(health.status == 200, "/health after the battery: %d" % health.status)
        res.expect(sorted(gw.worker_pids()) == sorted(workers), "worker pids changed: %r -> %r"
                   % (workers, gw.worker_pids()))
        res.expect(restarts_logged(gw) == 0, "the master logged a child exit")
        res.figure("worker pids unchanged %s; restarts logged: %d" % (sorted(workers), restarts_logged(gw)))
    finally:
        gw.stop()
    return res


# ---------------------------------------------------------------------------------------------------------------
# c. kill -9 of fetchers and workers under load

def kill_load_client(stack, idx, stop_at, hit_ids, counter, records):
    """One client: keep-alive transcript requests until stop_at, half for ids already cached, half for fresh ids;
    reconnects after a connection error. Appends dicts to records."""
    rnd = random.Random(idx)
    port = stack.gateway.port
    timeout = KILL_JOB_TIMEOUT_MS / 1000 + KILL_ANSWER_SLACK_S + 2
    conn, conn_opened, conn_answered = None, 0.0, 0
    n = 0
    while time.monotonic() < stop_at:
        if rnd.random() < 0.5:
            video = rnd.choice(hit_ids)
        else:
            with counter["lock"]:
                counter["n"] += 1
                video = "benchK%05d" % counter["n"]
        n += 1
        rec = {"client": idx, "video": video, "rid": "kill-%d-%d" % (idx, n)}
        try:
            if conn is None:
                conn_opened, conn_answered = time.monotonic(), 0
                conn = Conn(port, timeout)
            rec.update(port=conn.local_port, opened=conn_opened, answered_before=conn_answered)
            rec["t0"] = time.monotonic()
            r = stack.transcript(video, conn, {"X-Request-Id": rec["rid"]})
            rec["t1"] = time.monotonic()
            rec["status"] = r.status
            conn_answered += 1
        except socket.timeout:
            rec["t1"] = time.monotonic()
            rec["status"] = "hang"
            conn.close()
            conn = None
        except OSError as e:
            rec["t1"] = time.monotonic()
            rec["status"] = "connection error"
            rec["error"] = type(e).__name__
            rec.setdefault("port", conn.local_port if conn is not None else 0)
            rec.setdefault("opened", conn_opened)
            rec.setdefault("answered_before", conn_answered)
            if conn is not None:
                conn.close()
            conn = None
        records.append(rec)
    # The last answer on each connection comes with Connection: close: the server must then close it.
    closed = None
    if conn is not None:
        try:
            r = stack.transcript(hit_ids[0], conn, {"Connection": "close"})
            closed = r.status == 200 and conn.closed_within(1.0)
        except OSError:
            closed = False
        conn.close()
    records.append({"client": idx, "final_close": closed})


def check_kill9(work):
    """Transcript load over many keep-alive connections (cache hits and misses) while fetchers and workers are
    killed with SIGKILL: every request is answered within the job deadline (plus the dispatcher's grace), with 200,
    or 500 for a job its fetcher held when killed (the dispatcher logged fetcher_lost for that video), or a
    connection error for a connection held by a killed worker (its client port was among the killed worker's
    sockets); the server closes a connection after an answer with Connection: close, and holds none once the
    clients are gone; fetcher pool, workers and dispatcher are whole at the end and serve a transcript."""
    res = Result("c. kill -9")
    stack = Stack(work / "kill9", gateway_env={"VTS_JOB_TIMEOUT_MS": KILL_JOB_TIMEOUT_MS}, fetchers=KILL_FETCHERS)
    try:
        gw = stack.gateway
        dispatcher = gw.dispatcher_pids()
        hit_ids = ["benchHit%03d" % i for i in range(KILL_HIT_IDS)]
        for v in hit_ids:
            res.expect(stack.transcript(v).status == 200, "warm-up of %s failed" % v)
        records, counter = [], {"n": 0, "lock": threading.Lock()}
        start = time.monotonic()
        stop_at = start + KILL_LOAD_SECONDS
        clients = [threading.Thread(target=kill_load_client, args=(stack, i, stop_at, hit_ids, counter, records))
                   for i in range(KILL_CLIENTS)]
        for t in clients:
            t.start()
        # Kills at random moments of the middle of the load, fetchers and workers interleaved.
        rnd = random.Random(int(os.environ.get("VTS_FAULT_SEED", "7")))
        plan = sorted([(rnd.uniform(0.1, 0.85) * KILL_LOAD_SECONDS, "fetcher") for _ in range(KILL_FETCHER_KILLS)] +
                      [(rnd.uniform(0.1, 0.85) * KILL_LOAD_SECONDS, "worker") for _ in range(KILL_WORKER_KILLS)])
        kills = []
        for at, what in plan:
            time.sleep(max(0.0, start + at - time.monotonic()))  # the wait is the test: the kill plan's moment
            if what == "fetcher":
                pids = stack.fetchers.child_pids()
                if not pids:
                    continue
                pid = rnd.choice(pids)
                os.kill(pid, signal.SIGKILL)
                kills.append({"what": what, "pid": pid, "t": time.monotonic()})
            else:
                # Never the last worker listening: a replacement must be serving before its sibling is killed.
                ready_by = time.monotonic() + 2
                while (sum(1 for s in procs.tcp_sockets(gw.port) if s[0] == "LISTEN") < 2 and
                       time.monotonic() < ready_by):
                    time.sleep(0.01)  # poll interval: the listening sockets again, within 2 s
                pids = gw.worker_pids()
                if len(pids) < 2:
                    continue
                # The worker holding the most client connections: the kill that costs the most.
                held = {p: procs.client_ports_of(p, gw.port) for p in pids}
                pid = max(pids, key=lambda p: (len(held[p]), rnd.random()))
                ports = held[pid]
                t = time.monotonic()
                os.kill(pid, signal.SIGKILL)
                # Its listening socket lives until the kernel has torn the process down (the sanitizer's large
                # mappings first): connections queued on it meanwhile are reset, never accepted.
                while not procs.process_gone(pid) and time.monotonic() - t < 2:
                    time.sleep(0.001)  # poll interval: the process again, within 2 s
                kills.append({"what": what, "pid": pid, "t": t, "gone": time.monotonic(), "ports": ports})
        for t in clients:
            t.join(KILL_LOAD_SECONDS + 30)
        res.expect(not any(t.is_alive() for t in clients), "a client never finished")

        finals = [r["final_close"] for r in records if "final_close" in r]
        records = [r for r in records if "final_close" not in r]
        fetcher_lost = {}
        for r in gw.log_records():
            if r.get("msg") == "job finished" and r.get("status") == 500:
                fetcher_lost.setdefault(r.get("video_id"), set()).add(r.get("detail"))
        killed_ports = set()
        for k in kills:
            killed_ports |= k.get("ports", set())
        limit = KILL_JOB_TIMEOUT_MS / 1000 + KILL_ANSWER_SLACK_S
        bad = []
        max_lat = 0.0
        for r in records:
            st = r["status"]
            lat = r["t1"] - r["t0"] if "t0" in r else 0.0
            max_lat = max(max_lat, lat)
            if st == 200:
                res.count("200")
            elif st == 500:
                if fetcher_lost.get(r["video"]) == {"fetcher_lost"}:
                    res.count("500 (job on a killed fetcher)")
                else:
                    res.count("500 (unexplained)")
                    bad.append(("500 not from a killed fetcher", r["video"], sorted(fetcher_lost.get(r["video"], []))))
            elif st == "connection error":
                if r["port"] in killed_ports:
                    res.count("conn error (killed worker)")
                elif r["answered_before"] == 0 and any(
                        k["t"] - KILL_QUEUE_WINDOW_S <= r["opened"] <= k["gone"] + KILL_QUEUE_WINDOW_S
                        for k in kills if k["what"] == "worker"):
                    res.count("conn error (killed worker's accept queue)")
                else:
                    res.count("conn error (other)")
                    bad.append(("connection error not on a killed worker", r))
            else:
                res.count(str(st))
                bad.append(("unexpected outcome", r))
            if lat > limit:
                bad.append(("answered after %.2f s" % lat, r["video"]))
        res.figure("%d requests from %d keep-alive clients in %.0f s; killed: %s"
                   % (len(records), KILL_CLIENTS, KILL_LOAD_SECONDS,
                      ", ".join("%s %d at %.1f s%s" % (k["what"], k["pid"], k["t"] - start,
                                                         " (%d connections)" % len(k["ports"]) if "ports" in k else "")
                                for k in kills)))
        res.figure("max latency %.3f s (limit %.1f s: job deadline + %.1f s)" % (max_lat, limit, KILL_ANSWER_SLACK_S))
        res.figure("a killed worker's listening socket lived %s ms after SIGKILL" % "/".join(
            "%.0f" % ((k["gone"] - k["t"]) * 1000) for k in kills if k["what"] == "worker"))
        for b in bad[:5]:
            res.expect(False, "%r" % (b,))
        if len(bad) > 5:
            res.expect(False, "... and %d more" % (len(bad) - 5))
        res.expect(all(finals), "%d of %d connections not closed after an answer with Connection: close"
                   % (sum(1 for f in finals if not f), len(finals)))

        # Nothing left open at the server once the clients are gone (TIME_WAIT is the kernel's, not ours).
        deadline = time.monotonic() + 3.5
        while True:
            held = [s for s in procs.tcp_sockets(gw.port) if s[0] in ("ESTABLISHED", "CLOSE_WAIT")]
            if not held or time.monotonic() > deadline:
                break
            time.sleep(0.1)  # poll interval: the server's connections again, within 3.5 s
        res.expect(not held, "%d server connections still open after the clients closed" % len(held))

        whole = stack.fetchers and len(stack.fetchers.child_pids()) == KILL_FETCHERS
        deadline = time.monotonic() + 3
        while not (whole and len(gw.worker_pids()) == 2) and time.monotonic() < deadline:
            time.sleep(0.05)  # poll interval: the pools again, within 3 s
            whole = len(stack.fetchers.child_pids()) == KILL_FETCHERS
        res.expect(whole, "fetcher pool has %d of %d" % (len(stack.fetchers.child_pids()), KILL_FETCHERS))
        res.expect(len(gw.worker_pids()) == 2, "workers: %d of 2" % len(gw.worker_pids()))
        res.expect(gw.dispatcher_pids() == dispatcher, "the dispatcher changed")
        after = [stack.transcript("benchAfter%d" % i).status for i in range(4)]
        res.expect(after == [200] * 4, "transcripts after the kills: %r" % after)
        res.figure("after: %d fetchers, %d workers, dispatcher unchanged, fresh transcripts %r; "
                   "restarts logged by the master: %d" % (len(stack.fetchers.child_pids()), len(gw.worker_pids()),
                                                          after, restarts_logged(gw)))
    finally:
        stack.close()
    return res


# ---------------------------------------------------------------------------------------------------------------
# d. Redis stopped and frozen

def redis_phases(stack, redis, hit_ids):
    """Transcript load (cached ids) from a few keep-alive clients while Redis goes through: up, frozen (SIGSTOP),
    thawed (SIGCONT), stopped, started again. Returns (records, phase start times, fallback counts per phase)."""
    stop = threading.Event()
    records = []

    def client(i):
        rnd = random.Random(i)
        conn = None
        while not stop.is_set():
            rec = {"t0": time.monotonic()}
            try:
                if conn is None:
                    conn = Conn(stack.gateway.port, 5)
                r = stack.transcript(rnd.choice(hit_ids), conn)
                rec.update(status=r.status, retry_after=r.headers.get("retry-after"),
                           code=r.json().get("error", {}).get("code") if r.status != 200 else None)
            except socket.timeout:
                rec["status"] = "hang"
            except OSError as e:
                rec["status"] = "connection error " + type(e).__name__
            rec["t1"] = time.monotonic()
            if rec["status"] not in (200, 503, 429) and conn is not None:
                conn.close()
                conn = None
            records.append(rec)
            time.sleep(0.002)  # the wait is the test: the client's pace
        if conn is not None:
            conn.close()

    def fallbacks():
        return metric(stack.gateway.metrics(), "vts_ratelimit_fallbacks_total")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(REDIS_CLIENTS)]
    for t in threads:
        t.start()
    starts, fb = {}, {}
    actions = [("up", None), ("frozen", lambda: redis.signal(signal.SIGSTOP)),
               ("thawed", lambda: redis.signal(signal.SIGCONT)), ("stopped", redis.stop),
               ("restarted", redis.start)]
    try:
        for name, action in actions:
            f0 = fallbacks()
            # A phase begins when its action begins: stopping or starting Redis takes a moment of its own.
            starts[name] = time.monotonic()
            if action is not None:
                action()
            time.sleep(REDIS_PHASE_SECONDS)  # the wait is the test: the load runs through the phase
            fb[name] = fallbacks() - f0
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    return records, starts, fb


def check_redis(work):
    """With VTS_REDIS_URL on a real redis-server: frozen (SIGSTOP), thawed, stopped, started again under load.
    Fail-open: every request 200 (the memory limiter decides; fallbacks counted), never a 5xx. Fail-closed: 503
    rate_limit_unavailable with Retry-After while Redis cannot answer, 200 otherwise and again within
    REDIS_RECOVERY_S of its return. Never a hang: every answer within REDIS_MAX_LATENCY_S."""
    res = Result("d. redis")
    for mode in ("fail-open", "fail-closed"):
        d = work / ("redis-" + mode)
        d.mkdir(parents=True, exist_ok=True)
        redis = Redis(d).start()
        stack = None
        try:
            stack = Stack(d, fetchers=1, gateway_env={
                "VTS_REDIS_URL": redis.url, "VTS_RATE_LIMIT_FAIL_CLOSED": "true" if mode == "fail-closed" else "false"})
            hit_ids = ["benchRds%03d" % i for i in range(4)]
            for v in hit_ids:
                res.expect(stack.transcript(v).status == 200, "%s: warm-up of %s failed" % (mode, v))
            records, starts, fb = redis_phases(stack, redis, hit_ids)
            max_lat = max(r["t1"] - r["t0"] for r in records)
            order = sorted(starts, key=starts.get)
            by_phase = {}
            bad = []
            for r in records:
                st = r["status"]
                # The phase a request began in; one still in flight when the next phase began may end either way.
                began = [p for p in order if starts[p] <= r["t0"]]
                ph = began[-1] if began else order[0]
                nxt = order[order.index(ph) + 1] if ph != order[-1] else None
                straddles = nxt is not None and r["t1"] >= starts[nxt]
                by_phase.setdefault(ph, {}).setdefault(st, 0)
                by_phase[ph][st] += 1
                res.count("%s %s" % (mode, st))
                since = r["t0"] - starts[ph]
                outage = ph in ("frozen", "stopped")
                settling = since < (REDIS_OUTAGE_SETTLE_S if outage else REDIS_RECOVERY_S)
                if mode == "fail-open":
                    ok = st == 200
                elif st == 503:
                    ok = (outage or settling or straddles) and r["code"] == "rate_limit_unavailable" and \
                        r["retry_after"] is not None and int(r["retry_after"]) >= 1
                else:
                    ok = st == 200 and (not outage or settling)
                if not ok:
                    bad.append((ph, round(since, 3), st, r.get("code"), r.get("retry_after")))
            res.figure("%s: max latency %.1f ms; per phase: %s" % (mode, max_lat * 1000, "; ".join(
                "%s %s (fallbacks %d)" % (ph, ", ".join("%s: %d" % kv for kv in sorted(by_phase.get(ph, {}).items(),
                                                                                        key=str)), fb.get(ph, 0))
                for ph in ("up", "frozen", "thawed", "stopped", "restarted"))))
            res.expect(max_lat < REDIS_MAX_LATENCY_S, "%s: an answer took %.2f s" % (mode, max_lat))
            for ph in ("up", "frozen", "thawed", "stopped", "restarted"):
                res.expect(sum(by_phase.get(ph, {}).values()) >= 20, "%s: too few requests while %s" % (mode, ph))
            if mode == "fail-open":
                res.expect(fb["frozen"] > 0 and fb["stopped"] > 0, "%s: no fallback counted during the outages"
                           % mode)
            res.expect(not bad, "%s: %d answers not as expected, e.g. %r" % (mode, len(bad), bad[:4]))
        finally:
            if stack is not None:
                stack.close()
            if redis.proc.poll() is None:
                redis.signal(signal.SIGCONT)
            redis.stop()
    return res


# ---------------------------------------------------------------------------------------------------------------
# f. gateways sharing one Redis

SHARE_FREEZE_S = 10.0
SHARE_LEFT = 50                   # the key's units left when Redis freezes
SHARE_CLIENTS = 4                 # per gateway
SHARE_TAKEOVER_LIMIT_S = 5.0      # a dead claimant's video is fetched by a waiter within this of the kill
SHARE_KEY = "vts_fault_key_fifty"


def wait_log(gw, msg, timeout, **fields):
    return wait_for(lambda: any(r.get("msg") == msg and all(r.get(k) == v for k, v in fields.items())
                                for r in gw.log_records()), timeout, 0.05)


def check_gateways(work):
    """Two gateways on one real redis-server and one fetcher pool serving both. Redis frozen (SIGSTOP) for 10 s while
    clients hammer both gateways with a key that has 50 units left: each falls back to its half, so at most 50 are
    served (25 each), the rest 429. Then a gateway killed -9 while it holds the claim of a video the platform takes
    3 s to answer: the other gateway, waiting on that claim, fetches the video itself within 5 s of the kill and
    answers 200, never a 5xx."""
    res = Result("f. gateways")
    d = work / "gateways"
    d.mkdir(parents=True, exist_ok=True)
    redis = Redis(d).start()
    upstream = procs.harness.FakeUpstream()
    keys = [("fault", KEY, "active", 1000000, 60, 1000000000), ("fifty", SHARE_KEY, "active", 1000000, 3600,
                                                                   SHARE_LEFT)]
    gws = []
    fetchers = None
    try:
        for i in range(2):
            gws.append(Gateway(d / ("gw%d" % i), env={"VTS_REDIS_URL": redis.url}, workers=1, keys=keys).start())
        urls = ",".join("tcp://127.0.0.1:%d" % gw.jobs_port for gw in gws)
        fetchers = procs.Fetchers(d, gws[0].jobs_port, upstream.url, 2, {"VTS_JOBS_URL": urls})
        video = "capJson3xx1"

        def both_served():
            try:
                return all(get(gw.port, "/v1/video/transcript?video_id=" + video, {"x-api-key": KEY}).status == 200
                           for gw in gws)
            except OSError:
                return False

        wait_for(both_served, 20, 0.1)
        for gw in gws:
            res.expect(wait_log(gw, "gateways sharing the rate limits", 10, gateways=2),
                       "a gateway never counted two gateways")
        # Phase 1: the freeze.
        served, other = [], []
        lock = threading.Lock()
        redis.signal(signal.SIGSTOP)
        end = time.monotonic() + SHARE_FREEZE_S
        try:
            def client(gw):
                while time.monotonic() < end:
                    try:
                        r = get(gw.port, "/v1/video/transcript?video_id=" + video, {"x-api-key": SHARE_KEY})
                        st = r.status
                    except OSError as e:
                        st = "connection error " + type(e).__name__
                    with lock:
                        (served if st == 200 else other).append(st)

            threads = [threading.Thread(target=client, args=(gw,)) for gw in gws for _ in range(SHARE_CLIENTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(SHARE_FREEZE_S + 30)
        finally:
            redis.signal(signal.SIGCONT)
        res.count("freeze 200", len(served))
        for st in set(other):
            res.count("freeze %s" % st, other.count(st))
        res.figure("%.0f s Redis freeze, 2 gateways, a key with %d left: %d served, %d refused (%s)" % (
            SHARE_FREEZE_S, SHARE_LEFT, len(served), len(other), ", ".join(sorted(str(x) for x in set(other)))))
        res.expect(len(served) <= SHARE_LEFT, "%d served through the freeze, %d were left" % (len(served), SHARE_LEFT))
        res.expect(len(served) == SHARE_LEFT // 2 * 2, "each gateway's half: %d served" % len(served))
        res.expect(set(other) <= {429}, "during the freeze: %r" % sorted(set(map(str, other))))
        # Phase 2: the dead claimant.
        lazy = "lazyFault01"
        claimant, waiter = gws
        out = {}

        def ask(gw, name):
            try:
                r = get(gw.port, "/v1/video/transcript?video_id=" + lazy, {"x-api-key": KEY}, timeout=60)
                out[name] = (r.status, time.monotonic())
            except OSError as e:
                out[name] = ("connection error " + type(e).__name__, time.monotonic())

        t1 = threading.Thread(target=ask, args=(claimant, "claimant"))
        t1.start()
        won = wait_log(claimant, "job assigned", 10, video_id=lazy)
        res.expect(won, "the claimant never ran its job")
        t2 = threading.Thread(target=ask, args=(waiter, "waiter"))
        t2.start()
        waited = wait_for(lambda: "\nvts_dispatch_claims_waited_total 1\n" in waiter.metrics(), 10)
        res.expect(waited, "the waiter never waited on the claim")
        procs._kill_group(claimant.proc)
        killed = time.monotonic()
        taken = wait_log(waiter, "claim taken over: its holder went away without a result", 15, video_id=lazy)
        took = time.monotonic() - killed
        t2.join(60)
        t1.join(10)
        st, at = out.get("waiter", ("no answer", float("inf")))
        res.count("takeover %s" % st)
        res.figure("a gateway killed -9 holding a claim: the other took the video over after %.2f s, answered %s "
                   "%.2f s after the kill" % (took, st, at - killed))
        res.expect(taken and took < SHARE_TAKEOVER_LIMIT_S, "takeover after %.2f s" % took)
        res.expect(st == 200, "the waiter answered %s" % st)
    finally:
        if fetchers is not None:
            fetchers.stop()
        for gw in gws:
            gw.stop()
        upstream.close()
        if redis.proc.poll() is None:
            redis.signal(signal.SIGCONT)
        redis.stop()
    return res


# ---------------------------------------------------------------------------------------------------------------
# e. a hostile platform

def check_upstream(work):
    """The platform drips its answer (a byte per 100 ms), resets the connection mid-body, or sends 100 MB (chunked
    without a length, and with a Content-Length): each request gets 502 upstream_transcript_failed within the job
    deadline (plus the dispatcher's grace); the 100 MB are cut at the 8 MiB cap (the fake could send only a small
    part of them); each fetcher's peak RSS stays within UPSTREAM_RSS_GROWTH_MB of its idle RSS; no fetcher dies and
    the pool serves a transcript afterwards."""
    res = Result("e. upstream")
    # ASan keeps freed blocks in a quarantine (256 MB by default); a small one lets RSS show live memory.
    fenv = {"ASAN_OPTIONS": "detect_leaks=0:quarantine_size_mb=8"}
    stack = Stack(work / "upstream", gateway_env={"VTS_JOB_TIMEOUT_MS": UPSTREAM_JOB_TIMEOUT_MS},
                  fetcher_env=fenv, fetchers=len(UPSTREAM_SCENARIOS))
    try:
        pids = stack.fetchers.child_pids()
        idle = {p: procs.rss_kb(p) for p in pids}
        limit = UPSTREAM_JOB_TIMEOUT_MS / 1000 + KILL_ANSWER_SLACK_S
        lat = {v: [] for v in UPSTREAM_SCENARIOS}
        for _ in range(UPSTREAM_REPEATS):
            out = {}

            def ask(video):
                t0 = time.monotonic()
                try:
                    r = stack.transcript(video)
                    out[video] = (r.status, r.json().get("error", {}).get("code"), time.monotonic() - t0)
                except OSError as e:
                    out[video] = ("connection error " + type(e).__name__, None, time.monotonic() - t0)

            threads = [threading.Thread(target=ask, args=(v,)) for v in UPSTREAM_SCENARIOS]
            for t in threads:
                t.start()
            for t in threads:
                t.join(limit + 30)
            for v in UPSTREAM_SCENARIOS:
                st, code, dur = out.get(v, ("no answer", None, float("inf")))
                res.count("%s %s" % (v, st))
                lat[v].append(dur)
                res.expect(st == 502 and code == "upstream_transcript_failed", "%s: %s %s" % (v, st, code))
                res.expect(dur <= limit, "%s: answered after %.2f s (limit %.1f s)" % (v, dur, limit))
        peak = {p: procs.rss_kb(p, "VmHWM") for p in pids}
        sent = stack.upstream.stats().get("sent", {})
        res.figure("latency: %s (job deadline %.1f s)" % (", ".join(
            "%s max %.2f s" % (v, max(lat[v])) for v in UPSTREAM_SCENARIOS), UPSTREAM_JOB_TIMEOUT_MS / 1000))
        res.figure("bytes the platform got out: %s (of %d)" % (", ".join(
            "%s %s" % (v, "/".join("%.1f MB" % (b / 1e6) if b >= 100000 else "%d B" % b for b in sent.get(v, [])))
            for v in UPSTREAM_SCENARIOS),
            100 * 1000 * 1000))
        growth = max((peak[p] - idle[p]) / 1024 for p in pids)
        res.figure("fetcher RSS: idle %s MB, peak %s MB; largest growth %.1f MB (limit %d MB)" % (
            "/".join("%.0f" % (idle[p] / 1024) for p in pids), "/".join("%.0f" % (peak[p] / 1024) for p in pids),
            growth, UPSTREAM_RSS_GROWTH_MB))
        res.expect(growth <= UPSTREAM_RSS_GROWTH_MB, "a fetcher grew %.1f MB" % growth)
        for v in ("huge100mb01", "huge100mbCL"):
            got = sent.get(v, [])
            res.expect(got and max(got) < 32 * 1000 * 1000, "%s: the fetcher took %r bytes" % (v, got))
        res.expect(stack.fetchers.child_pids() == pids, "fetchers changed: %r -> %r"
                   % (pids, stack.fetchers.child_pids()))
        after = stack.transcript("benchUpAftr")
        res.expect(after.status == 200, "a transcript after the hostile platform: %d" % after.status)
        res.figure("after: fetchers %s unchanged, a fresh transcript %d" % (pids, after.status))
    finally:
        stack.close()
    return res


# ---------------------------------------------------------------------------------------------------------------

CHECKS = {
    "slowloris": check_slowloris,
    "malformed": check_malformed,
    "kill9": check_kill9,
    "redis": check_redis,
    "upstream": check_upstream,
    "gateways": check_gateways,
}


def print_table(results):
    print()
    print("%-16s %9s  %-60s %s" % ("check", "requests", "outcomes", "result"))
    print("-" * 100)
    for r in results:
        outs = ", ".join("%s: %d" % kv for kv in sorted(r.outcomes.items()))
        print("%-16s %9d  %-60s %s (%.0f s)" % (r.name, r.requests, outs, "PASS" if r.passed else "FAIL", r.seconds))
        for f in r.figures:
            print("%16s            %s" % ("", f))
        for f in r.failures:
            print("%16s            FAILED: %s" % ("", f))
    print("-" * 100)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated checks: " + ",".join(CHECKS))
    ap.add_argument("--workdir", help="keep logs here (default: a temporary directory, removed when all pass)")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(CHECKS)
    for n in names:
        if n not in CHECKS:
            ap.error("unknown check %r" % n)
    raise_fd_limit()
    tmp = None
    if args.workdir:
        work = Path(args.workdir)
        work.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="vts-fault-")
        work = Path(tmp.name)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    results = []
    t_all = time.monotonic()
    try:
        for n in names:
            print("=== %s" % n, flush=True)
            t0 = time.monotonic()
            try:
                r = CHECKS[n](work)
            except Exception:
                r = Result(n)
                r.expect(False, "raised: " + traceback.format_exc().strip().splitlines()[-1])
                traceback.print_exc()
            finally:
                procs.kill_all()
            r.seconds = time.monotonic() - t0
            results.append(r)
            print("=== %s: %s (%.1f s)" % (n, "PASS" if r.passed else "FAIL", r.seconds), flush=True)
    finally:
        procs.kill_all()
    print_table(results)
    ok = all(r.passed for r in results)
    where = work
    if tmp is not None and not ok:
        # Keep the logs of a failed run for reading.
        where = Path(tempfile.mkdtemp(prefix="vts-fault-failed-")) / "run"
        os.rename(work, where)
        tmp._finalizer.detach()
    print("fault battery: %s in %.0f s; logs %s" % ("PASS" if ok else "FAIL", time.monotonic() - t_all,
                                                    "in %s" % where if (args.workdir or not ok) else "removed"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
