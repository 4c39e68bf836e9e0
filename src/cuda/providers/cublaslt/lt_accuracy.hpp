// The accuracy pass's GPU work (--accuracy), through cuBLASLt: the reference output of a GEMM of
// the original BF16 operands, and a recipe's error against it, with its own kernels where the GPU
// has them and emulated (its quantization, dequantized, through a BF16 GEMM) where it does not.
// The engine decides which cells are measured and how failures read (engine_cuda.cu accuracy()).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"
#include "cuda/common/device_buffer.hpp"
#include "cuda/common/operands.hpp"

namespace gs::cuda {

// FP32 [m, n] output of a GEMM of `src`'s BF16 operands (exact products, FP32 accumulation).
// Finished when it returns (synchronizes `s`); throws CublasError, CudaError.
DeviceBuffer lt_reference_output(cublasLtHandle_t handle, void* workspace, const Gemm& g, const GemmSources& src,
                                 cudaStream_t s);

// The relative Frobenius error of `recipe`'s output for `g` on `src` against `reference` (FP32
// [m, n]). Not emulated: the recipe's GEMM itself (three per-gemm steps first, so delayed scaling
// has a real history). Emulated (MXFP8, NVFP4 on a GPU without their kernels): the recipe's
// quantization kernels, dequantized to BF16 (exact for these formats), a BF16 GEMM with FP32
// accumulation and output, times the NVFP4 global scales. Synchronizes `s`.
double lt_recipe_error(cublasLtHandle_t handle, void* workspace, const Gemm& g, const Recipe& recipe, GemmSources& src,
                       const float* reference, bool emulate, const RecipeOptions& opts, cudaStream_t s);

}  // namespace gs::cuda
