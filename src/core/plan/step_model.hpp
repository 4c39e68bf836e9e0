// What a training step runs between its GEMMs, per average layer, from the plan: the core attention
// (QKᵀ, softmax, PV: fused flash attention in practice) and the memory-bound kernels (norms,
// activations, residual adds, layout copies, FP8 casts), for the framework whose kernels the user
// runs. Pure: the bytes and FLOPs are tested on CPU; the engine turns bytes into time on the GPU
// (a calibrated streaming kernel) and measures attention where it can (cuDNN).
//
// Frameworks (--step-context):
//   te       Transformer Engine / Megatron-LM (the default for model plans): norm fused into the
//            next linear's input (LayerNormLinear), fused activations, attention with native
//            GQA/MQA and packed QKV layouts (no head repeats, no concatenations), fused residuals.
//   eager    eager PyTorch, Hugging Face style: one kernel per op, key/value heads repeated for
//            GQA, the activation's product and chunk as separate kernels.
//   compile  torch.compile (Inductor): elementwise chains fused, residual add fused into the
//            next norm; head repeats and the QKV gradient's concatenation remain.
//   none     GEMMs back to back (the sustained-GEMM-power bound).
// --step-other-ms replaces the memory-bound part by the user's measured figure.
#pragma once
#include <cstdint>
#include <string>

#include "core/model/attention_shape.hpp"
#include "core/plan/plan.hpp"
#include "core/util/text_util.hpp"

namespace gs {

enum class StepContextKind { None, TransformerEngine, Eager, Compiled };
// Its names: te (also transformer-engine), eager, compile (also compiled), none; any case.
const EnumNames<StepContextKind>& step_context_names();
const char* to_string(StepContextKind k);            // "none", "te", "eager", "compile"
const char* step_context_framework(StepContextKind k);  // "Transformer Engine / Megatron-LM", ...
StepContextKind step_context_from_string(const std::string& s);  // case-insensitive; UsageError
// Whose layout rules a plan under this step context follows (core/model/layout_rules.hpp): te and
// none Megatron-LM's (the training default), eager and compile Hugging Face / PyTorch's.
LayoutFramework layout_framework(StepContextKind k);

// One layer's core attention on one GPU (heads split by tensor parallelism; MLA: every head its
// own key and value, head dims qk_nope + qk_rope and v), causal, self-attention.
AttentionShape attention_shape(const ModelConfig& c);
std::string describe(const AttentionShape& a);  // "batch 2 x seq 4096, heads 28/4, head dims 128/128, causal"

// The work between an average layer's GEMMs in one training step (forward and backward).
struct StepWorkModel {
  StepContextKind kind = StepContextKind::None;
  double other_bytes = 0;    // memory-bound kernels' traffic (read + written), FP8 casts and MoE dispatch excluded
  double other_fwd_bytes = 0;  // the forward pass's part of other_bytes (the rest runs in the backward)
  double move_bytes = 0;     // MoE token dispatch and combine: rows gathered / scattered by index (read + written)
  double cast_bytes = 0;     // FP8 casts of every linear's operands (X, W, dY; rowwise + transposed)
  double cast_fwd_bytes = 0;  // the forward's part of cast_bytes (X and W; dY is the backward's)
  AttentionShape attention;  // of a layer as the framework runs it (framework_attention_shape)
  double layer_gflops = 0;   // GEMM GFLOPs of the average layer: the spread's denominator
  // The framework's memory-bound kernels' rate over the modelled bytes, relative to the calibrated
  // stand-in kernel's (cuda/stepwork/step_work.hpp): time = bytes / (efficiency x stand-in rate).
  double efficiency = 1.0;
  bool active() const { return kind != StepContextKind::None; }
};
// `none` models no work (active() is false) but still carries Transformer Engine's bytes, which
// split a --step-other-ms figure between the two stand-ins.
StepWorkModel step_work_model(const Plan& plan, StepContextKind kind);

// Whether the framework repeats the key/value heads of a GQA/MQA layer before attention (eager and
// compiled PyTorch in the Hugging Face style: repeat_kv, then SDPA over every query head) rather
// than running attention with native GQA (Transformer Engine). The repeat's copies are in the
// modelled bytes; the attention the step runs is then an MHA-shaped one.
bool repeats_kv_heads(StepContextKind k);
// The layer's attention as the framework runs it: `a` (attention_shape) with every query head its
// own key and value where the framework repeats them.
AttentionShape framework_attention_shape(const AttentionShape& a, StepContextKind k);

// The two kinds of memory-bound work run between GEMMs, each by a stand-in kernel of its own kind
// (cuda/stepwork/step_work.hpp), because the power the work draws sets the GEMMs' clocks: activations and
// norms stream at a GEMM's power (H100: GELU 698 W, LayerNorm 696 W, BF16 GEMM 698 W), an MoE
// layer's gathers and scatters by index draw far less (dispatch gather 491 W, index_add combine
// 426 W, the gather's backward 529 W; bench/power_probe.py, docs/step-context.md).
// A --step-other-ms figure (the user's measured non-GEMM time) is split between them in the
// proportion of their modelled times: the bytes of each at its stand-in's calibrated rate
// (bytes per ms) and the framework's efficiency. All of it is `other_ms` without MoE layers.
struct StepOtherSplit {
  double other_ms = 0;  // activation-like stand-in
  double move_ms = 0;   // gather stand-in
};
// The modelled time of each: its bytes at its stand-in's rate (bytes per ms; 0 for a rate <= 0) and
// the framework's efficiency (kMoveRate for the gather).
StepOtherSplit modelled_memory_ms(const StepWorkModel& m, double other_bytes_per_ms, double move_bytes_per_ms);
// The FP8 casts' modelled time (cast_bytes at the stand-in's rate, bytes per ms, and kCastRate; 0 for
// a rate <= 0). One rate for every framework: the casts are their own kernels (Transformer Engine's
// cast-transpose, torch.compile'd amax/cast), not the framework's elementwise chain.
double modelled_cast_ms(const StepWorkModel& m, double other_bytes_per_ms);
StepOtherSplit split_step_other_ms(const StepWorkModel& m, double total_ms, double other_bytes_per_ms,
                                   double move_bytes_per_ms);

// The GEMM GFLOPs of an average layer: dense and MoE layers weighted by their counts, the LM head
// (a model-once GEMM) left out; 0 for a plan without layers. The denominator of every share
// (StepWorkModel::layer_gflops, and --step-other-ms's spread: core/run/step_context.hpp).
double average_layer_gflops(const Plan& plan);

// Rates relative to the stand-in kernel.
// - Eager PyTorch: set from whole models trained in eager PyTorch (bench/validate_model_step.py
//   "tune" set, H200: the BF16 step's non-GEMM, non-attention, non-loss, non-optimizer kernels ran at
//   0.81-0.85 of the stand-in's rate in 4 of 4 models). The one-layer steps of bench/validate_step.py
//   ran this work faster (0.95-1.21 of the stand-in's rate); the whole model's rate is the one a
//   user's step runs at.
// - torch.compile: set from the one-layer compiled steps (bench/validate_step.py "tune" layers:
//   1.09-1.23). Transformer Engine's fused kernels take the compiled rate: there is no Transformer
//   Engine on the validation machine to set it from.
constexpr double kEagerRate = 0.85;
constexpr double kFusedRate = 1.15;
// The FP8 casts' rate relative to the stand-in, in every framework: the rate they matched within 10%
// on the one-layer "tune" steps, and within 10% in the whole models (slightly slow). The casts of the
// validation's FP8 steps are the same torch.compile'd kernels in its eager and compiled steps, so a
// framework-dependent rate ran them too fast or too slow in one of the two.
constexpr double kCastRate = 1.05;
// PyTorch's own kernels of the step (torch.optim.AdamW(fused=True), clip_grad_norm_'s foreach
// norm, the eager cross-entropy's upcast, log-softmax and NLL, the embedding's gather and
// scatter-add) relative to gemmscope's stand-ins of the same kernels (cuda/stepwork, same bytes and
// launches): 0.85 in the whole-model "tune" set (optimizer 0.78-0.83, eager loss 0.85-0.87). Applied
// where the framework is PyTorch (--step-context eager or compile) to the stand-ins that stand for
// its kernels (step_kernel_rate, core/step/step_kernels.hpp).
constexpr double kPyTorchKernelRate = 0.85;
// The dispatch and combine kernels' rate relative to the gather stand-in: they are row gathers by
// index (Transformer Engine's fused permute and unpermute; PyTorch's index_select). Not fitted.
constexpr double kMoveRate = 1.0;

// Attention's throughput when it cannot be measured: this fraction of the GPU's dense BF16 peak
// (cuDNN SDPA fwd+bwd on the "tune" layers ran at 39-50% of an H200's).
constexpr double kAttentionPeakFraction = 0.45;

}  // namespace gs
