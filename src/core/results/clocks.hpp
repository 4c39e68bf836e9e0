// Clock-aware reading of a run. A GEMM's time scales with the SM clock it ran at; under a power cap
// the clock depends on what ran before (a host stall lets the GPU boost for a few hundred ms) and
// on the recipe itself (FP8 kernels draw power differently). A speedup measured between cells that
// ran at different clocks is partly clocks: these summaries make that visible.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/results/results.hpp"

namespace gs {

struct ClockSummary {
  // Time-weighted mean SM clock (MHz) of each precision's measured, sampled cells over all modes
  // (weight: the cell's mean time), indexed like RunResult::precisions; nullopt: no sample.
  std::vector<std::optional<double>> precision_mean_mhz;
  // The run's steady clock: time-weighted median of every sampled cell's clock; nullopt: no sample.
  std::optional<double> steady_mhz;
  // Cells sampled far above the steady clock with the power cap not limiting them (a boost
  // transient, e.g. after a host stall): (mode, gemm, precision) indices.
  struct Where { size_t mode, gemm, prec; int sm_mhz; };
  std::vector<Where> boosted;
  // Cells above the same bound that run under half their recipe's best TFLOP/s in the mode (small,
  // memory- or launch-bound GEMMs): they draw less than the power cap allows, so a higher clock is
  // their own steady state, not a transient. Counted, not flagged.
  size_t light_above = 0;
  // Cells above the same bound whose samples had NVML's power-cap reason active: the GPU was at its
  // power limit, so that clock is what the cell's own power draw allows (a GEMM that draws less per
  // clock sustains a higher one under the same cap; on an H100 DeepSeek-V3's short MLA and expert
  // GEMMs run at 1600-1900 MHz at ~690 W where the big ones run at ~1400). Counted, not flagged.
  size_t capped_above = 0;
};

// A recipe whose mean clock is more than this fraction away from BF16's gets a warning.
inline constexpr double kClockSkewWarn = 0.05;
// A cell sampled more than this fraction above the steady clock is flagged as boosted, unless it is
// light (under kLightShare of its recipe's best TFLOP/s in the mode) or ran at the power cap.
inline constexpr double kBoostFlag = 0.10;
inline constexpr double kLightShare = 0.5;

ClockSummary summarize_clocks(const RunResult& r);

// One note per recipe whose mean clock differs from BF16's by more than kClockSkewWarn, and one
// listing boosted cells (at most a few named). Empty when nothing is off or nothing was sampled.
std::vector<std::string> clock_warnings(const RunResult& r);

}  // namespace gs
