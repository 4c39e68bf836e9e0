#include "core/step/step_kernels.hpp"

#include <fmt/format.h>

namespace gs {

const char* to_string(StepKernelKind k) {
  switch (k) {
    case StepKernelKind::AdamW: return "adamw";
    case StepKernelKind::GradNorm: return "grad-norm";
    case StepKernelKind::ZeroGrad: return "zero-grad";
    case StepKernelKind::CrossEntropyFwd: return "cross-entropy-fwd";
    case StepKernelKind::CrossEntropyBwd: return "cross-entropy-bwd";
    case StepKernelKind::EmbeddingFwd: return "embedding-fwd";
    case StepKernelKind::EmbeddingBwd: return "embedding-bwd";
    case StepKernelKind::LaunchLatency: return "launch-latency";
  }
  return "?";
}

const char* to_string(ParamStorage s) {
  switch (s) {
    case ParamStorage::Bf16: return "bf16";
    case ParamStorage::Fp32: return "fp32";
    case ParamStorage::Bf16MainFp32: return "bf16+fp32-main";
  }
  return "?";
}

std::string StepKernelSpec::describe() const {
  switch (kind) {
    case StepKernelKind::AdamW:
    case StepKernelKind::GradNorm:
    case StepKernelKind::ZeroGrad:
      return fmt::format("{} {:.3g} values in {} tensors ({})", to_string(kind), static_cast<double>(elements), tensors,
                         to_string(storage));
    case StepKernelKind::CrossEntropyFwd:
    case StepKernelKind::CrossEntropyBwd:
      return fmt::format("{} {} tokens x vocab {} ({})", to_string(kind), rows, cols, fused ? "fused" : "unfused");
    case StepKernelKind::EmbeddingFwd:
    case StepKernelKind::EmbeddingBwd:
      return fmt::format("{} {} tokens x {} of a {}-row table", to_string(kind), rows, cols, vocab);
    case StepKernelKind::LaunchLatency: return "launch-latency";
  }
  return "?";
}

namespace {
// Bytes per value of a parameter update: reads and writes as the optimizer kernels run them.
double adamw_bytes_per_param(ParamStorage s) {
  switch (s) {
    case ParamStorage::Bf16: return 4 * 2 + 3 * 2;          // read p, g, m, v; write p, m, v
    case ParamStorage::Fp32: return 4 * 4 + 3 * 4;
    case ParamStorage::Bf16MainFp32: return 4 * 4 + 3 * 4 + 2;  // FP32 master p, g, m, v; + BF16 param copy
  }
  return 0;
}
double grad_bytes(ParamStorage s) { return s == ParamStorage::Bf16 ? 2 : 4; }
}  // namespace

double step_kernel_bytes(const StepKernelSpec& s) {
  const double e = static_cast<double>(s.elements);
  const double rc = static_cast<double>(s.rows) * static_cast<double>(s.cols);
  switch (s.kind) {
    case StepKernelKind::AdamW: return e * adamw_bytes_per_param(s.storage);
    case StepKernelKind::GradNorm: return e * grad_bytes(s.storage);
    case StepKernelKind::ZeroGrad: return e * grad_bytes(s.storage);
    // Unfused: upcast (read 2, write 4), log-softmax (read 4, write 4), NLL gather (negligible);
    // fused: the BF16 logits read once.
    case StepKernelKind::CrossEntropyFwd: return s.fused ? rc * 2 : rc * (2 + 4 + 4 + 4);
    // Unfused: softmax gradient (read 4, write 4), downcast (read 4, write 2); fused: read the BF16
    // logits, write the BF16 gradient.
    case StepKernelKind::CrossEntropyBwd: return s.fused ? rc * (2 + 2) : rc * (4 + 4 + 4 + 2);
    case StepKernelKind::EmbeddingFwd: return rc * 2 * 2;  // BF16 rows read and written
    // The table gradient zeroed, then the rows added into it (read the row, read-modify-write).
    case StepKernelKind::EmbeddingBwd:
      return static_cast<double>(s.vocab) * static_cast<double>(s.cols) * 2 + rc * 2 * 3;
    case StepKernelKind::LaunchLatency: return 0;
  }
  return 0;
}

double step_kernel_rate(const StepKernelSpec& s, StepContextKind framework) {
  const bool pytorch = framework == StepContextKind::Eager || framework == StepContextKind::Compiled;
  if (!pytorch || s.kind == StepKernelKind::LaunchLatency) return 1.0;
  const bool loss = s.kind == StepKernelKind::CrossEntropyFwd || s.kind == StepKernelKind::CrossEntropyBwd;
  if (loss && s.fused) return 1.0;
  return kPyTorchKernelRate;
}

}  // namespace gs
