#!/bin/sh
# llama_cli.sh SNAPBANK WORKDIR -- `snapbank run` and `snapbank chat` with
# --engine llama.cpp (libllama computes, the bank keeps its KV through the
# llama.cpp connector), as separate processes over one bank directory:
#   - run twice with the same prompt: cold, then ssd; the greedy text and
#     the last prompt position's logits (--logits-out) identical to a cold
#     run's;
#   - chat --session s fed two messages, then a second process fed a third:
#     cold, warm_prefix, then ssd with the earlier turns' tokens cached;
#   - the two engines never read each other's session files;
#   - a hybrid model (make-model's qwen35) and a sliding-window one
#     (olmo2): a cold run records boundaries
#     on the --boundary-grid and at the prompt's end; the same prompt again
#     resumes from the end's (ssd, the last token computed, the same text
#     and logits); a prompt that leaves it midway resumes from a grid
#     boundary before the divergence;
#   - --engine bogus refused, naming the flag, exit 2.
# Where the CLI was built without llama.cpp it says so and exits 77 (skip).
set -eu
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
fail() { echo "llama_cli: FAIL: $*" >&2; exit 1; }
if "$bin" run "$work/none.gguf" --engine llama.cpp --prompt x 2>&1 >/dev/null |
        grep -q "built without llama.cpp"; then
    echo "llama_cli: skipped: snapbank was built without llama.cpp"
    exit 77
fi
"$bin" make-model --preset tiny-qwen3 -o "$work/m.gguf" > /dev/null
m=$work/m.gguf
l="--engine llama.cpp --threads 1 --min-prefix 1"
p="The bank keeps what a model has already read, so that the next question does not start from nothing."

# run: cold, then the same prompt restored from disk by a second process
"$bin" run "$m" $l --prompt "$p" -n 8 --bank-dir "$work/b1" --logits-out "$work/l1" \
    > "$work/o1" 2> "$work/r1"
grep -q "turn: cache_mode=cold cached=0/" "$work/r1" || fail "first run not cold: $(cat "$work/r1")"
"$bin" run "$m" $l --prompt "$p" -n 8 --bank-dir "$work/b1" --logits-out "$work/l2" \
    > "$work/o2" 2> "$work/r2"
grep -q "turn: cache_mode=ssd cached=[1-9][0-9]*/[0-9]* (disk [1-9]" "$work/r2" ||
    fail "second run not ssd: $(cat "$work/r2")"
grep -q "prefill=1 " "$work/r2" || fail "second run computed more than the last token: $(cat "$work/r2")"
cmp -s "$work/o1" "$work/o2" || fail "greedy text differs: cold '$(cat "$work/o1")', ssd '$(cat "$work/o2")'"
cmp -s "$work/l1" "$work/l2" || fail "ssd logits differ from cold logits"
[ "$(wc -c < "$work/l1")" -eq $((512 * 4)) ] || fail "--logits-out: not n_vocab floats"
# a RAM-only bank: cold again, the same text
"$bin" run "$m" $l --prompt "$p" -n 8 > "$work/o3" 2> "$work/r3"
grep -q "cache_mode=cold" "$work/r3" || fail "RAM-only run not cold: $(cat "$work/r3")"
cmp -s "$work/o1" "$work/o3" || fail "greedy text of a RAM-only run differs"
# token ids as given, printed as ids
"$bin" run "$m" $l --prompt-tokens 1,2,3,4,5 -n 3 --print-token-ids > "$work/o4" 2> "$work/r4"
grep -q "^[0-9]*,[0-9]*,[0-9]*$" "$work/o4" || fail "--prompt-tokens/--print-token-ids: $(cat "$work/o4")"

# a hybrid model (qwen35) and a sliding-window one (olmo2): boundaries on
# the grid and at the prompt's end
hp="$p $p $p $p $p $p $p $p"
for preset in tiny-hybrid tiny-swa; do
    "$bin" make-model --preset $preset -o "$work/$preset.gguf" > /dev/null
    h="$work/$preset.gguf --engine llama.cpp --threads 1 --min-prefix 1 --boundary-grid 64"
    h="$h --bank-dir $work/b-$preset"
    "$bin" run $h --prompt "$hp" -n 6 --logits-out "$work/hl1" > "$work/ho1" 2> "$work/hr1"
    grep -q "cache_mode=cold .*boundaries_written=[2-9]" "$work/hr1" ||
        fail "$preset: the cold run recorded no grid boundaries: $(cat "$work/hr1")"
    n=$(sed -n 's/.*cache_mode=cold cached=0\/\([0-9]*\) .*/\1/p' "$work/hr1")
    [ "${n:-0}" -gt 128 ] || fail "$preset: a prompt of ${n:-?} tokens is too short for the grid"
    "$bin" run $h --prompt "$hp" -n 6 --logits-out "$work/hl2" > "$work/ho2" 2> "$work/hr2"
    grep -q "cache_mode=ssd cached=$((n - 1))/$n .*prefill=1 .*boundary=$((n - 1)) " "$work/hr2" ||
        fail "$preset: the second run did not resume from the prompt's end: $(cat "$work/hr2")"
    cmp -s "$work/ho1" "$work/ho2" || fail "$preset: greedy text differs after a restore"
    cmp -s "$work/hl1" "$work/hl2" || fail "$preset: logits differ after a restore"
    "$bin" run $h --prompt "$p $p $p $p Something else entirely." -n 2 > /dev/null 2> "$work/hr3"
    b=$(sed -n 's/.* boundary=\([0-9]*\) .*/\1/p' "$work/hr3")
    [ "${b:-0}" -gt 0 ] && [ $((b % 64)) -eq 0 ] && grep -q "cache_mode=ssd" "$work/hr3" ||
        fail "$preset: a diverging prompt did not resume from a grid boundary: $(cat "$work/hr3")"
done

# chat: a session across two processes (two messages, then one)
printf 'Hello there.\n# a comment\n\nWhat do you keep?\n' > "$work/s1"
printf 'I am back.\n' > "$work/s2"
"$bin" chat "$m" $l --bank-dir "$work/b2" --session s --system "Be brief." -n 4 \
    < "$work/s1" > "$work/c1" 2> "$work/e1" || fail "chat: $(cat "$work/e1")"
grep -q "^\[s turn 1\] cache_mode=cold" "$work/c1" || fail "chat turn 1 not cold: $(cat "$work/c1")"
grep -q "^\[s turn 2\] cache_mode=warm_prefix cached=[1-9]" "$work/c1" ||
    fail "chat turn 2 not warm: $(cat "$work/c1")"
[ -f "$work/b2/sessions/s.llama.session" ] || fail "no session file"
# what the second process should find: turn 2's prompt and its decoded answer
t2=$(sed -n 's/^\[s turn 2\] .*cached=[0-9]*\/\([0-9]*\) .*/\1/p' "$work/c1")
"$bin" chat "$m" $l --bank-dir "$work/b2" --session s -n 4 --script "$work/s2" \
    > "$work/c2" 2> "$work/e2" || fail "resumed chat: $(cat "$work/e2")"
grep -q "resumed session s" "$work/e2" || fail "the session was not resumed: $(cat "$work/e2")"
grep -q "^\[s turn 1\] cache_mode=ssd cached=$((t2 + 3))/[0-9]* (disk $((t2 + 3)))" "$work/c2" ||
    fail "resumed chat not ssd with the $((t2 + 3)) tokens of turns 1-2: $(cat "$work/c2")"
# --table: the same report as a table; another scope shares nothing
"$bin" chat "$m" $l --bank-dir "$work/b2" --session t --scope other --script "$work/s2" -n 2 --table \
    > "$work/c3" 2> /dev/null
grep -q "t *1  cold" "$work/c3" || fail "chat --table: $(cat "$work/c3")"
# the builtin engine does not read the llama.cpp engine's session, nor back
cp "$work/b2/sessions/s.llama.session" "$work/b2/sessions/x.session"
set +e
"$bin" chat "$m" --threads 1 --bank-dir "$work/b2" --session x --script "$work/s2" -n 2 \
    > /dev/null 2> "$work/e3"
[ $? -eq 1 ] && grep -q "x.session" "$work/e3" || fail "builtin read a llama.cpp session: $(cat "$work/e3")"
"$bin" chat "$m" --threads 1 --bank-dir "$work/b2" --session y --script "$work/s2" -n 2 \
    > /dev/null 2>&1 || fail "builtin chat failed"
cp "$work/b2/sessions/y.session" "$work/b2/sessions/y.llama.session"
"$bin" chat "$m" $l --bank-dir "$work/b2" --session y --script "$work/s2" -n 2 \
    > /dev/null 2> "$work/e4"
[ $? -eq 1 ] && grep -q "y.llama.session" "$work/e4" || fail "llama.cpp read a builtin session: $(cat "$work/e4")"

# refusals: an unknown engine
"$bin" run "$m" --engine bogus --prompt x > /dev/null 2> "$work/e5"
[ $? -eq 2 ] && grep -q -- "--engine 'bogus': no such engine" "$work/e5" || fail "--engine bogus: $(cat "$work/e5")"
"$bin" run "$work/none.gguf" $l --prompt x > /dev/null 2> "$work/e8"
[ $? -eq 1 ] && grep -q "none.gguf" "$work/e8" || fail "a missing model: $(cat "$work/e8")"
set -e
rm -rf "$work"
echo "llama_cli: ok"
