#include "core/parallel/memory.hpp"

#include <algorithm>

#include "core/model/layout_rules.hpp"
#include "core/model/moe_config.hpp"
#include "core/parallel/layout_check.hpp"

namespace gs {

namespace {

double d(int64_t v) { return static_cast<double>(v); }

// The attention projections' widths: what Q, K and V hold per token (all heads).
struct AttnWidths {
  double q = 0, k = 0, v = 0;
  double o = 0;  // the attention output: the output projection's input
};
AttnWidths attn_widths(const ModelConfig& c) {
  AttnWidths w;
  if (c.mla.enabled()) {
    const MlaConfig& a = c.mla;
    w.q = w.k = d(c.num_attention_heads * (a.qk_nope_head_dim + a.qk_rope_head_dim));
    w.v = w.o = d(c.num_attention_heads * a.v_head_dim);
  } else {
    w.q = w.o = d(c.num_attention_heads * c.head_dimension());
    w.k = w.v = d(c.kv_heads() * c.head_dimension());
  }
  return w;
}

// The layers of stage s, over its model chunks (layout_check.hpp chunk_layers).
template <class F>
void for_stage_layers(const ModelConfig& c, const ParallelLayout& l, int64_t s, F f) {
  for (int64_t k = 0; k < l.vpp; ++k) {
    const ChunkLayers cl = chunk_layers(c, l, s, k);
    for (int64_t i = 0; i < cl.count; ++i) f(cl.first + i);
  }
}

}  // namespace

double ModelParams::total(const ModelConfig& c) const {
  const double moe = d(moe_layer_count(c)), dense = d(c.num_hidden_layers) - moe;
  return (attention + norms) * d(c.num_hidden_layers) + dense_mlp * dense + (experts + moe_other) * moe + embedding + lm_head;
}

ModelParams model_params(const ModelConfig& c) {
  ModelParams p;
  const double h = d(c.hidden_size);
  if (c.mla.enabled()) {
    const MlaConfig& a = c.mla;
    const double heads = d(c.num_attention_heads);
    const double qk = d(a.qk_nope_head_dim + a.qk_rope_head_dim);
    p.attention = (a.q_lora_rank > 0 ? h * d(a.q_lora_rank) + d(a.q_lora_rank) * heads * qk : h * heads * qk) +
                  h * d(a.kv_lora_rank + a.qk_rope_head_dim) + d(a.kv_lora_rank) * heads * d(a.qk_nope_head_dim + a.v_head_dim) +
                  heads * d(a.v_head_dim) * h;
  } else {
    const AttnWidths w = attn_widths(c);
    p.attention = h * (w.q + w.k + w.v) + w.o * h;
  }
  const double gate = c.gated_mlp ? 2 : 1;
  p.dense_mlp = h * d(c.intermediate_size) * (gate + 1);
  if (c.moe.enabled()) {
    p.experts = d(c.moe.num_experts) * h * d(expert_ffn(c)) * (gate + 1);
    p.moe_other = h * d(c.moe.num_experts) + h * d(shared_ffn_total(c)) * (gate + 1);
  }
  p.norms = 2 * h;
  if (c.vocab_size > 0) p.embedding = p.lm_head = d(padded_vocab(c)) * h;
  return p;
}

double usable_memory_bytes(double datasheet_bytes) {
  return datasheet_bytes / 1e9 * 1024.0 * 1024.0 * 1024.0 - kParallelReserveBytes;
}

ParamStorage rank_storage(const ParallelLayout& l, ParamStorage step_storage) {
  return is_fsdp(l.sharding) ? ParamStorage::Fp32 : step_storage;
}

LayerParams rank_layer_params(const ModelConfig& c, const ParallelLayout& l, int64_t layer) {
  const ModelParams full = model_params(c);
  const double tp = d(l.tp);
  const bool moe = is_moe_layer(c, layer);
  const double router = moe ? d(c.hidden_size) * d(c.moe.num_experts) : 0;
  LayerParams p;
  p.dense = (full.attention + (moe ? full.moe_other : full.dense_mlp)) / tp + full.norms;
  p.dense_fp8_linear = p.dense - full.norms - router / tp;  // the router and the norms in BF16
  p.experts = moe ? full.experts / (d(l.ep) * d(l.expert_tp())) : 0;
  return p;
}

double rank_vocab_params(const ModelConfig& c, const ParallelLayout& l) {
  return c.vocab_size > 0 ? d(padded_vocab(rank_config(c, l))) * d(c.hidden_size) / d(l.tp) : 0;
}

bool fp8_params_kept(Precision p, DpSharding sharding, bool fp8_param_gather) {
  return fp8_param_gather && p != Precision::BF16 && p != Precision::NVFP4 && sharding != DpSharding::Ddp;
}

double param_gather_bytes(double params, double fp8_linear, bool fp8_params) {
  return 2 * params - (fp8_params ? fp8_linear : 0);
}

RankMemory rank_memory(const ModelConfig& c, const ParallelLayout& l, int64_t stage, const RankState& state) {
  const StateBytes sb = state_bytes_per_param(rank_storage(l, state.storage));
  const double g = rank_storage(l, state.storage) == ParamStorage::Bf16MainFp32 ? state.grad_bytes : sb.grads;
  const double w = sb.weights, o = sb.main_params + sb.states;
  RankMemory m;
  m.stage = stage;
  double dense = 0, experts = 0, dense_linear = 0;
  LayerParams biggest;
  int64_t moe_layers = 0, dense_layers = 0;
  for_stage_layers(c, l, stage, [&](int64_t i) {
    const LayerParams p = rank_layer_params(c, l, i);
    dense += p.dense;
    dense_linear += p.dense_fp8_linear;
    experts += p.experts;
    if (p.total() > biggest.total()) biggest = p;
    ++(is_moe_layer(c, i) ? moe_layers : dense_layers);
  });
  const double linear = dense_linear + experts;  // FP8 linears (router in BF16)
  const double vocab_params = rank_vocab_params(c, l);
  if (stage == 0) dense += vocab_params;
  if (stage == l.pp - 1) dense += vocab_params;
  m.params = dense + experts;
  m.expert_params = experts;
  const double dense_dp = d(l.dp * l.cp), edp = d(std::max<int64_t>(1, l.expert_dp()));
  const double shard = dense / dense_dp + experts / edp;
  // --fp8-param-gather: the FP8 linears' weights are FP8 (e bytes each) where the weights are not the
  // optimizer's main parameters (PyTorch FSDP's FP32 shards are: they stay), and gathered in FP8.
  const bool kept = fp8_params_kept(state.precision, l.sharding, state.fp8_param_gather);
  const double e = kept ? fp8_element_bytes(state.precision) : 2;
  const double fp8_weight_saving = kept && sb.main_params > 0 ? w - e : 0;  // per FP8-linear weight
  const double gathered_saving = 2 - e;  // per FP8-linear parameter of a gathered unit (0 without)
  const double linear_shard = dense_linear / dense_dp + experts / edp;
  // Bytes per parameter from the one-GPU step's storage rule (Megatron: 2 + 4 + 12 = 18; FSDP's
  // FP32 shards: 4 + 4 + 8), each part sharded as the layout says.
  double fp8_linear = linear;  // parameters with FP8 copies alive at once
  switch (l.sharding) {
    case DpSharding::Ddp:
      m.weights_bytes = w * m.params, m.grads_bytes = g * m.params, m.optimizer_bytes = o * m.params;
      break;
    case DpSharding::Zero1:
      m.weights_bytes = w * m.params - fp8_weight_saving * linear, m.grads_bytes = g * m.params, m.optimizer_bytes = o * shard;
      break;
    case DpSharding::Zero2:
      m.weights_bytes = w * m.params - fp8_weight_saving * linear, m.grads_bytes = g * shard, m.optimizer_bytes = o * shard;
      break;
    case DpSharding::Zero3:
    case DpSharding::FsdpFull:
      m.weights_bytes = w * shard - fp8_weight_saving * linear_shard, m.grads_bytes = g * shard, m.optimizer_bytes = o * shard;
      // BF16 (FP8 linears in FP8 under --fp8-param-gather): the layer computing and the one prefetched
      m.gathered_bytes = 2 * (2 * biggest.total() - gathered_saving * biggest.fp8_linear());
      fp8_linear = std::min(linear, 2 * biggest.total());  // copies of the gathered units only
      break;
    case DpSharding::FsdpGradOp:
      m.weights_bytes = w * shard - fp8_weight_saving * linear_shard, m.grads_bytes = g * shard, m.optimizer_bytes = o * shard;
      m.gathered_bytes = 2 * m.params - gathered_saving * linear;  // kept gathered from forward to backward
      break;
  }
  // FP8 copies per FP8 linear: Transformer Engine's rowwise and transposed ones; with FP8 parameters
  // the rowwise copy is the parameter itself and only the transposed one is made (TE's linear
  // caches the FP8 parameter's transpose for Dgrad across micro-batches).
  const double copy_bytes = std::max(0.0, fp8_weight_copy_bytes(state.precision, state.framework) - (kept ? e : 0));
  m.fp8_copy_bytes = fp8_linear * copy_bytes;
  // Micro-batches in flight on this stage: 1F1B p - s (at most m); interleaved the warm-up's
  // virtual micro-batches plus one, in chunks of L / (p v) layers (Megatron's penalty).
  const int64_t mbs = std::max<int64_t>(1, l.micro_batches());
  double inflight = 1;
  if (l.pp > 1 && l.vpp == 1) inflight = d(std::min(l.pp - stage, mbs));
  if (l.pp > 1 && l.vpp > 1)
    inflight = d(std::min(mbs * l.vpp, 2 * (l.pp - stage - 1) + (l.vpp - 1) * l.pp + 1)) / d(l.vpp);
  m.inflight_microbatches = inflight;
  // The activations: the one-GPU step's accounting of this rank's layers, with the layout's splits.
  MemoryInputs act;
  act.recompute = l.recompute;
  act.tokens = d(l.micro_batch) * d(c.sequence_length);
  act.dense_layers = dense_layers;
  act.moe_layers = moe_layers;
  act.layout.context_parallel = l.cp;
  act.layout.microbatches_in_flight = inflight;
  act.layout.embedding = stage == 0;
  act.layout.head = stage == l.pp - 1;
  ActivationSetup as;
  as.framework = state.framework;
  as.precision = state.precision;
  as.loss_fused = state.loss_fused;
  as.sequence_parallel = l.tp > 1 && l.sequence_parallel ? l.tp : 1;
  as.expert_tp = l.expert_tp();
  set_activations(act, rank_config(c, l), as);
  m.activation_bytes = activation_bytes(act);
  return m;
}

}  // namespace gs
