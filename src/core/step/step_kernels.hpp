// The kernels of a training step that are neither GEMMs nor attention and that the engine can run
// and time itself: the optimizer's multi-tensor update, the gradient-norm reduction, zero-grad, the
// loss over the vocabulary, the token embedding, and the host's launch cost. The whole-step plan
// (core/step/) says which of them a framework runs and at what sizes; Engine::measure_step_kernel
// (core/run/engine.hpp) times one. Pure data: no CUDA.
#pragma once
#include <cstdint>
#include <string>
#include <tuple>

#include "core/plan/step_model.hpp"

namespace gs {

enum class StepKernelKind {
  AdamW,            // one optimizer step over `elements` parameters in `tensors` tensors
  GradNorm,         // L2 norm over `elements` gradient values in `tensors` tensors (clipping)
  ZeroGrad,         // zeroing `elements` gradient values (a contiguous buffer: one memset)
  CrossEntropyFwd,  // loss over logits [rows = tokens, cols = vocab]
  CrossEntropyBwd,  // its gradient w.r.t. the logits
  EmbeddingFwd,     // gather of `rows` token rows of width `cols` from a [vocab, cols] table
  EmbeddingBwd,     // scatter-add of `rows` gradient rows into a [vocab, cols] table gradient
  LaunchLatency,    // host cost of one kernel launch (an empty kernel, launched back to back)
};
const char* to_string(StepKernelKind k);  // "adamw", "grad-norm", ...

// How the framework keeps parameters, gradients and optimizer states.
enum class ParamStorage {
  Bf16,           // plain PyTorch with BF16 parameters: grads and Adam states in BF16
  Fp32,           // plain PyTorch with FP32 parameters (autocast): everything FP32
  Bf16MainFp32,   // Megatron-LM / Transformer Engine: BF16 params, FP32 main params, grads and states
};
const char* to_string(ParamStorage s);  // "bf16", "fp32", "bf16+fp32-main"

struct StepKernelSpec {
  StepKernelKind kind = StepKernelKind::LaunchLatency;
  int64_t elements = 0;  // AdamW, GradNorm, ZeroGrad: values over all tensors
  int64_t tensors = 1;   // AdamW, GradNorm: how many parameter tensors (multi-tensor chunks)
  int64_t rows = 0;      // CrossEntropy*: tokens; Embedding*: tokens
  int64_t cols = 0;      // CrossEntropy*: vocabulary; Embedding*: hidden width
  int64_t vocab = 0;     // Embedding*: the table's rows
  ParamStorage storage = ParamStorage::Bf16MainFp32;  // AdamW, GradNorm, ZeroGrad
  // CrossEntropy*: true for a fused kernel (logits read once in BF16, FP32 math in registers,
  // BF16 gradient written), false for the unfused chain (upcast to FP32, log-softmax, NLL).
  bool fused = false;
  std::string describe() const;  // "adamw 8.03e9 params in 291 tensors (bf16+fp32-main)"
  // What makes two specs the same kernel: every field (describe() rounds the counts, so two
  // different kernels can read alike).
  auto key() const { return std::tie(kind, elements, tensors, rows, cols, vocab, storage, fused); }
};
// Orders specs by key(): for maps and sets of step kernels.
struct StepKernelKeyLess {
  bool operator()(const StepKernelSpec& a, const StepKernelSpec& b) const { return a.key() < b.key(); }
};

// Bytes the kernel moves (read + written) as the framework runs it: the roofline denominator and the
// model when the engine cannot measure it.
double step_kernel_bytes(const StepKernelSpec& s);

// The framework's own kernel's rate relative to gemmscope's stand-in of it (the framework's time is
// the stand-in's measured time / rate): kPyTorchKernelRate where the framework is PyTorch (eager or
// compile) and the kernel is PyTorch's (the fused AdamW, the foreach norm, zero-grad, the embedding,
// the eager cross-entropy); 1 where no framework kernel was set beside it (Transformer Engine /
// Megatron-LM: none on the validation machine; torch.compile's fused loss: Inductor's own kernel)
// and for the launch latency.
double step_kernel_rate(const StepKernelSpec& s, StepContextKind framework);

}  // namespace gs
