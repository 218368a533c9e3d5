#!/bin/sh
# shared_cli.sh SNAPBANK WORKDIR -- two processes share a prompt through the
# shared tier, as a user would run them: a local 3-node Redis Cluster
# (scripts/local-cluster.sh, stopped by pid at the end), then
#   - node A: `snapbank run MODEL --bank-dir A --shared redis://...` (cold);
#   - node B: the same prompt with its own, empty --bank-dir B: the prompt's
#     full pages come from the pool (cache_mode=remote) and its logits and
#     tokens are bit-identical to a cold run's (--logits-out);
#   - `snapbank serve --shared` (RAM only): usage.cache_mode remote; and
#     with --engine llama.cpp, one server publishes, another restores;
#   - a model so small that recomputing is estimated faster: node B does
#     not fetch (shared=skipped, cold);
#   - a tenant with another --scope finds nothing (cold);
#   - credentials only from a file: a URL with a password and a
#     --shared-auth file others may read are refused (ACL users confining
#     tenants are test_remote's);
#   - --shared-ttl: the pages node A publishes expire; --shared-timeout,
#     --shared-ttl, --shared-publish-mib refused without --shared or with
#     a bad value;
#   - a damaged value (SETRANGE on one page's key): node E's report names
#     fault=bad_value and the key, E recomputes and its publisher replaces
#     the value, node G restores the whole prompt from the pool again;
#   - a wrong password (an ACL user): the report names fault=auth and the
#     server's WRONGPASS, and so does serve's usage.shared_fault;
#   - --shared-secret-file: node S1 with a secret publishes under sb2 keys
#     (nothing for nodes without it), S2 with the same secret restores
#     from the pool, S3 with another secret is cold; a secret file others
#     may read is refused;
#   - `snapbank remote-acl`: the rule it prints, applied, lets a tenant's
#     user publish and fetch its scope (nodes X1, X2) and refuses its
#     publishes in another scope (X3: the log names noperm);
#   - the cluster gone: node C answers anyway (cold, exit 0).
# Skips (exit 77) with a message when redis-server is absent.
set -eu
bin=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
lc=$here/../../scripts/local-cluster.sh
fail() { echo "shared_cli: FAIL: $*" >&2; exit 1; }
if ! command -v redis-server > /dev/null || ! command -v redis-cli > /dev/null; then
    echo "shared_cli: skipped: redis-server / redis-cli not installed"
    exit 77
fi
rm -rf "$work"
mkdir -p "$work"
cluster=$work/cluster
trap 'sh "$lc" stop "$cluster" 2> /dev/null || true' EXIT INT TERM
url=$(sh "$lc" start "$cluster" auto 3 2> "$work/lc.err") ||
    fail "local cluster: $(cat "$work/lc.err")"
first=${url#redis://}
first=${first%%,*} # the first server's host:port

t="--threads 2"
m=$work/m.gguf
"$bin" make-model --preset tiny-llama3 --dim 512 --layers 4 --heads 8 --kv-heads 4 --head-dim 64 \
    --ff 1536 --dtype f16 -o "$m" > /dev/null || fail "make-model"
p="The bank keeps what a model has already read, so that the next node does not start from nothing at all."

"$bin" run "$m" $t --prompt "$p" -n 4 --min-prefix 1 --bank-dir "$work/A" --shared "$url" \
    --shared-ttl 3600 --shared-timeout 1000 --shared-publish-mib 32 \
    > "$work/oA" 2> "$work/rA" || fail "node A: $(cat "$work/rA")"
ports=$(echo "${url#redis://}" | tr ',' '\n' | sed 's/.*://')
keys() { # every sb1 or sb2 key as "port key", one a line
    for q in $ports; do
        redis-cli -p "$q" --scan --pattern 'sb[12]:*' | sed "s/^/$q /"
    done
}
keys > "$work/keys"
[ -s "$work/keys" ] || fail "node A published nothing"
while read -r q k; do
    ttl=$(redis-cli -p "$q" TTL "$k")
    [ "$ttl" -gt 0 ] && [ "$ttl" -le 3600 ] || fail "--shared-ttl 3600: $k has TTL $ttl"
done < "$work/keys"
grep -q "cache_mode=cold" "$work/rA" || fail "node A not cold: $(cat "$work/rA")"

"$bin" run "$m" $t --prompt "$p" -n 4 --min-prefix 1 --bank-dir "$work/B" --shared "$url" \
    --logits-out "$work/l.shared" > "$work/oB" 2> "$work/rB" || fail "node B: $(cat "$work/rB")"
grep -q "cache_mode=remote" "$work/rB" || fail "node B not shared: $(cat "$work/rB")"
grep -q "(shared [1-9]" "$work/rB" || fail "node B does not say how many: $(cat "$work/rB")"

"$bin" run "$m" $t --prompt "$p" -n 4 --logits-out "$work/l.cold" > "$work/oC" 2> "$work/rC" ||
    fail "cold run: $(cat "$work/rC")"
cmp -s "$work/l.shared" "$work/l.cold" || fail "shared logits differ from cold logits"
cmp -s "$work/oB" "$work/oC" || fail "shared tokens differ from cold tokens"

# a damaged value: named in the report, replaced by the node that
# recomputes it, restored whole by the next node
read -r q k < "$work/keys"
n=$(redis-cli -p "$q" STRLEN "$k")
off=$((n - 8))
c=$(redis-cli -p "$q" GETRANGE "$k" $off $off)
[ "$c" = "A" ] && nc=B || nc=A
redis-cli -p "$q" SETRANGE "$k" $off "$nc" > /dev/null
"$bin" run "$m" $t --prompt "$p" -n 4 --min-prefix 1 --bank-dir "$work/E" --shared "$url" \
    > /dev/null 2> "$work/rE" || fail "node E: $(cat "$work/rE")"
grep -q "fault=bad_value,\"$k\",bad_values=1" "$work/rE" ||
    fail "node E does not name the bad value $k: $(cat "$work/rE")"
c2=$(redis-cli -p "$q" GETRANGE "$k" $off $off)
[ "$c2" = "$c" ] || fail "the bad value of $k was not replaced"
"$bin" run "$m" $t --prompt "$p" -n 4 --min-prefix 1 --bank-dir "$work/G" --shared "$url" \
    > /dev/null 2> "$work/rG" || fail "node G: $(cat "$work/rG")"
grep -q "cache_mode=remote" "$work/rG" && ! grep -q "fault=" "$work/rG" ||
    fail "node G after the replacement: $(cat "$work/rG")"

# a wrong password: the report says auth, with the server's words
for q in $ports; do
    redis-cli -p "$q" ACL SETUSER sbcli on '>right' '~*' '+@all' > /dev/null
done
printf 'sbcli wrong\n' > "$work/wrongauth"
chmod 600 "$work/wrongauth"
"$bin" run "$m" $t --prompt "$p" -n 2 --min-prefix 1 --bank-dir "$work/W" --shared "$url" \
    --shared-auth "$work/wrongauth" > /dev/null 2> "$work/rW" || fail "node W: $(cat "$work/rW")"
grep -q "fault=auth,\"WRONGPASS" "$work/rW" || fail "wrong password not named: $(cat "$work/rW")"

# a deployment's secret: keyed keys, sealed values; another secret shares nothing
head -c 32 /dev/urandom > "$work/sec1"
head -c 32 /dev/urandom > "$work/sec2"
chmod 600 "$work/sec1" "$work/sec2"
keys | grep -c ' sb2:' > "$work/n2" || true
[ "$(cat "$work/n2")" = 0 ] || fail "sb2 keys before any secret"
for node in S1 S2; do
    "$bin" run "$m" $t --prompt "$p" -n 4 --min-prefix 1 --bank-dir "$work/$node" --shared "$url" \
        --shared-secret-file "$work/sec1" > /dev/null 2> "$work/r$node" ||
        fail "node $node: $(cat "$work/r$node")"
done
grep -q "cache_mode=cold" "$work/rS1" || fail "node S1 found plain pages: $(cat "$work/rS1")"
grep -q "cache_mode=remote" "$work/rS2" || fail "node S2 not from the pool: $(cat "$work/rS2")"
keys | grep -q ' sb2:' || fail "node S1 published no sb2 key"
"$bin" run "$m" $t --prompt "$p" -n 4 --min-prefix 1 --bank-dir "$work/S3" --shared "$url" \
    --shared-secret-file "$work/sec2" > /dev/null 2> "$work/rS3" || fail "node S3: $(cat "$work/rS3")"
grep -q "cache_mode=cold" "$work/rS3" && ! grep -q "fault=" "$work/rS3" ||
    fail "another secret is not a plain miss: $(cat "$work/rS3")"
chmod 644 "$work/sec2"
set +e
"$bin" run "$m" $t --prompt "$p" -n 1 --shared "$url" --shared-secret-file "$work/sec2" \
    > /dev/null 2> "$work/rS4"
rc=$?
set -e
[ $rc -ne 0 ] && grep -q "chmod 600" "$work/rS4" || fail "readable secret (exit $rc): $(cat "$work/rS4")"

# remote-acl: the printed rule is enough for a tenant's scope, and only it
rule=$("$bin" remote-acl --scope acme --user acmeu) || fail "remote-acl"
case "$rule" in "ACL SETUSER acmeu on >PASSWORD resetkeys ~sb1:"*) ;; *) fail "rule: $rule" ;; esac
set -f
for q in $ports; do
    # shellcheck disable=SC2086
    out=$(redis-cli -p "$q" $(echo "$rule" | sed 's/>PASSWORD/>pw1/'))
    [ "$out" = OK ] || fail "applying the rule on $q: $out"
done
set +f
printf 'acmeu pw1\n' > "$work/acme"
chmod 600 "$work/acme"
for node in X1 X2; do
    "$bin" run "$m" $t --prompt "$p" -n 2 --min-prefix 1 --bank-dir "$work/$node" --scope acme \
        --shared "$url" --shared-auth "$work/acme" > /dev/null 2> "$work/r$node" ||
        fail "node $node: $(cat "$work/r$node")"
done
grep -q "cache_mode=remote" "$work/rX2" || fail "acme's user cannot share: $(cat "$work/rX2")"
"$bin" run "$m" $t --prompt "$p" -n 2 --min-prefix 1 --bank-dir "$work/X3" --scope other \
    --shared "$url" --shared-auth "$work/acme" > /dev/null 2> "$work/rX3" ||
    fail "node X3: $(cat "$work/rX3")"
grep -q "failed: noperm" "$work/rX3" || fail "acme's user published elsewhere: $(cat "$work/rX3")"

# snapbank serve (RAM only) answers the same prompt from the pool:
# usage.cache_mode remote
"$bin" serve "$m" $t --port 0 --port-file "$work/pf" --shared "$url" --min-prefix 1 --quiet \
    2> "$work/serve.log" &
spid=$!
k=0
until [ -s "$work/pf" ]; do
    k=$((k + 1))
    [ $k -gt 100 ] && { kill $spid 2> /dev/null; fail "serve did not start: $(cat "$work/serve.log")"; }
    sleep 0.1
done
python3 - "$(cat "$work/pf")" "$p" > "$work/usage" <<'PY' || { kill $spid; fail "serve: $(cat "$work/usage")"; }
import json, sys, urllib.request
port, prompt = sys.argv[1], sys.argv[2]
req = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % port,
                             data=json.dumps({"model": "m", "prompt": prompt,
                                              "max_tokens": 2}).encode(),
                             headers={"Content-Type": "application/json"})
u = json.load(urllib.request.urlopen(req, timeout=60))["usage"]
print(json.dumps(u))
assert u["cache_mode"] == "remote", u
assert u["cached_tokens_shared"] > 0 and u["cached_tokens_shared"] % 16 == 0, u
PY
kill $spid
wait $spid || fail "serve did not stop cleanly: $(cat "$work/serve.log")"

# serve with a wrong password: usage.shared_fault names it
"$bin" serve "$m" $t --port 0 --port-file "$work/pf2" --shared "$url" --min-prefix 1 --quiet \
    --shared-auth "$work/wrongauth" 2> "$work/serve2.log" &
spid=$!
k=0
until [ -s "$work/pf2" ]; do
    k=$((k + 1))
    [ $k -gt 100 ] && { kill $spid 2> /dev/null; fail "serve did not start: $(cat "$work/serve2.log")"; }
    sleep 0.1
done
python3 - "$(cat "$work/pf2")" "$p" > "$work/usage2" <<'PY' || { kill $spid; fail "serve: $(cat "$work/usage2")"; }
import json, sys, urllib.request
port, prompt = sys.argv[1], sys.argv[2]
req = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % port,
                             data=json.dumps({"model": "m", "prompt": prompt,
                                              "max_tokens": 1}).encode(),
                             headers={"Content-Type": "application/json"})
u = json.load(urllib.request.urlopen(req, timeout=60))["usage"]
print(json.dumps(u))
assert u["cache_mode"] == "cold", u
assert u["shared_fault"]["reason"] == "auth", u
assert u["shared_fault"]["detail"].startswith("WRONGPASS"), u
PY
kill $spid
wait $spid || fail "serve did not stop cleanly: $(cat "$work/serve2.log")"

# serve --engine llama.cpp (where the CLI has it): server L1 answers a new
# prompt and publishes it (SIGTERM flushes the publisher); server L2, RAM
# only, restores it from the pool: usage.cache_mode remote
if ! "$bin" run "$work/none.gguf" --engine llama.cpp --prompt x 2>&1 >/dev/null |
        grep -q "built without llama.cpp"; then
    pl="A prompt for llama.cpp's engine: the pool keeps its pages for every node that asks later on."
    for node in L1 L2; do
        "$bin" serve "$m" $t --engine llama.cpp --port 0 --port-file "$work/pf$node" \
            --shared "$url" --min-prefix 1 --page-tokens 16 --quiet 2> "$work/serve$node.log" &
        spid=$!
        k=0
        until [ -s "$work/pf$node" ]; do
            k=$((k + 1))
            [ $k -gt 300 ] && { kill $spid 2> /dev/null; fail "serve $node did not start: $(cat "$work/serve$node.log")"; }
            sleep 0.1
        done
        python3 - "$(cat "$work/pf$node")" "$pl" "$node" > "$work/usage$node" <<'PY' || { kill $spid; fail "serve $node: $(cat "$work/usage$node")"; }
import json, sys, urllib.request
port, prompt, node = sys.argv[1], sys.argv[2], sys.argv[3]
req = urllib.request.Request("http://127.0.0.1:%s/v1/completions" % port,
                             data=json.dumps({"model": "m", "prompt": prompt,
                                              "max_tokens": 2}).encode(),
                             headers={"Content-Type": "application/json"})
u = json.load(urllib.request.urlopen(req, timeout=120))["usage"]
print(json.dumps(u))
if node == "L1":
    assert u["cache_mode"] == "cold", u
else:
    assert u["cache_mode"] == "remote", u
    assert u["cached_tokens_shared"] >= 16 and u["cached_tokens_shared"] % 16 == 0, u
PY
        kill $spid
        wait $spid || fail "serve $node did not stop cleanly: $(cat "$work/serve$node.log")"
    done
fi

# a model so small that recomputing beats fetching: node B does not ask
"$bin" make-model --preset tiny -o "$work/tiny.gguf" > /dev/null || fail "make-model tiny"
"$bin" run "$work/tiny.gguf" $t --prompt "$p" -n 2 --min-prefix 1 --bank-dir "$work/TA" --shared "$url" \
    > /dev/null 2> "$work/rTA" || fail "tiny node A: $(cat "$work/rTA")"
"$bin" run "$work/tiny.gguf" $t --prompt "$p" -n 2 --min-prefix 1 --bank-dir "$work/TB" --shared "$url" \
    > /dev/null 2> "$work/rTB" || fail "tiny node B: $(cat "$work/rTB")"
grep -q "cache_mode=cold.*shared=skipped" "$work/rTB" ||
    fail "tiny node B fetched although recomputing is faster: $(cat "$work/rTB")"

# another tenant shares nothing
"$bin" run "$m" $t --prompt "$p" -n 2 --min-prefix 1 --bank-dir "$work/D" --scope other \
    --shared "$url" > /dev/null 2> "$work/rD" || fail "tenant: $(cat "$work/rD")"
grep -q "cache_mode=cold" "$work/rD" || fail "another scope was not cold: $(cat "$work/rD")"

# credentials: never on the command line; the file only its owner's
set +e
"$bin" run "$m" --prompt x -n 1 --shared "redis://u:secret@$first" > /dev/null 2> "$work/e1"
rc=$?
[ $rc -eq 2 ] && grep -q "shared-auth" "$work/e1" || fail "password in URL (exit $rc): $(cat "$work/e1")"
printf 'secret\n' > "$work/auth"
chmod 644 "$work/auth"
"$bin" run "$m" --prompt x -n 1 --shared "$url" --shared-auth "$work/auth" > /dev/null 2> "$work/e2"
rc=$?
[ $rc -eq 1 ] && grep -q "chmod 600" "$work/e2" || fail "readable auth file (exit $rc): $(cat "$work/e2")"
"$bin" run "$m" --prompt x -n 1 --shared-auth "$work/auth" > /dev/null 2> "$work/e3"
rc=$?
[ $rc -eq 2 ] || fail "--shared-auth without --shared (exit $rc): $(cat "$work/e3")"
"$bin" run "$m" --prompt x -n 1 --shared-ttl 60 > /dev/null 2> "$work/e5"
rc=$?
[ $rc -eq 2 ] && grep -q -- "--shared-ttl needs --shared" "$work/e5" ||
    fail "--shared-ttl without --shared (exit $rc): $(cat "$work/e5")"
"$bin" chat "$m" --shared "$url" --shared-timeout 0 < /dev/null > /dev/null 2> "$work/e6"
rc=$?
[ $rc -eq 2 ] && grep -q -- "--shared-timeout" "$work/e6" ||
    fail "--shared-timeout 0 (exit $rc): $(cat "$work/e6")"
"$bin" serve "$m" --shared "$url" --shared-publish-mib x > /dev/null 2> "$work/e7"
rc=$?
[ $rc -eq 2 ] && grep -q -- "--shared-publish-mib" "$work/e7" ||
    fail "serve --shared-publish-mib x (exit $rc): $(cat "$work/e7")"
"$bin" run "$m" --prompt x -n 1 --shared "http://$first" > /dev/null 2> "$work/e4"
rc=$?
[ $rc -eq 2 ] && grep -q "redis://" "$work/e4" || fail "bad URL (exit $rc): $(cat "$work/e4")"
set -e
# the cluster gone: a node still answers, recomputing
sh "$lc" stop "$cluster"
"$bin" run "$m" $t --prompt "$p" -n 4 --min-prefix 1 --bank-dir "$work/F" --shared "$url" \
    --logits-out "$work/l.down" > "$work/oF" 2> "$work/rF" || fail "cluster gone: $(cat "$work/rF")"
grep -q "cache_mode=cold" "$work/rF" || fail "cluster gone, not cold: $(cat "$work/rF")"
cmp -s "$work/l.down" "$work/l.cold" || fail "cluster gone: logits differ from cold"

rm -rf "$work"
echo "shared_cli: ok"
