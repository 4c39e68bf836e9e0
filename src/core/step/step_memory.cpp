#include "core/step/step_memory.hpp"

#include <algorithm>

#include "core/model/layout_rules.hpp"

namespace gs {

StateBytes state_bytes_per_param(ParamStorage s) {
  switch (s) {
    case ParamStorage::Bf16MainFp32: return {2, 4, 4, 8};  // Megatron-LM: 18 bytes per parameter
    case ParamStorage::Bf16: return {2, 2, 0, 4};          // BF16 params, grads, Adam m and v
    case ParamStorage::Fp32: return {4, 4, 0, 8};          // FP32 params (autocast), grads, m and v
  }
  return {0, 0, 0, 0};
}

double fp8_element_bytes(Precision p) {
  switch (p) {
    case Precision::BF16: return 2;
    case Precision::FP8Current:
    case Precision::FP8Delayed: return 1;
    case Precision::FP8Block: return 1 + 4.0 / 128;
    case Precision::MXFP8: return 1 + 1.0 / 32;
    case Precision::NVFP4: return 0.5 + 1.0 / 16;
  }
  return 2;
}

double fp8_weight_copy_bytes(Precision p, StepContextKind framework) {
  if (p == Precision::BF16) return 0;
  const StepContextKind fw = framework == StepContextKind::None ? StepContextKind::TransformerEngine : framework;
  return (fw == StepContextKind::TransformerEngine ? 2 : 1) * fp8_element_bytes(p);
}

MemoryInputs memory_inputs(const Plan& plan, const StepPlan& sp, const RecipeOptions& recipe) {
  const ModelConfig& c = *plan.config;
  MemoryInputs in;
  in.params = sp.params;
  in.storage = sp.setup.options.storage;
  in.recompute = sp.setup.options.recompute;
  in.tokens = static_cast<double>(c.tokens());
  in.moe_layers = plan.moe_layers();
  in.dense_layers = plan.layers() - in.moe_layers;
  // FP8 weight copies: Transformer Engine keeps the rowwise and the transposed copy of every FP8
  // linear weight; a PyTorch FP8 linear saves the transposed copy it cast in the forward.
  if (sp.setup.precision != Precision::BF16) {
    in.fp8_copy_params = sp.params.linear - sp.params.router - (recipe.lm_head_bf16 ? sp.params.head : 0);
    in.fp8_copy_bytes = fp8_weight_copy_bytes(sp.setup.precision, sp.setup.framework);
  }
  ActivationSetup a;
  a.framework = sp.setup.framework;
  a.precision = sp.setup.precision;
  a.loss_fused = sp.setup.loss_fused;
  a.lm_head_bf16 = recipe.lm_head_bf16;
  for (const Gemm& g : plan.gemms)  // the plan's routed rows (its router's top-k, per rank)
    if (g.op == Op::ExpertUp && g.pass == Pass::Fprop) a.routed_per_token = static_cast<double>(g.m) / in.tokens;
  set_activations(in, c, a);
  return in;
}

void set_activations(MemoryInputs& in, const ModelConfig& c, const ActivationSetup& s) {
  const StepContextKind fw = s.framework == StepContextKind::None ? StepContextKind::TransformerEngine : s.framework;
  const bool eager = fw == StepContextKind::Eager;
  const bool fp8 = s.precision != Precision::BF16;
  const double e = fp8 ? fp8_element_bytes(s.precision) : 2;  // a linear input saved for Wgrad
  const int64_t tp = std::max<int64_t>(c.tensor_parallel, 1);
  const double sp = static_cast<double>(std::max<int64_t>(s.sequence_parallel, 1));
  const int64_t etp = s.expert_tp > 0 ? s.expert_tp : tp;
  const double h = static_cast<double>(c.hidden_size);
  const AttentionShape a = framework_attention_shape(attention_shape(c), fw);  // as the step runs it, per rank
  const double q = static_cast<double>(a.heads_q * a.d_qk), k = static_cast<double>(a.heads_kv * a.d_qk);
  const double v = static_cast<double>(a.heads_kv * a.d_v), o = static_cast<double>(a.heads_q * a.d_v);
  const double heads = static_cast<double>(a.heads_q);
  // Sequence-wide tensors (split by sequence parallelism): the norm's input (BF16) and statistics
  // (eager: its FP32 copy too), a dropout mask.
  const double norm = (2 * h + 4 + (eager ? 4 * h : 0)) / sp;
  const double mask = s.dropout ? h / sp : 0;
  // Attention: the norm, QKV's input, Q, K, V and the output (per rank's heads), FP8 recipes the
  // output projection's FP8 input beside it, flash attention's softmax statistics.
  LayerActivations att;
  att.attention = norm + e * h / sp + 2 * (q + k + v) + 2 * o + (fp8 ? e * o : 0) + 4 * heads + mask;
  if (c.mla.enabled()) {  // the latents: the down projections are not split, their outputs per token whole
    const double ql = static_cast<double>(c.mla.q_lora_rank), kvl = static_cast<double>(c.mla.kv_lora_rank);
    if (ql > 0) att.attention += 2 * ql + 4 + e * ql;  // the q latent's norm input and q up's input
    att.attention += 2 * kvl + 4 + e * kvl + 2 * static_cast<double>(c.mla.qk_rope_head_dim);
  }
  const double gate = c.gated_mlp ? 2 : 1;
  // One MLP over `rows` per token, width f on this rank; its input split by `input_split`.
  auto mlp = [&](double rows, double f, double input_split) {
    if (f <= 0 || rows <= 0) return 0.0;
    return rows * (e * h / input_split + 2 * gate * f + e * f + (eager && c.gated_mlp ? 2 * f : 0));
  };
  in.dense = att;
  in.dense.mlp = norm + mlp(1, static_cast<double>(c.intermediate_size / tp), sp) + mask;
  in.moe = {};
  if (c.moe.enabled()) {
    const double routed =
        s.routed_per_token >= 0 ? s.routed_per_token : static_cast<double>(c.moe.top_k * etp) / static_cast<double>(tp);
    in.moe = att;
    in.moe.mlp = norm + (2 * h + 4 * static_cast<double>(c.moe.num_experts)) / sp +  // router input, its FP32 probabilities
                 mlp(routed, static_cast<double>(expert_ffn(c) / etp), 1) + routed * 2 * h +  // experts; outputs for the combine
                 mlp(1, static_cast<double>(shared_ffn_total(c) / tp), sp) + mask;
  }
  in.layer_input = 2 * h / sp;
  in.selective_saving = 4 * heads;  // flash attention's internals: its softmax statistics
  in.head_per_token = 0;
  in.ids_per_token = 0;
  if (c.vocab_size > 0) {
    const double vocab = static_cast<double>(vocab_per_rank(c));
    const double logits = s.loss_fused ? 2 : fw == StepContextKind::TransformerEngine ? 2 + 4 : 2 + 4 + 4;
    in.head_per_token = (2 * h + 4 + (s.lm_head_bf16 ? 2 : e) * h) / sp + logits * vocab;
    in.ids_per_token = 8;
  }
}

double activation_bytes(const MemoryInputs& in) {
  const double T = in.tokens / static_cast<double>(std::max<int64_t>(in.layout.context_parallel, 1));
  const double nd = static_cast<double>(in.dense_layers), nm = static_cast<double>(in.moe_layers);
  double saved = 0, largest = 0;
  if (in.dense_layers > 0) largest = std::max(largest, in.dense.total());
  if (in.moe_layers > 0) largest = std::max(largest, in.moe.total());
  switch (in.recompute) {
    case Recompute::None: saved = nd * in.dense.total() + nm * in.moe.total(); break;
    case Recompute::Selective:
      saved = nd * in.dense.total() + nm * in.moe.total() - (nd + nm) * in.selective_saving;
      break;
    case Recompute::Full: saved = (nd + nm) * in.layer_input; break;
  }
  const double ids = in.layout.embedding ? in.ids_per_token : 0;
  const double head = in.layout.head ? in.head_per_token : 0;
  // What the micro-batches in flight keep, plus the backward's working set: one layer's activations
  // (recomputed or being turned into gradients) and the loss's tensors.
  return ((saved + ids) * std::max(in.layout.microbatches_in_flight, 1.0) + largest + head) * T;
}

MemoryBreakdown memory_per_gpu(const MemoryInputs& in, std::optional<double> device_bytes) {
  MemoryBreakdown m;
  const StateBytes s = state_bytes_per_param(in.storage);
  const double params = in.params.total();
  const double opt = static_cast<double>(std::max<int64_t>(in.layout.optimizer_shards, 1));
  m.weights = params * s.weights;
  m.grads = params * s.grads / static_cast<double>(std::max<int64_t>(in.layout.grad_shards, 1));
  m.main_params = params * s.main_params / opt;
  m.optimizer_states = params * s.states / opt;
  m.fp8_copies = in.fp8_copy_params * in.fp8_copy_bytes;
  m.activations = activation_bytes(in);
  m.reserve = kRuntimeReserveBytes;
  m.device_bytes = device_bytes;
  return m;
}

}  // namespace gs
