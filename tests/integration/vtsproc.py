"""Plain helpers for tests that start the service's processes (no pytest): free ports, the key file, what /proc
says about processes, waiting on observable events, and the gateway's metrics. Used by the pytest harness
(conftest.py) and by the fault battery (tests/fault)."""
import hashlib
import http.client
import json
import os
import re
import socket
import time
from pathlib import Path


_ports_given = set()


def free_port():
    """A TCP port free on 127.0.0.1 now, and never one this process was given before: a gateway's HTTP, jobs and
    metrics ports are picked one after the other, and the kernel may offer a port again once its probe is closed."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _ports_given:
            _ports_given.add(port)
            return port
    raise RuntimeError("no fresh free port in 100 tries")


def shared_dir(prefix, mode=0o755):
    """A new folder of the temporary directory that every user may read (mode) and reach: a fetcher started as root
    reads and opens files as VTS_FETCHER_USER once confined. Folders above it that other users cannot cross (the
    run's own temporary directory) get the right to cross them, nothing more."""
    import tempfile
    d = Path(tempfile.mkdtemp(prefix=prefix))
    d.chmod(mode)
    for up in d.parents:
        st = up.stat()
        if not st.st_mode & 0o001:
            up.chmod(st.st_mode | 0o001)
    return d


def write_keyfile(path, entries):
    """Writes the key file atomically (temporary file + rename), as an operator's tool would.

    entries: iterable of (name, plain_key, status, rate, window, quota) or (..., quota, weight); status is "active"
    or "revoked". An entry without a weight is a line without the field, as the files of earlier releases have.
    """
    path = Path(path)
    lines = ["# name\tsha256\tstatus\trate\twindow_s\tquota\tweight"]
    for name, plain, status, rate, window, quota, *weight in entries:
        digest = hashlib.sha256(plain.encode()).hexdigest()
        lines.append(f"{name}\t{digest}\t{status}\t{int(rate)}\t{int(window)}\t{int(quota)}"
                     + "".join(f"\t{int(w)}" for w in weight))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)


def _proc_stat(pid):
    """(state, ppid) of a process from /proc, or None when it does not exist."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    rest = data[data.rfind(")") + 2:].split()
    return rest[0], int(rest[1])


def process_gone(pid):
    """True when pid no longer runs (absent, or a zombie waiting for a parent that is not us)."""
    st = _proc_stat(pid)
    return st is None or st[0] in ("Z", "X")


def children_of(ppid):
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        st = _proc_stat(int(entry.name))
        if st is not None and st[1] == ppid and st[0] not in ("Z", "X"):
            pids.append(int(entry.name))
    return sorted(pids)


def session_pids(sid):
    """Every live process of session sid (field 6 of /proc/PID/stat)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            data = (entry / "stat").read_text()
        except OSError:
            continue
        fields = data[data.rfind(")") + 2:].split()
        if int(fields[3]) == sid and fields[0] not in ("Z", "X"):
            pids.append(int(entry.name))
    return pids


def process_name(pid):
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def read_log(path):
    """A process's log file as text ("" before it exists)."""
    try:
        return Path(path).read_text(errors="replace")
    except FileNotFoundError:
        return ""


def log_records(text):
    """The JSON lines of a log, parsed; other lines are skipped."""
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def wait_for(predicate, timeout, interval=0.02):
    """Polls predicate until it returns a true value, which is returned; after timeout seconds, its last value.
    What a test waits on is an event it can observe (a counter, a log line, a process), never a fixed time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)  # poll interval: between two checks of the predicate, until the deadline
    return predicate()


def metric(text, name, **labels):
    """The value of the sample of name with exactly these labels in a /metrics text, 0 when absent."""
    want = ",".join('%s="%s"' % kv for kv in labels.items())
    pattern = re.escape(name) + (r"\{" + re.escape(want) + r"\}" if want else "") + r" (\S+)$"
    for line in text.splitlines():
        m = re.match(pattern, line)
        if m:
            return float(m.group(1))
    return 0.0


def scrape(port):
    """The /metrics text of the gateway whose metrics listen on 127.0.0.1:port."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        body = resp.read().decode()
        assert resp.status == 200, resp.status
        return body
    finally:
        conn.close()


def wait_metric(port, name, value, timeout=10, **labels):
    """Waits until the sample of name (with labels) equals value; AssertionError naming the last value otherwise."""
    if wait_for(lambda: metric(scrape(port), name, **labels) == value, timeout, interval=0.05):
        return
    raise AssertionError("%s never reached %s (last %s)" % (name, value, metric(scrape(port), name, **labels)))
