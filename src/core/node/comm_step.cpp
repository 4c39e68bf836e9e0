// GEMMs and communication per layer (comm_step.hpp).
#include "core/node/comm_step.hpp"

#include <fmt/format.h>

#include "core/io/input_file.hpp"
#include "core/recipes/modes.hpp"
#include "core/recipes/recipe.hpp"
#include "core/util/printer.hpp"
#include "core/util/text_util.hpp"

namespace gs {

std::vector<LayerCommRow> layer_comm_rows(const CommResult& comm, const RunResult& run) {
  std::vector<LayerCommRow> rows;
  if (comm.measured.empty() || run.dry_run || !run.has_cells() || run.modes.empty() || !run.plan.model_mode) return rows;
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
  // A fixed table two spaces in (an empty first column), its columns one space apart: each width
  // holds the space after a label, before a number.
  using print::Align;
  print::Table t({{"", Align::Left, 2},
                  {"layer", Align::Left, 7},
                  {"recipe", Align::Left, 14},
                  {"GEMMs", Align::Right, 11},
                  {"comm", Align::Right, 11},
                  {"exposed", Align::Right, 12},
                  {"GEMMs + comm", Align::Right, 14},
                  {"GEMMs + exposed", Align::Right, 16}},
                 print::Table::Layout::Fixed);
  t.add_header();
  auto num = [](const std::optional<double>& v) { return v ? fmt::format("{:.3f}", *v) : std::string("-"); };
  for (const LayerCommRow& r : rows) {
    const std::optional<double> serial = r.gemm_ms ? std::optional<double>(*r.gemm_ms + r.comm_ms) : std::nullopt;
    const std::optional<double> hidden =
        r.gemm_ms && r.exposed_ms ? std::optional<double>(*r.gemm_ms + *r.exposed_ms) : std::nullopt;
    t.add_row({"", r.moe_layer ? "MoE" : "dense", clip_text(to_string(r.precision), 14), num(r.gemm_ms),
               fmt::format("{:.3f}", r.comm_ms), num(r.exposed_ms), num(serial), num(hidden)});
  }
  std::string out = fmt::format("\nPer layer with the layout's communication ({} mode, ms, measured)\n",
                                to_string(run.modes.at(0)));
  out += print::render_table(t, print::Format::Text);
  out += "  comm: the layer's collectives in the recipe's wire types (BF16 recipe: BF16; other recipes: the FP8-recipe "
         "types), none overlapped; exposed: the part not hidden behind the GEMM each runs beside, timed beside the "
         "recipe family's GEMM (BF16, or FP8 per-tensor E4M3 for every other recipe: an FP8 block-scaled GEMM runs "
         "longer, so its exposure may be smaller); GEMM N/A cells show -\n";
  return out;
}

}  // namespace gs
