#!/usr/bin/env bash
# gemmscope setup: installs build dependencies (Debian/Ubuntu), configures and builds.
#   scripts/setup.sh            install deps + configure + build (build/)
#   scripts/setup.sh --no-deps  configure + build only (e.g. on a GPU node without network)
# Environment: BUILD_DIR (default build), CUDA_ARCHS (default: this machine's GPU, else
#              "80-real;89-real;90-real;100-real;90-virtual"), GEMMSCOPE_ALL_ARCHS=ON (that list
#              even with a GPU), GEMMSCOPE_CUDA=ON|OFF|AUTO (default AUTO: CUDA backend if nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
deps=1
for a in "$@"; do
  case "$a" in
    --no-deps) deps=0 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$a'" >&2; exit 2 ;;
  esac
done
if [[ $deps == 1 ]]; then
  pkgs=(cmake ninja-build g++ libcli11-dev nlohmann-json3-dev libfmt-dev libgtest-dev python3 python3-matplotlib)
  missing=()
  for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if ((${#missing[@]})); then
    SUDO=""; [[ $(id -u) != 0 ]] && SUDO=sudo
    echo "setup: installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi
if [[ -x /usr/local/cuda/bin/nvcc && -z "${CUDACXX:-}" ]]; then export CUDACXX=/usr/local/cuda/bin/nvcc; fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DGEMMSCOPE_CUDA="${GEMMSCOPE_CUDA:-AUTO}" \
  ${CUDA_ARCHS:+-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS"} \
  ${GEMMSCOPE_ALL_ARCHS:+-DGEMMSCOPE_ALL_ARCHS="$GEMMSCOPE_ALL_ARCHS"}
cmake --build "$BUILD_DIR" -j "$(nproc)"
echo "setup: built $BUILD_DIR/gemmscope"
