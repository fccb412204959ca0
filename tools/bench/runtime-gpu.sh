#!/usr/bin/env bash
# The runtime's cuda backend on a GPU machine (docs/runtime-cuda.md), under 5 minutes
# on an H200:
#   1. build with CUDA: ringmaster, ringmaster-run, kernels_gpu_bench only
#   2. export Schedules with `ringmaster schedule`: one rank (attention forward +
#      backward, and a `layer` scope for the cuBLAS GEMMs) and the 8-rank sparse
#      128K stripe ring (static vertical-slash: the runtime does not build indices yet)
#   3. run the cuda backend on one rank under mpirun -np 1 with --check (8K), then
#      every rank of the 8-rank Schedule in this one process (--emulate-ranks 8:
#      device copies instead of NCCL, so each of its tiles is timed on this GPU):
#      with --check at 8K, and at 128K with --trace only (the CPU reference is
#      O(S^2)); next to it the model's predicted trace of the same Schedule
#   4. the dynamic pattern (index_build ops: a host round trip per stage on cuda): one
#      rank and 8 emulated ranks at 8K with --check (the built index must equal the
#      reference's), the 8 emulated ranks at 128K for timing (its index_build samples)
#   5. tools/bench/kernels-gpu.sh (the kernels' own tests and timings)
# Writes traces and logs to $OUT (or ./runtime-gpu-out).
#   tools/bench/runtime-gpu.sh
# Environment: BUILD_DIR (default build-runtime-gpu), CUDA_ARCHS (default native),
# ITERS (default 3), DYNAMIC=0 skips step 4, KERNELS_BENCH=0 skips step 5, CHECK=0 /
# TRACE=0 drop --check / --trace.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build-runtime-gpu}
out=${OUT:-$PWD/runtime-gpu-out}
iters=${ITERS:-3}
start=$(date +%s)
mkdir -p "$out" "$build"
say() { echo "== $* ($(( $(date +%s) - start )) s)"; }

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

say "configure and build (CUDA on) in $build"
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-native}" >"$out/configure.log" 2>&1 ||
  { tail -40 "$out/configure.log"; exit 1; }
grep -q "runtime cuda backend ON" "$out/configure.log" ||
  { echo "the cuda backend is not configured (nvcc or NCCL not found): see $out/configure.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" --target ringmaster ringmaster-run kernels_gpu_bench >"$out/build.log" 2>&1 ||
  { tail -40 "$out/build.log"; exit 1; }
bin=$build/bin

mpirun=(mpirun -np 1)
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)

say "export Schedules"
# Qwen2.5-3B's attention (16 query heads, 2 KV heads of 128) from the default experiment,
# on one H200 node, two layers, the static form of MInference's per-head budgets.
common=(mtraining-qwen2.5-3b-512k --set cluster=h200-1x8 --set model.layers=2 --set workload.pattern=qwen2.5-3b-static
        --set workload.pattern.dynamic=false --set parallel.checkpoint=none)
"$bin/ringmaster" schedule "${common[@]}" --set workload.seq_len=8k --set parallel.cp=1 --set scope=attention_fwd_bwd \
  -o "$out/one-8k.json.gz" | tail -1
"$bin/ringmaster" schedule "${common[@]}" --set workload.seq_len=8k --set parallel.cp=1 --set scope=layer \
  -o "$out/one-layer-8k.json.gz" | tail -1
"$bin/ringmaster" schedule "${common[@]}" --set workload.seq_len=128k --set parallel.cp=8 --set parallel.ring=ring \
  --set parallel.partition=stripe --set parallel.stripe_tokens=128 --set parallel.shuffle=once \
  --set scope=attention_fwd_bwd -o "$out/eight-sparse-128k.json.gz" | tail -1
# The same layout at 8K for --check: the single-process reference is CPU attention,
# O(S^2) — about 1 minute on 16 cores at 8K, hours at 128K (docs/runtime-check.md).
"$bin/ringmaster" schedule "${common[@]}" --set workload.seq_len=8k --set parallel.cp=8 --set parallel.ring=ring \
  --set parallel.partition=stripe --set parallel.stripe_tokens=128 --set parallel.shuffle=once \
  --set scope=attention_fwd_bwd -o "$out/eight-sparse-8k.json.gz" | tail -1

check=(--check)
[ "${CHECK:-1}" = 0 ] && check=()
traced() {  # name: sets trace_args
  trace_args=()
  [ "${TRACE:-1}" = 0 ] || trace_args=(--trace "$out/$1.trace.json")
}

run() {  # name, timeout (s), ringmaster-run arguments...
  local name=$1 limit=$2
  shift 2
  say "$name"
  echo "+ $*"
  timeout "$limit" "$@" 2>&1 | tee "$out/$name.log"
}
traced one-8k
run one-8k 120 "${mpirun[@]}" "$bin/ringmaster-run" --schedule "$out/one-8k.json.gz" --backend cuda "${check[@]}" \
  --iters "$iters" "${trace_args[@]}"
traced one-layer-8k  # the dense layer runs for timing on cuda: no --check (the cpu backend checks it)
run one-layer-8k 120 "${mpirun[@]}" "$bin/ringmaster-run" --schedule "$out/one-layer-8k.json.gz" --backend cuda \
  --iters "$iters" "${trace_args[@]}"
traced eight-sparse-8k
run eight-sparse-8k 150 "${mpirun[@]}" "$bin/ringmaster-run" --schedule "$out/eight-sparse-8k.json.gz" --backend cuda \
  --emulate-ranks 8 "${check[@]}" --iters "$iters" "${trace_args[@]}"
traced eight-sparse-128k  # every tile of the real 8-rank Schedule, timed; too large for the CPU reference
run eight-sparse-128k 180 "${mpirun[@]}" "$bin/ringmaster-run" --schedule "$out/eight-sparse-128k.json.gz" --backend cuda \
  --emulate-ranks 8 --iters "$iters" "${trace_args[@]}"
say "predicted trace of the 8-rank Schedule"
"$bin/ringmaster" simulate --schedule "$out/eight-sparse-128k.json.gz" --trace "$out/eight-sparse-128k.predicted.json" |
  tee "$out/eight-sparse-128k.predicted.log" | tail -5

if [ "${DYNAMIC:-1}" != 0 ]; then
  say "export the dynamic Schedules (index built at run time)"
  # The dynamic form of the same pattern; the index is built on the contiguous layout,
  # so the stripe ring shuffles per call (docs/runtime.md, "Index building").
  dyn=(mtraining-qwen2.5-3b-512k --set cluster=h200-1x8 --set model.layers=2 --set workload.pattern=qwen2.5-3b-static
       --set parallel.checkpoint=none --set scope=attention_fwd_bwd)
  ring=(--set parallel.cp=8 --set parallel.ring=ring --set parallel.partition=stripe --set parallel.stripe_tokens=128
        --set parallel.shuffle=per_call)
  "$bin/ringmaster" schedule "${dyn[@]}" --set workload.seq_len=8k --set parallel.cp=1 -o "$out/one-dynamic-8k.json.gz" | tail -1
  "$bin/ringmaster" schedule "${dyn[@]}" --set workload.seq_len=8k "${ring[@]}" -o "$out/eight-dynamic-8k.json.gz" | tail -1
  "$bin/ringmaster" schedule "${dyn[@]}" --set workload.seq_len=128k "${ring[@]}" -o "$out/eight-dynamic-128k.json.gz" | tail -1
  traced one-dynamic-8k
  run one-dynamic-8k 120 "${mpirun[@]}" "$bin/ringmaster-run" --schedule "$out/one-dynamic-8k.json.gz" --backend cuda \
    "${check[@]}" --iters "$iters" "${trace_args[@]}"
  traced eight-dynamic-8k
  run eight-dynamic-8k 150 "${mpirun[@]}" "$bin/ringmaster-run" --schedule "$out/eight-dynamic-8k.json.gz" --backend cuda \
    --emulate-ranks 8 "${check[@]}" --iters "$iters" "${trace_args[@]}"
  traced eight-dynamic-128k  # the host stages at 128K: one timed iteration
  run eight-dynamic-128k 150 "${mpirun[@]}" "$bin/ringmaster-run" --schedule "$out/eight-dynamic-128k.json.gz" --backend cuda \
    --emulate-ranks 8 --iters 1 --warmup 1 "${trace_args[@]}"
fi

if [ "${KERNELS_BENCH:-1}" != 0 ]; then
  say "kernel benchmark (tools/bench/kernels-gpu.sh)"
  "$root/tools/bench/kernels-gpu.sh" 2>&1 | tee "$out/kernels-gpu.log"
fi
say "done; traces and logs in $out"
