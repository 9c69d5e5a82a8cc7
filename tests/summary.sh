#!/usr/bin/env bash
# The end of a tests/run.sh run: the tests skipped and those not run here, listed, then the two summary lines.
#   tests/summary.sh SKIP_LOG PASSED [FAILED_STAGE...]
# SKIP_LOG holds one line per skip ("FILE[::TEST]: why"; a test not run here: "...: not run here (WHAT): why"),
# PASSED is the number of stages that passed, and each further argument names a stage that failed.
# The last line is the summary CI reads, exactly "stages: N passed, N failed, N skipped" and nothing after it; the
# line before it counts the tests not run here, with what they need: "not run here (captures,root): N" ("not run
# here: 0" when every test ran).
set -uo pipefail
skip_log=$1 passed=$2
shift 2
failed=("$@")

sort -u -o "$skip_log" "$skip_log" # the unit tests run in two builds
# A test that needs what this checkout or user lacks by design (the captures beside the checkout, root) is "not run
# here": listed apart, with how to get it, and no failure; a run that must have them names them in VTS_REQUIRE.
not_here=$(grep -c ': not run here (' "$skip_log")
skipped=$(($(wc -l <"$skip_log") - not_here))
if [ "$skipped" -gt 0 ]; then
  echo "skipped tests (a missing tool or fixture; they fail the run with CI=true):"
  grep -v ': not run here (' "$skip_log" | sed 's/^/  /'
fi
if [ "$not_here" -gt 0 ]; then
  echo "tests not run here (what this checkout or user lacks; VTS_REQUIRE=WHAT,... makes it a failure):"
  grep ': not run here (' "$skip_log" | sed 's/^/  /'
fi
[ ${#failed[@]} -gt 0 ] && echo "FAILED stages: ${failed[*]}"
needs=$(grep -o ': not run here ([a-z]*)' "$skip_log" | sed 's/.*(\(.*\))/\1/' | sort -u | paste -sd, -)
echo "not run here${needs:+ ($needs)}: $not_here"
echo "stages: $passed passed, ${#failed[@]} failed, $skipped skipped"
