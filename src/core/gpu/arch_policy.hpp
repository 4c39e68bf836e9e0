// What a GPU architecture can run, in one place: every rule that depends on the compute capability
// (major * 10 + minor). Planning, the runner, the engine, predict, the roofline and the kernel
// providers ask it; nothing else compares compute capabilities.
//
// Adding an architecture rule: a member here, its test in tests/core/gpu/test_arch_policy.cpp, and the
// code that uses it.
#pragma once
#include <string>

#include "core/recipes/recipe.hpp"

namespace gs {

// The tensor-core number formats a datasheet lists peaks for.
enum class PeakFormat { BF16, FP8, MXFP8, NVFP4 };
const char* to_string(PeakFormat f);
inline constexpr PeakFormat kAllPeakFormats[] = {PeakFormat::BF16, PeakFormat::FP8, PeakFormat::MXFP8, PeakFormat::NVFP4};

class ArchPolicy {
 public:
  explicit ArchPolicy(int compute_capability) : cc_(compute_capability) {}
  int cc() const { return cc_; }
  std::string cc_text() const;  // "9.0"

  // The lowest compute capability whose tensor cores run a precision's GEMM in cuBLASLt: BF16 8.0,
  // FP8 per-tensor 8.9, FP8 block scaling 9.0, MXFP8 and NVFP4 10.0.
  static int min_cc(Precision p);
  bool times(Precision p) const { return cc_ >= min_cc(p); }
  // "" when times(p); else "needs compute capability >= 9.0 (device is 8.9)".
  std::string why_not(Precision p) const;

  // Blackwell's cuBLASLt has no 1x128/128x128 FP8 kernels: the block recipe runs as MXFP8
  // (Transformer Engine does the same), and its peak is MXFP8's.
  bool fp8_block_via_mxfp8() const { return cc_ >= 100; }
  // The datasheet format whose peak bounds precision p here.
  PeakFormat peak_format(Precision p) const;
  // Dense BF16 tensor-core FLOPs per SM per clock (the step context's compute model).
  int bf16_dense_flops_per_sm_clock() const;
  // The fraction of the dense BF16 peak a fused flash-attention kernel reaches, forward and backward
  // together: `cudnn` for Transformer Engine's cuDNN fused attention (Hopper and later:
  // kAttentionPeakFraction, core/plan/step_model.hpp, measured on an H200), else FlashAttention-2 as
  // PyTorch's SDPA and llm-foundry run it (Hopper: 0.33, 328 TFLOP/s of 989 on an H100 at head dim
  // 128, sequence 8192, Azure ND H100 v5 benchmark; Ampere, both: 0.62, FlashAttention-2 paper,
  // 187-225 TFLOP/s fwd+bwd of 312 on an A100 at head dim 128).
  double flash_attention_peak_fraction(bool cudnn) const;
  // Whether the device converts to FP4 in hardware (a probe worth running: Blackwell only).
  bool may_convert_fp4_in_hardware() const { return cc_ >= 100; }
  // The sm_90a kernels CUTLASS's provider builds and DeepGEMM's sm90 kernels run on Hopper only.
  bool runs_sm90a_kernels() const { return cc_ == 90; }

 private:
  int cc_;
};

}  // namespace gs
