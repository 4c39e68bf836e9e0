// The quantization overhead of a quantizing mode (the mode's cell minus the pre-quantized cell of
// the same GEMM) split into a fixed part per GEMM and a part that moves bytes, fitted on one run's
// GEMMs (docs/predict.md, "Autocast overhead"). The fixed part (kernel launches, a pass's ramp and
// tail, the amax reduction's latency) is carried to another GPU unchanged; the rest scales with the
// modelled quantization bytes and the bandwidth. Carrying all of an overhead with the bandwidth
// ratio predicted a B300's per-GEMM overheads at half their size from an H100 run.
#pragma once
#include <utility>
#include <vector>

namespace gs {

struct OverheadFit {
  bool fitted = false;
  double fixed_s = 0;     // per GEMM
  double per_byte_s = 0;  // seconds per modelled quantization byte on the source
  int gemms = 0;
};

// Least squares of overhead (s) on quantization bytes over `points` (bytes, overhead s), one per
// GEMM of a run, mode and precision. Not fitted (fixed 0) with fewer than 4 GEMMs, bytes that vary
// by less than 1.5x, or a slope that is not positive; the fixed part is clamped to [0, the smallest
// positive overhead] so that no GEMM's byte-driven part goes negative.
OverheadFit fit_overhead(const std::vector<std::pair<double, double>>& points);

// The target's overhead of one GEMM: the fixed part of the source's measured overhead `ov_src`
// (the fit's, at most ov_src itself) unchanged, the rest scaled by `bytes_ratio` (target / source
// quantization bytes) and `bandwidth_ratio` (source / target bandwidth). A negative measured
// overhead (a mode cell faster than its kernel: noise) is scaled as a whole.
double transfer_overhead(const OverheadFit& fit, double ov_src, double bytes_ratio, double bandwidth_ratio);

}  // namespace gs
