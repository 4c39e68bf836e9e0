// Operand initialisation on the device (outside any timed region).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace gs::cuda {

// x[i] = N(0, stddev) from a counter-based hash of (seed, i): reproducible for a seed, any size.
void fill_normal_bf16(__nv_bfloat16* x, size_t n, uint64_t seed, float stddev, cudaStream_t s);
// The same normal values rounded to FP8 E4M3 (saturating), one byte each.
void fill_normal_fp8_e4m3(uint8_t* x, size_t n, uint64_t seed, float stddev, cudaStream_t s);
// Normal values plus sparse outliers: with probability `rate` an element is multiplied by `scale`
// (activation outliers as seen in LLMs; used by --dist outliers).
void fill_outliers_bf16(__nv_bfloat16* x, size_t n, uint64_t seed, float stddev, float rate, float scale,
                        cudaStream_t s);

}  // namespace gs::cuda
