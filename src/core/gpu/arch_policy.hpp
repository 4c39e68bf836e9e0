// What a GPU architecture can run, in one place: every rule that depends on the compute capability
// (major * 10 + minor). Planning, the runner, the engine, predict, the roofline and the kernel
// providers ask it; nothing else compares compute capabilities.
//
// Adding an architecture rule: a member here, its test in tests/core/gpu/test_arch_policy.cpp, and the
// code that uses it.
#pragma once
#include <optional>
#include <string>

#include "core/recipes/recipe.hpp"

namespace gs {

// The tensor-core number formats a datasheet lists peaks for.
enum class PeakFormat { BF16, FP8, MXFP8, NVFP4 };
const char* to_string(PeakFormat f);
inline constexpr PeakFormat kAllPeakFormats[] = {PeakFormat::BF16, PeakFormat::FP8, PeakFormat::MXFP8, PeakFormat::NVFP4};

// The machine-code target of gemmscope's architecture-specific kernels, as DeepGEMM's ArchSpec
// is one per architecture: CUTLASS's instantiations (sm_90a wgmma/TMA kernels, built at compile
// time) and DeepGEMM's kernels (compiled at run time by NVRTC) are built for it, and run only on
// its compute capability (architecture-specific "a" code runs on no other GPU).
struct KernelTarget {
  int cc = 0;               // the compute capability that runs them
  std::string arch;         // "sm_90a": NVRTC's --gpu-architecture and the JIT cache key's arch
  std::string cmake_arch;   // "90a-real": the CUTLASS units' CUDA_ARCHITECTURES (CMakeLists.txt)
  std::string cutlass_tag;  // "cutlass::arch::Sm90": the CUTLASS builds' ArchTag
                            // (src/cuda/providers/cutlass/kernels/cutlass_arch.cuh)
  std::string family;       // "Hopper": how messages name the GPUs it runs on
  std::string nvrtc_arch_option() const { return "--gpu-architecture=" + arch; }
};

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
  // The target gemmscope's architecture-specific kernels are built for: CUTLASS's instantiations
  // (CMakeLists.txt and cutlass_arch.cuh name it; tests/core/gpu/test_arch_policy.cpp checks they
  // agree) and DeepGEMM's JIT (its sm90 heuristics, core/providers/deepgemm_config.hpp). One today;
  // a build for another architecture would add its own and the providers take the device's.
  static const KernelTarget& arch_kernels_target();
  // This device's target of the architecture-specific kernels; nullopt where none is built (the
  // CUTLASS and DeepGEMM providers refuse the device, naming the target they have).
  std::optional<KernelTarget> kernel_target() const;
  // Whether code built for a CMake CUDA architecture ("90-real", "90a-real", "90-virtual", "80")
  // runs on this device: machine code ("-real") on the same major with a minor at least its own
  // (sm_80 runs on 8.6 and 8.9), architecture-specific code ("90a") on exactly its compute
  // capability, PTX ("-virtual", or a bare number, which CMake builds as both) on every device of
  // that compute capability or newer (JIT-compiled by the driver). False for a spelling it cannot read.
  bool runs_code_built_for(const std::string& cmake_arch) const;
  // The newest architecture gemmscope knows: its peak formats name every recipe's tensor-core format
  // (predict compares two recipes' formats there, core/analysis/predict.cpp).
  static ArchPolicy newest();

 private:
  int cc_;
};

}  // namespace gs
