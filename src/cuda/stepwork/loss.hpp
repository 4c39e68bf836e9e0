// The loss over the vocabulary: mean cross-entropy of [rows = tokens, cols = vocabulary] BF16 logits
// against int64 targets, forward and backward (the gradient w.r.t. the logits, for a loss gradient
// of 1), as the frameworks run it:
//   unfused  eager PyTorch as Hugging Face's causal-LM loss runs it: logits.float(), then
//            F.cross_entropy = log_softmax + nll_loss. Forward: the upcast (read BF16, write FP32),
//            the log-softmax (PyTorch's cunn_SoftMaxForward for rows too long for shared memory: one
//            block per row, a max pass, a sum-of-exponentials pass and a pass that writes the FP32
//            log-probabilities), the NLL gather and mean. Backward: the NLL gradient (the FP32
//            gradient zeroed, -1/rows written at each target), the log-softmax gradient (a pass
//            summing the incoming gradient, then one reading it and the log-probabilities and writing
//            the FP32 gradient), the downcast to BF16. Later passes over a row re-read it from L2 or
//            HBM, as the GPU's caches have it: as in PyTorch.
//   fused    one pass each way, FP32 in registers (torch.compile's Inductor kernels, Megatron-LM's
//            and Transformer Engine's fused cross-entropy): forward reads the BF16 logits once
//            (online max and sum per row) and writes each row's loss and log-sum-exp, then the
//            mean; backward reads the logits and each row's log-sum-exp and writes the BF16 gradient.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/common/device_buffer.hpp"
#include "cuda/stepwork/step_run.hpp"

namespace gs::cuda::stepwork {

class CrossEntropy {
 public:
  // `logits` and `targets` stay the caller's; the workspace, the loss and the gradient are owned.
  CrossEntropy(bool fused, int64_t rows, int64_t cols, const __nv_bfloat16* logits, const int64_t* targets);
  // Device bytes the workspace, loss and gradient take (the logits and targets not counted).
  static size_t owned_bytes(bool fused, int64_t rows, int64_t cols);

  int forward_pieces() const { return fused_ ? 2 : 3; }
  void forward(int piece, cudaStream_t s);
  int backward_pieces() const { return fused_ ? 1 : 4; }
  void backward(int piece, cudaStream_t s);  // needs a forward before it (log-probabilities, log-sum-exp)
  std::string describe(bool backward) const;

  const float* loss() const { return loss_.get<float>(); }  // device scalar, after the forward
  const __nv_bfloat16* grad() const { return grad_.get<__nv_bfloat16>(); }  // [rows, cols], after the backward

 private:
  bool fused_;
  int64_t rows_, cols_;
  const __nv_bfloat16* logits_;
  const int64_t* targets_;
  DeviceBuffer f32_logits_, logp_, f32_grad_;  // unfused
  DeviceBuffer row_loss_, row_lse_;            // fused
  DeviceBuffer loss_, grad_;
};

}  // namespace gs::cuda::stepwork
