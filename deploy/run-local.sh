#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: installs what is missing, builds, creates a demo API key (printed once)
# and runs the service in the foreground on :8080 with embedded defaults (memory rate limiter, no Redis).
# Launcher variables: VTS_BUILD_DIR (build directory, default build/), VTS_RUN_DIR (key file, state and logs, default
# .run/), VTS_FETCHERS (fetcher processes, default 2); VTS_BIN is set for deploy/supervisord.conf. Any other VTS_* of
# README.md "Configuration" passes through to the programs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/deploy/deps.sh"
# The service's build, supervisord to run it, and curl for the README's next commands.
vts_install_packages "${VTS_BUILD_PACKAGES[@]}" "${VTS_RUN_PACKAGES[@]}"

build="${VTS_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null

run="${VTS_RUN_DIR:-$root/.run}"
mkdir -p "$run/state"
export VTS_KEYS_FILE="${VTS_KEYS_FILE:-$run/keys.db}"
export VTS_STATE_DIR="${VTS_STATE_DIR:-$run/state}"
# Paths as a reader in the repository types them.
here() { case "$1" in "$root"/*) echo "${1#"$root"/}" ;; *) echo "$1" ;; esac; }
keys_cmd="$(here "$build/bin/vts-keys") -f $(here "$VTS_KEYS_FILE")"
port="${VTS_LISTEN:-0.0.0.0:8080}"
port="${port##*:}"
if ! "$build/bin/vts-keys" -f "$VTS_KEYS_FILE" list 2>/dev/null | grep -q '^demo'; then
  key=$("$build/bin/vts-keys" -f "$VTS_KEYS_FILE" create demo)
  echo "demo API key, shown once (only its digest is kept). In the shell where you try the service:"
  echo "  export KEY=$key"
  echo "  curl -s -H \"x-api-key: \$KEY\" 'http://127.0.0.1:$port/v1/video/transcript?video_id=dQw4w9WgXcQ'"
else
  echo "the demo API key was shown when it was made; it is not kept in clear."
fi
echo "another key, any time: $keys_cmd create NAME     (list, revoke NAME: README, \"API keys\")"

# supervisord (Debian's supervisor) runs the gateway and the fetcher pool in the foreground; Ctrl-C stops both,
# the gateway draining its in-flight requests first.
export VTS_RUN_DIR="$run" VTS_BIN="$build/bin" VTS_FETCHERS="${VTS_FETCHERS:-2}"
echo "serving on ${VTS_LISTEN:-0.0.0.0:8080}; logs in $(here "$run")/*.log"
echo "control: VTS_RUN_DIR=$(here "$run") supervisorctl -c deploy/supervisord.conf status"
exec supervisord -c "$root/deploy/supervisord.conf"
