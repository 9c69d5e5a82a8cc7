"""The two images built and run for real with podman: deploy/Dockerfile.gateway and deploy/Dockerfile.fetcher are
built from a Debian 12 base made here with debootstrap from the mirror apt uses (no container registry is reachable),
and a gateway and a fetcher container serve a transcript of the fake platform as the images' own users, with the
folders of deploy/prepare.sh mounted where deploy/compose.yaml mounts them.

Host networking keeps every address on 127.0.0.1. podman runs with a configuration of the test's own
(CONTAINERS_CONF: runc, lower default ulimits), never the machine's. The base image (localhost/vts-base:bookworm)
and the images' layers are kept by podman between runs, so a second run only compiles what changed; tests/run.sh runs
this file in a stage of its own, which prints its time."""
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BUILD_DIR, REPO, free_port, http_request, not_here, root_is_a_mount_point, wait_for
from vtsproc import children_of, metric, scrape

yaml = pytest.importorskip("yaml", reason="python3-yaml is needed to read deploy/compose.yaml")

PODMAN = shutil.which("podman")
DEBOOTSTRAP = shutil.which("debootstrap") or ("/usr/sbin/debootstrap" if os.path.exists("/usr/sbin/debootstrap")
                                               else None)
# The engine runs as root (rootful podman: the containers' uids are the host's, as prepare.sh's owners assume). A
# user who is not root runs what needs root through sudo without a password prompt, as deploy/deps.sh installs.
ROOT = os.geteuid() == 0
if not PODMAN or not DEBOOTSTRAP:
    pytest.skip("podman and debootstrap are needed to build and run the images (deploy/deps.sh installs podman, runc "
                "and debootstrap)", allow_module_level=True)
if not root_is_a_mount_point():
    pytest.skip("cannot run inside a chroot: / is not a mount point here, and the container runtime must remount it "
                "(run this stage on a machine or a virtual machine)", allow_module_level=True)
# Without root, the tests are "not run here (root)" (a failure where VTS_REQUIRE names root, as .ci/run sets).
NO_ROOT = not ROOT and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode != 0


@pytest.fixture(scope="module", autouse=True)
def _root_here():
    if NO_ROOT:
        not_here("root", "building and running the images needs root: run as root, or as a user sudo lets in without "
                 "a password prompt")


def as_root(argv, env=None):
    """argv run as root: as it is when we are root, else through sudo -n, with the variables of env set."""
    if ROOT:
        return list(argv)
    return ["sudo", "-n", "env", *("%s=%s" % kv for kv in (env or {}).items()), *argv]


def root_run(argv, env=None, timeout=60, **kw):
    full = dict(os.environ, **(env or {}))
    return subprocess.run(as_root(argv, env), env=full, capture_output=True, text=True, timeout=timeout, **kw)

BASE = "localhost/vts-base:bookworm"
IMAGES = {"gateway": "localhost/vts-gateway:test", "fetcher": "localhost/vts-fetcher:test"}
BUILD_STAGE = "localhost/vts-build:test"
USERS = {"gateway": 10001, "fetcher": 10002}
CONF = """[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
"""
# What the run measured, printed at the end of the module (the stage runs with -s).
FIGURES = []


@pytest.fixture(scope="module")
def podman(tmp_path_factory):
    conf = tmp_path_factory.mktemp("podman") / "containers.conf"
    conf.write_text(CONF)
    env = {"CONTAINERS_CONF": str(conf)}

    def run(*args, check=True, timeout=120):
        out = root_run([PODMAN, *args], env, timeout=timeout)
        if check and out.returncode != 0:
            raise AssertionError("podman %s: exit %d\n%s" % (" ".join(args), out.returncode, out.stderr[-3000:]))
        return out

    run.env = env
    yield run
    for line in FIGURES:
        print("\n" + line, end="")
    print()


def _apt_mirrors():
    """(archive URL, security URL or None) of the Debian mirror apt is configured with on this host."""
    entries = []
    for path in [Path("/etc/apt/sources.list")] + sorted(Path("/etc/apt/sources.list.d").glob("*")):
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        for m in re.finditer(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", text, re.M):
            entries.append((m.group(1), [m.group(2)]))
        for block in re.split(r"\n\s*\n", text):
            uris = re.search(r"^URIs:\s*(\S+)", block, re.M | re.I)
            suites = re.search(r"^Suites:\s*(.+)$", block, re.M | re.I)
            if uris and suites and not re.search(r"^Enabled:\s*no", block, re.M | re.I):
                entries.append((uris.group(1), suites.group(1).split()))
    archive = next((u for u, s in entries if "bookworm" in s), None)
    security = next((u for u, s in entries if "bookworm-security" in s), None)
    assert archive, "no Debian bookworm mirror in /etc/apt/sources.list*"
    return archive.rstrip("/"), security.rstrip("/") if security else None


# Run as root with the arguments ROOTFS ARCHIVE SECURITY IMAGE: debootstrap into ROOTFS (a new folder), what
# debian:bookworm-slim adds (apt keeps no downloaded package; dpkg installs no documentation but the copyright files),
# the host's mirror as the sources, the import of the tree as IMAGE, and ROOTFS removed. Every path is under ROOTFS,
# which must be a non-empty absolute path ending in /rootfs.
MAKE_BASE = r"""
set -eu
root=$1 archive=$2 security=$3 image=$4
case "$root" in /?*/rootfs) ;; *) echo "make-base: refusing root folder '$root'" >&2; exit 1 ;; esac
[ -n "$image" ] && [ ! -e "$root" ] || { echo "make-base: bad arguments" >&2; exit 1; }
debootstrap --variant=minbase bookworm "$root" "$archive" >"$root.log" 2>&1 || { tail -20 "$root.log" >&2; exit 1; }
{
  echo "deb $archive bookworm main"
  echo "deb $archive bookworm-updates main"
  [ -z "$security" ] || echo "deb $security bookworm-security main"
} >"$root/etc/apt/sources.list"
printf '%s\n' \
  'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };' \
  'APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };' \
  'Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";' >"$root/etc/apt/apt.conf.d/docker-clean"
printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
  'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' 'path-exclude /usr/share/locale/*' \
  >"$root/etc/dpkg/dpkg.cfg.d/docker-slim"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/man/* \
  "$root"/usr/share/info/* "$root"/usr/share/locale/*
find "$root/usr/share/doc" ! -type d ! -name copyright -delete
find "$root/usr/share/doc" -depth -mindepth 1 -type d -empty -delete
tar -C "$root" --numeric-owner -c . | podman import --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
rm -rf "$root" "$root.log"
"""


def _make_base(podman, work):
    """A minimal Debian 12 made with debootstrap from the mirror apt uses here, imported as BASE."""
    archive, security = _apt_mirrors()
    out = root_run(["bash", "-c", MAKE_BASE, "make-base", str(work / "rootfs"), archive, security or "", BASE],
                   podman.env, timeout=1200)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]


def _size_mb(podman, image):
    return int(podman("image", "inspect", "--format", "{{.Size}}", image).stdout.strip()) / 1e6


@pytest.fixture(scope="module")
def images(podman, tmp_path_factory):
    t0 = time.monotonic()
    if podman("image", "exists", BASE, check=False).returncode != 0:
        _make_base(podman, tmp_path_factory.mktemp("base"))
        FIGURES.append("containers: base image %s made with debootstrap in %.0f s" % (BASE, time.monotonic() - t0))
    else:
        FIGURES.append("containers: base image %s kept from an earlier run" % BASE)
    # docker format: the OCI one has no HEALTHCHECK. Host networking: apt reaches the mirror as the host does.
    build = ("build", "--format", "docker", "--network", "host", "--build-arg", "BASE_IMAGE=" + BASE)
    t1 = time.monotonic()
    # The build stage (the same in both Dockerfiles) under a name of its own, so that pruning keeps its layers.
    podman(*build, "--target", "build", "-f", "deploy/Dockerfile.gateway", "-t", BUILD_STAGE, str(REPO), timeout=1800)
    FIGURES.append("containers: build stage (packages and compilation) in %.0f s" % (time.monotonic() - t1))
    for name in ("gateway", "fetcher"):
        t1 = time.monotonic()
        podman(*build, "-f", "deploy/Dockerfile." + name, "-t", IMAGES[name], str(REPO), timeout=1800)
        FIGURES.append("containers: %s image built in %.0f s, %.0f MB" %
                       (name, time.monotonic() - t1, _size_mb(podman, IMAGES[name])))
    # What earlier runs left (layers of older sources) goes; the named images and their layers stay for the next.
    podman("image", "prune", "-f", timeout=300)
    return IMAGES


def _compose():
    return yaml.safe_load((REPO / "deploy" / "compose.yaml").read_text())


def _mounts(service, prepared):
    """The -v options of compose's bind mounts of service, the host side in the folder prepare.sh made."""
    out = []
    for v in _compose()["services"][service].get("volumes", []):
        host, target, *mode = v.split(":")
        if host.startswith("./"):
            out += ["-v", "%s:%s%s" % (prepared / host[2:], target, ":" + mode[0] if mode else "")]
    return out


class Prepared(type(Path())):
    """The prepared folder (a Path) and the plain API key made in it."""

    def __new__(cls, path, key):
        self = super().__new__(cls, path)
        self.key = key
        return self


@pytest.fixture
def prepared(tmp_path):
    """deploy/prepare.sh's folder, made by the command the reference gives, with one key made by vts-keys."""
    d = tmp_path / "deploy"
    try:
        out = root_run([str(REPO / "deploy" / "prepare.sh"), str(d)])
        assert out.returncode == 0, out.stderr
        keys = root_run([str(BUILD_DIR / "bin" / "vts-keys"), "-f", str(d / "keys" / "keys.db"), "create", "alice"],
                        {"ASAN_OPTIONS": "detect_leaks=0"})
        assert keys.returncode == 0, keys.stderr
        yield Prepared(d, keys.stdout.strip())
    finally:
        # Owned by root (and the images' uids): removed here, so that nothing stays behind.
        root_run(["rm", "-rf", str(d)])


@pytest.fixture
def containers(podman):
    """Names of the containers a test starts; each is removed at teardown."""
    names = []
    yield names
    for n in names:
        podman("rm", "-f", "-t", "0", n, check=False)


def _start(podman, containers, image, name, args, cmd=()):
    containers.append(name)
    podman("run", "-d", "--name", name, "--network", "host", *args, IMAGES[image], *cmd)


def _uids(pid):
    """(real, effective, saved, fs uid), (the same gids) of a host process."""
    status = Path("/proc/%d/status" % pid).read_text()
    uid = tuple(int(x) for x in re.search(r"^Uid:\s+(.+)$", status, re.M).group(1).split())
    gid = tuple(int(x) for x in re.search(r"^Gid:\s+(.+)$", status, re.M).group(1).split())
    return uid, gid


def _pid(podman, name):
    return int(podman("inspect", "--format", "{{.State.Pid}}", name).stdout.strip())


def _files(podman, name, pattern):
    """Files of a running container whose name matches pattern (find -name), outside /proc and /sys."""
    out = podman("exec", name, "find", "/", "(", "-path", "/proc", "-o", "-path", "/sys", ")", "-prune", "-o",
                 "-type", "f", "-name", pattern, "-print", check=False)
    return sorted(out.stdout.split())


def test_images_are_built_from_a_local_base_and_run_as_their_own_users(podman, images):
    for name, image in images.items():
        cfg = podman("image", "inspect", "--format", "{{.Config.User}} {{json .Config.Entrypoint}}", image)
        user, entry = cfg.stdout.strip().split(" ", 1)
        assert user == "vts", (name, user)
        assert entry == '["/usr/local/bin/vts-entrypoint","/usr/local/bin/vts-%s"]' % name
        ids = podman("run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", image, "-c", "id -u; id -g").stdout.split()
        assert ids == [str(USERS[name])] * 2, (name, ids)
        # No private key of any kind in an image: the jobs link's files are mounted at run time only.
        found = podman("run", "--rm", "--network", "none", "--user", "0", "--entrypoint", "/bin/sh", image, "-c",
                       "find / -xdev -type f \\( -name '*.key' -o -name keys.db -o -name .env \\) -print; "
                       "grep -rl -e 'PRIVATE KEY-----' /etc /usr/local /var /root /home /opt /srv /tmp || true")
        assert found.stdout.split() == [], (name, found.stdout)
    hc = podman("image", "inspect", "--format", "{{json .Config.Healthcheck.Test}}", images["gateway"]).stdout.strip()
    assert hc == '["CMD","/usr/local/bin/vts-healthcheck"]', hc


@pytest.fixture
def redis_with_password(prepared):
    """A real redis-server on 127.0.0.1 that requires the password prepare.sh wrote to .env and loads
    deploy/redis/counters.conf, as compose's does."""
    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed (deploy/deps.sh installs it)")
    from redisserver import Redis
    env_file = root_run(["cat", str(prepared / ".env")]).stdout
    password = re.fullmatch(r"REDIS_PASSWORD=([0-9a-f]{64})\n", env_file).group(1)
    server = Redis(args=["--requirepass", password], auth=(None, password),
                   conf=REPO / "deploy" / "redis" / "counters.conf")
    server.start()
    server.password = password
    yield server
    server.stop()


def _compose_redis_url(password, port):
    """compose's VTS_REDIS_URL of the gateway, with the password compose reads from .env and Redis on the host."""
    url = _compose()["services"]["gateway"]["environment"]["VTS_REDIS_URL"]
    url = re.sub(r"\$\{REDIS_PASSWORD:\?[^}]*\}", password, url)
    assert url == "redis://:%s@redis:6379/0" % password, url
    return url.replace("@redis:6379/", "@127.0.0.1:%d/" % port)


def test_gateway_and_fetcher_containers_serve_as_their_users_and_see_a_revocation(podman, images, prepared,
                                                                                    containers, upstream,
                                                                                    redis_with_password):
    port, jobs, metrics = free_port(), free_port(), free_port()
    tag = str(os.getpid())
    redis = redis_with_password
    gw_env = ["-e", "VTS_LISTEN=127.0.0.1:%d" % port, "-e", "VTS_JOBS_URL=tls+tcp://127.0.0.1:%d" % jobs,
              "-e", "VTS_METRICS_LISTEN=127.0.0.1:%d" % metrics, "-e", "VTS_WORKERS=1",
              "-e", "VTS_REDIS_URL=" + _compose_redis_url(redis.password, redis.port),
              "-e", "VTS_RATE_LIMIT_FAIL_CLOSED=true"]
    t0 = time.monotonic()
    _start(podman, containers, "gateway", "vts-test-gateway-" + tag, gw_env + _mounts("gateway", prepared))
    _start(podman, containers, "fetcher", "vts-test-fetcher-" + tag,
           ["-e", "VTS_JOBS_URL=tls+tcp://localhost:%d" % jobs, "-e", "VTS_UPSTREAM_URL=" + upstream.url,
            *_mounts("fetcher", prepared)], cmd=("--workers", "1"))
    gw, fe = containers

    def fetcher_idle():
        try:
            return metric(scrape(metrics), "vts_fetchers_idle") == 1
        except OSError:
            return False

    assert wait_for(fetcher_idle, 30, interval=0.1), podman("logs", gw, check=False).stderr[-3000:] + \
        podman("logs", fe, check=False).stderr[-3000:]
    FIGURES.append("containers: gateway and fetcher started and linked over mutual TLS in %.1f s" %
                   (time.monotonic() - t0))

    r = http_request(port, "GET", "/v1/video/transcript?video_id=capJson3xx1", headers={"x-api-key": prepared.key})
    assert r.status == 200, (r.status, r.body)
    assert r.json()["text"] == "Hello and welcome to the fake platform"
    # The limits are in the Redis that requires the password (fail-closed: a refused AUTH would be a 503).
    assert http_request(port, "GET", "/health").json()["rateLimitProvider"] == "redis"
    assert int(redis.command("DBSIZE")[1:]) > 0

    # Every process of each container runs as the image's user and group, not root.
    for name, image in ((gw, "gateway"), (fe, "fetcher")):
        pid = _pid(podman, name)
        procs = [pid] + children_of(pid)
        assert len(procs) >= 2, (name, procs)  # the gateway's master and children; the fetcher's parent and child
        for p in procs:
            assert _uids(p) == ((USERS[image],) * 4, (USERS[image],) * 4), (name, p, _uids(p))

    # Each container holds its own private key only: the CA key stays in jobs-ca/, which no container mounts.
    assert _files(podman, gw, "*.key") == ["/etc/vts-jobs-tls/gateway.key"]
    assert _files(podman, fe, "*.key") == ["/etc/vts-jobs-tls/fetcher.key"]

    # The health check asks the port of VTS_LISTEN (not 8080); pointed elsewhere, the same script fails.
    assert podman("healthcheck", "run", gw, check=False).returncode == 0
    other = podman("exec", "-e", "VTS_LISTEN=0.0.0.0:%d" % free_port(), gw, "/usr/local/bin/vts-healthcheck",
                   check=False)
    assert other.returncode != 0

    # A key revoked on the host, in the mounted folder, is refused by the running container within seconds.
    revoke = root_run([str(BUILD_DIR / "bin" / "vts-keys"), "-f", str(prepared / "keys" / "keys.db"), "revoke",
                       "alice"], {"ASAN_OPTIONS": "detect_leaks=0"})
    assert revoke.returncode == 0, revoke.stderr
    st = root_run(["stat", "-c", "%u %g %a", str(prepared / "keys" / "keys.db")]).stdout.split()
    assert st == ["0", str(USERS["gateway"]), "640"], st
    t1 = time.monotonic()

    def refused():
        return http_request(port, "GET", "/v1/video/transcript?video_id=capJson3xx1",
                            headers={"x-api-key": prepared.key}).status == 401

    assert wait_for(refused, 5, interval=0.1), "the revoked key is still served"
    FIGURES.append("containers: a key revoked on the host refused after %.1f s" % (time.monotonic() - t1))

    # SIGTERM (podman stop) drains: both exit 0.
    for name in (fe, gw):
        podman("stop", "-t", "30", name, timeout=60)
        assert podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip() == "0", \
            podman("logs", name, check=False).stderr[-2000:]


def test_a_program_that_cannot_start_backs_off_instead_of_looping(podman, images, prepared, containers):
    """A bad setting stops the program at once; the restart policy starts the container again, and the entrypoint
    waits 1, 2, 4, ... s first: at most a handful of starts in 10 s (a tight loop makes dozens)."""
    tag = str(os.getpid())
    _start(podman, containers, "gateway", "vts-test-badgw-" + tag,
           ["--restart", "always", "-e", "VTS_WORKERS=many", *_mounts("gateway", prepared)])
    _start(podman, containers, "fetcher", "vts-test-badfe-" + tag,
           ["--restart", "always", "-e", "VTS_UPSTREAM_URL=ftp://127.0.0.1:1", *_mounts("fetcher", prepared)])

    def restarts(name):
        return int(podman("inspect", "--format", "{{.RestartCount}}", name).stdout.strip())

    names = containers[-2:]
    # The third restart comes after pauses of 1 and 2 s; the fifth would need 1 + 2 + 4 + 8 s.
    assert wait_for(lambda: all(restarts(n) >= 3 for n in names), 20, interval=0.2), [restarts(n) for n in names]
    t0 = time.monotonic()
    wait_for(lambda: time.monotonic() - t0 > 5 or any(restarts(n) > 4 for n in names), 6, interval=0.2)
    assert all(restarts(n) <= 4 for n in names), [restarts(n) for n in names]
    for name, line in zip(names, ('VTS_WORKERS: invalid value "many"', "VTS_UPSTREAM_URL")):
        log = podman("logs", name).stderr + podman("logs", name).stdout
        assert line in log, log[-2000:]
        assert '"component":"entrypoint"' in log and '"msg":"started again within 60 s of the last start: ' \
            'waiting before the next","restarts":2,"wait_s":2}' in log, log[-2000:]
    # A stop during the pause is at once.
    t1 = time.monotonic()
    for name in names:
        podman("stop", "-t", "10", name)
    assert time.monotonic() - t1 < 8


def test_prepare_keeps_what_exists_and_makes_the_owners_and_modes_again(prepared):
    """A second run of deploy/prepare.sh replaces nothing and puts back the owners and modes the reference's table says;
    each certificate carries its role (the gateway's serves, the fetchers' is a client's) and the names dialled."""
    files = ["jobs-ca/ca.key", "jobs-ca/ca.crt", "jobs-tls/gateway/gateway.key", "jobs-tls/gateway/gateway.crt",
             "jobs-tls/fetcher/fetcher.key", "jobs-tls/fetcher/fetcher.crt", "keys/keys.db", ".env"]
    paths = [str(prepared / f) for f in files]
    before = root_run(["sha256sum", *paths]).stdout
    root_run(["chmod", "0644", str(prepared / "keys/keys.db"), str(prepared / "jobs-tls/fetcher/fetcher.key")])
    root_run(["chown", "root:root", str(prepared / "jobs-tls/gateway/gateway.key"), str(prepared / "keys")])
    out = root_run([str(REPO / "deploy" / "prepare.sh"), str(prepared)])
    assert out.returncode == 0, out.stderr
    assert root_run(["sha256sum", *paths]).stdout == before
    want = {"keys": "0:10001 2750", "keys/keys.db": "0:10001 640", "jobs-ca": "0:0 700", "jobs-ca/ca.key": "0:0 600",
            "jobs-ca/ca.crt": "0:0 644", "jobs-tls/gateway": "0:10001 750", "jobs-tls/gateway/ca.crt": "0:10001 640",
            "jobs-tls/gateway/gateway.crt": "0:10001 640", "jobs-tls/gateway/gateway.key": "0:10001 640",
            "jobs-tls/fetcher": "0:10002 750", "jobs-tls/fetcher/ca.crt": "0:10002 640",
            "jobs-tls/fetcher/fetcher.crt": "0:10002 640", "jobs-tls/fetcher/fetcher.key": "0:10002 640",
            ".env": "0:0 600"}
    got = root_run(["stat", "-c", "%u:%g %a", *(str(prepared / k) for k in want)]).stdout.splitlines()
    assert dict(zip(want, got)) == want
    # Nothing else in the folders the containers mount (no CA key, no request or serial file).
    listed = root_run(["find", str(prepared / "keys"), str(prepared / "jobs-tls"), "-type", "f"]).stdout.split()
    # (vts-keys's lock file beside the key file aside.)
    listed = [p[len(str(prepared)) + 1:] for p in listed if not p.endswith(".lock")]
    assert sorted(listed) == sorted(["keys/keys.db"] + [k for k in want if k.startswith("jobs-tls/") and "." in k])
    for role, usage in (("gateway", "TLS Web Server Authentication"), ("fetcher", "TLS Web Client Authentication")):
        text = root_run(["openssl", "x509", "-noout", "-text", "-in",
                         str(prepared / "jobs-tls" / role / (role + ".crt"))]).stdout
        assert re.search(r"Extended Key Usage:\s*\n\s*%s\s*\n" % usage, text), text
        assert "DNS:vts-gateway-jobs, DNS:gateway, DNS:localhost" in text
        verify = root_run(["openssl", "verify", "-CAfile", str(prepared / "jobs-tls" / role / "ca.crt"),
                           str(prepared / "jobs-tls" / role / (role + ".crt"))])
        assert verify.stdout.strip().endswith(": OK"), verify.stdout + verify.stderr


def test_the_build_context_leaves_out_secrets_build_trees_and_history(podman, images, tmp_path):
    """.dockerignore, applied by the engine itself to a copy of the repository's layout with the files prepare.sh
    and a build leave: only sources reach a build."""
    ctx = tmp_path / "ctx"
    present = ["common/buf.c", "deploy/container/vts-entrypoint", "CMakeLists.txt",
               "deploy/keys/keys.db", "deploy/jobs-ca/ca.key", "deploy/jobs-tls/gateway/gateway.key",
               "deploy/jobs-tls/fetcher/fetcher.key", "deploy/.env", "build/bin/vts-gateway", "build-asan/CMakeCache.txt",
               ".git/HEAD", ".run/keys.db", "state/quota.snapshot", "tests/contract/node_modules/x/index.js",
               "tests/unit/test_x.c", "elsewhere/server.key"]
    for rel in present:
        (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
        (ctx / rel).write_text("x\n")
    shutil.copy(REPO / ".dockerignore", ctx / ".dockerignore")
    (tmp_path / "Containerfile.ctx").write_text("FROM %s\nCOPY . /ctx\n" % BASE)
    tag = "localhost/vts-context-test:%d" % os.getpid()
    try:
        podman("build", "--network", "host", "-f", str(tmp_path / "Containerfile.ctx"), "-t", tag, str(ctx))
        seen = podman("run", "--rm", "--network", "none", tag, "find", "/ctx", "-type", "f").stdout.split()
    finally:
        podman("rmi", "-f", tag, check=False)
    assert sorted(p[len("/ctx/"):] for p in seen) == [".dockerignore", "CMakeLists.txt", "common/buf.c",
                                                      "deploy/container/vts-entrypoint"]
