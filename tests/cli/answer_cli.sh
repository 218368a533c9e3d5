#!/bin/sh
# answer_cli.sh SNAPBANK WORKDIR -- `make-model --answer TEXT`, the fixture
# whose greedy answer to any ChatML prompt is TEXT then <|im_end|>
# (tools/make_model/make_model.h), on both engines:
#   - the same options give the same bytes;
#   - f32 and f16: `run --temp 0` on two ChatML prompts prints exactly
#     TEXT; the tokens are TEXT, <|im_end|>, </s> (the builtin engine's
#     --stop-at-eos stops at </s>); at the prompt's end TEXT's logit
#     leads every other by at least 10 (--logits-out);
#   - the server (where curl is): /v1/chat/completions answers TEXT with
#     finish_reason "stop" after two tokens (<|im_end|> ends generation
#     for snapbank's tokenizer);
#   - where the CLI has llama.cpp, the same with --engine llama.cpp: the
#     text, the lead, generation stopping at <|im_end|> (llama.cpp's end
#     of generation: --stop-at-eos prints TEXT's id alone), `chat` with
#     the prompt rendered by llama.cpp's template, and the server;
#   - refused, exit 2 naming --answer: another architecture, a quantized
#     dtype, tied, an empty TEXT, a TEXT that ends the generation prompt.
set -eu
bin=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
fail() { echo "answer_cli: FAIL: $*" >&2; exit 1; }
server=
trap '[ -z "$server" ] || kill "$server" 2>/dev/null || true' EXIT

text='<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris"}}
</tool_call>'
printf '%s\n' "$text" > "$work/want"
p1='<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
What is the weather in Paris?<|im_end|>
<|im_start|>assistant
'
p2='<|im_start|>user
Hi<|im_end|>
<|im_start|>assistant
Hello!
How can I help?<|im_end|>
<|im_start|>user
And tomorrow, in Lyon?<|im_end|>
<|im_start|>assistant
'
llama=yes
if "$bin" run "$work/none.gguf" --engine llama.cpp --prompt x 2>&1 >/dev/null |
        grep -q "built without llama.cpp"; then
    llama=
    echo "answer_cli: the llama.cpp checks skipped: snapbank was built without llama.cpp"
fi

# lead FILE ID: the logits in FILE (n_vocab floats) have their maximum at
# ID, at least 10 above the next
lead() {
    od -An -v -f -w4 "$1" | awk -v want="$2" '
        { v = $1 + 0; i = NR - 1
          if (i == want) w = v; else if (!seen || v > other) { other = v; seen = 1 } }
        END { if (w - other < 10) { printf "logit %g of %d, next %g\n", w, want, other; exit 1 } }'
}

# serve MODEL ENGINE: /v1/chat/completions answers TEXT, stopped by <|im_end|>
serve() {
    command -v curl > /dev/null || { echo "answer_cli: no curl: the server checks skipped"; return 0; }
    rm -f "$work/port"
    "$bin" serve "$1" --engine "$2" --threads 1 --port 0 --port-file "$work/port" \
        > "$work/serve.out" 2> "$work/serve.err" &
    server=$!
    i=0
    while [ ! -s "$work/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    [ -s "$work/port" ] || fail "$2: the server did not start: $(cat "$work/serve.err")"
    curl -s "http://127.0.0.1:$(cat "$work/port")/v1/chat/completions" \
        -H 'Content-Type: application/json' -d '{"model": "'"$(basename "$1" .gguf)"'", "temperature": 0,
        "max_tokens": 16, "messages": [{"role": "user", "content": "Weather in Paris?"}]}' \
        > "$work/resp" || fail "$2: the server did not answer"
    kill "$server"
    wait "$server" || fail "$2: the server exited $?: $(cat "$work/serve.err")"
    server=
    # the JSON string of TEXT: quotes escaped, newlines as \n
    json=$(printf '%s' "$text" | sed 's/"/\\"/g' | awk 'NR > 1 { printf "\\n" } { printf "%s", $0 }')
    grep -qF "\"content\":\"$json\"" "$work/resp" &&
        grep -qF '"finish_reason":"stop"' "$work/resp" &&
        grep -qF '"completion_tokens":2,' "$work/resp" ||
        fail "$2: the server's answer: $(cat "$work/resp")"
}

# the same options, the same bytes
"$bin" make-model --preset tiny --answer "$text" -o "$work/m.gguf" > /dev/null
"$bin" make-model --preset tiny --answer "$text" -o "$work/m2.gguf" > /dev/null
cmp -s "$work/m.gguf" "$work/m2.gguf" || fail "two runs of make-model --answer differ"

for dtype in f32 f16; do
    m=$work/$dtype.gguf
    "$bin" make-model --preset tiny --dtype $dtype --answer "$text" -o "$m" > /dev/null
    # the vocabulary of 512 ends <|im_start|> 509, <|im_end|> 510, TEXT 511
    for engine in builtin llama.cpp; do
        [ $engine = builtin ] || [ -n "$llama" ] || continue
        r="$m --engine $engine --threads 1 --temp 0"
        for p in "$p1" "$p2"; do
            "$bin" run $r --prompt "$p" -n 8 --stop-at-eos > "$work/out" 2> "$work/err" ||
                fail "$dtype $engine: run: $(cat "$work/err")"
            cmp -s "$work/out" "$work/want" ||
                fail "$dtype $engine: the answer is '$(cat "$work/out")', not '$text'"
        done
        "$bin" run $r --prompt "$p1" -n 1 --logits-out "$work/logits" > /dev/null 2>&1 ||
            fail "$dtype $engine: --logits-out"
        lead "$work/logits" 511 || fail "$dtype $engine: TEXT does not lead by 10 logits"
        ids=$("$bin" run $r --prompt "$p1" -n 8 --stop-at-eos --print-token-ids 2> /dev/null)
        want=511,510,2 # the builtin engine stops at EOS only
        [ $engine = builtin ] || want=511 # llama.cpp stops at <|im_end|>, not printed
        [ "$ids" = "$want" ] || fail "$dtype $engine: the answer's tokens are $ids, not $want"
    done
done

m=$work/f16.gguf
serve "$m" builtin
if [ -n "$llama" ]; then
    serve "$m" llama.cpp
    # chat: the prompt rendered by llama.cpp from the model's ChatML template
    # (the answer printed on one line: newlines as spaces)
    printf 'What is the weather in Paris?\n' > "$work/script"
    "$bin" chat "$m" --engine llama.cpp --threads 1 --temp 0 -n 8 --stop-at-eos \
        --system "Be brief." --script "$work/script" > "$work/chat" 2> "$work/err" ||
        fail "chat: $(cat "$work/err")"
    grep -qxF "assistant>$(printf '%s' "$text" | tr '\n' ' ')" "$work/chat" ||
        fail "chat's answer: $(cat "$work/chat")"
fi

# refusals
set +e
for bad in "--preset tiny-qwen3" "--preset tiny --dtype q8_0" "--preset tiny --tied"; do
    "$bin" make-model $bad --answer "$text" -o "$work/x.gguf" > /dev/null 2> "$work/err"
    [ $? -eq 2 ] && grep -q -- "--answer" "$work/err" || fail "$bad --answer: $(cat "$work/err")"
done
for t in "" "assistant
"; do
    "$bin" make-model --preset tiny --answer "$t" -o "$work/x.gguf" > /dev/null 2> "$work/err"
    [ $? -eq 2 ] && grep -q -- "--answer" "$work/err" || fail "--answer '$t': $(cat "$work/err")"
done
set -e
rm -rf "$work"
echo "answer_cli: ok"
