#!/usr/bin/env bash
# Held-out validation of the cost model against the runtime (docs/validation.md,
# "The runtime on this machine"): export a set of Schedules (ring kinds x sizes x
# scopes), run each with ringmaster-run under mpirun (--iters 5 --warmup 1
# --trace), then `ringmaster calibrate --holdout 0.5` per process count: fit the
# cluster on half of the runs, predict the other half, print the held-out
# step-time MAPE and per-op-kind errors before and after calibration.
# Each process count is its own calibration: 4 processes on a 2-core machine
# share cores, so their ops run at other rates than 2 processes'.
#   tools/validation-runtime.sh [--backend cpu|cuda] [--out DIR] [--np 2|4|both]
#                               [--set KEY=VALUE ...] [--seed N]
# --set goes to every export (on a GPU machine, e.g. --set cluster=h200-1x8
# --set kernel.attention=fa3 with --backend cuda; untested: no GPU here).
# The calibrated cluster (cpu backend): cpu-2core-1x2 with its PCIe at 1 GB/s, so
# that the model routes both ranks of a node over the NVSwitch (the runtime uses
# MPI's shared memory either way): the stock file ties the PCIe-host and NVSwitch
# paths, and a fitted latency would tip transfers onto the path the fit never saw.
# About 5-10 minutes on the 2-core CI machine. Environment: BUILD_DIR (default
# build), MPIRUN (default mpirun), ITERS (5), WARMUP (1), CALIBRATE_CLUSTER (the
# --cluster of calibrate; empty: each run's own, the default with --backend cuda).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
mpirun=${MPIRUN:-mpirun}
iters=${ITERS:-5}
warmup=${WARMUP:-1}
backend=cpu
out=$PWD/validation-runtime-out
nps="2 4"
seed=1
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --backend) backend=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --np) case "$2" in both) nps="2 4" ;; 2|4) nps=$2 ;; *) echo "--np: expected 2, 4 or both" >&2; exit 2 ;; esac; shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "validation-runtime.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
rmb=$build/bin/ringmaster
run=$build/bin/ringmaster-run
for b in "$rmb" "$run"; do [ -x "$b" ] || { echo "missing $b: build first (ninja -C $build ringmaster ringmaster-run)" >&2; exit 2; }; done
mkdir -p "$out"
start=$(date +%s)
if [ -z "${CALIBRATE_CLUSTER+set}" ] && [ "$backend" = cpu ]; then
  CALIBRATE_CLUSTER=$out/cpu-2core-1x2-nvswitch.json
  sed 's/"pcie": {"bandwidth_GBps": 5,/"pcie": {"bandwidth_GBps": 1,/' "$root/configs/clusters/cpu-2core-1x2.json" >"$CALIBRATE_CLUSTER"
  grep -q '"pcie": {"bandwidth_GBps": 1,' "$CALIBRATE_CLUSTER" || { echo "could not derive $CALIBRATE_CLUSTER" >&2; exit 1; }
fi
cal_cluster=()
[ -n "${CALIBRATE_CLUSTER:-}" ] && cal_cluster=(--cluster "$CALIBRATE_CLUSTER")
say() { echo "== $* ($(( $(date +%s) - start )) s, load $(cut -d' ' -f1-3 /proc/loadavg))"; }

# name | experiment | sets (2 processes)
runs_np2=(
  "ring-contiguous-2k|runtime-tiny-ring|--set parallel.partition=contiguous --set workload.seq_len=2k"
  "ring-contiguous-4k|runtime-tiny-ring|--set parallel.partition=contiguous --set workload.seq_len=4k"
  "ring-zigzag-2k|runtime-tiny-ring|--set workload.seq_len=2k"
  "ring-zigzag-4k|runtime-tiny-ring|--set workload.seq_len=4k"
  "ring-zigzag-8k|runtime-tiny-ring|--set workload.seq_len=8k"
  "ring-stripe-2k|runtime-tiny-ring|--set parallel.partition=stripe --set workload.seq_len=2k"
  "ring-stripe-4k|runtime-tiny-ring|--set parallel.partition=stripe --set workload.seq_len=4k"
  "layer-zigzag-2k|runtime-tiny-ring|--set scope=layer --set workload.seq_len=2k"
  "layer-zigzag-4k|runtime-tiny-ring|--set scope=layer --set workload.seq_len=4k"
  "ulysses-2k|runtime-tiny-ring|--set parallel.hp=2 --set parallel.cp=1 --set workload.seq_len=2k"
  "ulysses-4k|runtime-tiny-ring|--set parallel.hp=2 --set parallel.cp=1 --set workload.seq_len=4k"
  "layer-ulysses-2k|runtime-tiny-ring|--set scope=layer --set parallel.hp=2 --set parallel.cp=1 --set workload.seq_len=2k"
  "sparse-stripe-4k|runtime-tiny-sparse|--set workload.seq_len=4k"
  "sparse-stripe-8k|runtime-tiny-sparse|--set workload.seq_len=8k"
)
# 4 processes: the machine seen as 4 'GPUs' (one node of 4, or 2 nodes of 2 for hierarchical rings).
four="--set cluster.gpus_per_node=4"
runs_np4=(
  "double-ring-2k|runtime-tiny-ring|$four --set parallel.cp=4 --set parallel.ring=double_ring --set parallel.window=2 --set workload.seq_len=2k"
  "double-ring-4k|runtime-tiny-ring|$four --set parallel.cp=4 --set parallel.ring=double_ring --set parallel.window=2 --set workload.seq_len=4k"
  "hierarchical-2k|runtime-tiny-ring|--set cluster.nodes=2 --set parallel.cp=4 --set parallel.ring=hierarchical --set workload.seq_len=2k"
  "hierarchical-4k|runtime-tiny-ring|--set cluster.nodes=2 --set parallel.cp=4 --set parallel.ring=hierarchical --set workload.seq_len=4k"
  "2d-hp2-2k|runtime-tiny-ring|$four --set parallel.hp=2 --set parallel.cp=2 --set workload.seq_len=2k"
  "2d-hp2-4k|runtime-tiny-ring|$four --set parallel.hp=2 --set parallel.cp=2 --set workload.seq_len=4k"
  "contiguous-cp4-4k|runtime-tiny-ring|$four --set parallel.cp=4 --set parallel.partition=contiguous --set workload.seq_len=4k"
  "zigzag-cp4-4k|runtime-tiny-ring|$four --set parallel.cp=4 --set workload.seq_len=4k"
)

for np in $nps; do
  dir=$out/np$np
  mkdir -p "$dir"
  eval "specs=(\"\${runs_np${np}[@]}\")"
  for spec in "${specs[@]}"; do
    IFS='|' read -r name exp sets <<<"$spec"
    s=$dir/$name.schedule.json.gz
    m=$dir/$name.measured.json
    # shellcheck disable=SC2086  # sets is a list of flags
    "$rmb" schedule "$exp" $sets "${extra[@]}" -o "$s" >/dev/null
    say "np $np $name"
    timeout 600 "$mpirun" --allow-run-as-root --oversubscribe -np "$np" "$run" --backend "$backend" --schedule "$s" \
      --iters "$iters" --warmup "$warmup" --trace "$m" | grep '^step time' || { echo "run $name failed" >&2; exit 1; }
  done
  say "calibrate np $np (--holdout 0.5 --seed $seed)"
  "$rmb" calibrate --runs "$dir" "${cal_cluster[@]}" --holdout 0.5 --seed "$seed" --out "$out/np$np-calibrated.json" \
    --kernel-out "$out/np$np-calibrated.kernel.json" --residuals "$out/np$np-residuals.csv" --json >"$out/np$np-calibrate.json"
  "$rmb" calibrate --runs "$dir" "${cal_cluster[@]}" --holdout 0.5 --seed "$seed" --out "$out/np$np-calibrated.json" \
    --kernel-out "$out/np$np-calibrated.kernel.json" | tee "$out/np$np-calibrate.txt"
done
say "done: $out"
