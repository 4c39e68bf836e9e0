// make_attention_kernels without a measured attention implementation in this build.
#include "cuda/step_context_runner.hpp"

namespace gs::cuda {

std::unique_ptr<AttentionKernels> make_attention_kernels(const AttentionWork&, cudaStream_t, std::string& why) {
  why = "this build has no cuDNN attention (GEMMSCOPE_CUDNN_FRONTEND_DIR)";
  return nullptr;
}

}  // namespace gs::cuda
