// Relative Frobenius norms on the device (FP64 accumulation).
// ||alpha*x - ref||_F / ||ref||_F, for --accuracy.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace gs::cuda {

// x is BF16 (x_is_bf16) or FP32; alpha_beta (device, may be null) points at {alpha, 0}: the
// NVFP4 global-scale product that multiplies an emulated result. Synchronizes `s`.
double rel_frobenius_error(const void* x, bool x_is_bf16, const float* ref, size_t n, const float* alpha,
                           cudaStream_t s);

// ||x - ref||_F / ||ref||_F of two outputs of the same type (BF16 or FP32): --algo search checks
// a kept configuration's output against the heuristic's. Synchronizes `s`; infinity when either
// holds a non-finite element.
double rel_frobenius_difference(const void* x, const void* ref, bool bf16, size_t n, cudaStream_t s);

}  // namespace gs::cuda
