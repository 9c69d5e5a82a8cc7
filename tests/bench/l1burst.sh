#!/usr/bin/env bash
# The miss burst at each expiry of a hot transcript in a worker's own cache (L1, VTS_L1_CACHE_TTL_MS): one worker
# serves the 248 KB transcript at a fixed open-loop rate for DURATION seconds (several expiries), and the gateway's
# counters say how many of those requests went to the dispatcher (its cache hits and misses), how many waited in the
# worker for a request already sent (vts_cache_l1_waits_total) and how many L1 answered, with the generator's
# latencies. Generator and server are pinned to their own cores, as in tail.sh.
#   tests/bench/l1burst.sh
# Environment: RATE (4000), DURATION (16), CONNS (32), GEN_CPU (0), SRV_CPU (1), VTS_BUILD_DIR, BENCH_HOUR_ID.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
RATE=${RATE:-4000}; DURATION=${DURATION:-16}; CONNS=${CONNS:-32}; GEN_CPU=${GEN_CPU:-0}; SRV_CPU=${SRV_CPU:-1}
build=${VTS_BUILD_DIR:-$root/build}
. "$root/deploy/deps.sh"
vts_install_packages "${VTS_BUILD_PACKAGES[@]}" python3 curl util-linux >/dev/null
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build "$build" -j"$(nproc)" >/dev/null

work=$(mktemp -d /tmp/vts-l1burst.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { for _ in $(seq 100); do curl -fs -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done; echo "no answer from $1" >&2; return 1; } # poll interval: until the server answers

up_port=$(free_port); gw_port=$(free_port); jobs_port=$(free_port); m_port=$(free_port)
taskset -c "$GEN_CPU" python3 "$root/tests/fake_upstream/fake_upstream.py" --port "$up_port" >"$work/upstream.log" 2>&1 &
pids+=($!)
key=$("$build/bin/vts-keys" -f "$work/keys.db" create bench --rate 1000000 --window 1 --quota 1000000000000)
export VTS_LISTEN=127.0.0.1:$gw_port VTS_JOBS_URL=tcp://127.0.0.1:$jobs_port VTS_KEYS_FILE=$work/keys.db \
  VTS_STATE_DIR=$work/state VTS_UPSTREAM_URL=http://127.0.0.1:$up_port VTS_LOG_LEVEL=info \
  VTS_METRICS_LISTEN=127.0.0.1:$m_port VTS_WORKERS=1 VTS_EGRESS_RATE=0 XDG_RUNTIME_DIR=$work
taskset -c "$SRV_CPU" "$build/bin/vts-gateway" 2>"$work/gateway.log" &
pids+=($!)
taskset -c "$GEN_CPU" "$build/bin/vts-fetcher" --workers 1 2>"$work/fetcher.log" &
pids+=($!)
wait_http "http://127.0.0.1:$gw_port/health"
T="/v1/video/transcript?video_id=${BENCH_HOUR_ID:-longHour248}"
for _ in $(seq 100); do
  curl -fs -o /dev/null -H "x-api-key: $key" "http://127.0.0.1:$gw_port$T" && break
  sleep 0.1 # poll interval: until a fetcher has connected and the answer is cached
done

counters() { # the four counters, summed over label-less lines
  curl -fs "http://127.0.0.1:$m_port/metrics" | awk '
    $1 == "vts_cache_hits_total" || $1 == "vts_cache_misses_total" { d += $2 }
    $1 == "vts_cache_l1_waits_total" { w = $2 } $1 == "vts_cache_l1_hits_total" { h = $2 }
    END { printf "%d %d %d", d, w, h }'
}
read -r d0 w0 h0 <<<"$(counters)"
out=$(taskset -c "$GEN_CPU" "$build/bin/bench_openloop" "$gw_port" "$T" "$RATE" "$DURATION" "$CONNS" 200 "x-api-key: $key")
read -r d1 w1 h1 <<<"$(counters)"
ttl_ms=$(sed -n 's/^#define VTS_L1_CACHE_TTL_MS \([0-9]*\).*/\1/p' "$root/common/limits.h")
expiries=$((DURATION * 1000 / ttl_ms))
echo "l1 burst: $RATE rps for $DURATION s on one worker ($expiries L1 expiries of ${ttl_ms} ms), $CONNS connections"
echo "generator: $out"
echo "to the dispatcher: $((d1 - d0)) ($(awk -v a=$((d1 - d0)) -v b="$expiries" 'BEGIN { printf "%.1f", a / b }') an expiry)," \
  "waited in the worker: $((w1 - w0)), L1 hits: $((h1 - h0))"
