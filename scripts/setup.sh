#!/bin/sh
# setup.sh -- install the Debian packages snapbank's build, tests and demo
# need. Idempotent: installs only what is missing, and runs `apt-get update`
# first only when it has something to install. Uses sudo when not root.
set -eu

PACKAGES="
  build-essential cmake pkg-config
  liburing-dev libxxhash-dev libzstd-dev libjemalloc-dev
  libmicrohttpd-dev libjansson-dev curl
  libhiredis-dev redis-server
  libcmocka-dev
  clang libclang-rt-14-dev
  python3 python3-numpy python3-jinja2
  fio gnuplot-nox
"

missing=""
for p in $PACKAGES; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done

if [ -z "$missing" ]; then
  echo "setup: all packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "setup: installing:$missing"
$SUDO apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
echo "setup: done"
