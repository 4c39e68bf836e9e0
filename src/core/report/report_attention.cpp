#include "core/report/report_attention.hpp"

#include <fmt/format.h>

#include "core/plan/attention_matmuls.hpp"
#include "core/plan/step_model.hpp"
#include "core/results/step_context_records.hpp"

namespace gs {
namespace {

constexpr const char* kNotGemmRows =
    "Not GEMM rows: fused with the softmax in flash attention, never timed as GEMMs, never in the GEMM totals or "
    "speedups.";

// Executed FLOPs of a fused pass (the backward recomputes S): what its TFLOP/s is quoted over.
double executed_flops(const AttentionMatmuls& a, Pass pass) {
  return pass == Pass::Fprop ? a.flops(Pass::Fprop) : a.flops(Pass::Dgrad) + a.recomputed_flops();
}

std::string pass_time_text(const AttentionPassTimes& t, std::optional<double> ms, double flops) {
  if (!ms) return fmt::format("{} ({})", t.source, t.why);
  if (t.source == "measured")
    return fmt::format("{:.3f} ms measured by the step context ({}), {:.1f} TFLOP/s of the FLOPs it executes", *ms,
                       t.why, *ms > 0 ? flops / (*ms * 1e9) : 0.0);
  return fmt::format("{:.3f} ms from the step context, not measured ({})", *ms, t.why);
}

}  // namespace

AttentionPassTimes attention_pass_times(const RunResult& r) {
  AttentionPassTimes t;
  t.source = "not measured";
  if (!r.plan.model_mode || !r.plan.config) {
    t.why = "no model plan";
    return t;
  }
  if (r.predicted()) {
    t.source = "not predicted";
    t.why = "predict carries GEMM cells only";
    return t;
  }
  const bool would_run = r.timing.step_context_kind != StepContextKind::None;
  if (r.dry_run) {
    t.why = would_run ? "dry run; a measurement's step context times it with cuDNN"
                      : "dry run; --step-context none runs no attention";
    return t;
  }
  const std::optional<StepContextInfo> sc = step_context_view(r);
  if (!sc || sc->attention_ms() <= 0) {
    t.why = would_run ? "the step context of this run timed no attention"
                      : "no step context in this run: --step-context none or an older file";
    return t;
  }
  const StepContextInfo& c = *sc;
  // The time belongs to these rows only when the step context ran this layer's shape.
  const std::string planned = describe(attention_shape(*r.plan.config));
  if (!c.attention_shape.empty() && c.attention_shape != planned) {
    t.why = fmt::format("the step context timed another shape ({}), not {}", c.attention_shape, planned);
    return t;
  }
  t.forward_ms = c.attention_fwd_ms;
  t.backward_ms = c.attention_bwd_ms;
  t.source = c.attention_measured ? "measured" : "modelled";
  t.why = c.attention_source.empty() ? (c.attention_measured ? "cuDNN's fused attention" : "modelled") : c.attention_source;
  return t;
}

void add_attention_matmuls(print::Document& d, const RunResult& r) {
  if (!r.plan.model_mode || !r.plan.config) return;
  const AttentionMatmuls a = attention_matmuls(*r.plan.config);
  const AttentionPassTimes t = attention_pass_times(r);
  const auto wrapped = [&](const std::string& text, int hang) { d.wrapped(text, print::kReportWidth, 2, hang); };
  d.title("Attention's own matmuls (QK^T and PV), per layer and GPU:");
  d.line(describe(a.shape), 2);
  wrapped(kNotGemmRows, 2);
  using print::Align;
  print::Table m({{"Pass", Align::Left, 7},
                  {"Matmul", Align::Left, 14},
                  {"Shape (products x MxKxN)", Align::Left, 28},
                  {a.shape.causal ? "GFLOP (causal)" : "GFLOP", Align::Right, 16},
                  {"MB unfused", Align::Right, 14}},
                 print::Table::Layout::Fixed);
  m.min_rule = print::kReportWidth;
  m.add_rule('-');
  m.add_header();
  for (const AttentionMatmul& x : a.rows)
    m.add_row({pass_label(x.pass), x.name, x.shape(), fmt::format("{:.1f}", x.flops(a.shape.causal) / 1e9),
               fmt::format("{:.1f}", x.unfused_bytes() / 1e6)});
  m.add_rule('-');
  d.table(std::move(m));
  d.line(fmt::format("Forward, one fused kernel: {:.1f} GFLOP, at least {:.1f} MB moved", a.flops(Pass::Fprop) / 1e9,
                     a.fused_bytes(Pass::Fprop) / 1e6));
  wrapped(pass_time_text(t, t.forward_ms, executed_flops(a, Pass::Fprop)), 4);
  d.line(fmt::format("Backward, one fused kernel: {:.1f} GFLOP + {:.1f} recomputing S, at least {:.1f} MB moved",
                     a.flops(Pass::Dgrad) / 1e9, a.recomputed_flops() / 1e9, a.fused_bytes(Pass::Dgrad) / 1e6));
  wrapped(pass_time_text(t, t.backward_ms, executed_flops(a, Pass::Dgrad)), 4);
  const PlanFlops f = plan_flops(r.plan);
  const double linear = f.full_model(r.plan.layers());
  d.line(fmt::format("Per layer {:.2f}T{}", a.flops_per_layer(a.shape.causal) / 1e12,
                     a.shape.causal ? fmt::format(" with the causal mask (half the s x s scores; {:.2f}T without)",
                                                  a.flops_per_layer(false) / 1e12)
                                    : std::string()));
  d.line(fmt::format("{} layers: {:.2f}T per step, {:.0f}% on top of the linear layers' {:.2f}T", a.layers,
                     a.flops_per_step() / 1e12, linear > 0 ? 100 * a.flops_per_step() / linear : 0.0, linear / 1e12),
         2);
  wrapped("MB unfused: BF16 operands read and output written by a standalone batched GEMM (S and P in full); "
          "the fused kernels keep S and P on chip. Pass Dgrad: gradients of activations (attention has no "
          "weights, no Wgrad).",
          2);
}

std::string attention_matmuls_block(const RunResult& r) {
  print::Document d;
  add_attention_matmuls(d, r);
  return print::render(d, print::Format::Text);
}

nlohmann::json attention_matmuls_json(const RunResult& r) {
  if (!r.plan.model_mode || !r.plan.config) return nullptr;
  const AttentionMatmuls a = attention_matmuls(*r.plan.config);
  const AttentionPassTimes t = attention_pass_times(r);
  const AttentionShape& s = a.shape;
  nlohmann::json j = {
      {"in_gemm_totals", false},
      {"note", kNotGemmRows},
      {"shape",
       {{"batch", s.batch}, {"seq_q", s.seq_q}, {"seq_kv", s.seq_kv}, {"heads_q", s.heads_q}, {"heads_kv", s.heads_kv},
        {"d_qk", s.d_qk}, {"d_v", s.d_v}, {"causal", s.causal}}},
      {"layers", a.layers},
      {"flops_per_layer", a.flops_per_layer(s.causal)},
      {"flops_per_layer_no_mask", a.flops_per_layer(false)},
      {"flops_per_step", a.flops_per_step()}};
  j["rows"] = nlohmann::json::array();
  for (const AttentionMatmul& m : a.rows)
    j["rows"].push_back({{"pass", to_string(m.pass)},
                         {"name", m.name},
                         {"products", m.products},
                         {"m", m.m},
                         {"k", m.k},
                         {"n", m.n},
                         {"flops", m.flops(s.causal)},
                         {"bytes_unfused", m.unfused_bytes()}});
  auto pass = [&](Pass p, std::optional<double> ms) {
    nlohmann::json x = {{"flops", a.flops(p)},
                        {"executed_flops", executed_flops(a, p)},
                        {"fused_bytes_min", a.fused_bytes(p)},
                        {"time_ms", ms ? nlohmann::json(*ms) : nlohmann::json(nullptr)},
                        {"time_source", t.source},
                        {"time_why", t.why}};
    return x;
  };
  j["forward"] = pass(Pass::Fprop, t.forward_ms);
  j["backward"] = pass(Pass::Dgrad, t.backward_ms);
  j["backward"]["recomputed_flops"] = a.recomputed_flops();
  return j;
}

}  // namespace gs
