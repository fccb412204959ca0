#!/usr/bin/env bash
# Installs what is missing, builds, and runs ringmaster on the embedded default
# experiment (MTraining's setup: Qwen2.5-3B, 512K tokens, 32 A100s): the predicted
# training step with its breakdown, then the planner's answer to "which layout of
# these 32 GPUs is fastest?" (about a minute on 2 cores). Arguments go to simulate.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" --target ringmaster
./build/bin/ringmaster simulate "$@"
echo
./build/bin/ringmaster plan
