#include "cuda/cuda_check.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/error_norm.cuh"

#include <cmath>

namespace gs::cuda {

namespace {

template <bool kBf16>
__global__ void error_kernel(const void* x, const float* ref, size_t n, const float* alpha, double* out) {
  double num = 0, den = 0, bad = 0;
  const double a = alpha ? static_cast<double>(*alpha) : 1.0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const double v = kBf16 ? static_cast<double>(__bfloat162float(static_cast<const __nv_bfloat16*>(x)[i]))
                           : static_cast<double>(static_cast<const float*>(x)[i]);
    const double r = ref[i];
    if (!isfinite(v)) bad += 1;
    num += (a * v - r) * (a * v - r);
    den += r * r;
  }
  for (int o = 16; o > 0; o >>= 1) {
    num += __shfl_down_sync(0xffffffffu, num, o);
    den += __shfl_down_sync(0xffffffffu, den, o);
    bad += __shfl_down_sync(0xffffffffu, bad, o);
  }
  __shared__ double sm[3][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) { sm[0][warp] = num; sm[1][warp] = den; sm[2][warp] = bad; }
  __syncthreads();
  if (threadIdx.x == 0) {
    double t[3] = {0, 0, 0};
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w)
      for (int j = 0; j < 3; ++j) t[j] += sm[j][w];
    for (int j = 0; j < 3; ++j) atomicAdd(&out[j], t[j]);
  }
}

}  // namespace

double rel_frobenius_error(const void* x, bool x_is_bf16, const float* ref, size_t n, const float* alpha,
                           cudaStream_t s) {
  DeviceBuffer acc(3 * sizeof(double));
  GS_CUDA(cudaMemsetAsync(acc.get(), 0, acc.bytes(), s));
  const int threads = 256, blocks = 1024;
  if (x_is_bf16) error_kernel<true><<<blocks, threads, 0, s>>>(x, ref, n, alpha, acc.get<double>());
  else error_kernel<false><<<blocks, threads, 0, s>>>(x, ref, n, alpha, acc.get<double>());
  GS_CUDA_LAUNCH();
  double h[3];
  GS_CUDA(cudaMemcpyAsync(h, acc.get(), sizeof h, cudaMemcpyDeviceToHost, s));
  GS_CUDA(cudaStreamSynchronize(s));
  if (h[2] > 0) return INFINITY;  // a non-finite output element: never a silently small error
  return h[1] > 0 ? std::sqrt(h[0] / h[1]) : 0.0;
}

}  // namespace gs::cuda
