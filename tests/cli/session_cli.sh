#!/bin/sh
# session_cli.sh SNAPBANK WORKDIR -- `snapbank run` and `snapbank chat` over a
# bank directory, as separate processes (a restart between each):
#   - two runs of prompts sharing a prefix: cold, then ssd, and the second
#     run's logits bit-identical to a cold run of the same prompt;
#   - a chat session resumed by a second process: cold, warm_prefix, ssd;
#   - `snapbank stat`: the bank's pages and its lifetime writes;
#   - --durability commit: each turn reports its pages written and durable;
#     a prompt under --min-prefix reports them denied "short";
#   - --ssd-session-cache off and write-only: no disk restores;
#   - usage and file errors: exit 2 / 1 with the fault named.
set -eu
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
fail() { echo "session_cli: FAIL: $*" >&2; exit 1; }
# Big enough that reading a prefix from disk beats recomputing it (on the
# tiny preset recomputing wins, and the runtime rightly skips the disk).
# The runtime decides from priors scaled by its thread count (a fresh
# process has measured nothing): two threads, so the decision is the same
# on any machine (on 64 CPUs the default would estimate recomputing faster).
t="--threads 2"
"$bin" make-model --preset tiny --dim 512 --layers 4 --heads 8 --kv-heads 4 --ff 1536 \
    --dtype f16 -o "$work/m.gguf" > /dev/null
m=$work/m.gguf
p1="The bank keeps what a model has already read, so that the next question does not start from nothing."
p2="The bank keeps what a model has already read, so that the next answer comes quickly."

# run: cold, then a bank hit from disk; logits equal to a cold run
"$bin" run "$m" $t --prompt "$p1" -n 4 --min-prefix 1 --bank-dir "$work/b1" > /dev/null 2> "$work/r1"
grep -q "cache_mode=cold" "$work/r1" || fail "first run not cold: $(cat "$work/r1")"
"$bin" run "$m" $t --prompt "$p2" -n 4 --min-prefix 1 --bank-dir "$work/b1" --logits-out "$work/l.warm" \
    > "$work/o.warm" 2> "$work/r2"
grep -q "cache_mode=ssd" "$work/r2" || fail "second run not ssd: $(cat "$work/r2")"
"$bin" run "$m" $t --prompt "$p2" -n 4 --logits-out "$work/l.cold" > "$work/o.cold" 2> "$work/r3"
grep -q "cache_mode=cold" "$work/r3" || fail "RAM-only run not cold"
cmp -s "$work/l.warm" "$work/l.cold" || fail "ssd logits differ from cold logits"
cmp -s "$work/o.warm" "$work/o.cold" || fail "ssd tokens differ from cold tokens"
# the same prompt again: its logits come from the point state, no forward pass
"$bin" run "$m" $t --prompt "$p2" -n 0 --min-prefix 1 --bank-dir "$work/b1" --logits-out "$work/l.point" \
    > /dev/null 2> "$work/r4"
grep -q "logits=point_state" "$work/r4" || fail "no point-state hit: $(cat "$work/r4")"
grep -q "prefill=0 " "$work/r4" || fail "point-state hit computed tokens"
cmp -s "$work/l.point" "$work/l.cold" || fail "point-state logits differ from cold logits"
# stat: what the three processes wrote, over the bank's life
"$bin" stat "$work/b1" --json > "$work/st" || fail "stat failed"
grep -q '"pages": [1-9]' "$work/st" || fail "stat: no pages: $(cat "$work/st")"
grep -q '"written_bytes": [1-9]' "$work/st" || fail "stat: no lifetime writes: $(cat "$work/st")"
grep -q '"write_amplification": [1-9]' "$work/st" || fail "stat: write amplification: $(cat "$work/st")"

# chat: a session across two processes
printf 'Hello there.\n# a comment\n\nWhat do you keep?\n' > "$work/s1"
printf 'I am back.\n' > "$work/s2"
"$bin" chat "$m" $t --min-prefix 1 --bank-dir "$work/b2" --session alice --system "Be brief." \
    --script "$work/s1" -n 4 --table > "$work/c1" 2> /dev/null
grep -q "alice *1  cold" "$work/c1" || fail "chat turn 1 not cold: $(cat "$work/c1")"
grep -q "alice *2  warm_prefix" "$work/c1" || fail "chat turn 2 not warm: $(cat "$work/c1")"
[ -f "$work/b2/sessions/alice.session" ] || fail "no session file"
"$bin" chat "$m" $t --min-prefix 1 --bank-dir "$work/b2" --session alice --script "$work/s2" -n 4 --table \
    > "$work/c2" 2> /dev/null
grep -q "alice *1  ssd" "$work/c2" || fail "resumed chat not ssd: $(cat "$work/c2")"
# another scope shares nothing
"$bin" chat "$m" $t --min-prefix 1 --bank-dir "$work/b2" --session carol --scope other --system "Be brief." \
    --script "$work/s1" -n 4 --table > "$work/c3" 2> /dev/null
grep -q "carol *1  cold" "$work/c3" || fail "another scope was not cold: $(cat "$work/c3")"

# durability: under commit a turn's pages are written and synced when it
# reports; a prompt shorter than --min-prefix is not written, and says why
"$bin" run "$m" $t --prompt "$p1" -n 2 --min-prefix 1 --bank-dir "$work/b3" --durability commit \
    > /dev/null 2> "$work/d1"
grep -q "disk_write=queued:[1-9][0-9]*,written:[1-9][0-9]*,denied:0 durable=yes" "$work/d1" ||
    fail "commit durability: $(cat "$work/d1")"
"$bin" run "$m" $t --prompt "$p1" -n 2 --bank-dir "$work/b4" --durability commit \
    > /dev/null 2> "$work/d2"
grep -q "denied:[1-9][0-9]*(short:[1-9][0-9]*) durable=no" "$work/d2" ||
    fail "a short prompt under commit: $(cat "$work/d2")"
"$bin" chat "$m" $t --min-prefix 1 --bank-dir "$work/b3" --session dora --durability commit \
    --script "$work/s2" -n 2 --table > "$work/d3" 2> /dev/null
grep -q "durable" "$work/d3" && grep -q "dora *1  .* yes " "$work/d3" ||
    fail "chat table durability: $(cat "$work/d3")"

# --ssd-session-cache off: nothing on disk to restore; write-only: written, never read
for mode in off write-only; do
    d=$work/b-$mode
    "$bin" run "$m" $t --prompt "$p1" -n 2 --min-prefix 1 --bank-dir "$d" --ssd-session-cache $mode \
        > /dev/null 2> /dev/null
    "$bin" run "$m" $t --prompt "$p2" -n 2 --min-prefix 1 --bank-dir "$d" --ssd-session-cache $mode \
        > /dev/null 2> "$work/m"
    grep -q "cache_mode=cold" "$work/m" || fail "--ssd-session-cache $mode restored: $(cat "$work/m")"
done
ls "$work/b-write-only/store" | grep -q . || fail "write-only wrote nothing"

# errors
set +e
"$bin" run "$m" $t --prompt x --session a > /dev/null 2> "$work/e1"
[ $? -eq 2 ] && grep -q "needs --bank-dir" "$work/e1" || fail "--session without --bank-dir"
"$bin" run "$m" $t --prompt x --min-prefix 1 --bank-dir "$work/b2" --session ../x > /dev/null 2> "$work/e2"
[ $? -eq 2 ] || fail "a session id with '/' was accepted"
printf 'garbage' > "$work/b2/sessions/bad.session"
"$bin" run "$m" $t --prompt x --min-prefix 1 --bank-dir "$work/b2" --session bad > /dev/null 2> "$work/e3"
[ $? -eq 1 ] && grep -q "bad.session" "$work/e3" || fail "a damaged session file: $(cat "$work/e3")"
"$bin" run "$m" $t --prompt x --ssd-session-cache sometimes > /dev/null 2> /dev/null
[ $? -eq 2 ] || fail "a bad --ssd-session-cache was accepted"
"$bin" run "$m" $t --prompt x --durability eventually > /dev/null 2> /dev/null
[ $? -eq 2 ] || fail "a bad --durability was accepted"
set -e
rm -rf "$work"
echo "session_cli: ok"
