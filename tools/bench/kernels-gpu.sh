#!/usr/bin/env bash
# Build the kernels with CUDA, run the CUDA tests, then time forward and
# backward attention (dense causal, ~90% and ~95% sparse vertical-slash) at
# 8K-128K tokens next to a cuBLAS bf16 GEMM measured in the same run.
# Needs nvcc, cmake >= 3.25, GoogleTest; builds only kernels/ and
# tests/kernels/ (through a scratch top level), so other parts' dependencies
# are not needed. Under 5 minutes on an A100/H100-class GPU.
#   tools/bench/kernels-gpu.sh [extra kernels_gpu_bench options]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build-kernels-gpu}
start=$(date +%s)

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
mkdir -p "$build/top"
cat >"$build/top/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(ringmaster_kernels_gpu LANGUAGES CXX CUDA)
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY \${CMAKE_BINARY_DIR}/bin)
find_package(CUDAToolkit REQUIRED)
find_package(GTest REQUIRED)
find_package(Threads REQUIRED)
add_library(ringmaster_warnings INTERFACE)
target_compile_options(ringmaster_warnings INTERFACE \$<\$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow>)
set(RINGMASTER_HAVE_CUDA ON)
enable_testing()
include(GoogleTest)
add_subdirectory($root/kernels kernels)
add_subdirectory($root/tests/kernels tests/kernels)
CMAKE

nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
# Only the GPU in this machine (CUDA_ARCHS overrides, e.g. "80;90"): halves the build time.
cmake -S "$build/top" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-native}" >"$build/configure.log"
cmake --build "$build" -j"$(nproc)" --target kernels_tests kernels_gpu_bench >"$build/build.log" 2>&1 ||
  { tail -40 "$build/build.log"; exit 1; }
echo "built in $(( $(date +%s) - start )) s"

echo "== CUDA tests"
"$build/bin/kernels_tests" --gtest_filter='Cuda*:*/Cuda*' --gtest_brief=1
echo "== timing"
"$build/bin/kernels_gpu_bench" "$@"
echo "total $(( $(date +%s) - start )) s"
