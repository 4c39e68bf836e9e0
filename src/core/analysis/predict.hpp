// `gemmscope predict`: the GEMM times of a plan on a GPU you may not have, from a measured run on
// another GPU and both GPUs' datasheets (gpu_spec.hpp), or from the target's datasheet alone.
// Never from measurements of the target. docs/predict.md derives the model; in short, per cell
// (mode, GEMM, precision):
//
//   kernel  The source run's GEMM-kernel time (its pre-quantized cell) gives the GEMM's fraction
//           of the source's datasheet peak, with the source's wave quantization taken out
//           (tiles of a nominal 128x256 output tile over the SM count). Its ratio to the
//           published prior of its format and size class (priors.hpp) is carried to the
//           target's prior for the format the target runs (all of it within a generation, half
//           of it across); the memory roof (kernel bytes / bandwidth at a copy-like 80%) bounds
//           it below. A GEMM memory-bound on the source scales with bandwidth. A precision the
//           run lacks borrows the measured cells of the nearest one it has (MXFP8 and NVFP4
//           from MXFP8 or FP8 per-tensor) and follows its own format's prior.
//   overhead  quantizing modes: the source's measured quantization overhead (mode cell minus
//           pre-quantized cell), its fixed part per GEMM carried and the rest scaled by the
//           modelled quantization bytes and the bandwidth ratio (overhead_fit.hpp).
//   band    from measured prediction errors of gemmscope's own runs, per transfer kind,
//           precision and size class (bands.hpp), with the priors' spread and the carried
//           ratio's range across generations; sums add the bands (fully correlated).
// The per-cell model is predict_cell.hpp; this file loops over the cells and writes the result.
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "core/analysis/predict_cell.hpp"
#include "core/gpu/gpu_spec.hpp"
#include "core/results/results.hpp"
#include "core/util/printer.hpp"

namespace gs {

struct PredictedCell {
  bool ok = false;
  std::string reason;  // N/A: why (the target cannot run it, the run has nothing to derive it from)
  double ms = 0, low_ms = 0, high_ms = 0;
  double kernel_ms = 0, overhead_ms = 0;
  std::string basis;  // "FP8Current 63.1% of H100 FP8 peak; target prior ...", ...
  std::string band_basis;  // what the band is made of (measured errors, prior spread, ...)
  bool borrowed = false;  // efficiency taken from another precision
  bool from_prior = false;  // datasheet only: the kernel at a published prior (else the fallback fraction)
  double x = 0;           // size class variable on the target (priors.hpp)
  int size_class = 0;
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
  Transfer transfer = Transfer::SameGpu;
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

// Without `data` (no priors, no measured errors) every cell says so and takes the wider assumed
// band; the CLI always passes both.
// From a measured run on `source` to `target`. UsageError when the run has no measurements (a dry
// run, no modes), or when the target's database row lacks a peak a predicted column needs (the
// message names the field). `run_name` names the file in notes; `precisions` the columns (empty:
// all six).
Prediction predict_from_run(const RunResult& run, const std::string& run_name, const GpuSpec& source,
                            const GpuSpec& target, const PredictData& data = {},
                            const std::vector<Precision>& precisions = {});
// Datasheet only (no run): the priors alone, labelled "datasheet only", with its wider band.
Prediction predict_datasheet_only(const Plan& plan, const std::vector<Mode>& modes, const RecipeOptions& o,
                                  const GpuSpec& target, const PredictData& data = {},
                                  const std::vector<Precision>& precisions = {});

// The report: every number a prediction with its band, the assumptions last.
void add_prediction(print::Document& d, const Prediction& p);
std::string render_prediction_text(const Prediction& p);  // the same as text
// to_json(p.result) plus "roofline" (the target's roofs, the predicted points) and "prediction" (target, source, assumptions, per-layer bands) and, in every
// cell, "predicted": true, low_ms, high_ms, kernel_ms, overhead_ms, basis.
nlohmann::json prediction_json(const Prediction& p);

}  // namespace gs
