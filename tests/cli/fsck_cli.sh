#!/bin/sh
# fsck_cli.sh SNAPBANK WORKDIR -- `snapbank fsck` and `snapbank fsck --repair`
# on the bank a real `snapbank run` wrote, process after process:
#   - a clean store: fsck says clean (exit 0); --repair rebuilds nothing;
#   - the superblock damaged in each way (a field of both slots, zeroed,
#     truncated to nothing, mid slot A and mid slot B, unlinked, garbage;
#     zeroed with the summary gone too): fsck reports it and names
#     --repair (exit 1) without changing a byte of the store; stat and run
#     refuse it naming 'snapbank fsck --repair DIR'; fsck --repair says what
#     it rebuilt (exit 0), after which fsck is clean, stat finds every page
#     again, and a run restores the stored prefix from disk with logits
#     bit-identical to a cold run;
#   - a directory with no store, or none at all: both refuse (exit 2)
#     naming it, and write nothing;
#   - usage errors: exit 2.
set -eu
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
fail() { echo "fsck_cli: FAIL: $*" >&2; exit 1; }

# The model session_cli uses: big enough that a disk restore beats recomputing.
"$bin" make-model --preset tiny --dim 512 --layers 4 --heads 8 --kv-heads 4 --ff 1536 \
    --dtype f16 -o "$work/m.gguf" > /dev/null
m=$work/m.gguf
p1="The bank keeps what a model has already read, so that the next question does not start from nothing."
p2="The bank keeps what a model has already read, so that the next answer comes quickly."
"$bin" run "$m" --prompt "$p2" -n 0 --logits-out "$work/l.cold" > /dev/null 2>&1
"$bin" run "$m" --prompt "$p1" -n 4 --min-prefix 1 --bank-dir "$work/orig" > /dev/null 2>&1
s=$work/b/store

pages_of() { "$bin" stat "$1" --json | sed -n 's/.*"pages": \([0-9]*\).*/\1/p'; }
# Every file of the store but LOCK (which holds the pid of its last holder;
# fsck takes the lock as every holder does), with its checksum.
sums() { (cd "$1" && for f in *; do [ "$f" = LOCK ] || cksum "$f"; done); }

# A clean store.
cp -a "$work/orig" "$work/b"
"$bin" fsck "$s" > "$work/out" || fail "clean store: $(cat "$work/out")"
grep -q ": clean$" "$work/out" || fail "clean store not clean: $(cat "$work/out")"
"$bin" fsck --repair "$s" > "$work/out" || fail "repair of a clean store: $(cat "$work/out")"
grep -q "superblock: sound, nothing to rebuild" "$work/out" || fail "clean repair: $(cat "$work/out")"
pages=$(pages_of "$s")
[ "$pages" -gt 0 ] || fail "no pages in the bank"

size=$(stat -c %s "$s/superblock")
put_byte() { printf '\245' | dd of="$1" bs=1 seek="$2" conv=notrunc 2> /dev/null; }
damage() {
    case $1 in
    slots) put_byte "$s/superblock" 52; put_byte "$s/superblock" $((size / 2 + 52)) ;;
    zero) head -c "$size" /dev/zero > "$s/superblock" ;;
    empty) : > "$s/superblock" ;;
    mid-a) truncate -s $((size / 4)) "$s/superblock" ;;
    mid-b) truncate -s $((size * 3 / 4)) "$s/superblock" ;;
    unlink) rm "$s/superblock" ;;
    garbage) yes "not a superblock" | head -c "$size" > "$s/superblock" ;;
    summary) head -c "$size" /dev/zero > "$s/superblock"; rm "$s"/seg-*.sum ;;
    esac
}

for d in slots zero empty mid-a mid-b unlink garbage summary; do
    rm -rf "$work/b"
    cp -a "$work/orig" "$work/b"
    damage "$d"
    sums "$s" > "$work/before"
    # fsck reports the damage, names --repair, changes nothing.
    rc=0
    "$bin" fsck "$s" > "$work/out" 2>&1 || rc=$?
    [ "$rc" = 1 ] || fail "$d: fsck exit $rc: $(cat "$work/out")"
    grep -q "superblock: " "$work/out" || fail "$d: no superblock report: $(cat "$work/out")"
    grep -q "snapbank fsck --repair $s" "$work/out" || fail "$d: --repair not named: $(cat "$work/out")"
    sums "$s" > "$work/after"
    cmp -s "$work/before" "$work/after" || fail "$d: fsck changed the store"
    # So do the commands that open it.
    rc=0
    "$bin" stat "$s" > /dev/null 2> "$work/err" || rc=$?
    [ "$rc" = 1 ] || fail "$d: stat exit $rc"
    grep -q "snapbank fsck --repair $s" "$work/err" || fail "$d: stat: $(cat "$work/err")"
    rc=0
    "$bin" run "$m" --prompt "$p2" -n 0 --min-prefix 1 --bank-dir "$work/b" > /dev/null \
        2> "$work/err" || rc=$?
    [ "$rc" = 1 ] || fail "$d: run exit $rc"
    grep -q "snapbank fsck --repair $s" "$work/err" || fail "$d: run: $(cat "$work/err")"
    sums "$s" > "$work/after"
    cmp -s "$work/before" "$work/after" || fail "$d: a refused open changed the store"
    # The repair rebuilds it from the segment.
    "$bin" fsck --repair "$s" > "$work/out" 2>&1 || fail "$d: repair: $(cat "$work/out")"
    grep -q "rebuilt from 1 segment file" "$work/out" || fail "$d: repair: $(cat "$work/out")"
    grep -q "dropped: 0 records" "$work/out" || fail "$d: repair dropped: $(cat "$work/out")"
    if [ "$d" = summary ]; then
        grep -q "1 read record by record" "$work/out" || fail "$d: not scanned: $(cat "$work/out")"
    fi
    "$bin" fsck "$s" > "$work/out" || fail "$d: fsck after repair: $(cat "$work/out")"
    grep -q ": clean$" "$work/out" || fail "$d: not clean after repair: $(cat "$work/out")"
    [ "$(pages_of "$s")" = "$pages" ] || fail "$d: pages after repair: $(pages_of "$s") of $pages"
    "$bin" run "$m" --prompt "$p2" -n 0 --min-prefix 1 --bank-dir "$work/b" \
        --logits-out "$work/l.ssd" > /dev/null 2> "$work/err" || fail "$d: run after repair"
    grep -q "cache_mode=ssd" "$work/err" || fail "$d: not restored from disk: $(cat "$work/err")"
    cmp -s "$work/l.ssd" "$work/l.cold" || fail "$d: restored logits differ from cold ones"
done

# No store here: refused, naming the directory, nothing written.
mkdir "$work/empty"
for opt in "" --repair; do
    rc=0
    "$bin" fsck "$work/empty" $opt > /dev/null 2> "$work/err" || rc=$?
    [ "$rc" = 2 ] || fail "empty dir $opt: exit $rc"
    grep -q "$work/empty: no store here" "$work/err" || fail "empty dir $opt: $(cat "$work/err")"
    [ -z "$(ls -A "$work/empty")" ] || fail "empty dir $opt: something was written"
    rc=0
    "$bin" fsck "$work/none" $opt > /dev/null 2> "$work/err" || rc=$?
    [ "$rc" = 2 ] || fail "missing dir $opt: exit $rc"
    grep -q "$work/none" "$work/err" || fail "missing dir $opt: $(cat "$work/err")"
    [ ! -e "$work/none" ] || fail "missing dir $opt: created"
done

# Usage.
rc=0
"$bin" fsck --bogus "$s" > /dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "unknown option: exit $rc"
rc=0
"$bin" fsck > /dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "no directory: exit $rc"
"$bin" fsck --help | grep -q -- "--repair" || fail "--help does not describe --repair"

rm -rf "$work"
echo "fsck_cli: ok"
