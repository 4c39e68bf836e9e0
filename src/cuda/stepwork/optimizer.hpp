// The optimizer's kernels as the frameworks run them, over tensors the caller owns:
//   - AdamW, one multi-tensor pass (multi_tensor.cuh) per step. The math is PyTorch's fused AdamW
//     (torch.optim.AdamW(fused=True), aten's fused_adamw): decoupled weight decay, then
//     m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps),
//     in FP32 whatever the storage. Storage (core/step/step_kernels.hpp ParamStorage):
//       Bf16          p, g, m, v BF16: PyTorch keeps exp_avg and exp_avg_sq in the parameter's dtype
//                     (torch.zeros_like(p)), so a BF16 model's states are BF16;
//       Fp32          p, g, m, v FP32;
//       Bf16MainFp32  FP32 master p, FP32 main gradient, FP32 m and v, and the BF16 model copy of p
//                     written by the same pass (Transformer Engine's FusedAdam with master weights,
//                     Megatron-LM's --use-precision-aware-optimizer). Megatron-LM's distributed
//                     optimizer without it copies the main params to the model's in a pass of its
//                     own, which reads the FP32 main params once more (4 bytes per parameter).
//   - the gradients' L2 norm for clipping (apex / Transformer Engine multi_tensor_l2norm as
//     Megatron-LM calls it, PyTorch's _foreach_norm): per-chunk sums of squares in FP32 added into
//     one partial per block slot, then one block reduces the partials. Only the norm: the scale of
//     the gradients by the clip coefficient is a pass of its own (PyTorch's clip_grad_norm_ always
//     runs it, Megatron-LM only when the norm exceeds the threshold).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/step/step_kernels.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/stepwork/step_run.hpp"

namespace gs::cuda::stepwork {

struct AdamWHyper {
  float lr = 3e-4f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
  int step = 1;  // the bias corrections' t (PyTorch reads it per tensor from a device scalar)
};

// One parameter tensor's device addresses (16-byte aligned), typed by the storage: BF16 values for
// Bf16, FP32 for Fp32; Bf16MainFp32: p, g, m, v FP32 and p_copy BF16 (null otherwise).
struct AdamWTensor {
  void* p = nullptr;
  void* g = nullptr;
  void* m = nullptr;
  void* v = nullptr;
  void* p_copy = nullptr;
  int64_t numel = 0;
};

// One optimizer step: its multi-tensor launches, planned at construction.
class AdamWStep final : public StepRun {
 public:
  AdamWStep(ParamStorage storage, const std::vector<AdamWTensor>& tensors, const AdamWHyper& h);
  ~AdamWStep() override;
  int pieces() const override;
  void enqueue(int piece, cudaStream_t s) override;
  std::string describe() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The L2 norm of every gradient value (BF16 or FP32) of the tensors, written to norm() by the last
// piece: the partials' reset (a memset), the multi-tensor launches, the final reduction.
class GradNorm final : public StepRun {
 public:
  GradNorm(bool bf16, const std::vector<const void*>& grads, const std::vector<int64_t>& numel);
  ~GradNorm() override;
  int pieces() const override;
  void enqueue(int piece, cudaStream_t s) override;
  std::string describe() const override;
  const float* norm() const;  // device address of the result

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gs::cuda::stepwork
