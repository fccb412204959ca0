#!/usr/bin/env bash
# Installs every Debian package ringmaster needs, and nothing when all are present.
# Idempotent: safe to run before every build (the quick-start commands do).
set -euo pipefail

packages=(
  build-essential cmake pkg-config ninja-build
  libsimgrid-dev libboost-graph-dev nlohmann-json3-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev
  libopenmpi-dev openmpi-bin libopenblas-dev libeigen3-dev
)
# clang (with its runtime libraries: libFuzzer, ASan, UBSan) builds the fuzzing
# harnesses of tests/fuzz (docs/robustness.md); GCC builds everything else.
packages+=(clang libclang-rt-dev)
# ccache keeps compiled objects between builds (CI keeps its machine, so its cache is warm).
packages+=(ccache)
# Notebooks run under Debian's python (not the one first on PATH).
packages+=(python3-matplotlib python3-pandas python3-nbconvert python3-ipykernel jupyter-nbconvert)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
