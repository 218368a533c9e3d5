#!/bin/sh
# vocab_cli.sh SNAPBANK VOCABDIR WORKDIR -- the models people download, as
# far as this machine can make them: Llama 3 (llama-bpe vocabulary) in every
# weight type make-model writes, Qwen2.5 and Qwen3 (qwen2 vocabulary) in
# F16, Q8_0 and Q4_K_M (the types people download), random weights with the
# real vocabulary (make-model --vocab), through the CLI:
#   - `tokenize` on the model gives the vocabulary file's ids;
#   - `run` generates text (cold), a second process restores the shared
#     prefix from disk (ssd) with logits and tokens bit-identical to a cold
#     run's;
#   - `chat` is warm on its second turn and resumes from disk (ssd) in a
#     second process.
# A fourth argument `common` runs Llama 3 in those three types too; `one`
# runs each family in Q4_K_M alone (the TSan build: see
# tests/CMakeLists.txt); `all` (the default) Llama 3 in every type.
set -eu
bin=$1
vocab=$2
work=$3
which=${4:-all}
case $which in
all | common | one) ;;
*) echo "vocab_cli: the fourth argument is all, common or one, not '$which'" >&2; exit 2 ;;
esac
rm -rf "$work"
mkdir -p "$work"
fail() { echo "vocab_cli: FAIL: $*" >&2; exit 1; }
t="--threads 2" # the restore-or-recompute priors scale with threads (arch_cli.sh)
p1="The bank keeps what a model has already read, so that the next question does not start from nothing."
p2="The bank keeps what a model has already read, so that the next answer comes quickly."
printf 'Hello there.\nWhat do you keep?\n' > "$work/s1"
printf 'I am back.\n' > "$work/s2"
for spec in llama:tiny-llama3:llama-bpe qwen2:tiny-qwen2:qwen2 qwen3:tiny-qwen3:qwen2; do
    arch=${spec%%:*}
    rest=${spec#*:}
    preset=${rest%%:*}
    vf=$vocab/ggml-vocab-${rest#*:}.gguf
    "$bin" tokenize "$vf" --prompt "$p1" --ids-only > "$work/ids.vocab"
    types="f16 q8_0 q4_k_m"
    [ $which = one ] && types=q4_k_m
    [ $arch = llama ] && [ $which = all ] &&
        types="f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q4_k q5_k q6_k q4_k_m q5_k_m"
    for dt in $types; do
        n=$arch-$dt
        m=$work/$n.gguf
        # Small layers: the 128k- and 152k-token vocabularies make the
        # embedding the bulk of the file already.
        "$bin" make-model --preset $preset --dim 256 --layers 2 --heads 4 --kv-heads 2 \
            --head-dim 64 --ff 768 --dtype $dt --vocab "$vf" -o "$m" > "$work/mm" ||
            fail "$n: make-model"
        "$bin" tokenize "$m" --prompt "$p1" --ids-only > "$work/ids.model"
        cmp -s "$work/ids.vocab" "$work/ids.model" || fail "$n: the model tokenizes otherwise"
        b=$work/b-$n
        "$bin" run "$m" $t --prompt "$p1" -n 4 --min-prefix 1 --bank-dir "$b" > "$work/o1" \
            2> "$work/r1" || fail "$n: run: $(cat "$work/r1")"
        grep -q "cache_mode=cold" "$work/r1" || fail "$n: first run not cold: $(cat "$work/r1")"
        [ -s "$work/o1" ] || fail "$n: no text generated"
        "$bin" run "$m" $t --prompt "$p2" -n 4 --min-prefix 1 --bank-dir "$b" \
            --logits-out "$work/l.warm" > "$work/o.warm" 2> "$work/r2"
        grep -q "cache_mode=ssd" "$work/r2" || fail "$n: second run not ssd: $(cat "$work/r2")"
        "$bin" run "$m" $t --prompt "$p2" -n 4 --logits-out "$work/l.cold" > "$work/o.cold" \
            2> "$work/r3"
        cmp -s "$work/l.warm" "$work/l.cold" || fail "$n: ssd logits differ from cold logits"
        cmp -s "$work/o.warm" "$work/o.cold" || fail "$n: ssd tokens differ from cold tokens"
        "$bin" chat "$m" $t --min-prefix 1 --bank-dir "$b" --session alice --system "Be brief." \
            --script "$work/s1" -n 4 --table > "$work/c1" 2> /dev/null || fail "$n: chat"
        grep -q "alice *2  warm_prefix" "$work/c1" || fail "$n: chat turn 2 not warm: $(cat "$work/c1")"
        "$bin" chat "$m" $t --min-prefix 1 --bank-dir "$b" --session alice --script "$work/s2" \
            -n 4 --table > "$work/c2" 2> /dev/null || fail "$n: resumed chat"
        grep -q "alice *1  ssd" "$work/c2" || fail "$n: resumed chat not ssd: $(cat "$work/c2")"
        rm -rf "$m" "$b"
    done
done
rm -rf "$work"
echo "vocab_cli: ok"
