#!/bin/sh
# setup.sh -- install the Debian packages snapbank's build, tests and demo
# need, then fetch llama.cpp for the llama.cpp connector
# (scripts/fetch-llama.sh: headers and prebuilt CPU libraries from npm, into
# a cache directory; skipped with a line saying so when npm is absent).
# Idempotent: installs only what is missing, runs `apt-get update` first
# only when it has something to install, and fetches llama.cpp only when
# its cache is not complete. Uses sudo when not root.
set -eu

PACKAGES="
  build-essential cmake pkg-config git
  liburing-dev libxxhash-dev libzstd-dev libjemalloc-dev
  libmicrohttpd-dev libjansson-dev curl
  libhiredis-dev redis-server libsodium-dev
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
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
  fi
  echo "setup: installing:$missing"
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

sh "$(dirname "$0")/fetch-llama.sh"
echo "setup: done"
