// GEMMs and communication per layer (comm_step.hpp).
#include "core/node/comm_step.hpp"

#include <sstream>

#include <fmt/format.h>

#include "core/io/input_file.hpp"
#include "core/recipes/modes.hpp"
#include "core/recipes/recipe.hpp"
#include "core/util/text_util.hpp"

namespace gs {

std::vector<LayerCommRow> layer_comm_rows(const CommResult& comm, const RunResult& run) {
  std::vector<LayerCommRow> rows;
  if (comm.measured.empty() || run.dry_run || run.cells.empty() || run.modes.empty() || !run.plan.model_mode) return rows;
  const ModeSummary ms = summarize_mode(run, 0);
  for (const bool moe : {false, true}) {
    if (moe ? !run.plan.has_moe() : run.plan.dense_layers() == 0) continue;
    const LayerComm lc = layer_comm(comm, moe);
    for (size_t p = 0; p < run.precisions.size(); ++p) {
      LayerCommRow row{run.precisions[p], moe, std::nullopt, 0, std::nullopt};
      const PrecisionSums& s = ms.sums.at(p);
      row.gemm_ms = moe ? s.moe_total : s.total;
      const bool bf16 = run.precisions[p] == Precision::BF16;
      row.comm_ms = bf16 ? lc.bf16_ms : lc.fp8_ms;
      if (bf16 ? lc.overlap_bf16 : lc.overlap_fp8) row.exposed_ms = bf16 ? lc.exposed_bf16_ms : lc.exposed_fp8_ms;
      rows.push_back(row);
    }
  }
  return rows;
}

std::string render_layer_comm(const CommResult& comm, const RunResult& run) {
  const std::vector<LayerCommRow> rows = layer_comm_rows(comm, run);
  if (rows.empty()) return "";
  std::ostringstream o;
  o << fmt::format("\nPer layer with the layout's communication ({} mode, ms, measured)\n", to_string(run.modes.at(0)));
  o << fmt::format("  {:<6} {:<14} {:>10} {:>10} {:>11} {:>13} {:>15}\n", "layer", "recipe", "GEMMs", "comm",
                   "exposed", "GEMMs + comm", "GEMMs + exposed");
  auto num = [](const std::optional<double>& v, int w) {
    return v ? fmt::format("{:>{}.3f}", *v, w) : fmt::format("{:>{}}", "-", w);
  };
  for (const LayerCommRow& r : rows) {
    const std::optional<double> serial = r.gemm_ms ? std::optional<double>(*r.gemm_ms + r.comm_ms) : std::nullopt;
    const std::optional<double> hidden =
        r.gemm_ms && r.exposed_ms ? std::optional<double>(*r.gemm_ms + *r.exposed_ms) : std::nullopt;
    o << fmt::format("  {:<6} {:<14} {} {:>10.3f} {} {} {}\n", r.moe_layer ? "MoE" : "dense",
                     clip_text(to_string(r.precision), 14), num(r.gemm_ms, 10), r.comm_ms, num(r.exposed_ms, 11),
                     num(serial, 13), num(hidden, 15));
  }
  o << "  comm: the layer's collectives in the recipe's wire types (BF16 recipe: BF16; other recipes: the FP8-recipe "
       "types), none overlapped; exposed: the part not hidden behind the GEMM each runs beside, timed beside the "
       "recipe family's GEMM (BF16, or FP8 per-tensor E4M3 for every other recipe: an FP8 block-scaled GEMM runs "
       "longer, so its exposure may be smaller); GEMM N/A cells show -\n";
  return o.str();
}

}  // namespace gs
