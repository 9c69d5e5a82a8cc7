#!/usr/bin/env bash
# Installs the Debian packages vts needs that are missing (sourced by deploy/run-local.sh and tests/run.sh).
# A second run installs nothing: it only asks dpkg.
vts_install_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq >&2 || return 1
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# What building and running the service needs.
VTS_BUILD_PACKAGES=(build-essential cmake pkg-config libuv1-dev libnng-dev libhiredis-dev libyajl-dev
  libcurl4-openssl-dev libssl-dev libcmocka-dev node-llhttp
  libavformat-dev libavcodec-dev libswresample-dev libavutil-dev libpocketsphinx-dev libsphinxbase-dev pocketsphinx-en-us)
# What the tests need beyond that: real servers and tools started by the tests themselves.
VTS_TEST_PACKAGES=(redis-server supervisor python3 python3-pytest python3-jsonschema python3-yaml wrk nginx-light curl
  procps ffmpeg pocketsphinx-testdata prometheus clang clang-format libclang-rt-14-dev git)
# Node.js and npm run the OpenAPI validator; machines that already carry a Node.js of their own keep it.
if ! command -v npm >/dev/null 2>&1; then VTS_TEST_PACKAGES+=(nodejs npm); fi
