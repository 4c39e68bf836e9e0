// One predicted cell of `gemmscope predict` (mode, GEMM, precision): the GEMM kernel's time on the
// target from the source's measured kernel time and the per-format priors (priors.hpp), the
// quantization overhead from the source's measured overhead (overhead_fit.hpp), and the band from
// measured prediction errors and the priors' spread (bands.hpp). predict.cpp loops over the cells
// and writes the result; the model is here (docs/predict.md).
#pragma once
#include <string>

#include "core/analysis/bands.hpp"
#include "core/analysis/overhead_fit.hpp"
#include "core/analysis/priors.hpp"
#include "core/gpu/gpu_spec.hpp"
#include "core/recipes/modes.hpp"
#include "core/recipes/recipe.hpp"

namespace gs {

// The published priors and the measured errors a prediction uses (either may be null: then the
// model says what it does without them, with its wider fallback band).
struct PredictData {
  const PriorDb* priors = nullptr;
  const ErrorSet* errors = nullptr;
};

// What the source run measured for one cell.
struct MeasuredCell {
  Precision column = Precision::BF16;  // the run's precision the cell borrows from (== target column when measured)
  double kernel_s = 0;                 // the GEMM kernel alone (pre-quantized cell, or estimated)
  double overhead_s = 0;               // mode cell minus kernel (signed)
  bool overhead_measured = true;       // false: estimated from bytes (the run has no pre-quantized mode)
  double cv = 0;                       // the cells' stdev / mean
  const OverheadFit* fit = nullptr;    // the run's overhead split for this mode and column
  double compute_efficiency = 0;       // the run's compute efficiency (for GEMMs memory-bound on the source)
};

struct CellPrediction {
  double kernel_s = 0, overhead_s = 0, low_s = 0, high_s = 0;
  double x = 0;           // size class variable on the target (priors.hpp)
  int size_class = 0;
  bool borrowed = false;  // the efficiency of another precision was carried
  bool from_prior = false;  // datasheet only: the kernel's efficiency is a published prior's (else the fallback)
  std::string basis;       // how the kernel time was derived
  std::string band_basis;  // what the band is made of
  std::string note;        // an assumption for the notes (a borrowed format, a missing prior), or ""
};

// From a run on `source`. `column` is the target's precision column; `o_src` / `o_tgt` the run's
// recipe options on each GPU.
CellPrediction predict_cell_from_run(const Gemm& g, Mode mode, Precision column, const MeasuredCell& m,
                                     const RecipeOptions& o_src, const RecipeOptions& o_tgt, const GpuSpec& source,
                                     const GpuSpec& target, const PredictData& data);

// From the target's datasheet and the priors alone.
CellPrediction predict_cell_datasheet(const Gemm& g, Mode mode, Precision column, const RecipeOptions& o_tgt,
                                      const GpuSpec& target, const PredictData& data);

// The dense peak (FLOP/s) of the format `kernel` runs at on `spec`; UsageError naming the database
// field when it is missing ("RTX-PRO-6000 has no dense BF16 peak (gpus.json tflops.BF16 is null)").
double required_peak_flops(const GpuSpec& spec, Precision kernel, const std::string& why);

// How the prediction's transfer is classed for its band.
Transfer transfer_kind(const GpuSpec& source, const GpuSpec& target);

}  // namespace gs
