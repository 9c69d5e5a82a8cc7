"""The fetcher's sandbox (VTS_SANDBOX, fetcher/process/sandbox.c), proven by an attacker inside a running fetcher.

tests/attack/attack.c, preloaded into a vts-fetcher started as root, acts inside a job once the sandbox is up: it tries
to exec a shell, read the key file and the jobs link's private key, write outside any folder of the fetcher's,
connect to Redis's port and to a port nobody allowed, ptrace its parent and raise its limits, and writes each outcome
to a descriptor the test opened before the process started. The files it goes for are readable and the folder it
writes to writable by every user, so that what refuses is the sandbox, not the files' modes: the same attacks with
VTS_SANDBOX=off succeed. A refused system call kills the fetcher as a contained crash: the job's request is 500 at
once, the log names the call, and the pool starts a new fetcher.
"""
import ctypes
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from certs import Certs
from conftest import ACTIVE_KEY, BUILD_DIR, Gateway, write_keyfile
from vtsproc import free_port, log_records, metric, scrape, shared_dir, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402

UNLIMITED = [("sbx", ACTIVE_KEY, "active", 1000000, 60, 1000000000)]
ATTACK_LIB = BUILD_DIR / "lib" / "libvts_attack.so"
FETCH_FAILED = {"error": {"code": "transcript_fetch_failed", "message": "The transcript could not be fetched."}}
LAYERS = ("no_new_privs", "user", "seccomp", "landlock_fs", "landlock_net", "rlimits")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the drop to VTS_FETCHER_USER needs a fetcher started as root")


def sanitized():
    """True for a fetcher built with AddressSanitizer: its process-spawning calls fail with EPERM instead of killing."""
    out = subprocess.run(["ldd", harness.fetcher_binary()], capture_output=True, text=True).stdout
    return "libasan" in out


def landlock_abi():
    libc = ctypes.CDLL(None, use_errno=True)
    return max(0, libc.syscall(444, None, 0, 1))  # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)


def status_fields(pid):
    with open("/proc/%d/status" % pid) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


@pytest.fixture
def world(tmp_path):
    """A folder every user may enter and write, holding the key file, the link's certificates and keys (readable by
    every user too), so the modes never stand between the attacker and them."""
    d = str(shared_dir("vts-sandbox-", 0o777))
    certs = Certs(os.path.join(d, "tls"))
    os.chmod(certs.path(""), 0o755)
    keys = os.path.join(d, "keys.db")
    write_keyfile(keys, UNLIMITED)
    for path in (keys, certs.path("fetcher.key"), certs.path("gateway.key")):
        os.chmod(path, 0o644)
    yield {"dir": d, "certs": certs, "keys": keys}
    shutil.rmtree(d, ignore_errors=True)


class Service:
    """A gateway (tls+tcp jobs link) and a `vts-fetcher --workers 1` started as root with the attacker preloaded."""

    def __init__(self, tmp_path, world, upstream, attacks, sandbox="on", webhook_ports=None):
        certs = world["certs"]
        self.gateway = Gateway(tmp_path, env=dict(certs.env("gateway"), VTS_UPSTREAM_URL=upstream.url), workers=1)
        self.gateway.env["VTS_JOBS_URL"] = "tls+tcp://127.0.0.1:%d" % self.gateway.jobs_port
        self.gateway.keys_file = Path(world["keys"])
        self.gateway.env["VTS_KEYS_FILE"] = world["keys"]
        self.gateway.start()
        self.report_path = os.path.join(str(tmp_path), "attack.txt")
        self.report = open(self.report_path, "wb")
        self.log_path = os.path.join(str(tmp_path), "fetcher.log")
        self._log = open(self.log_path, "ab")
        env = harness.fetcher_env(upstream.url, VTS_JOBS_URL=self.gateway.env["VTS_JOBS_URL"], VTS_SANDBOX=sandbox,
                                  LD_PRELOAD=str(ATTACK_LIB), VTS_ATTACK_FD=str(self.report.fileno()),
                                  VTS_ATTACK=";".join("%s=%s" % (m, ",".join(a)) for m, a in attacks.items()),
                                  **certs.env("fetcher"))
        # The attacker is no sanitizer runtime: the instrumented fetcher is told not to insist on coming first.
        env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0"
        if webhook_ports is not None:
            env["VTS_FETCHER_WEBHOOK_PORTS"] = webhook_ports
        self.proc = subprocess.Popen([harness.fetcher_binary(), "--workers", "1"], env=env, stdout=self._log,
                                     stderr=self._log, pass_fds=(self.report.fileno(),), start_new_session=True)

    def child(self):
        kids = [int(p) for p in open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)).read().split()]
        return kids[0] if len(kids) == 1 else None

    def get(self, video, timeout=30):
        return self.gateway.request("GET", "/v1/video/transcript?video_id=" + video, headers={"x-api-key": ACTIVE_KEY},
                                    timeout=timeout)

    def wait_serving(self):
        ok = wait_for(lambda: self.child() and self.get("benchWarmup").status == 200, 20, interval=0.05)
        assert ok, "the fetcher did not serve:\n%s" % self.log_text()[-3000:]

    def outcomes(self):
        with open(self.report_path) as f:
            return f.read().splitlines()

    def log_text(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._log.close()
        self.report.close()
        self.gateway.stop()


@pytest.fixture
def service(tmp_path, world, upstream):
    made = []

    def make(attacks, **kw):
        s = Service(tmp_path, world, upstream, attacks, **kw)
        made.append(s)
        s.wait_serving()
        return s

    yield make
    for s in made:
        s.close()


def sandbox_line(text):
    lines = [r for r in log_records(text) if r.get("msg") == "sandbox in force"]
    assert len(lines) >= 1, "no start line of the sandbox:\n%s" % text[-3000:]
    return lines[-1]


def test_a_fetcher_started_as_root_runs_as_nobody_with_every_layer_and_says_which(service):
    s = service({})
    child = s.child()
    st = status_fields(child)
    assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2", st
    assert st["Uid"].split() == ["65534"] * 4 and st["Gid"].split() == ["65534"] * 4, st
    assert st["Groups"].strip() == "", st
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert st[cap] == "0000000000000000", (cap, st[cap])
    abi = landlock_abi()
    line = sandbox_line(s.log_text())
    limits = ("rlimits (core 0, no address space ceiling under a sanitizer, fsize, nofile 1024)" if sanitized() else
              "rlimits (core 0, as 1024 MiB, fsize, nofile 1024)")
    # The ports: the platform's, the jobs link's, 53 (DNS over TCP) and 443 (VTS_FETCHER_WEBHOOK_PORTS).
    landlock = "landlock v%d fs+net (4 ports)" % abi if abi >= 4 else "landlock v%d fs" % abi
    m = re.fullmatch(re.escape("%s, no_new_privs, uid 65534, %s, seccomp (" % (limits, landlock)) + r"(\d+) calls\)",
                     line["layers"])
    assert m, line
    assert 60 <= int(m.group(1)) <= 130, "the filter allows %s calls" % m.group(1)
    assert line["mode"] == "on"
    # The gateway's workers and dispatcher refuse the calls none of them makes; the master, which forks, is free.
    gateway_layers = ("no_new_privs, seccomp (50 calls refused, ptrace left to the sanitizer)" if sanitized() else
                      "no_new_privs, seccomp (52 calls refused)")
    said = [(r["component"], r["layers"]) for r in s.gateway.log_records() if r.get("msg") == "sandbox in force"]
    assert sorted(set(said)) == [("dispatcher", gateway_layers), ("worker", gateway_layers)], said
    for pid in s.gateway.worker_pids() + s.gateway.dispatcher_pids():
        assert (status_fields(pid)["NoNewPrivs"], status_fields(pid)["Seccomp"]) == ("1", "2"), pid
    assert status_fields(s.gateway.proc.pid)["Seccomp"] == "0"
    # The layers reach the gateway's /metrics with the fetcher's results.
    text = scrape(s.gateway.metrics_port)
    want = {name: 1 for name in LAYERS}
    if abi < 4:
        want["landlock_net"] = 0
    assert {name: metric(text, "vts_fetcher_sandbox_layer", layer=name) for name in LAYERS} == want


def test_the_attacker_inside_a_job_reads_writes_connects_and_raises_nothing(service, world, redis):
    nobody = free_port()
    outside = os.path.join(world["dir"], "planted")
    tls_key = world["certs"].path("fetcher.key")
    attacks = {"benchAtkRd1": ["read:" + world["keys"], "read:" + tls_key, "write:" + outside,
                                "connect:%d" % redis.port, "connect:%d" % nobody]}
    s = service(attacks)
    r = s.get("benchAtkRd1")
    assert r.status == 200, r
    assert s.outcomes() == [
        "sandbox up uid 65534",
        "read %s EACCES" % world["keys"],
        "read %s EACCES" % tls_key,
        "write %s EACCES" % outside,
        "connect %d EACCES" % redis.port,
        "connect %d EACCES" % nobody,
        "done",
    ]
    assert not os.path.exists(outside)


def test_the_same_attacks_succeed_without_the_sandbox(service, world, redis):
    """The control: what refused the attacker above is the sandbox, not the files' modes or a closed port."""
    nobody = free_port()
    outside = os.path.join(world["dir"], "planted")
    attacks = {"benchAtkRd1": ["read:" + world["keys"], "read:" + world["certs"].path("fetcher.key"),
                                "write:" + outside, "connect:%d" % redis.port, "connect:%d" % nobody]}
    s = service(attacks, sandbox="off")
    assert s.get("benchAtkRd1").status == 200
    assert s.outcomes() == [
        "sandbox up uid 0",
        "read %s succeeded" % world["keys"],
        "read %s succeeded" % world["certs"].path("fetcher.key"),
        "write %s succeeded" % outside,
        "connect %d succeeded" % redis.port,
        "connect %d ECONNREFUSED" % nobody,
        "done",
    ]
    assert [r["msg"] for r in log_records(s.log_text()) if r.get("msg", "").startswith("sandbox off")] == [
        "sandbox off (VTS_SANDBOX=off): this fetcher runs with all the rights of its user"]


@pytest.mark.parametrize("attack,call,sanitized_outcome", [
    ("exec", "execve", "exec"),
    ("ptrace_parent", "ptrace", "ptrace"),
    ("raise_nofile", "prlimit64", None),
    ("raise_as", "prlimit64", None),
])
def test_a_refused_call_kills_the_fetcher_as_a_contained_crash(service, attack, call, sanitized_outcome):
    s = service({"benchAtkKil": [attack]})
    first = s.child()
    if sanitized() and sanitized_outcome is not None:
        # Under a sanitizer a process-spawning call or ptrace fails with EPERM (so that a report keeps its frames):
        # refused all the same, and the job goes on.
        assert s.get("benchAtkKil").status == 200
        lines = s.outcomes()
        tried = [line.split() for line in lines[1:-1]]
        assert lines[0] == "sandbox up uid 65534" and lines[-1] == "done", lines
        assert [(t[0], t[-1]) for t in tried] == [(sanitized_outcome, "trying"), (sanitized_outcome, "EPERM")], lines
        return
    t0 = time.monotonic()
    r = s.get("benchAtkKil")
    took = time.monotonic() - t0
    assert (r.status, r.json()) == (500, FETCH_FAILED), r
    # The job deadline is 30 s: an answer this soon is the death seen at once.
    assert took < 2, "500 after %.2f s" % took
    lines = s.outcomes()
    assert lines[0] == "sandbox up uid 65534" and lines[-1].endswith(" trying"), lines
    # The supervisor reaps the child just after the dispatcher saw its link close.
    died = wait_for(lambda: [r for r in log_records(s.log_text())
                             if r.get("msg") == "fetcher child killed" and r.get("child_pid") == first], 5)
    assert [d["signal"] for d in died] == [31], s.log_text()[-3000:]
    refused = [r for r in log_records(s.log_text()) if r.get("msg") == "system call refused by the sandbox: process killed"]
    assert [(r["syscall"], r["pid"]) for r in refused] == [(call, first)], refused
    # The pool is whole again: a new fetcher serves.
    assert wait_for(lambda: s.child() not in (None, first), 5)
    assert s.get("benchAfter1").status == 200


def test_warn_mode_keeps_every_call_and_says_the_filter_only_logs(service):
    s = service({"benchAtkWrn": ["raise_nofile"]}, sandbox="warn")
    assert s.get("benchAtkWrn").status == 200
    assert s.outcomes() == ["sandbox up uid 65534", "setrlimit nofile trying", "setrlimit nofile EPERM", "done"]
    line = sandbox_line(s.log_text())
    assert line["mode"] == "warn"
    assert "others logged not refused" in line["layers"] and "landlock" not in line["layers"], line
    warned = [r["msg"] for r in log_records(s.log_text()) if r.get("level") == "warn" and "landlock" in r["msg"]]
    assert warned == ["sandbox: landlock off (VTS_SANDBOX=warn: it has no logging mode)"], warned


def test_a_bad_sandbox_setting_stops_the_start(upstream):
    for env, msg in (({"VTS_SANDBOX": "maybe"}, "VTS_SANDBOX: invalid value: expected on, warn or off"),
                     ({"VTS_FETCHER_USER": "no-such-user-here"},
                      "VTS_FETCHER_USER: no such user: no-such-user-here (a fetcher started as root runs as this user)"),
                     ({"VTS_FETCHER_WEBHOOK_PORTS": "443,"},
                      "VTS_FETCHER_WEBHOOK_PORTS: invalid value: expected any, or comma-separated ports 1 to 65535")):
        p = subprocess.run([harness.fetcher_binary()], env=harness.fetcher_env(upstream.url, **env),
                           capture_output=True, text=True, timeout=20)
        assert (p.returncode, p.stderr.splitlines()[-1]) == (2, "vts-fetcher: " + msg), p.stderr
