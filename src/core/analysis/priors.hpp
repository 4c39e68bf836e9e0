// Per-format efficiency priors for `gemmscope predict` (docs/predict.md, "Priors"): the fraction of
// the dense datasheet peak a GEMM of a given number format reaches on a GPU generation, per size
// class, from published measurements (data/priors.json: each point a published GEMM with its GPU,
// format, shape, TFLOP/s and source). Nothing here is fitted to a table gemmscope checks against.
//
// Size class: x = arithmetic intensity / ridge point, where intensity = FLOPs / bytes of the GEMM
// kernel (operands in their format with scales, the output) and ridge = the format's dense peak /
// the memory bandwidth of the GPU. x is dimensionless, so one class means the same distance above
// the memory roof on every GPU and format: near the ridge the operand, scale and output traffic
// costs kernel time (FP4 on Blackwell: a 2-3x higher peak over the same bytes), far above it the
// math dominates. Classes: near-ridge x < 1.5, low 1.5-3, mid 3-6, high >= 6.
//
// A class's prior is the median fraction of its published points (per format and generation, the
// GpuSpec::arch of the point's GPU); between class centres the prior is interpolated in log x; a
// GEMM beyond the outermost centres by up to 2x in x takes the nearest class's prior, further out
// there is none. The spread of the points around the prior is the prior's own uncertainty (bands.hpp).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/gpu/gpu_spec.hpp"
#include "core/recipes/recipe.hpp"

namespace gs {

// The kernel families with their own priors: FP8 per-tensor (current and delayed scaling run the
// same kernel), FP8 1x128/128x128 block scaling, MXFP8, NVFP4.
enum class PriorFormat { BF16, FP8, FP8Block, MXFP8, NVFP4 };
inline constexpr PriorFormat kAllPriorFormats[] = {PriorFormat::BF16, PriorFormat::FP8, PriorFormat::FP8Block,
                                                   PriorFormat::MXFP8, PriorFormat::NVFP4};
const char* to_string(PriorFormat f);
// The family whose prior a GEMM kernel in `kernel` precision follows on a GPU with policy `a`:
// FP8Block is MXFP8's where the architecture runs it through the MXFP8 kernel (Blackwell).
PriorFormat prior_format(Precision kernel, const ArchPolicy& a);

inline constexpr int kSizeClasses = 4;
inline constexpr double kSizeClassEdges[kSizeClasses - 1] = {1.5, 3.0, 6.0};
int size_class(double x);                 // 0..3
const char* size_class_name(int cls);     // "near-ridge", "low", "mid", "high"
std::string size_class_range(int cls);    // "x < 1.5", "1.5 <= x < 3", ...

// x of a GEMM: (flops / bytes) / (peak_tflops / bandwidth_gbs), the peak in TFLOP/s and the
// bandwidth in GB/s; 0 when an input is not positive.
double ridge_ratio(double flops, double bytes, double peak_tflops, double bandwidth_gbs);
// x of GEMM `g` in kernel precision `kernel` (recipe options `o`) on `spec`, its kernel bytes as
// byte_count counts them; 0 when the spec has no peak for the format.
double size_x(const Gemm& g, Precision kernel, const RecipeOptions& o, const GpuSpec& spec);

struct PriorPoint {
  std::string gpu;  // a key of the GPU database
  PriorFormat format = PriorFormat::BF16;
  int64_t m = 0, n = 0, k = 0;
  double tflops = 0;
  std::string output, library, source, note;
  // From the database: the GPU's generation, the point's fraction of its dense peak and its x.
  std::string arch;
  double fraction = 0, x = 0;
};

struct PriorDb {
  std::vector<PriorPoint> points;
  std::string path;  // where it was read from (for notes)
};

// Parses data/priors.json (schema "gemmscope.priors/1") against the GPU database (each point's GPU
// must be a key there with a peak for its format). UsageError naming `where` and the point for a
// document that is not the schema, an unknown GPU or format, a number that is not positive.
PriorDb parse_priors(const nlohmann::json& doc, const std::string& where, const GpuDb& gpus);
PriorDb read_priors_file(const std::string& path, const GpuDb& gpus);

// One size class of a format and generation: the median fraction of its points, at the median x.
struct ClassPrior {
  int size_class = 0;
  double x_center = 0, fraction = 0;
  std::vector<const PriorPoint*> points;
};
std::vector<ClassPrior> class_priors(const PriorDb& db, PriorFormat f, const std::string& arch);

struct Prior {
  bool found = false;
  double fraction = 0;  // of the dense datasheet peak, at this x
  // The published points' relative spread around the prior (the lowest point's shortfall and the
  // highest point's excess, over the format and generation; pooled wider when it has fewer than 3).
  double spread_lo = 0, spread_hi = 0;
  int points = 0;       // points of the classes used
  std::string basis;    // "NVFP4 on blackwell, low class (x 2.1): 36.4% of peak (2 classes, 7 points)"
  std::string why_not;  // when not found
};
Prior lookup_prior(const PriorDb& db, PriorFormat f, const std::string& arch, double x);

// Where no prior exists for a format on a generation: what the prediction does instead and the
// direction of its known bias ("likely too fast: ..."), for the output.
std::string missing_prior_bias(PriorFormat target, PriorFormat source);

// Carrying a run's efficiency across GPUs with priors: the target reaches its prior times the
// source's measured efficiency relative to its own prior, raised to kCarryExponent. The ratio mixes
// a shape's own kernel behaviour (carried) with the source machine's clocks under its power limit
// against short published benchmarks (not carried); with no way to tell them apart, half of it (in
// log terms) is carried and the band spans none of it to all of it.
inline constexpr double kCarryExponent = 0.5;
struct CarriedEfficiency {
  double efficiency = 0;  // of the target's dense peak
  double ratio = 1;       // measured / prior on the source
  // The band of carrying none to all of the ratio, relative to `efficiency`.
  double lo = 0, hi = 0;
};
CarriedEfficiency carry_efficiency(double measured_source, const Prior& source, const Prior& target);

}  // namespace gs
