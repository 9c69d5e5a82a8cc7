#!/usr/bin/env bash
# The tail, measured fairly: vts and nginx in the same run, on the same bytes, at fixed offered rates.
#
# The load generator (bench_openloop, tests/bench/bench_openloop.c: open loop, latencies counted from each request's
# due time, so a stall is charged to every request it delayed: no coordinated omission) runs pinned to one core
# (GEN_CPU) and the server under test to the other (SRV_CPU), with taskset; the fake platform and the fetcher, idle
# once the bodies are cached, share the generator's core. Both servers run as operators run them, one worker each on
# their core: vts with its access log (VTS_LOG_LEVEL=info), nginx with access_log, sendfile and gzip_static.
# For each path (/health, the 248 KB cached transcript, its gzip form, a 304 of it) and each server, the maximum is
# measured first (closed loop, MAX_S seconds), then the rates RATES are offered for DURATION seconds each. RATE_OF
# says what a rate is a percentage of: "own" (each server's own maximum), "vts" or "nginx" (that server's maximum,
# the same absolute rate offered to both), or several of these, each a set of rows. Prints p50, p99 and p99.9 side by
# side (ms), vts's p99 over nginx's, and the generator's own lateness (lag99: the 99th percentile of how late a
# request went out on a free connection; near the latencies, the generator is the tail, not the server).
#   tests/bench/tail.sh
#   RATE_OF="vts nginx" tests/bench/tail.sh
# With REPEAT=N each row is run N times, vts and nginx in turn, and the medians of the N runs are printed, with how
# many runs had vts's p99 over 1.5x nginx's: one run's p99 is set by a few preemptions on either side. The row also
# pools the N runs of each server (every answer's latency, BENCH_LATENCIES) into one distribution and prints its
# p99s side by side: N runs of D seconds made in turn are one run of N * D seconds each, in which both servers met
# the same minutes of the machine; that pooled ratio is the one a single burst moves least.
# PATHS picks the rows' paths: any of "health hour gzip 304" (all four by default). Two switches take a part of vts
# out, to see whether it makes the tail: ACCESS_LOG=0 runs both servers without their access logs (vts at
# VTS_LOG_LEVEL=warn, nginx with access_log off), LOOP_ONLY=1 leaves only the worker's loop thread of vts on the
# server's core (the master, the dispatcher with its store thread, the worker's threadpool and nng threads go to the
# generator's).
# HALT_POLL=NS sets the guest's halt polling (the haltpoll cpuidle driver's guest_halt_poll_ns, as root) for the run
# and puts it back after: a virtual CPU with nothing to run polls that long before it halts. A halted virtual CPU is
# woken by its host, which takes tens of microseconds; a core that idles between two answers (both servers' at low
# rates) pays that wake-up in every answer's latency. The kernel's default is 200000 (200 us); a host may set 0. The
# header says the value in force, and what the machine had.
# CONTROL=1 measures nginx in vts's turn too (the same server, paths and headers), so that each row's ratio is the
# benchmark's own spread on this machine: how far apart two runs of one server fall, the resolution of the target.
# Environment: RATES ("20 50 80"), RATE_OF (own), PATHS, DURATION (5), MAX_S (3), CONNS (32), REPEAT (1), GEN_CPU (0),
# SRV_CPU (1), KTHREADS_OFF (0; 1 moves the kernel's movable bursty threads off the server's core, as root),
# ACCESS_LOG (1), LOOP_ONLY (0), DISPATCHER_OFF (0; 1 moves the dispatcher's threads to the generator's core),
# CONTROL (0), HALT_POLL (the machine's), VTS_BUILD_DIR.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
RATES=${RATES:-20 50 80}; RATE_OF=${RATE_OF:-own}; DURATION=${DURATION:-5}; MAX_S=${MAX_S:-3}; CONNS=${CONNS:-32}
REPEAT=${REPEAT:-1}; PATHS=${PATHS:-health hour gzip 304}
GEN_CPU=${GEN_CPU:-0}; SRV_CPU=${SRV_CPU:-1}
build=${VTS_BUILD_DIR:-$root/build}
. "$root/deploy/deps.sh"
. "$root/tests/bench/common.sh"
vts_install_packages "${VTS_BUILD_PACKAGES[@]}" nginx-light python3 curl util-linux >/dev/null
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build "$build" -j"$(nproc)" >/dev/null
gen() { taskset -c "$GEN_CPU" "$build/bin/bench_openloop" "$@"; }
# a file of latencies (us, one a line) -> its p99 in ms, taken as bench_openloop takes it
pooled_p99() { sort -n "$1" | awk '{ v[NR - 1] = $1 } END { printf "%.3f", NR ? v[int(0.99 * (NR - 1))] / 1000 : 0 }'; }

work=$(mktemp -d /tmp/vts-tail.XXXXXX)
chmod 755 "$work" # nginx workers run as an unprivileged user and must read the bodies
pids=()
moved=() # "pid cpus" of the kernel threads KTHREADS_OFF moved, put back at the end
halt_knob=/sys/module/haltpoll/parameters/guest_halt_poll_ns
halt_was=$(cat "$halt_knob" 2>/dev/null || echo none) # the machine's halt polling, put back at the end
put_back() {
  local m
  for m in "${moved[@]}"; do taskset -pc "${m#* }" "${m%% *}" >/dev/null 2>&1 || true; done
  [ "$halt_was" = none ] || echo "$halt_was" >"$halt_knob" 2>/dev/null || true
  cleanup
}
trap put_back EXIT
if [ -n "${HALT_POLL:-}" ]; then
  [ "$halt_was" != none ] || { echo "HALT_POLL: this kernel has no haltpoll driver ($halt_knob)" >&2; exit 1; }
  echo "$HALT_POLL" >"$halt_knob" || { echo "HALT_POLL: cannot write $halt_knob (root?)" >&2; exit 1; }
fi
# KTHREADS_OFF=1: the kernel's unbound threads that run in bursts of milliseconds (memory monitoring's kdamond, RCU's
# grace-period thread) are moved off the server's core for the run, onto the generator's, as an operator isolating
# a core would; both servers are measured so. The per-core ones (ksoftirqd, kworker/N) cannot move and stay.
if [ "${KTHREADS_OFF:-0}" = 1 ]; then
  for p in $(pgrep -x 'kdamond\.[0-9]+|rcu_preempt|rcu_sched'); do
    cpus=$(taskset -pc "$p" | sed 's/.*: //')
    taskset -pc "$GEN_CPU" "$p" >/dev/null && moved+=("$p $cpus") && echo "moved $(cat "/proc/$p/comm") off cpu $SRV_CPU"
  done
fi

up_port=$(free_port); gw_port=$(free_port); jobs_port=$(free_port); ng_port=$(free_port)
taskset -c "$GEN_CPU" python3 "$root/tests/fake_upstream/fake_upstream.py" --port "$up_port" >"$work/upstream.log" 2>&1 &
pids+=($!)
key=$("$build/bin/vts-keys" -f "$work/keys.db" create bench --rate 1000000 --window 1 --quota 1000000000000)
export VTS_LISTEN=127.0.0.1:$gw_port VTS_JOBS_URL=tcp://127.0.0.1:$jobs_port VTS_KEYS_FILE=$work/keys.db \
  VTS_STATE_DIR=$work/state VTS_UPSTREAM_URL=http://127.0.0.1:$up_port VTS_METRICS_LISTEN= \
  VTS_WORKERS=1 VTS_EGRESS_RATE=0 XDG_RUNTIME_DIR=$work
if [ "${ACCESS_LOG:-1}" = 1 ]; then export VTS_LOG_LEVEL=info; else export VTS_LOG_LEVEL=warn NGINX_ACCESS_LOG=off; fi
taskset -c "$SRV_CPU" "$build/bin/vts-gateway" 2>"$work/gateway.log" &
pids+=($!)
gw_pid=$!
taskset -c "$GEN_CPU" "$build/bin/vts-fetcher" --workers 1 2>"$work/fetcher.log" &
pids+=($!)
wait_http "http://127.0.0.1:$gw_port/health"

mkdir -p "$work/www"
hour_id=${BENCH_HOUR_ID:-longHour248}
T="/v1/video/transcript?video_id=$hour_id"
fetch_ok() { # output file, curl options...
  local out=$1; shift
  for _ in $(seq 100); do
    curl -fs -H "x-api-key: $key" "$@" "http://127.0.0.1:$gw_port$T" >"$out" && return 0
    sleep 0.1 # poll interval: until a fetcher has connected and the answer is cached
  done
  echo "no 200 for $hour_id" >&2; return 1
}
curl -s "http://127.0.0.1:$gw_port/health" >"$work/www/health"
fetch_ok "$work/www/hour"
fetch_ok "$work/www/hour.gz" -H "Accept-Encoding: gzip"
python3 -c 'import gzip, sys; sys.exit(gzip.decompress(open(sys.argv[1], "rb").read()) != open(sys.argv[2], "rb").read())' \
  "$work/www/hour.gz" "$work/www/hour" || { echo "the gzip form does not decode to the body" >&2; exit 1; }
nginx_start 1 taskset -c "$SRV_CPU"
# Moves every thread of the process $1 to the generator's core, but the thread $2 when it is given.
threads_to_gen() {
  local t
  for t in /proc/"$1"/task/*; do
    [ "${t##*/}" = "${2:-}" ] && continue
    taskset -pc "$GEN_CPU" "${t##*/}" >/dev/null 2>&1 || true # a thread that ended meanwhile
  done
}
# LOOP_ONLY=1: every thread of the gateway's processes but the worker's loop (its main thread) to the generator's core;
# DISPATCHER_OFF=1: the dispatcher's threads. Done again after each path's maxima: a thread made since (the worker's
# threadpool starts at its first task) is made on the core of the thread that made it.
move_vts_threads() {
  local p
  if [ "${LOOP_ONLY:-0}" = 1 ]; then
    for p in $gw_pid $(pgrep -P "$gw_pid"); do
      if [ "$(cat "/proc/$p/comm")" = vts-worker ]; then threads_to_gen "$p" "$p"; else threads_to_gen "$p"; fi
    done
  fi
  if [ "${DISPATCHER_OFF:-0}" = 1 ]; then
    for p in $(pgrep -P "$gw_pid" -x vts-dispatcher); do threads_to_gen "$p"; done
  fi
}
move_vts_threads
[ "${LOOP_ONLY:-0}" = 1 ] && echo "vts: only the worker's loop thread on cpu $SRV_CPU"
[ "${DISPATCHER_OFF:-0}" = 1 ] && echo "vts: the dispatcher's threads on cpu $GEN_CPU"
vts_etag=$(curl -fsI -H "x-api-key: $key" "http://127.0.0.1:$gw_port$T" | tr -d '\r' | sed -n 's/^ETag: //Ip')
ng_etag=$(curl -fsI "http://127.0.0.1:$ng_port/hour" | tr -d '\r' | sed -n 's/^ETag: //Ip')

# gen's line -> "p50 p99 p999" in ms
ms() { awk '{ printf "%.3f %.3f %.3f", $6 / 1000, $8 / 1000, $10 / 1000 }'; }
field() { awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }'; }
# gen's lines of several runs -> one line of the same shape, each number the median of its column (the middle run's,
# or the lower middle's for an even count)
median() {
  awk '{ for (i = 2; i <= NF; i += 2) v[i, NR] = $i; nf = NF; n = NR; line = $0 }
    END {
      split(line, w)
      for (i = 2; i <= nf; i += 2) {
        for (r = 1; r <= n; r++) c[r] = v[i, r]
        for (r = 2; r <= n; r++) for (q = r; q > 1 && c[q - 1] + 0 > c[q] + 0; q--) { t = c[q]; c[q] = c[q - 1]; c[q - 1] = t }
        w[i] = c[int((n + 1) / 2)]
      }
      for (i = 1; i <= nf; i++) printf "%s%s", w[i], (i < nf ? " " : "\n")
    }'
}

[ "${CONTROL:-0}" = 1 ] && echo "CONTROL=1: the vts columns are nginx too, measured in its turn: the benchmark's own spread"
echo "tail benchmark: generator on cpu $GEN_CPU, server on cpu $SRV_CPU (one worker each), $CONNS connections,"
echo "$DURATION s a rate, $REPEAT run(s) a row (medians); $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$halt_was" = none ] || echo "guest halt polling: $(cat "$halt_knob") ns (the machine's: $halt_was ns)"
echo
echo "| path | rate (vts / nginx rps) | vts p50 / p99 / p99.9 ms | nginx p50 / p99 / p99.9 ms | p99 vts / nginx | runs over 1.5x | pooled p99 vts / nginx ms | pooled ratio | gen lag99 ms |"
echo "|---|---|---|---|---|---|---|---|---|"
case_() { # name, expect, vts path, nginx path, vts headers, nginx headers (each "A: x|B: y", may be empty)
  local name=$1 expect=$2 vpath=$3 npath=$4 vmax nmax of pct vr nr vout nout va=() na=() vport=$gw_port
  [ -n "$5" ] && IFS='|' read -ra va <<<"$5"
  [ -n "$6" ] && IFS='|' read -ra na <<<"$6"
  if [ "${CONTROL:-0}" = 1 ]; then vport=$ng_port vpath=$npath va=("${na[@]}"); fi
  vmax=$(gen "$vport" "$vpath" 0 "$MAX_S" "$CONNS" "$expect" "${va[@]}" | field rps)
  nmax=$(gen "$ng_port" "$npath" 0 "$MAX_S" "$CONNS" "$expect" "${na[@]}" | field rps)
  # One run of each server at the first rate, not counted: the first measured run would otherwise come right after the
  # maxima's seconds of both cores at full load, and it is always vts's. Measured with CONTROL=1 on the 248 KB at 20%:
  # without it, 5 of 6 runs of nginx in vts's turn were over 1.5x of the same nginx; with it, none of 6.
  local first=${RATES%% *} vout nout
  # one measured run of each server at the rates vr and nr, its latencies added to the row's pool
  run_vts() {
    vout=$(BENCH_LATENCIES=$work/lat.vts gen "$vport" "$vpath" "$vr" "$DURATION" "$CONNS" "$expect" "${va[@]}")
  }
  run_nginx() {
    nout=$(BENCH_LATENCIES=$work/lat.nginx gen "$ng_port" "$npath" "$nr" "$DURATION" "$CONNS" "$expect" "${na[@]}")
  }
  vr=$((nmax * first / 100)) nr=$vr
  move_vts_threads
  run_vts
  run_nginx
  for of in $RATE_OF; do
    for pct in $RATES; do
      case $of in
        own) vr=$((vmax * pct / 100)) nr=$((nmax * pct / 100)) ;;
        vts) vr=$((vmax * pct / 100)) nr=$vr ;;
        nginx) nr=$((nmax * pct / 100)) vr=$nr ;;
        *) echo "RATE_OF: own, vts or nginx, not $of" >&2; exit 2 ;;
      esac
      # REPEAT runs of the row, the two servers in turn, so that a slow minute of the machine falls on both alike;
      # which goes first alternates (vts, nginx, nginx, vts, ...), so that neither is always the one after a pause.
      local vruns="" nruns="" crossed=0 i vout nout vpool npool
      : >"$work/lat.vts"
      : >"$work/lat.nginx"
      for ((i = 0; i < REPEAT; i++)); do
        if ((i % 2 == 0)); then run_vts; run_nginx; else run_nginx; run_vts; fi
        [ "$(echo "$vout" | field errors)" = 0 ] || echo "vts: errors at $pct% of $of: $vout" >&2
        [ "$(echo "$nout" | field errors)" = 0 ] || echo "nginx: errors at $pct% of $of: $nout" >&2
        crossed=$((crossed + $(awk -v a="$(echo "$vout" | field p99)" -v b="$(echo "$nout" | field p99)" \
          'BEGIN { print (a > 1.5 * b) }')))
        vruns+="$vout"$'\n' nruns+="$nout"$'\n'
      done
      vout=$(echo -n "$vruns" | median) nout=$(echo -n "$nruns" | median)
      vpool=$(pooled_p99 "$work/lat.vts") npool=$(pooled_p99 "$work/lat.nginx")
      printf '| %s | %d%% of %s (%d / %d) | %s | %s | %.2fx | %d of %d | %s / %s | %.2fx | %.3f / %.3f |\n' "$name" \
        "$pct" "$of" "$vr" "$nr" "$(echo "$vout" | ms | sed 's| | / |g')" "$(echo "$nout" | ms | sed 's| | / |g')" \
        "$(awk -v a="$(echo "$vout" | field p99)" -v b="$(echo "$nout" | field p99)" 'BEGIN { print (b > 0 ? a / b : 0) }')" \
        "$crossed" "$REPEAT" "$vpool" "$npool" "$(awk -v a="$vpool" -v b="$npool" 'BEGIN { print (b > 0 ? a / b : 0) }')" \
        "$(echo "$vout" | field lag99 | awk '{ print $1 / 1000 }')" "$(echo "$nout" | field lag99 | awk '{ print $1 / 1000 }')"
    done
  done
}
for p in $PATHS; do
  case $p in
    health) case_ "/health" 200 /health /health "" "" ;;
    hour) case_ "248 KB" 200 "$T" /hour "x-api-key: $key" "" ;;
    gzip) case_ "248 KB gzip" 200 "$T" /hour "x-api-key: $key|Accept-Encoding: gzip" "Accept-Encoding: gzip" ;;
    304) case_ "304" 304 "$T" /hour "x-api-key: $key|If-None-Match: $vts_etag" "If-None-Match: $ng_etag" ;;
    *) echo "PATHS: health, hour, gzip or 304, not $p" >&2; exit 2 ;;
  esac
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
