// Quantization kernels: BF16 -> FP8 / MXFP8 / NVFP4 in exactly the layouts cuBLASLt wants.
//
// Conventions (all kernels):
//  * The source is a row-major BF16 matrix [rows, cols] (cols contiguous).
//  * cuBLASLt low-precision GEMMs on sm_90/sm_100 are "TN": each quantized operand is stored
//    [outer, K] with K (the contraction dimension) contiguous. `transpose=false` quantizes the
//    source as is (outer = rows, K = cols); `transpose=true` writes the transpose
//    (outer = cols, K = rows) — the fused cast+transpose that Dgrad/Wgrad operands need.
//  * Scales handed to cuBLASLt are DEQUANTIZATION scales (x ~= q * scale_inv).
//  * Everything is asynchronous on `stream`; no host synchronization, no allocation inside
//    (callers pass workspace), so the calls can sit inside a timed region.
//
// FP8 kernels (implemented in quantize.cu, design and numbers in docs/quantization.md):
//  * Requirements, checked on the host (std::invalid_argument otherwise): rows, cols >= 0;
//    cols % 8 == 0 (16-byte BF16 vectors); x and q 16-byte aligned (cudaMalloc pointers are).
//    rows may be anything (a transposed output whose rows % 16 != 0 is written bytewise).
//    q holds rows*cols bytes: [rows, cols] when transpose=false, [cols, rows] when true.
//  * Scale formula, in FP32 (IEEE division, no fast math), one definition for every recipe:
//      scale = fmax / amax; amax == 0 or not finite -> fallback; quotient overflow -> FLT_MAX
//      q = RNE_saturate(float(x) * scale)   (cuda_fp8.h __NV_SATFINITE: |q| <= fmax)
//      scale_inv = 1.f / scale              (what the GEMM gets, also for block scaling)
//    fallback = 1 for current and block scaling, the previous scale for delayed scaling.
//  * amax is max |x| over BF16 values (exact); a NaN input makes amax NaN (-> fallback scale).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace gs::cuda {

enum class Fp8Kind : int { E4M3 = 0, E5M2 = 1 };
constexpr float fp8_max(Fp8Kind k) { return k == Fp8Kind::E4M3 ? 448.f : 57344.f; }

// ---- per-tensor scaling -----------------------------------------------------------------
// amax = max |x| over n elements, written to *amax (device). Handles its own zeroing.
// `workspace` must hold amax_workspace_bytes(n) bytes (at most 8 KiB, 4-byte aligned).
// Two kernels: per-block partial maxima into the workspace, then one block writes *amax (no
// accumulator survives between calls, so nothing needs zeroing). Any x alignment, any n.
size_t amax_workspace_bytes(size_t n);
void amax_bf16(const __nv_bfloat16* x, size_t n, float* amax, void* workspace, cudaStream_t s);

// Current scaling cast: scale = fmax/amax (amax==0 -> scale 1), writes scale_inv = 1/scale,
// q = sat_rn(x * scale).
void cast_fp8_current(const __nv_bfloat16* x, int rows, int cols, bool transpose, Fp8Kind kind,
                      const float* amax, uint8_t* q, float* scale_inv, cudaStream_t s);

// Delayed scaling: one fused pass that casts with the *given* scale (from the amax history)
// and records this tensor's amax into history[*pos] (history has `hist_len` slots).
// scale_inv_out receives 1/scale (what the GEMM consumes for this call).
// Recording is atomicMax on the FP32 bits, so history[*pos] must hold +0.0 or an earlier amax
// of the same step (several casts in one step record their max): start with history zeroed
// (cudaMemset 0), *pos = 0, *scale = 1; delayed_scale_update zeroes the slot it moves to.
void cast_fp8_delayed(const __nv_bfloat16* x, int rows, int cols, bool transpose, Fp8Kind kind,
                      const float* scale, uint8_t* q, float* scale_inv_out, float* history,
                      const int* pos, cudaStream_t s);
// The recipe's history step: new scale = fmax / max(history) (max reduction, TE's default
// "max" algorithm, margin 0), advance *pos modulo hist_len.
// One block, any hist_len >= 1. If max(history) is 0 or not finite the scale is kept (as
// Transformer Engine does). Then *pos = (*pos + 1) % hist_len and history[*pos] = 0, ready
// for the next step's casts. Per step: casts (use *scale, record amax), then this update.
void delayed_scale_update(float* history, int hist_len, int* pos, Fp8Kind kind, float* scale,
                          cudaStream_t s);

// ---- FP8 block scaling (DeepSeek-V3 / TE Float8BlockScaling) ------------------------------
// One pass over the input for every variant (block amax, scale and cast fused). Partial last
// blocks (K % 128 != 0, outer % 128 != 0) take the amax of their valid elements only.
// scale_inv = 1 / (fmax / amax) (the reciprocal of the scale actually used), amax == 0 -> 1.
// pow2 (Transformer Engine's default for Float8BlockScaling): the scale fmax / amax is rounded
// down to a power of two (its mantissa bits cleared) before use, so scale_inv is exact too
// (host reference: gs::nf::fp8_block_scale in core/formats/formats.hpp).
// With transpose=true the blocks follow the transposed operand: 1x128 blocks run along the
// source's rows (the new K); 128x128 tiles are the same source tiles, indexed (ob = col tile,
// kb = row tile).
// 1x128: one FP32 scale per 128 consecutive K elements of each outer row.
// Scale layout = cuBLASLt VEC128_32F: s[kb * outer + o], kb < ceil(K/128).
void quantize_block_1x128(const __nv_bfloat16* x, int rows, int cols, bool transpose, Fp8Kind kind,
                          uint8_t* q, float* scale_inv, cudaStream_t s, bool pow2 = false);
// 128x128: one FP32 scale per 128x128 tile. Layout = cuBLASLt BLK128x128_32F:
// s[ob * L4 + kb], L4 = ceil(K/128) rounded up to a multiple of 4 (padding left untouched;
// zero it once if the GEMM may read it).
void quantize_block_128x128(const __nv_bfloat16* x, int rows, int cols, bool transpose,
                            Fp8Kind kind, uint8_t* q, float* scale_inv, cudaStream_t s, bool pow2 = false);
// ---- dual output (training mode: one cast per tensor and step) --------------------------------
// One read of the source [rows, cols] writes both copies a tensor's GEMMs need: q_row [rows, cols]
// (the source layout, what transpose=false writes) and q_t [cols, rows] (what transpose=true
// writes), each with its scales, bit-identical to the single-output calls above. Same
// requirements; q_t must be 16-byte aligned too. Per-tensor scales are written to both scale
// pointers; delayed scaling records the amax once.
void cast_fp8_current_dual(const __nv_bfloat16* x, int rows, int cols, Fp8Kind kind, const float* amax,
                           uint8_t* q_row, float* scale_inv_row, uint8_t* q_t, float* scale_inv_t,
                           cudaStream_t s);
void cast_fp8_delayed_dual(const __nv_bfloat16* x, int rows, int cols, Fp8Kind kind, const float* scale,
                           uint8_t* q_row, float* scale_inv_row, uint8_t* q_t, float* scale_inv_t,
                           float* history, const int* pos, cudaStream_t s);
void quantize_block_1x128_dual(const __nv_bfloat16* x, int rows, int cols, Fp8Kind kind, uint8_t* q_row,
                               float* scale_inv_row, uint8_t* q_t, float* scale_inv_t, cudaStream_t s,
                               bool pow2 = false);
void quantize_block_128x128_dual(const __nv_bfloat16* x, int rows, int cols, Fp8Kind kind, uint8_t* q_row,
                                 float* scale_inv_row, uint8_t* q_t, float* scale_inv_t, cudaStream_t s,
                                 bool pow2 = false);

inline int block_scale_count_1x128(int outer, int K) { return ((K + 127) / 128) * outer; }
inline int block_scale_count_128x128(int outer, int K) {
  return ((outer + 127) / 128) * ((((K + 127) / 128) + 3) / 4 * 4);
}

}  // namespace gs::cuda
