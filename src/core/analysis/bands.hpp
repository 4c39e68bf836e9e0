// Bands of `gemmscope predict` from measured prediction errors (docs/predict.md, "Error band").
//
// data/predict_errors.json holds, per predicted cell of gemmscope's own runs (docs/results/: the
// same plan measured on an H100 and an H200, each predicted from the other, and every run predicted
// from the datasheet alone), the relative deviation of the measurement from the prediction, with
// the cell's transfer kind (same architecture, datasheet only), precision, mode, size class
// (priors.hpp) and model. bench/validate_predict.py writes it and checks the bands leave-one-model-
// out: a band for a model is built without that model's own errors.
//
// A band is the range of the measured deviations of the cells like it: the same transfer kind,
// precision and size class; with fewer than kMinSamples of those, the precision's other size
// classes; then every precision. It always contains the prediction (deviations are clamped to
// include 0). Terms without measurements (the prior's spread across generations, the carried
// efficiency's range) are combined with it in quadrature, each named in the band's basis.
#pragma once
#include <nlohmann/json.hpp>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/recipes/recipe.hpp"

namespace gs {

// How a prediction was made, as the error samples record it.
enum class Transfer { SameGpu, SameArch, OtherArch, DatasheetOnly };
const char* to_string(Transfer t);  // "same-gpu", "same-arch", "other-arch", "datasheet-only"

struct ErrorSample {
  std::string model;  // the run's model (config name): what leave-one-out leaves out
  std::string arch;   // the predicted GPU's generation (GpuSpec::arch)
  Transfer transfer = Transfer::SameArch;
  Precision precision = Precision::BF16;
  std::string mode;
  int size_class = 0;
  double deviation = 0;  // measured / predicted - 1
};

struct ErrorSet {
  std::vector<ErrorSample> samples;
  std::vector<std::string> sources;  // the runs the errors come from
  std::string path;
};

// Parses data/predict_errors.json (schema "gemmscope.predict_errors/1"); UsageError naming
// `where` and the sample for anything else.
ErrorSet parse_error_set(const nlohmann::json& doc, const std::string& where);
ErrorSet read_error_set_file(const std::string& path);

// A relative band around a prediction: the truth is expected in [t (1 - lo), t (1 + hi)].
struct RelBand {
  double lo = 0, hi = 0;
  int samples = 0;     // measured deviations behind it (0: not measured)
  std::string basis;   // "measured same-arch errors: 24 FP8Current size-class-mid cells of 2 models on hopper"
  bool arch_matched = false;  // they were measured on the predicted GPU's generation
};

inline constexpr int kMinSamples = 8;

// The band of the measured deviations of cells like this one (see the file comment), from samples
// of the predicted GPU's generation `arch` where the set has any of this transfer kind, else from
// all of them (arch_matched false); lo = hi = 0 and samples = 0 when it holds none of the kind.
RelBand measured_band(const ErrorSet& set, Transfer t, Precision p, int size_class, const std::string& arch);

// A relative band from the spread of efficiencies around their prior (efficiency e / prior - 1 in
// [-shortfall, +excess]): the time moves the other way.
RelBand band_from_efficiency_spread(double shortfall, double excess, const std::string& basis);

// Terms combined in quadrature (independent sources of error); the bases joined with " + ".
RelBand combine(std::initializer_list<RelBand> terms);

// [low, high] ms of a time `ms` under `b` (high >= ms >= low >= 0).
std::pair<double, double> band_range_ms(double ms, const RelBand& b);

}  // namespace gs
