#!/usr/bin/env bash
# Runs the libFuzzer harnesses of tests/fuzz (docs/hostile-input.md), each for a bounded time.
#   scripts/fuzz.sh [SECONDS] [HARNESS...]   default: 60 s each, all of fuzz_config fuzz_result fuzz_flags
#                                             fuzz_routing fuzz_gpus fuzz_output fuzz_jit_cache fuzz_fleet
#                                             fuzz_output_sets
# Environment: BUILD_DIR (default build-asan: configured with clang, -DGEMMSCOPE_FUZZ=ON, CPU only,
#              built here when missing), FUZZ_JOBS (parallel workers per harness, default 1),
#              FUZZ_WORK (corpus and findings, default $BUILD_DIR/fuzz-work).
# Fails (exit 1) on any crash, sanitizer report, timeout (> 10 s per input), out-of-memory or
# undocumented outcome (see tests/fuzz/fuzz_common.hpp); a reproducer is left in FUZZ_WORK/<harness>/.
# Reproduce one: $BUILD_DIR/fuzz_result FUZZ_WORK/fuzz_result/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
harnesses=("$@")
((${#harnesses[@]})) || harnesses=(fuzz_config fuzz_result fuzz_flags fuzz_routing fuzz_gpus fuzz_output fuzz_jit_cache
                                   fuzz_fleet fuzz_output_sets)
BUILD_DIR=${BUILD_DIR:-build-asan}
work=${FUZZ_WORK:-$BUILD_DIR/fuzz-work}
mkdir -p "$work"
work=$(cd "$work" && pwd)  # absolute: fuzz_flags changes its working directory before reading paths
if [[ ! -x $BUILD_DIR/fuzz_output_sets ]]; then
  CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DGEMMSCOPE_CUDA=OFF -DGEMMSCOPE_FUZZ=ON
  cmake --build "$BUILD_DIR" -j "$(nproc)"
fi
src=$PWD
# Fleet files are built from two results of tests/data (two GPUs each), not shipped.
mkdir -p "$work/fleet-seeds"
python3 - "$src/tests/data" "$work/fleet-seeds" <<'PY'
import json, os, sys
data, out = sys.argv[1:3]
for name in ("shapes_4.json", "moe_mixtral_a.json"):
    run = json.load(open(os.path.join(data, name)))
    fleet = {"schema": "gemmscope-fleet/1", "threshold": 0.03,
             "gpus": [{"label": "GPU %d" % i, "run": run} for i in range(2)]}
    json.dump(fleet, open(os.path.join(out, "fleet-" + name), "w"), separators=(",", ":"))
PY
declare -A seeds=([fuzz_config]=$src/tests/fuzz/corpus/config [fuzz_result]=$src/tests/data [fuzz_flags]=$src/tests/fuzz/corpus/flags
                  [fuzz_routing]=$src/tests/fuzz/corpus/routing [fuzz_gpus]=$src/data [fuzz_output]=$src/tests/fuzz/corpus/output
                  [fuzz_jit_cache]=$src/tests/fuzz/corpus/jit_cache [fuzz_fleet]=$work/fleet-seeds
                  [fuzz_output_sets]=$src/tests/fuzz/corpus/output_sets)
declare -A dicts=([fuzz_config]=$src/tests/fuzz/json.dict [fuzz_result]=$src/tests/fuzz/json.dict [fuzz_flags]=$src/tests/fuzz/flags.dict
                  [fuzz_routing]=$src/tests/fuzz/json.dict [fuzz_gpus]=$src/tests/fuzz/json.dict [fuzz_output]=$src/tests/fuzz/json.dict
                  [fuzz_jit_cache]=$src/tests/fuzz/json.dict [fuzz_fleet]=$src/tests/fuzz/json.dict
                  [fuzz_output_sets]=$src/tests/fuzz/paths.dict)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for h in "${harnesses[@]}"; do
  [[ -n ${seeds[$h]:-} ]] || { echo "fuzz.sh: unknown harness '$h'" >&2; exit 2; }
  dir=$work/$h
  mkdir -p "$dir/corpus"
  log=$dir/log.txt
  # New inputs go to the first corpus directory; the seeds are read, never written.
  # -max_len 1 MiB covers the largest seed result file; -rss_limit_mb bounds memory.
  extra_seeds=()  # fuzz_result: schema-3 documents beside the older fixtures of tests/data
  [[ $h == fuzz_result ]] && extra_seeds=("$src/tests/fuzz/corpus/result")
  args=("$dir/corpus" "${seeds[$h]}" "${extra_seeds[@]}" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=1048576
        -artifact_prefix="$dir/" -print_final_stats=1 -dict="${dicts[$h]}")
  if [[ ${FUZZ_JOBS:-1} -gt 1 ]]; then args+=(-jobs="$FUZZ_JOBS" -workers="$FUZZ_JOBS"); fi
  echo "fuzz.sh: $h for ${secs}s (log $log)"
  if "$BUILD_DIR/$h" "${args[@]}" >"$log" 2>&1; then
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)' "$log" | sed "s/^/  $h: /" || true
    echo "fuzz.sh: $h PASS"
  else
    status=1
    echo "fuzz.sh: $h FAIL: last lines of $log:"
    grep -v -E '^gemmscope( compare)?: ' "$log" | tail -40
    ls "$dir"/crash-* "$dir"/timeout-* "$dir"/oom-* "$dir"/leak-* 2>/dev/null | sed 's/^/  reproducer: /' || true
  fi
done
exit $status
