#!/bin/sh
# bench_shared_quick.sh BENCH_SHARED WORKDIR -- bench_shared --quick on a
# local 3-master Redis Cluster of its own (scripts/local-cluster.sh on free
# ports, stopped by pid at the end), so the benchmark cannot rot: it fails
# on any call that fails or a page that is not published or fetched.
# Skips (exit 77) with a message when redis-server is absent.
set -eu
bin=$1
work=$2
if ! command -v redis-server > /dev/null || ! command -v redis-cli > /dev/null; then
    echo "bench_shared_quick: skipped: redis-server / redis-cli not installed"
    exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
lc=$here/../scripts/local-cluster.sh
rm -rf "$work"
mkdir -p "$work"
cluster=$work/cluster
trap 'sh "$lc" stop "$cluster" 2> /dev/null || true' EXIT INT TERM
if ! url=$(sh "$lc" start "$cluster" auto 3 2> "$work/lc.err"); then
    echo "bench_shared_quick: FAIL: local cluster: $(cat "$work/lc.err")" >&2
    exit 1
fi
"$bin" --shared "$url" --quick
