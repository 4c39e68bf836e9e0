// Bit-exact host codecs for the low-precision formats gemmscope benchmarks (pure C++, no CUDA).
//
// Every encoder rounds to nearest, ties to even, from the exact value of the float argument, and
// reproduces the CUDA 13 conversions bit for bit (tests/core/formats/test_formats.cpp checks all 65,536
// BF16 patterns and a dense FP32 sample against cuda_fp8.h / cuda_fp4.h):
//   encode_e4m3(x, true)  == __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)
//   encode_e4m3(x, false) == __nv_cvt_float_to_fp8(x, __NV_NOSAT,     __NV_E4M3)
//   encode_e5m2(x, s)     == __nv_cvt_float_to_fp8(x, s ? __NV_SATFINITE : __NV_NOSAT, __NV_E5M2)
//   encode_e2m1(x)        == __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest)
//   e8m0_round_up(x)      == __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf)
//
// Special values (what CUDA's host conversions return, and so what these return):
//   * NaN input: E4M3 -> 0x7F, E5M2 -> 0x7F (both with the sign bit clear: CUDA canonicalizes the
//     NaN first), E2M1 -> 0x7 (+6.0: the FP4 conversion is always "satfinite" and maps NaN to +max).
//   * +-Inf or |x| beyond the rounding range, saturating: +-max finite (E4M3 0x7E = 448,
//     E5M2 0x7B = 57344, E2M1 0x7 = 6). Not saturating: E4M3 -> 0x7F|sign (NaN, E4M3 has no Inf),
//     E5M2 -> 0x7C|sign (Inf).
//   * Values that round to zero keep their sign (-1e-9 -> 0x80 in FP8, 0x8 in FP4).
// On the GPU, the satfinite FP8 conversions (cvt.rn.satfinite.e4m3x2.f32 on sm_89+) agree with
// these for every non-NaN input; for NaN the hardware also returns a NaN code, but its sign bit
// is not specified here.
#pragma once
#include <cstdint>

namespace gs::nf {

// FP8 flavour. Same numbering as gs::cuda::Fp8Kind.
enum class Fp8 : int { E4M3 = 0, E5M2 = 1 };

constexpr float kE4M3Max = 448.f;
constexpr float kE5M2Max = 57344.f;
constexpr float kE2M1Max = 6.f;
constexpr float fp8_max(Fp8 k) { return k == Fp8::E4M3 ? kE4M3Max : kE5M2Max; }
// Exponent of the largest power of two below the format's max normal (OCP "emax_elem").
constexpr int fp8_emax(Fp8 k) { return k == Fp8::E4M3 ? 8 : 15; }

// FP8 block scaling's scale (what the block quantization kernels multiply by): fmax / amax in
// FP32, 1 when amax is 0, negative, NaN or +inf, FLT_MAX when the quotient overflows. pow2
// (Transformer Engine's Float8BlockScaling default): rounded down to a power of two, i.e. the
// mantissa bits cleared, so that 1/scale is exact and never overflows FP8 more than the exact scale.
float fp8_block_scale(float amax, Fp8 kind, bool pow2);

// ---- BF16 -------------------------------------------------------------------------------------
float bf16_to_float(uint16_t b);
// Round to nearest even; NaN -> 0x7FFF (CUDA's canonical NaN); overflow -> Inf, as IEEE says.
uint16_t float_to_bf16_rne(float x);

// ---- OCP FP8 E4M3 (bias 7, max 448, no Inf, NaN = S.1111.111) ----------------------------------
uint8_t encode_e4m3(float x, bool saturate = true);
float decode_e4m3(uint8_t c);

// ---- OCP FP8 E5M2 (bias 15, max 57344, Inf = S.11111.00, NaN = S.11111.xx) ---------------------
uint8_t encode_e5m2(float x, bool saturate = true);
float decode_e5m2(uint8_t c);

uint8_t encode_fp8(float x, Fp8 kind, bool saturate = true);
float decode_fp8(uint8_t c, Fp8 kind);

// ---- FP4 E2M1 (bias 1, values 0 .5 1 1.5 2 3 4 6, bit 3 = sign; code in the low nibble) --------
uint8_t encode_e2m1(float x);
float decode_e2m1(uint8_t c);  // uses the low nibble only
// Stochastic rounding to E2M1 (our rule, see docs/formats.md): a = |x| clamped to [0, 6] (NaN ->
// +6 like the nearest-rounding encoder); lo <= a < hi the two neighbouring FP4 magnitudes,
// t = (a - lo) / (hi - lo) (exact in FP32 because the FP4 spacings are powers of two); the result
// is hi when t * 65536 > r16, else lo, so P(hi) = ceil(t * 65536) / 65536. Sign of x is kept.
uint8_t encode_e2m1_sr(float x, uint16_t r16);

// ---- UE4M3: E4M3 with the sign bit unused (NVFP4 block scale, CUDA_R_8F_UE4M3) ----------------
// Non-negative inputs encode exactly like encode_e4m3(x, true); negative inputs (incl. -0) -> 0;
// NaN -> 0x7F. Decode ignores bit 7.
uint8_t encode_ue4m3(float x);
float decode_ue4m3(uint8_t c);

// ---- UE8M0: 2^(c-127), c = 0..254; 0xFF = NaN (MX block scale, CUDA_R_8F_UE8M0) --------------
float decode_ue8m0(uint8_t c);  // c = 0 gives 2^-127 (an FP32 subnormal)
// Smallest 2^e >= |x| that E8M0 can hold (round toward +Inf, saturating): 0 -> 0x00,
// |x| <= 2^-127 -> 0x00, |x| > 2^127 or Inf -> 0xFE, NaN -> 0xFF.
// This is Transformer Engine's ptx::float_to_e8m0 (software path) and the sm_100
// cvt.rp.satfinite.ue8m0x2.f32 instruction.
uint8_t e8m0_round_up(float x);

// MXFP8 block scale, Transformer Engine's rule (transformer_engine/common/util/ptx.cuh,
// float_to_e8m0, used by the MXFP8 cast kernels as
//   float_to_e8m0(block_amax * Quantized_Limits<OType>::max_norm_rcp)):
//   code = e8m0_round_up(amax * float(1.0 / fp8_max(kind)))   (one FP32 multiply, RN)
// i.e. the smallest power of two S with amax / S <= fp8_max, so no element of the block
// saturates. The OCP MX v1.0 spec instead takes S = 2^(floor(log2 amax) - emax_elem), which
// saturates blocks whose amax mantissa exceeds that of fp8_max (e.g. amax in (448, 512) -> S = 1).
// We model TE, so this is the rule used everywhere in gemmscope.
uint8_t mx_scale_e8m0(float block_amax, Fp8 kind);
// The OCP MX v1.0 rule, kept for comparison/tests only: clamp(floor(log2 amax) - emax + 127,
// 0, 254); amax == 0 -> 0; NaN -> 0xFF; Inf -> 0xFE.
uint8_t mx_scale_e8m0_ocp(float block_amax, Fp8 kind);
// The multiplier applied to the data before the FP8 cast (TE ptx::exp2f_rcp): 2^(127 - code),
// except code 0 -> 1.0 (an all-zero block) and code 254 -> 0.0 (a TE quirk; unreachable from
// BF16 inputs), code 255 -> NaN.
float mx_scale_inv(uint8_t code);

}  // namespace gs::nf
