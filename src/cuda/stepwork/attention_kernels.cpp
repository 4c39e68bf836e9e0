// The step context's attention (step_context_runner.hpp): cuDNN's fused attention, BF16, as
// Transformer Engine runs it on Hopper (attention_cudnn.hpp).
#include <fmt/format.h>

#include "cuda/attention/attention_cudnn.hpp"
#include "cuda/stepwork/step_context_runner.hpp"

namespace gs::cuda {
namespace {

class CudnnAttentionKernels final : public AttentionKernels {
 public:
  explicit CudnnAttentionKernels(std::unique_ptr<CudnnAttention> a) : a_(std::move(a)) {}
  void enqueue_forward(cudaStream_t s) override { a_->forward(s); }
  void enqueue_backward(cudaStream_t s) override { a_->backward(s); }
  // cuDNN's SDPA runs one fused kernel per pass on Hopper, plus a few small ones (the backward's
  // dO·O row sums and the dQ conversion): a bound, not a count.
  int launches_forward() const override { return 4; }
  int launches_backward() const override { return 8; }
  std::string source() const override {
    return fmt::format("cuDNN {} fused attention, BF16", cudnn_loaded_version());
  }

 private:
  std::unique_ptr<CudnnAttention> a_;
};

}  // namespace

std::unique_ptr<AttentionKernels> make_attention_kernels(const AttentionShape& a, cudaStream_t, std::string& why) {
  std::unique_ptr<CudnnAttention> c = CudnnAttention::create(a, AttentionDtype::BF16, /*seed=*/0x5eed, why);
  if (!c) return nullptr;
  return std::make_unique<CudnnAttentionKernels>(std::move(c));
}

}  // namespace gs::cuda
