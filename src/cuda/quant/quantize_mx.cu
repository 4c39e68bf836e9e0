// MXFP8 / NVFP4 quantization and dequantization kernels (see quantize_mx.cuh).
//
// Two quantization kernels share the per-block arithmetic:
//  * rowwise_kernel: transpose=false without 2D scaling. One thread owns one scale block
//    (32 elements for MXFP8, 16 for NVFP4), read straight from global memory with 16-byte loads;
//    consecutive threads own consecutive blocks of a row, so a warp reads and writes contiguous
//    memory. Threads past the real blocks write the zero padding of the scale buffer.
//  * tile_kernel: transpose=true and/or 2D (16x16) scaling. A CTA stages a 128 (outer) x 64 (K)
//    tile in shared memory as FP32 (loaded with 16-byte vectors, coalesced along the source row;
//    the lane mapping makes both the stores and the reads bank-conflict free), then thread
//    (o, h) owns K elements [32h, 32h+32) of outer row o. The 32 lanes of a warp hold 32
//    consecutive outer rows, so a 16x16 tile's amax is a 4-step xor-shuffle. The quantized
//    bytes go back through shared memory so that neighbouring lanes store contiguous 16-byte
//    chunks of a row. The grid covers the padded scale buffer exactly, so every scale byte
//    (padding included) is written once.
// Every FP32 operation mirrors core/formats/mx_reference.cpp in order and rounding (no fast math, no
// contractible a*b+c patterns), which is what makes the results bit-identical.
#include "cuda/quant/quantize_mx.cuh"

#include <cuda_fp8.h>

#include <cfloat>
#include <stdexcept>
#include <string>

#include "cuda/common/cuda_check.hpp"

namespace gs::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTileO = 128;  // outer rows per tile
constexpr int kTileK = 64;   // K elements per tile
constexpr int kFmtE4M3 = 0, kFmtE5M2 = 1, kFmtNV = 2;

// ---- small device helpers ----------------------------------------------------------------------
__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }

// 8 BF16 (a 16-byte vector) -> 8 floats.
__device__ __forceinline__ void unpack8(uint4 u, float* v) {
  v[0] = bf16_lo(u.x); v[1] = bf16_hi(u.x);
  v[2] = bf16_lo(u.y); v[3] = bf16_hi(u.y);
  v[4] = bf16_lo(u.z); v[5] = bf16_hi(u.z);
  v[6] = bf16_lo(u.w); v[7] = bf16_hi(u.w);
}

// Loads 8 consecutive BF16 of row `row` starting at column `col` of a row-major [nrows, ncols]
// matrix; elements outside the matrix read as 0. `vec`: ncols % 8 == 0 and x 16-byte aligned.
__device__ __forceinline__ uint4 load8(const __nv_bfloat16* x, int row, int col, int nrows,
                                       int ncols, bool vec) {
  uint4 u = make_uint4(0, 0, 0, 0);
  if (row >= nrows || col >= ncols) return u;
  const __nv_bfloat16* p = x + static_cast<size_t>(row) * static_cast<size_t>(ncols) + col;
  if (vec) return __ldg(reinterpret_cast<const uint4*>(p));
  const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
  uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
  for (int j = 0; j < 8; ++j)
    if (col + j < ncols) w[j / 2] |= static_cast<uint32_t>(__ldg(h + j)) << (16 * (j & 1));
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// ---- codecs (device twins of gs::nf, checked bit for bit by the GPU tests) -------------------
// nf::e8m0_round_up for a non-negative, non-NaN argument.
__device__ __forceinline__ uint32_t e8m0_round_up(float x) {
  const uint32_t u = __float_as_uint(x) & 0x7FFFFFFFu;
  if (u >= 0x7F800000u) return u == 0x7F800000u ? 0xFEu : 0xFFu;
  uint32_t e = u >> 23;
  const uint32_t mant = u & 0x7FFFFFu;
  if (mant != 0 && e != 0xFE && !(e == 0 && mant <= 0x400000u)) ++e;
  return e;
}
// nf::mx_scale_inv.
__device__ __forceinline__ float mx_scale_inv(uint32_t code) {
  if (code == 0) return 1.f;
  if (code == 0xFF) return __uint_as_float(0x7FC00000u);
  return __uint_as_float((254u - code) << 23);
}
__device__ __forceinline__ float decode_ue8m0(uint32_t code) {
  if (code == 0xFF) return __uint_as_float(0x7FC00000u);
  if (code == 0) return __uint_as_float(0x00400000u);
  return __uint_as_float(code << 23);
}
// nf::decode_ue4m3 (bit 7 ignored).
__device__ __forceinline__ float decode_ue4m3(uint32_t c) {
  c &= 0x7Fu;
  if (c == 0x7Fu) return __uint_as_float(0x7FC00000u);
  if (c < 8u) return static_cast<float>(c) * 0x1p-9f;
  return __uint_as_float((c << 20) + (120u << 23));
}
// Saturating RN FP8 of two floats; `a` in the low byte (hardware cvt on sm_89+).
template <int F>
__device__ __forceinline__ uint32_t fp8x2(float a, float b) {
  return static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE,
                                                        F == kFmtE4M3 ? __NV_E4M3 : __NV_E5M2));
}
// nf::encode_ue4m3 for a non-negative argument: satfinite RN E4M3.
__device__ __forceinline__ uint32_t ue4m3(float x) {
  return static_cast<uint32_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}
// Arch-specific Blackwell code (sm_100a, sm_103a) has the hardware FP32 -> E2M1 conversion that
// Transformer Engine's NVFP4 cast uses there; elsewhere the encoder below does it in software, with
// the rounding the PTX ISA defines for that instruction (RN-even, satfinite). The hardware path is
// built (CI compiles it) but unverified on hardware: no Blackwell GPU was available.
#if defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM103_ALL)
#define GS_HW_E2M1 1
#else
#define GS_HW_E2M1 0
#endif
#if !GS_HW_E2M1
// nf::encode_e2m1: nearest-even thresholds 0.25 < .75 <= 1.25 < 1.75 <= 2.5 < 3.5 <= 5 <.
__device__ __forceinline__ uint32_t e2m1_rn(float v) {
  const float a = fabsf(v);
  if (a != a) return 0x7u;  // NaN -> +6
  const uint32_t c = static_cast<uint32_t>(a > 0.25f) + static_cast<uint32_t>(a >= 0.75f) +
                     static_cast<uint32_t>(a > 1.25f) + static_cast<uint32_t>(a >= 1.75f) +
                     static_cast<uint32_t>(a > 2.5f) + static_cast<uint32_t>(a >= 3.5f) +
                     static_cast<uint32_t>(a > 5.0f);
  return ((__float_as_uint(v) >> 28) & 0x8u) | c;
}
#endif
// Two RN E2M1 codes, `a` in the low nibble.
__device__ __forceinline__ uint32_t e2m1x2_rn(float a, float b) {
#if GS_HW_E2M1
  uint32_t out;
  // cvt packs its first source into the upper nibble: b first, so that `a` lands in the low one.
  asm("{\n\t.reg .b8 t;\n\tcvt.rn.satfinite.e2m1x2.f32 t, %2, %1;\n\tcvt.u32.u8 %0, t;\n\t}"
      : "=r"(out)
      : "f"(a), "f"(b));
  return out;
#else
  return e2m1_rn(a) | (e2m1_rn(b) << 4);
#endif
}
// nf::encode_e2m1_sr.
__device__ __forceinline__ uint32_t e2m1_sr(float v, uint32_t r16) {
  if (v != v) return 0x7u;
  const float a = fminf(fabsf(v), 6.f);
  const uint32_t lo = static_cast<uint32_t>(a >= 0.5f) + static_cast<uint32_t>(a >= 1.f) +
                      static_cast<uint32_t>(a >= 1.5f) + static_cast<uint32_t>(a >= 2.f) +
                      static_cast<uint32_t>(a >= 3.f) + static_cast<uint32_t>(a >= 4.f) +
                      static_cast<uint32_t>(a >= 6.f);
  uint32_t c = lo;
  if (lo < 7u) {
    const float lov = lo < 4u ? 0.5f * static_cast<float>(lo)
                              : (lo < 6u ? static_cast<float>(lo) - 2.f : 2.f * static_cast<float>(lo - 4u));
    const float inv_spacing = lo < 4u ? 2.f : (lo < 6u ? 1.f : 0.5f);
    const float t = (a - lov) * inv_spacing;  // == (a - lo) / spacing, exact
    c += (t * 65536.f > static_cast<float>(r16)) ? 1u : 0u;
  }
  return ((__float_as_uint(v) >> 28) & 0x8u) | c;
}

// ---- the RHT (mx::rht16, same operation order) ---------------------------------------------------
__device__ __forceinline__ void rht16(float* v, uint32_t mask) {
#pragma unroll
  for (int i = 0; i < 16; ++i)
    if ((mask >> i) & 1u) v[i] = -v[i];
#pragma unroll
  for (int h = 1; h < 16; h <<= 1) {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      if (i & h) continue;
      const float a = v[i], b = v[i + h];
      v[i] = __fadd_rn(a, b);
      v[i + h] = __fsub_rn(a, b);
    }
  }
#pragma unroll
  for (int i = 0; i < 16; ++i) v[i] = __fmul_rn(v[i], 0.25f);
}

// ---- NVFP4 scale arithmetic (mx::nvfp4_*) -------------------------------------------------------
struct NvGlobal {
  float s_enc, s_dec;
};
__device__ __forceinline__ NvGlobal nv_global(const float* amax) {
  const float a = *amax;
  float s = 2688.f / a;
  s = fminf(s, FLT_MAX);
  if (a == 0.f || s == 0.f) s = 1.f;
  return NvGlobal{s, 1.f / s};
}

struct Params {
  const __nv_bfloat16* x;
  int rows, cols;    // source
  int outer, K;      // quantized orientation
  int nblk, S4;      // real / padded scale columns
  uint8_t* q;
  uint8_t* scales;
  const float* amax;      // NVFP4: tensor amax
  float* global_scale_inv;  // NVFP4: optional output
  float* amax_out;        // AMAX_ONLY
  uint32_t mask;          // RHT sign mask
  mx::SrKey key;          // stochastic rounding
  bool vec;               // 16-byte source loads allowed
};

// One NVFP4 16-block: v holds the (already transformed) values. Returns the 8 data bytes as a
// uint2, the scale code in *scale. `tile_amax` is the amax to use (1D: the block's own).
template <bool SR>
__device__ __forceinline__ uint2 nv_block(const float* v, float block_amax, const NvGlobal& g,
                                          mx::SrKey key, uint64_t e0, uint32_t* scale) {
  const float rcp6 = 1.0f / 6.0f;
  const uint32_t sc = ue4m3(__fmul_rn(block_amax, __fmul_rn(g.s_enc, rcp6)));
  *scale = sc;
  const float mul = fminf(__fdiv_rn(1.0f, __fmul_rn(decode_ue4m3(sc), g.s_dec)), FLT_MAX);
  uint32_t w[2] = {0, 0};
#pragma unroll
  for (int jp = 0; jp < 8; ++jp) {  // element pairs (2jp, 2jp+1); e0 is even
    const float y0 = __fmul_rn(v[2 * jp], mul), y1 = __fmul_rn(v[2 * jp + 1], mul);
    uint32_t pair;
    if constexpr (SR) {  // mx::sr_bits16: low half for the even element, high half for the odd
      // Software on every target: the hardware's stochastic cvt (cvt.rs, sm_100a) draws its own
      // random bits per four values, which the host reference could not reproduce.
      const uint32_t h = mx::sr_pair_bits(key, e0 / 2 + static_cast<uint64_t>(jp));
      pair = e2m1_sr(y0, h & 0xFFFFu) | (e2m1_sr(y1, h >> 16) << 4);
    } else {
      pair = e2m1x2_rn(y0, y1);
    }
    w[jp / 4] |= pair << (8 * (jp % 4));
  }
  return make_uint2(w[0], w[1]);
}

// One MXFP8 32-block: returns the scale code, writes 32 data bytes to out[0..7].
template <int F>
__device__ __forceinline__ uint32_t mx_block(const float* v, uint32_t* out) {
  float m = 0.f;
#pragma unroll
  for (int j = 0; j < 32; ++j) m = fmaxf(m, fabsf(v[j]));
  const float rcp = F == kFmtE4M3 ? static_cast<float>(1.0 / 448.0) : static_cast<float>(1.0 / 57344.0);
  const uint32_t code = e8m0_round_up(__fmul_rn(m, rcp));
  const float mul = mx_scale_inv(code);
#pragma unroll
  for (int i = 0; i < 8; ++i)
    out[i] = fp8x2<F>(__fmul_rn(v[4 * i], mul), __fmul_rn(v[4 * i + 1], mul)) |
             (fp8x2<F>(__fmul_rn(v[4 * i + 2], mul), __fmul_rn(v[4 * i + 3], mul)) << 16);
  return code;
}

__device__ __forceinline__ float amax16(const float* v) {
  float m = 0.f;
#pragma unroll
  for (int j = 0; j < 16; ++j) m = fmaxf(m, fabsf(v[j]));
  return m;
}

__device__ __forceinline__ void atomic_max_nonneg(float* addr, float v) {
  // Non-negative floats order like their bit patterns.
  atomicMax(reinterpret_cast<unsigned int*>(addr), __float_as_uint(v));
}
__device__ __forceinline__ float warp_max(float m) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, d));
  return m;
}

__device__ __forceinline__ void write_global_scale(const Params& p, const NvGlobal& g) {
  if (p.global_scale_inv != nullptr && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0)
    *p.global_scale_inv = g.s_dec;
}

// ---- rowwise kernel (transpose=false, 1D scales) -----------------------------------------------
template <int F, bool RHT, bool SR, bool AMAX_ONLY>
__global__ void __launch_bounds__(kThreads) rowwise_kernel(Params p) {
  constexpr int G = F == kFmtNV ? 16 : 32;
  const size_t item = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
  const size_t real = static_cast<size_t>(p.outer) * static_cast<size_t>(p.nblk);
  NvGlobal g{1.f, 1.f};
  if constexpr (F == kFmtNV && !AMAX_ONLY) {
    g = nv_global(p.amax);
    write_global_scale(p, g);
  }
  float local_max = 0.f;
  if (item < real) {
    const int o = static_cast<int>(item / static_cast<size_t>(p.nblk));
    const int b = static_cast<int>(item % static_cast<size_t>(p.nblk));
    const size_t e0 = static_cast<size_t>(o) * static_cast<size_t>(p.K) + static_cast<size_t>(b) * G;
    const uint4* src = reinterpret_cast<const uint4*>(p.x + e0);
    uint4 u[G / 8];
#pragma unroll
    for (int i = 0; i < G / 8; ++i) u[i] = __ldg(src + i);
    float v[G];
#pragma unroll
    for (int i = 0; i < G / 8; ++i) unpack8(u[i], v + 8 * i);
    if constexpr (F == kFmtNV) {
      if constexpr (RHT) rht16(v, p.mask);
      if constexpr (AMAX_ONLY) {
        local_max = amax16(v);
      } else {
        uint32_t sc;
        const uint2 d = nv_block<SR>(v, amax16(v), g, p.key, e0, &sc);
        *reinterpret_cast<uint2*>(p.q + e0 / 2) = d;
        p.scales[mx::swizzled_scale_index(o, b, p.S4)] = static_cast<uint8_t>(sc);
      }
    } else {
      uint32_t w[8];
      const uint32_t code = mx_block<F>(v, w);
      uint4* dst = reinterpret_cast<uint4*>(p.q + e0);
      dst[0] = make_uint4(w[0], w[1], w[2], w[3]);
      dst[1] = make_uint4(w[4], w[5], w[6], w[7]);
      p.scales[mx::swizzled_scale_index(o, b, p.S4)] = static_cast<uint8_t>(code);
    }
  } else if constexpr (!AMAX_ONLY) {
    // Zero padding of the scale buffer: first the missing columns of real rows, then the
    // padding rows.
    const size_t pad = item - real;
    const size_t extra_cols = static_cast<size_t>(p.S4 - p.nblk);
    const size_t pad_a = static_cast<size_t>(p.outer) * extra_cols;
    int o, b;
    if (pad < pad_a) {
      o = static_cast<int>(pad / extra_cols);
      b = p.nblk + static_cast<int>(pad % extra_cols);
    } else {
      const size_t r = pad - pad_a;
      o = p.outer + static_cast<int>(r / static_cast<size_t>(p.S4));
      b = static_cast<int>(r % static_cast<size_t>(p.S4));
    }
    if (o < mx::padded_outer(p.outer)) p.scales[mx::swizzled_scale_index(o, b, p.S4)] = 0;
  }
  if constexpr (AMAX_ONLY) {
    local_max = warp_max(local_max);
    if ((threadIdx.x & 31) == 0 && local_max > 0.f) atomic_max_nonneg(p.amax_out, local_max);
  }
}

// ---- tiled kernel (transpose and/or 2D scales) --------------------------------------------------
template <int F, bool TRANS, bool TWO_D, bool RHT, bool SR, bool AMAX_ONLY>
__global__ void __launch_bounds__(kThreads) tile_kernel(Params p) {
  __shared__ float tile[kTileO][kTileK + 1];
  const int o_base = blockIdx.y * kTileO, k_base = blockIdx.x * kTileK;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int lc = lane & 3, lr = lane >> 2;

  NvGlobal g{1.f, 1.f};
  if constexpr (F == kFmtNV && !AMAX_ONLY) {
    g = nv_global(p.amax);
    write_global_scale(p, g);
  }

  // Load: 32 tasks of 8 rows x 4 16-byte chunks, 4 per warp, all loads issued first.
  uint4 u[4];
#pragma unroll
  for (int it = 0; it < 4; ++it) {
    const int task = warp * 4 + it;
    if constexpr (!TRANS) {  // source [outer, K]: 16 groups of 8 rows x 2 halves of 32 K
      const int o = (task >> 1) * 8 + lr, k0 = (task & 1) * 32 + lc * 8;
      u[it] = load8(p.x, o_base + o, k_base + k0, p.rows, p.cols, p.vec);
    } else {  // source [K, outer]: 8 groups of 8 K-rows x 4 groups of 32 outer columns
      const int k = (task >> 2) * 8 + lr, o0 = (task & 3) * 32 + lc * 8;
      u[it] = load8(p.x, k_base + k, o_base + o0, p.rows, p.cols, p.vec);
    }
  }
#pragma unroll
  for (int it = 0; it < 4; ++it) {
    const int task = warp * 4 + it;
    float v[8];
    unpack8(u[it], v);
    if constexpr (!TRANS) {
      const int o = (task >> 1) * 8 + lr, k0 = (task & 1) * 32 + lc * 8;
#pragma unroll
      for (int j = 0; j < 8; ++j) tile[o][k0 + j] = v[j];
    } else {
      const int k = (task >> 2) * 8 + lr, o0 = (task & 3) * 32 + lc * 8;
#pragma unroll
      for (int j = 0; j < 8; ++j) tile[o0 + j][k] = v[j];
    }
  }
  __syncthreads();

  const int o = threadIdx.x & (kTileO - 1), h = threadIdx.x >> 7;
  float v[32];
#pragma unroll
  for (int j = 0; j < 32; ++j) v[j] = tile[o][h * 32 + j];
  const int og = o_base + o, kg = k_base + h * 32;
  const bool row_ok = og < p.outer;

  // This thread's output bytes (MXFP8: 32 codes = 8 words; NVFP4: 2 x 16 codes = 4 words),
  // staged through shared memory below so that whole row segments are stored by neighbouring
  // lanes.
  constexpr int kWords = F == kFmtNV ? 4 : 8;
  uint32_t ow[kWords];
  if constexpr (F == kFmtNV) {
    float m[2];
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      if constexpr (RHT) rht16(v + 16 * s, p.mask);
      m[s] = amax16(v + 16 * s);
    }
    if constexpr (AMAX_ONLY) {
      const float wm = warp_max(fmaxf(m[0], m[1]));
      if (lane == 0 && wm > 0.f) atomic_max_nonneg(p.amax_out, wm);
      return;
    } else {
      if constexpr (TWO_D) {  // lanes 0-15 and 16-31: the 16 rows of a 16x16 tile
#pragma unroll
        for (int s = 0; s < 2; ++s)
#pragma unroll
          for (int d = 1; d < 16; d <<= 1) m[s] = fmaxf(m[s], __shfl_xor_sync(0xFFFFFFFFu, m[s], d));
      }
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const int k16 = kg + 16 * s;
        const size_t e0 = static_cast<size_t>(og) * static_cast<size_t>(p.K) + static_cast<size_t>(k16);
        uint32_t sc;
        const uint2 d = nv_block<SR>(v + 16 * s, m[s], g, p.key, e0, &sc);
        ow[2 * s] = d.x;
        ow[2 * s + 1] = d.y;
        const bool in = row_ok && k16 < p.K;
        p.scales[mx::swizzled_scale_index(og, k16 / 16, p.S4)] = in ? static_cast<uint8_t>(sc) : 0;
      }
    }
  } else {
    const uint32_t code = mx_block<F>(v, ow);
    const bool in = row_ok && kg < p.K;
    p.scales[mx::swizzled_scale_index(og, kg / 32, p.S4)] = in ? static_cast<uint8_t>(code) : 0;
  }

  // Stage the tile's output, [128 rows][2 * kWords words] (+1 word of padding per row: the
  // row stride is odd, so the 32 lanes of a warp, 32 consecutive rows, hit 32 different banks).
  constexpr int kRowWords = 2 * kWords, kStride = kRowWords + 1;
  static_assert(kTileO * kStride <= kTileO * (kTileK + 1), "output staging must fit in the tile");
  __syncthreads();  // every thread is done reading `tile`
  uint32_t* out = reinterpret_cast<uint32_t*>(&tile[0][0]);
#pragma unroll
  for (int i = 0; i < kWords; ++i) out[o * kStride + h * kWords + i] = ow[i];
  __syncthreads();
  // Store 16-byte chunks: chunk c of the tile is row c / kChunks, part c % kChunks, covering
  // K elements [k_base + part * kElems, + kElems).
  constexpr int kChunks = kRowWords / 4, kElems = F == kFmtNV ? 32 : 16;
  const bool aligned_rows = F != kFmtNV || p.K % 32 == 0;  // NVFP4 rows are 16 B aligned iff K % 32 == 0
#pragma unroll
  for (int it = 0; it < kTileO * kChunks / kThreads; ++it) {
    const int c = it * kThreads + static_cast<int>(threadIdx.x);
    const int row = c / kChunks, part = c % kChunks;
    const int orow = o_base + row, k_start = k_base + part * kElems;
    if (orow >= p.outer || k_start >= p.K) continue;
    const uint32_t* src = out + row * kStride + part * 4;
    const size_t e = static_cast<size_t>(orow) * static_cast<size_t>(p.K) + static_cast<size_t>(k_start);
    uint8_t* dst = p.q + (F == kFmtNV ? e / 2 : e);
    if (aligned_rows) {
      *reinterpret_cast<uint4*>(dst) = make_uint4(src[0], src[1], src[2], src[3]);
    } else {  // NVFP4 with K % 32 == 16: 8-byte halves; the second may lie past the row end
      *reinterpret_cast<uint2*>(dst) = make_uint2(src[0], src[1]);
      if (k_start + 16 < p.K) *reinterpret_cast<uint2*>(dst + 8) = make_uint2(src[2], src[3]);
    }
  }
}

// ---- dequantization ----------------------------------------------------------------------------
__device__ __forceinline__ uint32_t pack_bf16x2(float a, float b) {
  const uint32_t lo = __bfloat16_as_ushort(__float2bfloat16_rn(a));
  const uint32_t hi = __bfloat16_as_ushort(__float2bfloat16_rn(b));
  return lo | (hi << 16);
}
__device__ __forceinline__ float fp8_decode(uint32_t c, int f) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c),
                                               f == kFmtE4M3 ? __NV_E4M3 : __NV_E5M2);
  return __half2float(__half(h));
}
__device__ __forceinline__ float e2m1_decode(uint32_t c) {
  const uint32_t m = c & 7u;
  const float a = m < 4u ? 0.5f * static_cast<float>(m)
                         : (m < 6u ? static_cast<float>(m) - 2.f : 2.f * static_cast<float>(m - 4u));
  return (c & 8u) ? -a : a;
}

// One thread per 32-block (MXFP8) or 16-block (NVFP4).
template <int F>
__global__ void __launch_bounds__(kThreads) dequant_kernel(const uint8_t* q, const uint8_t* scales,
                                                           int outer, int K, int S4,
                                                           __nv_bfloat16* y) {
  constexpr int G = F == kFmtNV ? 16 : 32;
  const int nblk = K / G;
  const size_t item = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (item >= static_cast<size_t>(outer) * static_cast<size_t>(nblk)) return;
  const int o = static_cast<int>(item / static_cast<size_t>(nblk));
  const int b = static_cast<int>(item % static_cast<size_t>(nblk));
  const size_t e0 = static_cast<size_t>(o) * static_cast<size_t>(K) + static_cast<size_t>(b) * G;
  const uint32_t sc = scales[mx::swizzled_scale_index(o, b, S4)];
  uint4* dst = reinterpret_cast<uint4*>(y + e0);
  if constexpr (F == kFmtNV) {
    const float s = decode_ue4m3(sc);
    const uint2 d = *reinterpret_cast<const uint2*>(q + e0 / 2);
    uint32_t out[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t word = i < 4 ? d.x : d.y;
      const uint32_t byte = (word >> (8 * (i % 4))) & 0xFFu;
      out[i] = pack_bf16x2(__fmul_rn(e2m1_decode(byte & 0xFu), s), __fmul_rn(e2m1_decode(byte >> 4), s));
    }
    dst[0] = make_uint4(out[0], out[1], out[2], out[3]);
    dst[1] = make_uint4(out[4], out[5], out[6], out[7]);
  } else {
    const float s = decode_ue8m0(sc);
    const uint4* src = reinterpret_cast<const uint4*>(q + e0);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const uint4 d = src[half];
      const uint32_t words[4] = {d.x, d.y, d.z, d.w};
      uint32_t out[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const uint32_t wd = words[i / 2];
        const uint32_t c0 = (wd >> (16 * (i % 2))) & 0xFFu, c1 = (wd >> (16 * (i % 2) + 8)) & 0xFFu;
        out[i] = pack_bf16x2(__fmul_rn(fp8_decode(c0, F), s), __fmul_rn(fp8_decode(c1, F), s));
      }
      dst[2 * half] = make_uint4(out[0], out[1], out[2], out[3]);
      dst[2 * half + 1] = make_uint4(out[4], out[5], out[6], out[7]);
    }
  }
}

// ---- host side -----------------------------------------------------------------------------------
void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("gs::cuda quantize_mx: " + what);
}
bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

Params make_params(const __nv_bfloat16* x, int rows, int cols, bool transpose, int blk) {
  require(rows >= 0 && cols >= 0, "negative shape");
  Params p{};
  p.x = x;
  p.rows = rows;
  p.cols = cols;
  p.outer = transpose ? cols : rows;
  p.K = transpose ? rows : cols;
  require(p.K % blk == 0, "K (" + std::to_string(p.K) + ") must be a multiple of " + std::to_string(blk));
  p.nblk = p.K / blk;
  p.S4 = mx::scale_cols_padded(p.K, blk);
  p.vec = cols % 8 == 0 && aligned16(x);
  require(transpose || p.vec, "source must be 16-byte aligned");
  return p;
}

dim3 tile_grid(const Params& p, int blk) {
  return dim3(static_cast<unsigned>(p.S4 * blk / kTileK),
              static_cast<unsigned>(mx::padded_outer(p.outer) / kTileO));
}
unsigned rowwise_blocks(const Params& p) {
  const size_t items = static_cast<size_t>(mx::padded_outer(p.outer)) * static_cast<size_t>(p.S4);
  return static_cast<unsigned>((items + kThreads - 1) / kThreads);
}

template <int F>
void launch_mx(const Params& p, bool transpose, cudaStream_t s) {
  if (transpose)
    tile_kernel<F, true, false, false, false, false><<<tile_grid(p, 32), kThreads, 0, s>>>(p);
  else
    rowwise_kernel<F, false, false, false><<<rowwise_blocks(p), kThreads, 0, s>>>(p);
  GS_CUDA_LAUNCH();
}

template <bool RHT, bool SR>
void launch_nv(const Params& p, bool transpose, bool two_d, cudaStream_t s) {
  const dim3 tg = tile_grid(p, 16);
  if (transpose && two_d)
    tile_kernel<kFmtNV, true, true, RHT, SR, false><<<tg, kThreads, 0, s>>>(p);
  else if (transpose)
    tile_kernel<kFmtNV, true, false, RHT, SR, false><<<tg, kThreads, 0, s>>>(p);
  else if (two_d)
    tile_kernel<kFmtNV, false, true, RHT, SR, false><<<tg, kThreads, 0, s>>>(p);
  else
    rowwise_kernel<kFmtNV, RHT, SR, false><<<rowwise_blocks(p), kThreads, 0, s>>>(p);
  GS_CUDA_LAUNCH();
}

}  // namespace

void quantize_mxfp8(const __nv_bfloat16* x, int rows, int cols, bool transpose, Fp8Kind kind,
                    uint8_t* q, uint8_t* scales, cudaStream_t stream) {
  Params p = make_params(x, rows, cols, transpose, mx::kMxBlock);
  require(aligned16(q), "q must be 16-byte aligned");
  p.q = q;
  p.scales = scales;
  if (p.outer == 0 || p.K == 0) {
    if (p.outer > 0) GS_CUDA(cudaMemsetAsync(scales, 0, mxfp8_scale_bytes(p.outer, p.K), stream));
    return;
  }
  if (kind == Fp8Kind::E4M3)
    launch_mx<kFmtE4M3>(p, transpose, stream);
  else
    launch_mx<kFmtE5M2>(p, transpose, stream);
}

namespace {
__global__ void e2m1_conversion_probe(int* hw) { *hw = GS_HW_E2M1; }
}  // namespace

bool nvfp4_hardware_conversion() {
  // Asked of the code the runtime loads for this device, not of the build flags: a binary built
  // with sm_100a runs its software path on a GPU that loads another target's code.
  static const bool hw = [] {
    int* d = nullptr;
    int h = 0;
    if (cudaMalloc(&d, sizeof(int)) != cudaSuccess) return false;
    e2m1_conversion_probe<<<1, 1>>>(d);
    const bool ok = cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
    cudaFree(d);
    return ok && h == 1;
  }();
  return hw;
}

void quantize_nvfp4(const __nv_bfloat16* x, int rows, int cols, bool transpose, const float* amax,
                    const Nvfp4Options& opt, uint8_t* q, uint8_t* scales, float* global_scale_inv,
                    cudaStream_t stream) {
  Params p = make_params(x, rows, cols, transpose, mx::kNvBlock);
  require(aligned16(q), "q must be 16-byte aligned");
  require(amax != nullptr, "amax must not be null");
  p.q = q;
  p.scales = scales;
  p.amax = amax;
  p.global_scale_inv = global_scale_inv;
  p.mask = opt.rht_sign_mask;
  p.key = mx::sr_key(opt.sr_seed, opt.sr_offset);
  if (p.outer == 0 || p.K == 0) {
    if (p.outer > 0) GS_CUDA(cudaMemsetAsync(scales, 0, nvfp4_scale_bytes(p.outer, p.K), stream));
    return;  // global_scale_inv is left untouched for an empty tensor
  }
  if (opt.rht && opt.stochastic)
    launch_nv<true, true>(p, transpose, opt.two_d, stream);
  else if (opt.rht)
    launch_nv<true, false>(p, transpose, opt.two_d, stream);
  else if (opt.stochastic)
    launch_nv<false, true>(p, transpose, opt.two_d, stream);
  else
    launch_nv<false, false>(p, transpose, opt.two_d, stream);
}

void amax_rht_bf16(const __nv_bfloat16* x, int rows, int cols, bool transpose, uint16_t sign_mask,
                   float* amax, cudaStream_t stream) {
  Params p = make_params(x, rows, cols, transpose, mx::kNvBlock);
  p.mask = sign_mask;
  p.amax_out = amax;
  GS_CUDA(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  if (p.outer == 0 || p.K == 0) return;
  if (transpose)
    tile_kernel<kFmtNV, true, false, true, false, true><<<tile_grid(p, 16), kThreads, 0, stream>>>(p);
  else
    rowwise_kernel<kFmtNV, true, false, true><<<rowwise_blocks(p), kThreads, 0, stream>>>(p);
  GS_CUDA_LAUNCH();
}

void dequantize_mxfp8(const uint8_t* q, const uint8_t* scales, int outer, int K, Fp8Kind kind,
                      __nv_bfloat16* y, cudaStream_t stream) {
  require(outer >= 0 && K >= 0 && K % mx::kMxBlock == 0, "dequantize_mxfp8: K must be a multiple of 32");
  require(aligned16(q) && aligned16(y), "q and y must be 16-byte aligned");
  const size_t items = static_cast<size_t>(outer) * static_cast<size_t>(K / mx::kMxBlock);
  if (items == 0) return;
  const unsigned blocks = static_cast<unsigned>((items + kThreads - 1) / kThreads);
  const int S4 = mx::scale_cols_padded(K, mx::kMxBlock);
  if (kind == Fp8Kind::E4M3)
    dequant_kernel<kFmtE4M3><<<blocks, kThreads, 0, stream>>>(q, scales, outer, K, S4, y);
  else
    dequant_kernel<kFmtE5M2><<<blocks, kThreads, 0, stream>>>(q, scales, outer, K, S4, y);
  GS_CUDA_LAUNCH();
}

void dequantize_nvfp4(const uint8_t* q, const uint8_t* scales, int outer, int K,
                      __nv_bfloat16* y, cudaStream_t stream) {
  require(outer >= 0 && K >= 0 && K % mx::kNvBlock == 0, "dequantize_nvfp4: K must be a multiple of 16");
  require(aligned16(q) && aligned16(y), "q and y must be 16-byte aligned");
  const size_t items = static_cast<size_t>(outer) * static_cast<size_t>(K / mx::kNvBlock);
  if (items == 0) return;
  const unsigned blocks = static_cast<unsigned>((items + kThreads - 1) / kThreads);
  dequant_kernel<kFmtNV><<<blocks, kThreads, 0, stream>>>(q, scales, outer, K,
                                                          mx::scale_cols_padded(K, mx::kNvBlock), y);
  GS_CUDA_LAUNCH();
}

}  // namespace gs::cuda
