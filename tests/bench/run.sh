#!/usr/bin/env bash
# One command: wrk scenarios against vts beside nginx serving the same bytes, in the same run, on 127.0.0.1.
# Both run as operators run them: access logs on (vts at VTS_LOG_LEVEL=info, nginx's access_log), nginx with
# sendfile and gzip_static serving the very gzip bytes vts sends.
# Prints requests/s, p50, p99 (medians of RUNS runs), the ratio to nginx, and the gateway workers' RSS.
#   tests/bench/run.sh [--quick]      (--quick: 1 run of 3 s per scenario)
# Environment: RUNS (3), DURATION (10s), CONNS (64), THREADS (2), VTS_BUILD_DIR (build).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
RUNS=${RUNS:-3}; DURATION=${DURATION:-10s}; CONNS=${CONNS:-64}; THREADS=${THREADS:-2}
[ "${1:-}" = "--quick" ] && { RUNS=1; DURATION=3s; }
build=${VTS_BUILD_DIR:-$root/build}
. "$root/deploy/deps.sh"
. "$root/tests/bench/common.sh"
vts_install_packages "${VTS_BUILD_PACKAGES[@]}" wrk nginx-light python3 curl >/dev/null
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build "$build" -j"$(nproc)" >/dev/null

work=$(mktemp -d /tmp/vts-bench.XXXXXX)
# nginx workers run as an unprivileged user and must read the bodies.
chmod 755 "$work"
pids=()
trap cleanup EXIT
[ -n "${BENCH_KEEP_LOGS:-}" ] && trap 'cat "$work"/gateway.log "$work"/fetcher.log >&2; cleanup' EXIT


# The fake platform, the gateway and one fetcher.
up_port=$(free_port); gw_port=$(free_port); jobs_port=$(free_port); ng_port=$(free_port)
python3 "$root/tests/fake_upstream/fake_upstream.py" --port "$up_port" >"$work/upstream.log" 2>&1 &
pids+=($!)
key=$("$build/bin/vts-keys" -f "$work/keys.db" create bench --rate 1000000 --window 1 --quota 1000000000000)
export VTS_LISTEN=127.0.0.1:$gw_port VTS_JOBS_URL=tcp://127.0.0.1:$jobs_port VTS_KEYS_FILE=$work/keys.db \
  VTS_STATE_DIR=$work/state VTS_UPSTREAM_URL=http://127.0.0.1:$up_port VTS_LOG_LEVEL=info VTS_METRICS_LISTEN= \
  VTS_WORKERS=${VTS_WORKERS:-2}
# The fake platform rations nothing: the service's own speed is measured, its fetchers unpaced.
export VTS_EGRESS_RATE=0
export XDG_RUNTIME_DIR=$work # the gateways' IPC sockets go with the run's folder
"$build/bin/vts-gateway" 2>"$work/gateway.log" &
gw=$!; pids+=($gw)
"$build/bin/vts-fetcher" --workers 2 2>"$work/fetcher.log" &
pids+=($!)
wait_http "http://127.0.0.1:$gw_port/health"

# The bytes nginx serves: exactly what vts answered.
mkdir -p "$work/www"
small_id=${BENCH_SMALL_ID:-capJson3xx1}
long_id=${BENCH_LONG_ID:-long1500seg}
hour_id=${BENCH_HOUR_ID:-longHour248}
curl -s "http://127.0.0.1:$gw_port/health" >"$work/www/health"
curl -s "http://127.0.0.1:$gw_port/v1/video/transcript?video_id=$small_id" >"$work/www/unauth"
# A transcript body only once a fetcher has connected and the answer is a 200 (it is then cached).
fetch_ok() { # video id, output file
  for _ in $(seq 100); do
    curl -fs -H "x-api-key: $key" "http://127.0.0.1:$gw_port/v1/video/transcript?video_id=$1" >"$2" && return 0
    sleep 0.1
  done
  echo "no 200 for $1" >&2; return 1
}
fetch_ok "$small_id" "$work/www/small"
fetch_ok "$long_id" "$work/www/long"
fetch_ok "$hour_id" "$work/www/hour"
# gzip_static serves hour.gz to a client accepting gzip: the bytes vts itself sends for that request.
curl -fs -H "x-api-key: $key" -H "Accept-Encoding: gzip" "http://127.0.0.1:$gw_port/v1/video/transcript?video_id=$hour_id" \
  >"$work/www/hour.gz"
python3 -c 'import gzip, sys; sys.exit(gzip.decompress(open(sys.argv[1], "rb").read()) != open(sys.argv[2], "rb").read())' \
  "$work/www/hour.gz" "$work/www/hour" || { echo "the gzip form of $hour_id does not decode to its body" >&2; exit 1; }
nginx_start "${VTS_WORKERS:-2}"

# wrk output -> "rps p50_ms p99_ms"
parse() {
  awk '
    function ms(v) { if (v ~ /us$/) return v * 0.001; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /^Requests\/sec:/ { rps = $2 }
    $1 == "50%" { p50 = ms($2) }
    $1 == "99%" { p99 = ms($2) }
    END { printf "%.0f %.3f %.3f\n", rps, p50, p99 }'
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

run_wrk() { # url, expect, header...
  local out url=$1 expect=$2 args=() h
  shift 2
  for h in "$@"; do args+=(-H "$h"); done
  out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency "${args[@]}" "$url")
  echo "$out" | grep -q 'Non-2xx' && [ "$expect" = "2xx" ] && { echo "unexpected non-2xx answers from $url" >&2; }
  echo "$out" | parse
}

# The headers of each side's requests: VH for vts (set by the caller, may be empty), NH for nginx (empty unless set).
VH=(); NH=()
scenario() { # name, vts path, nginx file, vts header (may be empty), expect
  local name=$1 path=$2 file=$3 hdr=$4 expect=$5 i vr=() nr=()
  [ -n "$hdr" ] && VH=("$hdr" "${VH[@]}")
  for i in $(seq "$RUNS"); do
    vr+=("$(run_wrk "http://127.0.0.1:$gw_port$path" "$expect" "${VH[@]}")")
    nr+=("$(run_wrk "http://127.0.0.1:$ng_port/$file" "2xx" "${NH[@]}")")
  done
  VH=(); NH=()
  local v_rps v_p50 v_p99 n_rps n_p50 n_p99
  v_rps=$(printf '%s\n' "${vr[@]}" | awk '{print $1}' | median)
  v_p50=$(printf '%s\n' "${vr[@]}" | awk '{print $2}' | median)
  v_p99=$(printf '%s\n' "${vr[@]}" | awk '{print $3}' | median)
  n_rps=$(printf '%s\n' "${nr[@]}" | awk '{print $1}' | median)
  n_p50=$(printf '%s\n' "${nr[@]}" | awk '{print $2}' | median)
  n_p99=$(printf '%s\n' "${nr[@]}" | awk '{print $3}' | median)
  printf '| %-22s | %9s | %7s | %7s | %9s | %7s | %7s | %5.2f |\n' "$name" "$v_rps" "$v_p50" "$v_p99" \
    "$n_rps" "$n_p50" "$n_p99" "$(awk -v a="$v_rps" -v b="$n_rps" 'BEGIN { print (b > 0 ? a / b : 0) }')"
}

echo "vts benchmark: $(nproc) cores, $(uname -r), wrk -t$THREADS -c$CONNS -d$DURATION, median of $RUNS runs"
echo "bodies: health $(wc -c <"$work/www/health") B, 401 $(wc -c <"$work/www/unauth") B, small $(wc -c <"$work/www/small") B, long $(wc -c <"$work/www/long") B, hour $(wc -c <"$work/www/hour") B (gzip $(wc -c <"$work/www/hour.gz") B)"
echo
echo "| scenario               | vts rps   | p50 ms  | p99 ms  | nginx rps | p50 ms  | p99 ms  | ratio |"
echo "|------------------------|-----------|---------|---------|-----------|---------|---------|-------|"
scenario "GET /health" /health health "" 2xx
scenario "401 (no key)" "/v1/video/transcript?video_id=$small_id" unauth "" non2xx
scenario "cache hit, small" "/v1/video/transcript?video_id=$small_id" small "x-api-key: $key" 2xx
scenario "cache hit, 1500 segs" "/v1/video/transcript?video_id=$long_id" long "x-api-key: $key" 2xx
scenario "cache hit, 248 KB" "/v1/video/transcript?video_id=$hour_id" hour "x-api-key: $key" 2xx
VH=("Accept-Encoding: gzip"); NH=("Accept-Encoding: gzip")
scenario "248 KB, gzip" "/v1/video/transcript?video_id=$hour_id" hour "x-api-key: $key" 2xx
# A revalidation of what each side answered: its own ETag for the same bytes.
vts_etag=$(curl -fsI -H "x-api-key: $key" "http://127.0.0.1:$gw_port/v1/video/transcript?video_id=$hour_id" |
  tr -d '\r' | sed -n 's/^ETag: //Ip')
ng_etag=$(curl -fsI "http://127.0.0.1:$ng_port/hour" | tr -d '\r' | sed -n 's/^ETag: //Ip')
VH=("If-None-Match: $vts_etag"); NH=("If-None-Match: $ng_etag")
scenario "248 KB, 304" "/v1/video/transcript?video_id=$hour_id" hour "x-api-key: $key" 2xx

# The same cache hit with the redis provider: a second gateway sharing nothing but the fake platform.
if command -v redis-server >/dev/null; then
  rport=$(free_port); gw2_port=$(free_port); jobs2_port=$(free_port)
  redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
  pids+=($!)
  VTS_LISTEN=127.0.0.1:$gw2_port VTS_JOBS_URL=tcp://127.0.0.1:$jobs2_port VTS_REDIS_URL=redis://127.0.0.1:$rport \
    VTS_STATE_DIR=$work/state2 "$build/bin/vts-gateway" 2>"$work/gateway2.log" &
  pids+=($!)
  VTS_JOBS_URL=tcp://127.0.0.1:$jobs2_port "$build/bin/vts-fetcher" --workers 1 2>"$work/fetcher2.log" &
  pids+=($!)
  wait_http "http://127.0.0.1:$gw2_port/health"
  saved=$gw_port; gw_port=$gw2_port
  fetch_ok "$small_id" "$work/small2" && cmp -s "$work/small2" "$work/www/small"
  scenario "cache hit, small, redis" "/v1/video/transcript?video_id=$small_id" small "x-api-key: $key" 2xx
  gw_port=$saved
  # The provider comparison in runs that alternate, memory then Redis: a machine whose speed drifts during the run
  # moves both sides of each pair alike.
  mr=(); rr=()
  for i in $(seq "$RUNS"); do
    mr+=("$(run_wrk "http://127.0.0.1:$gw_port/v1/video/transcript?video_id=$small_id" 2xx "x-api-key: $key" | awk '{print $1}')")
    rr+=("$(run_wrk "http://127.0.0.1:$gw2_port/v1/video/transcript?video_id=$small_id" 2xx "x-api-key: $key" | awk '{print $1}')")
  done
  m_rps=$(printf '%s\n' "${mr[@]}" | median); r_rps=$(printf '%s\n' "${rr[@]}" | median)
  echo
  awk -v r="$r_rps" -v m="$m_rps" -v n="$RUNS" 'BEGIN { printf "cache hit with the redis provider: %.2fx the memory provider (%d vs %d rps, medians of %d alternating runs; target >= 0.7)\n", (m > 0 ? r / m : 0), r, m, n }'
fi
echo
rss=$(for p in $(pgrep -P "$gw"); do awk '/VmRSS/ {print $2}' "/proc/$p/status"; done | paste -sd' ')
echo "gateway children RSS (KiB): $rss"
python3 "$root/tests/bench/idle_conns.py" "$gw_port" "$gw" "${IDLE_CONNS:-10000}"
python3 "$root/tests/bench/slow_readers.py" "$gw_port" "$gw" "$key" "$hour_id" "${SLOW_READERS:-1000}"
"$build/bin/bench_ratelimit" 1000000
"$build/bin/bench_dispatch_core" 20000
"$build/bin/bench_keys" 200
python3 "$root/tests/bench/cache_miss.py" "$gw_port" "$up_port" "$key" "${MISSES:-200}"
echo
python3 "$root/tests/bench/mcp_pages.py" "$gw_port" "$key" "$hour_id" "${MCP_REQUESTS:-500}"
"$build/bin/bench_parse" 200 | sed -n 2p | sed "s/^/parse+serialise 1,500 segments: /"
"$build/bin/bench_render" 200
