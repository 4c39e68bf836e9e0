#!/usr/bin/env bash
# gemmscope setup: installs build dependencies (Debian/Ubuntu), configures and builds.
#   scripts/setup.sh            install deps + configure + build (build/)
#   scripts/setup.sh --no-deps  configure + build only, never touching the network (a GPU node or CI
#                               machine without network: third-party sources from ../shared or the cache)
# Needs CMake >= 3.25, a C++20 compiler and, for the CUDA backend, the CUDA 13 toolkit.
# Environment: BUILD_DIR (default build), CUDA_ARCHS (default: this machine's GPU, else
#   "80-real;89-real;90-real;100-real;90-virtual"), GEMMSCOPE_ALL_ARCHS=ON (that list even with a GPU),
#   GEMMSCOPE_CUDA=ON|OFF|AUTO (default AUTO: the CUDA backend when nvcc is found),
#   GEMMSCOPE_CUDNN_FRONTEND_DIR (cudnn-frontend for cuDNN attention; default: ../shared/third_party/
#   cudnn-frontend-1.23.0, else any ../shared/third_party/cudnn-frontend-*, else the cache's copy, else
#   fetched into the cache), GEMMSCOPE_CUTLASS_DIR (default: ../shared/third_party/cutlass-4.2.1, else
#   the cache's copy, else fetched into the cache; "" builds without the CUTLASS provider),
#   GEMMSCOPE_REQUIRE_CUDNN_ATTENTION=ON (the configure fails unless cuDNN attention is built),
#   GEMMSCOPE_DEPS_CACHE (default ~/.cache/gemmscope-deps: where fetched sources go; never ../shared),
#   GEMMSCOPE_FETCH_TIMEOUT (default 300: seconds allowed to every network fetch).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
CACHE=${GEMMSCOPE_DEPS_CACHE:-$HOME/.cache/gemmscope-deps}
FETCH_TIMEOUT=${GEMMSCOPE_FETCH_TIMEOUT:-300}
CUDA_MODE=${GEMMSCOPE_CUDA:-AUTO}
FE_TAG=v1.23.0
CUTLASS_TAG=v4.2.1
deps=1
for a in "$@"; do
  case "$a" in
    --no-deps) deps=0 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$a'" >&2; exit 2 ;;
  esac
done
die() { echo "setup: error: $*" >&2; exit 1; }
# Every network access goes through here: only without --no-deps, always with a time limit.
fetch() {
  ((deps)) || die "internal: a fetch under --no-deps ($*)"
  timeout "$FETCH_TIMEOUT" "$@"
}
# A shallow clone of a pinned tag into the cache (atomically: a failed clone leaves nothing).
fetch_git() {  # fetch_git URL TAG DIR
  command -v git >/dev/null || return 1
  mkdir -p "$(dirname "$3")"
  rm -rf "$3.tmp"
  if fetch env GIT_TERMINAL_PROMPT=0 git clone -q --depth 1 --branch "$2" "$1" "$3.tmp" 2>/dev/null; then
    mv "$3.tmp" "$3"
  else
    rm -rf "$3.tmp"
    return 1
  fi
}

if ((deps)); then
  # libopenmpi-dev, openmpi-bin: the optional MPI plugin (libgemmscope_mpi.so) and its mpirun test.
  pkgs=(cmake ninja-build g++ libcli11-dev nlohmann-json3-dev libfmt-dev libgtest-dev python3 python3-matplotlib
        libopenmpi-dev openmpi-bin)
  missing=()
  for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if ((${#missing[@]})); then
    SUDO=""; [[ $(id -u) != 0 ]] && SUDO=sudo
    echo "setup: installing ${missing[*]}"
    fetch $SUDO apt-get update -qq || die "apt-get update failed or took over ${FETCH_TIMEOUT} s (offline? then install ${missing[*]} and run scripts/setup.sh --no-deps)"
    fetch $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
      die "apt-get install ${missing[*]} failed or took over ${FETCH_TIMEOUT} s"
  fi
fi

# CMake >= 3.25 (CMakeLists.txt). Ubuntu 22.04's is 3.22: then CMake from PyPI, in a virtual
# environment in the cache (fetched only without --no-deps; an earlier one is reused).
version_at_least() { [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" == "$2" ]]; }
cmake_version() { "${1:-cmake}" --version 2>/dev/null | head -1 | grep -oE '[0-9]+\.[0-9]+(\.[0-9]+)?' || true; }
cmake_venv="$CACHE/cmake-venv"
have=$(cmake_version)
if [[ -z $have ]] || ! version_at_least "$have" 3.25; then
  if [[ -x $cmake_venv/bin/cmake ]] && version_at_least "$(cmake_version "$cmake_venv/bin/cmake")" 3.25; then
    export PATH="$cmake_venv/bin:$PATH"
  elif ((deps)) && python3 -m venv "$cmake_venv" >/dev/null 2>&1 &&
       fetch "$cmake_venv/bin/pip" install -q 'cmake>=3.25'; then
    echo "setup: CMake ${have:-(none)} is older than 3.25; using CMake $(cmake_version "$cmake_venv/bin/cmake") from PyPI in $cmake_venv"
    export PATH="$cmake_venv/bin:$PATH"
  else
    die "CMake >= 3.25 is needed, found ${have:-none} (Ubuntu 22.04 ships 3.22): install a newer CMake (Kitware's apt" \
        "repository, or 'pip install cmake' in a virtual environment) and put it first on PATH;" \
        "scripts/setup.sh without --no-deps fetches one from PyPI into $cmake_venv (needs python3-venv and the network)"
  fi
fi

# The CUDA 13 toolkit (cuBLASLt 13; the driver must be R580 or newer to run it). Without nvcc
# (AUTO) the build has no CUDA backend and says so; an older toolkit is refused here, clearly.
nvcc=${CUDACXX:-}
if [[ -z $nvcc ]]; then
  nvcc=$(command -v nvcc || true)
  [[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
fi
if [[ $CUDA_MODE != OFF ]]; then
  if [[ -z $nvcc ]]; then
    [[ $CUDA_MODE == ON ]] && die "GEMMSCOPE_CUDA=ON but no nvcc was found (install the CUDA 13 toolkit or set CUDACXX)"
    echo "setup: no nvcc found: building without the CUDA backend (plans, reports, charts, predict and compare work;" \
         "measuring needs the CUDA 13 toolkit)"
    CUDA_MODE=OFF
  else
    cuda_version=$("$nvcc" --version 2>/dev/null | grep -oE 'release [0-9]+\.[0-9]+' | head -1 | cut -d' ' -f2 || true)
    [[ -n $cuda_version ]] || die "could not read the CUDA version from '$nvcc --version'"
    if ((${cuda_version%%.*} < 13)); then
      die "the CUDA backend needs the CUDA 13 toolkit (cuBLASLt 13), found CUDA $cuda_version at $nvcc: install CUDA 13" \
          "(and set CUDACXX to its nvcc), or build without the backend: GEMMSCOPE_CUDA=OFF scripts/setup.sh"
    fi
    export CUDACXX=$nvcc
    echo "setup: CUDA $cuda_version ($nvcc)"
  fi
fi

# Third-party sources: the offline copies in ../shared first, then the cache, then (not under
# --no-deps) fetched into the cache. Never written into ../shared.
fe_dir=${GEMMSCOPE_CUDNN_FRONTEND_DIR:-}
if [[ -z $fe_dir && $CUDA_MODE != OFF ]]; then
  for d in ../shared/third_party/cudnn-frontend-1.23.0 ../shared/third_party/cudnn-frontend-* \
           "$CACHE/cudnn-frontend-$FE_TAG"; do
    if [[ -f $d/include/cudnn_frontend.h ]]; then fe_dir=$(cd "$d" && pwd); break; fi
  done
  if [[ -z $fe_dir ]] && ((deps)); then
    if fetch_git https://github.com/NVIDIA/cudnn-frontend "$FE_TAG" "$CACHE/cudnn-frontend-$FE_TAG"; then
      fe_dir="$CACHE/cudnn-frontend-$FE_TAG"
    fi
  fi
  if [[ -n $fe_dir ]]; then
    echo "setup: cudnn-frontend from $fe_dir"
  else
    why="not in ../shared/third_party or $CACHE"
    ((deps)) && why+=", and the fetch failed" || why+="; --no-deps fetches nothing"
    echo "setup: no cudnn-frontend ($why): building without cuDNN attention (the step context then models attention" \
         "from its FLOPs)"
  fi
fi
if [[ -n ${GEMMSCOPE_CUTLASS_DIR+x} ]]; then
  cutlass_dir=$GEMMSCOPE_CUTLASS_DIR  # given ("" = without the provider): used as it is
else
  cutlass_dir=""
  if [[ $CUDA_MODE != OFF ]]; then
    for d in ../shared/third_party/cutlass-4.2.1 "$CACHE/cutlass-$CUTLASS_TAG"; do
      if [[ -f $d/include/cutlass/cutlass.h ]]; then cutlass_dir=$d; break; fi
    done
    if [[ -z $cutlass_dir ]] && ((deps)); then
      echo "setup: fetching CUTLASS $CUTLASS_TAG into $CACHE (at most ${FETCH_TIMEOUT} s)"
      fetch_git https://github.com/NVIDIA/cutlass "$CUTLASS_TAG" "$CACHE/cutlass-$CUTLASS_TAG" &&
        cutlass_dir="$CACHE/cutlass-$CUTLASS_TAG"
    fi
    [[ -n $cutlass_dir ]] || echo "setup: no CUTLASS: building without the CUTLASS provider"
  fi
fi
if [[ -n $cutlass_dir && -f $cutlass_dir/include/cutlass/cutlass.h ]]; then cutlass_dir=$(cd "$cutlass_dir" && pwd); fi

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DGEMMSCOPE_CUDA="$CUDA_MODE" -DGEMMSCOPE_CUTLASS_DIR="$cutlass_dir" \
  ${fe_dir:+-DGEMMSCOPE_CUDNN_FRONTEND_DIR="$fe_dir"} \
  ${GEMMSCOPE_REQUIRE_CUDNN_ATTENTION:+-DGEMMSCOPE_REQUIRE_CUDNN_ATTENTION="$GEMMSCOPE_REQUIRE_CUDNN_ATTENTION"} \
  ${CUDA_ARCHS:+-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS"} \
  ${GEMMSCOPE_ALL_ARCHS:+-DGEMMSCOPE_ALL_ARCHS="$GEMMSCOPE_ALL_ARCHS"}
cmake --build "$BUILD_DIR" -j "$(nproc)"
echo "setup: built $BUILD_DIR/gemmscope"
