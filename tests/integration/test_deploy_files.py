"""The deploy files checked against the binaries' real configuration: every deploy file is parsed (python3-yaml for
compose.yaml and k8s/*.yaml, a small parser for the Dockerfiles, configparser for supervisord.conf) and its wiring
compared with common/config.c's variable table, docs/REFERENCE.md's configuration table, the ports and timeouts the programs
use and the libraries they link; then each binary is run with each deploy file's environment (ports and paths moved
to free ones and a temporary directory) to prove the configuration loads and the pair serves a transcript.

No image is built (there is no container engine here): what a container would run is derived from the files."""
import configparser
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from certs import Certs
from conftest import ACTIVE_KEY, BUILD_DIR, REPO, Gateway, free_port, scrape, wait_for, write_keyfile

yaml = pytest.importorskip("yaml", reason="python3-yaml is needed to read deploy/compose.yaml and deploy/k8s/*.yaml")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fake_upstream"))
import harness  # noqa: E402

DEPLOY = REPO / "deploy"
# Variables of the launchers (deploy/run-local.sh, deploy/supervisord.conf), not of the programs.
LAUNCHER_VARS = {"VTS_RUN_DIR", "VTS_BIN", "VTS_FETCHERS", "VTS_BUILD_DIR"}
COMPILERS = {"build-essential", "gcc", "g++", "cc", "clang", "cmake", "make", "pkg-config", "cpp", "binutils",
             "libc6-dev", "libc-dev"}
# The sanitizer runtimes of a build-asan binary are not what an image ships.
SANITIZER_LIBS = re.compile(r"lib(asan|ubsan|lsan|tsan)\.so")


# ---- the programs' own configuration ----

def config_table():
    """{name: {"kind", "default", "min", "max"}} from the vars[] table of common/config.c."""
    src = (REPO / "common" / "config.c").read_text()
    body = src[src.index("static const struct var vars[] = {"):]
    body = body[:body.index("\n};")]
    table = {}
    for m in re.finditer(r'\{"(VTS_\w+)", (K_\w+), [^,]+, [^,]+, "([^"]*)"', body):
        table[m.group(1)] = {"kind": m.group(2), "default": m.group(3)}
    for m in re.finditer(r'\b(SECRET_S|S|B)\(\w+, "(VTS_\w+)", "([^"]*)"\)', body):
        table[m.group(2)] = {"kind": {"S": "K_STR", "SECRET_S": "K_STR", "B": "K_BOOL"}[m.group(1)],
                             "default": m.group(3)}
    for m in re.finditer(r'\bI\(\w+, "(VTS_\w+)", "([^"]*)", (-?\d+), (-?\d+)\)', body):
        table[m.group(1)] = {"kind": "K_INT", "default": m.group(2), "min": int(m.group(3)), "max": int(m.group(4))}
    assert len(table) == body.count('"VTS_'), "a row of config.c's table was not understood"
    return table


def c_constant(path, name):
    m = re.search(r"#define %s \(?(\d+)" % name, (REPO / path).read_text())
    assert m, "%s not found in %s" % (name, path)
    return int(m.group(1))


def effective(env, name):
    """The value a program sees: the deploy file's, else config.c's default."""
    return env.get(name, config_table()[name]["default"])


def host_port(value):
    """HOST:PORT, or a tcp:// URL -> (host, port)."""
    if "://" in value:
        u = urlsplit(value)
        return u.hostname, u.port
    host, _, port = value.rpartition(":")
    return host, int(port)


# ---- Dockerfiles ----

def parse_dockerfile(path):
    """[{"base", "name", "instr": [(KEYWORD, args text)]}] per stage, continuation lines joined, comments dropped."""
    lines, cur = [], ""
    for raw in Path(path).read_text().splitlines():
        if not cur and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if raw.rstrip().endswith("\\"):
            cur += raw.rstrip()[:-1] + " "
            continue
        lines.append(cur + raw)
        cur = ""
    stages, global_args = [], {}
    for line in lines:
        kw, _, args = line.strip().partition(" ")
        kw, args = kw.upper(), " ".join(args.split())
        if kw == "ARG" and not stages:
            name, _, default = args.partition("=")
            global_args[name] = default
        elif kw == "FROM":
            words = args.split()
            base = re.sub(r"\$\{(\w+)\}", lambda m: global_args[m.group(1)], words[0])
            stages.append({"base": base, "name": words[2] if len(words) > 2 else None, "instr": []})
        else:
            stages[-1]["instr"].append((kw, args))
    return stages


def docker_env(stage):
    env = {}
    for kw, args in stage["instr"]:
        if kw == "ENV":
            for item in shlex.split(args):
                k, _, v = item.partition("=")
                env[k] = v
    return env


def docker_exec_form(stage, kw):
    vals = [json.loads(args) for k, args in stage["instr"] if k == kw]
    return vals[-1] if vals else None


def docker_one(stage, kw):
    vals = [args for k, args in stage["instr"] if k == kw]
    return vals[-1] if vals else None


def apt_packages(run):
    """Packages named by the apt-get install commands of a RUN."""
    pkgs = []
    for cmd in re.split(r"&&|;|\|\|", run):
        words = cmd.split()
        if "apt-get" in words and "install" in words:
            pkgs += [w for w in words[words.index("install") + 1:] if not w.startswith("-")]
    return pkgs


def final_stage(name):
    return parse_dockerfile(DEPLOY / name)[-1]


def stage_packages(stage):
    return [p for kw, args in stage["instr"] if kw == "RUN" for p in apt_packages(args)]


def copied_binaries(stage):
    """Names of the vts binaries the stage copies from the build stage."""
    out = []
    for kw, args in stage["instr"]:
        if kw == "COPY" and args.startswith("--from="):
            out += [os.path.basename(w) for w in args.split()[1:-1]]
    return out


IMAGES = {"gateway": "Dockerfile.gateway", "fetcher": "Dockerfile.fetcher"}


# ---- compose and Kubernetes ----

def compose():
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def compose_service_of(image):
    for name, svc in compose()["services"].items():
        if svc.get("build", {}).get("dockerfile", "").endswith(IMAGES[image]):
            return name, svc
    raise AssertionError("no compose service builds " + IMAGES[image])


def compose_env(image):
    env = docker_env(final_stage(IMAGES[image]))
    env.update({k: str(v) for k, v in (compose_service_of(image)[1].get("environment") or {}).items()})
    return env


def k8s_docs():
    docs = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        docs += [(path.name, d) for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def k8s_find(kind, name=None):
    found = [d for _, d in k8s_docs() if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert found, "no %s %s in deploy/k8s" % (kind, name or "")
    return found


def k8s_deployment_of(image):
    for d in k8s_find("Deployment"):
        for c in d["spec"]["template"]["spec"]["containers"]:
            if c["image"].split(":")[0].endswith("vts-" + image):
                return d, c
    raise AssertionError("no Deployment runs vts-" + image)


def k8s_env(image):
    env = docker_env(final_stage(IMAGES[image]))
    # Values from a Secret (valueFrom) are not known here; those given inline are.
    env.update({e["name"]: str(e["value"]) for e in k8s_deployment_of(image)[1].get("env", []) if "value" in e})
    return env


def container_port(container, ref):
    """A container port by name or number."""
    for p in container.get("ports", []):
        if ref in (p.get("name"), p["containerPort"]):
            return p["containerPort"]
    raise AssertionError("container %s has no port %r" % (container["name"], ref))


def duration_s(text):
    """Compose durations: 1m30s, 40s, 500ms."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", str(text))
    assert parts and "".join(a + b for a, b in parts) == str(text), "not a duration: %r" % text
    return sum(float(n) * units[u] for n, u in parts)


def supervisord_conf():
    cp = configparser.RawConfigParser(inline_comment_prefixes=(";",))
    cp.read(DEPLOY / "supervisord.conf")
    return cp


# ---- names ----

def test_every_vts_variable_of_the_deploy_files_is_read_by_the_programs():
    table = config_table()
    # Shell variables the scripts define for each other (deploy/deps.sh's package lists, sourced by run-local.sh).
    own = set()
    for path in DEPLOY.glob("*.sh"):
        own |= set(re.findall(r"^\s*(VTS_[A-Z0-9_]+)=\(", path.read_text(), re.M))
    for path in sorted(p for p in DEPLOY.rglob("*") if p.is_file()):
        text = path.read_text()
        names = set(re.findall(r"\bVTS_[A-Z0-9_]+\b", text))
        unknown = sorted(n for n in names - set(table) - own - LAUNCHER_VARS)
        assert not unknown, "%s names variables no program reads: %s" % (path.relative_to(REPO), unknown)
        # A launcher variable must be explained in the comments of the file that reads it.
        comments = "\n".join(line for line in text.splitlines() if line.lstrip().startswith(("#", ";")))
        for n in sorted(names & LAUNCHER_VARS):
            assert n in comments, "%s uses %s without explaining it" % (path.relative_to(REPO), n)
    # Container environments are the programs' configuration only.
    for image in IMAGES:
        for env in (compose_env(image), k8s_env(image)):
            assert set(env) <= set(table), sorted(set(env) - set(table))


def _readme_rows():
    text = (REPO / "docs" / "REFERENCE.md").read_text()
    section = text[text.index("## Configuration"):]
    section = section[:section.index("\n## ", 5)]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and "`VTS_" in cells[0]:
            rows.append((re.findall(r"`(VTS_[A-Z0-9_]+)`", cells[0]), cells[1]))
    return rows


def test_every_config_variable_is_documented_in_the_readme_with_its_default():
    table = config_table()
    documented = {}
    for names, defaults in _readme_rows():
        values = [d.strip() for d in defaults.split(", ")] if len(names) > 1 else [defaults]
        assert len(values) == len(names), "reference row %s: %d defaults for %d names" % (names, len(values), len(names))
        for n, v in zip(names, values):
            quoted = re.search(r"`([^`]*)`", v)
            documented[n] = quoted.group(1) if quoted else ("" if v == "unset" else v)
    assert sorted(set(table) - set(documented)) == [], "config variables missing from docs/REFERENCE.md"
    assert sorted(set(documented) - set(table)) == [], "docs/REFERENCE.md documents variables config.c does not read"
    wrong = {n: (documented[n], table[n]["default"]) for n in table if documented[n] != table[n]["default"]}
    assert wrong == {}, "reference default differs from config.c (reference, config.c): %r" % wrong


# ---- ports and addresses ----

def test_gateway_ports_agree_everywhere():
    stage = final_stage("Dockerfile.gateway")
    exposed = {int(p.split("/")[0]) for p in docker_one(stage, "EXPOSE").split()}
    for label, env in (("Dockerfile", docker_env(stage)), ("compose", compose_env("gateway")),
                       ("k8s", k8s_env("gateway"))):
        http = host_port(effective(env, "VTS_LISTEN"))
        jobs = host_port(effective(env, "VTS_JOBS_URL"))
        metrics = host_port(effective(env, "VTS_METRICS_LISTEN"))
        # In a container, loopback would be unreachable for probes, the Service and the fetchers.
        assert http[0] == "0.0.0.0" and jobs[0] == "0.0.0.0", (label, http, jobs)
        assert {http[1], jobs[1], metrics[1]} <= exposed, (label, exposed)
        if label == "compose":
            published = {int(str(p).split(":")[-1].split("/")[0]) for p in compose_service_of("gateway")[1]["ports"]}
            assert published == {http[1]}, "compose publishes %s; the HTTP port is %d" % (published, http[1])
        if label == "k8s":
            dep, c = k8s_deployment_of("gateway")
            assert metrics[0] == "0.0.0.0", "Prometheus scrapes the pod address"
            assert container_port(c, "http") == http[1]
            assert container_port(c, "jobs") == jobs[1]
            assert container_port(c, "metrics") == metrics[1]
            svc = _k8s_gateway_service()
            targets = {p["name"]: container_port(c, p["targetPort"]) for p in svc["spec"]["ports"]}
            assert targets == {"http": http[1], "metrics": metrics[1]}, targets
            jsvc = _k8s_gateway_service(headless=True)
            targets = {p["name"]: container_port(c, p["targetPort"]) for p in jsvc["spec"]["ports"]}
            assert targets == {"jobs": jobs[1]}, targets


def _k8s_gateway_service(headless=False):
    """The one Service of the gateway pods that load-balances (HTTP, metrics), or with headless=True the one whose name
    resolves to every pod (the fetchers' jobs Service)."""
    dep, _ = k8s_deployment_of("gateway")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    services = [s for s in k8s_find("Service") if s["spec"].get("selector") and
                all(labels.get(k) == v for k, v in s["spec"]["selector"].items()) and
                (s["spec"].get("clusterIP") == "None") == headless]
    assert len(services) == 1, "exactly one %s Service must select the gateway pods" % (
        "headless" if headless else "load-balanced")
    return services[0]


def test_fetchers_dial_the_gateway_service_on_its_jobs_port():
    # compose: the service name resolves to the gateway container.
    gw_name, _ = compose_service_of("gateway")
    jobs_port = host_port(effective(compose_env("gateway"), "VTS_JOBS_URL"))[1]
    assert host_port(compose_env("fetcher")["VTS_JOBS_URL"]) == (gw_name, jobs_port)
    _, fsvc = compose_service_of("fetcher")
    assert gw_name in fsvc.get("depends_on", [])
    # Dockerfile default (a plain `docker run` next to a container named gateway).
    assert host_port(docker_env(final_stage("Dockerfile.fetcher"))["VTS_JOBS_URL"]) == ("gateway", jobs_port)

    # k8s: the headless Service's port that leads to the gateway container's jobs port. Headless, its name resolves
    # to every gateway pod, and a fetcher serves each address: every replica gets every fetcher.
    dep, c = k8s_deployment_of("gateway")
    svc = _k8s_gateway_service(headless=True)
    host, port = host_port(k8s_env("fetcher")["VTS_JOBS_URL"])
    assert host == svc["metadata"]["name"]
    by_port = {p["port"]: container_port(c, p["targetPort"]) for p in svc["spec"]["ports"]}
    assert by_port.get(port) == host_port(effective(k8s_env("gateway"), "VTS_JOBS_URL"))[1]
    assert dep["spec"].get("replicas", 1) >= 2, "the gateway tier runs more than one replica"


@pytest.mark.parametrize("where", ["compose", "k8s"])
def test_jobs_link_is_mutual_tls_with_files_mounted_read_only(where):
    for image in ("gateway", "fetcher"):
        env = compose_env(image) if where == "compose" else k8s_env(image)
        assert effective(env, "VTS_JOBS_URL").startswith("tls+tcp://"), (where, image)
        for var in ("VTS_JOBS_TLS_CA", "VTS_JOBS_TLS_CERT", "VTS_JOBS_TLS_KEY"):
            path = effective(env, var)
            if where == "compose":
                mounts = [v.split(":") for v in compose_service_of(image)[1]["volumes"]]
                assert any(m[2:] == ["ro"] and path.startswith(m[1].rstrip("/") + "/") for m in mounts), (image, var)
            else:
                dep, c = k8s_deployment_of(image)
                assert _k8s_secret_item(dep, c, path), (image, var, path)


def _k8s_secret_item(dep, c, path):
    """True when path is an item of a Secret mounted read-only in container c of Deployment dep."""
    volumes = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
    mount = [m for m in c.get("volumeMounts", []) if path.startswith(m["mountPath"].rstrip("/") + "/")]
    assert len(mount) == 1, "%s is on no mount" % path
    assert mount[0].get("readOnly") is True
    secret_name = volumes[mount[0]["name"]]["secret"]["secretName"]
    secret = k8s_find("Secret", secret_name)[0]
    item = path[len(mount[0]["mountPath"].rstrip("/")) + 1:]
    items = volumes[mount[0]["name"]]["secret"].get("items")
    keys = {i["path"]: i["key"] for i in items} if items else {k: k for k in secret.get("data", {})}
    return item in keys and keys[item] in secret["data"]


# ---- stopping ----

def _gateway_stop_budget_s(env):
    """The longest the master takes to stop: the drain, then the workers' and the dispatcher's grace."""
    grace = c_constant("gateway/master/master.c", "MASTER_STOP_GRACE_MS")
    return (int(effective(env, "VTS_DRAIN_TIMEOUT_MS")) + 2 * grace) / 1000


def _fetcher_stop_budget_s(gateway_env, fetcher_env):
    """The longest a busy fetcher takes to stop: its job's deadline (the dispatcher's, else its own), the watchdog's
    grace past it, then the wait for the acknowledgement of its last result."""
    job_ms = max(int(effective(gateway_env, "VTS_JOB_TIMEOUT_MS")), int(effective(fetcher_env, "VTS_JOB_TIMEOUT_MS")))
    if effective(gateway_env, "VTS_SPEECH_FALLBACK") in ("true", "1"):
        job_ms = max(job_ms, int(effective(gateway_env, "VTS_SPEECH_TIMEOUT_MS")))
    return (job_ms + c_constant("common/limits.h", "VTS_FETCHER_WATCHDOG_GRACE_MS") +
            c_constant("common/limits.h", "VTS_FETCHER_STOP_LINGER_MS")) / 1000


def _pre_stop_s(container):
    cmd = " ".join(container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", []))
    m = re.search(r"sleep (\d+)", cmd)
    return int(m.group(1)) if m else 0


def test_grace_periods_outlast_the_drain_and_the_job():
    genv, fenv = compose_env("gateway"), compose_env("fetcher")
    assert duration_s(compose_service_of("gateway")[1]["stop_grace_period"]) > _gateway_stop_budget_s(genv)
    assert duration_s(compose_service_of("fetcher")[1]["stop_grace_period"]) > _fetcher_stop_budget_s(genv, fenv)

    genv, fenv = k8s_env("gateway"), k8s_env("fetcher")
    for image, budget in (("gateway", _gateway_stop_budget_s(genv)), ("fetcher", _fetcher_stop_budget_s(genv, fenv))):
        dep, c = k8s_deployment_of(image)
        grace = dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        # The preStop pause runs inside the grace period, before SIGTERM.
        assert grace > _pre_stop_s(c) + budget, (image, grace, _pre_stop_s(c), budget)

    cp = supervisord_conf()
    assert int(cp["program:gateway"]["stopwaitsecs"]) > _gateway_stop_budget_s({})
    assert int(cp["program:fetcher"]["stopwaitsecs"]) > _fetcher_stop_budget_s({}, {})
    # Everything stops on SIGTERM, the signal both programs drain on.
    assert cp["program:gateway"]["stopsignal"] == cp["program:fetcher"]["stopsignal"] == "TERM"
    for image in IMAGES:
        assert docker_one(final_stage(IMAGES[image]), "STOPSIGNAL") in (None, "SIGTERM")


def test_supervisord_stops_the_gateway_before_the_fetchers_and_names_each_fetcher():
    cp = supervisord_conf()
    gw, fe = cp["program:gateway"], cp["program:fetcher"]
    # supervisord's shutdown stops higher priorities first, each group after the previous one has exited.
    assert int(gw["priority"]) > int(fe["priority"])
    assert fe["numprocs"] == "%(ENV_VTS_FETCHERS)s"
    assert "%(process_num)" in fe["process_name"], "numprocs needs a process_name with %(process_num)"
    assert "%(process_num)" in fe["stdout_logfile"], "one log file per fetcher"
    assert gw["command"] == "%(ENV_VTS_BIN)s/vts-gateway" and fe["command"] == "%(ENV_VTS_BIN)s/vts-fetcher"
    for prog in ("vts-gateway", "vts-fetcher"):
        assert os.access(BUILD_DIR / "bin" / prog, os.X_OK)
    # The master's children (workers, dispatcher) die with it when supervisord has to kill it.
    assert gw["killasgroup"] == "true"
    assert gw["autorestart"] == fe["autorestart"] == "true"


# ---- health ----

def test_probes_and_healthcheck_hit_health_and_ready_on_the_http_port():
    stage = final_stage("Dockerfile.gateway")
    hc = docker_one(stage, "HEALTHCHECK")
    # The image's health check script asks /health on the port of VTS_LISTEN, whatever it is (run for real, against
    # a real gateway, by test_containers.py), with a tool the image installs.
    (script,) = json.loads(hc.split(" CMD ", 1)[1])
    assert [args for kw, args in stage["instr"] if kw == "COPY" and script.rsplit("/", 1)[1] in args]
    text = (DEPLOY / "container" / script.rsplit("/", 1)[1]).read_text()
    assert "VTS_LISTEN" in text and "/health" in text
    probe_tool = re.search(r"^exec (\S+)", text, re.M).group(1)
    assert probe_tool in stage_packages(stage), "the HEALTHCHECK runs %s, which the image must install" % probe_tool

    _, c = k8s_deployment_of("gateway")
    http_port = host_port(effective(k8s_env("gateway"), "VTS_LISTEN"))[1]
    # Liveness is /health; readiness is /ready (503 until a fetcher is connected), and the headless Service the
    # fetchers dial still names the gateways not ready yet, or none would ever get its first fetcher.
    for probe, path in (("readinessProbe", "/ready"), ("livenessProbe", "/health")):
        get = c[probe]["httpGet"]
        assert get["path"] == path and container_port(c, get["port"]) == http_port, (probe, get)
    assert _k8s_gateway_service(headless=True)["spec"]["publishNotReadyAddresses"] is True


# ---- images ----

def test_images_run_as_a_non_root_user_and_k8s_runs_them_as_that_user():
    for image, name in IMAGES.items():
        stage = final_stage(name)
        user = docker_one(stage, "USER")
        assert user not in (None, "root", "0"), "%s runs as root" % name
        run = " ".join(args for kw, args in stage["instr"] if kw == "RUN")
        m = re.search(r"useradd [^&;]*--uid (\d+)[^&;]* %s\b" % re.escape(user), run)
        assert m, "%s must create its user %s with a fixed uid" % (name, user)
        dep, c = k8s_deployment_of(image)
        sc = dict(dep["spec"]["template"]["spec"].get("securityContext", {}), **c.get("securityContext", {}))
        assert sc.get("runAsNonRoot") is True and sc.get("runAsUser") == int(m.group(1)), (image, sc)


def _package_of(lib_path):
    real = os.path.realpath(lib_path)
    for cand in (real, real.replace("/usr/lib/", "/lib/", 1), lib_path):
        out = subprocess.run(["dpkg", "-S", cand], capture_output=True, text=True)
        if out.returncode == 0:
            return out.stdout.split(":")[0]
    raise AssertionError("no Debian package owns " + lib_path)


def _installed_closure(pkgs):
    """The packages pkgs pull in through Depends and Pre-Depends (installed ones, as dpkg knows them)."""
    seen, todo = set(), list(pkgs)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        out = subprocess.run(["dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}", p], capture_output=True, text=True)
        for alt in out.stdout.split(","):
            name = alt.split("|")[0].strip().split(" ")[0].split(":")[0]
            if name:
                todo.append(name)
    return seen


def _in_base_image(pkg):
    """debian:*-slim holds the Essential and Priority: required packages."""
    out = subprocess.run(["dpkg-query", "-W", "-f=${Essential} ${Priority}", pkg], capture_output=True, text=True)
    return out.returncode == 0 and ("yes" in out.stdout.split() or "required" in out.stdout.split())


@pytest.mark.skipif(not os.path.exists("/usr/bin/dpkg-query"), reason="dpkg is needed to map libraries to packages")
def test_final_stages_install_only_the_runtime_libraries_the_binaries_link():
    for image, name in IMAGES.items():
        stage = final_stage(name)
        pkgs = stage_packages(stage)
        assert pkgs, name
        build_only = [p for p in pkgs if p.endswith("-dev") or p in COMPILERS]
        assert build_only == [], "%s ships build tools: %s" % (name, build_only)
        assert all(s["base"] == stage["base"] for s in parse_dockerfile(DEPLOY / name)[:1]), "same distribution"
        provided = _installed_closure(pkgs)
        for binary in copied_binaries(stage):
            path = BUILD_DIR / "bin" / binary
            needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                                subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True).stdout)
            ldd = dict(re.findall(r"^\s*(\S+) => (\S+)", subprocess.run(["ldd", str(path)], capture_output=True,
                                                                         text=True).stdout, re.M))
            for lib in needed:
                if SANITIZER_LIBS.match(lib):
                    continue
                pkg = _package_of(ldd[lib])
                assert pkg in provided or _in_base_image(pkg), \
                    "%s links %s (package %s), which %s does not install" % (binary, lib, pkg, name)


def test_writable_paths_exist_in_the_image_owned_by_its_user():
    """A named volume takes the owner of the image's directory at its mount point; one the image lacks is root's,
    and the non-root gateway could not write its quota snapshots there."""
    stage = final_stage("Dockerfile.gateway")
    user = docker_one(stage, "USER")
    run = " ".join(args for kw, args in stage["instr"] if kw == "RUN")
    owned = set()
    for m in re.finditer(r"install -d -o %s -g \S+ ([^&;]+)" % re.escape(user), run):
        owned.update(m.group(1).split())
    home = re.search(r"useradd [^&;]*--home-dir (\S+)[^&;]*--create-home", run)
    if home:
        owned.add(home.group(1))
    state = effective(compose_env("gateway"), "VTS_STATE_DIR")
    mounts = [v.split(":")[1] for v in compose_service_of("gateway")[1].get("volumes", [])
              if not v.startswith((".", "/")) and not v.endswith(":ro")]
    assert state in mounts, "compose keeps VTS_STATE_DIR (%s) in a volume" % state
    for target in mounts:
        assert target in owned, "%s is a volume the image must create owned by %s" % (target, user)
    _, c = k8s_deployment_of("gateway")
    writable = [m["mountPath"] for m in c["volumeMounts"] if not m.get("readOnly")]
    assert effective(k8s_env("gateway"), "VTS_STATE_DIR") in writable


def test_k8s_secret_is_mounted_where_vts_keys_file_points():
    dep, c = k8s_deployment_of("gateway")
    keys_file = effective(k8s_env("gateway"), "VTS_KEYS_FILE")
    assert _k8s_secret_item(dep, c, keys_file), keys_file
    # compose mounts the host's folder of the key file (a folder, so that a rewritten file is seen), read-only.
    ckeys = effective(compose_env("gateway"), "VTS_KEYS_FILE")
    assert any(v.split(":")[1:] == [os.path.dirname(ckeys), "ro"] for v in compose_service_of("gateway")[1]["volumes"])


def _selects(selector, dep):
    """True when a matchLabels selector picks the Deployment's pods."""
    labels = dep["spec"]["template"]["metadata"]["labels"]
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def test_gateways_scale_on_cpu_from_two_and_a_disruption_keeps_one():
    dep, c = k8s_deployment_of("gateway")
    hpas = k8s_find("HorizontalPodAutoscaler")
    assert len(hpas) == 1, "fetchers scale on work (ScaledObject), gateways on CPU: one HPA"
    spec = hpas[0]["spec"]
    ref = spec["scaleTargetRef"]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == ("apps/v1", "Deployment", dep["metadata"]["name"])
    assert 2 <= spec["minReplicas"] <= spec["maxReplicas"]
    assert dep["spec"]["replicas"] >= 2
    # A CPU utilisation target is a percentage of the pods' CPU request: without one the HPA cannot act.
    assert [m["resource"]["name"] for m in spec["metrics"] if m["type"] == "Resource"] == ["cpu"]
    assert c["resources"]["requests"]["cpu"]
    pdbs = k8s_find("PodDisruptionBudget")
    assert len(pdbs) == 1
    assert _selects(pdbs[0]["spec"]["selector"]["matchLabels"], dep)
    assert 1 <= pdbs[0]["spec"]["minAvailable"] < spec["minReplicas"], "a PDB as large as the floor blocks drains"
    assert not _selects(pdbs[0]["spec"]["selector"]["matchLabels"], k8s_deployment_of("fetcher")[0])


def test_fetchers_scale_on_the_job_gauges_the_gateways_export(tmp_path):
    dep, c = k8s_deployment_of("fetcher")
    objs = k8s_find("ScaledObject")
    assert len(objs) == 1
    spec = objs[0]["spec"]
    ref = spec["scaleTargetRef"]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == ("apps/v1", "Deployment", dep["metadata"]["name"])
    assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metadata"]["metricType"] == "AverageValue"
    # One fetcher pod runs --workers N, each taking one job: N jobs a pod is the threshold.
    args = c.get("args", [])
    assert trigger["metadata"]["threshold"] == args[args.index("--workers") + 1]
    # The query reads gauges a real gateway exports, labelled as the gateway pods are.
    query = trigger["metadata"]["query"]
    names = set(re.findall(r"\b(vts_\w+)\{", query))
    assert names == {"vts_jobs_queued", "vts_jobs_in_flight"}
    gw_labels = k8s_deployment_of("gateway")[0]["spec"]["template"]["metadata"]["labels"]
    for k, v in re.findall(r'(\w+)="([^"]*)"', query):
        assert gw_labels.get(k) == v, (k, v)
    gw = Gateway(tmp_path).start()
    try:
        text = scrape(gw.metrics_port)
    finally:
        gw.stop()
    for name in names:
        assert "# TYPE %s gauge\n" % name in text, name
        assert re.search(r"^%s 0$" % name, text, re.M), name


# ---- what the containers would run ----

def container_argv(image, where):
    """The argv of the image's container: ENTRYPOINT + CMD, with compose's command or k8s's args replacing CMD."""
    stage = final_stage(IMAGES[image])
    entry = docker_exec_form(stage, "ENTRYPOINT") or []
    # The images' entrypoint pauses after a quick exit, then runs the program (its argument) as process 1.
    assert entry[:1] == ["/usr/local/bin/vts-entrypoint"], entry
    entry = entry[1:]
    cmd = docker_exec_form(stage, "CMD") or []
    if where == "compose":
        svc = compose_service_of(image)[1]
        assert "entrypoint" not in svc
        cmd = svc.get("command", cmd)
    elif where == "k8s":
        c = k8s_deployment_of(image)[1]
        assert "command" not in c
        cmd = c.get("args", cmd)
    return entry + cmd


@pytest.fixture(scope="module")
def upstream():
    fake = harness.FakeUpstream()
    yield fake
    fake.close()


def _jobs_url(deploy_env, gw):
    """The deploy environment's jobs URL (its scheme kept) moved to the gateway's free port of 127.0.0.1."""
    return "%s://127.0.0.1:%d" % (urlsplit(deploy_env["VTS_JOBS_URL"]).scheme, gw.jobs_port)


def _local_tls(env, certs, leaf):
    """The VTS_JOBS_TLS_* files of a deploy environment replaced by certificates made for the test."""
    if "VTS_JOBS_TLS_CA" in env:
        env.update(certs.env(leaf))


def _local_env(deploy_env, gw, upstream_url):
    """A deploy environment with its addresses moved to free ports of 127.0.0.1 and its paths into the test's dir."""
    env = dict(deploy_env)
    env["VTS_LISTEN"] = "127.0.0.1:%d" % gw.port
    env["VTS_JOBS_URL"] = _jobs_url(deploy_env, gw)
    env["VTS_METRICS_LISTEN"] = "127.0.0.1:%d" % gw.metrics_port
    env["VTS_KEYS_FILE"] = str(gw.keys_file)
    env["VTS_STATE_DIR"] = str(gw.state_dir)
    for var in ("VTS_REDIS_URL", "VTS_REDIS_CACHE_URL"):
        if var in env:
            # Nobody listens there: the gateway falls back to its memory limiter and cache, as with Redis down.
            env[var] = "redis://127.0.0.1:%d/0" % free_port()
    env["VTS_UPSTREAM_URL"] = upstream_url
    return env


@pytest.mark.parametrize("where", ["compose", "k8s"])
def test_each_binary_runs_with_the_deploy_environment_and_the_pair_serves(tmp_path, upstream, where):
    genv = compose_env("gateway") if where == "compose" else k8s_env("gateway")
    fenv = compose_env("fetcher") if where == "compose" else k8s_env("fetcher")
    gw = Gateway(tmp_path, workers=2)
    gw.env = {k: v for k, v in gw.env.items() if not k.startswith("VTS_") or k == "VTS_WORKERS"}
    gw.env.update(_local_env(genv, gw, upstream.url))
    certs = Certs(tmp_path / "certs")
    _local_tls(gw.env, certs, "gateway")
    write_keyfile(gw.keys_file, [("deploy", ACTIVE_KEY, "active", 1000, 60, 100000)])
    argv = container_argv("fetcher", where)
    assert argv[0] == "/usr/local/bin/vts-fetcher" and container_argv("gateway", where) == ["/usr/local/bin/vts-gateway"]
    fetcher = None
    try:
        gw.start()  # config_load accepted it: /health answers 200
        r = gw.request("GET", "/health")
        assert r.status == 200 and r.json()["environment"] == genv.get("VTS_ENV", "development")

        local = {k: v for k, v in os.environ.items() if not k.startswith("VTS_")}
        local.update(fenv)
        # The fetcher's address of the gateway is moved with the gateway's own (the wiring is checked above).
        assert host_port(fenv["VTS_JOBS_URL"])[1] == host_port(genv["VTS_JOBS_URL"])[1]
        local.update({"VTS_JOBS_URL": _jobs_url(fenv, gw), "VTS_UPSTREAM_URL": upstream.url,
                      "ASAN_OPTIONS": "detect_leaks=0"})
        _local_tls(local, certs, "fetcher")
        fetcher = subprocess.Popen([str(BUILD_DIR / "bin" / "vts-fetcher"), *argv[1:]], env=local,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)
        workers = int(argv[argv.index("--workers") + 1]) if "--workers" in argv else 1
        wait_for(lambda: fetcher.poll() is not None or gw.metric("vts_fetchers_idle") == workers, 10)
        assert fetcher.poll() is None, "vts-fetcher %s exited: %s" % (argv[1:], fetcher.stderr.read())
        assert gw.metric("vts_fetchers_idle") == workers
        r = gw.request("GET", "/v1/video/transcript?video_id=capJson3xx1", headers={"x-api-key": ACTIVE_KEY})
        assert r.status == 200, r
        assert r.json()["text"] == "Hello and welcome to the fake platform"

        fetcher.send_signal(signal.SIGTERM)
        assert fetcher.wait(timeout=10) == 0
    finally:
        if fetcher is not None:
            if fetcher.poll() is None:
                os.killpg(fetcher.pid, signal.SIGKILL)
                fetcher.wait(timeout=5)
            fetcher.stderr.close()
        rc = gw.stop()
    assert rc == 0, gw.log_text()[-2000:]


def test_only_gateway_pods_reach_redis_and_both_use_the_password_secret():
    policies = [p for p in k8s_find("NetworkPolicy")
                if p["spec"]["podSelector"]["matchLabels"] == {"app": "vts", "component": "redis"}]
    assert len(policies) == 1, "no NetworkPolicy selects the Redis pods"
    spec = policies[0]["spec"]
    assert spec["policyTypes"] == ["Ingress"]
    assert spec["ingress"] == [{"from": [{"podSelector": {"matchLabels": {"app": "vts", "component": "gateway"}}}],
                                "ports": [{"port": 6379, "protocol": "TCP"}]}]
    redis = k8s_find("StatefulSet", "vts-redis")[0]["spec"]["template"]["spec"]["containers"][0]
    assert redis["args"][-2:] == ["--requirepass", "$(REDIS_PASSWORD)"]
    _, gw = k8s_deployment_of("gateway")
    secret_ref = {"secretKeyRef": {"name": "vts-redis", "key": "password"}}
    for c in (redis, gw):
        assert {"name": "REDIS_PASSWORD", "valueFrom": secret_ref} in c["env"]
    # Kubernetes expands $(REDIS_PASSWORD) only when it is defined earlier in the list.
    names = [e["name"] for e in gw["env"]]
    assert names.index("REDIS_PASSWORD") < names.index("VTS_REDIS_URL")
    assert k8s_env("gateway")["VTS_REDIS_URL"] == "redis://:$(REDIS_PASSWORD)@vts-redis:6379/0"
    assert k8s_find("Secret", "vts-redis")


def test_mounted_secrets_are_folders_readable_by_the_images_group_and_hold_no_ca_key():
    """The images' users own a fixed gid equal to their uid; Kubernetes mounts each Secret as a folder with mode 0440
    and that gid as fsGroup (and a missing Secret stops the pod: optional: false); compose mounts per-role folders of
    deploy/prepare.sh, never the CA's."""
    for image, name in IMAGES.items():
        stage = final_stage(name)
        run = " ".join(args for kw, args in stage["instr"] if kw == "RUN")
        user = docker_one(stage, "USER")
        gid = int(re.search(r"groupadd [^&;]*--gid (\d+) %s\b" % re.escape(user), run).group(1))
        uid = re.search(r"useradd [^&;]*--uid (\d+)[^&;]* %s\b" % re.escape(user), run)
        assert re.search(r"useradd [^&;]*--gid %d\b" % gid, run) and int(uid.group(1)) == gid, name
        dep, c = k8s_deployment_of(image)
        sc = dep["spec"]["template"]["spec"]["securityContext"]
        assert (sc["runAsUser"], sc["runAsGroup"], sc["fsGroup"]) == (gid, gid, gid), (image, sc)
        secrets = [v["secret"] for v in dep["spec"]["template"]["spec"]["volumes"] if "secret" in v]
        assert secrets, image
        for sec in secrets:
            assert sec.get("defaultMode") == 0o440 and sec.get("optional") is False, (image, sec)
            assert "items" not in sec
        assert not any("subPath" in m for m in c.get("volumeMounts", [])), "a subPath mount never sees a new version"
        binds = [v.split(":") for v in compose_service_of(image)[1]["volumes"] if v.startswith("./")]
        assert binds, image
        for host, _target, mode in binds:
            assert mode == "ro" and "jobs-ca" not in host and not os.path.splitext(host)[1], (image, host)
        # deploy/prepare.sh gives each of these folders the image's group.
        prepare = (DEPLOY / "prepare.sh").read_text()
        ids = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)=(\d+)$", prepare, re.M)}
        for host, _target, _mode in binds:
            m = re.search(r"chown -R root:\$(\w+) [^\n]*\"\$dir/%s\"" % re.escape(host[2:]), prepare)
            assert m and ids.get(m.group(1)) == gid, (image, host)
        assert "%d" % gid in (DEPLOY / "compose.yaml").read_text().split("services:")[0], "compose's header names it"


def test_shipped_defaults_are_mutual_tls_and_a_redis_password():
    """Plain tcp off loopback is a start error (VTS_JOBS_INSECURE): the images' own defaults are mutual TLS, and
    compose runs Redis with the password deploy/prepare.sh writes to deploy/.env, which the gateway's URL carries."""
    for name in IMAGES.values():
        env = docker_env(final_stage(name))
        assert env["VTS_JOBS_URL"].startswith("tls+tcp://"), name
        assert all(env.get(v) for v in ("VTS_JOBS_TLS_CA", "VTS_JOBS_TLS_CERT", "VTS_JOBS_TLS_KEY")), name
        assert "VTS_JOBS_INSECURE" not in env
    for image in IMAGES:
        assert "VTS_JOBS_INSECURE" not in compose_env(image) and "VTS_JOBS_INSECURE" not in k8s_env(image)
    redis = compose()["services"]["redis"]["command"]
    password = redis[redis.index("--requirepass") + 1]
    assert password == "${REDIS_PASSWORD:?run deploy/prepare.sh first}"
    assert compose_env("gateway")["VTS_REDIS_URL"] == "redis://:%s@redis:6379/0" % password
    assert re.search(r"^  printf 'REDIS_PASSWORD=%s\\n' \"\$\(openssl rand -hex 32\)\" >\"\$dir/.env\"$",
                     (DEPLOY / "prepare.sh").read_text(), re.M)


def _redis_conf(name):
    """{directive: value} of deploy/redis/NAME."""
    conf = {}
    for line in (DEPLOY / "redis" / name).read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.strip().partition(" ")
            conf[key] = value
    return conf


def test_shipped_redis_run_the_counters_and_the_cache_configurations():
    """compose's counters Redis (VTS_REDIS_URL) loads deploy/redis/counters.conf (bounded, noeviction) and its cache
    Redis (VTS_REDIS_CACHE_URL) deploy/redis/cache.conf (bounded, allkeys-lru), both with the password; Kubernetes'
    Redis carries counters.conf's bound and policy."""
    counters, cache = _redis_conf("counters.conf"), _redis_conf("cache.conf")
    assert (counters["maxmemory-policy"], cache["maxmemory-policy"]) == ("noeviction", "allkeys-lru")
    services = compose()["services"]
    password = "${REDIS_PASSWORD:?run deploy/prepare.sh first}"
    for service, conf in (("redis", "counters.conf"), ("redis-cache", "cache.conf")):
        s = services[service]
        assert s["command"] == ["redis-server", "/usr/local/etc/redis/" + conf, "--requirepass", password], service
        assert "./redis:/usr/local/etc/redis:ro" in s["volumes"], service
    genv = compose_env("gateway")
    assert genv["VTS_REDIS_URL"] == "redis://:%s@redis:6379/0" % password
    assert genv["VTS_REDIS_CACHE_URL"] == "redis://:%s@redis-cache:6379/0" % password
    assert set(services["gateway"]["depends_on"]) == {"redis", "redis-cache"}
    args = k8s_find("StatefulSet", "vts-redis")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    for key in ("maxmemory", "maxmemory-policy", "appendonly", "appendfsync"):
        assert args[args.index("--" + key) + 1] == counters[key], key
