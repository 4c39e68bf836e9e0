#include "core/report/report_moe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "core/providers/deepgemm_cells.hpp"
#include "core/recipes/grouped.hpp"
#include "core/report/report.hpp"

namespace gs {

void add_moe_config(print::Document& d, const ModelConfig& c) {
  const MoeConfig& m = c.moe;
  if (m.enabled()) {
    const int64_t n_moe = moe_layer_count(c);
    std::string out = fmt::format("Experts: {} routed, top-{}, expert FFN {}{}", m.num_experts, m.top_k, expert_ffn(c),
                       c.gated_mlp ? " (gated)" : "");
    if (m.shared_experts > 0)
      out += fmt::format(", {} shared (FFN {} in all)", m.shared_experts, shared_ffn_total(c));
    out += fmt::format("; MoE layers {} of {}", n_moe, c.num_hidden_layers);
    if (n_moe < c.num_hidden_layers) out += fmt::format(" (the others: dense MLP {})", c.intermediate_size);
    if (m.expert_parallel > 1)
      out += fmt::format("; expert parallel {} ({} local experts per rank{})", m.expert_parallel,
                         m.num_experts / m.expert_parallel,
                         m.parallel_source.empty() ? "" : "; " + m.parallel_source);
    else if (!m.parallel_source.empty())
      out += fmt::format("; expert parallel 1 ({})", m.parallel_source);
    if (c.tensor_parallel > 1) out += "; expert FFNs split by tensor parallel (Megatron's default)";
    d.line(out);
  }
  if (c.mla.enabled()) {
    const MlaConfig& a = c.mla;
    d.line(fmt::format("MLA: q_lora_rank={}, kv_lora_rank={}, qk_nope_head_dim={}, qk_rope_head_dim={}, v_head_dim={} "
                       "(replaces QKV; kv heads and head_dim unused)",
                       a.q_lora_rank > 0 ? std::to_string(a.q_lora_rank) : std::string("none (plain q projection)"),
                       a.kv_lora_rank, a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim));
  }
}

std::string moe_config_text(const ModelConfig& c) {
  print::Document d;
  add_moe_config(d, c);
  return print::render(d, print::Format::Text);
}

void add_moe_routing(print::Document& d, const RunResult& r) {
  if (!r.plan.routing) return;
  const Routing& rt = *r.plan.routing;
  d.line(fmt::format("Routing ({}, seed {}): {} tokens{} x top-{} = {} rows over {} experts; max/mean rows per expert "
                     "{:.2f}, empty experts {}",
                     rt.spec.text(), rt.seed, format_thousands(rt.tokens),
                     rt.expert_parallel > 1 ? fmt::format(" x {} EP ranks", rt.expert_parallel) : "", rt.top_k,
                     format_thousands(rt.assignments()), rt.experts, rt.max_over_mean(), rt.empty_experts()));
  if (rt.capacity_factor > 0)
    d.line(fmt::format("Capacity factor {}: {} rows per expert kept, {} rows dropped ({:.2f}% of {})", rt.capacity_factor,
                       format_thousands(rt.capacity), format_thousands(rt.dropped),
                       100.0 * static_cast<double>(rt.dropped) / static_cast<double>(rt.assignments()),
                       format_thousands(rt.assignments())));
  const std::vector<int64_t> local = rt.busiest_counts();
  const auto [lo, hi] = std::minmax_element(local.begin(), local.end());
  if (rt.expert_parallel > 1)
    d.line(fmt::format("Expert parallel {}: the busiest rank ({}) receives {} rows ({:.2f}x the mean rank) for its {} "
                       "experts; it sets the step time, so the expert GEMMs are its GEMMs",
                       rt.expert_parallel, rt.busiest_rank,
                       format_thousands(rt.rank_rows[static_cast<size_t>(rt.busiest_rank)]), rt.busiest_over_mean_rank(),
                       rt.local_experts()));
  d.line(fmt::format("Expert GEMMs: {} groups, rows per expert {}..{} (sum {}); one routing draw stands for every MoE "
                     "layer",
                     local.size(), *lo, *hi, format_thousands(std::accumulate(local.begin(), local.end(), int64_t{0}))));
  // Padding: TE pads each expert's rows to the quantized kernels' alignment.
  const Gemm* up = nullptr;
  for (const Gemm& g : r.plan.gemms)
    if (g.grouped() && g.pass == Pass::Fprop && g.op == Op::ExpertUp) up = &g;
  if (up) {
    std::string waste;
    bool dg = false;
    for (const PaddingWaste& w : padding_waste(r)) {  // core/providers/deepgemm_cells.hpp: one place for every provider's
      dg |= w.provider == kProviderDeepGemm;
      waste += fmt::format("{}{}{} +{} rows ({:.2f}%)", waste.empty() ? "" : ", ",
                           w.provider == kProviderDeepGemm ? "DeepGEMM " : "", to_string(w.precision),
                           format_thousands(w.waste_rows), 100.0 * w.fraction());
    }
    if (!waste.empty())
      d.line(fmt::format("Padding waste per expert GEMM (rows padded to 16 for FP8, 32 for MXFP8/NVFP4{}, computed but not "
                         "counted as FLOPs): {}",
                         dg ? ", 128 for DeepGEMM's contiguous segments" : "", waste));
    // Quantization launches of the expert up projection's Fprop (training mode), as run.
    std::string launches;
    for (Precision p : r.precisions) {
      const Recipe rec = make_recipe(p, *up, r.recipe_options);
      if (rec.precision == Precision::BF16) continue;
      const OperandWork a = operand_work(Mode::Training, *up, Side::Left, rec, r.recipe_options);
      const OperandWork b = operand_work(Mode::Training, *up, Side::Right, rec, r.recipe_options);
      const bool fused = r.recipe_options.grouped_quant_fused && grouped_quant_fusable(rec);
      launches += fmt::format("{}{} {} ({})", launches.empty() ? "" : ", ", to_string(p),
                              grouped_quant_launches(rec, *up, a, b, fused), fused ? "fused" : "per expert");
    }
    if (!launches.empty())
      d.line(fmt::format("Quantization launches per Fprop Expert Up iteration (training mode): {}", launches));
  }
}

std::string moe_routing_text(const RunResult& r) {
  print::Document d;
  add_moe_routing(d, r);
  return print::render(d, print::Format::Text);
}

void add_moe_grouped(print::Document& d, const RunResult& r, size_t mode) {
  bool any = false;
  for (const Gemm& g : r.plan.gemms) any |= g.grouped();
  if (!any) return;
  d.title("Grouped expert GEMMs (the busiest EP rank's experts; efficiency = one dense GEMM of the same padded FLOPs / "
          "the grouped time):");
  // Columns one space apart: each width holds the space before its column (after it, for Pass and Op).
  using print::Align;
  std::vector<print::Column> cols = {{"Pass", Align::Left, 8}, {"Op", Align::Left, 13}, {"Groups", Align::Right, 9},
                                     {"Rows min..max", Align::Right, 13}};
  for (Precision p : r.precisions) cols.push_back({fmt::format("{} eff", to_string(p)), Align::Right, 15});
  print::Table t(std::move(cols), print::Table::Layout::Fixed);
  t.add_header();
  for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
    const Gemm& x = r.plan.gemms[g];
    if (!x.grouped()) continue;
    const auto [lo, hi] = std::minmax_element(x.group.begin(), x.group.end());
    std::vector<print::Cell> row = {pass_label(x.pass), x.label(), std::to_string(x.group.size()),
                                    fmt::format("{}..{}", *lo, *hi)};
    for (size_t p = 0; p < r.precisions.size(); ++p) {
      const Cell& c = r.cell(mode, g, p);
      row.emplace_back(c.ok && c.dense_equiv_ms && c.stats.mean_ms > 0 ? fmt::format("{:.2f}", *c.dense_equiv_ms / c.stats.mean_ms)
                                                                        : std::string("-"));
    }
    t.add_row(std::move(row));
  }
  d.table(std::move(t));
  // Kernel time against cell time: a grouped cell's events span every expert's launches, and the
  // gaps between them (about 1-2 us each) are part of its time, not of any kernel's.
  std::string kernels;
  for (size_t p = 0; p < r.precisions.size(); ++p) {
    double cell_ms = 0, kernel_ms = 0, launches = 0;
    bool all = true, any_cell = false;
    for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
      if (!r.plan.gemms[g].grouped()) continue;
      const Cell& c = r.cell(mode, g, p);
      if (!c.ok) continue;
      any_cell = true;
      if (!c.kernels.traced) {
        all = false;
        break;
      }
      cell_ms += c.stats.mean_ms;
      for (const KernelStat& k : c.kernels.kernels) {
        kernel_ms += k.mean_us * k.count * 1e-3;
        launches += k.count;
      }
    }
    if (!any_cell || !all || !(cell_ms > 0)) continue;
    kernels += fmt::format("{}{} {:.3f} of {:.3f} ms ({:.0f}%, {:.0f} launches)", kernels.empty() ? "" : ", ",
                           to_string(r.precisions[p]), kernel_ms, cell_ms, 100.0 * kernel_ms / cell_ms, launches);
  }
  if (!kernels.empty())
    d.line("Kernel time in the grouped cells (measured: CUPTI records of iterations traced after each timed loop, "
           "experts run one after another): " +
           kernels + ". The rest is the gaps between the experts' launches, which a step pays too.");
  d.rule('=', print::kReportWidth);
}

std::string moe_grouped_block(const RunResult& r, size_t mode) {
  print::Document d;
  add_moe_grouped(d, r, mode);
  return print::render(d, print::Format::Text);
}

}  // namespace gs
