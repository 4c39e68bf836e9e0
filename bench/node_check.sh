#!/usr/bin/env bash
# The node checks on a machine with 2 GPUs, in one command (docs/node.md), about 5-8 minutes:
#   bench/node_check.sh [BIN_DIR]          (default: build; OUT=<folder> for the tarball, default /tmp)
# BIN_DIR holds gemmscope, gemmscope_gpu_tests, libgemmscope_mpi.so, gemmscope_plot.py (with gemmscope_charts/) and gpus.json.
# Runs, each under its own time limit (one hang cannot eat the budget), everything into one folder
# and then one tarball $OUT/node_check.tar.gz:
#   1. the NCCL GPU tests; 2. --comm with TP 2 (+SP; GEMMs, collectives and their overlap) and without
#   SP; 3. an EP 2 MoE layer's all-to-alls; 4. fleet mode (--all-gpus --json) with report and compare
#   against the single-GPU run; 5. the MPI path (mpirun -np 2: GEMMs per rank and --comm bootstrapped
#   through MPI); 6. torchrun's validation against torch.distributed (±5%, nccl-tests bus bandwidth).
# Ends with a summary table (step, exit status, seconds, verdict). Exit 0 when every step passed.
set -uo pipefail
BIN=$(cd "${1:-build}" && pwd)
GS="$BIN/gemmscope"
OUTDIR=${OUT:-/tmp}
W="$OUTDIR/node_check"
BUDGET=${NODE_CHECK_BUDGET:-470}   # seconds for all steps
rm -rf "$W" && mkdir -p "$W"
export GEMMSCOPE_PLUGIN_DIR="${GEMMSCOPE_PLUGIN_DIR:-$BIN}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
HERE=$(cd "$(dirname "$0")" && pwd)
T0=$SECONDS
rows=()
fails=0

# skip NAME WHY: a row for a step that cannot run here (counted as not passing).
skip() {
  rows+=("$(printf '%-26s %6s %6s  %s' "$1" "-" "-" "SKIPPED ($2)")")
  fails=$((fails + 1))
}

# step NAME LIMIT_S CMD...: runs CMD with its output in $W/NAME.log, under min(LIMIT, budget left).
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((BUDGET - (SECONDS - T0)))
  if ((left < 20)); then
    rows+=("$(printf '%-26s %6s %6s  %s' "$name" "-" "-" "SKIPPED (time budget spent)")")
    fails=$((fails + 1))
    return
  fi
  ((limit > left)) && limit=$left
  echo "== $name (limit ${limit} s)"
  local t=$SECONDS rc
  timeout --kill-after=10 "$limit" "$@" > "$W/$name.log" 2>&1
  rc=$?
  local verdict=PASS
  if ((rc == 124 || rc == 137)); then
    verdict="TIMEOUT after ${limit} s"
  elif [[ $name == *_vs_* ]] && ((rc == 1)); then
    verdict="DIFFERS beyond the threshold (see its log and the fleet report's clocks, temperature, power)"
    rc=0
  elif ((rc != 0)); then
    verdict=FAIL
  fi
  ((rc != 0)) && fails=$((fails + 1))
  rows+=("$(printf '%-26s %6s %6s  %s' "$name" "$rc" "$((SECONDS - t))" "$verdict")")
  tail -n 4 "$W/$name.log"
}

{
  date -u
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit,temperature.gpu --format=csv
  nvidia-smi topo -m
  ldd "$BIN/libgemmscope_mpi.so" 2>&1
  mpirun --version 2>&1 | head -1
  ls /usr/lib/x86_64-linux-gnu/libnccl.so* 2>&1
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())' 2>&1
} > "$W/environment.txt" 2>&1

# One plan for the single-GPU, fleet and MPI runs (Llama 3 8B under TP 2), so that they compare.
Q="--gpu-warmup 1 --precisions BF16,FP8Current"
if [[ -x "$BIN/gemmscope_gpu_tests" ]]; then
  step gpu_tests_nccl 90 env GS_EXPECT_GPU=1 "$BIN/gemmscope_gpu_tests" --gtest_filter='NcclComm.*:NcclRanks.*'
else
  skip gpu_tests_nccl "no $BIN/gemmscope_gpu_tests"
fi
step comm_tp2_sp 150 "$GS" -q --model llama-3-8b $Q --tensor-parallel 2 --comm \
  --json "$W/tp2.json" --comm-json "$W/tp2_comm.json"
step comm_tp2_nosp 45 "$GS" -q --model llama-3-8b --tensor-parallel 2 --sequence-parallel off --comm-only \
  --comm-json "$W/tp2_nosp_comm.json"
step comm_ep2_moe 150 "$GS" -q --model mixtral-8x7b $Q --expert-parallel 2 --comm \
  --json "$W/ep2.json" --comm-json "$W/ep2_comm.json"
if [[ -f "$GEMMSCOPE_PLUGIN_DIR/libgemmscope_mpi.so" ]] && command -v mpirun > /dev/null; then
  step mpi_np2 150 mpirun -np 2 --allow-run-as-root --oversubscribe -x GEMMSCOPE_PLUGIN_DIR \
    -x OMPI_MCA_btl_vader_single_copy_mechanism "$GS" --model llama-3-8b $Q --tensor-parallel 2 --comm \
    --json "$W/mpi_fleet.json" --comm-json "$W/mpi_comm.json"
  step mpi_report 20 "$GS" report "$W/mpi_fleet.json"
else
  skip mpi_np2 "no libgemmscope_mpi.so in $GEMMSCOPE_PLUGIN_DIR, or no mpirun"
fi
step fleet_all_gpus 120 "$GS" -q --model llama-3-8b $Q --tensor-parallel 2 --all-gpus --json "$W/fleet.json"
step fleet_report 20 "$GS" report "$W/fleet.json"
# Node vs one GPU: each GPU's run at once against the TP 2 run of GPU 0 alone (exit 1: a difference
# beyond the threshold, which the fleet report's clocks, temperature and power explain or not).
step fleet_vs_single 20 "$GS" compare "$W/tp2.json" "$W/fleet.json" --threshold 5%
step fleet_plot 30 "$GS" plot "$W/fleet.json" -o "$W/fleet.png"
TORCHRUN=(torchrun)
command -v torchrun > /dev/null || TORCHRUN=(python3 -m torch.distributed.run)
step torch_validate 200 "${TORCHRUN[@]}" --nproc_per_node 2 "$HERE/validate_collectives.py" --gemmscope "$GS" \
  --out "$W/validate" --json "$W/validate.json"

{
  printf '%-26s %6s %6s  %s\n' step exit secs verdict
  printf '%s\n' "${rows[@]}"
  echo "total $((SECONDS - T0)) s; $fails step(s) not passing; logs in node_check/*.log"
} | tee "$W/summary.txt"
tar -czf "$OUTDIR/node_check.tar.gz" -C "$OUTDIR" node_check
echo "tarball: $OUTDIR/node_check.tar.gz"
((fails == 0))
