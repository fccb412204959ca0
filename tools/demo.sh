#!/usr/bin/env bash
# Installs what is missing, builds, and runs ringmaster on the embedded default
# experiment (MTraining's setup: Qwen2.5-3B, 512K tokens, 32 A100s): the predicted
# training step with its breakdown. `ringmaster imbalance` compares the partitions.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" --target ringmaster
./build/bin/ringmaster simulate "$@"
