#include "cuda/common/cuda_check.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/common/error_norm.cuh"

#include <cmath>
#include <type_traits>

namespace gs::cuda {

namespace {

template <class T>
__device__ double load_as_double(const void* p, size_t i) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return static_cast<double>(__bfloat162float(static_cast<const T*>(p)[i]));
  else return static_cast<double>(static_cast<const T*>(p)[i]);
}

// x of type X, ref of type R.
template <class X, class R>
__global__ void error_kernel(const void* x, const void* ref, size_t n, const float* alpha, double* out) {
  double num = 0, den = 0, bad = 0;
  const double a = alpha ? static_cast<double>(*alpha) : 1.0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const double v = load_as_double<X>(x, i);
    const double r = load_as_double<R>(ref, i);
    if (!isfinite(v) || !isfinite(r)) bad += 1;
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

namespace {

template <class X, class R>
double run_error_kernel(const void* x, const void* ref, size_t n, const float* alpha, cudaStream_t s) {
  DeviceBuffer acc(3 * sizeof(double));
  GS_CUDA(cudaMemsetAsync(acc.get(), 0, acc.bytes(), s));
  const int threads = 256, blocks = 1024;
  error_kernel<X, R><<<blocks, threads, 0, s>>>(x, ref, n, alpha, acc.get<double>());
  GS_CUDA_LAUNCH();
  double h[3];
  GS_CUDA(cudaMemcpyAsync(h, acc.get(), sizeof h, cudaMemcpyDeviceToHost, s));
  GS_CUDA(cudaStreamSynchronize(s));
  if (h[2] > 0) return INFINITY;  // a non-finite element: never a silently small error
  return h[1] > 0 ? std::sqrt(h[0] / h[1]) : 0.0;
}

}  // namespace

double rel_frobenius_error(const void* x, bool x_is_bf16, const float* ref, size_t n, const float* alpha,
                           cudaStream_t s) {
  return x_is_bf16 ? run_error_kernel<__nv_bfloat16, float>(x, ref, n, alpha, s)
                   : run_error_kernel<float, float>(x, ref, n, alpha, s);
}

double rel_frobenius_difference(const void* x, const void* ref, bool bf16, size_t n, cudaStream_t s) {
  return bf16 ? run_error_kernel<__nv_bfloat16, __nv_bfloat16>(x, ref, n, nullptr, s)
              : run_error_kernel<float, float>(x, ref, n, nullptr, s);
}

}  // namespace gs::cuda
