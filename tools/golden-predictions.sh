#!/usr/bin/env bash
# Usage: tools/golden-predictions.sh BIN > tests/tools/golden_predictions.json
# The figures `ringmaster simulate --json` prints for a set of small configurations
# (both engines, every scope, partition, ring kind and fabric), which
# cli_golden_predictions_test requires to the last digit: speed work must change
# no answer. Regenerate only when a change is meant to move predictions, and say
# so in the commit.
set -eu
BIN=$1
cases=(
  "default-layer|--set scope=layer"
  "default-fwd-bwd-simgrid|--set scope=attention_fwd_bwd --engine simgrid"
  "loong-fwd|loongtrain-llama2-7b-1m --set scope=attention_fwd --set workload.seq_len=256k"
  "contiguous|--set cluster=h200-1x8 --set parallel.cp=8 --set parallel.ring=ring --set parallel.partition=contiguous --set workload.seq_len=64k --set scope=attention_fwd_bwd"
  "zigzag|--set cluster=h200-1x8 --set parallel.cp=8 --set parallel.ring=ring --set parallel.partition=zigzag --set workload.seq_len=64k --set scope=attention_fwd_bwd"
  "stripe|--set cluster=h200-1x8 --set parallel.cp=8 --set parallel.ring=ring --set parallel.partition=stripe --set workload.seq_len=64k --set scope=attention_fwd_bwd"
  "balanced|--set cluster=h200-1x8 --set parallel.cp=8 --set parallel.ring=ring --set parallel.partition=balanced --set workload.seq_len=64k --set scope=attention_fwd_bwd"
  "hierarchical-2node|--set cluster.nodes=2 --set parallel.cp=16 --set workload.seq_len=128k --set scope=layer"
  "double-ring|--set parallel.ring=double_ring --set parallel.window=4 --set workload.seq_len=128k --set scope=attention_fwd_bwd"
  "ulysses|--set cluster=h200-1x8 --set parallel.cp=1 --set parallel.hp=8 --set workload.seq_len=64k --set scope=layer"
  "2d|--set cluster=h200-1x8 --set parallel.cp=4 --set parallel.hp=2 --set parallel.ring=double_ring --set parallel.window=2 --set workload.seq_len=64k --set scope=attention_fwd_bwd"
  "dense-fa2|--set workload.pattern=dense-causal --set kernel.attention=fa2 --set parallel.partition=zigzag --set parallel.ring=ring --set workload.seq_len=128k --set scope=attention_fwd_bwd"
  "sliding|--set cluster=h200-1x8 --set parallel.cp=8 --set workload.pattern=sliding-window --set workload.seq_len=64k --set scope=layer"
  "document|--set cluster=h200-1x8 --set parallel.cp=8 --set workload.pattern=document-causal --set kernel.attention=fa2 --set parallel.partition=zigzag --set parallel.ring=ring --set workload.seq_len=64k --set scope=attention_fwd_bwd"
  "step-small|--set cluster=h200-1x8 --set parallel.cp=8 --set workload.seq_len=32k --set model.layers=4"
  "step-small-simgrid|--set cluster=h200-1x8 --set parallel.cp=8 --set workload.seq_len=32k --set model.layers=4 --engine simgrid"
  "step-dp2-zero|--set cluster=h200-1x8 --set parallel.dp=2 --set parallel.cp=4 --set parallel.zero_stage=2 --set workload.seq_len=32k --set model.layers=4"
  "rails-fwd-bwd|--set cluster=h100-8x8-ndr --set cluster.nodes=2 --set parallel.cp=16 --set workload.seq_len=128k --set scope=attention_fwd_bwd"
  "rails-fwd-bwd-simgrid|--set cluster=h100-8x8-ndr --set cluster.nodes=2 --set parallel.cp=16 --set workload.seq_len=128k --set scope=attention_fwd_bwd --engine simgrid"
  "rails-zigzag-step|--set cluster=a100-80g-8x8-hdr --set cluster.nodes=2 --set model=llama3-8b --set workload.pattern=dense-causal --set kernel.attention=fa2 --set parallel.cp=16 --set parallel.ring=ring --set parallel.partition=zigzag --set workload.seq_len=64k --set model.layers=2"
)
echo "["
n=${#cases[@]}; i=0
for c in "${cases[@]}"; do
  name=${c%%|*}; args=${c#*|}; i=$((i+1))
  # shellcheck disable=SC2086
  "$BIN" simulate $args --json | /usr/bin/python3 -c '
import json,sys
name,args,last=sys.argv[1],sys.argv[2],sys.argv[3]=="1"
j=json.load(sys.stdin)
keep={k:j[k] for k in ("step_time_s","tokens_per_s","flops","mfu","hfu","ops","generator")}
keep["breakdown"]=j["breakdown"]; keep["imbalance"]=j["imbalance"]
keep["critical_path"]={k:j["critical_path"][k] for k in ("length_s","ops","compute_s","communication_s","waiting_s")}
print(" "+json.dumps({"name":name,"args":args,"expect":keep},sort_keys=True)+("" if last else ","))' "$name" "$args" "$([ $i = $n ] && echo 1 || echo 0)"
done
echo "]"
