// Device helpers shared by the quantization kernels (quantize.cu): 16-byte vector access to
// BF16x8 / FP8x16, saturating round-to-nearest-even FP8 conversion, |x| maxima computed on
// BF16 bit patterns, warp/block max reductions, and the scale formula.
//
// Only included by .cu files of the CUDA backend.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "cuda/quant/quantize.cuh"

namespace gs::cuda::qc {

constexpr unsigned kFullMask = 0xffffffffu;

template <Fp8Kind K>
struct Fp8Info;
template <>
struct Fp8Info<Fp8Kind::E4M3> {
  static constexpr float kMax = 448.f;
  static constexpr __nv_fp8_interpretation_t kInterp = __NV_E4M3;
};
template <>
struct Fp8Info<Fp8Kind::E5M2> {
  static constexpr float kMax = 57344.f;
  static constexpr __nv_fp8_interpretation_t kInterp = __NV_E5M2;
};

// ---- scale formula ------------------------------------------------------------------------
// scale = fmax / amax, in FP32 with IEEE division (the backend is built without fast math).
// amax == 0, negative, NaN or +inf -> `fallback` (1 for current/block scaling, the previous
// scale for delayed scaling, as Transformer Engine does). A tiny (e.g. denormal) amax whose
// quotient overflows gives FLT_MAX instead of +inf. The dequantization scale is 1 / scale.
__host__ __device__ __forceinline__ float scale_from_amax(float amax, float fmax, float fallback) {
  if (!(amax > 0.f) || !(amax <= FLT_MAX)) return fallback;
  const float s = fmax / amax;
  return s <= FLT_MAX ? s : FLT_MAX;
}

// Block scaling's scale: scale_from_amax with fallback 1; pow2 rounds it down to a power of two
// by clearing its mantissa (the scale is a positive normal float or 1 here). Mirrors the host
// reference gs::nf::fp8_block_scale (core/formats/formats.hpp).
__host__ __device__ __forceinline__ float block_scale(float amax, float fmax, bool pow2) {
  const float s = scale_from_amax(amax, fmax, 1.f);
  if (!pow2) return s;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(__float_as_uint(s) & 0xff800000u);
#else
  uint32_t b;
  __builtin_memcpy(&b, &s, sizeof b);
  b &= 0xff800000u;
  float r;
  __builtin_memcpy(&r, &b, sizeof r);
  return r;
#endif
}

// ---- Programmatic dependent launch (sm_90+) ------------------------------------------------
// A kernel launched with the programmatic-stream-serialization attribute calls pdl_wait()
// before touching any global memory: it returns once the preceding kernel in the stream has
// completed and its writes are visible. Without the attribute it returns at once.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// Lets the next (programmatically dependent) kernel in the stream start launching early.
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ---- 16-byte / 8-byte global access ---------------------------------------------------------
__device__ __forceinline__ uint4 ldg16(const void* p) {
  return __ldg(static_cast<const uint4*>(p));
}
__device__ __forceinline__ void stg16(void* p, uint4 v) { *static_cast<uint4*>(p) = v; }
__device__ __forceinline__ void stg8(void* p, uint2 v) { *static_cast<uint2*>(p) = v; }

// ---- BF16 bit tricks ------------------------------------------------------------------------
// A 32-bit word of a bf16x8 vector holds element 2k in its low half and 2k+1 in its high half.
__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// Per-halfword unsigned max. For |x| bit patterns (sign cleared) the unsigned order of BF16
// bits is the numeric order, so this is an exact max of magnitudes; a NaN (bits above +inf)
// wins, i.e. NaN propagates into amax.
__device__ __forceinline__ uint32_t max_u16x2(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t r;
  asm("max.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
#else
  return __vmaxu2(a, b);
#endif
}
// Running packed |x| max over a bf16x8 vector.
__device__ __forceinline__ uint32_t absmax_acc(uint32_t acc, uint4 v) {
  const uint32_t m = 0x7fff7fffu;
  acc = max_u16x2(acc, v.x & m);
  acc = max_u16x2(acc, v.y & m);
  acc = max_u16x2(acc, v.z & m);
  acc = max_u16x2(acc, v.w & m);
  return acc;
}
// Packed pair of |bf16| maxima -> FP32 bit pattern of the larger one. FP32 bit patterns of
// non-negative values compare like the values as unsigned integers.
__device__ __forceinline__ uint32_t fold_to_f32bits(uint32_t packed) {
  const uint32_t lo = packed & 0xffffu, hi = packed >> 16;
  return (lo > hi ? lo : hi) << 16;
}

// ---- FP8 conversion ---------------------------------------------------------------------------
// Saturating (finite values beyond the range -> +-max), round-to-nearest-even.
// Returns the two bytes in the low 16 bits, `a` in the low byte.
template <Fp8Kind K>
__device__ __forceinline__ uint32_t cvt_fp8x2(float a, float b) {
  return static_cast<uint32_t>(
      __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, Fp8Info<K>::kInterp));
}
// 8 BF16 -> 8 FP8 bytes (element order preserved) with a common scale.
template <Fp8Kind K>
__device__ __forceinline__ uint2 quant8(uint4 v, float s) {
  uint2 r;
  r.x = cvt_fp8x2<K>(bf16_lo(v.x) * s, bf16_hi(v.x) * s) |
        (cvt_fp8x2<K>(bf16_lo(v.y) * s, bf16_hi(v.y) * s) << 16);
  r.y = cvt_fp8x2<K>(bf16_lo(v.z) * s, bf16_hi(v.z) * s) |
        (cvt_fp8x2<K>(bf16_lo(v.w) * s, bf16_hi(v.w) * s) << 16);
  return r;
}

// ---- reductions (unsigned max; used on FP32 bit patterns of values >= 0) -------------------
__device__ __forceinline__ uint32_t warp_max_u32(uint32_t v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
// Block-wide max, result in every thread. `red` holds kThreads/32 words of shared memory.
// Safe to call repeatedly with the same `red` (ends with a barrier).
template <int kThreads>
__device__ __forceinline__ uint32_t block_max_u32(uint32_t v, uint32_t* red) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "block size");
  constexpr int kWarps = kThreads / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max_u32(v);
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < kWarps ? red[lane] : 0u;
  v = warp_max_u32(v);
  __syncthreads();
  return v;
}

}  // namespace gs::cuda::qc
