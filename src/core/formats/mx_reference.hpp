// Host reference for the block-scaled formats (MXFP8, NVFP4): scale layouts, quantizers and
// dequantizers. Pure C++; the CUDA kernels in src/cuda/quant/quantize_mx.cu must match these bit for bit
// (tests/gpu/test_quantize_mx.cu), and the small constexpr helpers below are shared with them.
//
// Orientation: a quantized operand is [outer, K] with K (the GEMM contraction dim) contiguous,
// blocks run along K. Data for MXFP8 is one byte per element, row-major [outer, K]. NVFP4 data is
// two E2M1 codes per byte, row-major [outer, K/2]; element k = 2j sits in the LOW nibble of byte j
// and k = 2j+1 in the high nibble (cuda_fp4.h __nv_fp4x2 order, the PTX cvt.*.e2m1x2 order, and
// what Transformer Engine hands cuBLASLt as CUDA_R_4F_E2M1).
//
// Scales use the cuBLASLt/tcgen05 swizzled layout (notes-cublaslt.md): S4 = ceil(K/blk) rounded up
// to a multiple of 4; tiles of 128 outer rows x 4 scale columns (512 bytes) stored row-major over
// (outer/128, S4/4); inside a tile, byte (o%32)*16 + ((o/32)%4)*4 + (i%4). The buffer holds
// roundup(outer,128) * S4 bytes; padding rows/columns are zero.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/formats/formats.hpp"

namespace gs::mx {

constexpr int kMxBlock = 32;  // MXFP8: one UE8M0 scale per 32 elements along K
constexpr int kNvBlock = 16;  // NVFP4: one UE4M3 scale per 16 elements along K

// ---- swizzled scale layout -------------------------------------------------------------------------
constexpr int scale_cols(int K, int blk) { return (K + blk - 1) / blk; }              // ceil(K/blk)
constexpr int scale_cols_padded(int K, int blk) { return (scale_cols(K, blk) + 3) / 4 * 4; }  // S4
constexpr int padded_outer(int outer) { return (outer + 127) / 128 * 128; }
constexpr size_t swizzled_scale_bytes(int outer, int K, int blk) {
  return static_cast<size_t>(padded_outer(outer)) * static_cast<size_t>(scale_cols_padded(K, blk));
}
// Byte offset of the scale of outer row `o`, scale column `i` (block i along K).
constexpr size_t swizzled_scale_index(int o, int i, int S4) {
  const size_t tile = static_cast<size_t>(o / 128) * static_cast<size_t>(S4 / 4) +
                      static_cast<size_t>(i / 4);
  const size_t in_tile = static_cast<size_t>((o % 32) * 16 + ((o / 32) % 4) * 4 + (i % 4));
  return tile * 512 + in_tile;
}

// ---- counter-based random bits for stochastic rounding ----------------------------------------
// Integer-only and constexpr so the CUDA kernels (built with --expt-relaxed-constexpr) call the
// very same functions. Element e (linear index o*K + k in the quantized [outer, K] orientation)
// gets 16 bits: half of the 32-bit hash of pair e/2 (low half for even e, high half for odd e).
constexpr uint32_t mix32(uint32_t x) {  // a 32-bit avalanche finalizer (xorshift-multiply)
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}
struct SrKey {
  uint32_t k0, k1;
};
constexpr SrKey sr_key(uint64_t seed, uint64_t offset) {
  const uint32_t a = mix32(static_cast<uint32_t>(offset >> 32) + 0x9E3779B9u);
  const uint32_t b = mix32(static_cast<uint32_t>(offset) ^ a);
  const uint32_t c = mix32(static_cast<uint32_t>(seed >> 32) ^ b);
  const uint32_t d = mix32(static_cast<uint32_t>(seed) ^ c);
  return SrKey{d, mix32(d ^ 0x85EBCA6Bu)};
}
constexpr uint32_t sr_pair_bits(SrKey key, uint64_t pair) {
  const uint32_t lo = static_cast<uint32_t>(pair), hi = static_cast<uint32_t>(pair >> 32);
  return mix32(mix32(lo ^ key.k0) + (hi ^ key.k1));
}
constexpr uint16_t sr_bits16(SrKey key, uint64_t element) {
  const uint32_t h = sr_pair_bits(key, element >> 1);
  return static_cast<uint16_t>((element & 1) ? (h >> 16) : (h & 0xFFFFu));
}

// ---- 16-point random Hadamard transform (RHT) ----------------------------------------------------
// y = (x .* s) * H16 / 4, H16 the Sylvester Hadamard matrix (H[i][j] = (-1)^popcount(i&j), what
// scipy.linalg.hadamard(16) gives), s_i = -1 where bit i of sign_mask is set. This is TE's
// get_rht_matrix(): diag(s) @ hadamard(16) / sqrt(16), applied as x_block @ M. The matrix
// (diag(s) H / 4) is orthogonal, so applying it and then its transpose returns x.
// Evaluation order (fixed, the kernels do the same): flip signs, then the 4-stage in-place
// butterfly in FP32 (stage h = 1, 2, 4, 8: (v[i], v[i+h]) <- (v[i] + v[i+h], v[i] - v[i+h]) for
// i with bit h clear), then multiply by 0.25 (exact). TE computes the same product on tensor cores
// (BF16 matrix, FP32 accumulate) in an unspecified summation order, so its RHT output can differ
// from ours in the last FP32 bit.
// TE's fixed Wgrad sign vector [1,1,1,-1,1,-1,-1,-1,-1,-1,-1,1,-1,1,-1,-1] as a mask (bit i = s_i<0).
constexpr uint16_t kTeWgradSignMask = 0xD7E8;
// A sign mask derived from a seed, for experiments with other sign vectors.
constexpr uint16_t rht_sign_mask_from_seed(uint64_t seed) {
  return static_cast<uint16_t>(mix32(static_cast<uint32_t>(seed) ^ mix32(static_cast<uint32_t>(seed >> 32))) & 0xFFFFu);
}
void rht16(float* v, uint16_t sign_mask);
// Inverse: x = y * M^T = ((y * H16) / 4) .* s.
void rht16_inverse(float* v, uint16_t sign_mask);

// ---- MXFP8 ----------------------------------------------------------------------------------------
struct Mxfp8 {
  int outer = 0, K = 0;
  nf::Fp8 kind = nf::Fp8::E4M3;
  std::vector<uint8_t> data;    // [outer, K]
  std::vector<uint8_t> scales;  // swizzled UE8M0, swizzled_scale_bytes(outer, K, 32)
};
// x: row-major [outer, K] (values as floats, e.g. BF16 inputs widened). K % 32 == 0.
// Per block of 32: amax = max |x| (NaN ignored, as fmaxf does), code = nf::mx_scale_e8m0(amax),
// q = encode_fp8(x * nf::mx_scale_inv(code), kind, saturate=true).
Mxfp8 quantize_mxfp8(const float* x, int outer, int K, nf::Fp8 kind);
// x[o,k] = decode_fp8(q) * decode_ue8m0(scale), in FP32 (exact for finite results).
std::vector<float> dequantize_mxfp8(const Mxfp8& t);

// ---- NVFP4 ----------------------------------------------------------------------------------------
struct Nvfp4Options {
  bool two_d = false;       // one scale per 16x16 tile (TE's 2D weight quantization)
  bool rht = false;         // RHT along K before quantization (TE: Wgrad operands)
  uint16_t rht_sign_mask = kTeWgradSignMask;
  bool stochastic = false;  // stochastic rounding of the data (TE: gradients)
  uint64_t sr_seed = 0, sr_offset = 0;
};
struct Nvfp4 {
  int outer = 0, K = 0;
  std::vector<uint8_t> data;    // [outer, K/2], element 2j in the low nibble
  std::vector<uint8_t> scales;  // swizzled UE4M3, swizzled_scale_bytes(outer, K, 16)
  float s_enc = 1.f;            // global encode scale, 2688 / tensor_amax
  float s_dec = 1.f;            // global decode scale 1 / s_enc: the GEMM alpha factor
};
// TE's global encode scale (core_nvfp4.cuh compute_global_encode_scaling_factor_FP4):
// s = 448 * 6 / amax (FP32 divide), min(s, FLT_MAX); amax == 0 or s == 0 -> 1.
float nvfp4_global_encode_scale(float tensor_amax);
// TE's block decode scale (compute_decoding_scaling_factor): UE4M3(block_amax * (s_enc * (1/6))).
uint8_t nvfp4_block_scale(float block_amax, float s_enc);
// TE's per-block encode multiplier: min(1 / (decode(scale) * s_dec), FLT_MAX) with
// s_dec = 1 / s_enc; q = E2M1(x * multiplier).
float nvfp4_block_encode_multiplier(uint8_t block_scale, float s_dec);

// x: row-major [outer, K], K % 16 == 0. tensor_amax = max |x| over the whole tensor — of the
// RHT-transformed tensor when opt.rht (see amax_after_rht). Block amax is taken over 1x16 blocks
// (or 16x16 tiles when two_d: the rows of a tile share one scale; a partial last tile uses the
// rows that exist) of the (transformed) values.
Nvfp4 quantize_nvfp4(const float* x, int outer, int K, float tensor_amax, const Nvfp4Options& opt);
// x[o,k] = decode_e2m1(q) * decode_ue4m3(scale) [* s_dec when apply_global]. The RHT is not undone.
std::vector<float> dequantize_nvfp4(const Nvfp4& t, bool apply_global = true);

// ---- helpers ------------------------------------------------------------------------------------------
float amax(const float* x, size_t n);
// max |RHT(x)| over all 16-blocks along K of row-major [outer, K].
float amax_after_rht(const float* x, int outer, int K, uint16_t sign_mask);
// RHT applied to every 16-block along K.
std::vector<float> apply_rht(const float* x, int outer, int K, uint16_t sign_mask);
// Row-major [rows, cols] -> row-major [cols, rows].
std::vector<float> transpose(const float* x, int rows, int cols);

}  // namespace gs::mx
