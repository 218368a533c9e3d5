#!/bin/sh
# Description: install test. Installs the build tree at $1 into a scratch
# prefix under $2, then builds tests/install/consumer.c against that copy
# four ways -- pkg-config (shared and --static) and find_package (the
# snapbank::snapbank and snapbank::snapbank_static targets) -- and runs each;
# then tests/install/rt_consumer.c against the runtime's installed header
# and library (pkg-config snapbank_rt); and where the llama.cpp connector was
# built (its header installed), tests/install/llama_consumer.c against it
# with pkg-config snapbank_llama and find_package(snapbank_llama).
set -eu
BUILD=$1
WORK=$2
SRC=$(cd "$(dirname "$0")" && pwd)
CC=${CC:-cc}
rm -rf "$WORK"
mkdir -p "$WORK"
PREFIX="$WORK/prefix"
cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null
LIBDIR=$(find "$PREFIX" -name snapbank.pc -printf '%h\n' | head -1)
test -n "$LIBDIR" || { echo "install: snapbank.pc not installed"; exit 1; }
LIBDIR=$(dirname "$LIBDIR")
test -f "$PREFIX/include/snapbank.h" || { echo "install: header missing"; exit 1; }

export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
# shellcheck disable=SC2046
$CC -std=c11 -o "$WORK/pc_shared" "$SRC/consumer.c" $(pkg-config --cflags --libs snapbank)
LD_LIBRARY_PATH="$LIBDIR" "$WORK/pc_shared"
# shellcheck disable=SC2046
$CC -std=c11 -o "$WORK/pc_static" "$SRC/consumer.c" -static-libgcc \
  $(pkg-config --cflags snapbank) "$LIBDIR/libsnapbank.a" $(pkg-config --static --libs-only-l snapbank | sed 's/-lsnapbank//')
"$WORK/pc_static"

LLAMA=OFF
if [ -f "$PREFIX/include/snapbank_llama.h" ]; then
  LLAMA=ON
fi
cmake -S "$SRC" -B "$WORK/cmake" -DCMAKE_PREFIX_PATH="$PREFIX" -DSB_LLAMA_CONSUMER=$LLAMA >/dev/null
cmake --build "$WORK/cmake" >/dev/null
LD_LIBRARY_PATH="$LIBDIR" "$WORK/cmake/consumer_shared"
"$WORK/cmake/consumer_static"
test -f "$PREFIX/include/snapbank_rt.h" || { echo "install: snapbank_rt.h missing"; exit 1; }
# shellcheck disable=SC2046
$CC -std=c11 -o "$WORK/rt_consumer" "$SRC/rt_consumer.c" $(pkg-config --cflags --libs snapbank_rt)
LD_LIBRARY_PATH="$LIBDIR" "$WORK/rt_consumer" "$WORK/rt.gguf"
llama="; the llama.cpp connector not built"
if [ "$LLAMA" = ON ]; then
  # libllama is found through the run paths snapbank_llama.pc and the
  # package give; LD_LIBRARY_PATH is for our own libraries only.
  # shellcheck disable=SC2046
  $CC -std=c11 -o "$WORK/llama_consumer" "$SRC/llama_consumer.c" \
    $(pkg-config --cflags --libs snapbank_llama)
  LD_LIBRARY_PATH="$LIBDIR" "$WORK/llama_consumer"
  LD_LIBRARY_PATH="$LIBDIR" "$WORK/cmake/llama_consumer"
  llama="; the llama.cpp connector with pkg-config and find_package"
fi
echo "install: ok (pkg-config shared and static, find_package shared and static; the runtime's header and library$llama)"
