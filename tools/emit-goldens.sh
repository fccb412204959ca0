#!/usr/bin/env bash
# Rewrites the expected --emit outputs of tests/tools/emit/cases.txt (cli_emit_test
# compares them exactly). Run only for a change meant to move what is emitted,
# and read the diff: every line is what a user pastes into their framework.
# usage: tools/emit-goldens.sh build/bin/ringmaster
set -euo pipefail
bin=${1:?usage: tools/emit-goldens.sh build/bin/ringmaster}
dir=$(cd "$(dirname "$0")/../tests/tools/emit" && pwd)
base="--set cluster=h200-1x8 --set workload.seq_len=8k --set model.layers=2"
grep -v '^#' "$dir/cases.txt" | while IFS='|' read -r name framework args; do
  name=$(echo $name); framework=$(echo $framework)
  # shellcheck disable=SC2086
  "$bin" simulate $base $args --emit "$framework" -o "$dir/$name.txt" >/dev/null
  echo "$name"
done
