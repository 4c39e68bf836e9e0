#include "core/report/report_attention.hpp"

#include <fmt/format.h>

#include "core/plan/attention_matmuls.hpp"
#include "core/plan/step_model.hpp"

namespace gs {
namespace {

constexpr const char* kNotGemmRows =
    "Not GEMM rows: fused with the softmax in flash attention, never timed as GEMMs, never in the GEMM totals or "
    "speedups.";
constexpr size_t kWidth = 90;  // the report's width

// `text` as lines of at most kWidth characters, broken at spaces: the first line after `first`,
// the others after `rest`.
std::string wrap(const std::string& text, const std::string& first, const std::string& rest) {
  std::string out, line = first;
  bool fresh = true;  // no word on `line` yet
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(' ', at);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(at, end - at);
    if (!fresh && line.size() + 1 + word.size() > kWidth) {
      out += line + "\n";
      line = rest;
      fresh = true;
    }
    line += (fresh ? "" : " ") + word;
    fresh = false;
    at = end + 1;
  }
  return out + line + "\n";
}

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
  if (!r.step_context || r.step_context->attention_ms() <= 0) {
    t.why = would_run ? "the step context of this run timed no attention"
                      : "no step context in this run: --step-context none or an older file";
    return t;
  }
  const StepContextInfo& c = *r.step_context;
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

std::string attention_matmuls_block(const RunResult& r) {
  if (!r.plan.model_mode || !r.plan.config) return {};
  const AttentionMatmuls a = attention_matmuls(*r.plan.config);
  const AttentionPassTimes t = attention_pass_times(r);
  const std::string rule(kWidth, '-');
  std::string out = "Attention's own matmuls (QK^T and PV), per layer and GPU:\n";
  out += fmt::format("  {}\n", describe(a.shape));
  out += wrap(kNotGemmRows, "  ", "  ");
  out += rule + "\n";
  out += fmt::format("{:<7}{:<14}{:<28}{:>16}{:>14}\n", "Pass", "Matmul", "Shape (products x MxKxN)",
                     a.shape.causal ? "GFLOP (causal)" : "GFLOP", "MB unfused");
  for (const AttentionMatmul& m : a.rows)
    out += fmt::format("{:<7}{:<14}{:<28}{:>16.1f}{:>14.1f}\n", pass_label(m.pass), m.name, m.shape(),
                       m.flops(a.shape.causal) / 1e9, m.unfused_bytes() / 1e6);
  out += rule + "\n";
  out += fmt::format("Forward, one fused kernel: {:.1f} GFLOP, at least {:.1f} MB moved\n", a.flops(Pass::Fprop) / 1e9,
                     a.fused_bytes(Pass::Fprop) / 1e6);
  out += wrap(pass_time_text(t, t.forward_ms, executed_flops(a, Pass::Fprop)), "  ", "    ");
  out += fmt::format("Backward, one fused kernel: {:.1f} GFLOP + {:.1f} recomputing S, at least {:.1f} MB moved\n",
                     a.flops(Pass::Dgrad) / 1e9, a.recomputed_flops() / 1e9, a.fused_bytes(Pass::Dgrad) / 1e6);
  out += wrap(pass_time_text(t, t.backward_ms, executed_flops(a, Pass::Dgrad)), "  ", "    ");
  const PlanFlops f = plan_flops(r.plan);
  const double linear = f.full_model(r.plan.layers());
  out += fmt::format("Per layer {:.2f}T{}\n", a.flops_per_layer(a.shape.causal) / 1e12,
                     a.shape.causal ? fmt::format(" with the causal mask (half the s x s scores; {:.2f}T without)",
                                                  a.flops_per_layer(false) / 1e12)
                                    : std::string());
  out += fmt::format("  {} layers: {:.2f}T per step, {:.0f}% on top of the linear layers' {:.2f}T\n", a.layers,
                     a.flops_per_step() / 1e12, linear > 0 ? 100 * a.flops_per_step() / linear : 0.0, linear / 1e12);
  out += wrap("MB unfused: BF16 operands read and output written by a standalone batched GEMM (S and P in full); "
              "the fused kernels keep S and P on chip. Pass Dgrad: gradients of activations (attention has no "
              "weights, no Wgrad).",
              "  ", "  ");
  return out;
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
