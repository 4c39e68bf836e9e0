// E2M1 (FP4) round-to-nearest-even encoding on the device, saturating: the 4-bit code of v
// (sign in bit 3, as nf::encode_e2m1; NaN -> +6, code 0x7). Two forms of the same function:
//  * e2m1_rn_thresholds: seven comparisons against the midpoints, written to mirror the host
//    codec line by line (the reference the GPU kernels were first verified with);
//  * e2m1_rn: the fast form the kernels use. Below 1 the grid is {0, 0.5, 1}: round 2|v| to an
//    integer (RNE). From 1 up, E2M1 values are floats with one mantissa bit: round the FP32
//    mantissa to one bit (ties to even) and read exponent and bit off; 8 and above (and Inf)
//    saturate to 6, NaN of either sign is +6. A GPU test checks both forms agree on all 2^32 inputs.
#pragma once
#include <cstdint>

namespace gs::cuda {

__device__ __forceinline__ uint32_t e2m1_rn_thresholds(float v) {
  const float a = fabsf(v);
  if (a != a) return 0x7u;  // NaN -> +6
  const uint32_t c = static_cast<uint32_t>(a > 0.25f) + static_cast<uint32_t>(a >= 0.75f) +
                     static_cast<uint32_t>(a > 1.25f) + static_cast<uint32_t>(a >= 1.75f) +
                     static_cast<uint32_t>(a > 2.5f) + static_cast<uint32_t>(a >= 3.5f) +
                     static_cast<uint32_t>(a > 5.0f);
  return ((__float_as_uint(v) >> 28) & 0x8u) | c;
}

__device__ __forceinline__ uint32_t e2m1_rn(float v) {
  const uint32_t bits = __float_as_uint(v);
  const uint32_t u = bits & 0x7FFFFFFFu;
  if (u > 0x7F800000u) return 0x7u;  // NaN of either sign -> +6
  uint32_t c;
  if (u < 0x3F800000u) {  // |v| < 1: 0, 0.5 or 1 (ties to even: 0.25 -> 0, 0.75 -> 1)
    c = __float2uint_rn(__uint_as_float(u) * 2.0f);
  } else {  // one mantissa bit, RNE (Inf and values >= 7 end at exponent >= 3: saturate)
    const uint32_t r = u + 0x1FFFFFu + ((u >> 22) & 1u);
    const uint32_t e = (r >> 23) - 127u;  // 0: [1,2), 1: [2,4), 2: [4,8); larger, Inf, NaN saturate
    c = e >= 3u ? 0x7u : (((e + 1u) << 1) | ((r >> 22) & 1u));
  }
  return ((bits >> 28) & 0x8u) | c;
}

}  // namespace gs::cuda
