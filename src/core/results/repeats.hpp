// Repeats and confidence (--repeats N): every cell is measured N times, interleaved GEMM-major
// (for each GEMM: repeat 1 of every precision and mode, then repeat 2, ...), so each repeat sees the
// same operands and the run's clock drift spreads over all of them. A repeat's per-layer total and
// speedups are computed exactly as a single run's (summarize_mode on that repeat's cells); the
// report gives their median and a 95% interval, and `compare` uses the intervals to tell a real
// difference from noise.
#pragma once
#include <optional>
#include <vector>

#include "core/results/results.hpp"

namespace gs {

// The median of `values` and a 95% interval for it: the bootstrap percentile interval of the
// median (2000 resamples from a fixed seed, so the same values always give the same interval).
// With fewer than 3 values there is no interval (nullopt).
struct Interval {
  double median = 0, lo = 0, hi = 0;
  int n = 0;
  bool contains(double x) const { return x >= lo && x <= hi; }
  bool overlaps(const Interval& o) const { return lo <= o.hi && o.lo <= hi; }
};
std::optional<Interval> interval95(const std::vector<double>& values);

// The run as repeat `repeat` measured it: every measured cell's mean is that repeat's mean
// (Cell::repeat_ms); other statistics stay pooled. Throws std::out_of_range for a repeat a cell lacks.
RunResult repeat_view(const RunResult& r, size_t repeat);

// One cell from N repeats of it: mean of the means (repeats have equal iteration counts), median
// of the medians, min of the mins, max of the maxima, the pooled standard deviation (within-repeat
// variance plus the variance of the repeat means), iterations summed, the first repeat's clock, and
// repeat_ms = the repeats' means. N/A when any repeat is N/A (its reason).
Cell pool_repeats(const std::vector<Cell>& repeats);

// Per mode and precision: intervals of the per-layer total (the average layer, experts included)
// and of the full model over the repeats;
// per speedup pair (speedup_pairs order): its interval. Empty when the run has fewer than 3 repeats
// (timing.repeats) or its measured cells do not all carry that many repeat times.
struct RepeatSummary {
  std::vector<std::optional<Interval>> per_layer_total, full_model;  // per precision
  std::vector<std::optional<Interval>> speedups;                     // per speedup pair
};
std::vector<RepeatSummary> summarize_repeats(const RunResult& r);  // per mode

// Each repeat's summaries, [repeat][mode]: what summarize_repeats draws its intervals from, for
// callers that need the interval of another sum (compare: a MoE layer's total). Empty under the
// same conditions as summarize_repeats.
std::vector<std::vector<ModeSummary>> repeat_summaries(const RunResult& r);

}  // namespace gs
