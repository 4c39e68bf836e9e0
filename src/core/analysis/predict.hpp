// `gemmscope predict`: the GEMM times of a plan on a GPU you may not have, from a measured run on
// another GPU and both GPUs' datasheets (gpu_spec.hpp), or from the target's datasheet alone.
// Never from measurements of the target. docs/predict.md derives the model; in short, per cell
// (mode, GEMM, precision):
//
//   kernel  The source run's GEMM-kernel time (its pre-quantized cell) gives the GEMM's fraction
//           of the source's datasheet peak, with the source's wave quantization taken out
//           (tiles of a nominal 128x256 output tile over the SM count). That fraction, times the
//           target's wave quantization, is applied to the target's peak of the format the
//           precision runs at; the memory roof (kernel bytes / bandwidth at a copy-like 80%)
//           bounds it below. A GEMM that is memory-bound on the source scales with bandwidth.
//           A precision the run lacks borrows the efficiency of the nearest one it has (MXFP8
//           and NVFP4 from MXFP8 or FP8 per-tensor), stated in the notes as an assumption.
//   overhead  quantizing modes: the source's measured quantization overhead (mode cell minus
//           pre-quantized cell) scaled by the modelled quantization bytes (target precision over
//           source precision) and by the bandwidth ratio source / target.
//   band    relative uncertainties per term (same GPU: the run's own spread only; same
//           architecture; other architecture; borrowed precision; datasheet only), added for the
//           kernel and the overhead; sums add the bands (fully correlated).
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "core/gpu/gpu_spec.hpp"
#include "core/results/results.hpp"
#include "core/util/printer.hpp"

namespace gs {

struct PredictedCell {
  bool ok = false;
  std::string reason;  // N/A: why (the target cannot run it, the run has nothing to derive it from)
  double ms = 0, low_ms = 0, high_ms = 0;
  double kernel_ms = 0, overhead_ms = 0;
  std::string basis;  // "FP8Current pre-quantized, 63.1% of H100 peak", ...
  bool borrowed = false;  // efficiency taken from another precision
};

struct Prediction {
  // A result document in the measured runs' schema (the cells hold the predicted means) so that
  // `gemmscope compare` reads it; device.name ends in "(predicted)".
  RunResult result;
  std::vector<std::vector<std::vector<PredictedCell>>> cells;  // [mode][gemm][precision]
  GpuSpec target;  // the target's datasheet entry (the predicted roofline's roofs)
  std::string target_key, target_name;
  std::string source_key, source_device;  // empty: datasheet only
  bool datasheet_only = false;
  std::vector<std::string> assumptions;
};

// Model constants (docs/predict.md gives their derivation). Not fitted to any target GPU.
struct PredictConstants {
  static constexpr int kTileM = 128, kTileN = 256;       // nominal output tile for wave quantization
  static constexpr double kMemEff = 0.80;                // bandwidth fraction of streaming kernels
  static constexpr double kComputePrior = 0.70;          // datasheet-only: fraction of dense peak
};

// Wave-quantization efficiency of `g` on `sms` SMs: tiles / (waves x SMs), 1 when sms <= 0.
double wave_efficiency(const Gemm& g, int sms);

// From a measured run on `source` to `target`. UsageError when the run has no measurements (a dry
// run, no modes). `run_name` names the file in notes.
Prediction predict_from_run(const RunResult& run, const std::string& run_name, const GpuSpec& source,
                            const GpuSpec& target);
// Datasheet only (no run): the widest band.
Prediction predict_datasheet_only(const Plan& plan, const std::vector<Mode>& modes, const RecipeOptions& o,
                                  const GpuSpec& target);

// The report: every number a prediction with its band, the assumptions last.
void add_prediction(print::Document& d, const Prediction& p);
std::string render_prediction_text(const Prediction& p);  // the same as text
// to_json(p.result) plus "roofline" (the target's roofs, the predicted points) and "prediction" (target, source, assumptions, per-layer bands) and, in every
// cell, "predicted": true, low_ms, high_ms, kernel_ms, overhead_ms, basis.
nlohmann::json prediction_json(const Prediction& p);

}  // namespace gs
