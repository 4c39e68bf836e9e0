#!/usr/bin/env bash
# Build gemmscope on a bare GPU node without network: the Debian dev packages it needs arrive as
# .deb files (unpacked with dpkg -x into a prefix, never into /), the third-party headers as a
# tarball of ../shared/third_party. Hopper machine code only, unless CUDA_ARCHS says otherwise.
#   bench/gpu_node_build.sh DEB_DIR THIRD_PARTY_TAR [BUILD_DIR]   (GS_NODE_TARGET=gemmscope: that target only)
# Prepare them on a machine with the packages:
#   (cd DEB_DIR && apt-get download libcli11-dev nlohmann-json3-dev libfmt-dev libfmt9 libgtest-dev googletest)
#   tar -C ../shared -cJf third_party.tar.xz third_party
set -euo pipefail
debs=${1:?DEB_DIR} tp=${2:?THIRD_PARTY_TAR} build=${3:-build}
pfx=${GS_NODE_PREFIX:-/tmp/gs-prefix}
mkdir -p "$pfx"
for f in "$debs"/*.deb; do dpkg -x "$f" "$pfx"; done
tar -C "$pfx" -xJf "$tp"
tp_dir="$pfx/third_party"
# cuDNN for the attention path: the system's, else PyTorch's wheel.
if [[ -z "${GEMMSCOPE_CUDNN_LIB:-}" ]] && ! ldconfig -p | grep -q libcudnn.so.9; then
  lib=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(nvidia.cudnn.__path__[0], "lib"))' 2>/dev/null || true)
  [[ -n "$lib" && -e "$lib/libcudnn.so.9" ]] && echo "gpu_node_build: cuDNN from $lib (export GEMMSCOPE_CUDNN_LIB=$lib/libcudnn.so.9)"
fi
export CUDACXX=${CUDACXX:-/usr/local/cuda/bin/nvcc}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGEMMSCOPE_CUDA=ON \
  -DCMAKE_PREFIX_PATH="$pfx/usr" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90-real}" \
  -DGEMMSCOPE_CUTLASS_DIR="$tp_dir/cutlass-4.2.1" -DGEMMSCOPE_DEEPGEMM_DIR="$tp_dir/deepgemm-54e2261" \
  -DGEMMSCOPE_CUDNN_FRONTEND_DIR="$tp_dir/cudnn-frontend-1.23.0" -DCLI11_INCLUDE_DIR="$pfx/usr/include" >/dev/null
cmake --build "$build" -j "$(nproc)" ${GS_NODE_TARGET:+--target "$GS_NODE_TARGET"}
