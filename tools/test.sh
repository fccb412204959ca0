#!/usr/bin/env bash
# Installs what is missing, builds everything with warnings as errors, runs every
# test, then rebuilds the unit tests under ASan+UBSan and runs them again.
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
echo "== all tests passed"
