// Block-scaled quantization kernels: BF16 -> MXFP8 / NVFP4 in the layouts cuBLASLt wants on
// sm_100, plus dequantization back to BF16 for accuracy emulation on Hopper. The kernels are our
// own CUDA code (no FP4/E8M0 conversion instructions needed), so they run on sm_90.
//
// Conventions are those of quantize.cuh: the source is a row-major BF16 matrix [rows, cols];
// `transpose=false` quantizes it as is (outer = rows, K = cols), `transpose=true` writes the
// quantized transpose (outer = cols, K = rows). Everything is asynchronous on `stream`, with no
// allocation and no host synchronization. Pointers must be 16-byte aligned (cudaMalloc's are).
//
// Results are bit-identical to the host reference in core/formats/mx_reference.hpp (same scale rules,
// same swizzled scale layout including the zero padding, same stochastic-rounding bits); see
// docs/formats.md for the exact recipes and where they follow Transformer Engine.
// Invalid shapes throw std::invalid_argument before anything is launched.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/formats/mx_reference.hpp"
#include "cuda/quant/quantize.cuh"

namespace gs::cuda {

// ---- sizes (bytes) of the quantized operand [outer, K] --------------------------------------
inline size_t mxfp8_data_bytes(int outer, int K) { return static_cast<size_t>(outer) * static_cast<size_t>(K); }
inline size_t mxfp8_scale_bytes(int outer, int K) { return mx::swizzled_scale_bytes(outer, K, mx::kMxBlock); }
inline size_t nvfp4_data_bytes(int outer, int K) { return static_cast<size_t>(outer) * static_cast<size_t>(K) / 2; }
inline size_t nvfp4_scale_bytes(int outer, int K) { return mx::swizzled_scale_bytes(outer, K, mx::kNvBlock); }

// ---- MXFP8 -------------------------------------------------------------------------------------
// K % 32 == 0. q: [outer, K] FP8 codes (E4M3 or E5M2). scales: mxfp8_scale_bytes(outer, K)
// swizzled UE8M0 (padding written as zeros). Scale rule: Transformer Engine's (E8M0 of
// block_amax / fp8_max rounded up), see nf::mx_scale_e8m0.
void quantize_mxfp8(const __nv_bfloat16* x, int rows, int cols, bool transpose, Fp8Kind kind,
                    uint8_t* q, uint8_t* scales, cudaStream_t stream);

// ---- NVFP4 -------------------------------------------------------------------------------------
using Nvfp4Options = mx::Nvfp4Options;  // two_d, rht (+ sign mask), stochastic (+ seed, offset)

// True when the NVFP4 cast running on the current device uses the hardware FP32 -> E2M1
// conversion (arch-specific Blackwell code, sm_100a / sm_103a), false for the software encoder.
bool nvfp4_hardware_conversion();

// K % 16 == 0. `amax` (device, one float) is the per-tensor amax computed beforehand: max |x|
// (gs::cuda::amax_bf16), or with opt.rht the amax of the transformed tensor (amax_rht_bf16 with
// the same rows/cols/transpose/mask). q: [outer, K/2] bytes, element 2j in the low nibble.
// scales: nvfp4_scale_bytes(outer, K) swizzled UE4M3. global_scale_inv (device float, may be
// null) receives 1 / (2688 / amax): the factor to fold into the GEMM alpha.
void quantize_nvfp4(const __nv_bfloat16* x, int rows, int cols, bool transpose, const float* amax,
                    const Nvfp4Options& opt, uint8_t* q, uint8_t* scales, float* global_scale_inv,
                    cudaStream_t stream);

// *amax = max |RHT16(x)| over all 16-blocks along K (of x, or of x^T when transpose). Zeroes
// *amax itself (cudaMemsetAsync) before accumulating. K % 16 == 0.
void amax_rht_bf16(const __nv_bfloat16* x, int rows, int cols, bool transpose, uint16_t sign_mask,
                   float* amax, cudaStream_t stream);

// ---- dequantization (accuracy emulation) -------------------------------------------------------
// y[o, k] = BF16_rn(decode(q) * decode(scale)): [outer, K] row-major. For NVFP4 the global scale
// is NOT applied (the product code * UE4M3 is exact in BF16); multiply the GEMM result by the
// global_scale_inv of each operand instead. The RHT, if any, is not undone.
void dequantize_mxfp8(const uint8_t* q, const uint8_t* scales, int outer, int K, Fp8Kind kind,
                      __nv_bfloat16* y, cudaStream_t stream);
void dequantize_nvfp4(const uint8_t* q, const uint8_t* scales, int outer, int K,
                      __nv_bfloat16* y, cudaStream_t stream);

}  // namespace gs::cuda
