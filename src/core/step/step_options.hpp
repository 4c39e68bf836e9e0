// How the whole training step runs beyond its GEMMs: the settings of the whole-step plan (the
// registry declares their flags: core/run/settings.cpp; docs/step.md says what each means).
// Defaults are what Megatron-LM with Transformer Engine trains with; plain PyTorch's semantics
// (BF16 parameters and Adam states, set_to_none zero-grad, unfused loss) are options, and every
// report says which ran. Pure data.
#pragma once
#include <string>

#include "core/plan/step_model.hpp"
#include "core/step/step_kernels.hpp"
#include "core/util/text_util.hpp"

namespace gs {

// Activation recompute as Megatron-LM defines it (--recompute-granularity): none; selective (the
// core attention's forward again in the backward: --recompute-modules core_attn); full (every
// layer's forward again: GEMMs, attention and the other kernels; --recompute-method uniform,
// --recompute-num-layers 1).
enum class Recompute { None, Selective, Full };
const EnumNames<Recompute>& recompute_names();  // none, selective, full
const char* to_string(Recompute r);

// The optimizer's AdamW kernels: fused (one multi-tensor kernel: Megatron's FusedAdam, PyTorch's
// AdamW(fused=True)) or foreach (PyTorch's default: one multi-tensor launch per elementwise op).
enum class OptimizerImpl { Fused, Foreach };
const EnumNames<OptimizerImpl>& optimizer_names();  // adamw-fused, adamw-foreach
const char* to_string(OptimizerImpl o);

// The loss over the vocabulary: auto (the framework's: fused for te and compile, unfused for eager),
// fused (one kernel reads the BF16 logits, FP32 math in registers: Megatron's
// --cross-entropy-loss-fusion, Transformer Engine's parallel_cross_entropy, Inductor's fused
// reductions) or unfused (logits upcast to FP32, log-softmax, NLL as separate kernels).
enum class LossImpl { Auto, Fused, Unfused };
const EnumNames<LossImpl>& loss_names();  // auto, fused, unfused
const char* to_string(LossImpl l);

// How the host launches the step's kernels: auto (the framework's: eager for te and eager,
// compiled for compile), eager (framework Python code launches every kernel), compiled (Inductor's
// generated wrapper launches its fused kernels), cuda-graph (the step captured once and replayed:
// one launch).
enum class HostForm { Auto, Eager, Compiled, CudaGraph };
const EnumNames<HostForm>& host_form_names();  // auto, eager, compiled, cuda-graph
const char* to_string(HostForm f);

const EnumNames<ParamStorage>& param_storage_names();  // bf16+fp32-main, bf16, fp32

struct StepOptions {
  Recompute recompute = Recompute::None;
  ParamStorage storage = ParamStorage::Bf16MainFp32;
  OptimizerImpl optimizer = OptimizerImpl::Fused;
  bool grad_clip = true;  // --clip-grad 1.0 (Megatron's default), clip_grad_norm_ in PyTorch
  LossImpl loss = LossImpl::Auto;
  HostForm host_form = HostForm::Auto;
};

// What auto means for a framework (--step-context none: Transformer Engine's).
bool loss_fused(const StepOptions& o, StepContextKind framework);
HostForm host_form(const StepOptions& o, StepContextKind framework);
// Zero-grad: Megatron zeroes its contiguous FP32 gradient buffer every step (a memset); plain
// PyTorch's default zero_grad(set_to_none=True) launches nothing (the next backward writes fresh
// gradients).
bool zeroes_grad_buffer(const StepOptions& o);

// One line for headers and notes: "recompute none, bf16+fp32-main params, adamw-fused, grad clip on,
// loss fused (auto: te), host eager (auto: te)".
std::string describe(const StepOptions& o, StepContextKind framework);

}  // namespace gs
