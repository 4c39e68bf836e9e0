#!/usr/bin/env bash
# One command on a GPU node: GPU tests, quantization bandwidth, the 5B config in all three modes
# and 8192^3 in both, the accuracy tables, a chart, the standing validation against a PyTorch
# training step (where PyTorch is installed; PEER=1 adds the kernel-by-kernel peer benchmark), and
# the sanity-bar check.
#   bench/run_all.sh [OUTDIR]        (binaries from $BIN, default build/)
#   PREV=old/5b.json bench/run_all.sh  also compares this run's 5B result with an earlier one
set -uo pipefail
BIN=${BIN:-build}
OUT=${1:-bench-results}
mkdir -p "$OUT"
here=$(cd "$(dirname "$0")" && pwd)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
echo "== GPU tests"
GS_EXPECT_GPU=1 "$BIN/gemmscope_gpu_tests" > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests exit $?"; tail -3 "$OUT/gpu_tests.log"
echo "== quantization bandwidth"
"$BIN/quant_bandwidth" --json "$OUT/quant_bw.json" > "$OUT/quant_bw.txt" 2>&1; tail -2 "$OUT/quant_bw.txt"
echo "== 5B config, per-gemm + training + pre-quantized"
"$BIN/gemmscope" -q --mode all --json "$OUT/5b.json" --csv "$OUT/5b.csv" -o "$OUT/5b.png" > "$OUT/5b.txt"
echo "== 5B config, training mode with an amax pass for every tensor (--no-producer-amax)"
"$BIN/gemmscope" -q --mode training --no-producer-amax --precisions BF16,FP8Current --gpu-warmup 1 \
  --json "$OUT/5b_shared_no_producer_amax.json" > "$OUT/5b_shared_no_producer_amax.txt"
echo "== 8192^3"
"$BIN/gemmscope" -q --shapes 8192x8192x8192 --mode both --gpu-warmup 1 --json "$OUT/8192.json" > "$OUT/8192.txt"
echo "== accuracy (normal, outliers)"
"$BIN/gemmscope" -q --accuracy-only --json "$OUT/acc_normal.json" > "$OUT/acc_normal.txt"
"$BIN/gemmscope" -q --accuracy-only --dist outliers --json "$OUT/acc_outliers.json" > "$OUT/acc_outliers.txt"
"$BIN/gemmscope" plot "$OUT/5b.json" -o "$OUT/5b_modes.png" --kind modes
echo "== square sweep and the tutorial's Fprop shapes (charts)"
"$BIN/gemmscope" -q --sweep --gpu-warmup 1 --num-iters 50 --json "$OUT/sweep.json" -o "$OUT/sweep.png" > "$OUT/sweep.txt"
"$BIN/gemmscope" -q --shapes 15872x4096x12288,15872x4096x4096,15872x4096x16384,15872x16384x4096 --gpu-warmup 1 \
  --json "$OUT/shapes.json" -o "$OUT/shapes.png" > "$OUT/shapes.txt"
if [[ -n "${PREV:-}" ]]; then
  echo "== compare with $PREV"
  "$BIN/gemmscope" compare "$PREV" "$OUT/5b.json" --threshold 3% > "$OUT/compare.txt"; echo "compare exit $?"
  tail -25 "$OUT/compare.txt"
fi
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "== standing validation: one layer's PyTorch training step vs gemmscope (bench/validate_step.py)"
  python3 "$here/validate_step.py" --gemmscope "$BIN/gemmscope" --json "$OUT/validate.json" > "$OUT/validate.txt" 2>&1
  echo "validate_step exit $?"; tail -8 "$OUT/validate.txt"
  echo "== MoE layer: a PyTorch training step vs gemmscope (bench/validate_moe.py, experts serial)"
  python3 "$here/validate_moe.py" --gemmscope "$BIN/gemmscope" --streams 1 --json "$OUT/validate_moe.json" > "$OUT/validate_moe.txt" 2>&1
  echo "validate_moe exit $?"; tail -8 "$OUT/validate_moe.txt"
  if [[ ${PEER:-0} == 1 ]]; then
    echo "== the layer's GEMMs through PyTorch, side by side (bench/peer_gemm.py)"
    python3 "$here/peer_gemm.py" --gemmscope "$BIN/gemmscope" --config 5b,qwen2.5-7b --json "$OUT/peer.json" \
      > "$OUT/peer.txt" 2>&1; echo "peer_gemm exit $?"; grep "PyTorch's speed" "$OUT/peer.txt"
  fi
else
  echo "== standing validation skipped: no PyTorch with CUDA here (bench/validate_step.py needs it)"
fi
echo "== sanity bars"
python3 "$here/check_targets.py" "$OUT"
