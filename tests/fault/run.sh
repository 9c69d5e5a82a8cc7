#!/usr/bin/env bash
# Runs the fault battery (tests/fault/battery.py) against the ASan+UBSan build when there is one.
#   VTS_BUILD_DIR   build to test (default: build-asan, else build)
#   tests/fault/run.sh [--only slowloris,malformed,kill9,redis,upstream,gateways] [--workdir DIR]
# Exits non-zero when a check fails; the logs of a failed run are kept (the last line names the folder).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${VTS_BUILD_DIR:-}" ]; then
  if [ -x "$root/build-asan/bin/vts-gateway" ]; then VTS_BUILD_DIR="$root/build-asan"; else VTS_BUILD_DIR="$root/build"; fi
fi
export VTS_BUILD_DIR
for b in vts-gateway vts-fetcher; do
  [ -x "$VTS_BUILD_DIR/bin/$b" ] || { echo "fault battery: $VTS_BUILD_DIR/bin/$b is not built"; exit 1; }
done
command -v redis-server >/dev/null || { echo "fault battery: redis-server is not installed"; exit 1; }
echo "fault battery: binaries of $VTS_BUILD_DIR"
exec /usr/bin/python3 "$root/tests/fault/battery.py" "$@"
