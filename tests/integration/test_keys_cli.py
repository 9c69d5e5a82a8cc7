"""vts-keys, the key file tool: what it prints, what it stores, its errors and exit codes, concurrent runs, and keys it
creates or revokes taking effect in a running gateway after SIGHUP."""
import hashlib
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import BUILD_DIR, free_port, not_here
from contract import error_body
from vtsproc import metric, scrape, wait_for

KEYS = BUILD_DIR / "bin" / "vts-keys"
ID = "aB3_-9zZ0xY"
KEY_RE = re.compile(r"^[A-Za-z0-9_-]{32,256}$")
RELOAD_TIMEOUT_S = 5.0


def run_keys(keys_file, *args, env=None):
    full_env = {k: v for k, v in os.environ.items() if k != "VTS_KEYS_FILE"}
    full_env.update(env or {})
    argv = [str(KEYS)] + (["-f", str(keys_file)] if keys_file is not None else []) + list(args)
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, env=full_env)


def create(keys_file, name, *opts):
    r = run_keys(keys_file, "create", name, *opts)
    assert r.returncode == 0, f"create {name}: exit {r.returncode}, stderr {r.stderr!r}"
    return r.stdout


def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


def records(keys_file):
    """The record lines of the key file as lists of fields."""
    lines = keys_file.read_text().splitlines()
    return [line.split("\t") for line in lines if line and not line.startswith("#")]


def test_create_prints_only_the_key_and_stores_only_its_digest(tmp_path):
    keys_file = tmp_path / "keys.db"
    out = create(keys_file, "alice")
    assert out.endswith("\n") and out.count("\n") == 1, f"stdout must be the key and one newline: {out!r}"
    key = out[:-1]
    assert KEY_RE.match(key), f"key {key!r} is not 32..256 URL-safe characters"
    text = keys_file.read_text()
    assert key not in text
    assert records(keys_file) == [["alice", sha256(key), "active", "0", "0", "0"]]
    assert stat.S_IMODE(keys_file.stat().st_mode) == 0o640


def test_two_creates_give_different_keys(tmp_path):
    keys_file = tmp_path / "keys.db"
    a = create(keys_file, "a").strip()
    b = create(keys_file, "b").strip()
    assert a != b
    assert [r[1] for r in records(keys_file)] == [sha256(a), sha256(b)]


def test_create_with_limits_and_set_changes_them(tmp_path):
    keys_file = tmp_path / "keys.db"
    create(keys_file, "svc.one", "--rate", "5", "--window", "10", "--quota", "1000")
    assert records(keys_file)[0][2:] == ["active", "5", "10", "1000"]
    r = run_keys(keys_file, "set", "svc.one", "--quota", "0", "--rate", "7")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert records(keys_file)[0][2:] == ["active", "7", "10", "0"]


def test_a_weight_is_written_only_when_not_1_and_set_changes_it(tmp_path):
    keys_file = tmp_path / "keys.db"
    key = create(keys_file, "heavy", "--weight", "3", "--quota", "9").strip()
    create(keys_file, "plain")
    assert records(keys_file)[0] == ["heavy", sha256(key), "active", "0", "0", "9", "3"]
    # Weight 1 is no seventh field: the file stays one an earlier release's gateway reads.
    assert len(records(keys_file)[1]) == 6
    r = run_keys(keys_file, "set", "plain", "--weight", "100")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    r = run_keys(keys_file, "set", "heavy", "--weight", "1")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    assert [rec[2:] for rec in records(keys_file)] == [["active", "0", "0", "9"], ["active", "0", "0", "0", "100"]]
    r = run_keys(keys_file, "list")
    assert r.stdout.splitlines()[1:] == ["heavy\tactive\tdefault\tdefault\t9\t1",
                                         "plain\tactive\tdefault\tdefault\tdefault\t100"]
    # Out of range: refused, the file as it was.
    before = keys_file.read_text()
    r = run_keys(keys_file, "set", "plain", "--weight", "101")
    assert (r.returncode, r.stdout) == (2, "")
    assert "vts-keys: --weight needs an integer from 1 to 100" in r.stderr
    assert keys_file.read_text() == before


def test_a_file_of_an_earlier_release_keeps_its_keys_and_takes_a_weight(tmp_path):
    """A key file without the weight column (six fields a line) loads, weighs every key 1, and set adds the column
    to the one line it changes."""
    keys_file = tmp_path / "keys.db"
    old = ("# name\tsha256\tstatus\trate\twindow_s\tquota\n"
           "alice\t%s\tactive\t5\t10\t100\nbob\t%s\trevoked\t0\t0\t0\n" % (sha256("ka"), sha256("kb")))
    keys_file.write_text(old)
    r = run_keys(keys_file, "list")
    assert r.stdout.splitlines() == ["NAME\tSTATUS\tRATE\tWINDOW_S\tQUOTA\tWEIGHT",
                                     "alice\tactive\t5\t10\t100\t1", "bob\trevoked\tdefault\tdefault\tdefault\t1"]
    assert run_keys(keys_file, "set", "alice", "--weight", "2").returncode == 0
    assert records(keys_file) == [["alice", sha256("ka"), "active", "5", "10", "100", "2"],
                                  ["bob", sha256("kb"), "revoked", "0", "0", "0"]]


def test_list_shows_names_status_and_limits_never_keys_or_digests(tmp_path):
    keys_file = tmp_path / "keys.db"
    k1 = create(keys_file, "alice").strip()
    k2 = create(keys_file, "bob", "--rate", "5", "--window", "10", "--quota", "100").strip()
    assert run_keys(keys_file, "revoke", "alice").returncode == 0
    r = run_keys(keys_file, "list")
    assert r.returncode == 0, r.stderr
    for secret in (k1, k2, sha256(k1), sha256(k2), sha256(k1)[:16], sha256(k2)[:16]):
        assert secret not in r.stdout
    assert r.stdout.splitlines() == [
        "NAME\tSTATUS\tRATE\tWINDOW_S\tQUOTA\tWEIGHT",
        "alice\trevoked\tdefault\tdefault\tdefault\t1",
        "bob\tactive\t5\t10\t100\t1",
    ]


def test_list_of_a_missing_file_is_empty(tmp_path):
    r = run_keys(tmp_path / "none.db", "list")
    assert (r.returncode, r.stdout) == (0, "NAME\tSTATUS\tRATE\tWINDOW_S\tQUOTA\tWEIGHT\n")


def test_revoke_marks_the_key_revoked_and_keeps_the_name_taken(tmp_path):
    keys_file = tmp_path / "keys.db"
    key = create(keys_file, "alice").strip()
    r = run_keys(keys_file, "revoke", "alice")
    assert (r.returncode, r.stdout) == (0, "")
    assert records(keys_file) == [["alice", sha256(key), "revoked", "0", "0", "0"]]
    r = run_keys(keys_file, "create", "alice")
    assert r.returncode == 1 and r.stdout == ""
    assert "already exists" in r.stderr


def test_help_names_the_weight_bound(tmp_path):
    r = run_keys(tmp_path / "keys.db", "--help")
    assert (r.returncode, r.stderr) == (0, ""), f"--help: exit {r.returncode}, stderr {r.stderr!r}"
    assert r.stdout.startswith("usage: vts-keys [-f FILE] create NAME "), r.stdout
    assert ("A limit of 0 means the service default. The weight (1 to 100, 1 unless given) is the key's share of "
            "batch work\nagainst the other keys' with jobs waiting.\n") in r.stdout, r.stdout


@pytest.mark.parametrize("args,status,message", [
    ([], 2, "usage"),
    (["frob"], 2, "unknown command"),
    (["create"], 2, "missing NAME"),
    (["create", "bad name"], 2, "NAME must be"),
    (["create", "x" * 65], 2, "NAME must be"),
    (["create", "ok", "--rate"], 2, "--rate needs an integer"),
    (["create", "ok", "--rate", "-1"], 2, "--rate needs an integer"),
    (["create", "ok", "--window", "86401"], 2, "--window needs an integer"),
    (["create", "ok", "--bogus", "1"], 2, "unknown option --bogus"),
    (["create", "ok", "--rate", "1", "--rate", "2"], 2, "--rate given twice"),
    (["set", "ok"], 2, "set needs at least one of --rate, --window, --quota, --weight"),
    (["create", "ok", "--weight", "0"], 2, "--weight needs an integer from 1 to 100"),
    (["create", "ok", "--weight", "101"], 2, "--weight needs an integer from 1 to 100"),
    (["create", "ok", "--weight", "two"], 2, "--weight needs an integer from 1 to 100"),
    (["create", "ok", "--weight"], 2, "--weight needs an integer from 1 to 100"),
    (["create", "ok", "--weight", "2", "--weight", "3"], 2, "--weight given twice"),
    (["revoke", "ok", "extra"], 2, "revoke takes only NAME"),
    (["list", "extra"], 2, "list takes no arguments"),
    (["revoke", "nobody"], 1, "no key named nobody"),
    (["set", "nobody", "--rate", "1"], 1, "no key named nobody"),
])
def test_bad_invocations_fail_with_a_clear_line_and_exit_code(tmp_path, args, status, message):
    keys_file = tmp_path / "keys.db"
    r = run_keys(keys_file, *args)
    assert r.returncode == status, f"{args}: exit {r.returncode}, stderr {r.stderr!r}"
    assert message in r.stderr, f"{args}: stderr {r.stderr!r} lacks {message!r}"
    assert r.stdout == ""
    assert not keys_file.exists(), "a failed command must not create the key file"


def test_malformed_key_file_is_refused_with_its_line_number(tmp_path):
    keys_file = tmp_path / "keys.db"
    keys_file.write_text("# keys\nalice\tnot-a-digest\tactive\t0\t0\t0\n")
    before = keys_file.read_bytes()
    r = run_keys(keys_file, "create", "bob")
    assert r.returncode == 1 and r.stdout == ""
    assert "line 2: digest must be 64 lowercase hex digits" in r.stderr
    assert keys_file.read_bytes() == before
    r = run_keys(keys_file, "list")
    assert r.returncode == 1 and "line 2:" in r.stderr


def test_file_is_f_then_env_and_never_a_guess_in_the_current_folder(tmp_path):
    env_file = tmp_path / "from-env.db"
    r = subprocess.run([str(KEYS), "create", "a"], capture_output=True, text=True, timeout=30, cwd=tmp_path,
                       env={**os.environ, "VTS_KEYS_FILE": str(env_file)})
    assert r.returncode == 0, r.stderr
    assert records(env_file)[0][0] == "a"
    # Neither -f nor VTS_KEYS_FILE: a keys.db here would be a file the service never reads.
    env = {k: v for k, v in os.environ.items() if k != "VTS_KEYS_FILE"}
    for vts_keys_file in (None, ""):
        if vts_keys_file is not None:
            env["VTS_KEYS_FILE"] = vts_keys_file
        for args in (["create", "b"], ["list"]):
            r = subprocess.run([str(KEYS)] + args, capture_output=True, text=True, timeout=30, cwd=tmp_path, env=env)
            assert (r.returncode, r.stdout) == (2, ""), r
            assert r.stderr.splitlines()[0] == ("vts-keys: which key file? name the one the service reads: -f FILE, "
                                                "or VTS_KEYS_FILE (deploy/run-local.sh's is .run/keys.db)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["from-env.db", "from-env.db.lock"]


def test_concurrent_creates_lose_no_update(tmp_path):
    keys_file = tmp_path / "keys.db"
    names = [f"k{i}" for i in range(12)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        outs = list(pool.map(lambda n: run_keys(keys_file, "create", n), names))
    assert [o.returncode for o in outs] == [0] * len(names), [o.stderr for o in outs]
    got = {r[0]: r[1] for r in records(keys_file)}
    assert set(got) == set(names)
    for name, out in zip(names, outs):
        assert got[name] == sha256(out.stdout.strip())
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name not in ("keys.db", "keys.db.lock"))
    assert leftovers == [], f"temporary files left behind: {leftovers}"


# Against a running gateway. A key is "accepted" when a request with it and no parameters gets past authentication
# to 400 ambiguous_request (no fetch involved); "refused" is 401 UNAUTHORIZED.

def _gateway_master_pid(gateway):
    """The master's pid: from the harness when it exposes one, else our child vts-gateway listening on its port."""
    for attr in ("pid", "master_pid"):
        if isinstance(getattr(gateway, attr, None), int):
            return getattr(gateway, attr)
    for attr in ("proc", "process", "popen"):
        proc = getattr(gateway, attr, None)
        if proc is not None and isinstance(getattr(proc, "pid", None), int):
            return proc.pid
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            continue
        if int(fields[1]) == me and any(e.startswith(b"VTS_LISTEN=") and e.endswith(b":%d" % gateway.port)
                                        for e in environ):
            return int(entry)
    pytest.fail("cannot find the gateway master's pid to send SIGHUP (harness exposes none)")


def _outcome(gateway, key):
    r = gateway.request("GET", "/v1/video/transcript", headers={"x-api-key": key})
    return r.status, r.json() if r.body else None


def _wait_for(gateway, key, expected, what):
    """Polls until every worker answers key with expected (several consecutive answers, new connections)."""
    deadline = time.monotonic() + RELOAD_TIMEOUT_S
    streak, last = 0, None
    while time.monotonic() < deadline:
        last = _outcome(gateway, key)
        streak = streak + 1 if last == expected else 0
        if streak >= 8:
            return
        time.sleep(0.05)  # poll interval: ask again until the streak or RELOAD_TIMEOUT_S
    pytest.fail(f"{what}: expected {expected} from every worker within {RELOAD_TIMEOUT_S}s, last {last}")


ACCEPTED = (400, error_body("ambiguous_request"))
REFUSED = (401, error_body("UNAUTHORIZED"))


def test_created_key_works_after_sighup_and_revoked_key_gets_401(gateway):
    key = create(gateway.keys_file, "cli-created", "--rate", "1000", "--window", "60").strip()
    assert _outcome(gateway, "vts_" + "0" * 64) == REFUSED
    os.kill(_gateway_master_pid(gateway), signal.SIGHUP)
    _wait_for(gateway, key, ACCEPTED, "key created by vts-keys")
    # The fixture's own keys survive the reload.
    assert _outcome(gateway, gateway.key) == ACCEPTED
    assert _outcome(gateway, gateway.revoked_key) == REFUSED

    r = run_keys(gateway.keys_file, "revoke", "cli-created")
    assert r.returncode == 0, r.stderr
    os.kill(_gateway_master_pid(gateway), signal.SIGHUP)
    _wait_for(gateway, key, REFUSED, "key revoked by vts-keys")
    assert _outcome(gateway, gateway.key) == ACCEPTED


NOBODY = 65534


def _as_nobody():
    os.setgid(NOBODY)
    os.setgroups([])
    os.setuid(NOBODY)


def _root_prefix():
    """The argv prefix that runs a command as root: none for root, sudo -n for a user sudo lets in without asking for
    a password; not_here("root") otherwise."""
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True, timeout=30).returncode == 0:
        return ["sudo", "-n"]
    not_here("root", "an operator's `sudo vts-keys` is run as root: run as root, or as a user sudo lets in without a "
                     "password (sudo -n)")


@pytest.fixture
def service_home(tmp_path):
    """A folder the service's user can enter, with a copy of vts-keys it can run (the build may be in a checkout no
    other user may enter, as /root is), and that user: nobody when we are root, else ourselves, with root reached
    through sudo. Yields (folder, keys binary, root prefix, (uid, gid), preexec function to become that user)."""
    prefix = _root_prefix()
    path = Path(tempfile.mkdtemp(prefix="vts-keys-owner-"))
    try:
        os.chmod(path, 0o755)
        binary = path / "vts-keys"
        shutil.copy2(KEYS, binary)
        if prefix:
            yield path, binary, prefix, (os.getuid(), os.getgid()), None
        else:
            yield path, binary, prefix, (NOBODY, NOBODY), _as_nobody
    finally:
        # Root may have left a file of its own in our folder: ours to remove all the same (the folder is ours).
        shutil.rmtree(path)


def test_rewrite_by_root_keeps_the_files_owner_group_and_mode(service_home):
    folder, binary, as_root, (uid, gid), as_service = service_home
    keys_file = folder / "keys.db"
    create(keys_file, "alice")
    create(keys_file, "bob")
    if not as_root:
        os.chown(keys_file, uid, gid)
    os.chmod(keys_file, 0o640)
    for args in (("revoke", "alice"), ("set", "bob", "--rate", "5"), ("create", "carol")):
        r = subprocess.run(as_root + [str(binary), "-f", str(keys_file)] + list(args), capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0, f"{args}: exit {r.returncode}, stderr {r.stderr!r}"
        st = keys_file.stat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (uid, gid, 0o640), args
        # The lock file follows the key file: nothing is left that only root may open.
        st = (folder / "keys.db.lock").stat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (uid, gid, 0o640), args
    # The service's user can take the lock root's runs used.
    r = subprocess.run(["flock", "-n", str(folder / "keys.db.lock"), "true"], capture_output=True, text=True,
                       timeout=30, preexec_fn=as_service)
    assert r.returncode == 0, r.stderr
    # The service's user still reads what root wrote.
    r = subprocess.run([str(binary), "-f", str(keys_file), "list"], capture_output=True, text=True, timeout=30,
                       preexec_fn=as_service)
    assert r.returncode == 0, r.stderr
    assert [line.split()[:2] for line in r.stdout.splitlines()[1:]] == [["alice", "revoked"], ["bob", "active"],
                                                                         ["carol", "active"]]


def test_new_key_file_is_0640_whatever_the_umask(tmp_path):
    keys_file = tmp_path / "keys.db"
    r = subprocess.run([str(KEYS), "-f", str(keys_file), "create", "alice"], capture_output=True, text=True,
                       timeout=30, preexec_fn=lambda: os.umask(0o077))
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(keys_file.stat().st_mode) == 0o640


def _keys_metrics(gateway):
    text = scrape(gateway.metrics_port)
    return metric(text, "vts_keys_reload_failures_total"), metric(text, "vts_keys_loaded_timestamp_seconds")


def test_failing_reload_is_an_error_each_time_and_in_metrics(gateway):
    failures, loaded = _keys_metrics(gateway)
    assert failures == 0
    assert time.time() - 60 < loaded <= time.time()
    good = gateway.keys_file.read_text()
    gateway.keys_file.write_text(good + "broken line\n")
    # Both workers see the change on their own and fail; the keys in service stay.
    assert wait_for(lambda: _keys_metrics(gateway)[0] == 2, RELOAD_TIMEOUT_S), _keys_metrics(gateway)
    os.kill(_gateway_master_pid(gateway), signal.SIGHUP)
    # The master and both workers try again, and fail again.
    assert wait_for(lambda: _keys_metrics(gateway)[0] == 5, RELOAD_TIMEOUT_S), _keys_metrics(gateway)
    assert _keys_metrics(gateway)[1] == loaded
    assert _outcome(gateway, gateway.key) == ACCEPTED
    errors = [r for r in gateway.log_records() if r.get("msg", "").startswith("key file reload failed")]
    assert len(errors) == 5, errors
    assert {r["level"] for r in errors} == {"error"}
    assert {r["error"] for r in errors} == {"line 4: expected 6 or 7 tab-separated fields, found 1"}, errors
    gateway.keys_file.write_text(good)
    assert wait_for(lambda: _keys_metrics(gateway)[1] > loaded or None, RELOAD_TIMEOUT_S + 1), _keys_metrics(gateway)


def test_unreadable_key_file_stops_the_gateway_at_start(tmp_path):
    unreadable = tmp_path / "keys.db"
    unreadable.mkdir()  # opens, but cannot be read (as root, a mode alone would not stop the read)
    env = dict(os.environ, VTS_LISTEN="127.0.0.1:%d" % free_port(), VTS_JOBS_URL="tcp://127.0.0.1:%d" % free_port(),
               VTS_METRICS_LISTEN="", VTS_WORKERS="1", VTS_KEYS_FILE=str(unreadable),
               VTS_STATE_DIR=str(tmp_path / "state"))
    r = subprocess.run([str(BUILD_DIR / "bin" / "vts-gateway")], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert r.stderr == f"vts-gateway: VTS_KEYS_FILE: {unreadable}: Is a directory\n"
