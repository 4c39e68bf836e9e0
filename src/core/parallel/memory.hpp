// Memory per rank under a parallel layout, with Megatron-LM's formulas
// (megatron/training/theoretical_memory_usage.py): parameters per stage (the embedding on the
// first stage, the LM head on the last), sharded as data parallelism shards the state (18 bytes per
// parameter without sharding; 6 + 12 / DP with the distributed optimizer; ...), and activations per
// layer after Korthikanti et al. (arXiv 2205.05198, Table 2) itemized so that GQA, gated MLPs and
// experts count what they store, times the micro-batches in flight on the stage (1F1B: p - s;
// interleaved: Megatron's penalty 1 + (p - 1) / (p v)). PyTorch FSDP keeps FP32 sharded
// parameters and gathers BF16 copies per unit.
// Shared with the one-GPU step's memory (core/step/step_memory.hpp): the bytes per parameter of
// each storage, the FP8 weight copies' bytes and the runtime reserve. Kept apart from it: the
// activations per layer, which here shard by sequence parallelism, expert-tensor parallelism and
// context parallelism per stage and keep Megatron's formula testable (dropout masks).
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

// Activation bytes one layer stores for one micro-batch on one rank (BF16), the itemized Table 2 of
// Korthikanti et al. with flash attention (no score matrix) and the recomputation given: selective
// and none store every input the backward needs; full stores the layer's input only. `dropout`
// adds the masks GPT-3-style models keep (Megatron's 34 s b h / t then holds exactly for a GPT
// layer with a 4h GELU MLP under sequence parallelism). `moe`: an MoE layer (routed rows top_k x
// tokens on average, their expert activations). `fp8_inputs`: FP8 recipes keep the GEMMs' inputs for Wgrad
// in their FP8 copies (Transformer Engine), one byte instead of two.
double layer_activation_bytes(const ModelConfig& c, const ParallelLayout& l, bool moe, bool dropout = false,
                              bool fp8_inputs = false);

// Megatron-LM's formula as written (compute_activation_memory, sequence parallel with selective
// recompute): s b h (18 + 4 ffn / h) per layer, over TP. For the tests.
double megatron_layer_activation_bytes(int64_t seq, int64_t micro_batch, int64_t hidden, int64_t ffn, int64_t tp);

// How a rank keeps its state, beyond the layout.
struct RankState {
  // Bytes per parameter of weights, main copies and Adam states: the one-GPU step's rule
  // (core/step/step_memory.hpp state_bytes_per_param) for rank_storage()'s storage.
  ParamStorage storage = ParamStorage::Bf16MainFp32;
  // The gradient buffer's element size under Megatron's BF16 + FP32-main storage (4: FP32 main
  // gradients, --accumulate-allreduce-grads-in-fp32; 2: BF16, as the gradients are reduced); the
  // other storages keep gradients in the parameters' type.
  double grad_bytes = 4;
  bool fp8_inputs = false;         // FP8 recipes keep the GEMMs' inputs for Wgrad in FP8
  double fp8_copy_bytes = 0;       // per FP8 linear parameter (core/step/step_memory.hpp fp8_weight_copy_bytes)
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
