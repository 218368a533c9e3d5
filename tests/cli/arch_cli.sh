#!/bin/sh
# arch_cli.sh SNAPBANK WORKDIR -- every architecture through the CLI, as a
# user would run it: for llama with Llama 3 rope_freqs, qwen2 and qwen3
# (make-model's tiny-llama3 / tiny-qwen2 / tiny-qwen3 presets widened until
# reading a prefix from disk beats recomputing it):
#   - make-model writes the file; `run` generates text from a prompt;
#   - a second process restores the shared prefix from disk (ssd) and its
#     logits and tokens are bit-identical to a cold run's;
#   - `chat` resumes a session in a second process from disk;
#   - errors: an unknown preset or scaling type is a usage error (exit 2)
#     naming it; a model of an unknown architecture is refused (exit 1)
#     with the architecture named, and so is make-model's olmo2 preset
#     tiny-swa (a sliding-window model for llama.cpp only), which
#     make-model writes the same twice.
set -eu
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
fail() { echo "arch_cli: FAIL: $*" >&2; exit 1; }
# The runtime decides restore-or-recompute from priors scaled by its thread
# count (a fresh process has measured nothing): two threads, so the ssd
# expected below does not depend on how many CPUs the machine has.
t="--threads 2"
p1="The bank keeps what a model has already read, so that the next question does not start from nothing."
p2="The bank keeps what a model has already read, so that the next answer comes quickly."
printf 'Hello there.\nWhat do you keep?\n' > "$work/s1"
printf 'I am back.\n' > "$work/s2"
for preset in tiny-llama3 tiny-qwen2 tiny-qwen3; do
    m=$work/$preset.gguf
    hd=64
    [ $preset = tiny-qwen3 ] && hd=128 # heads wider than dim / heads
    "$bin" make-model --preset $preset --dim 512 --layers 4 --heads 8 --kv-heads 4 --head-dim $hd \
        --ff 1536 --dtype f16 -o "$m" > "$work/mm" || fail "$preset: make-model"
    grep -q "tied" "$work/mm" || fail "$preset: not tied: $(cat "$work/mm")"
    b=$work/b-$preset
    "$bin" run "$m" $t --prompt "$p1" -n 4 --min-prefix 1 --bank-dir "$b" > "$work/o1" 2> "$work/r1" ||
        fail "$preset: run: $(cat "$work/r1")"
    grep -q "cache_mode=cold" "$work/r1" || fail "$preset: first run not cold: $(cat "$work/r1")"
    arch=${preset#tiny-}
    [ $arch = llama3 ] && arch=llama
    grep -q "($arch," "$work/r1" || fail "$preset: run does not say $arch: $(cat "$work/r1")"
    [ -s "$work/o1" ] || fail "$preset: no text generated"
    "$bin" run "$m" $t --prompt "$p2" -n 4 --min-prefix 1 --bank-dir "$b" --logits-out "$work/l.warm" \
        > "$work/o.warm" 2> "$work/r2"
    grep -q "cache_mode=ssd" "$work/r2" || fail "$preset: second run not ssd: $(cat "$work/r2")"
    "$bin" run "$m" $t --prompt "$p2" -n 4 --logits-out "$work/l.cold" > "$work/o.cold" 2> "$work/r3"
    cmp -s "$work/l.warm" "$work/l.cold" || fail "$preset: ssd logits differ from cold logits"
    cmp -s "$work/o.warm" "$work/o.cold" || fail "$preset: ssd tokens differ from cold tokens"
    "$bin" chat "$m" $t --min-prefix 1 --bank-dir "$b" --session alice --system "Be brief." \
        --script "$work/s1" -n 4 --table > "$work/c1" 2> /dev/null || fail "$preset: chat"
    grep -q "alice *2  warm_prefix" "$work/c1" || fail "$preset: chat turn 2 not warm: $(cat "$work/c1")"
    "$bin" chat "$m" $t --min-prefix 1 --bank-dir "$b" --session alice --script "$work/s2" -n 4 --table \
        > "$work/c2" 2> /dev/null || fail "$preset: resumed chat"
    grep -q "alice *1  ssd" "$work/c2" || fail "$preset: resumed chat not ssd: $(cat "$work/c2")"
done

set +e
"$bin" make-model --preset llama4 -o "$work/x.gguf" > /dev/null 2> "$work/e1"
[ $? -eq 2 ] && grep -q "unknown preset 'llama4'" "$work/e1" || fail "unknown preset: $(cat "$work/e1")"
"$bin" make-model --rope-scaling longrope -o "$work/x.gguf" > /dev/null 2> "$work/e2"
[ $? -eq 2 ] && grep -q "longrope" "$work/e2" || fail "unknown scaling type: $(cat "$work/e2")"
set -e
# a model whose general.architecture names one this runtime does not run
python3 - "$work/tiny-qwen3.gguf" "$work/other.gguf" <<'PY'
import sys
d = open(sys.argv[1], "rb").read()
key = b"general.architecture"
i = d.index(key) + len(key) + 4 + 8  # type u32, string length u64
assert d[i:i + 5] == b"qwen3", d[i:i + 5]
open(sys.argv[2], "wb").write(d[:i] + b"qwen9" + d[i + 5:])
PY
set +e
"$bin" run "$work/other.gguf" --prompt x -n 1 > /dev/null 2> "$work/e3"
rc=$?
set -e
[ $rc -eq 1 ] && grep -q "architecture 'qwen9' is not supported" "$work/e3" ||
    fail "unknown architecture (exit $rc): $(cat "$work/e3")"
grep -q "other.gguf" "$work/e3" || fail "the message does not name the file: $(cat "$work/e3")"
# olmo2 with a sliding window: written (byte-identical twice), run refuses it by name
"$bin" make-model --preset tiny-swa -o "$work/swa.gguf" > "$work/mm" || fail "tiny-swa: make-model"
grep -q "(olmo2, f32, 4 layers, .*window 32, untied" "$work/mm" || fail "tiny-swa: $(cat "$work/mm")"
"$bin" make-model --preset tiny-swa -o "$work/swa2.gguf" > /dev/null || fail "tiny-swa: make-model"
cmp -s "$work/swa.gguf" "$work/swa2.gguf" || fail "tiny-swa: the same options gave other bytes"
set +e
"$bin" run "$work/swa.gguf" --prompt x -n 1 --bank-dir "$work/b-swa" > /dev/null 2> "$work/e4"
rc=$?
"$bin" make-model --preset tiny --swa 8 -o "$work/x.gguf" > /dev/null 2> "$work/e5"
rc5=$?
set -e
[ $rc -eq 1 ] && grep -q "architecture 'olmo2' is not supported" "$work/e4" ||
    fail "olmo2 (exit $rc): $(cat "$work/e4")"
[ $rc5 -eq 2 ] && grep -q "olmo2 only" "$work/e5" || fail "--swa on llama (exit $rc5): $(cat "$work/e5")"
rm -rf "$work"
echo "arch_cli: ok"
