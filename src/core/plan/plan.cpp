#include "core/plan/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/io/input_file.hpp"
#include "core/util/error.hpp"
#include "core/util/text_util.hpp"

namespace gs {

const char* to_string(Pass p) {
  switch (p) {
    case Pass::Fprop: return "fprop";
    case Pass::Dgrad: return "dgrad";
    case Pass::Wgrad: return "wgrad";
    case Pass::Shape: return "shape";
  }
  return "?";
}
const char* pass_label(Pass p) {
  switch (p) {
    case Pass::Fprop: return "Fprop";
    case Pass::Dgrad: return "Dgrad";
    case Pass::Wgrad: return "Wgrad";
    case Pass::Shape: return "Shape";
  }
  return "?";
}
int64_t Gemm::groups_with_rows() const {
  int64_t n = 0;
  for (int64_t s : group) n += s > 0;
  return n;
}

const char* to_string(Op o) {
  switch (o) {
    case Op::Qkv: return "qkv";
    case Op::AttnOut: return "attn_out";
    case Op::MlpUp: return "mlp_up";
    case Op::MlpDown: return "mlp_down";
    case Op::LmHead: return "lm_head";
    case Op::Shape: return "shape";
    case Op::Router: return "router";
    case Op::ExpertUp: return "expert_up";
    case Op::ExpertDown: return "expert_down";
    case Op::SharedUp: return "shared_up";
    case Op::SharedDown: return "shared_down";
    case Op::QDown: return "q_down";
    case Op::QUp: return "q_up";
    case Op::KvDown: return "kv_down";
    case Op::KvUp: return "kv_up";
    case Op::QProj: return "q_proj";
  }
  return "?";
}
const char* op_label(Op o) {
  switch (o) {
    case Op::Qkv: return "QKV Proj";
    case Op::AttnOut: return "Attn Out";
    case Op::MlpUp: return "MLP Up";
    case Op::MlpDown: return "MLP Down";
    case Op::LmHead: return "LM Head";
    case Op::Shape: return "Shape";
    case Op::Router: return "Router";
    case Op::ExpertUp: return "Expert Up";
    case Op::ExpertDown: return "Expert Down";
    case Op::SharedUp: return "Shared Up";
    case Op::SharedDown: return "Shared Down";
    case Op::QDown: return "Q Down";
    case Op::QUp: return "Q Up";
    case Op::KvDown: return "KV Down";
    case Op::KvUp: return "KV Up";
    case Op::QProj: return "Q Proj";
  }
  return "?";
}
const char* to_string(Role r) {
  switch (r) {
    case Role::Activation: return "activation";
    case Role::Weight: return "weight";
    case Role::Grad: return "grad";
  }
  return "?";
}
const char* to_string(Scope s) {
  switch (s) {
    case Scope::Layer: return "layer";
    case Scope::Model: return "model";
    case Scope::Shape: return "shape";
    case Scope::DenseLayer: return "dense_layer";
    case Scope::MoeLayer: return "moe_layer";
  }
  return "?";
}

template <class E, size_t N>
static E from_string(const std::string& s, const E (&all)[N], const char* what) {
  for (E e : all)
    if (s == to_string(e)) return e;
  throw UsageError(fmt::format("unknown {} '{}'", what, clip_text(s, 80)));
}
Pass pass_from_string(const std::string& s) {
  static const Pass all[] = {Pass::Fprop, Pass::Dgrad, Pass::Wgrad, Pass::Shape};
  return from_string(s, all, "pass");
}
Op op_from_string(const std::string& s) {
  static const Op all[] = {Op::Qkv,      Op::AttnOut,    Op::MlpUp,    Op::MlpDown,    Op::LmHead,
                           Op::Shape,    Op::Router,     Op::ExpertUp, Op::ExpertDown, Op::SharedUp,
                           Op::SharedDown, Op::QDown,    Op::QUp,      Op::KvDown,     Op::KvUp,
                           Op::QProj};
  return from_string(s, all, "op");
}
Role role_from_string(const std::string& s) {
  static const Role all[] = {Role::Activation, Role::Weight, Role::Grad};
  return from_string(s, all, "operand role");
}
const char* to_string(GroupDim d) {
  switch (d) {
    case GroupDim::None: return "none";
    case GroupDim::M: return "m";
    case GroupDim::K: return "k";
  }
  return "?";
}
GroupDim group_dim_from_string(const std::string& s) {
  static const GroupDim all[] = {GroupDim::None, GroupDim::M, GroupDim::K};
  return from_string(s, all, "group dimension");
}
Scope scope_from_string(const std::string& s) {
  static const Scope all[] = {Scope::Layer, Scope::Model, Scope::Shape, Scope::DenseLayer, Scope::MoeLayer};
  return from_string(s, all, "scope");
}

std::string Gemm::shape() const { return fmt::format("{}x{}x{}", m, k, n); }
std::string Gemm::label() const { return op == Op::Shape ? shape() : op_label(op); }

Gemm linear_gemm(Pass pass, Op op, Scope scope, int64_t tokens, int64_t in, int64_t out) {
  switch (pass) {
    // X [T,in] is in-contiguous (K-major); W [out,in] is K-major too.
    case Pass::Fprop: return {pass, op, scope, tokens, in, out, {Role::Activation, true}, {Role::Weight, true}};
    // dY [T,out] is out-contiguous (K-major); W [out,in] is in-contiguous, i.e. N-major here.
    case Pass::Dgrad: return {pass, op, scope, tokens, out, in, {Role::Grad, true}, {Role::Weight, false}};
    // dY^T and X: both stored token-major, so neither is contiguous along the contraction (T).
    case Pass::Wgrad: return {pass, op, scope, out, tokens, in, {Role::Grad, false}, {Role::Activation, false}};
    case Pass::Shape: break;
  }
  throw std::logic_error("linear_gemm: a linear layer has Fprop, Dgrad and Wgrad only");
}

Gemm grouped_linear_gemm(Pass pass, Op op, Scope scope, const std::vector<int64_t>& rows, int64_t in, int64_t out) {
  int64_t total = 0;
  for (int64_t r : rows) total += r;
  Gemm g = linear_gemm(pass, op, scope, total, in, out);
  g.group_dim = pass == Pass::Wgrad ? GroupDim::K : GroupDim::M;
  g.group = rows;
  return g;
}

LayerDims layer_dims(const ModelConfig& c) {
  const int64_t tp = c.tensor_parallel;
  const int64_t hd = c.head_dimension();
  const int64_t heads_rank = c.num_attention_heads / tp;
  // GQA under tensor parallelism (core/model/layout_rules.hpp): kv heads split between the ranks,
  // or replicated (one per rank) where the framework allows fewer kv heads than ranks.
  const int64_t kv_rank = kv_heads_per_rank(c);
  LayerDims d;
  d.hidden = c.hidden_size;
  d.qkv_out = (heads_rank + 2 * kv_rank) * hd;               // column parallel
  d.attn_in = heads_rank * hd;                               // row parallel
  d.mlp_up_out = (c.gated_mlp ? 2 : 1) * c.intermediate_size / tp;  // column parallel
  d.mlp_down_in = c.intermediate_size / tp;                  // row parallel
  d.vocab = vocab_per_rank(c);                               // vocab-parallel LM head (the largest share)
  return d;
}

namespace {

void add_linear(std::vector<Gemm>& g, Op op, Scope scope, int64_t tokens, int64_t in, int64_t out) {
  for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad}) g.push_back(linear_gemm(pass, op, scope, tokens, in, out));
}

// A grouped linear: one weight per expert, `rows` tokens per expert (the busiest rank's experts).
// Fprop (sum rows, in, out) and Dgrad (sum rows, out, in) grouped along M; Wgrad (out, sum rows, in)
// grouped along K, one weight gradient per expert.
void add_grouped_linear(std::vector<Gemm>& g, Op op, const std::vector<int64_t>& rows, int64_t in, int64_t out) {
  for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad})
    g.push_back(grouped_linear_gemm(pass, op, Scope::MoeLayer, rows, in, out));
}

}  // namespace

Plan build_model_plan(const ModelConfig& config) {
  validate(config);
  // The framework's tensor-parallel rules: a refusal, or notes for the header.
  ModelConfig c = config;
  for (std::string& n : check_tensor_parallel(c)) c.notes.push_back(std::move(n));
  const LayerDims d = layer_dims(c);
  const int64_t T = c.tokens();
  const int64_t tp = c.tensor_parallel;
  std::vector<Gemm> all;
  if (c.mla.enabled()) {
    // Multi-head Latent Attention as training runs it (no weight absorption). The down
    // projections are replicated on every tensor-parallel rank (Megatron); q up, kv up split the
    // heads (column parallel) and the output projection their input (row parallel).
    const MlaConfig& a = c.mla;
    const int64_t heads = c.num_attention_heads / tp;
    if (a.q_lora_rank > 0) {
      add_linear(all, Op::QDown, Scope::Layer, T, d.hidden, a.q_lora_rank);
      add_linear(all, Op::QUp, Scope::Layer, T, a.q_lora_rank, heads * (a.qk_nope_head_dim + a.qk_rope_head_dim));
    } else {
      add_linear(all, Op::QProj, Scope::Layer, T, d.hidden, heads * (a.qk_nope_head_dim + a.qk_rope_head_dim));
    }
    add_linear(all, Op::KvDown, Scope::Layer, T, d.hidden, a.kv_lora_rank + a.qk_rope_head_dim);
    add_linear(all, Op::KvUp, Scope::Layer, T, a.kv_lora_rank, heads * (a.qk_nope_head_dim + a.v_head_dim));
    add_linear(all, Op::AttnOut, Scope::Layer, T, heads * a.v_head_dim, d.hidden);
  } else {
    add_linear(all, Op::Qkv, Scope::Layer, T, d.hidden, d.qkv_out);
    add_linear(all, Op::AttnOut, Scope::Layer, T, d.attn_in, d.hidden);
  }
  Plan p;
  const int64_t moe_layers = moe_layer_count(c);
  const bool any_dense = moe_layers < c.num_hidden_layers;
  if (any_dense) {
    const Scope s = moe_layers > 0 ? Scope::DenseLayer : Scope::Layer;
    add_linear(all, Op::MlpUp, s, T, d.hidden, d.mlp_up_out);
    add_linear(all, Op::MlpDown, s, T, d.mlp_down_in, d.hidden);
  }
  if (moe_layers > 0) {
    const MoeConfig& m = c.moe;
    const Routing r = route(parse_routing(m.routing), m.num_experts, m.top_k, T, m.expert_parallel, m.routing_seed,
                            m.capacity_factor);
    const int64_t gate = c.gated_mlp ? 2 : 1;
    // The router is replicated on every rank and sees every token of this rank.
    add_linear(all, Op::Router, Scope::MoeLayer, T, d.hidden, m.num_experts);
    // Expert FFNs are split like the dense MLP (Megatron's expert_tensor_parallel_size defaults
    // to the tensor-parallel size); each rank runs the busiest EP rank's local experts.
    const std::vector<int64_t> rows = r.busiest_counts();
    add_grouped_linear(all, Op::ExpertUp, rows, d.hidden, gate * expert_ffn(c) / tp);
    add_grouped_linear(all, Op::ExpertDown, rows, expert_ffn(c) / tp, d.hidden);
    if (m.shared_experts > 0) {
      add_linear(all, Op::SharedUp, Scope::MoeLayer, T, d.hidden, gate * shared_ffn_total(c) / tp);
      add_linear(all, Op::SharedDown, Scope::MoeLayer, T, shared_ffn_total(c) / tp, d.hidden);
    }
    p.routing = r;
  }
  if (d.vocab > 0) add_linear(all, Op::LmHead, Scope::Model, T, d.hidden, d.vocab);
  // Order as the reports print them: all Fprop, then Dgrad, then Wgrad.
  p.model_mode = true;
  p.config = c;
  for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad})
    for (const Gemm& x : all)
      if (x.pass == pass) p.gemms.push_back(x);
  return p;
}

namespace {

int64_t parse_dim(const std::string& tok, const std::string& whole_item, int index, const std::string& flag) {
  constexpr int64_t kMaxDim = int64_t{1} << 24;
  const std::string item = clip_text(whole_item, 80);
  if (tok.empty())
    throw UsageError(fmt::format("{} item {} '{}': empty dimension", flag, index, item));
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  if (ec == std::errc::result_out_of_range)
    throw UsageError(fmt::format("{} item {} '{}': '{}' is too large", flag, index, item, clip_text(tok, 40)));
  if (ec != std::errc() || ptr != tok.data() + tok.size())
    throw UsageError(fmt::format("{} item {} '{}': '{}' is not an integer", flag, index, item, clip_text(tok, 40)));
  if (v <= 0)
    throw UsageError(fmt::format("{} item {} '{}': dimensions must be positive, got {}", flag, index, item, v));
  if (v > kMaxDim)
    throw UsageError(fmt::format("{} item {} '{}': {} exceeds the limit {}", flag, index, item, v, kMaxDim));
  return v;
}

Gemm shape_gemm(int64_t m, int64_t k, int64_t n) {
  // A standalone shape is timed as a forward GEMM: activation [m,k] times weight [n,k]^T.
  return {Pass::Shape, Op::Shape, Scope::Shape, m, k, n, {Role::Activation, true}, {Role::Weight, true}};
}

}  // namespace

Plan build_shapes_plan(const std::string& spec, const std::string& flag) {
  Plan p;
  if (trim(spec).empty()) throw UsageError(flag + " is empty");
  int index = 0;
  for (const std::string& item : split_list(spec)) {
    if (++index > kMaxShapes)
      throw UsageError(fmt::format("{} lists more than {} shapes (the limit of one run)", flag, kMaxShapes));
    if (item.empty()) throw UsageError(fmt::format("{} item {} is empty", flag, index));
    std::string lower = item;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    const std::vector<std::string> parts = split_list(lower, 'x');
    if (parts.size() == 1) {
      int64_t v = parse_dim(parts[0], item, index, flag);
      p.gemms.push_back(shape_gemm(v, v, v));
    } else if (parts.size() == 3) {
      const int64_t m = parse_dim(parts[0], item, index, flag);  // in order: the first bad one is reported
      const int64_t k = parse_dim(parts[1], item, index, flag);
      const int64_t n = parse_dim(parts[2], item, index, flag);
      p.gemms.push_back(shape_gemm(m, k, n));
    } else {
      throw UsageError(fmt::format("{} item {} '{}': expected MxKxN or a single size N", flag, index, clip_text(item, 80)));
    }
  }
  return p;
}

Plan build_shapes_plan(const std::vector<int64_t>& sizes) {
  Plan p;
  for (int64_t v : sizes) p.gemms.push_back(shape_gemm(v, v, v));
  return p;
}

PlanFlops plan_flops(const Plan& p) {
  PlanFlops f;
  f.moe_layers = p.moe_layers();
  for (const Gemm& g : p.gemms) {
    if (g.scope == Scope::Model) { f.model_once += g.flops(); continue; }
    const bool dense = g.scope == Scope::Layer || g.scope == Scope::DenseLayer;
    const bool moe = g.scope == Scope::Layer || g.scope == Scope::MoeLayer;
    if (dense) (g.pass == Pass::Fprop ? f.fprop : g.pass == Pass::Dgrad ? f.dgrad : f.wgrad) += g.flops();
    if (moe && f.moe_layers > 0)
      (g.pass == Pass::Fprop ? f.moe_fprop : g.pass == Pass::Dgrad ? f.moe_dgrad : f.moe_wgrad) += g.flops();
  }
  return f;
}

}  // namespace gs
