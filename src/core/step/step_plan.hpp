// The whole training step of a model on one GPU, as the framework named by --step-context runs it:
// every kernel group in step order (zero-grad, embedding, each layer's forward, final norm, LM head,
// loss, then the backward in reverse, FP8 scale updates, gradient clipping, the optimizer), each with
// its FLOPs, bytes, kernel launches, and where its time comes from (TimeBasis): the run's measured
// GEMM cells, the step context's attention and memory-bound work, the engine's step kernels
// (core/step/step_kernels.hpp), or bytes at the stand-in's calibrated rate (modelled).
//
// A group stands for `count` identical instances (an average layer's work runs `layers` times).
// Pure: built from the GEMM plan and the settings; core/step/step_breakdown.hpp turns it and the
// groups' times into the step's time, so `predict` can call it with predicted times.
// docs/step.md lists every group and how its bytes and launches are counted.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/plan/plan.hpp"
#include "core/plan/step_model.hpp"
#include "core/recipes/modes.hpp"
#include "core/recipes/recipe.hpp"
#include "core/step/step_kernels.hpp"
#include "core/step/step_options.hpp"
#include "core/step/step_params.hpp"

namespace gs {

// The breakdown's categories (Recompute: the forward work run again in the backward).
enum class StepCategory { Gemm, Attention, Other, Loss, Optimizer, Recompute };
const char* to_string(StepCategory c);       // "gemm", "attention", "other", "loss", "optimizer", "recompute"
const char* category_label(StepCategory c);  // "GEMMs", "attention", ... (reports)
inline constexpr StepCategory kAllStepCategories[] = {StepCategory::Gemm,      StepCategory::Attention,
                                                      StepCategory::Other,     StepCategory::Loss,
                                                      StepCategory::Optimizer, StepCategory::Recompute};

enum class StepPhase { Forward, Backward, Optimizer };
const char* to_string(StepPhase p);  // "forward", "backward", "optimizer"

// Where a group's time comes from.
enum class TimeBasis {
  GemmCells,   // the run's GEMM cells of gemm_scope, forward (Fprop) or backward (Dgrad + Wgrad): measured
  Attention,   // the step context's attention pass: measured (cuDNN) or modelled, as the context says
  LayerOther,  // `share` of the step context's memory-bound work of an average layer: modelled
  Casts,       // `share` of the step context's FP8 casts (pre-quantized cells only): modelled
  StepKernel,  // Engine::measure_step_kernel(kernel): measured; else its bytes at the stand-in's rate
  Bytes,       // bytes at the stand-in's calibrated rate and the framework's efficiency: modelled
  Launches,    // kernels too small to be bandwidth-bound: one launch latency each: modelled
};
const char* to_string(TimeBasis b);

enum class GemmScope { DenseLayer, MoeLayer, Head };

// Which layers a group runs in: once per step, or in every / the dense / the MoE layers (count is
// then the number of those layers; the trace places it in each of them).
enum class LayerSet { Once, Every, Dense, Moe };

struct StepGroup {
  std::string name;  // unique within a plan: "embedding fwd", "GEMMs fwd, dense layer", "adamw"
  StepCategory category = StepCategory::Other;
  StepPhase phase = StepPhase::Forward;
  LayerSet layers = LayerSet::Once;
  double count = 1;     // instances per step (the layers of `layers`, or 1)
  double flops = 0;     // per instance: executed FLOPs (attention: causal, as its kernels run)
  double bytes = 0;     // per instance: memory traffic (read + written); 0 where the cells or the context own it
  double launches = 0;  // per instance: kernel launches
  TimeBasis basis = TimeBasis::Bytes;
  GemmScope gemm_scope = GemmScope::DenseLayer;  // GemmCells
  bool forward = true;                           // GemmCells, Attention: the forward pass, else the backward
  double share = 1;       // LayerOther, Casts: this group's share of the per-layer (activation-like) time
  double move_share = 0;  // LayerOther: its share of the per-layer MoE dispatch and combine time
  std::optional<StepKernelSpec> kernel;          // StepKernel
  std::string what;                              // how it is counted, in words
  double total_flops() const { return flops * count; }
  double total_bytes() const { return bytes * count; }
  double total_launches() const { return launches * count; }
};

// What a step is of: the framework, its settings (and what they resolve to), the column, the mode.
struct StepSetup {
  StepContextKind framework = StepContextKind::TransformerEngine;  // `none` plans Transformer Engine's step
  StepOptions options;
  HostForm form = HostForm::Eager;  // host_form(options, framework)
  bool loss_fused = true;
  Precision precision = Precision::BF16;
  Mode mode = Mode::Training;
  int64_t tokens = 0;  // per step (micro-batch x sequence)
};

struct StepPlan {
  StepSetup setup;
  ParamCount params;
  std::vector<StepGroup> groups;  // in step order
  // FLOPs per step. Model FLOPs (MFU's numerator, Megatron-LM's definition): every linear GEMM of the
  // plan in its three passes, and attention's QK^T and PV forward and backward (3 x forward) over
  // the full s x s, as Megatron-LM's num_floating_point_operations counts them (the causal mask
  // not subtracted), recompute left out. Hardware FLOPs (HFU's): the same counting plus the
  // recomputed forward work.
  double model_flops = 0;
  double hardware_flops = 0;
  std::vector<std::string> notes;  // the plan's assumptions, in words
  const StepGroup* find(const std::string& name) const;
};

// UsageError for a plan without a model, or settings that make no sense together (a compiled host
// form for a framework that does not compile, recompute of a model without layers).
StepPlan build_step_plan(const Plan& plan, StepContextKind framework, const StepOptions& options, Precision precision,
                         Mode mode, const RecipeOptions& recipe);

// Kernel launches of a multi-tensor apply over `elements` values in `tensors` tensors, `depth`
// tensor lists per launch (PyTorch's and Apex's multi_tensor_apply: 65536-value chunks, at most 320
// blocks and depth_to_max_tensors[depth] tensors per launch).
double multi_tensor_launches(double elements, double tensors, int depth);

}  // namespace gs
