#!/usr/bin/env bash
# deploy/prepare.sh [DIR]: makes, in DIR (default: this folder), what the containers of compose.yaml mount, with the
# owners and modes the images' users need, and fixes those of files already there (run it again after copying files
# in). Rootful docker or podman: the containers' users are the host's uids (for rootless podman, run the chown
# lines under `podman unshare`). Needs openssl. Nothing is replaced that exists:
#   DIR/keys/                 root:10001 2750  the key file's folder, mounted at the gateway's /etc/vts (a folder:
#     keys.db                 root:10001 0640  a rewritten key file is seen); new files take its group (setgid)
#   DIR/jobs-ca/              root:root  0700  the jobs link's CA: ca.key never leaves this folder, no container
#     ca.key, ca.crt                           mounts it
#   DIR/jobs-tls/gateway/     root:10001 0750  mounted at the gateway's /etc/vts-jobs-tls: ca.crt, gateway.crt
#     gateway.key             root:10001 0640  (a server certificate for the names fetchers dial), gateway.key
#   DIR/jobs-tls/fetcher/     root:10002 0750  mounted at the fetchers' /etc/vts-jobs-tls: ca.crt, fetcher.crt
#     fetcher.key             root:10002 0640  (a client certificate), fetcher.key
#   DIR/.env                  root:root  0600  REDIS_PASSWORD=..., read by compose for Redis and the gateway
# 10001 and 10002 are the uids and gids of the users of Dockerfile.gateway and Dockerfile.fetcher.
set -euo pipefail
dir=${1:-$(cd "$(dirname "$0")" && pwd)}
gateway_id=10001
fetcher_id=10002
# The names fetchers dial: the headless Service (Kubernetes), the compose service, and the host itself.
names=DNS:vts-gateway-jobs,DNS:gateway,DNS:localhost
umask 077
command -v openssl >/dev/null || { echo "prepare.sh: openssl is needed (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$dir/keys" "$dir/jobs-ca" "$dir/jobs-tls/gateway" "$dir/jobs-tls/fetcher"

ca=$dir/jobs-ca
if [ ! -e "$ca/ca.key" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 825 -subj /CN=vts-jobs-ca \
    -keyout "$ca/ca.key" -out "$ca/ca.crt" 2>/dev/null
  echo "prepare.sh: made the jobs link's CA in $ca (keep ca.key there or offline)" >&2
fi
leaf() { # role, extendedKeyUsage
  local out=$dir/jobs-tls/$1
  [ -e "$out/$1.key" ] && [ -e "$out/$1.crt" ] && return 0
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=vts-$1" -keyout "$out/$1.key" \
    -out "$out/$1.csr" 2>/dev/null
  printf 'subjectAltName=%s\nextendedKeyUsage=%s\n' "$names" "$2" >"$out/$1.ext"
  openssl x509 -req -in "$out/$1.csr" -CA "$ca/ca.crt" -CAkey "$ca/ca.key" -CAcreateserial -days 825 \
    -extfile "$out/$1.ext" -out "$out/$1.crt" 2>/dev/null
  rm -f "$out/$1.csr" "$out/$1.ext"
  echo "prepare.sh: made $out/$1.crt and $1.key" >&2
}
leaf gateway serverAuth
leaf fetcher clientAuth
cp "$ca/ca.crt" "$dir/jobs-tls/gateway/ca.crt"
cp "$ca/ca.crt" "$dir/jobs-tls/fetcher/ca.crt"

if [ ! -e "$dir/.env" ]; then
  printf 'REDIS_PASSWORD=%s\n' "$(openssl rand -hex 32)" >"$dir/.env"
  echo "prepare.sh: made the Redis password in $dir/.env" >&2
fi
[ -e "$dir/keys/keys.db" ] || : >"$dir/keys/keys.db"

# Owners and modes, whether made now or before.
chown root:root "$ca" "$ca"/* "$dir/.env"
chmod 0700 "$ca"
chmod 0600 "$ca/ca.key" "$dir/.env"
chmod 0644 "$ca/ca.crt"
chown -R root:$gateway_id "$dir/keys" "$dir/jobs-tls/gateway"
chown -R root:$fetcher_id "$dir/jobs-tls/fetcher"
chmod 2750 "$dir/keys"
chmod 0750 "$dir/jobs-tls/gateway" "$dir/jobs-tls/fetcher"
chmod 0755 "$dir/jobs-tls"
find "$dir/keys" "$dir/jobs-tls/gateway" "$dir/jobs-tls/fetcher" -type f -exec chmod 0640 {} +
echo "prepare.sh: $dir is ready: keys/ and jobs-tls/gateway/ for uid 10001, jobs-tls/fetcher/ for uid 10002" >&2
