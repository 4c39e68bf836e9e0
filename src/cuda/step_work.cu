#include "cuda/step_work.hpp"

#include <algorithm>
#include <cmath>

#include "cuda/cuda_check.hpp"

namespace gs::cuda {
namespace {

// Copies `total` 16-byte words from src to dst, index modulo the buffers' `words`.
__global__ void stream_copy(const uint4* __restrict__ src, uint4* __restrict__ dst, int64_t words, int64_t total) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t j = i % words;
    dst[j] = src[j];
  }
}

}  // namespace

StepWork::StepWork(int64_t l2_bytes, cudaStream_t stream) {
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(2 * l2_bytes, int64_t{64} << 20));
  int device = 0;
  GS_CUDA(cudaGetDevice(&device));
  GS_CUDA(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device));
  src_ = DeviceBuffer(bytes);
  dst_ = DeviceBuffer(bytes);
  GS_CUDA(cudaMemsetAsync(src_.get(), 0, bytes, stream));
  // Calibration: four passes over the buffers, twice (the first warms the clocks and the code).
  cudaEvent_t a = nullptr, b = nullptr;
  GS_CUDA(cudaEventCreate(&a));
  GS_CUDA(cudaEventCreate(&b));
  const int64_t moved = 8 * static_cast<int64_t>(bytes);  // 4 passes x (read + write)
  float ms = 0;
  for (int rep = 0; rep < 2; ++rep) {
    GS_CUDA(cudaEventRecord(a, stream));
    launch(moved, stream);
    GS_CUDA(cudaEventRecord(b, stream));
    GS_CUDA(cudaEventSynchronize(b));
    GS_CUDA(cudaEventElapsedTime(&ms, a, b));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  bytes_per_ms_ = static_cast<double>(moved) / std::max(ms, 1e-3f);
}

void StepWork::launch(int64_t bytes, cudaStream_t stream) const {
  const int64_t words = static_cast<int64_t>(src_.bytes() / sizeof(uint4));
  const int64_t total = std::max<int64_t>(bytes / (2 * static_cast<int64_t>(sizeof(uint4))), 1);
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, int64_t{sms_} * 8);
  stream_copy<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(src_.get<uint4>(), dst_.get<uint4>(), words, total);
  GS_CUDA(cudaGetLastError());
}

void StepWork::enqueue(double ms, cudaStream_t stream) const {
  if (!(ms > 0)) return;
  launch(static_cast<int64_t>(std::llround(ms * bytes_per_ms_)), stream);
}

}  // namespace gs::cuda
