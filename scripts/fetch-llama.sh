#!/bin/sh
# fetch-llama.sh -- fetch llama.cpp v0.5.0's headers and prebuilt CPU
# libraries from npm (no compile), for the llama.cpp connector
# (bindings/llama.cpp). Called by scripts/setup.sh; safe to run again.
#
# Where: ${SB_LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/snapbank/llama.cpp-v0.5.0}
# (bindings/llama.cpp/CMakeLists.txt looks in the same place):
#
#   include/     llama.h, llama-cpp.h and every header of ggml/include
#                (ggml.h, ggml-backend.h, ggml-cpu.h, gguf.h, ...), flat
#   lib/         every .so of bins/linux-x64: libllama.v0.5.0.so,
#                libggml.v0.5.0.so, libggml-base.so, libllama-common.so and
#                the CPU backend variants libggml-cpu-*.so (a program loads
#                them with ggml_backend_load_all_from_path(lib/));
#                libllama.so -> libllama.v0.5.0.so, libggml.so -> libggml.v0.5.0.so
#   .complete    the stamp: package versions, integrities, llama.cpp's
#                commit. Present only in a complete copy.
#
# What from where: the npm package node-llama-cpp@3.22.1 holds
# llama/gitRelease.bundle, a git bundle of llama.cpp at tag v0.5.0 (its
# llama/llama.cpp.info.json says so): the headers come from it.
# @node-llama-cpp/linux-x64@3.22.1 holds the libraries, built for CPUs
# (no GPU) by node-llama-cpp's CI.
#
# How: both tarballs are fetched with `npm pack` (npm's registry only) into
# a temporary directory beside the cache, checked against the sha512
# integrities pinned below (what `npm view PKG@VER dist.integrity` says),
# unpacked, checked for every file the connector needs, and renamed into
# place whole, the stamp already inside: a fetch that fails or is killed
# leaves no cache directory (at worst a .llama.cpp-v0.5.0.* temporary
# beside it), and a directory without the stamp is fetched again.
#
# Exit status: 0 when the cache is complete, or when the connector is
# skipped (npm absent, not linux x86-64: one line says so); 1 with a
# message naming what failed or is missing.
set -eu

LLAMA_TAG=v0.5.0
NLC_VERSION=3.22.1
NLC_PKG=node-llama-cpp
BIN_PKG=@node-llama-cpp/linux-x64
# sha512 of each tarball, in hex (npm's integrity is the same digest in base64:
# sha512-bltIipuWmc123H7tMIgDGKSsSrhmhlQYeVUC48XTjVW7XGJJiJJyCdlTMzQ/LiWoPkGDpcL4FviDpgw7qfTiDw==
# sha512-5uCCDNqWCNfaAm8aR/Uzxbo4HBpKgNF91kCHPepKhgMgV2OAmatoefbOlMihsqCiH2Od35E/eUHQCFbfRBJuOg==).
NLC_SHA512=6e5b488a9b9699cd76dc7eed30880318a4ac4ab866865418795502e3c5d38d55bb5c624988927209d95333343f2e25a83e4183a5c2f816f883a60c3ba9f4e20f
BIN_SHA512=e6e0820cda9608d7da026f1a47f533c5ba381c1a4a80d17dd640873dea4a86032057638099ab6879f6ce94c8a1b2a0a21f639ddf913f7941d00856df44126e3a
NLC_TGZ=node-llama-cpp-$NLC_VERSION.tgz
BIN_TGZ=node-llama-cpp-linux-x64-$NLC_VERSION.tgz
# What the connector and its tests need; the fetch fails naming any missing.
NEED_INCLUDE="llama.h llama-cpp.h ggml.h ggml-backend.h ggml-cpu.h ggml-alloc.h gguf.h"
NEED_LIB="libllama.v0.5.0.so libggml.v0.5.0.so libggml-base.so libggml-cpu-x64.so"

CACHE=${SB_LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/snapbank/llama.cpp-$LLAMA_TAG}
STAMP=$CACHE/.complete

say() { echo "fetch-llama: $*"; }
fail() { echo "fetch-llama: error: $*" >&2; exit 1; }

if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
  say "prebuilt llama.cpp is fetched for linux x86-64 only, this is $(uname -s) $(uname -m):" \
      "the llama.cpp connector will be skipped"
  exit 0
fi
if [ -f "$STAMP" ]; then
  say "llama.cpp $LLAMA_TAG present in $CACHE"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  say "npm is absent: the llama.cpp connector will be skipped (install npm and run scripts/setup.sh again)"
  exit 0
fi
for tool in git tar sha512sum; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool is needed (scripts/setup.sh installs it)"
done

say "fetching llama.cpp $LLAMA_TAG ($NLC_PKG@$NLC_VERSION, $BIN_PKG@$NLC_VERSION) into $CACHE"
parent=$(dirname "$CACHE")
mkdir -p "$parent"
tmp=$(mktemp -d "$parent/.llama.cpp-$LLAMA_TAG.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP

# 1. The tarballs, checked against the pinned digests.
mkdir "$tmp/npm"
(cd "$tmp/npm" && npm pack --silent "$NLC_PKG@$NLC_VERSION" "$BIN_PKG@$NLC_VERSION" >/dev/null) ||
  fail "npm pack $NLC_PKG@$NLC_VERSION $BIN_PKG@$NLC_VERSION failed (is npm's registry reachable?)"
for f in "$NLC_TGZ" "$BIN_TGZ"; do
  [ -f "$tmp/npm/$f" ] || fail "npm pack wrote no $f"
done
printf '%s  %s\n%s  %s\n' "$NLC_SHA512" "$NLC_TGZ" "$BIN_SHA512" "$BIN_TGZ" >"$tmp/npm/SHA512SUMS"
(cd "$tmp/npm" && sha512sum --quiet -c SHA512SUMS) ||
  fail "a tarball's sha512 is not the pinned one (see the line above)"

# 2. Unpack what is used: the bundle and its tag, the libraries.
mkdir "$tmp/nlc" "$tmp/bin"
tar -xzf "$tmp/npm/$NLC_TGZ" -C "$tmp/nlc" package/llama/gitRelease.bundle \
    package/llama/llama.cpp.info.json ||
  fail "$NLC_TGZ has no package/llama/gitRelease.bundle or llama.cpp.info.json"
tar -xzf "$tmp/npm/$BIN_TGZ" -C "$tmp/bin" package/bins/linux-x64 ||
  fail "$BIN_TGZ has no package/bins/linux-x64"
rm -rf "$tmp/npm"
grep -q "\"tag\": *\"$LLAMA_TAG\"" "$tmp/nlc/package/llama/llama.cpp.info.json" ||
  fail "$NLC_TGZ's llama.cpp.info.json names another tag than $LLAMA_TAG"

# 3. The headers from the bundle (no checkout: git archive of the paths).
git clone -q --bare "$tmp/nlc/package/llama/gitRelease.bundle" "$tmp/llama.git" ||
  fail "git could not clone $NLC_TGZ's gitRelease.bundle"
commit=$(git --git-dir="$tmp/llama.git" rev-parse HEAD)
mkdir "$tmp/src"
git --git-dir="$tmp/llama.git" archive HEAD include ggml/include | tar -xf - -C "$tmp/src" ||
  fail "llama.cpp's bundle (commit $commit) has no include/ or ggml/include/"

# 4. The cache's layout, checked, the stamp written last.
out=$tmp/out
mkdir -p "$out/include" "$out/lib"
cp "$tmp/src/include/llama.h" "$tmp/src/include/llama-cpp.h" "$tmp/src"/ggml/include/*.h \
   "$out/include/" || fail "llama.cpp's bundle lacks include/llama.h or include/llama-cpp.h"
cp "$tmp/bin/package/bins/linux-x64"/*.so "$out/lib/"
ln -s libllama.v0.5.0.so "$out/lib/libllama.so"
ln -s libggml.v0.5.0.so "$out/lib/libggml.so"
missing=""
for f in $NEED_INCLUDE; do [ -f "$out/include/$f" ] || missing="$missing include/$f"; done
for f in $NEED_LIB; do [ -f "$out/lib/$f" ] || missing="$missing lib/$f"; done
[ -z "$missing" ] || fail "the packages lack:$missing"
cat >"$out/.complete" <<EOF
llama.cpp $LLAMA_TAG commit $commit
$NLC_PKG@$NLC_VERSION sha512 $NLC_SHA512
$BIN_PKG@$NLC_VERSION sha512 $BIN_SHA512
EOF

# 5. Into place whole: an incomplete copy left by an older script is
# moved aside first (a directory cannot be renamed over a non-empty one).
if [ -e "$CACHE" ]; then
  mv "$CACHE" "$tmp/stale"
fi
mv "$out" "$CACHE"
say "llama.cpp $LLAMA_TAG (commit $(echo "$commit" | cut -c1-12)) in $CACHE"
