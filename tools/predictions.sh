#!/usr/bin/env bash
# Usage: tools/predictions.sh BIN OUTDIR — the simulate predictions of the shipped experiments
# and ~20 variants (both engines, every scope, partition and ring kind), one JSON
# file each, so two builds compare with `diff -r OUT_A OUT_B` ("predictions unchanged").
set -u
BIN=$1; OUT=$2; mkdir -p "$OUT"
run() { # name, args...
  local name=$1; shift
  "$BIN" simulate "$@" --json 2>"$OUT/$name.err" | /usr/bin/python3 -c '
import json,sys
j=json.load(sys.stdin)
keep={k:j[k] for k in ("step_time_s","tokens_per_s","flops","mfu","ops","generator") if k in j}
keep["breakdown_mean"]=j["breakdown"]["mean"]; keep["breakdown_max"]=j["breakdown"]["max"]
keep["imbalance"]=j["imbalance"]; cp=j["critical_path"]; keep["cp"]={k:cp[k] for k in ("length_s","ops","compute_s","communication_s","waiting_s")}
print(json.dumps(keep,indent=1,sort_keys=True))' > "$OUT/$name.json" || echo "FAILED $name"
}
run default_analytic
run default_simgrid --engine simgrid
run loong_analytic loongtrain-llama2-7b-1m
run loong_simgrid loongtrain-llama2-7b-1m --engine simgrid
for scope in attention_fwd attention_fwd_bwd layer; do
  run default_$scope --set scope=$scope
  run loong_$scope loongtrain-llama2-7b-1m --set scope=$scope
done
for part in contiguous zigzag stripe balanced; do
  run p_$part --set scope=attention_fwd_bwd --set parallel.partition=$part --set parallel.ring=ring
done
run dense_zigzag --set workload.pattern=dense-causal --set kernel.attention=fa2 --set parallel.partition=zigzag --set parallel.ring=ring --set workload.seq_len=128k
run ulysses --set parallel.cp=1 --set parallel.hp=16 --set workload.seq_len=128k --set scope=layer
run double_ring --set parallel.ring=double_ring --set parallel.window=4 --set scope=attention_fwd_bwd
run sel_ckpt --set parallel.checkpoint=selective --set scope=layer
run h100 --set cluster=h100-8x8-ndr --set scope=attention_fwd_bwd --set parallel.cp=64
run h100_sg --set cluster=h100-8x8-ndr --set scope=attention_fwd_bwd --set parallel.cp=64 --engine simgrid
"$BIN" imbalance --json > "$OUT/imbalance_default.json" 2>/dev/null || echo "FAILED imbalance"
echo captured
