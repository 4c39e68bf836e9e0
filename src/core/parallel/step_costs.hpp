// What one rank's compute costs in a training step: the explicit input of the parallel step
// (parallel_step.hpp). Per layer kind (dense, MoE) and micro-batch, each linear's Fprop, Dgrad and
// Wgrad, the core attention and the memory-bound kernels between them; the parts that run once
// per micro-batch (embedding, LM head, loss); the optimizer per parameter. Filled either from a
// measured run of the rank's GEMM plan on this GPU (its cells and step context), or predicted from
// the GPU spec database and the published priors (the datasheet path of core/analysis/predict.hpp;
// attention and memory-bound kernels from their FLOPs and bytes) when no GPU is at hand. Every
// number says which.
#pragma once
#include <map>
#include <string>

#include "core/analysis/predict_cell.hpp"
#include "core/gpu/gpu_spec.hpp"
#include "core/step/parallel_layout.hpp"
#include "core/plan/plan.hpp"
#include "core/plan/step_model.hpp"
#include "core/recipes/recipe.hpp"
#include "core/results/results.hpp"
#include "core/step/step_options.hpp"

namespace gs {

enum class CostSource { Measured, Predicted };
const char* to_string(CostSource s);  // "measured", "predicted"

struct OpCost {
  double fprop_ms = 0, dgrad_ms = 0, wgrad_ms = 0;
};

// One layer of one kind on one rank for one micro-batch.
struct LayerCost {
  std::map<Op, OpCost> gemms;
  double attn_fwd_ms = 0, attn_bwd_ms = 0;    // core attention: this rank's heads and sequence share
  double other_fwd_ms = 0, other_bwd_ms = 0;  // memory-bound kernels (norms, activations, residuals, MoE permutes)
  double gemm_fwd_ms() const;
  double gemm_bwd_ms() const;
  double fwd_ms() const { return gemm_fwd_ms() + attn_fwd_ms + other_fwd_ms; }
  double bwd_ms() const { return gemm_bwd_ms() + attn_bwd_ms + other_bwd_ms; }
  bool empty() const { return gemms.empty(); }
};

struct StepCosts {
  Precision precision = Precision::BF16;
  CostSource source = CostSource::Predicted;
  std::string basis;  // how the numbers were obtained, in words
  LayerCost dense, moe;
  double embed_fwd_ms = 0, embed_bwd_ms = 0;  // token embedding (first stage)
  double head_fwd_ms = 0, head_bwd_ms = 0;    // LM head GEMMs (last stage)
  double loss_fwd_ms = 0, loss_bwd_ms = 0;    // cross-entropy over the vocabulary (last stage)
  // The optimizer step (AdamW, gradient norm, zero-grad) per parameter this rank updates.
  double optimizer_ms_per_param = 0;
  // Streaming bandwidth the memory-bound parts were costed at (bytes per ms): the optimizer and the
  // FSDP casts use it.
  double stream_bytes_per_ms = 0;
};

// The rank's compute predicted from the GPU's datasheet: GEMMs as `gemmscope predict` predicts a
// run that never happened (training mode, wave quantization, the quantization passes), each at the
// published prior of its format, GPU generation and size class (`data.priors`, data/priors.json,
// core/analysis/priors.hpp: per-generation and per-format efficiencies with their sources), and at
// PredictConstants::kComputePrior where none is published or no priors are given (the basis counts
// them); core attention at the architecture's flash-attention fraction of the BF16 peak
// (ArchPolicy); memory-bound kernels as the step context models them for `framework` (te, eager,
// compile), at the datasheet bandwidth. `c` is the full model; the layout gives the rank's share.
// The layout must be valid (layout_check.hpp).
StepCosts predicted_step_costs(const ModelConfig& c, const ParallelLayout& l, const GpuSpec& gpu, Precision p,
                               StepContextKind framework, const RecipeOptions& o, const StepOptions& step = {},
                               const PredictData& data = {});

// The rank's compute from a measured run of its plan (the run's plan must be rank_config(c, l)'s):
// GEMM cells of the first mode in the precision's column; attention and memory-bound kernels from
// the run's step context where it has one (attention scaled to the rank's share of the sequence
// under context parallelism), else predicted from `gpu`. The embedding, loss and optimizer are
// modelled from their bytes at the GPU's bandwidth. UsageError when the run has no measured cells
// in that precision, or neither a step context nor a GPU entry to model the rest.
// Both paths take the embedding, loss and optimizer from the rank's whole-step plan
// (core/step/step_plan.hpp built for the rank's plan with `step`'s settings and the rank's storage):
// the same groups, bytes and launches the one-GPU step reports; a measured run's timed whole step
// replaces them where it has their times.
StepCosts measured_step_costs(const RunResult& run, const ModelConfig& c, const ParallelLayout& l, const GpuSpec* gpu,
                              Precision p, StepContextKind framework, const RecipeOptions& o, const StepOptions& step = {});

}  // namespace gs
