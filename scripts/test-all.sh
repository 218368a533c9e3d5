#!/bin/sh
# test-all.sh -- build snapbank and run every test, the way CI does:
#
#   0. The layer check from includes: no include cycle between source
#      folders, and store/core includes nothing of the tiers above it
#      (scripts/check-layers.py); a violation fails the run at once.
#   1. Release build, warnings as errors: unit tests, fuzz corpus replay,
#      the benchmark smoke run, and the install test (a program built
#      against an installed copy with pkg-config and with find_package);
#      then the layer check from the objects' symbols (scripts/check-calls.py:
#      a folder calls only itself, folders below it, or a declared interface;
#      the libraries export only sb_/sbrt_ names).
#   2. ASan + UBSan build: the same suites.
#   3. TSan build: the same suites (the thread tests are the point).
#   4. Where clang is present: a libFuzzer build, then a bounded fuzzing run
#      of every harness over a scratch copy of its corpus.
#
# Builds go to build-ci/ (override with SB_BUILD_ROOT). SB_FUZZ_SECONDS sets
# the fuzzing time per harness (default 90; 0 skips step 4).
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${SB_BUILD_ROOT:-$ROOT/build-ci}
JOBS=$(nproc 2>/dev/null || echo 2)
FUZZ_SECONDS=${SB_FUZZ_SECONDS:-90}
start=$(date +%s)

mkdir -p "$BUILD"
# Free space where the builds and the tests' stores (/var/tmp) go, for the
# step lines: a run that fails for want of space says so in its log.
free_gib() {
  df -Pk "$1" 2>/dev/null | awk 'NR == 2 { printf "%.1f", $4 / 1048576 }'
}

step() {
  echo
  echo "==== $* ($(($(date +%s) - start)) s; free: $(free_gib "$BUILD") GiB in the build" \
       "root, $(free_gib /var/tmp) GiB in /var/tmp)"
}

build_and_test() {
  name=$1
  shift
  step "$name: configure and build"
  cmake -S "$ROOT" -B "$BUILD/$name" -DSB_WERROR=ON "$@" >/dev/null
  cmake --build "$BUILD/$name" -j "$JOBS"
  step "$name: test"
  (cd "$BUILD/$name" && ctest --output-on-failure -j "$JOBS")
}

step "layers: scripts/check-layers.py"
python3 "$ROOT/scripts/check-layers.py" "$ROOT"

build_and_test release -DCMAKE_BUILD_TYPE=Release
step "calls: scripts/check-calls.py (the layer rule from the objects' symbols)"
python3 "$ROOT/scripts/check-calls.py" --self-test
python3 "$ROOT/scripts/check-calls.py" "$BUILD/release" "$ROOT"
build_and_test asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSB_SANITIZE=ON
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  build_and_test tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSB_TSAN=ON

if [ "$FUZZ_SECONDS" -gt 0 ] && command -v clang >/dev/null 2>&1; then
  step "libfuzzer: configure and build (clang)"
  CC=clang cmake -S "$ROOT" -B "$BUILD/libfuzzer" -DSB_WERROR=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSB_SANITIZE=ON -DSB_LIBFUZZER=ON \
    -DSB_BUILD_BENCH=OFF >/dev/null
  cmake --build "$BUILD/libfuzzer" -j "$JOBS"
  for corpus in "$ROOT"/fuzz/corpus/*/; do
    target=$(basename "$corpus")
    bin="$BUILD/libfuzzer/bin/fuzz_$target"
    [ -x "$bin" ] || continue
    step "libfuzzer: fuzz_$target for ${FUZZ_SECONDS} s"
    # New inputs go to a scratch directory (the first one named); the
    # checked-in corpus is read only. The log is long: show its tail, or
    # all of it when the fuzzer fails.
    work="$BUILD/libfuzzer/fuzz-$target"
    rm -rf "$work"
    mkdir -p "$work/corpus" "$work/artifacts"
    # -timeout: an input running longer is a hang. 90 s, not 10: a
    # 989-byte fuzz_api input (fuzz/slow/, fuzz/README.md) takes 35 s here,
    # 3.8 s in Release, and finishes.
    if (cd "$work" && "$bin" -max_total_time="$FUZZ_SECONDS" -timeout=90 \
          -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
          "$work/corpus" "$corpus" >"$work/fuzz.log" 2>&1); then
      tail -n 8 "$work/fuzz.log"
    else
      cat "$work/fuzz.log"
      echo "libfuzzer: fuzz_$target failed; the input is in $work/artifacts/"
      exit 1
    fi
  done
else
  step "libfuzzer: skipped (no clang, or SB_FUZZ_SECONDS=0)"
fi

step "all tests passed"
