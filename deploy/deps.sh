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
  # Debian's maintainer scripts enable and start the services they install (nginx on port 80, redis-server,
  # supervisor, prometheus). vts and its tests start instances of their own, so a machine must not gain system
  # services: a policy-rc.d that refuses every start (exit 101) while apt runs, then whatever the install enabled is
  # disabled and stopped. An existing policy-rc.d is put back afterwards.
  local policy=/usr/sbin/policy-rc.d saved="" before rv=0
  before=$(vts_enabled_services)
  if [ -e "$policy" ]; then saved="$policy.vts-saved" && $sudo mv "$policy" "$saved"; fi
  printf '#!/bin/sh\n# deploy/deps.sh: no service starts while vts installs packages.\nexit 101\n' | $sudo tee "$policy" >/dev/null &&
    $sudo chmod 755 "$policy"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || rv=$?
  $sudo rm -f "$policy"
  [ -n "$saved" ] && $sudo mv "$saved" "$policy"
  vts_quiet_services "$before"
  return $rv
}

# The services started at boot, one per line: systemd's enabled units (also read where systemd is not running) and
# the SysV init scripts that have start links.
vts_enabled_services() {
  {
    command -v systemctl >/dev/null &&
      systemctl list-unit-files --type=service,socket,timer --state=enabled --no-legend 2>/dev/null | awk '{print $1}'
    ls /etc/rc2.d /etc/rc3.d /etc/rc4.d /etc/rc5.d 2>/dev/null | sed -n 's/^S[0-9]*//p'
  } | sort -u
}

# Disables and stops every service enabled since the list $1 (of vts_enabled_services) was taken.
vts_quiet_services() {
  local sudo="" s
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  for s in $(comm -13 <(printf '%s\n' "$1") <(vts_enabled_services)); do
    echo "disabling the system service $s (vts runs its own)" >&2
    case "$s" in
      *.service | *.socket | *.timer)
        if [ -d /run/systemd/system ]; then
          $sudo systemctl disable --now "$s" >/dev/null 2>&1
        else
          $sudo systemctl disable "$s" >/dev/null 2>&1
        fi
        ;;
      *)
        $sudo update-rc.d "$s" disable >/dev/null 2>&1
        [ -x "/etc/init.d/$s" ] && $sudo "/etc/init.d/$s" stop >/dev/null 2>&1
        ;;
    esac
  done
  return 0
}

# What building and running the service needs.
VTS_BUILD_PACKAGES=(build-essential cmake pkg-config libuv1-dev libnng-dev libhiredis-dev libyajl-dev
  libcurl4-openssl-dev libssl-dev libcmocka-dev node-llhttp zlib1g-dev libbrotli-dev libsqlite3-dev
  libavformat-dev libavcodec-dev libswresample-dev libavutil-dev libpocketsphinx-dev libsphinxbase-dev pocketsphinx-en-us
  libseccomp-dev)
# What deploy/run-local.sh needs beyond that: supervisord to run the service, curl for the README's next commands.
VTS_RUN_PACKAGES=(supervisor curl)
# What the tests need beyond that: real servers and tools started by the tests themselves (podman, runc and
# debootstrap build and run the images from a local Debian base; systemd-analyze checks the units, groff the man
# pages).
VTS_TEST_PACKAGES=(redis-server supervisor python3 python3-pytest python3-jsonschema python3-yaml wrk nginx-light curl
  procps ffmpeg pocketsphinx-testdata prometheus clang clang-format libclang-rt-14-dev git openssl python3-brotli
  podman runc netavark uidmap debootstrap systemd groff-base)
# Node.js and npm run the OpenAPI validator; machines that already carry a Node.js of their own keep it.
if ! command -v npm >/dev/null 2>&1; then VTS_TEST_PACKAGES+=(nodejs npm); fi
