#!/usr/bin/env bash
# The CUTLASS provider on one GPU node (issue 25), results in one tarball:
#   BIN=out/gpu bench/cutlass_gpu_run.sh "$OUT"     -> $OUT/cutlass_run.tar.gz
# 1. the CUTLASS GPU tests (BF16, FP8 per-tensor and FP8 block, dense and grouped, vs FP64), then the
#    tile rule timed (bench/cutlass_tiles.cu: both tiles per family and shape);
# 2. bench/moe_peer.py (gemmscope's CUTLASS single launch vs torch._grouped_mm) on Qwen3-30B-A3B-like
#    and DeepSeek-V3-like experts, log-normal routings sigma 0.5 and 1.0 (needs PyTorch; skipped with
#    a line otherwise);
# 3. dense CUTLASS vs cuBLASLt on the 5B and Qwen2.5-7B layers per recipe (--provider all);
# 4. the per-layer best available FP8 vs BF16 for the 5B and Qwen3-30B-A3B (the provider block of
#    each report: per-provider totals and the best available).
# Binaries from $BIN (default build/): gemmscope, gemmscope_gpu_tests, moe_grouped, cutlass_tiles
# PARTS (default "tests tiles peer models") picks the steps, e.g. PARTS="tiles peer" after the whole
# GPU suite ran; each call writes its own tarball. Every step has
# a timeout, about 8 minutes in all at worst on an H100. The three stripped binaries are ~70 MB, about
# 18 MB gzipped: carry them as one tarball and unpack it first, e.g.
#   (build machine) d=$(mktemp -d); for b in gemmscope gemmscope_gpu_tests moe_grouped; do
#                     strip -o $d/$b build/$b; done; tar -czf out/gpu-cutlass/bins.tgz -C $d .
#   (GPU machine)   mkdir -p /tmp/gs && tar -xzf out/gpu-cutlass/bins.tgz -C /tmp/gs &&
#                   BIN=/tmp/gs bench/cutlass_gpu_run.sh "$OUT"
set -uo pipefail
BIN=${BIN:-build}
OUT=${1:-cutlass-results}
here=$(cd "$(dirname "$0")" && pwd)
R="$OUT/cutlass_run"
mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$R/gpu.txt" 2>&1
PARTS=" ${PARTS:-tests tiles peer models} "
if [[ $PARTS == *" tests "* ]]; then
  echo "== CUTLASS GPU tests"
  GS_EXPECT_GPU=1 timeout 300 "$BIN/gemmscope_gpu_tests" --gtest_filter='*Cutlass*' > "$R/gpu_tests.log" 2>&1
  echo "gpu tests exit $?" | tee -a "$R/gpu_tests.log"; tail -4 "$R/gpu_tests.log"
fi
if [[ $PARTS == *" tiles "* && -x $BIN/cutlass_tiles ]]; then
  echo "== tile rule (bench/cutlass_tiles.cu)"
  timeout 120 "$BIN/cutlass_tiles" --json "$R/cutlass_tiles.json" > "$R/cutlass_tiles.txt" 2>&1
  echo "cutlass_tiles exit $?"; tail -1 "$R/cutlass_tiles.txt"
fi
if [[ $PARTS != *" peer "* ]]; then
  :
elif echo "== moe_peer (torch._grouped_mm vs gemmscope CUTLASS)" && python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  for rs in "0.5 7" "1.0 99"; do
    set -- $rs
    timeout 240 python3 "$here/moe_peer.py" --bin "$BIN/moe_grouped" --sigma "$1" --seed "$2" --iters 30 \
      --wgrad-output bf16 --json "$R/moe_peer_s$1.json" > "$R/moe_peer_s$1.txt" 2>&1
    echo "moe_peer sigma $1 exit $?"
  done
else
  echo "no PyTorch with CUDA: moe_peer skipped" | tee "$R/moe_peer_skipped.txt"
fi
common=(-q --provider all --mode training --gpu-warmup 1 --num-iters 30)
models=(codonfm-5b qwen2.5-7b qwen3-30b-a3b)
[[ $PARTS == *" models "* ]] || models=()
for m in "${models[@]}"; do
  echo "== $m --provider all"
  timeout 150 "$BIN/gemmscope" --model "$m" "${common[@]}" --precisions BF16,FP8Current,FP8Delayed,FP8Block \
    --json "$R/$m.json" --csv "$R/$m.csv" > "$R/$m.txt" 2>&1
  echo "$m exit $?"; grep -A12 "Kernel providers" "$R/$m.txt" | head -14
done
tag=$(echo $PARTS | tr " " "-")
tar -czf "$OUT/cutlass_run-$tag.tar.gz" -C "$OUT" cutlass_run && echo "wrote $OUT/cutlass_run-$tag.tar.gz"
