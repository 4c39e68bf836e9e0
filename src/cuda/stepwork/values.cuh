// Loads and stores of BF16 and FP32 values as FP32 math values, one at a time or four at a time
// (one 8- or 16-byte access), for the stepwork kernels. Device code only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace gs::cuda::stepwork {

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// Four consecutive values at p (16-byte aligned for FP32, 8-byte for BF16).
__device__ __forceinline__ void load4(const float* p, float v[4]) {
  const float4 x = *reinterpret_cast<const float4*>(p);
  v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
}
__device__ __forceinline__ void load4(const __nv_bfloat16* p, float v[4]) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
  const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
  v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}
__device__ __forceinline__ void store4(float* p, const float v[4]) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store4(__nv_bfloat16* p, const float v[4]) {
  uint2 raw;
  *reinterpret_cast<__nv_bfloat162*>(&raw.x) = __floats2bfloat162_rn(v[0], v[1]);
  *reinterpret_cast<__nv_bfloat162*>(&raw.y) = __floats2bfloat162_rn(v[2], v[3]);
  *reinterpret_cast<uint2*>(p) = raw;
}

// `op` over the block (blockDim.x a multiple of 32, at most 1024): every thread gets the result.
// `idle` is op's neutral value (0 for a sum, -FLT_MAX for a maximum).
template <class Op>
__device__ __forceinline__ float block_reduce(float x, Op op, float idle) {
  __shared__ float warp_results[32];
  for (int o = 16; o > 0; o >>= 1) x = op(x, __shfl_xor_sync(0xffffffffu, x, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // warp_results may still be read by a previous call
  if (lane == 0) warp_results[warp] = x;
  __syncthreads();
  x = lane < warps ? warp_results[lane] : idle;
  for (int o = 16; o > 0; o >>= 1) x = op(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float block_sum(float x) {
  return block_reduce(x, [](float a, float b) { return a + b; }, 0.f);
}
__device__ __forceinline__ float block_max(float x) {
  return block_reduce(x, [](float a, float b) { return fmaxf(a, b); }, -3.402823466e38f);
}

}  // namespace gs::cuda::stepwork
