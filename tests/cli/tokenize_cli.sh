#!/bin/sh
# tokenize_cli.sh SNAPBANK VOCAB_DIR WORKDIR -- `snapbank tokenize` on the
# vocabulary-only files and `snapbank make-model --vocab`:
#   - the default output (one "id -> 'piece'" line per token, BOS as the
#     vocabulary asks, special-token texts parsed), --ids-only, --no-bos,
#     --no-special (control tokens stay text, user-defined ones match:
#     MPT), --file (bytes as they are, newlines kept); qwen35's marks;
#   - a random-weight model with a real vocabulary runs a text prompt;
#   - usage and file errors: exit 2 / 1 with the fault named.
set -eu
bin=$1
vocab=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
fail() { echo "tokenize_cli: FAIL: $*" >&2; exit 1; }
q=$vocab/ggml-vocab-qwen2.gguf
l3=$vocab/ggml-vocab-llama-bpe.gguf
spm=$vocab/ggml-vocab-llama-spm.gguf

"$bin" --help | grep -q "tokenize" || fail "tokenize is not in the help"
"$bin" tokenize --help | grep -q -- "--ids-only" || fail "no usage"

# the default: one line per token, like llama-tokenize
"$bin" tokenize "$q" --prompt "Hello world" > "$work/o1"
printf "  9707 -> 'Hello'\n  1879 -> ' world'\n" | cmp -s - "$work/o1" || fail "lines: $(cat "$work/o1")"
[ "$("$bin" tokenize "$q" --prompt "Hello world" --ids-only)" = "9707 1879" ] || fail "ids-only"
# BOS as the vocabulary asks; --no-bos
[ "$("$bin" tokenize "$l3" --prompt "Hello world" --ids-only)" = "128000 9906 1917" ] \
    || fail "llama-bpe BOS"
[ "$("$bin" tokenize "$l3" --prompt "Hello world" --ids-only --no-bos)" = "9906 1917" ] \
    || fail "--no-bos"
[ "$("$bin" tokenize "$spm" --prompt "Hello" --ids-only)" = "1 15043" ] || fail "spm"
"$bin" tokenize "$spm" --prompt "Hello" > "$work/o2"
printf "     1 -> '<s>'\n 15043 -> ' Hello'\n" | cmp -s - "$work/o2" || fail "spm lines: $(cat "$work/o2")"
# special-token texts: parsed by default, text with --no-special
[ "$("$bin" tokenize "$q" --prompt "<|im_start|>user" --ids-only)" = "151644 872" ] \
    || fail "special not parsed"
out=$("$bin" tokenize "$q" --prompt "<|im_start|>user" --ids-only --no-special)
case " $out " in *" 151644 "*) fail "--no-special parsed it: $out" ;; esac
# user-defined tokens match with --no-special too, as in llama.cpp: MPT's
# run of two spaces is one token (llama.cpp's vector: 50276 12092)
mpt=$vocab/ggml-vocab-mpt.gguf
[ "$("$bin" tokenize "$mpt" --prompt "  Hello" --ids-only --no-special)" = "50276 12092" ] \
    || fail "mpt --no-special"
[ "$("$bin" tokenize "$mpt" --prompt "  Hello" --ids-only --no-bos)" = "50276 12092" ] \
    || fail "mpt"
# qwen35: combining marks join letter runs ("re\u0301sume\u0301", llama.cpp's vector)
[ "$("$bin" tokenize "$vocab/ggml-vocab-qwen35.gguf" --prompt "$(printf 're\314\201sume\314\201')" \
    --ids-only --no-special)" = "265 53839 31323 53839" ] || fail "qwen35"
# --file: the bytes as they are (a trailing newline is a token)
printf 'a\n' > "$work/t.txt"
[ "$("$bin" tokenize "$q" --file "$work/t.txt" --ids-only)" = "64 198" ] || fail "--file"

# make-model --vocab: a random model with the qwen2 vocabulary runs text
"$bin" make-model -o "$work/m.gguf" --arch qwen2 --vocab "$q" --tied > "$work/mm" \
    || fail "make-model --vocab"
grep -q "vocab 151936" "$work/mm" || fail "make-model report: $(cat "$work/mm")"
[ "$("$bin" tokenize "$work/m.gguf" --prompt "Hello world" --ids-only)" = "9707 1879" ] \
    || fail "the model's vocabulary"
"$bin" run "$work/m.gguf" --prompt "Hello world" -n 2 > /dev/null 2> "$work/r" \
    || fail "run: $(cat "$work/r")"
grep -q "cached=0/2" "$work/r" || fail "run did not tokenize to 2 tokens: $(cat "$work/r")"

# errors
set +e
"$bin" tokenize "$q" > /dev/null 2>&1; [ $? -eq 2 ] || fail "no text: not a usage error"
"$bin" tokenize --prompt x > /dev/null 2>&1; [ $? -eq 2 ] || fail "no model: not a usage error"
"$bin" tokenize "$q" --prompt x --file "$work/t.txt" > /dev/null 2>&1
[ $? -eq 2 ] || fail "--prompt and --file: not a usage error"
"$bin" tokenize "$q" --prompt x --bogus > /dev/null 2>&1; [ $? -eq 2 ] || fail "bad option"
"$bin" tokenize "$q" --file "$work/none.txt" > /dev/null 2> "$work/e1"
[ $? -eq 1 ] && grep -q "none.txt" "$work/e1" || fail "missing text file: $(cat "$work/e1")"
"$bin" tokenize "$work/t.txt" --prompt x > /dev/null 2> "$work/e2"
[ $? -eq 1 ] && grep -q "t.txt" "$work/e2" || fail "not GGUF: $(cat "$work/e2")"
"$bin" make-model -o "$work/m2.gguf" --vocab "$work/none.gguf" > /dev/null 2> "$work/e3"
[ $? -eq 1 ] && grep -q "none.gguf" "$work/e3" || fail "make-model missing vocab: $(cat "$work/e3")"
[ ! -e "$work/m2.gguf" ] || fail "make-model wrote a file anyway"
set -e
rm -rf "$work"
echo "tokenize_cli: ok"
