# Sourced by run.sh and tail.sh, which measure vts beside nginx on the same bytes: what both do around the measuring.
# They set work (the run's folder), pids (the processes to end) and ng_port before calling these.

# Ends the run's processes and nginx, and removes the run's folder: the EXIT trap.
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  [ -f "$work/nginx.pid" ] && kill -QUIT "$(cat "$work/nginx.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { for _ in $(seq 100); do curl -fs -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done; echo "no answer from $1" >&2; return 1; } # poll interval: until the server answers

# nginx serving the bytes in $work/www on 127.0.0.1:$ng_port as operators run it (access_log, sendfile, gzip_static
# serving the very gzip bytes vts sends), its pid file in $work for cleanup.
#   nginx_start WORKERS [COMMAND...]   (COMMAND runs nginx, e.g. taskset -c 1; nothing for nginx itself;
#                                       NGINX_ACCESS_LOG=off writes no access log)
nginx_start() {
  local workers=$1
  shift
  cat >"$work/nginx.conf" <<NGINX
worker_processes $workers;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log ${NGINX_ACCESS_LOG:-$work/nginx-access.log};
  sendfile on;
  gzip_static on;
  default_type application/json;
  open_file_cache max=64 inactive=60s;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$ng_port reuseport; root $work/www; }
}
NGINX
  "$@" nginx -c "$work/nginx.conf"
  wait_http "http://127.0.0.1:$ng_port/health"
}
