// Host codecs: see formats.hpp for the contract. Written from the format definitions (OCP 8-bit
// floating point spec v1.0, OCP MX spec v1.0) and checked against CUDA's host conversions.
#include "core/formats/formats.hpp"

#include <cstring>

#include <bit>
#include <cmath>
#include <limits>

namespace gs::nf {
namespace {

uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
float float_of(uint32_t u) { return std::bit_cast<float>(u); }

// A small binary float format: `mbits` stored mantissa bits, exponent bias `bias`, the largest
// finite code `max_code` (sign bit excluded). Normal numbers have unbiased exponents
// >= 1 - bias; below that the format has subnormals with quantum 2^(1 - bias - mbits).
struct Small {
  int mbits;
  int bias;
  uint32_t max_code;
};
constexpr Small kE4M3{3, 7, 0x7E};
constexpr Small kE5M2{2, 15, 0x7B};
constexpr Small kE2M1{1, 1, 0x7};

// Round |a| (finite, >= 0) to the format, nearest-even, without saturation. Returns the magnitude
// code, which may exceed max_code (overflow) — the caller decides what overflow means.
uint32_t round_magnitude(float a, const Small& f) {
  if (a == 0.f) return 0;
  const int emin = 1 - f.bias;                 // exponent of the smallest normal
  int e = std::ilogb(a);                       // floor(log2 a), exact for finite non-zero a
  if (e < emin) e = emin;                      // subnormal range: fixed quantum
  // Anything >= 2^(emax+2) overflows whatever the rounding; clamp to keep the arithmetic tame.
  const int e_cap = static_cast<int>(f.max_code >> f.mbits) - f.bias + 1;
  if (e > e_cap) return f.max_code + 1;
  const float n = std::ldexp(a, f.mbits - e);  // a / quantum, exact (power-of-two scaling)
  const float r = std::nearbyint(n);           // default FE_TONEAREST: ties to even
  const auto ni = static_cast<uint32_t>(r);
  if (e == emin && ni < (1u << f.mbits)) return ni;  // subnormal (or zero)
  // Normal: ni in [2^mbits, 2^(mbits+1)]; ni == 2^(mbits+1) carries into the exponent field.
  return (static_cast<uint32_t>(e + f.bias) << f.mbits) + (ni - (1u << f.mbits));
}

float decode_magnitude(uint32_t m, const Small& f) {
  const uint32_t ef = m >> f.mbits;
  const uint32_t mf = m & ((1u << f.mbits) - 1u);
  if (ef == 0) return std::ldexp(static_cast<float>(mf), 1 - f.bias - f.mbits);
  return std::ldexp(static_cast<float>(mf | (1u << f.mbits)),
                    static_cast<int>(ef) - f.bias - f.mbits);
}

}  // namespace

// ---- BF16 -----------------------------------------------------------------------------------------
float bf16_to_float(uint16_t b) { return float_of(static_cast<uint32_t>(b) << 16); }

uint16_t float_to_bf16_rne(float x) {
  const uint32_t u = bits_of(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7FFFu + lsb) >> 16);
}

// ---- FP8 ----------------------------------------------------------------------------------------------
uint8_t encode_e4m3(float x, bool saturate) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  uint32_t m = std::isinf(a) ? kE4M3.max_code + 1 : round_magnitude(a, kE4M3);
  if (m > kE4M3.max_code) m = saturate ? kE4M3.max_code : 0x7F;  // 0x7F = NaN (no Inf in E4M3)
  return static_cast<uint8_t>(sign | m);
}

float decode_e4m3(uint8_t c) {
  if ((c & 0x7F) == 0x7F) return std::numeric_limits<float>::quiet_NaN();
  const float v = decode_magnitude(c & 0x7Fu, kE4M3);
  return (c & 0x80) ? -v : v;
}

uint8_t encode_e5m2(float x, bool saturate) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  uint32_t m = std::isinf(a) ? kE5M2.max_code + 1 : round_magnitude(a, kE5M2);
  if (m > kE5M2.max_code) m = saturate ? kE5M2.max_code : 0x7C;  // 0x7C = Inf
  return static_cast<uint8_t>(sign | m);
}

float decode_e5m2(uint8_t c) {
  const uint32_t m = c & 0x7Fu;
  float v;
  if (m > 0x7C) return std::numeric_limits<float>::quiet_NaN();
  if (m == 0x7C) {
    v = std::numeric_limits<float>::infinity();
  } else {
    v = decode_magnitude(m, kE5M2);
  }
  return (c & 0x80) ? -v : v;
}

uint8_t encode_fp8(float x, Fp8 kind, bool saturate) {
  return kind == Fp8::E4M3 ? encode_e4m3(x, saturate) : encode_e5m2(x, saturate);
}
float decode_fp8(uint8_t c, Fp8 kind) {
  return kind == Fp8::E4M3 ? decode_e4m3(c) : decode_e5m2(c);
}

// ---- FP4 E2M1 ---------------------------------------------------------------------------------------
uint8_t encode_e2m1(float x) {
  if (std::isnan(x)) return 0x7;
  const uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  const float a = std::fabs(x);
  uint32_t m = std::isinf(a) ? kE2M1.max_code + 1 : round_magnitude(a, kE2M1);
  if (m > kE2M1.max_code) m = kE2M1.max_code;
  return static_cast<uint8_t>(sign | m);
}

float decode_e2m1(uint8_t c) {
  const float v = decode_magnitude(c & 0x7u, kE2M1);
  return (c & 0x8) ? -v : v;
}

uint8_t encode_e2m1_sr(float x, uint16_t r16) {
  if (std::isnan(x)) return 0x7;
  const uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  const float a = std::fmin(std::fabs(x), kE2M1Max);
  // lo = largest FP4 magnitude <= a (its code), found by truncating instead of rounding.
  static constexpr float kGrid[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  uint32_t lo = 0;
  while (lo < 7 && kGrid[lo + 1] <= a) ++lo;
  if (lo == 7) return static_cast<uint8_t>(sign | 7u);
  const float spacing = kGrid[lo + 1] - kGrid[lo];  // 0.5, 1 or 2
  const float t = (a - kGrid[lo]) / spacing;        // exact: Sterbenz + power-of-two divide
  const bool up = t * 65536.f > static_cast<float>(r16);
  return static_cast<uint8_t>(sign | (lo + (up ? 1u : 0u)));
}

// ---- UE4M3 --------------------------------------------------------------------------------------------
uint8_t encode_ue4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  if (std::signbit(x)) return 0x00;
  return encode_e4m3(x, true);
}
float decode_ue4m3(uint8_t c) { return decode_e4m3(static_cast<uint8_t>(c & 0x7F)); }

// ---- UE8M0 --------------------------------------------------------------------------------------------
float decode_ue8m0(uint8_t c) {
  if (c == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  if (c == 0) return float_of(0x00400000u);  // 2^-127, subnormal
  return float_of(static_cast<uint32_t>(c) << 23);
}

uint8_t e8m0_round_up(float x) {
  if (std::isnan(x)) return 0xFF;
  const uint32_t u = bits_of(x) & 0x7FFFFFFFu;  // |x|
  if (u >= 0x7F800000u) return 0xFE;            // Inf saturates
  uint32_t e = u >> 23;
  const uint32_t mant = u & 0x7FFFFFu;
  // Round the exponent up when |x| is not a power of two, except: E8M0 tops out at 2^127 (0xFE),
  // and a subnormal |x| <= 2^-127 (mantissa <= 0x400000) already fits in code 0 = 2^-127.
  if (mant != 0 && e != 0xFE && !(e == 0 && mant <= 0x400000u)) ++e;
  return static_cast<uint8_t>(e);
}

uint8_t mx_scale_e8m0(float block_amax, Fp8 kind) {
  // TE: Quantized_Limits<T>::max_norm_rcp is `static constexpr float max_norm_rcp = 1.0 / max_norm`.
  const float max_norm_rcp = static_cast<float>(1.0 / static_cast<double>(fp8_max(kind)));
  return e8m0_round_up(block_amax * max_norm_rcp);
}

uint8_t mx_scale_e8m0_ocp(float block_amax, Fp8 kind) {
  if (std::isnan(block_amax)) return 0xFF;
  const float a = std::fabs(block_amax);
  if (std::isinf(a)) return 0xFE;
  if (a == 0.f) return 0;
  const int e = std::ilogb(a) - fp8_emax(kind) + 127;
  return static_cast<uint8_t>(e < 0 ? 0 : (e > 254 ? 254 : e));
}

float mx_scale_inv(uint8_t code) {
  if (code == 0) return 1.f;
  if (code == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return float_of(static_cast<uint32_t>(254 - code) << 23);
}

float fp8_block_scale(float amax, Fp8 kind, bool pow2) {
  constexpr float kFltMax = 3.40282347e38f;
  float s = 1.f;
  if (amax > 0.f && amax <= kFltMax) {
    s = fp8_max(kind) / amax;
    if (!(s <= kFltMax)) s = kFltMax;
  }
  if (!pow2) return s;
  uint32_t b = 0;
  std::memcpy(&b, &s, sizeof b);
  b &= 0xff800000u;
  std::memcpy(&s, &b, sizeof s);
  return s;
}

}  // namespace gs::nf
