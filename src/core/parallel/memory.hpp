// Memory per rank under a parallel layout, with Megatron-LM's formulas
// (megatron/training/theoretical_memory_usage.py): parameters per stage (the embedding on the
// first stage, the LM head on the last), sharded as data parallelism shards the state (18 bytes per
// parameter without sharding; 6 + 12 / DP with the distributed optimizer; ...), and the
// activations of the stage's layers times the micro-batches in flight on the stage (1F1B: p - s;
// interleaved: Megatron's penalty 1 + (p - 1) / (p v)). PyTorch FSDP keeps FP32 sharded
// parameters and gathers BF16 copies per unit.
// Shared with the one-GPU step's memory (core/step/step_memory.hpp): the bytes per parameter of
// each storage, the FP8 weight copies' bytes, the runtime reserve, and the activations: one
// accounting (set_activations, activation_bytes; Korthikanti et al.'s per-layer counts adapted to
// flash attention) given this rank's config and the layout's sequence, context and expert-tensor
// splits, its recompute policy and micro-batches in flight.
#pragma once
#include <cstdint>
#include <string>

#include "core/model/model_config.hpp"
#include "core/step/parallel_layout.hpp"
#include "core/step/step_memory.hpp"

namespace gs {

// Parameters of the full model, per part (no sharding).
struct ModelParams {
  double attention = 0;    // per layer: the attention projections (QKV or MLA, output)
  double dense_mlp = 0;    // per dense layer
  double experts = 0;      // per MoE layer: all routed experts
  double moe_other = 0;    // per MoE layer: router and shared experts
  double norms = 0;        // per layer: the two norms' weights
  double embedding = 0;    // token embedding (padded vocabulary)
  double lm_head = 0;      // output layer (untied)
  double total(const ModelConfig& c) const;
};
ModelParams model_params(const ModelConfig& c);

// One layer's parameters on a rank, before data-parallel sharding (the layout's TP, EP and ETP
// splits applied): the dense part (attention, dense MLP or router and shared experts, the norms)
// and the routed experts; of the dense part, the FP8 linears' (every projection but the router,
// which stays BF16, as the norms do). The routed experts are FP8 linears throughout.
struct LayerParams {
  double dense = 0, dense_fp8_linear = 0, experts = 0;
  double total() const { return dense + experts; }
  double fp8_linear() const { return dense_fp8_linear + experts; }
};
LayerParams rank_layer_params(const ModelConfig& c, const ParallelLayout& l, int64_t layer);
// The embedding's (or the untied LM head's) parameters on a rank: the padded vocabulary over TP; BF16.
double rank_vocab_params(const ModelConfig& c, const ParallelLayout& l);

// Megatron-LM's --fp8-param-gather (Transformer Engine's FP8 parameters, fp8_model_init): the FP8
// linears' parameters are kept in FP8, so the distributed optimizer's and FSDP's parameter
// all-gathers send them in FP8 and the rank keeps no BF16 copy of them. It takes effect under the
// FP8 recipes (FP8Current, FP8Delayed, FP8Block, MXFP8) with a sharding that gathers parameters
// (not ddp); BF16 has nothing in FP8, and NVFP4 has Megatron's own --fp4-param-gather (not modelled).
bool fp8_params_kept(Precision p, DpSharding sharding, bool fp8_param_gather);
// Bytes of an all-gather of `params` parameters, `fp8_linear` of them FP8 linears: BF16, 2 bytes
// each, but 1 byte (the FP8 data; the scales are left out, as core/node/collectives does) for the
// FP8 linears where their parameters are kept in FP8.
double param_gather_bytes(double params, double fp8_linear, bool fp8_params);

struct RankMemory {
  int64_t stage = 0;
  double params = 0;          // parameters this rank holds before data-parallel sharding (dense + experts)
  double expert_params = 0;   // of them, routed experts (sharded over the expert data-parallel group)
  double weights_bytes = 0;   // the parameters it keeps (BF16, or FP32 shards under FSDP)
  double grads_bytes = 0;     // gradient buffers (FP32 main gradients)
  double optimizer_bytes = 0; // FP32 master parameters and Adam moments (or their shard)
  double gathered_bytes = 0;  // ZeRO-3 / FSDP: parameters gathered for compute (current and prefetched units)
  double fp8_copy_bytes = 0;  // FP8 recipes: the linear weights' FP8 copies (core/step/step_memory.hpp's rule)
  double activation_bytes = 0;  // activations of the micro-batches in flight
  double inflight_microbatches = 0;
  double model_state_bytes() const {
    return weights_bytes + grads_bytes + optimizer_bytes + gathered_bytes + fp8_copy_bytes;
  }
  double total_bytes() const { return model_state_bytes() + activation_bytes; }
};

// How a rank keeps its state, beyond the layout.
struct RankState {
  // Bytes per parameter of weights, main copies and Adam states: the one-GPU step's rule
  // (core/step/step_memory.hpp state_bytes_per_param) for rank_storage()'s storage.
  ParamStorage storage = ParamStorage::Bf16MainFp32;
  // The gradient buffer's element size under Megatron's BF16 + FP32-main storage (4: FP32 main
  // gradients, --accumulate-allreduce-grads-in-fp32; 2: BF16, as the gradients are reduced); the
  // other storages keep gradients in the parameters' type.
  double grad_bytes = 4;
  // The recipe and the framework as the step runs them: FP8 recipes keep the GEMMs' inputs for Wgrad
  // in FP8 and the linear weights' FP8 copies (core/step/step_memory.hpp fp8_weight_copy_bytes);
  // the framework and the loss (core/step/step_options.hpp loss_fused) set what the loss keeps.
  Precision precision = Precision::BF16;
  StepContextKind framework = StepContextKind::TransformerEngine;
  bool loss_fused = true;
  // --fp8-param-gather (fp8_params_kept): the FP8 linears' weights are their FP8 parameters (data and
  // scales) in place of the BF16 ones (or, under PyTorch FSDP, the gathered units are FP8 while the
  // FP32 shards stay), and Transformer Engine's rowwise FP8 copy is that parameter: of its copies only
  // the transposed one remains. The FP32 main parameters, gradients and optimizer states are unchanged.
  bool fp8_param_gather = false;
};

// The storage a rank's parameters use: PyTorch FSDP's mixed precision keeps FP32 sharded
// parameters; otherwise the whole step's setting (--param-storage; Megatron's BF16 + FP32 main).
ParamStorage rank_storage(const ParallelLayout& l, ParamStorage step_storage);

// Memory of one rank of pipeline stage `stage`. The layout must be valid for c.
RankMemory rank_memory(const ModelConfig& c, const ParallelLayout& l, int64_t stage, const RankState& state = {});

// The memory a GPU's datasheet size gives: HBM capacities are binary ("80 GB" is 80 GiB), less
// kParallelReserveBytes.
double usable_memory_bytes(double datasheet_bytes);

// What a rank needs beyond the model: the one-GPU step's reserve (core/step/step_memory.hpp's
// kRuntimeReserveBytes: CUDA context, library workspaces) plus NCCL's communicator buffers and the
// caching allocator's fragmentation under a multi-GPU step (an assumption: 2 GiB more), subtracted
// from the GPU's memory before a layout is said to fit.
constexpr double kParallelReserveBytes = kRuntimeReserveBytes + 2.0 * 1024 * 1024 * 1024;

}  // namespace gs
