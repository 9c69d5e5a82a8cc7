#!/usr/bin/env bash
# Runs libFuzzer targets (clang, ASan+UBSan) from our own seed corpora in tests/fuzz/seeds/TARGET.
#   tests/fuzz/run.sh TARGET SECONDS     one target, longer by hand (e.g. fuzz_query 600)
#   tests/fuzz/run.sh all SECONDS        every target (tests/run.sh uses a few seconds each)
# A crash leaves its input in build-fuzz/crashes/; make it a regression seed in tests/fuzz/seeds/TARGET.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
target=${1:?usage: tests/fuzz/run.sh TARGET|all SECONDS}
secs=${2:-60}
build="$root/build-fuzz"
CC=clang cmake -S "$root" -B "$build" -DVTS_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
mkdir -p "$build/crashes"
# Whatever a target writes to a temporary folder (fuzz_http: a key file and quota snapshots) goes with the run.
fuzz_tmp=$(mktemp -d "${TMPDIR:-/tmp}/vts-fuzz.XXXXXX")
trap 'rm -rf "$fuzz_tmp"' EXIT
export TMPDIR=$fuzz_tmp
if [ "$target" = all ]; then
  targets=$(cd "$root/tests/fuzz" && ls fuzz_*.c | sed 's/\.c$//')
else
  targets=$target
fi
# The first sanitizer report ends the target with an error, UBSan's included (the build makes none recoverable; these
# options say the same at run time), so a run that hits undefined behaviour can never print "ok".
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1
sanitizer_report='runtime error:|ERROR: (Address|Leak|UndefinedBehavior)Sanitizer'
status=0
for t in $targets; do
  corpus="$build/corpus-$t"
  mkdir -p "$corpus"
  seeds="$root/tests/fuzz/seeds/$t"
  [ -d "$seeds" ] || seeds=""
  # Every seed must pass first: they hold the regressions of earlier crashes.
  if [ -n "$seeds" ] && ! "$build/bin/$t" -runs=0 $seeds/* >"$build/$t.seeds.log" 2>&1; then
    echo "$t: a seed fails (see $build/$t.seeds.log)"; grep -E -m5 "$sanitizer_report" "$build/$t.seeds.log"; status=1; continue
  fi
  if "$build/bin/$t" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
      -artifact_prefix="$build/crashes/$t-" -print_final_stats=1 "$corpus" $seeds >"$build/$t.log" 2>&1 &&
      ! grep -E -q "$sanitizer_report" "$build/$t.log"; then
    echo "$t: ok, $(grep -m1 -o 'stat::number_of_executed_units: [0-9]*' "$build/$t.log" | awk '{print $2}') runs in ${secs}s"
  else
    echo "$t: CRASH (see $build/$t.log and $build/crashes/)"; tail -30 "$build/$t.log"; status=1
  fi
done
exit $status
