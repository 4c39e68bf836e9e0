// The GEMM plan: every GEMM one training step runs, each knowing its pass, its op, its shape and
// which operand is an activation, a weight or an output gradient.
//
// Shapes follow the seed tool: MxKxN = C[m,n] = L[m,k] . R[k,n], m = tokens, k = input features,
// n = output features for Fprop; Dgrad (M,N,K); Wgrad (K,M,N).
// In memory the operands are laid out as a training framework holds them (activations and
// gradients token-major [tokens, features], weights [out, in]). `k_major` says whether an operand
// is stored with the contraction dimension contiguous: cuBLASLt's FP8 GEMMs on Hopper accept only
// that ("TN"), so an operand with k_major=false needs a transposed copy when quantized.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model/model_config.hpp"
#include "core/plan/routing.hpp"

namespace gs {

enum class Pass { Fprop, Dgrad, Wgrad, Shape };
enum class Op {
  Qkv, AttnOut, MlpUp, MlpDown, LmHead, Shape,
  // Mixture-of-Experts: the router (hidden -> experts, BF16 in every recipe), the routed experts'
  // up and down projections (grouped GEMMs), the shared experts' up and down projections.
  Router, ExpertUp, ExpertDown, SharedUp, SharedDown,
  // Multi-head Latent Attention (DeepSeek-V2/V3): q down, q up, kv down (incl. the rope part),
  // kv up; the output projection is AttnOut.
  QDown, QUp, KvDown, KvUp,
  QProj,  // MLA without a q low-rank (q_lora_rank null): hidden -> heads x (qk_nope + qk_rope)
};
enum class Role { Activation, Weight, Grad };
// Layer: in every layer; DenseLayer / MoeLayer: only in the dense / the MoE layers of a model with
// experts (the dense MLP, the router and experts); Model: once per step; Shape: standalone.
enum class Scope { Layer, Model, Shape, DenseLayer, MoeLayer };

const char* to_string(Pass p);   // "fprop" ...
const char* to_string(Op o);     // "qkv" ...
const char* to_string(Role r);   // "activation" ...
const char* to_string(Scope s);  // "layer" ...
const char* op_label(Op o);      // "QKV Proj", "Attn Out", "MLP Up", "MLP Down", "LM Head"
const char* pass_label(Pass p);  // "Fprop", "Dgrad", "Wgrad", "Shape"
Pass pass_from_string(const std::string& s);  // throws UsageError
Op op_from_string(const std::string& s);
Role role_from_string(const std::string& s);
Scope scope_from_string(const std::string& s);

struct Operand {
  Role role;
  bool k_major;  // stored with the contraction dimension contiguous
};

// A grouped GEMM runs one GEMM per expert with shared sizes: Fprop and Dgrad are grouped along M
// (each expert's rows), Wgrad along the contraction K (each expert's tokens; one weight gradient
// per expert). `group` holds the real (unpadded) per-expert sizes along that dimension; they sum to
// m (GroupDim::M) or k (GroupDim::K), so flops() counts real tokens: 2 * sum(group) * other dims.
enum class GroupDim { None, M, K };
const char* to_string(GroupDim d);  // "none", "m", "k"
GroupDim group_dim_from_string(const std::string& s);

struct Gemm {
  Pass pass;
  Op op;
  Scope scope;
  int64_t m, k, n;
  Operand a;  // left, [m,k]
  Operand b;  // right, [k,n]
  GroupDim group_dim = GroupDim::None;
  std::vector<int64_t> group;  // per-expert sizes along group_dim (empty when not grouped)
  bool grouped() const { return group_dim != GroupDim::None; }
  int64_t groups_with_rows() const;  // experts with at least one row (0 when not grouped)
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n); }
  std::string shape() const;  // "15872x4096x12288"
  std::string label() const;  // op label, or the shape in shapes mode
};

// The three GEMMs of one linear layer Y[T, out] = X[T, in] . W[out, in]^T, in the orientation
// training runs them (PyTorch's autograd, Transformer Engine, Megatron):
//   Fprop  Y[T,out]    = X[T,in]    . W^T[in,out]   m = T,   k = in,  n = out
//   Dgrad  dX[T,in]    = dY[T,out]  . W[out,in]     m = T,   k = out, n = in
//   Wgrad  dW[out,in]  = dY^T[out,T] . X[T,in]      m = out, k = T,   n = in
// Wgrad is written in the weight's own layout ([out, in], the FP32 main gradient's), so its left
// operand is the gradient and its right one the activation, both token-major (not K-major).
// `pass` must be Fprop, Dgrad or Wgrad. This is the one definition: the plan, the modes' dual
// consumers and the tests build a linear's GEMMs through it.
Gemm linear_gemm(Pass pass, Op op, Scope scope, int64_t tokens, int64_t in, int64_t out);
// The same pass of a grouped linear (one weight per expert, rows[e] tokens for expert e): grouped
// along M (the tokens) in Fprop and Dgrad, along K (the tokens) in Wgrad.
Gemm grouped_linear_gemm(Pass pass, Op op, Scope scope, const std::vector<int64_t>& rows, int64_t in, int64_t out);

struct Plan {
  bool model_mode = false;
  std::optional<ModelConfig> config;  // set in model mode
  std::vector<Gemm> gemms;
  std::optional<Routing> routing;  // models with experts: the step's routing (the busiest EP rank's experts)
  int64_t layers() const { return config ? config->num_hidden_layers : 1; }
  int64_t moe_layers() const { return config ? moe_layer_count(*config) : 0; }
  int64_t dense_layers() const { return layers() - moe_layers(); }  // all layers of a dense model
  bool has_moe() const { return moe_layers() > 0; }
};

// The four projections (and the LM head when vocab_size > 0) of one tensor-parallel rank, each in
// Fprop, Dgrad and Wgrad. Validates the config and applies its framework's tensor-parallel rules
// (core/model/layout_rules.hpp: UsageError naming the rule, or notes in the plan's config). Models with experts (docs/moe.md):
// MoE layers get the router (BF16 in every recipe), the routed experts' up and down projections as
// grouped GEMMs over the busiest expert-parallel rank's experts (Fprop/Dgrad grouped along M,
// Wgrad along K) and the shared experts; dense layers their MLP. MLA replaces QKV with its
// q down/up (or a plain q projection) and kv down/up projections.
Plan build_model_plan(const ModelConfig& c);

// Shapes in one --shapes or --sweep-sizes list: each is a row of the report and a chart bar.
constexpr int kMaxShapes = 4096;

// --shapes "MxKxN,..." or square "1024,2048" (at most kMaxShapes items). Throws UsageError naming the bad item and why;
// `flag` is the option the messages name ("--sweep-sizes item 2 'abc': ...").
Plan build_shapes_plan(const std::string& spec, const std::string& flag = "--shapes");
Plan build_shapes_plan(const std::vector<int64_t>& square_sizes);

// Per-rank output features of QKV and MLP-up, input features of attention-out and MLP-down.
struct LayerDims {
  int64_t hidden, qkv_out, attn_in, mlp_up_out, mlp_down_in, vocab;
};
LayerDims layer_dims(const ModelConfig& c);

// FLOP totals of a model plan.
struct PlanFlops {
  double fprop = 0, dgrad = 0, wgrad = 0;  // per (dense) layer: GEMMs of every layer + the dense-only ones
  double model_once = 0;                   // LM head, all passes
  double moe_fprop = 0, moe_dgrad = 0, moe_wgrad = 0;  // per MoE layer: every layer's GEMMs + router and experts
  int64_t moe_layers = 0;                  // layers with experts (0: a dense model)
  double per_layer() const { return fprop + dgrad + wgrad; }
  double per_moe_layer() const { return moe_fprop + moe_dgrad + moe_wgrad; }
  // `layers` in all; moe_layers of them MoE layers, the rest dense: the step's FLOPs.
  double full_model(int64_t layers) const {
    return per_layer() * static_cast<double>(layers - moe_layers) + per_moe_layer() * static_cast<double>(moe_layers) +
           model_once;
  }
};
PlanFlops plan_flops(const Plan& p);

// Attention's own matmuls (Q K^T, P V), which the plan does not hold: core/plan/attention_matmuls.hpp.

}  // namespace gs
