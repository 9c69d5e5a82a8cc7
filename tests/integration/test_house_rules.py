"""The habits the build enforces: tests/style/check.sh refuses what it should, and a skip fails a CI run.

Both are run as a newcomer's change would meet them: the style check on a scratch git tree of its own, the skip rule
through a pytest run that loads this suite's conftest.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECK = REPO / "tests" / "style" / "check.sh"
HERE = Path(__file__).resolve().parent

CLEAN_C = '#include "common/x.h"\n\nint x_value(int a) { return a + 1; }\n'


def _git(tree, *args):
    subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True)


def _scratch_tree(tmp_path, files):
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(REPO / ".clang-format", tree / ".clang-format")
    for name, text in files.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)
    _git(tree, "init", "-q")
    _git(tree, "add", "-A")
    return tree


def _check(tree):
    env = dict(os.environ, VTS_STYLE_ROOT=str(tree))
    return subprocess.run([str(CHECK)], env=env, capture_output=True, text=True, timeout=60)


def test_style_check_passes_a_clean_tree(tmp_path):
    tree = _scratch_tree(tmp_path, {"common/x.c": CLEAN_C})
    r = _check(tree)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "style: ok (1 C files formatted, 1 production files free of banned calls)"


def test_style_check_names_each_offence(tmp_path):
    tree = _scratch_tree(tmp_path, {
        "common/x.c": CLEAN_C,
        "gateway/http/bad.c": "#include <stdio.h>\n\nvoid bad_name(char *o, int v) { sprintf(o, \"%d\", v); }\n",
        "fetcher/process/ugly.c": "int  ugly_f( int a ){return a;}\n",
        "gateway/keys/ok.c": "#include <stdlib.h>\n\nlong ok_parse(const char *s) { return strtol(s, NULL, 10); }\n",
        "tests/unit/t.c": "#include <stdlib.h>\n\nint t_value(const char *s) { return atoi(s); }\n",
        "state/quota.snapshot": "x\n",
        "gw.log": "x\n",
    })
    r = _check(tree)
    assert r.returncode == 1, r.stdout
    out = r.stdout.splitlines()
    assert "style: not formatted (run clang-format -i on these files)" in out
    assert "  fetcher/process/ugly.c:1" in out, r.stdout
    assert "style: banned function (use snprintf, buf_*, strtok_r, gmtime_r, util_parse_i64)" in out
    assert any(line.startswith("  gateway/http/bad.c:3:") and "sprintf(" in line for line in out), r.stdout
    # strtol is not banned, and tests/ is not production code.
    assert not any("ok.c" in line or "tests/unit/t.c:3" in line for line in out), r.stdout
    assert "style: runtime file tracked (git rm --cached it; .gitignore covers it)" in out
    assert "  state/quota.snapshot" in out and "  gw.log" in out


def test_style_check_refuses_a_circle_of_includes(tmp_path):
    tree = _scratch_tree(tmp_path, {
        "gateway/limits/a.h": '#include "gateway/limits/b.h"\n',
        "gateway/limits/a.c": '#include "gateway/limits/a.h"\n',
        "gateway/limits/b.h": "struct b_thing;\n",
        "gateway/limits/b.c": '#include "gateway/limits/b.h"\n#include "gateway/limits/a.h"\n',
        "common/x.c": CLEAN_C,
    })
    r = _check(tree)
    assert r.returncode == 1, r.stdout
    out = r.stdout.splitlines()
    assert out == ["style: include circle (move what both sides need into a header of its own)",
                   "  gateway/limits/a -> gateway/limits/b -> gateway/limits/a"], r.stdout
    # One direction only is fine: b no longer includes a.
    (tree / "gateway/limits/b.c").write_text('#include "gateway/limits/b.h"\n')
    assert _check(tree).returncode == 0


# Each process's folder order: a tree with an include that goes up (or across a floor) and one in a folder the order
# does not name, the lines the check prints, and the fixes (a file's new text, or None to remove it) after which the
# tree passes.
FOLDER_ORDERS = {
    "fetcher": (
        {
            "fetcher/course/course.h": "struct course;\n",
            "fetcher/egress/up.h": '#include "fetcher/course/course.h"\n',
            "fetcher/readers/r.h": "struct r_thing;\n",
            "fetcher/nowhere/n.h": '#include "fetcher/readers/r.h"\n',
        },
        [
            "style: upward include between the fetcher's folders "
            "(order: process course speech platform captions egress readers)",
            "  fetcher/egress/up.h:1: includes fetcher/course",
            "  fetcher/nowhere/n.h: the folder fetcher/nowhere has no place in the order",
        ],
        # Downward is fine: course may include egress, egress the readers.
        {
            "fetcher/egress/up.h": '#include "fetcher/readers/r.h"\n',
            "fetcher/course/course.h": '#include "fetcher/egress/up.h"\n',
            "fetcher/nowhere/n.h": None,
        },
    ),
    "gateway": (
        {
            "gateway/master/m.c": '#include "gateway/http/h.h"\n',
            "gateway/http/h.h": "struct h_thing;\n",
            "gateway/metrics/up.h": '#include "gateway/http/h.h"\n',
            "gateway/cache/c.h": "struct c_thing;\n",
            "gateway/jobs/across.c": '#include "gateway/cache/c.h"\n',
            "gateway/redis/r.h": "struct r_thing;\n",
            "gateway/nowhere/n.h": '#include "gateway/redis/r.h"\n',
        },
        [
            "style: upward include between the gateway's folders "
            "(floors: master > http > dispatcher > jobs, limits, cache > keys, metrics, redis)",
            "  gateway/jobs/across.c:1: includes gateway/cache",
            "  gateway/metrics/up.h:1: includes gateway/http",
            "  gateway/nowhere/n.h: the folder gateway/nowhere has no place in the order",
        ],
        # Down a floor or more is fine: the master may include http, metrics nothing above, jobs the redis floor.
        {
            "gateway/metrics/up.h": "struct up_thing;\n",
            "gateway/jobs/across.c": '#include "gateway/redis/r.h"\n',
            "gateway/nowhere/n.h": None,
        },
    ),
}


@pytest.mark.parametrize("process", sorted(FOLDER_ORDERS))
def test_style_check_refuses_an_include_up_or_across_a_process_folder_order(tmp_path, process):
    files, refused, fixes = FOLDER_ORDERS[process]
    tree = _scratch_tree(tmp_path, {**files, "common/x.c": CLEAN_C})
    r = _check(tree)
    assert r.returncode == 1, r.stdout
    assert r.stdout.splitlines() == refused, r.stdout
    for path, text in fixes.items():
        if text is None:
            (tree / path).unlink()
        else:
            (tree / path).write_text(text)
    _git(tree, "add", "-A")
    r = _check(tree)
    assert r.returncode == 0, r.stdout


def test_style_check_sees_new_files_before_they_are_committed(tmp_path):
    tree = _scratch_tree(tmp_path, {"common/x.c": CLEAN_C})
    (tree / "proto").mkdir()
    (tree / "proto" / "new.c").write_text('#include <string.h>\n\nvoid new_copy(char *d, const char *s) { strcpy(d, s); }\n')
    r = _check(tree)
    assert r.returncode == 1
    assert any(line.startswith("  proto/new.c:3:") for line in r.stdout.splitlines()), r.stdout


# The sleeps are spelt through SLEEP, so that this file itself does not hold one.
SLEEP = "time.sleep"
SLEEPY_PY = f"""import time


def test_waits():
    {SLEEP}(0.1)
    {SLEEP}(0.2)  # the wait is the test: an idle connection
    {SLEEP}(0.3)  # poll interval: until the deadline
    {SLEEP}(0.4)  # a pause
    {SLEEP}(0.5)  # poll interval:
"""

SLEEPY_C = """#include <time.h>
#include <unistd.h>

void t_wait(void) {
  usleep(1000);
  sleep(1); /* the wait is the test: a window of the wall clock */
  struct timespec ts = {0, 1000};
  nanosleep(&ts, NULL);
}
"""


def test_style_check_refuses_a_bare_sleep_in_a_test(tmp_path):
    tree = _scratch_tree(tmp_path, {
        "common/x.c": CLEAN_C,
        "tests/integration/test_a.py": SLEEPY_PY,
        "tests/fake_upstream/f.py": f"import time\n\n\ndef drip():\n    {SLEEP}(1)\n",
        "tests/unit/t.c": SLEEPY_C,
        # Outside what the rule reads: C beside the unit tests, and Python outside tests/.
        "tests/bench/b.c": SLEEPY_C,
        "deploy/d.py": f"import time\n\n{SLEEP}(1)\n",
    })
    r = _check(tree)
    assert r.returncode == 1, r.stdout
    assert r.stdout.splitlines() == [
        'style: bare sleep in a test (wait for the event with a bounded poll, or give the reason on its line: '
        '"the wait is the test: ..." or "poll interval: ...")',
        f"  tests/fake_upstream/f.py:5:    {SLEEP}(1)",
        f"  tests/integration/test_a.py:5:    {SLEEP}(0.1)",
        f"  tests/integration/test_a.py:8:    {SLEEP}(0.4)  # a pause",
        f"  tests/integration/test_a.py:9:    {SLEEP}(0.5)  # poll interval:",
        "  tests/unit/t.c:5:  usleep(1000);",
        "  tests/unit/t.c:8:  nanosleep(&ts, NULL);"], r.stdout
    # Each sleep given its reason (or gone) passes.
    fixed = SLEEPY_PY.replace("  # a pause", "  # the wait is the test: a slow peer")
    fixed = fixed.replace("# poll interval:\n", "# poll interval: within 5 s\n").replace(f"    {SLEEP}(0.1)\n", "")
    (tree / "tests/integration/test_a.py").write_text(fixed)
    (tree / "tests/fake_upstream/f.py").write_text(
        f"import time\n\n\ndef drip():\n    {SLEEP}(1)  # the wait is the test: a platform that drips\n")
    (tree / "tests/unit/t.c").write_text(SLEEPY_C.replace("  usleep(1000);\n", "")
                                         .replace("  nanosleep(&ts, NULL);",
                                                  "  nanosleep(&ts, NULL);  // poll interval: until done"))
    r = _check(tree)
    assert r.returncode == 0, r.stdout


SKIPPING_TESTS = '''
import pytest

def test_runs():
    assert True

def test_needs_a_tool():
    pytest.skip("frobnicate is not installed")
'''

SKIPPING_MODULE = '''
import pytest
pytest.importorskip("vts_no_such_module", reason="vts_no_such_module is needed")

def test_never_collected():
    assert True
'''


def _pytest(tmp_path, source, ci, require=""):
    test_file = tmp_path / "cases" / "test_cases.py"
    test_file.parent.mkdir(exist_ok=True)
    test_file.write_text(source)
    skip_log = tmp_path / "skips.txt"
    if skip_log.exists():
        skip_log.unlink()
    env = dict(os.environ, PYTHONPATH=str(HERE), VTS_SKIP_LOG=str(skip_log), VTS_REQUIRE=require)
    env.pop("CI", None)
    if ci:
        env["CI"] = "true"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
                        "--rootdir", str(test_file.parent), str(test_file)],
                       env=env, capture_output=True, text=True, timeout=120, cwd=str(test_file.parent))
    return r, skip_log.read_text() if skip_log.exists() else ""


def test_a_skip_is_counted_and_passes_outside_ci(tmp_path):
    r, skips = _pytest(tmp_path, SKIPPING_TESTS, ci=False)
    assert r.returncode == 0, r.stdout
    assert "1 passed, 1 skipped" in r.stdout
    assert skips == "test_cases.py::test_needs_a_tool: frobnicate is not installed\n"


def test_a_skip_fails_the_run_under_ci(tmp_path):
    r, skips = _pytest(tmp_path, SKIPPING_TESTS, ci=True)
    assert r.returncode == 1, r.stdout
    assert "1 failed, 1 passed" in r.stdout
    assert "skipped under CI=true, which makes a skip a failure: frobnicate is not installed" in r.stdout
    assert skips == "test_cases.py::test_needs_a_tool: frobnicate is not installed\n"


def test_a_skipped_module_fails_the_run_under_ci(tmp_path):
    r, skips = _pytest(tmp_path, SKIPPING_MODULE, ci=True)
    assert r.returncode != 0, r.stdout
    assert "skipped under CI=true, which makes a skip a failure: vts_no_such_module is needed" in r.stdout
    assert skips == "test_cases.py: vts_no_such_module is needed\n"


def _unit_program(tmp_path, name, ci, require=""):
    from conftest import BUILD_DIR
    skip_log = tmp_path / f"skips-{ci}-{require}.txt"
    env = dict(os.environ, VTS_SHARED_FIXTURES=str(tmp_path / "no-captures"), VTS_SKIP_LOG=str(skip_log),
               VTS_REQUIRE=require)
    env.pop("CI", None)
    if ci:
        env["CI"] = "true"
    r = subprocess.run([str(BUILD_DIR / "bin" / name)], env=env, capture_output=True, text=True, timeout=60)
    return r, skip_log.read_text().splitlines() if skip_log.exists() else []


def test_a_unit_test_without_the_captures_is_not_run_here_and_fails_where_required(tmp_path):
    """test_conformance without the captures: eleven cases are "not run here (captures)" with how to get them, even
    under CI=true; with VTS_REQUIRE=captures (as .ci/run sets) they fail and the program exits 11."""
    why = ("test_conformance.c: not run here (captures): no conformance with real captures: the platform captures "
           "are kept outside the repository: put their folder (youtube-transcript-api/, newpipe/) at ../shared/fixtures "
           "beside the checkout, or set VTS_SHARED_FIXTURES to it")
    for ci in (False, True):
        r, skips = _unit_program(tmp_path, "test_conformance", ci=ci)
        assert r.returncode == 0, r.stdout + r.stderr
        assert skips == [why] * 11
        assert "[  SKIPPED ] 11 test(s)" in r.stdout + r.stderr
    r, skips = _unit_program(tmp_path, "test_conformance", ci=True, require="captures,root")
    assert r.returncode == 11, r.stdout + r.stderr
    assert skips == []
    assert "captures is required here (VTS_REQUIRE) but missing" in r.stdout + r.stderr


NOT_HERE_TESTS = '''
from conftest import not_here

def test_runs():
    assert True

def test_needs_the_captures():
    not_here("captures", "put them beside the checkout")
'''


def test_a_test_not_run_here_is_listed_apart_and_fails_only_where_required(tmp_path):
    line = "test_cases.py::test_needs_the_captures: not run here (captures): put them beside the checkout\n"
    r, skips = _pytest(tmp_path, NOT_HERE_TESTS, ci=True)
    assert r.returncode == 0, r.stdout
    assert "1 passed, 1 skipped" in r.stdout
    assert skips == line
    r, skips = _pytest(tmp_path, NOT_HERE_TESTS, ci=True, require="captures")
    assert r.returncode == 1, r.stdout
    assert "1 failed, 1 passed" in r.stdout
    assert "captures is required here (VTS_REQUIRE=captures) but missing: put them beside the checkout" in r.stdout


SUMMARY = REPO / "tests" / "summary.sh"
STAGES_LINE = r"stages: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped"


def _summary(tmp_path, skip_lines, passed, *failed):
    skip_log = tmp_path / "skips"
    skip_log.write_text("".join(line + "\n" for line in skip_lines))
    return subprocess.run([str(SUMMARY), str(skip_log), str(passed), *failed], capture_output=True, text=True,
                          timeout=30)


def test_the_run_ends_with_the_not_run_here_count_then_the_stages_line_ci_reads(tmp_path):
    """The unit tests' lines come twice (two builds) and count once; the tests not run here are listed and counted on
    their own line, with what they need; the last line is exactly the shape CI reads, with nothing after it."""
    captures = "test_a.c: not run here (captures): put the captures beside the checkout"
    root = "test_b.py::test_owner: not run here (root): run as root or through sudo"
    tool = "test_c.py::test_tool: frobnicate is not installed"
    r = _summary(tmp_path, [tool, captures, root, captures], 7, "fuzz")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout == (
        "skipped tests (a missing tool or fixture; they fail the run with CI=true):\n"
        f"  {tool}\n"
        "tests not run here (what this checkout or user lacks; VTS_REQUIRE=WHAT,... makes it a failure):\n"
        f"  {captures}\n"
        f"  {root}\n"
        "FAILED stages: fuzz\n"
        "not run here (captures,root): 2\n"
        "stages: 7 passed, 1 failed, 1 skipped\n")
    assert re.fullmatch(STAGES_LINE, r.stdout.splitlines()[-1])


def test_a_run_with_every_test_run_still_says_how_many_were_not(tmp_path):
    r = _summary(tmp_path, [], 9)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "not run here: 0\nstages: 9 passed, 0 failed, 0 skipped\n"


def test_tests_run_sh_writes_nothing_after_the_summary():
    """The summary is the last thing tests/run.sh runs; only its exit status follows."""
    lines = [line for line in (REPO / "tests" / "run.sh").read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    assert lines[-2:] == ['tests/summary.sh "$skip_log" "$passed" "${failed[@]}"', "[ ${#failed[@]} -eq 0 ]"]
