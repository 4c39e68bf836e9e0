// Memory per GPU of a training step, by the frameworks' own accounting:
//   - weights, gradients, optimizer states: Megatron-LM's "18 bytes per parameter" without the
//     distributed optimizer (BF16 param 2 + FP32 main grad 4 + FP32 main param 4 + Adam m 4 + v 4;
//     with it over d ranks, 6 + 12/d: docs/distrib_optimizer.md), plain PyTorch's params, grads and
//     Adam states in the parameters' own dtype (BF16: 8 bytes, FP32: 16);
//   - FP8 weight copies: Transformer Engine keeps each FP8 linear weight's rowwise and transposed
//     FP8 copies between micro-batches (2 bytes per parameter, plus block scales);
//   - activations saved for the backward, per recompute policy, after Korthikanti et al. 2022
//     ("Reducing Activation Recomputation in Large Transformer Models", section 4.1: 34sbh + 5as^2b
//     bytes per layer for a GPT layer with 16-bit activations), adapted: flash attention stores no
//     s x s scores (its softmax statistics instead: 4 bytes per query head and token), no dropout
//     masks (dropout 0, as LLM pretraining runs), GQA's narrower K and V, SwiGLU's two up outputs,
//     RMSNorm statistics, MoE routing and experts, MLA's latent projections, FP8 copies of the
//     linear inputs in FP8 recipes; full recompute keeps only each layer's input (2sbh) and one
//     layer's activations at a time; selective drops the core attention's internals;
//   - the loss's logits (BF16) and, unfused, their FP32 upcast and log-probabilities.
// The inputs are explicit (a rank's parameters, shards, micro-batches in flight, its layers and
// the sequence share) so the parallel step can call it with its own layout; memory_inputs() fills
// them for one GPU from a plan, and the parallel step's ranks take their activations from
// set_activations and activation_bytes with the layout's splits (sequence, context and expert
// parallelism, the pipeline's micro-batches in flight). Pure.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/plan/plan.hpp"
#include "core/step/step_plan.hpp"

namespace gs {

// Where a rank's share of the model and its state comes from (one GPU: every default).
struct MemoryLayout {
  int64_t optimizer_shards = 1;        // ranks sharing main params and Adam states (distributed optimizer / ZeRO-1)
  int64_t grad_shards = 1;             // ranks sharing the gradients (ZeRO-2); 1 keeps them all
  // Micro-batches whose activations are held at once (a 1F1B pipeline's first stage: up to PP; an
  // interleaved one counts its chunks' share, so it can be fractional).
  double microbatches_in_flight = 1;
  int64_t context_parallel = 1;        // the sequence's split: activations per rank divided by it
  bool head = true;                    // the final norm, LM head and loss run on this rank (last stage)
  bool embedding = true;               // the embedding runs on this rank (first stage): its token ids kept
};

// Saved activations of one layer, bytes per token (per tensor-parallel rank).
struct LayerActivations {
  double attention = 0;  // norm input and statistics, linear inputs, Q/K/V, output, softmax statistics
  double mlp = 0;        // norm input, linear inputs, activation inputs (MoE: routing, experts, combine)
  double total() const { return attention + mlp; }
};

struct MemoryInputs {
  ParamCount params;  // on this rank
  double fp8_copy_params = 0;  // linear parameters with FP8 copies (router and a BF16 LM head excluded)
  double fp8_copy_bytes = 0;   // bytes per such parameter (0 in BF16)
  ParamStorage storage = ParamStorage::Bf16MainFp32;
  Recompute recompute = Recompute::None;
  double tokens = 0;         // per micro-batch on this rank, before the context-parallel split
  int64_t dense_layers = 0;  // on this rank
  int64_t moe_layers = 0;
  LayerActivations dense, moe;  // per token (no recompute)
  double layer_input = 0;       // bytes per token of a layer's input (full recompute's checkpoint)
  double selective_saving = 0;  // bytes per token selective recompute does not keep (per layer)
  double head_per_token = 0;    // final norm and LM head inputs, logits and the loss's tensors
  double ids_per_token = 0;     // the token ids the embedding's backward scatters by (int64)
  MemoryLayout layout;
};

// What a layer's activations are counted for: the framework and recipe as the step runs them, and
// how the layout splits the tensors. The one GPU's step (memory_inputs) and the parallel step's
// ranks (core/parallel/memory.hpp) both count through set_activations with it.
struct ActivationSetup {
  StepContextKind framework = StepContextKind::TransformerEngine;  // None: Transformer Engine's
  Precision precision = Precision::BF16;  // FP8 recipes keep the linear inputs in their FP8 copies
  bool loss_fused = true;
  bool lm_head_bf16 = true;
  // Sequence parallelism: the TP size, by which the sequence-wide tensors are split (norm inputs
  // and statistics, the h-wide linear inputs, the layer's input, dropout masks); 1 without.
  int64_t sequence_parallel = 1;
  int64_t expert_tp = 0;          // the experts' FFN split; 0: the config's tensor_parallel
  double routed_per_token = -1;   // MoE: expert rows per token on this rank; < 0: top_k x expert_tp / TP
  // GPT-3-style dropout (Korthikanti et al.'s 34 s b h): a 1-byte mask after the attention and after
  // the MLP (flash attention regenerates its own from the seed). Off: LLM pretraining runs dropout 0.
  bool dropout = false;
};

struct MemoryBreakdown {
  double weights = 0, grads = 0, main_params = 0, optimizer_states = 0, fp8_copies = 0;
  double activations = 0;  // saved for the backward, the largest layer's working set and the loss's
  double reserve = 0;      // CUDA context and library workspaces (assumed)
  double total() const { return weights + grads + main_params + optimizer_states + fp8_copies + activations + reserve; }
  std::optional<double> device_bytes;  // the GPU's memory, where known
  bool fits() const { return device_bytes && total() <= *device_bytes; }
  std::optional<double> margin() const {  // device - total (negative: does not fit)
    return device_bytes ? std::optional<double>(*device_bytes - total()) : std::nullopt;
  }
};

// What a CUDA context and the libraries' workspaces take, assumed (not measured): 1 GiB. The caching
// allocator's fragmentation is not modelled.
constexpr double kRuntimeReserveBytes = 1024.0 * 1024 * 1024;

// One GPU running the whole plan (a plan per tensor-parallel rank), as `sp` runs it.
MemoryInputs memory_inputs(const Plan& plan, const StepPlan& sp, const RecipeOptions& recipe);
MemoryBreakdown memory_per_gpu(const MemoryInputs& in, std::optional<double> device_bytes);

// The one accounting of saved activations: fills in's per-token fields (dense, moe, layer_input,
// selective_saving, head_per_token, ids_per_token) for `rank`, a config of one tensor-parallel rank
// (its tensor_parallel splits the heads, the FFN and the vocabulary), as `s` says.
void set_activations(MemoryInputs& in, const ModelConfig& rank, const ActivationSetup& s);
// The activation bytes of `in`: each layer's saved activations per recompute policy and the token
// ids, for every micro-batch in flight; the backward's working set (one layer's activations,
// recomputed or being turned into gradients); the loss's tensors on the head's rank; all over the
// context-parallel share of the tokens. memory_per_gpu's `activations`.
double activation_bytes(const MemoryInputs& in);

// Bytes per element of a tensor a recipe keeps quantized: data plus its scales (per-tensor scales
// are negligible; 1x128 blocks add 4 bytes per 128, MXFP8 one byte per 32, NVFP4 one per 16); 2 in BF16.
double fp8_element_bytes(Precision p);

// Bytes per FP8 linear parameter of the weight copies a recipe keeps between micro-batches (data and
// scales): Transformer Engine the rowwise and the transposed copy, a PyTorch FP8 linear the one it
// cast in the forward; 0 in BF16. The parallel step's memory per rank uses it too.
double fp8_weight_copy_bytes(Precision p, StepContextKind framework);

// Bytes per parameter of weights, gradients, main params and states for a storage, unsharded.
struct StateBytes {
  double weights, grads, main_params, states;
  double total() const { return weights + grads + main_params + states; }
};
StateBytes state_bytes_per_param(ParamStorage s);

}  // namespace gs
