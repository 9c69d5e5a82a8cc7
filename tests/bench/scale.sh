#!/usr/bin/env bash
# Cache-miss throughput against the number of gateways and fetchers, on 127.0.0.1: the fake platform takes
# DELAY_MS (100) a request, so a transcript (player, then captions) costs a fetcher 2 x DELAY_MS and F fetchers top
# out at F / (2 x DELAY_MS) transcripts a second. For each layout (gateways x fetcher workers: 3x8, 1x8, 3x4) a load
# of distinct, never cached video ids goes round-robin to the gateways for SECONDS (15), and the transcripts a
# second answered 200 are printed beside that ceiling.
#   tests/bench/scale.sh
# Environment: DELAY_MS (100), SECONDS_EACH (15), CLIENTS (48), VTS_BUILD_DIR (build).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
DELAY_MS=${DELAY_MS:-100}; SECONDS_EACH=${SECONDS_EACH:-15}; CLIENTS=${CLIENTS:-48}
build=${VTS_BUILD_DIR:-$root/build}
. "$root/deploy/deps.sh"
vts_install_packages "${VTS_BUILD_PACKAGES[@]}" python3 curl >/dev/null
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build "$build" -j"$(nproc)" >/dev/null

work=$(mktemp -d /tmp/vts-scale.XXXXXX)
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { for _ in $(seq 100); do curl -fs -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done; echo "no answer from $1" >&2; return 1; }

up_port=$(free_port)
python3 "$root/tests/fake_upstream/fake_upstream.py" --port "$up_port" --delay-ms "$DELAY_MS" >"$work/upstream.log" 2>&1 &
up_pid=$!
key=$("$build/bin/vts-keys" -f "$work/keys.db" create bench --rate 1000000 --window 1 --quota 1000000000000)
export XDG_RUNTIME_DIR=$work VTS_KEYS_FILE=$work/keys.db VTS_UPSTREAM_URL=http://127.0.0.1:$up_port \
  VTS_LOG_LEVEL=warn VTS_METRICS_LISTEN= VTS_WORKERS=1 VTS_SPEECH_FALLBACK=false
# The fake platform rations nothing: the service's own speed is measured, its fetchers unpaced.
export VTS_EGRESS_RATE=0

run() { # gateways, fetcher workers
  local ngw=$1 nf=$2 ports=() urls=()
  for i in $(seq "$ngw"); do
    local p j
    p=$(free_port); j=$(free_port)
    VTS_LISTEN=127.0.0.1:$p VTS_JOBS_URL=tcp://127.0.0.1:$j VTS_STATE_DIR=$work/state-$ngw-$nf-$i \
      "$build/bin/vts-gateway" 2>>"$work/gateway.log" &
    pids+=($!)
    ports+=("$p"); urls+=("tcp://127.0.0.1:$j")
  done
  VTS_JOBS_URL=$(IFS=,; echo "${urls[*]}") "$build/bin/vts-fetcher" --workers "$nf" 2>>"$work/fetcher.log" &
  pids+=($!)
  for p in "${ports[@]}"; do wait_http "http://127.0.0.1:$p/health"; done
  python3 - "$key" "$SECONDS_EACH" "$CLIENTS" "$ngw-$nf" "${ports[@]}" <<'PY'
import http.client, sys, threading, time
key, seconds, clients, tag, ports = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]
ok, other, lock, n = [0], {}, threading.Lock(), [0]
letter = {"3-8": "a", "1-8": "b", "3-4": "c"}.get(tag, "d")  # ids of 11 characters, fresh in every layout
# Warm-up: every gateway has its fetchers before the clock starts.
for p in ports:
    for _ in range(100):
        c = http.client.HTTPConnection("127.0.0.1", int(p), timeout=30)
        c.request("GET", "/v1/video/transcript?video_id=benchw%s%04d" % (letter, int(p) % 10000),
                  headers={"x-api-key": key})
        if c.getresponse().status == 200:
            break
        time.sleep(0.1)  # poll interval: a warm-up request again, at most 100 times
end = time.monotonic() + seconds
def client(k):
    conns = {}
    while time.monotonic() < end:
        with lock:
            n[0] += 1
            i = n[0]
        port = ports[i % len(ports)]
        video = "bench%s%05d" % (letter, i)
        c = conns.get(port) or http.client.HTTPConnection("127.0.0.1", int(port), timeout=60)
        conns[port] = c
        try:
            c.request("GET", "/v1/video/transcript?video_id=" + video, headers={"x-api-key": key})
            r = c.getresponse(); r.read()
            status = r.status
        except OSError as e:
            status = type(e).__name__
            conns.pop(port, None)
        with lock:
            if status == 200 and time.monotonic() <= end:
                ok[0] += 1
            elif status != 200:
                other[status] = other.get(status, 0) + 1
t0 = time.monotonic()
threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
for t in threads: t.start()
for t in threads: t.join()
print("%s gateways, %s fetchers: %.1f transcripts/s (%d in %.0f s)%s" % (
    tag.split("-")[0], tag.split("-")[1], ok[0] / seconds, ok[0], seconds,
    "; other answers: %s" % other if other else ""))
PY
  stop_all
}

echo "fake platform: ${DELAY_MS} ms a request (2 a transcript): the ceiling is fetchers x $((1000 / (2 * DELAY_MS))) transcripts/s"
run 3 8
run 1 8
run 3 4
kill "$up_pid" 2>/dev/null || true
