#include "core/plan/step_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/model/layout_rules.hpp"
#include "core/util/error.hpp"
#include "core/io/input_file.hpp"
#include "core/util/suggest.hpp"

namespace gs {

const char* to_string(StepContextKind k) {
  switch (k) {
    case StepContextKind::None: return "none";
    case StepContextKind::TransformerEngine: return "te";
    case StepContextKind::Eager: return "eager";
    case StepContextKind::Compiled: return "compile";
  }
  return "none";
}

const char* step_context_framework(StepContextKind k) {
  switch (k) {
    case StepContextKind::None: return "none (GEMMs back to back)";
    case StepContextKind::TransformerEngine: return "Transformer Engine / Megatron-LM fused modules";
    case StepContextKind::Eager: return "eager PyTorch (Hugging Face style)";
    case StepContextKind::Compiled: return "torch.compile (Inductor)";
  }
  return "";
}

LayoutFramework layout_framework(StepContextKind k) {
  return k == StepContextKind::Eager || k == StepContextKind::Compiled ? LayoutFramework::PyTorch
                                                                       : LayoutFramework::Megatron;
}

StepContextKind step_context_from_string(const std::string& s) {
  if (const std::optional<StepContextKind> k = step_context_names().find(s)) return *k;  // any case, old names too
  throw UsageError(fmt::format("--step-context must be te, eager, compile or none, got '{}'{}", clip_text(s, 80),
                               did_you_mean(s, {"te", "eager", "compile", "none"})));
}

std::string describe(const AttentionShape& a) {
  return fmt::format("batch {} x seq {}, heads {}/{}, head dims {}/{}{}", a.batch, a.seq_q, a.heads_q, a.heads_kv, a.d_qk,
                     a.d_v, a.causal ? ", causal" : "");
}

AttentionShape attention_shape(const ModelConfig& c) {
  AttentionShape a;
  const int64_t tp = std::max<int64_t>(c.tensor_parallel, 1);
  a.batch = c.micro_batch_size;
  a.seq_q = a.seq_kv = c.sequence_length;
  a.heads_q = c.num_attention_heads / tp;
  a.causal = true;
  if (c.mla.enabled()) {  // MLA: every head has its own key and value (no sharing)
    a.heads_kv = a.heads_q;
    a.d_qk = c.mla.qk_nope_head_dim + c.mla.qk_rope_head_dim;
    a.d_v = c.mla.v_head_dim;
  } else {
    a.heads_kv = kv_heads_per_rank(c);  // core/model/layout_rules.hpp
    a.d_qk = a.d_v = c.head_dimension();
  }
  return a;
}

namespace {

// Elements (not bytes) moved by one layer's memory-bound kernels, forward + backward, for a dense
// or MoE layer. T tokens; h hidden; q, kv: query and key/value widths per GPU; f: the MLP's
// intermediate width per GPU (0 for an MoE layer's dense part); gated: SwiGLU/GeGLU.
struct LayerShape {
  double T, h, q, kv, f;
  bool gated;
  double routed_tokens = 0, expert_f = 0, shared_f = 0;  // MoE: T x top_k rows, expert widths
};

// Forward and backward element traffic of one layer's memory-bound kernels.
struct Elements {
  double fwd = 0, bwd = 0;
  double total() const { return fwd + bwd; }
};

Elements other_elements(const LayerShape& s, StepContextKind k) {
  const double T = s.T, h = s.h, q = s.q, kv = s.kv;
  const bool repeat = kv < q && repeats_kv_heads(k);  // GQA/MQA: eager and compiled PyTorch repeat the key/value heads
  Elements e;
  // The activation over n rows of width f: forward and backward element traffic.
  auto act = [&](double n, double f) {
    if (f <= 0 || n <= 0) return;
    const double nf = n * f;
    switch (k) {
      case StepContextKind::Eager:  // silu(g) 2, g*u 3 | mul bwd 3+3, silu bwd 3, chunk bwd (cat) 4
        e.fwd += s.gated ? 5 * nf : 2 * nf;
        e.bwd += s.gated ? 13 * nf : 3 * nf;
        return;
      default:  // fused: read gate and up, write the product | read dM, gate, up, write both grads
        e.fwd += s.gated ? 3 * nf : 2 * nf;
        e.bwd += s.gated ? 5 * nf : 3 * nf;
        return;
    }
  };
  switch (k) {
    case StepContextKind::None: return e;
    case StepContextKind::Eager:
      // forward: two norms (read, write), two residual adds (read 2, write 1); backward: two
      // norm backwards (read x and dy, write dx, plus the weight-gradient partials), two
      // residual-gradient adds.
      e.fwd += (2 * 2 + 2 * 3) * T * h;
      e.bwd += (2 * 4 + 2 * 3) * T * h;
      if (repeat) {
        e.fwd += 2 * T * (kv + q);  // repeat k, v
        e.bwd += 2 * T * (q + kv);  // its backward (sum)
      }
      e.bwd += 2 * T * (q + 2 * kv);  // QKV gradient: concatenate dQ, dK, dV
      break;
    case StepContextKind::Compiled:
      // forward: norm 2, residual add fused into the next norm (read 2, write 2), last residual 3;
      // backward: norm backward with the residual-gradient add fused (read 3, write 1) twice.
      e.fwd += (2 + 4 + 3) * T * h;
      e.bwd += 2 * 4 * T * h;
      if (repeat) {
        e.fwd += 2 * T * (kv + q);
        e.bwd += 2 * T * (q + kv);
      }
      e.bwd += 2 * T * (q + 2 * kv);
      break;
    case StepContextKind::TransformerEngine:
      // forward: norms fused into the next linear's input (read, write), fused residual adds;
      // backward: norm backwards (read 2, write 1), residual-gradient adds. Attention reads the
      // packed QKV buffer with native GQA and writes the packed gradient: no repeat, no concat.
      e.fwd += (2 * 2 + 2 * 3) * T * h;
      e.bwd += (2 * 3 + 2 * 3) * T * h;
      break;
  }
  act(T, s.f);
  if (s.routed_tokens > 0) {
    // Router softmax/top-k is negligible beside the experts' activations; the token dispatch and
    // combine are data movement (move_elements).
    act(s.routed_tokens, s.expert_f);
    act(T, s.shared_f);
  }
  return e;
}

// Elements moved by an MoE layer's token dispatch and combine (permute, unpermute), forward and
// backward: rows gathered or scattered by index, read + write each, the combine weighting top-k
// rows into one. Every framework runs them; only how fused they are differs.
double move_elements(const LayerShape& s) { return s.routed_tokens > 0 ? 4 * 2 * s.routed_tokens * s.h : 0.0; }

}  // namespace

double average_layer_gflops(const Plan& plan) {
  const int64_t layers = plan.layers();
  if (layers <= 0) return 0;
  const PlanFlops f = plan_flops(plan);
  return (f.full_model(layers) - f.model_once) / static_cast<double>(layers) * 1e-9;
}

StepWorkModel step_work_model(const Plan& plan, StepContextKind kind) {
  StepWorkModel m;
  m.kind = kind;
  if (kind == StepContextKind::None && !(plan.model_mode && plan.config)) return m;
  if (!plan.model_mode || !plan.config)
    throw UsageError(fmt::format("--step-context {} needs a model plan: --shapes/--sweep GEMMs stand alone "
                                 "(use --step-context none)",
                                 to_string(kind)));
  const ModelConfig& c = *plan.config;
  const int64_t tp = std::max<int64_t>(c.tensor_parallel, 1);
  const LayerDims d = layer_dims(c);
  LayerShape s;
  s.T = static_cast<double>(c.tokens());
  s.h = static_cast<double>(d.hidden);
  const AttentionShape a = attention_shape(c);
  s.q = static_cast<double>(a.heads_q * a.d_qk);
  s.kv = static_cast<double>(a.heads_kv * a.d_qk);
  s.gated = c.gated_mlp;
  const double layers = static_cast<double>(plan.layers());
  const double moe = static_cast<double>(plan.moe_layers());
  LayerShape dense = s;
  dense.f = static_cast<double>(c.intermediate_size / tp);
  // `none` runs no modelled work; a --step-other-ms figure is split between the two stand-ins as
  // Transformer Engine's kernels would split it (split_step_other_ms).
  const StepContextKind bytes_kind = kind == StepContextKind::None ? StepContextKind::TransformerEngine : kind;
  const Elements de = other_elements(dense, bytes_kind);
  double fwd = de.fwd * (layers - moe), elements = de.total() * (layers - moe), moved = 0;
  if (moe > 0) {
    LayerShape ms = s;
    ms.f = 0;
    ms.routed_tokens = s.T * static_cast<double>(c.moe.top_k);
    const int64_t ef = c.moe.expert_intermediate_size ? c.moe.expert_intermediate_size : c.intermediate_size;
    ms.expert_f = static_cast<double>(ef / tp);
    const int64_t sf = c.moe.shared_expert_intermediate_size ? c.moe.shared_expert_intermediate_size : ef;
    ms.shared_f = static_cast<double>(c.moe.shared_experts * sf / tp);
    const Elements me = other_elements(ms, bytes_kind);
    fwd += me.fwd * moe;
    elements += me.total() * moe;
    moved = move_elements(ms) * moe;
  }
  m.other_bytes = 2.0 * elements / layers;  // BF16
  m.other_fwd_bytes = 2.0 * fwd / layers;
  m.move_bytes = 2.0 * moved / layers;
  // FP8 casts of every linear's operands: each tensor read twice (amax, then cast) and written
  // twice in one byte (rowwise and transposed copies): X and W of every Fprop, dY of every Dgrad.
  // A grouped (expert) GEMM's M holds every expert's rows, but each of the rank's experts has a
  // weight of its own, cast every step as Transformer Engine's grouped linear and a per-expert loop
  // both cast it: its weight elements count once per expert.
  double cast = 0, cast_fwd = 0;
  for (const Gemm& g : plan.gemms) {
    if (g.scope == Scope::Model || g.op == Op::Router) continue;  // the router is BF16 in every recipe
    const double weight = g.scope == Scope::Layer ? layers : g.scope == Scope::MoeLayer ? moe : layers - moe;
    double elems = 0;
    const double gm = static_cast<double>(g.m), gk = static_cast<double>(g.k), gn = static_cast<double>(g.n);
    const double weights = g.grouped() ? static_cast<double>(g.group.size()) : 1.0;
    if (g.pass == Pass::Fprop) elems = gm * gk + weights * gk * gn;
    if (g.pass == Pass::Dgrad) elems = gm * gk;
    cast += 6.0 * elems * weight;
    if (g.pass == Pass::Fprop) cast_fwd += 6.0 * elems * weight;
  }
  m.cast_bytes = cast / layers;
  m.cast_fwd_bytes = cast_fwd / layers;
  m.attention = framework_attention_shape(a, kind);
  m.layer_gflops = average_layer_gflops(plan);
  if (!(m.layer_gflops > 0) && kind != StepContextKind::None)
    throw UsageError("--step-context: the plan has no layer GEMMs to spread the work over");
  m.efficiency = kind == StepContextKind::Eager ? kEagerRate : kFusedRate;
  return m;
}

bool repeats_kv_heads(StepContextKind k) { return k == StepContextKind::Eager || k == StepContextKind::Compiled; }

AttentionShape framework_attention_shape(const AttentionShape& a, StepContextKind k) {
  AttentionShape out = a;
  if (repeats_kv_heads(k)) out.heads_kv = out.heads_q;  // the step's SDPA sees every head its own K and V
  return out;
}

StepOtherSplit modelled_memory_ms(const StepWorkModel& m, double other_bytes_per_ms, double move_bytes_per_ms) {
  StepOtherSplit out;
  if (other_bytes_per_ms > 0) out.other_ms = m.other_bytes / (other_bytes_per_ms * m.efficiency);
  if (move_bytes_per_ms > 0) out.move_ms = m.move_bytes / (move_bytes_per_ms * kMoveRate);
  return out;
}

double modelled_cast_ms(const StepWorkModel& m, double other_bytes_per_ms) {
  return other_bytes_per_ms > 0 ? m.cast_bytes / (other_bytes_per_ms * kCastRate) : 0.0;
}

StepOtherSplit split_step_other_ms(const StepWorkModel& m, double total_ms, double other_bytes_per_ms,
                                   double move_bytes_per_ms) {
  StepOtherSplit out{total_ms, 0.0};
  if (!(total_ms > 0) || !(m.move_bytes > 0) || !(move_bytes_per_ms > 0) || !(other_bytes_per_ms > 0)) return out;
  const StepOtherSplit t = modelled_memory_ms(m, other_bytes_per_ms, move_bytes_per_ms);
  out.move_ms = total_ms * t.move_ms / (t.other_ms + t.move_ms);
  out.other_ms = total_ms - out.move_ms;
  return out;
}

const EnumNames<StepContextKind>& step_context_names() {
  static const EnumNames<StepContextKind> n{{{StepContextKind::TransformerEngine, {"te", "transformer-engine"}},
                                            {StepContextKind::Eager, {"eager"}},
                                            {StepContextKind::Compiled, {"compile", "compiled"}},
                                            {StepContextKind::None, {"none"}}}};
  return n;
}

}  // namespace gs
