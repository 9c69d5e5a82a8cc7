#!/usr/bin/env python3
"""What an idle job store costs the dispatcher: a gateway with one idle fetcher (so the runner has room and asks the
store for work) and no job, measured over SECONDS (60 by default) once it serves.

Prints the CPU time of each of the dispatcher process's threads (utime + stime from /proc/<pid>/task/*/stat; the
store's thread is vts-jobstore) and their sum, per minute. With the SQLite store, when perf can place uprobes (root,
perf on PATH), the calls of sqlite3_prepare_v2, sqlite3_prepare_v3, sqlite3_exec and sqlite3_step the dispatcher made
in a 20 s window after that one (perf stat on uprobes at those functions of the libsqlite3 the gateway loads, removed
after; a window of its own since each hit traps). With
--redis, a redis-server of its own holds the jobs (VTS_REDIS_URL): the commands the dispatcher's connections sent in
the window, by name (seen by a MONITOR client, each connection told apart by its socket in /proc; the store pipelines
nothing, so each command is one round trip), all the commands Redis ran (INFO commandstats, the scripts' own
included), the bytes Redis read from its clients per second (INFO stats total_net_input_bytes; the window's own
MONITOR and INFO add under 100 bytes) and Redis's own CPU time per minute (INFO cpu; the MONITOR client's share
included).
    VTS_BUILD_DIR=build tests/bench/store_idle.py [SECONDS] [--redis]
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from redisserver import Redis  # noqa: E402
from stack import Stack  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
PROBE_S = 20
PROBES = ("sqlite3_prepare_v2", "sqlite3_prepare_v3", "sqlite3_exec", "sqlite3_step")


def thread_cpu(pid):
    """{tid: (name, utime + stime in clock ticks)} of every thread of pid."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[tid] = (name, int(fields[11]) + int(fields[12]))
    return out


def sqlite_library(binary):
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    m = re.search(r"libsqlite3\S*\s+=>\s+(\S+)", ldd)
    return os.path.realpath(m.group(1)) if m else None


def add_probes(lib):
    """Uprobes at the entry of each function of PROBES in lib (by its address: perf's name would also match the
    library's own PLT stubs, counting an internal call twice). Returns the event names, or [] when perf cannot."""
    if shutil.which("perf") is None or os.geteuid() != 0 or lib is None:
        return []
    syms = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True).stdout.split("\n")
    addr = {p[2]: p[0] for p in (s.split() for s in syms) if len(p) == 3}
    events = []
    for fn in PROBES:
        name = "vtsidle_" + fn
        subprocess.run(["perf", "probe", "-q", "-d", "probe_libsqlite3:" + name], capture_output=True)
        r = subprocess.run(["perf", "probe", "-q", "-x", lib, "-a", "%s=0x%s" % (name, addr[fn])],
                           capture_output=True, text=True)
        if r.returncode == 0:
            events.append("probe_libsqlite3:" + name)
    return events


def remove_probes(events):
    for e in events:
        subprocess.run(["perf", "probe", "-q", "-d", e], capture_output=True)


def input_bytes(redis):
    """Redis's total_net_input_bytes: every byte its clients sent it."""
    text = redis.call("INFO", "stats")
    text = text.decode() if isinstance(text, bytes) else str(text)
    return int(re.search(r"total_net_input_bytes:(\d+)", text).group(1))


def redis_cpu_s(redis):
    """Redis's own CPU time so far in seconds (its main thread and the others, user and system)."""
    text = redis.call("INFO", "cpu")
    text = text.decode() if isinstance(text, bytes) else str(text)
    return sum(float(m.group(1)) for m in re.finditer(r"used_cpu_(?:sys|user):([\d.]+)", text))


def commandstats(redis):
    """{command: calls} from INFO commandstats."""
    text = redis.call("INFO", "commandstats")
    text = text.decode() if isinstance(text, bytes) else str(text)
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"cmdstat_(\w+):calls=(\d+)", text)}


class Monitor:
    """A MONITOR connection read on a thread: the top-level commands Redis was sent, as (client address, name)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"MONITOR\r\n")
        self.seen = []
        self.stop = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        buf = b""
        while not self.stop:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            *lines, buf = buf.split(b"\r\n")
            for line in lines:
                m = re.match(rb'\+\d+\.\d+ \[\d+ ([^\]]+)\] "([^"]+)"', line)
                if m and m.group(1) != b"lua":
                    self.seen.append((m.group(1).decode(), m.group(2).decode().lower()))

    def close(self):
        self.stop = True
        self.sock.close()
        self.thread.join(5)


def client_ports(pid, server_port):
    """The local ports of pid's TCP connections to 127.0.0.1:server_port."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            cols = line.split()
            local, remote, inode = cols[1], cols[2], cols[9]
            if inode in inodes and int(remote.split(":")[1], 16) == server_port:
                ports.add(int(local.split(":")[1], 16))
    return ports


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    use_redis = "--redis" in sys.argv
    seconds = float(args[0]) if args else 60.0
    tmp = tempfile.mkdtemp(prefix="vts-store-idle-")
    redis = Redis() if use_redis else None
    env = {}
    if redis is not None:
        redis.start()
        env["VTS_REDIS_URL"] = redis.url
    stack = Stack(tmp, gateway_env=env, fetchers=1)
    events = []
    try:
        gw = stack.gateway
        pids = gw.dispatcher_pids()
        assert len(pids) == 1, "one dispatcher expected, found %r" % pids
        pid = pids[0]
        binary = os.path.join(os.environ.get("VTS_BUILD_DIR", "build"), "bin", "vts-gateway")
        before_in = input_bytes(redis) if redis is not None else 0
        before_cpu = redis_cpu_s(redis) if redis is not None else 0
        before_cmds = commandstats(redis) if redis is not None else {}
        monitor = Monitor(redis.port) if redis is not None else None
        before = thread_cpu(pid)
        t0 = time.monotonic()
        time.sleep(seconds)  # the wait is the test: the dispatcher idles through the window measured
        after = thread_cpu(pid)
        elapsed = time.monotonic() - t0
        per_min = 60.0 / elapsed
        after_cmds = commandstats(redis) if redis is not None else {}
        after_in = input_bytes(redis) if redis is not None else 0
        after_cpu = redis_cpu_s(redis) if redis is not None else 0
        if monitor is not None:
            monitor.close()
        print("store: %s; dispatcher pid %d idle %.1f s (CPU per minute below)" % (
            "redis" if use_redis else "sqlite", pid, elapsed))
        total = 0
        for tid in sorted(after, key=int):
            name, ticks = after[tid]
            used = ticks - before.get(tid, (name, 0))[1]
            total += used
            if used > 0:
                print("  thread %-8s %-16s %8.1f ms" % (tid, name, used * 1000.0 / TICK * per_min))
        print("  all threads               %8.1f ms" % (total * 1000.0 / TICK * per_min))
        events = [] if use_redis else add_probes(sqlite_library(binary))
        if events:
            # A window of its own after the CPU's: each hit of a uprobe traps, which the CPU time would count.
            perf = subprocess.run(["perf", "stat", "-x", ",", "-e", ",".join(events), "-p", str(pid), "--", "sleep",
                                   str(PROBE_S)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  timeout=PROBE_S + 30)
            err = perf.stderr
            for line in err.splitlines():
                parts = line.split(",")
                if len(parts) > 2 and parts[2].startswith("probe_libsqlite3:vtsidle_"):
                    n = int(parts[0]) if parts[0].isdigit() else 0
                    print("  %-20s %8d calls (%.1f per second)" % (
                        parts[2].split("vtsidle_")[1], n, n / PROBE_S))
        if not use_redis and not events:
            print("  (no call counts: perf's uprobes need root and perf on PATH)")
        if redis is not None:
            ports = client_ports(pid, redis.port)
            mine = {}
            for addr, cmd in monitor.seen:
                if int(addr.rsplit(":", 1)[1]) in ports:
                    mine[cmd] = mine.get(cmd, 0) + 1
            print("  commands the dispatcher sent (%d connections), each a round trip:" % len(ports))
            for cmd in sorted(mine):
                print("    %-12s %8d (%.1f per second)" % (cmd, mine[cmd], mine[cmd] / elapsed))
            print("  all commands Redis ran in the window (scripts' own included):")
            for cmd in sorted(after_cmds):
                n = after_cmds[cmd] - before_cmds.get(cmd, 0) - (1 if cmd in ("info", "monitor") else 0)
                if n > 0:
                    print("    %-12s %8d (%.1f per second)" % (cmd, n, n / elapsed))
            print("  bytes Redis read from its clients: %d (%.0f per second)" % (
                after_in - before_in, (after_in - before_in) / elapsed))
            print("  Redis's own CPU time: %.1f ms per minute" % ((after_cpu - before_cpu) * 1000.0 * per_min))
        return 0
    finally:
        remove_probes(events)
        stack.close()
        if redis is not None:
            redis.stop()


if __name__ == "__main__":
    sys.exit(main())
