#!/usr/bin/env bash
# Installs what is missing, builds (warnings as errors, and an ASan+UBSan build), runs every test.
# Exits non-zero on any failure. A second run reinstalls nothing and builds incrementally.
# Every test skipped for a missing tool or fixture is listed at the end and counted in the summary line; with CI=true
# (as CI runs it) such a skip fails its stage instead.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. "$root/deploy/deps.sh"
vts_install_packages "${VTS_BUILD_PACKAGES[@]}" "${VTS_TEST_PACKAGES[@]}" || { echo "package install failed"; exit 1; }

failed=()
passed=0
# Unit tests (tests/unit/test_skip.h) and the pytest suites (tests/integration/conftest.py) append one line per skip.
# Every temporary file of the run (pytest's folders, the tests' own, the unit tests' and the fuzzers') lives in one
# folder of the run's, removed at its end. Others may pass through it (not list it): a key file test hands a folder
# inside to another user.
run_tmp=$(mktemp -d "${TMPDIR:-/tmp}/vts-run.XXXXXX") || exit 1
chmod 711 "$run_tmp"
trap 'rm -rf "$run_tmp"' EXIT
export TMPDIR=$run_tmp
# Nor any bytecode in the checkout (pytest's rewritten test modules, the fake platform's).
export PYTHONDONTWRITEBYTECODE=1
skip_log=$run_tmp/skips
: >"$skip_log"
export VTS_SKIP_LOG=$skip_log
stage() { # name, command...
  local name=$1; shift
  echo "=== $name"
  local t0=$SECONDS
  if "$@"; then echo "=== $name: ok ($((SECONDS - t0)) s)"; passed=$((passed + 1)); else echo "=== $name: FAILED"; failed+=("$name"); fi
}

build_tree() { # dir, extra cmake args..., [--target targets...]
  local dir=$1 args=() targets=(); shift
  while [ $# -gt 0 ] && [ "$1" != --target ]; do args+=("$1"); shift; done
  [ $# -gt 0 ] && targets=("$@")
  cmake -S "$root" -B "$dir" -DVTS_WERROR=ON "${args[@]}" >/dev/null && cmake --build "$dir" -j"$(nproc)" "${targets[@]}"
}

npm_tools() {
  [ -f tests/contract/package.json ] || return 0
  (cd tests/contract && { [ -d node_modules ] && [ node_modules/.package-lock.json -nt package-lock.json ] ||
     npm ci --no-audit --no-fund --loglevel=error; })
}

stage "style (clang-format, banned functions, runtime files)" tests/style/check.sh
stage "build (release, -Werror)" build_tree build -DCMAKE_BUILD_TYPE=RelWithDebInfo
stage "build (ASan+UBSan)" build_tree build-asan -DCMAKE_BUILD_TYPE=Debug -DVTS_SANITIZE=ON
# The reference's bare-metal build type: -O3 inlines further and warns where -O2 does not. The programs only.
stage "build (Release programs, -Werror)" build_tree build-release -DCMAKE_BUILD_TYPE=Release \
  --target vts-gateway vts-fetcher vts-keys
stage "npm test tools" npm_tools
stage "unit tests (release)" ctest --test-dir build --output-on-failure
stage "unit tests (ASan+UBSan)" env ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure
# The slowest tests are listed after the run (--durations): the whole run must stay under 30 minutes on 2 cores.
if compgen -G "tests/integration/test_*.py" >/dev/null; then
  stage "integration tests (ASan+UBSan binaries)" env VTS_BUILD_DIR="$root/build-asan" \
    /usr/bin/python3 -m pytest -q -p no:cacheprovider --continue-on-collection-errors --durations=20 \
    --ignore=tests/integration/test_containers.py tests/integration
fi
# The images built and run with podman, in a stage of their own so that its time shows; -s prints the build times
# and image sizes. The base image and podman's layers are kept between runs: a second run compiles what changed.
stage "containers (podman: both images built and run)" env VTS_BUILD_DIR="$root/build-asan" \
  /usr/bin/python3 -m pytest -q -s -p no:cacheprovider tests/integration/test_containers.py

stage "fault battery" tests/fault/run.sh
stage "fuzz (libFuzzer, ${VTS_FUZZ_SECONDS:-15} s a target)" tests/fuzz/run.sh all "${VTS_FUZZ_SECONDS:-15}"

# The lists of skipped tests and of tests not run here, then the summary's two lines; the last is the one CI reads
# (tests/summary.sh says their shape).
tests/summary.sh "$skip_log" "$passed" "${failed[@]}"
[ ${#failed[@]} -eq 0 ]
