#include <cuda_fp8.h>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/fill.cuh"

namespace gs::cuda {

namespace {

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__device__ __forceinline__ float uniform01(uint64_t bits) {  // (0, 1]
  return (static_cast<float>(bits >> 40) + 1.0f) * (1.0f / 16777216.0f);
}

__device__ __forceinline__ void store(__nv_bfloat16* x, size_t i, float v) { x[i] = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(uint8_t* x, size_t i, float v) {
  x[i] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

template <class T>
__global__ void fill_kernel(T* x, size_t n, uint64_t seed, float stddev, float rate, float scale) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const uint64_t h1 = mix64(seed ^ mix64(2 * i));
    const uint64_t h2 = mix64(seed ^ mix64(2 * i + 1));
    // Box-Muller.
    const float u1 = uniform01(h1), u2 = uniform01(h2);
    float v = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2) * stddev;
    if (rate > 0.f && uniform01(mix64(h1 ^ h2)) <= rate) v *= scale;
    store(x, i, v);
  }
}

template <class T>
void launch(T* x, size_t n, uint64_t seed, float stddev, float rate, float scale, cudaStream_t s) {
  if (n == 0) return;
  const int threads = 256;
  const size_t want = (n + threads - 1) / threads;
  const int blocks = static_cast<int>(want < 65536 ? want : 65536);
  fill_kernel<<<blocks, threads, 0, s>>>(x, n, seed, stddev, rate, scale);
  GS_CUDA_LAUNCH();
}

}  // namespace

void fill_normal_bf16(__nv_bfloat16* x, size_t n, uint64_t seed, float stddev, cudaStream_t s) {
  launch(x, n, seed, stddev, 0.f, 1.f, s);
}

void fill_normal_fp8_e4m3(uint8_t* x, size_t n, uint64_t seed, float stddev, cudaStream_t s) {
  launch(x, n, seed, stddev, 0.f, 1.f, s);
}

void fill_outliers_bf16(__nv_bfloat16* x, size_t n, uint64_t seed, float stddev, float rate, float scale,
                        cudaStream_t s) {
  launch(x, n, seed, stddev, rate, scale, s);
}

}  // namespace gs::cuda
