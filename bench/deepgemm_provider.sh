#!/usr/bin/env bash
# The DeepGEMM provider on a Hopper node, in about 8 minutes: its GPU tests, the 5B preset with
# --provider all, DeepSeek-V3 with --provider cublaslt,deepgemm (training and pre-quantized,
# BF16 and FP8Block), a second 5B run that must compile nothing (the disk cache), and
# deepgemm_bench. Everything under OUTDIR/deepgemm, then OUTDIR/deepgemm.tgz (the cubin cache is
# left out). Each step has its own time limit, so a slow step cannot starve the others.
#   bench/deepgemm_provider.sh [OUTDIR]     (binaries from $BIN, default build/; OUTDIR default $OUT)
set -uo pipefail
BIN=${BIN:-build}
OUT=${1:-${OUT:-bench-results}}
D="$OUT/deepgemm"
mkdir -p "$D"
export GEMMSCOPE_CACHE_DIR="$D/cache"  # a fresh cache: the first runs compile, the rerun must not
export GS_EXPECT_GPU=1
step() {  # step NAME SECONDS CMD...: output in $D/NAME.txt, exit status and time in $D/steps.txt
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$D/$name.txt" 2>&1
  local rc=$?
  echo "$name rc=$rc ${limit}s-limit took=$((SECONDS - t0))s: $*" | tee -a "$D/steps.txt"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$D/gpu.txt" 2>&1
step gpu_tests 170 "$BIN/gemmscope_gpu_tests" --gtest_filter='DeepGemmProvider.*:DeepGemm.*:DeepGemmHost*'
common=(--precisions BF16,FP8Block --mode both --num-warmup 5 --num-iters 20 --gpu-warmup 2)
step 5b_all 90 "$BIN/gemmscope" --model codonfm-5b --provider all "${common[@]}" --json "$D/5b_all.json"
step deepseek_v3 150 "$BIN/gemmscope" --model deepseek-v3 --provider cublaslt,deepgemm "${common[@]}" \
  --json "$D/deepseek_v3.json"
step 5b_cache 25 "$BIN/gemmscope" --model codonfm-5b --provider deepgemm --precisions FP8Block --mode pre-quantized \
  --num-iters 10 --gpu-warmup 0 --json "$D/5b_cache.json"
grep -h "deepgemm: " "$D/5b_all.txt" "$D/5b_cache.txt" > "$D/cache_notes.txt" 2>/dev/null
step bench 40 "$BIN/deepgemm_bench" --iters 20
tar czf "$OUT/deepgemm.tgz" --exclude=cache -C "$OUT" deepgemm
echo "results: $OUT/deepgemm.tgz"; cat "$D/steps.txt"
