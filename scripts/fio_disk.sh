#!/bin/sh
# fio_disk.sh -- the fio baseline of bench_disk, alone: a sequential write,
# then a read of the same file, with the block size of the records snapbank
# writes per page (page + 4 KiB head), io_uring, O_DIRECT, one job.
#
#   scripts/fio_disk.sh [DIR] [SIZE] [PAGE_BYTES] [QUEUE_DEPTH]
#
# Defaults: /var/tmp, 2 GiB of pages (2147483648), 1 MiB pages (1048576),
# queue depth 32; the file holds SIZE / PAGE_BYTES records. It runs the same
# jobs as bench_disk (whose command lines ask fio for terse output; these ask
# for JSON), prints fio's bw_bytes as MiB/s, and removes its scratch
# directory. Exit 77 (skip) when fio is not installed.
set -eu

DIR=${1:-/var/tmp}
SIZE=${2:-2147483648}
PAGE=${3:-1048576}
QD=${4:-32}

command -v fio >/dev/null 2>&1 || { echo "fio_disk: fio not in PATH" >&2; exit 77; }
BS=$((PAGE + 4096))
# shellcheck disable=SC2017 # whole records: SIZE / PAGE of them
BYTES=$((SIZE / PAGE * BS))
WORK=$(mktemp -d "$DIR/fio_disk.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM

# fio_job RW EXTRA...: one fio job; prints the command and the bandwidth.
fio_job() {
  rw=$1
  shift
  set -- fio --name="bench_disk_$rw" --filename="$WORK/fio.dat" --ioengine=io_uring \
    --direct=1 --rw="$rw" --bs="$BS" --iodepth="$QD" --size="$BYTES" "$@" \
    --output-format=json
  echo "fio command: $*"
  "$@" >"$WORK/$rw.json"
  python3 -c 'import json, sys
d = sys.argv[2]
bw = json.load(open(sys.argv[1]))["jobs"][0][d]["bw_bytes"]
print("fio %s: %.0f MiB/s" % (d, bw / 2**20))' "$WORK/$rw.json" "$rw"
}

echo "fio_disk: $BYTES bytes in blocks of $BS bytes, QD $QD, in $WORK"
fio_job write --end_fsync=1
fio_job read
