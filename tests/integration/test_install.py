"""`cmake --install` of the build tree into a folder of the test's own (DESTDIR): the programs, a man page for each,
the systemd units and the sysusers.d line of their user, each where the system looks for it. The units are checked
by systemd-analyze (verify, and the offline security report) against that folder as the root, with the host's own
system units copied beside them; nothing is started and nothing on the host changes."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import BUILD_DIR, REPO

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
GROFF = shutil.which("groff")
PREFIX = "usr/local"
EXPECTED = {
    PREFIX + "/bin/vts-gateway", PREFIX + "/bin/vts-fetcher", PREFIX + "/bin/vts-keys",
    PREFIX + "/share/man/man8/vts-gateway.8", PREFIX + "/share/man/man8/vts-fetcher.8",
    PREFIX + "/share/man/man1/vts-keys.1",
    PREFIX + "/lib/systemd/system/vts-gateway.service", PREFIX + "/lib/systemd/system/vts-fetcher@.service",
    PREFIX + "/lib/sysusers.d/vts.conf",
}
UNITS = PREFIX + "/lib/systemd/system"
# What every unit must say (and systemd-analyze verify must accept): a dedicated user, and the hardening options.
HARDENING = {
    "User": "vts", "Group": "vts", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
    "PrivateTmp": "yes", "PrivateDevices": "yes", "CapabilityBoundingSet": "", "RestrictNamespaces": "yes",
    "MemoryDenyWriteExecute": "yes", "SystemCallArchitectures": "native", "LockPersonality": "yes",
    "RestrictSUIDSGID": "yes", "ProtectKernelTunables": "yes", "ProtectControlGroups": "yes",
}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """The installed tree, under a fresh folder used as the root by systemd-analyze."""
    if not SYSTEMD_ANALYZE or not GROFF:
        pytest.skip("systemd-analyze (systemd) and groff (groff-base) are needed: deploy/deps.sh installs them")
    d = tmp_path_factory.mktemp("root")
    out = subprocess.run(["cmake", "--install", str(BUILD_DIR), "--prefix", "/" + PREFIX],
                         env=dict(os.environ, DESTDIR=str(d)), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return d


def _installed(root):
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def _unit(root, name):
    """{key: [values]} of a unit file's [Service] and [Unit] sections."""
    keys = {}
    for line in (root / UNITS / name).read_text().splitlines():
        m = re.match(r"^(\w+)=(.*)$", line)
        if m:
            keys.setdefault(m.group(1), []).append(m.group(2))
    return keys


def test_install_puts_programs_man_pages_and_units_in_their_places(root):
    assert _installed(root) == EXPECTED
    for prog in ("vts-gateway", "vts-fetcher", "vts-keys"):
        assert os.access(root / PREFIX / "bin" / prog, os.X_OK)
    for name in ("vts-gateway.service", "vts-fetcher@.service"):
        unit = _unit(root, name)
        prog = name.split("@")[0].split(".")[0]
        assert unit["ExecStart"][0].split()[0] == "/%s/bin/%s" % (PREFIX, prog)
        assert unit["Documentation"] == ["man:%s(8)" % prog]
        assert PREFIX + "/share/man/man8/%s.8" % prog in _installed(root)
        for key, value in HARDENING.items():
            assert value in unit.get(key, []), (name, key, unit.get(key))
        assert "@system-service" in unit["SystemCallFilter"] and "~@privileged" in unit["SystemCallFilter"]
        assert unit["Restart"] == ["on-failure"] and unit["StartLimitBurst"] == ["5"]
    # The user the units run as is made by systemd-sysusers from the installed line.
    assert re.search(r"^u vts - ", (root / PREFIX / "lib/sysusers.d/vts.conf").read_text(), re.M)


def test_systemd_analyze_verify_accepts_the_units_and_rates_them_ok(root, tmp_path):
    # The host's own units (targets the services are ordered against) beside ours, in the same root.
    shutil.copytree("/usr/lib/systemd/system" if os.path.isdir("/usr/lib/systemd/system") else "/lib/systemd/system",
                    root / "usr/lib/systemd/system", symlinks=True, dirs_exist_ok=True)
    # A fresh Debian has no man(1): verify's check of Documentation=man:... would need it, so it is left out
    # (--man=no) and the program search path holds nothing; test_install_puts_programs_man_pages_and_units_in_their_
    # places checks that each unit's page is installed where man looks for it.
    nothing = tmp_path / "no-programs"
    nothing.mkdir()
    env = dict(os.environ, PATH=str(nothing), SYSTEMD_LOG_LEVEL="notice")
    units = [str(root / UNITS / u) for u in ("vts-gateway.service", "vts-fetcher@1.service")]
    # vts-fetcher@1.service: the template's instance, read from the template file.
    units[1] = str(root / UNITS / "vts-fetcher@.service").replace("@.service", "@1.service")
    out = subprocess.run([SYSTEMD_ANALYZE, "verify", "--man=no", "--root=" + str(root),
                          *[u[len(str(root)):] for u in units]],
                         env=env, capture_output=True, text=True, timeout=120)
    # verify exits 0 on an unknown key or a bad value, with a line saying so: no line at all is the pass.
    assert out.returncode == 0 and out.stdout == "" and out.stderr == "", out.stdout + out.stderr
    for name in ("vts-gateway.service", "vts-fetcher@.service"):
        sec = subprocess.run([SYSTEMD_ANALYZE, "security", "--offline=yes", "--root=" + str(root),
                              "/" + UNITS + "/" + name], env=env, capture_output=True, text=True, timeout=120)
        m = re.search(r"Overall exposure level for \S+: (\d+\.\d+) (\w+)", sec.stdout)
        assert m, sec.stdout[-2000:] + sec.stderr[-2000:]
        assert float(m.group(1)) <= 2.0 and m.group(2) == "OK", m.group(0)


def test_man_pages_render_without_warnings_and_name_real_settings(root):
    config = (REPO / "common" / "config.c").read_text()
    known = set(re.findall(r'"(VTS_\w+)"', config))
    for rel, name, section in ((PREFIX + "/share/man/man8/vts-gateway.8", "vts-gateway", "8"),
                               (PREFIX + "/share/man/man8/vts-fetcher.8", "vts-fetcher", "8"),
                               (PREFIX + "/share/man/man1/vts-keys.1", "vts-keys", "1")):
        path = root / rel
        text = path.read_text()
        assert text.startswith(".TH %s %s " % (name.upper(), section)), text[:80]
        assert "@" + "PROJECT_VERSION@" not in text
        out = subprocess.run([GROFF, "-man", "-Tutf8", "-ww", "-z", str(path)], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0 and out.stderr == "", out.stderr
        shown = subprocess.run([GROFF, "-man", "-Tutf8", str(path)], capture_output=True, text=True, timeout=60)
        plain = re.sub(r".\x08", "", shown.stdout)
        for heading in ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "SEE ALSO"):
            assert re.search(r"^%s$" % heading, plain, re.M), (name, heading)
        assert re.search(r"^\s+%s\s+\S\s" % re.escape(name), plain, re.M), name
        unknown = set(re.findall(r"\bVTS_[A-Z0-9_]+\b", text)) - known
        assert not unknown, (name, sorted(unknown))


def _exec_start(unit_path):
    return [line.split("=", 1)[1].split()[0] for line in unit_path.read_text().splitlines()
            if line.startswith("ExecStart=")]


def test_an_install_under_another_prefix_names_its_programs_there(tmp_path):
    # The prefix given at install time: the units go under it and name the programs it put there.
    out = subprocess.run(["cmake", "--install", str(BUILD_DIR), "--prefix", "/usr"],
                         env=dict(os.environ, DESTDIR=str(tmp_path)), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    units = tmp_path / "usr/lib/systemd/system"
    assert _exec_start(units / "vts-gateway.service") == ["/usr/bin/vts-gateway"]
    assert _exec_start(units / "vts-fetcher@.service") == ["/usr/bin/vts-fetcher"]
    for prog in ("vts-gateway", "vts-fetcher"):
        assert os.access(tmp_path / "usr/bin" / prog, os.X_OK)


def test_a_prefix_given_at_configure_time_is_the_units_prefix(tmp_path):
    # A build folder of the test's own configured for /opt/vts; its units alone are installed (no program is built).
    build = tmp_path / "build"
    out = subprocess.run(["cmake", "-S", str(REPO), "-B", str(build), "-DCMAKE_INSTALL_PREFIX=/opt/vts"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    out = subprocess.run(["cmake", "--install", str(build), "--component", "units"],
                         env=dict(os.environ, DESTDIR=str(tmp_path / "root")), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    units = tmp_path / "root/opt/vts/lib/systemd/system"
    assert _exec_start(units / "vts-gateway.service") == ["/opt/vts/bin/vts-gateway"]
    assert _exec_start(units / "vts-fetcher@.service") == ["/opt/vts/bin/vts-fetcher"]
