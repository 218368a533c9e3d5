#!/bin/sh
# local-cluster.sh -- a Redis Cluster on loopback for trying the shared tier
# (and for tests/cli/shared_cli.sh): N masters, no replicas, each a
# redis-server this script starts in DIR, joined with
# `redis-cli --cluster create`, stopped by the pids it recorded.
#
#   scripts/local-cluster.sh start DIR [BASE_PORT [N]]
#       start N (default 3) servers on 127.0.0.1:BASE_PORT.. (default 7000;
#       each also uses its cluster bus port, +10000), wait until the cluster
#       says cluster_state:ok, and print the --shared URL:
#       redis://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002
#       BASE_PORT `auto` (tests): a base below the ephemeral range spread by
#       this process's pid, so that parallel runs rarely meet; when a port
#       is taken, two more bases 4000 apart.
#   scripts/local-cluster.sh stop DIR
#       stop the servers started in DIR (by pid) and remove DIR.
#
# Nothing listens beyond 127.0.0.1; nothing is persisted (no RDB, no AOF).
# Exit status: 0; 1 failure (what was started is stopped); 2 usage.
set -eu

usage() {
    echo "usage: $0 start DIR [BASE_PORT [N]] | stop DIR" >&2
    exit 2
}

stop() {
    dir=$1
    if [ -f "$dir/pids" ]; then
        while read -r pid; do
            kill "$pid" 2> /dev/null || true
        done < "$dir/pids"
        # wait for each to exit (at most ~5 s), then insist
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            alive=0
            while read -r pid; do
                kill -0 "$pid" 2> /dev/null && alive=1
            done < "$dir/pids"
            [ $alive = 0 ] && break
            sleep 0.5
        done
        while read -r pid; do
            kill -9 "$pid" 2> /dev/null || true
        done < "$dir/pids"
    fi
    rm -rf "$dir"
}

[ $# -ge 2 ] || usage
cmd=$1
dir=$2
case $cmd in
stop)
    stop "$dir"
    exit 0
    ;;
start) ;;
*) usage ;;
esac
base=${3:-7000}
n=${4:-3}
if [ "$base" = auto ]; then
    b=$((17000 + ($$ % 400) * 10))
    for _ in 1 2 3; do
        if sh "$0" start "$dir" $b "$n" 2> "$dir.err"; then
            rm -f "$dir.err"
            exit 0
        fi
        b=$((b + 4000))
    done
    cat "$dir.err" >&2
    rm -f "$dir.err"
    exit 1
fi
command -v redis-server > /dev/null && command -v redis-cli > /dev/null || {
    echo "local-cluster: redis-server / redis-cli not installed (scripts/setup.sh)" >&2
    exit 1
}
mkdir -p "$dir"
: > "$dir/pids"
addrs=""
url=""
i=0
while [ $i -lt "$n" ]; do
    port=$((base + i))
    if redis-cli -h 127.0.0.1 -p $port ping > /dev/null 2>&1; then
        echo "local-cluster: port $port is in use" >&2
        stop "$dir"
        exit 1
    fi
    mkdir -p "$dir/$port"
    redis-server --port $port --bind 127.0.0.1 --protected-mode no \
        --cluster-enabled yes --cluster-config-file "$dir/$port/nodes.conf" \
        --cluster-node-timeout 1000 --appendonly no --save "" --dir "$dir/$port" \
        --logfile "$dir/$port/log" --daemonize no > /dev/null 2>&1 &
    echo $! >> "$dir/pids"
    addrs="$addrs 127.0.0.1:$port"
    url="$url${url:+,}127.0.0.1:$port"
    i=$((i + 1))
done
# every server answers
for a in $addrs; do
    p=${a#*:}
    k=0
    until redis-cli -h 127.0.0.1 -p "$p" ping 2> /dev/null | grep -q PONG; do
        k=$((k + 1))
        if [ $k -gt 50 ]; then
            echo "local-cluster: 127.0.0.1:$p did not start: $(tail -3 "$dir/$p/log" 2> /dev/null)" >&2
            stop "$dir"
            exit 1
        fi
        sleep 0.1
    done
done
# shellcheck disable=SC2086
if ! redis-cli --cluster create $addrs --cluster-replicas 0 --cluster-yes > "$dir/create.log" 2>&1; then
    echo "local-cluster: redis-cli --cluster create failed: $(tail -3 "$dir/create.log")" >&2
    stop "$dir"
    exit 1
fi
for a in $addrs; do
    p=${a#*:}
    k=0
    until redis-cli -h 127.0.0.1 -p "$p" cluster info 2> /dev/null | grep -q "cluster_state:ok"; do
        k=$((k + 1))
        if [ $k -gt 100 ]; then
            echo "local-cluster: the cluster did not come up" >&2
            stop "$dir"
            exit 1
        fi
        sleep 0.1
    done
done
echo "redis://$url"
