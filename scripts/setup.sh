#!/usr/bin/env bash
# gemmscope setup: installs build dependencies (Debian/Ubuntu), configures and builds.
#   scripts/setup.sh            install deps + configure + build (build/)
#   scripts/setup.sh --no-deps  configure + build only (e.g. on a GPU node without network)
# Environment: BUILD_DIR (default build), CUDA_ARCHS (default: this machine's GPU, else
#              "80-real;89-real;90-real;100-real;90-virtual"), GEMMSCOPE_ALL_ARCHS=ON (that list
#              even with a GPU), GEMMSCOPE_CUDA=ON|OFF|AUTO (default AUTO: CUDA backend if nvcc is found),
#              GEMMSCOPE_CUDNN_FRONTEND_DIR (cudnn-frontend for cuDNN attention; default: cloned into
#              ~/.cache/gemmscope-deps when missing and online),
#              GEMMSCOPE_CUTLASS_DIR (default ../shared/third_party/cutlass-4.2.1; cloned at the pinned
#              tag when missing and the network is there; "" builds without the CUTLASS provider).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
deps=1
for a in "$@"; do
  case "$a" in
    --no-deps) deps=0 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$a'" >&2; exit 2 ;;
  esac
done
if [[ $deps == 1 ]]; then
  # libopenmpi-dev, openmpi-bin: the optional MPI plugin (libgemmscope_mpi.so) and its mpirun test.
  pkgs=(cmake ninja-build g++ libcli11-dev nlohmann-json3-dev libfmt-dev libgtest-dev python3 python3-matplotlib
        libopenmpi-dev openmpi-bin)
  missing=()
  for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if ((${#missing[@]})); then
    SUDO=""; [[ $(id -u) != 0 ]] && SUDO=sudo
    echo "setup: installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
  # NVIDIA's header-only cudnn-frontend, pinned, for the cuDNN attention path (CMake finds it
  # here; GEMMSCOPE_CUDNN_FRONTEND_DIR overrides). Offline or without git: build without it.
  fe_dir="$HOME/.cache/gemmscope-deps/cudnn-frontend-v1.23.0"
  if [[ -z "${GEMMSCOPE_CUDNN_FRONTEND_DIR:-}" && ! -f "$fe_dir/include/cudnn_frontend.h" ]] && command -v git >/dev/null; then
    mkdir -p "$(dirname "$fe_dir")"
    if timeout 120 git clone -q --depth 1 --branch v1.23.0 https://github.com/NVIDIA/cudnn-frontend "$fe_dir.tmp" 2>/dev/null; then
      mv "$fe_dir.tmp" "$fe_dir"
    else
      rm -rf "$fe_dir.tmp"
      echo "setup: cudnn-frontend not fetched (offline?); building without cuDNN attention"
    fi
  fi
fi
# The CUTLASS provider's headers (CMakeLists.txt): the pinned tag, cloned when missing; without the
# network the build goes on without the provider and says so.
CUTLASS_TAG=v4.2.1
CUTLASS_DIR=${GEMMSCOPE_CUTLASS_DIR-../shared/third_party/cutlass-4.2.1}
if [[ -n "$CUTLASS_DIR" && ! -f "$CUTLASS_DIR/include/cutlass/cutlass.h" && "${GEMMSCOPE_CUDA:-AUTO}" != OFF ]]; then
  echo "setup: cloning CUTLASS $CUTLASS_TAG into $CUTLASS_DIR"
  git clone -q --depth 1 --branch "$CUTLASS_TAG" https://github.com/NVIDIA/cutlass "$CUTLASS_DIR" ||
    echo "setup: could not clone CUTLASS; building without the CUTLASS provider"
fi
if [[ -n "$CUTLASS_DIR" && -f "$CUTLASS_DIR/include/cutlass/cutlass.h" ]]; then CUTLASS_DIR=$(cd "$CUTLASS_DIR" && pwd); fi
if [[ -x /usr/local/cuda/bin/nvcc && -z "${CUDACXX:-}" ]]; then export CUDACXX=/usr/local/cuda/bin/nvcc; fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DGEMMSCOPE_CUDA="${GEMMSCOPE_CUDA:-AUTO}" -DGEMMSCOPE_CUTLASS_DIR="$CUTLASS_DIR" \
  ${GEMMSCOPE_CUDNN_FRONTEND_DIR:+-DGEMMSCOPE_CUDNN_FRONTEND_DIR="$GEMMSCOPE_CUDNN_FRONTEND_DIR"} \
  ${CUDA_ARCHS:+-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS"} \
  ${GEMMSCOPE_ALL_ARCHS:+-DGEMMSCOPE_ALL_ARCHS="$GEMMSCOPE_ALL_ARCHS"}
cmake --build "$BUILD_DIR" -j "$(nproc)"
echo "setup: built $BUILD_DIR/gemmscope"
