// Tests of the host MXFP8/NVFP4 reference: swizzled layout, hand-worked quantizations, round-trip
// error bounds, 2D scaling, RHT algebra and stochastic rounding statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include "core/formats/formats.hpp"
#include "core/formats/mx_reference.hpp"

namespace mx = gs::mx;
namespace nf = gs::nf;

namespace {

std::vector<float> random_bf16_matrix(int rows, int cols, uint32_t seed, float sigma = 1.f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.f, sigma);
  std::vector<float> v(static_cast<size_t>(rows) * static_cast<size_t>(cols));
  for (float& x : v) x = nf::bf16_to_float(nf::float_to_bf16_rne(nd(gen)));
  return v;
}

uint8_t nibble(const std::vector<uint8_t>& data, size_t e) {
  return static_cast<uint8_t>((e & 1) ? (data[e / 2] >> 4) : (data[e / 2] & 0xF));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Swizzled layout
// ---------------------------------------------------------------------------------------------
TEST(MxLayout, HandWorkedOffsets) {
  EXPECT_EQ(mx::scale_cols_padded(64, 32), 4);
  EXPECT_EQ(mx::scale_cols_padded(96, 32), 4);    // 3 blocks -> padded to 4
  EXPECT_EQ(mx::scale_cols_padded(160, 32), 8);   // 5 -> 8
  EXPECT_EQ(mx::scale_cols_padded(4096, 16), 256);
  EXPECT_EQ(mx::swizzled_scale_bytes(1, 32, 32), 128u * 4u);
  EXPECT_EQ(mx::swizzled_scale_bytes(200, 256, 32), 256u * 8u);
  const int S4 = 8;
  EXPECT_EQ(mx::swizzled_scale_index(0, 0, S4), 0u);
  EXPECT_EQ(mx::swizzled_scale_index(0, 1, S4), 1u);
  EXPECT_EQ(mx::swizzled_scale_index(0, 3, S4), 3u);
  EXPECT_EQ(mx::swizzled_scale_index(1, 0, S4), 16u);
  EXPECT_EQ(mx::swizzled_scale_index(31, 2, S4), 31u * 16u + 2u);
  EXPECT_EQ(mx::swizzled_scale_index(32, 0, S4), 4u);
  EXPECT_EQ(mx::swizzled_scale_index(97, 1, S4), 16u + 12u + 1u);
  EXPECT_EQ(mx::swizzled_scale_index(0, 4, S4), 512u);            // next tile along K
  EXPECT_EQ(mx::swizzled_scale_index(128, 0, S4), 2u * 512u);     // next tile row: S4/4 = 2 tiles
  EXPECT_EQ(mx::swizzled_scale_index(255, 7, S4), 3u * 512u + 31u * 16u + 3u * 4u + 3u);
}

TEST(MxLayout, SwizzleIsABijectionOntoTheBuffer) {
  int checked = 0;
  for (int outer : {1, 100, 128, 129, 300}) {
    for (int K : {16, 32, 96, 128, 160, 512}) {
      for (int blk : {16, 32}) {
        if (K % blk) continue;
        const int S4 = mx::scale_cols_padded(K, blk);
        const size_t n = mx::swizzled_scale_bytes(outer, K, blk);
        std::vector<int> hits(n, 0);
        for (int o = 0; o < mx::padded_outer(outer); ++o)
          for (int i = 0; i < S4; ++i) {
            const size_t idx = mx::swizzled_scale_index(o, i, S4);
            ASSERT_LT(idx, n);
            ++hits[idx];
          }
        for (size_t j = 0; j < n; ++j) ASSERT_EQ(hits[j], 1) << outer << " " << K << " " << blk;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 5 * (6 + 5));
}

// ---------------------------------------------------------------------------------------------
// MXFP8
// ---------------------------------------------------------------------------------------------
TEST(Mxfp8Reference, HandWorkedBlocks) {
  // Two rows, K = 64 (two blocks per row).
  std::vector<float> x(2 * 64, 0.f);
  // Row 0, block 0: amax 500 -> TE scale 2^1 (code 128), data = x / 2.
  x[0] = 500.f;
  x[1] = -3.f;
  x[2] = 0.75f;
  // Row 0, block 1: amax 1 -> 2^-8 (code 119), data = x * 256.
  x[32] = 1.f;
  x[33] = 0.5f;
  x[34] = 1e-5f;                  // * 256 = 0.00256 -> E4M3 subnormal quantum 2^-9 ~ 0.00195: 1
  // Row 1, block 0: all zero -> code 0, data 0. Block 1: amax 448 -> code 127.
  x[64 + 32] = 448.f;
  x[64 + 33] = 232.f;             // 14.5 quanta of 16: ties to even -> 224
  const mx::Mxfp8 t = mx::quantize_mxfp8(x.data(), 2, 64, nf::Fp8::E4M3);
  const int S4 = mx::scale_cols_padded(64, 32);
  ASSERT_EQ(S4, 4);
  ASSERT_EQ(t.scales.size(), 128u * 4u);
  EXPECT_EQ(t.scales[mx::swizzled_scale_index(0, 0, S4)], 128);
  EXPECT_EQ(t.scales[mx::swizzled_scale_index(0, 1, S4)], 119);
  EXPECT_EQ(t.scales[mx::swizzled_scale_index(1, 0, S4)], 0);
  EXPECT_EQ(t.scales[mx::swizzled_scale_index(1, 1, S4)], 127);
  EXPECT_EQ(t.data[0], nf::encode_e4m3(250.f));
  EXPECT_EQ(t.data[1], nf::encode_e4m3(-1.5f));
  EXPECT_EQ(t.data[2], nf::encode_e4m3(0.375f));
  EXPECT_EQ(t.data[3], 0x00);
  EXPECT_EQ(t.data[32], 0x78);  // scale 2^-8: data = 1 * 2^8 = 256 -> exponent field 15, mantissa 0
  EXPECT_EQ(t.data[33], nf::encode_e4m3(128.f));
  EXPECT_EQ(t.data[34], 0x01);
  EXPECT_EQ(t.data[64 + 32], 0x7E);
  EXPECT_EQ(t.data[64 + 33], nf::encode_e4m3(232.f));
  // Everything outside the four real scales is zero padding.
  int nonzero = 0;
  for (uint8_t s : t.scales) nonzero += s != 0;
  EXPECT_EQ(nonzero, 3);
  // Dequantization gives back the representable values.
  const std::vector<float> y = mx::dequantize_mxfp8(t);
  EXPECT_EQ(y[0], 512.f);  // 250 rounds to 256 in E4M3 (quantum 16 in [128, 256))
  EXPECT_EQ(y[1], -3.f);
  EXPECT_EQ(y[32], 1.f);
  EXPECT_EQ(y[34], 0x1p-17f);
  EXPECT_EQ(y[64 + 32], 448.f);
}

TEST(Mxfp8Reference, RoundTripErrorBound) {
  for (nf::Fp8 kind : {nf::Fp8::E4M3, nf::Fp8::E5M2}) {
    const int outer = 37, K = 96;
    std::vector<float> x = random_bf16_matrix(outer, K, 7);
    for (size_t i = 0; i < x.size(); i += 13) x[i] *= 1000.f;  // wide dynamic range per block
    const mx::Mxfp8 t = mx::quantize_mxfp8(x.data(), outer, K, kind);
    const std::vector<float> y = mx::dequantize_mxfp8(t);
    const int mbits = kind == nf::Fp8::E4M3 ? 3 : 2;
    const int emin = kind == nf::Fp8::E4M3 ? -6 : -14;
    const int S4 = mx::scale_cols_padded(K, 32);
    for (int o = 0; o < outer; ++o)
      for (int k = 0; k < K; ++k) {
        const size_t e = static_cast<size_t>(o * K + k);
        const float S = nf::decode_ue8m0(t.scales[mx::swizzled_scale_index(o, k / 32, S4)]);
        // Half an ulp relative (normal range), or half the subnormal quantum, in data units.
        const float bound = std::max(std::fabs(x[e]) * std::ldexp(1.f, -mbits - 1),
                                     S * std::ldexp(1.f, emin - mbits - 1));
        ASSERT_LE(std::fabs(y[e] - x[e]), bound) << o << "," << k;
      }
  }
}

TEST(Mxfp8Reference, RejectsKNotMultipleOf32) {
  std::vector<float> x(48, 1.f);
  EXPECT_THROW(mx::quantize_mxfp8(x.data(), 1, 48, nf::Fp8::E4M3), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// NVFP4
// ---------------------------------------------------------------------------------------------
TEST(Nvfp4Reference, GlobalAndBlockScaleFormulas) {
  EXPECT_EQ(mx::nvfp4_global_encode_scale(6.f), 448.f);
  EXPECT_EQ(mx::nvfp4_global_encode_scale(2688.f), 1.f);
  EXPECT_EQ(mx::nvfp4_global_encode_scale(0.f), 1.f);
  EXPECT_EQ(mx::nvfp4_global_encode_scale(1e-45f), std::numeric_limits<float>::max());
  EXPECT_EQ(mx::nvfp4_global_encode_scale(std::numeric_limits<float>::infinity()), 1.f);
  // Block amax == tensor amax: the block scale is 448 (the top of E4M3) ...
  EXPECT_EQ(mx::nvfp4_block_scale(6.f, 448.f), 0x7E);
  EXPECT_EQ(mx::nvfp4_block_scale(12.f, 224.f), 0x7E);
  // ... and a block 8x smaller gets 56 (exact in E4M3).
  EXPECT_EQ(mx::nvfp4_block_scale(0.75f, 448.f), nf::encode_e4m3(56.f));
  EXPECT_EQ(mx::nvfp4_block_scale(0.f, 448.f), 0x00);
  // Multiplier: 1 / (448 * (1/448)) = 1; zero scale -> FLT_MAX.
  EXPECT_EQ(mx::nvfp4_block_encode_multiplier(0x7E, 1.f / 448.f), 1.f);
  EXPECT_EQ(mx::nvfp4_block_encode_multiplier(0x00, 1.f / 448.f), std::numeric_limits<float>::max());
}

TEST(Nvfp4Reference, HandWorkedRowAndPacking) {
  // One row of 32: block 0 = the 16 FP4 values (amax 6), block 1 = the same times 0.5.
  const float grid[16] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f,
                          -0.f, -0.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f};
  std::vector<float> x(32);
  for (int j = 0; j < 16; ++j) {
    x[static_cast<size_t>(j)] = grid[j];
    x[static_cast<size_t>(16 + j)] = 0.5f * grid[j];
  }
  const mx::Nvfp4 t = mx::quantize_nvfp4(x.data(), 1, 32, mx::amax(x.data(), x.size()), {});
  EXPECT_EQ(t.s_enc, 448.f);
  EXPECT_EQ(t.s_dec, 1.f / 448.f);
  ASSERT_EQ(t.data.size(), 16u);
  // Block 0: codes 0..15 in order, element 2j in the low nibble.
  for (int j = 0; j < 8; ++j) EXPECT_EQ(t.data[static_cast<size_t>(j)], (2 * j) | ((2 * j + 1) << 4)) << j;
  const int S4 = mx::scale_cols_padded(32, 16);
  EXPECT_EQ(t.scales[mx::swizzled_scale_index(0, 0, S4)], 0x7E);
  // Block 1: amax 3 -> scale e4m3(3 * 448/6) = e4m3(224) = 0x76; codes again 0..15.
  EXPECT_EQ(t.scales[mx::swizzled_scale_index(0, 1, S4)], nf::encode_e4m3(224.f));
  for (int j = 0; j < 8; ++j) EXPECT_EQ(t.data[static_cast<size_t>(8 + j)], (2 * j) | ((2 * j + 1) << 4)) << j;
  // Without the global scale, dequantization is exact: code * block scale = x * 448 here.
  const std::vector<float> y_local = mx::dequantize_nvfp4(t, false);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y_local[i], x[i] * 448.f) << i;
  // With it (an FP32 multiply by 1/448, not exact), within FP32 rounding.
  const std::vector<float> y = mx::dequantize_nvfp4(t);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(y[i], x[i]) << i;
}

TEST(Nvfp4Reference, RoundTripErrorBound) {
  const int outer = 45, K = 80;
  std::vector<float> x = random_bf16_matrix(outer, K, 11, 3.f);
  const mx::Nvfp4 t = mx::quantize_nvfp4(x.data(), outer, K, mx::amax(x.data(), x.size()), {});
  const std::vector<float> y = mx::dequantize_nvfp4(t);
  const int S4 = mx::scale_cols_padded(K, 16);
  double err2 = 0, sig2 = 0;
  for (int o = 0; o < outer; ++o)
    for (int k = 0; k < K; ++k) {
      const size_t e = static_cast<size_t>(o * K + k);
      // The effective decode scale d of the block; |x/d| <= 6 (+ the E4M3 rounding of d).
      const float d = nf::decode_ue4m3(t.scales[mx::swizzled_scale_index(o, k / 16, S4)]) * t.s_dec;
      const float yv = std::fabs(x[e]) / d;
      const float half_spacing = yv < 2.f ? 0.25f : (yv < 4.f ? 0.5f : 1.f);
      const float sat = std::max(0.f, yv - 6.f);
      ASSERT_LE(std::fabs(y[e] - x[e]), d * (half_spacing + sat) * 1.0001f + 1e-30f) << o << "," << k;
      ASSERT_LE(sat, 6.f * 0.07f);  // E4M3 rounding of the block scale (<= 2^-4 rel.) can push |x/d| past 6
      err2 += double(y[e] - x[e]) * double(y[e] - x[e]);
      sig2 += double(x[e]) * double(x[e]);
    }
  EXPECT_LT(err2 / sig2, 0.02);  // NVFP4 on Gaussian data: ~ -20 dB
  EXPECT_GT(err2 / sig2, 1e-4);  // ... and it is really quantized
}

TEST(Nvfp4Reference, TwoDimensionalScalesAreSharedPerTile) {
  const int outer = 40, K = 48;  // 3 tile rows (16, 16, 8 rows), 3 tile columns
  std::vector<float> x = random_bf16_matrix(outer, K, 5);
  x[static_cast<size_t>(17 * K + 20)] = 50.f;  // tile (1, 1) gets a big element
  mx::Nvfp4Options opt;
  opt.two_d = true;
  const float a = mx::amax(x.data(), x.size());
  const mx::Nvfp4 t = mx::quantize_nvfp4(x.data(), outer, K, a, opt);
  const int S4 = mx::scale_cols_padded(K, 16);
  for (int o = 0; o < outer; ++o)
    for (int b = 0; b < 3; ++b) {
      const int t0 = o / 16 * 16, t1 = std::min(t0 + 16, outer);
      float m = 0.f;
      for (int r = t0; r < t1; ++r)
        for (int j = 0; j < 16; ++j) m = std::max(m, std::fabs(x[static_cast<size_t>(r * K + b * 16 + j)]));
      EXPECT_EQ(t.scales[mx::swizzled_scale_index(o, b, S4)], mx::nvfp4_block_scale(m, t.s_enc)) << o << "," << b;
    }
  EXPECT_EQ(t.scales[mx::swizzled_scale_index(16, 1, S4)], 0x7E);
  EXPECT_EQ(t.scales[mx::swizzled_scale_index(31, 1, S4)], 0x7E);
  EXPECT_NE(t.scales[mx::swizzled_scale_index(15, 1, S4)], 0x7E);
  // 1D scaling of the same data differs (row 16's own amax is small).
  const mx::Nvfp4 t1 = mx::quantize_nvfp4(x.data(), outer, K, a, {});
  EXPECT_NE(t1.scales[mx::swizzled_scale_index(16, 1, S4)], 0x7E);
  // Transpose symmetry: 2D scales of x^T are the transposed 2D scales of x (as 16x16 tiles).
  // The first 32 rows only, so that the transpose's K is a multiple of 16.
  const std::vector<float> xt = mx::transpose(x.data(), 32, K);
  const mx::Nvfp4 tt = mx::quantize_nvfp4(xt.data(), K, 32, a, opt);
  const int S4t = mx::scale_cols_padded(32, 16);
  for (int c = 0; c < K; ++c)
    for (int rb = 0; rb < 2; ++rb)
      EXPECT_EQ(tt.scales[mx::swizzled_scale_index(c, rb, S4t)],
                t.scales[mx::swizzled_scale_index(rb * 16, c / 16, S4)]);
}

TEST(Nvfp4Reference, RejectsKNotMultipleOf16) {
  std::vector<float> x(24, 1.f);
  EXPECT_THROW(mx::quantize_nvfp4(x.data(), 1, 24, 1.f, {}), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// RHT
// ---------------------------------------------------------------------------------------------
TEST(Rht, SignMaskIsTeWgradVector) {
  const int te[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};
  uint16_t mask = 0;
  for (int i = 0; i < 16; ++i)
    if (te[i] < 0) mask = static_cast<uint16_t>(mask | (1u << i));
  EXPECT_EQ(mask, mx::kTeWgradSignMask);
  EXPECT_NE(mx::rht_sign_mask_from_seed(1), mx::rht_sign_mask_from_seed(2));
}

TEST(Rht, MatchesExplicitMatrixProduct) {
  std::mt19937 gen(3);
  std::normal_distribution<float> nd;
  for (uint16_t mask : {uint16_t{0}, mx::kTeWgradSignMask, uint16_t{0xFFFF}, uint16_t{0x1234}}) {
    for (int trial = 0; trial < 50; ++trial) {
      float v[16], x[16];
      for (int i = 0; i < 16; ++i) x[i] = v[i] = nd(gen);
      mx::rht16(v, mask);
      for (int j = 0; j < 16; ++j) {
        double want = 0;  // (x .* s) @ H / 4
        for (int i = 0; i < 16; ++i) {
          const double s = ((mask >> i) & 1) ? -1 : 1;
          const double h = (__builtin_popcount(static_cast<unsigned>(i & j)) & 1) ? -1 : 1;
          want += x[i] * s * h / 4;
        }
        ASSERT_NEAR(v[j], want, 1e-5) << mask << " " << j;
      }
    }
  }
  // Unit vector e_3 under the TE mask: s_3 = -1, so row 3 of H, negated, / 4.
  float e3[16] = {};
  e3[3] = 1.f;
  mx::rht16(e3, mx::kTeWgradSignMask);
  for (int j = 0; j < 16; ++j) {
    const float h = (__builtin_popcount(static_cast<unsigned>(3 & j)) & 1) ? -1.f : 1.f;
    EXPECT_EQ(e3[j], -0.25f * h) << j;
  }
}

TEST(Rht, OrthogonalInverseAndNorm) {
  // Small integers: every intermediate is exact, so the round trip is exact.
  float v[16], x[16];
  for (int i = 0; i < 16; ++i) x[i] = v[i] = static_cast<float>((i * 7) % 11) - 5.f;
  mx::rht16(v, mx::kTeWgradSignMask);
  double n0 = 0, n1 = 0;
  for (int i = 0; i < 16; ++i) {
    n0 += double(x[i]) * x[i];
    n1 += double(v[i]) * v[i];
  }
  EXPECT_DOUBLE_EQ(n0, n1);
  mx::rht16_inverse(v, mx::kTeWgradSignMask);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(v[i], x[i]) << i;
  // Random data: round trip within FP32 rounding.
  std::vector<float> m = random_bf16_matrix(3, 64, 9);
  std::vector<float> r = mx::apply_rht(m.data(), 3, 64, 0xBEEF);
  for (size_t b = 0; b < r.size(); b += 16) mx::rht16_inverse(&r[b], 0xBEEF);
  for (size_t i = 0; i < m.size(); ++i) ASSERT_NEAR(r[i], m[i], 1e-5f * (1.f + std::fabs(m[i])));
}

TEST(Rht, QuantizeWithRhtUsesTransformedValues) {
  const int outer = 4, K = 32;
  std::vector<float> x = random_bf16_matrix(outer, K, 21);
  mx::Nvfp4Options opt;
  opt.rht = true;
  const float a = mx::amax_after_rht(x.data(), outer, K, opt.rht_sign_mask);
  const mx::Nvfp4 t = mx::quantize_nvfp4(x.data(), outer, K, a, opt);
  const std::vector<float> xr = mx::apply_rht(x.data(), outer, K, opt.rht_sign_mask);
  const mx::Nvfp4 ref = mx::quantize_nvfp4(xr.data(), outer, K, a, {});
  EXPECT_EQ(t.data, ref.data);
  EXPECT_EQ(t.scales, ref.scales);
  EXPECT_EQ(a, mx::amax(xr.data(), xr.size()));
  // Undoing the RHT on the dequantized values approximates x.
  std::vector<float> y = mx::dequantize_nvfp4(t);
  for (size_t b = 0; b < y.size(); b += 16) mx::rht16_inverse(&y[b], opt.rht_sign_mask);
  double err2 = 0, sig2 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err2 += double(y[i] - x[i]) * (y[i] - x[i]);
    sig2 += double(x[i]) * x[i];
  }
  EXPECT_LT(err2 / sig2, 0.03);
}

// ---------------------------------------------------------------------------------------------
// Stochastic rounding
// ---------------------------------------------------------------------------------------------
TEST(StochasticRounding, RandomBitsLookUniform) {
  const mx::SrKey key = mx::sr_key(1234, 0);
  double sum = 0;
  int low_bit = 0;
  const int n = 1 << 16;
  for (int e = 0; e < n; ++e) {
    const uint16_t r = mx::sr_bits16(key, static_cast<uint64_t>(e));
    sum += r;
    low_bit += r & 1;
  }
  EXPECT_NEAR(sum / n, 32767.5, 32768.0 * 4 / std::sqrt(3.0 * n));
  EXPECT_NEAR(low_bit, n / 2, 4 * std::sqrt(n / 4.0));
  EXPECT_NE(mx::sr_bits16(mx::sr_key(1, 0), 5), mx::sr_bits16(mx::sr_key(1, 1), 5));
  EXPECT_NE(mx::sr_bits16(mx::sr_key(1, 0), 5), mx::sr_bits16(mx::sr_key(2, 0), 5));
}

TEST(StochasticRounding, UnbiasedAndOnlyAdjacentValues) {
  // Every row: element 0 = 6 (pins the block scale to 448 with tensor amax 6, multiplier 1),
  // elements 1..15 = values between FP4 grid points. 8192 rows = 8192 independent roundings.
  const int outer = 8192, K = 16;
  const float vals[15] = {0.1f, 0.3f, 0.7f, 1.2f, 1.4f, 1.8f, 2.2f, 2.5f,
                          2.9f, 3.3f, 3.9f, 4.5f, 5.5f, -0.3f, -4.2f};
  std::vector<float> x(static_cast<size_t>(outer * K));
  for (int o = 0; o < outer; ++o) {
    x[static_cast<size_t>(o * K)] = 6.f;
    for (int j = 1; j < 16; ++j) x[static_cast<size_t>(o * K + j)] = vals[j - 1];
  }
  mx::Nvfp4Options opt;
  opt.stochastic = true;
  opt.sr_seed = 42;
  const mx::Nvfp4 t = mx::quantize_nvfp4(x.data(), outer, K, 6.f, opt);
  // Block scale 448, global 1/448: dequantize without the (inexact FP32) global factor.
  std::vector<float> y = mx::dequantize_nvfp4(t, false);
  for (float& v : y) v /= 448.f;
  const float grid[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  for (int j = 1; j < 16; ++j) {
    const float v = vals[j - 1], a = std::fabs(v);
    int lo = 0;
    while (grid[lo + 1] <= a) ++lo;
    std::set<float> seen;
    double sum = 0;
    for (int o = 0; o < outer; ++o) {
      const float q = y[static_cast<size_t>(o * K + j)];
      seen.insert(q);
      sum += q;
    }
    for (float q : seen) EXPECT_TRUE(std::fabs(q) == grid[lo] || std::fabs(q) == grid[lo + 1]) << v << " -> " << q;
    EXPECT_EQ(seen.size(), 2u) << v;
    const double spacing = grid[lo + 1] - grid[lo];
    // 5 sigma of a Bernoulli mean over 8192 draws.
    EXPECT_NEAR(sum / outer, v, 5 * spacing * 0.5 / std::sqrt(double(outer))) << v;
  }
  // Deterministic for a given (seed, offset); another offset changes the draw.
  EXPECT_EQ(mx::quantize_nvfp4(x.data(), outer, K, 6.f, opt).data, t.data);
  opt.sr_offset = 1;
  EXPECT_NE(mx::quantize_nvfp4(x.data(), outer, K, 6.f, opt).data, t.data);
  // Nearest rounding never gives two values for the same input.
  const mx::Nvfp4 rn = mx::quantize_nvfp4(x.data(), outer, K, 6.f, {});
  for (int o = 1; o < outer; ++o)
    ASSERT_EQ(nibble(rn.data, static_cast<size_t>(o * K + 3)), nibble(rn.data, 3));
}

TEST(MxHelpers, TransposeAndAmax) {
  const std::vector<float> x = {1, 2, 3, 4, 5, -6};
  const std::vector<float> t = mx::transpose(x.data(), 2, 3);
  EXPECT_EQ(t, (std::vector<float>{1, 4, 2, 5, 3, -6}));
  EXPECT_EQ(mx::amax(x.data(), x.size()), 6.f);
  const float withnan[3] = {1.f, std::numeric_limits<float>::quiet_NaN(), -2.f};
  EXPECT_EQ(mx::amax(withnan, 3), 2.f);
  // Signaling NaNs (BF16 0x7F81..0x7FBF widened) are ignored too, like the GPU's fmaxf
  // (std::fmax would return NaN here).
  const float snan = nf::bf16_to_float(0x7F81);
  ASSERT_TRUE(std::isnan(snan));
  const float withsnan[4] = {std::numeric_limits<float>::infinity(), snan, 3.f, snan};
  EXPECT_EQ(mx::amax(withsnan, 4), std::numeric_limits<float>::infinity());
  const float s2[2] = {snan, -5.f};
  EXPECT_EQ(mx::amax(s2, 2), 5.f);
  // A NaN tensor amax gives the FLT_MAX guard of the global scale, like the GPU's fminf.
  EXPECT_EQ(mx::nvfp4_global_encode_scale(snan), std::numeric_limits<float>::max());
}
