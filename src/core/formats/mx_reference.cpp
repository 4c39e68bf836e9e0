// Host reference quantizers: see mx_reference.hpp. Written to mirror, operation for operation, the
// FP32 arithmetic of Transformer Engine's MXFP8 / NVFP4 cast kernels, so that the results are
// reproducible bit for bit by our own CUDA kernels.
#include "core/formats/mx_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace gs::mx {
namespace {

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(std::string("gs::mx: ") + what);
}

// The GPU's fmaxf(m, |v|): a NaN operand is ignored — quiet or signaling. (std::fmax would
// return NaN for a signaling NaN, and BF16 0x7F81..0x7FBF widen to signaling NaNs.)
float max_abs(float m, float v) {
  const float a = std::fabs(v);
  return a > m ? a : m;
}
// The GPU's fminf(x, FLT_MAX): NaN and +Inf -> FLT_MAX.
float min_flt_max(float x) {
  constexpr float kFlt = std::numeric_limits<float>::max();
  return x <= kFlt ? x : kFlt;
}

}  // namespace

// ---- RHT ----------------------------------------------------------------------------------------------
namespace {
void butterfly16(float* v) {
  for (int h = 1; h < 16; h <<= 1) {
    for (int i = 0; i < 16; ++i) {
      if (i & h) continue;
      const float a = v[i], b = v[i + h];
      v[i] = a + b;
      v[i + h] = a - b;
    }
  }
}
void flip_signs(float* v, uint16_t mask) {
  for (int i = 0; i < 16; ++i)
    if ((mask >> i) & 1u) v[i] = -v[i];
}
}  // namespace

void rht16(float* v, uint16_t sign_mask) {
  flip_signs(v, sign_mask);
  butterfly16(v);
  for (int i = 0; i < 16; ++i) v[i] *= 0.25f;
}

void rht16_inverse(float* v, uint16_t sign_mask) {
  butterfly16(v);
  for (int i = 0; i < 16; ++i) v[i] *= 0.25f;
  flip_signs(v, sign_mask);
}

std::vector<float> apply_rht(const float* x, int outer, int K, uint16_t sign_mask) {
  require(outer >= 0 && K >= 0 && K % 16 == 0, "apply_rht: K must be a multiple of 16");
  std::vector<float> y(x, x + static_cast<size_t>(outer) * static_cast<size_t>(K));
  for (size_t b = 0; b < y.size(); b += 16) rht16(&y[b], sign_mask);
  return y;
}

float amax(const float* x, size_t n) {
  float m = 0.f;
  for (size_t i = 0; i < n; ++i) m = max_abs(m, x[i]);
  return m;
}

float amax_after_rht(const float* x, int outer, int K, uint16_t sign_mask) {
  const std::vector<float> y = apply_rht(x, outer, K, sign_mask);
  return amax(y.data(), y.size());
}

std::vector<float> transpose(const float* x, int rows, int cols) {
  std::vector<float> t(static_cast<size_t>(rows) * static_cast<size_t>(cols));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      t[static_cast<size_t>(c) * static_cast<size_t>(rows) + static_cast<size_t>(r)] =
          x[static_cast<size_t>(r) * static_cast<size_t>(cols) + static_cast<size_t>(c)];
  return t;
}

// ---- MXFP8 --------------------------------------------------------------------------------------------
Mxfp8 quantize_mxfp8(const float* x, int outer, int K, nf::Fp8 kind) {
  require(outer >= 0 && K >= 0 && K % kMxBlock == 0, "quantize_mxfp8: K must be a multiple of 32");
  Mxfp8 t;
  t.outer = outer;
  t.K = K;
  t.kind = kind;
  t.data.assign(static_cast<size_t>(outer) * static_cast<size_t>(K), 0);
  t.scales.assign(swizzled_scale_bytes(outer, K, kMxBlock), 0);
  const int S4 = scale_cols_padded(K, kMxBlock);
  for (int o = 0; o < outer; ++o) {
    const float* row = x + static_cast<size_t>(o) * static_cast<size_t>(K);
    uint8_t* q = t.data.data() + static_cast<size_t>(o) * static_cast<size_t>(K);
    for (int b = 0; b < K / kMxBlock; ++b) {
      float m = 0.f;
      for (int j = 0; j < kMxBlock; ++j) m = max_abs(m, row[b * kMxBlock + j]);
      const uint8_t code = nf::mx_scale_e8m0(m, kind);
      t.scales[swizzled_scale_index(o, b, S4)] = code;
      const float mul = nf::mx_scale_inv(code);
      for (int j = 0; j < kMxBlock; ++j)
        q[b * kMxBlock + j] = nf::encode_fp8(row[b * kMxBlock + j] * mul, kind, true);
    }
  }
  return t;
}

std::vector<float> dequantize_mxfp8(const Mxfp8& t) {
  std::vector<float> y(static_cast<size_t>(t.outer) * static_cast<size_t>(t.K));
  const int S4 = scale_cols_padded(t.K, kMxBlock);
  for (int o = 0; o < t.outer; ++o)
    for (int k = 0; k < t.K; ++k) {
      const size_t e = static_cast<size_t>(o) * static_cast<size_t>(t.K) + static_cast<size_t>(k);
      const float s = nf::decode_ue8m0(t.scales[swizzled_scale_index(o, k / kMxBlock, S4)]);
      y[e] = nf::decode_fp8(t.data[e], t.kind) * s;
    }
  return y;
}

// ---- NVFP4 --------------------------------------------------------------------------------------------
float nvfp4_global_encode_scale(float tensor_amax) {
  float s = (nf::kE4M3Max * nf::kE2M1Max) / tensor_amax;  // 2688 / amax
  s = min_flt_max(s);
  if (tensor_amax == 0.f || s == 0.f) return 1.f;
  return s;
}

uint8_t nvfp4_block_scale(float block_amax, float s_enc) {
  constexpr float kRcp6 = 1.0f / 6.0f;
  return nf::encode_ue4m3(block_amax * (s_enc * kRcp6));
}

float nvfp4_block_encode_multiplier(uint8_t block_scale, float s_dec) {
  return min_flt_max(1.0f / (nf::decode_ue4m3(block_scale) * s_dec));
}

Nvfp4 quantize_nvfp4(const float* x, int outer, int K, float tensor_amax,
                     const Nvfp4Options& opt) {
  require(outer >= 0 && K >= 0 && K % kNvBlock == 0, "quantize_nvfp4: K must be a multiple of 16");
  Nvfp4 t;
  t.outer = outer;
  t.K = K;
  t.data.assign(static_cast<size_t>(outer) * static_cast<size_t>(K) / 2, 0);
  t.scales.assign(swizzled_scale_bytes(outer, K, kNvBlock), 0);
  t.s_enc = nvfp4_global_encode_scale(tensor_amax);
  t.s_dec = 1.0f / t.s_enc;
  const int S4 = scale_cols_padded(K, kNvBlock);
  const int nb = K / kNvBlock;

  // Values after the optional RHT.
  std::vector<float> v = opt.rht ? apply_rht(x, outer, K, opt.rht_sign_mask)
                                 : std::vector<float>(x, x + static_cast<size_t>(outer) *
                                                                 static_cast<size_t>(K));
  auto at = [&](int o, int k) -> float {
    return v[static_cast<size_t>(o) * static_cast<size_t>(K) + static_cast<size_t>(k)];
  };

  // Block amax: 1x16, or the 16x16 tile containing the block.
  auto block_amax = [&](int o, int b) {
    float m = 0.f;
    const int o0 = opt.two_d ? o / 16 * 16 : o;
    const int o1 = opt.two_d ? std::min(o0 + 16, outer) : o + 1;
    for (int r = o0; r < o1; ++r)
      for (int j = 0; j < kNvBlock; ++j) m = max_abs(m, at(r, b * kNvBlock + j));
    return m;
  };

  const SrKey key = sr_key(opt.sr_seed, opt.sr_offset);
  for (int o = 0; o < outer; ++o) {
    for (int b = 0; b < nb; ++b) {
      const uint8_t sc = nvfp4_block_scale(block_amax(o, b), t.s_enc);
      t.scales[swizzled_scale_index(o, b, S4)] = sc;
      const float mul = nvfp4_block_encode_multiplier(sc, t.s_dec);
      for (int j = 0; j < kNvBlock; ++j) {
        const int k = b * kNvBlock + j;
        const float y = at(o, k) * mul;
        const uint64_t e = static_cast<uint64_t>(o) * static_cast<uint64_t>(K) +
                           static_cast<uint64_t>(k);
        const uint8_t c = opt.stochastic ? nf::encode_e2m1_sr(y, sr_bits16(key, e))
                                         : nf::encode_e2m1(y);
        uint8_t& byte = t.data[e / 2];
        byte = static_cast<uint8_t>((k & 1) ? (byte | (c << 4)) : (byte | c));
      }
    }
  }
  return t;
}

std::vector<float> dequantize_nvfp4(const Nvfp4& t, bool apply_global) {
  std::vector<float> y(static_cast<size_t>(t.outer) * static_cast<size_t>(t.K));
  const int S4 = scale_cols_padded(t.K, kNvBlock);
  for (int o = 0; o < t.outer; ++o)
    for (int k = 0; k < t.K; ++k) {
      const size_t e = static_cast<size_t>(o) * static_cast<size_t>(t.K) + static_cast<size_t>(k);
      const uint8_t byte = t.data[e / 2];
      const uint8_t c = static_cast<uint8_t>((k & 1) ? (byte >> 4) : (byte & 0xF));
      const float s = nf::decode_ue4m3(t.scales[swizzled_scale_index(o, k / kNvBlock, S4)]);
      float val = nf::decode_e2m1(c) * s;
      if (apply_global) val *= t.s_dec;
      y[e] = val;
    }
  return y;
}

}  // namespace gs::mx
