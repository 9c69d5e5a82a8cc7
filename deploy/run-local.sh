#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: installs what is missing, builds, creates a demo API key (printed once)
# and runs the service in the foreground on :8080 with embedded defaults (memory rate limiter, no Redis).
# Launcher variables: VTS_BUILD_DIR (build directory, default build/), VTS_RUN_DIR (key file, state and logs, default
# .run/), VTS_FETCHERS (fetcher processes, default 2); VTS_BIN is set for deploy/supervisord.conf. Any other VTS_* of
# docs/REFERENCE.md "Configuration" passes through to the programs.
#
# It says "serving" once the gateway answers and a fetcher is connected to it (/ready); a program that cannot start
# (a bad setting, a port taken) stops it with that program's own error line and exit status 1; Ctrl-C, SIGTERM or a
# closed terminal (SIGHUP) stops everything it started, the gateway draining first. A second run-local on the same
# run folder, or anything already listening on one of the service's ports, is refused before anything starts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
me=deploy/run-local.sh
. "$root/deploy/deps.sh"
# The service's build, supervisord to run it, and curl for the README's next commands.
vts_install_packages "${VTS_BUILD_PACKAGES[@]}" "${VTS_RUN_PACKAGES[@]}"

build="${VTS_BUILD_DIR:-$root/build}"
# The build type is chosen when the build folder is made; an existing one keeps its own.
build_type=()
[ -f "$build/CMakeCache.txt" ] || build_type=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
cmake -S "$root" -B "$build" "${build_type[@]}" >/dev/null
# The three programs only (the tests, benchmarks and fuzzers are tests/run.sh's).
cmake --build "$build" -j"$(nproc)" --target vts-gateway vts-fetcher vts-keys >/dev/null

run="${VTS_RUN_DIR:-$root/.run}"
mkdir -p "$run/state"
# One run-local per run folder: the lock lives as long as this script (supervisord does not inherit it).
exec 9>"$run/run-local.lock"
if ! flock -n 9; then
  echo "$me: another run-local is running with $run (pid $(cat "$run/run-local.pid" 2>/dev/null || echo unknown)); stop it first (Ctrl-C in its terminal)" >&2
  exit 1
fi
echo $$ >"$run/run-local.pid"

export VTS_KEYS_FILE="${VTS_KEYS_FILE:-$run/keys.db}"
export VTS_STATE_DIR="${VTS_STATE_DIR:-$run/state}"
# Paths as a reader in the repository types them.
here() { case "$1" in "$root"/*) echo "${1#"$root"/}" ;; *) echo "$1" ;; esac; }
keys_cmd="$(here "$build/bin/vts-keys") -f $(here "$VTS_KEYS_FILE")"
listen="${VTS_LISTEN:-0.0.0.0:8080}"
port="${listen##*:}"
host="${listen%:*}"
case "$host" in 0.0.0.0 | "") url_host=127.0.0.1 ;; "[::]") url_host="[::1]" ;; *) url_host=$host ;; esac
jobs_url="${VTS_JOBS_URL:-tcp://127.0.0.1:7400}"
metrics="${VTS_METRICS_LISTEN-127.0.0.1:9464}"

# Who listens on TCP port $1 (any address): "NAME (pid N)", or nothing. From /proc, so no tool is needed; a process of
# another user may be unknown to us ("a process of another user").
port_holder() {
  local hex inodes inode pid
  hex=$(printf '%04X' "$1")
  inodes=$(awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { print $10 }' /proc/net/tcp /proc/net/tcp6 2>/dev/null)
  [ -n "$inodes" ] || return 0
  for inode in $inodes; do
    for pid in $(find /proc/[0-9]*/fd -lname "socket:\[$inode\]" 2>/dev/null | cut -d/ -f3 | sort -un); do
      echo "$(cat "/proc/$pid/comm" 2>/dev/null || echo '?') (pid $pid)"
      return 0
    done
  done
  echo "a process of another user"
}

# The supervisord that runs process $1 (its pid), or nothing: a service an earlier run-local started.
supervisor_of() {
  local pid=$1 up
  while [ -n "$pid" ] && [ "$pid" -gt 1 ]; do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = supervisord ] && { echo "$pid"; return 0; }
    up=$(awk '{ print $4 }' "/proc/$pid/stat" 2>/dev/null) || return 0
    pid=$up
  done
}

# SO_REUSEPORT would let the gateway share its port with an earlier one (an orphan of a closed terminal, another
# checkout's): requests would go to either. Refuse instead, naming who holds it and, for a service supervisord runs
# (an earlier run-local's), how to stop it: supervisord stops its programs on SIGTERM, the gateway draining first.
check_port() { # port, what it is for
  local holder sv_pid
  holder=$(port_holder "$1")
  [ -z "$holder" ] && return 0
  sv_pid=$(supervisor_of "$(echo "$holder" | sed -n 's/.*(pid \([0-9]*\))$/\1/p')")
  if [ -n "$sv_pid" ]; then
    echo "$me: port $1 ($2) is already in use by $holder, run by supervisord (pid $sv_pid), an earlier run-local's: stop it with \"kill $sv_pid\", or set $2 to another address" >&2
  else
    echo "$me: port $1 ($2) is already in use by $holder: stop it, or set $2 to another address" >&2
  fi
  exit 1
}
check_port "$port" VTS_LISTEN
case "$jobs_url" in *,*) ;; *) check_port "${jobs_url##*:}" VTS_JOBS_URL ;; esac
[ -n "$metrics" ] && check_port "${metrics##*:}" VTS_METRICS_LISTEN

if ! "$build/bin/vts-keys" -f "$VTS_KEYS_FILE" list 2>/dev/null | grep -q '^demo'; then
  key=$("$build/bin/vts-keys" -f "$VTS_KEYS_FILE" create demo)
  echo "demo API key, shown once (only its digest is kept). In the shell where you try the service:"
  echo "  export KEY=$key"
  echo "  curl -s -H \"x-api-key: \$KEY\" 'http://$url_host:$port/v1/video/transcript?video_id=dQw4w9WgXcQ'"
else
  echo "the demo API key was shown when it was made; it is not kept in clear."
fi
echo "another key, any time: $keys_cmd create NAME     (list, revoke NAME: docs/REFERENCE.md, \"API keys\")"

# supervisord (Debian's supervisor) runs the gateway and the fetcher pool. It runs in a session of its own, so that a
# closed terminal's SIGHUP (which supervisord takes as "reload") reaches only this script, which stops it.
export VTS_RUN_DIR="$run" VTS_BIN="$build/bin" VTS_FETCHERS="${VTS_FETCHERS:-2}"
conf="$root/deploy/supervisord.conf"
logs=("$run/gateway.log")
for ((i = 0; i < VTS_FETCHERS; i++)); do logs+=("$(printf '%s/fetcher_%02d.log' "$run" "$i")"); done
# Where this run's lines begin in each log (they are appended to across runs).
declare -A log_start
for f in "${logs[@]}"; do log_start[$f]=$(stat -c %s "$f" 2>/dev/null || echo 0); done

setsid supervisord -c "$conf" 9>&- >>"$run/supervisord.out" 2>&1 </dev/null &
sv=$!

# With the terminal closed, every write to it fails (EIO): under set -e the first one would end the script before the
# kill, leaving the service running. So nothing here stops on an error, and supervisord is told first.
stop_all() { # exit status
  trap '' HUP INT TERM
  set +e
  if kill -0 "$sv" 2>/dev/null; then
    kill -TERM "$sv" 2>/dev/null
    echo "stopping: the gateway drains, then the fetchers stop" >&2 2>/dev/null
    wait "$sv" 2>/dev/null
  fi
  rm -f "$run/run-local.pid"
  exit "$1"
}
trap 'stop_all 129' HUP
trap 'stop_all 130' INT
trap 'stop_all 143' TERM

# The programs in FATAL (supervisord gave up starting them), one name a line.
fatal() { { supervisorctl -c "$conf" status 2>/dev/null || true; } | awk '$2 == "FATAL" { print $1 }'; }

# Says which program could not start and its own last line (from this run's part of its log), then stops.
give_up() { # program name
  local log="$run/${1#*:}.log" line
  line=$(tail -c +"$((${log_start[$log]:-0} + 1))" "$log" 2>/dev/null | grep -v '^[[:space:]]*$' | tail -n 1 || true)
  echo "$me: $1 cannot start: ${line:-(nothing in $(here "$log"))}" >&2
  stop_all 1
}

# Waits without missing a signal: the trap runs as soon as one comes.
pause() { sleep "$1" & wait $! 2>/dev/null || true; }

serving=0
while kill -0 "$sv" 2>/dev/null; do
  bad=$(fatal | head -n 1)
  [ -n "$bad" ] && give_up "$bad"
  if [ $serving -eq 0 ] && curl -fsS -o /dev/null --max-time 2 "http://$url_host:$port/ready" 2>/dev/null; then
    serving=1
    echo "serving on $listen; logs in $(here "$run")/*.log"
    echo "control: VTS_RUN_DIR=$(here "$run") supervisorctl -c deploy/supervisord.conf status"
  fi
  pause 0.5
done
wait "$sv" || true
echo "$me: supervisord stopped; its log: $(here "$run")/supervisord.log" >&2
rm -f "$run/run-local.pid"
exit 1
