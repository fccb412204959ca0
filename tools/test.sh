#!/usr/bin/env bash
# Installs what is missing, builds everything with warnings as errors, runs every
# test, rebuilds the unit tests under ASan+UBSan and runs them again, then fuzzes
# the readers for a bounded time (tests/fuzz; RINGMASTER_SKIP_FUZZ=1 or RINGMASTER_SKIP_SANITIZERS=1 skips it).
# This is the README's test command and what .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)

echo "== build (warnings are errors)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DRINGMASTER_WERROR=ON >/dev/null
cmake --build build -j "$jobs"

echo "== tests"
(cd build && ctest --output-on-failure -j "$jobs" --timeout 600)

if [ "${RINGMASTER_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "== unit tests under ASan+UBSan"
  # Only the unit-test binaries (the `unit_tests` target), with line tables
  # (-g1) rather than full debug info: enough for ASan's file:line reports, and
  # it keeps CI time down.
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGMASTER_WERROR=ON \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
        -DRINGMASTER_SANITIZE=ON -DRINGMASTER_CUDA=OFF >/dev/null
  cmake --build build-asan -j "$jobs" --target unit_tests
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure -j "$jobs" -L unit --timeout 900)
fi
if [ "${RINGMASTER_SKIP_FUZZ:-0}" != 1 ] && [ "${RINGMASTER_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "== fuzzing the readers (libFuzzer, ASan+UBSan)"
  # The harnesses of tests/fuzz and only the libraries they need, built by
  # clang in a folder of their own; each replays its corpus (the seeds and
  # every input that once crashed a reader: the regression inputs), then fuzzes
  # for RINGMASTER_FUZZ_SECONDS from a scratch copy so the corpus in the
  # repository is never written, with inputs of up to 1 MiB (libFuzzer's
  # default would keep them under the largest seed). docs/robustness.md has the longer runs.
  fuzz_seconds=${RINGMASTER_FUZZ_SECONDS:-20}
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DRINGMASTER_FUZZ=ON -DRINGMASTER_CUDA=OFF >/dev/null
  cmake --build build-fuzz -j "$jobs" --target fuzzers
  for harness in build-fuzz/bin/fuzz_*; do
    name=$(basename "$harness")
    corpus=tests/fuzz/corpus/${name#fuzz_}
    scratch=$(mktemp -d)
    cp "$corpus"/* "$scratch"/
    echo "-- $name: replay $(ls "$corpus" | wc -l) inputs, then ${fuzz_seconds} s"
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
      "$harness" "$corpus"/* >/dev/null 2>"$scratch.log" || { cat "$scratch.log"; exit 1; }
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
      "$harness" -max_total_time="$fuzz_seconds" -max_len=1048576 -rss_limit_mb=2048 -timeout=10 \
        -artifact_prefix="build-fuzz/$name-" "$scratch" 2>"$scratch.log" || { tail -60 "$scratch.log"; exit 1; }
    tail -1 "$scratch.log"
    rm -rf "$scratch" "$scratch.log"
  done
fi
echo "== all tests passed"
