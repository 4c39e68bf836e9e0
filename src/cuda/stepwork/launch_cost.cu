#include "cuda/stepwork/launch_cost.hpp"

#include <chrono>

#include "cuda/common/cuda_check.hpp"

namespace gs::cuda::stepwork {
namespace {

__global__ void empty_kernel() {}

}  // namespace

std::vector<double> launch_cost_ms(cudaStream_t s, int warmup, int batches) {
  std::vector<double> out;
  for (int b = 0; b < warmup + batches; ++b) {
    GS_CUDA(cudaStreamSynchronize(s));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kLaunchBatch; ++i) empty_kernel<<<1, 32, 0, s>>>();
    const auto t1 = std::chrono::steady_clock::now();
    GS_CUDA_LAUNCH();
    if (b >= warmup) out.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count() / kLaunchBatch);
  }
  GS_CUDA(cudaStreamSynchronize(s));
  return out;
}

}  // namespace gs::cuda::stepwork
