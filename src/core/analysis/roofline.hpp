// Roofline and % of peak of a measured run on the GPU it ran on (datasheet numbers from
// gpu_spec.hpp). Per cell (mode, GEMM, precision): the FLOPs, the bytes the timed region moves
// (byte_count: the GEMM kernel's operands, scales and output, plus the mode's quantization
// passes), arithmetic intensity = FLOPs / bytes, the ridge point = peak / bandwidth of the
// precision's format, compute- or memory-bound (intensity at or above the ridge: compute), the
// roofline's lower bound on the time max(FLOPs / peak, bytes / bandwidth), and the achieved
// TFLOP/s as % of the datasheet peak and of the peak at the SM clock NVML sampled during the cell
// (peak x sampled MHz / the clock the datasheet peak assumes).
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "core/gpu/gpu_spec.hpp"
#include "core/results/results.hpp"
#include "core/util/printer.hpp"

namespace gs {

struct RooflinePoint {
  PeakFormat format = PeakFormat::BF16;
  double flops = 0, bytes = 0;
  double intensity = 0;    // FLOP per byte
  double ridge = 0;        // FLOP per byte where the roofs meet
  double peak_tflops = 0;  // datasheet, dense
  bool compute_bound = true;
  double roofline_ms = 0;  // max(flops / peak, bytes / bandwidth)
  // Measured cells only:
  std::optional<double> achieved_tflops, pct_peak, pct_peak_at_clock;
};

// nullopt when the spec has no peak for the precision's format. `cell` may be null (plan only).
std::optional<RooflinePoint> roofline_point(const GpuSpec& spec, const Gemm& g, Precision p, Mode m,
                                            const RecipeOptions& o, const Cell* cell);

// What the roofline knows about this run's GPU: the entry (nullptr when the GPU is unknown or no
// database could be read) and, when there is none, why ("GPU 'X' is not in the GPU spec database
// (data/gpus.json): no % of peak").
struct RooflineContext {
  const GpuSpec* spec = nullptr;
  std::string note;
};

// The text section printed under a measured run's report, and the "roofline" JSON object
// (docs/json-schema.md). Both say why they are empty when ctx.spec is null.
void add_roofline(print::Document& d, const RunResult& r, const RooflineContext& ctx);
std::string render_roofline_text(const RunResult& r, const RooflineContext& ctx);  // the section as text, after a blank line
nlohmann::json roofline_json(const RunResult& r, const RooflineContext& ctx);

}  // namespace gs
