#include "cuda/providers/cublaslt/lt_accuracy.hpp"

#include <cuda_bf16.h>

#include "cuda/common/cuda_check.hpp"
#include "cuda/common/error_norm.cuh"
#include "cuda/providers/cublaslt/gemm_lt.hpp"
#include "cuda/providers/cublaslt/recipe_gemm.hpp"

namespace gs::cuda {

DeviceBuffer lt_reference_output(cublasLtHandle_t handle, void* workspace, const Gemm& g, const GemmSources& src,
                                 cudaStream_t s) {
  const size_t mn = static_cast<size_t>(g.m) * static_cast<size_t>(g.n);
  DeviceBuffer out(mn * sizeof(float));
  // NaN until the GEMM writes it: an element it did not write can never pass as an error of zero
  // (and compute-sanitizer's initcheck, which does not see this GEMM kernel's stores, stops
  // flagging the reads).
  GS_CUDA(cudaMemsetAsync(out.get(), 0xFF, out.bytes(), s));
  LtProblem lp;
  lp.m = g.m; lp.n = g.n; lp.k = g.k;
  lp.l = {src.l.get(), CUDA_R_16BF, g.a.k_major, nullptr, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F};
  lp.r = {src.r.get(), CUDA_R_16BF, g.b.k_major, nullptr, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F};
  lp.c = out.get();
  lp.c_type = CUDA_R_32F;
  LtMatmul ref(handle, lp, workspace, kWorkspaceBytes);
  ref.run(s);
  GS_CUDA(cudaStreamSynchronize(s));
  return out;
}

double lt_recipe_error(cublasLtHandle_t handle, void* workspace, const Gemm& g, const Recipe& recipe, GemmSources& src,
                       const float* reference, bool emulate, const RecipeOptions& opts, cudaStream_t s) {
  const size_t mn = static_cast<size_t>(g.m) * static_cast<size_t>(g.n);
  if (!emulate) {
    RecipeGemm rg(handle, g, recipe, src, workspace, opts);
    for (int i = 0; i < 3; ++i) rg.per_gemm_step(s);  // delayed scaling: a real history
    return rel_frobenius_error(src.c.get(), true, reference, mn, nullptr, s);
  }
  RecipeGemm rg(handle, g, recipe, src, workspace, opts, /*with_gemm=*/false);
  rg.quantize_only(s);
  DeviceBuffer lq(static_cast<size_t>(g.m) * static_cast<size_t>(g.k) * 2);
  DeviceBuffer rq(static_cast<size_t>(g.n) * static_cast<size_t>(g.k) * 2);
  DeviceBuffer out(mn * sizeof(float));
  GS_CUDA(cudaMemsetAsync(out.get(), 0xFF, out.bytes(), s));  // NaN until written, as the reference
  rg.l()->dequantize_to(lq.get<__nv_bfloat16>(), s);
  rg.r()->dequantize_to(rq.get<__nv_bfloat16>(), s);
  LtProblem lp;
  lp.m = g.m; lp.n = g.n; lp.k = g.k;
  lp.l = {lq.get(), CUDA_R_16BF, true, nullptr, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F};
  lp.r = {rq.get(), CUDA_R_16BF, true, nullptr, CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F};
  lp.c = out.get();
  lp.c_type = CUDA_R_32F;
  LtMatmul mm(handle, lp, workspace, kWorkspaceBytes);
  mm.run(s);
  return rel_frobenius_error(out.get(), false, reference, mn, rg.alpha_device(), s);
}

}  // namespace gs::cuda
