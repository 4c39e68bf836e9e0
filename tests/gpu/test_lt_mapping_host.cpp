// Host-only checks of the sm_100 (and sm_90) cuBLASLt mapping: runs on the CPU CI machine too
// (no GS_REQUIRE_GPU), because it needs no device: recipe -> cuBLASLt data type and scale mode,
// and the descriptor/layout objects cuBLASLt builds for them (cublasLtCreate needs a GPU; the
// descriptor and layout calls do not).
#include <cublasLt.h>
#include <gtest/gtest.h>

#include "core/plan.hpp"
#include "core/recipe.hpp"
#include "cuda/recipe_gemm.hpp"

using namespace gs;

TEST(LtMappingHost, RecipesMapToTheDocumentedTypesAndScaleModes) {
  Plan p = build_model_plan(default_config());
  RecipeOptions o;
  const Gemm& fprop = p.gemms[0];
  const Gemm& wgrad = p.gemms[8];
  Recipe mx = make_recipe(Precision::MXFP8, wgrad, o);
  EXPECT_EQ(cuda::cuda_type(mx.a.format), CUDA_R_8F_E4M3);
  EXPECT_EQ(cuda::cuda_type(mx.b.format), CUDA_R_8F_E5M2);  // dY under the hybrid format
  EXPECT_EQ(cuda::lt_scale_mode(mx.a.scaling), CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0);
  Recipe nv = make_recipe(Precision::NVFP4, fprop, o);
  EXPECT_EQ(cuda::cuda_type(nv.a.format), CUDA_R_4F_E2M1);
  EXPECT_EQ(cuda::lt_scale_mode(nv.a.scaling), CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3);
  EXPECT_EQ(cuda::lt_scale_mode(nv.b.scaling), CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3);  // 16x16 2D too
  Recipe blk = make_recipe(Precision::FP8Block, fprop, o);
  EXPECT_EQ(cuda::lt_scale_mode(blk.a.scaling), CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F);
  EXPECT_EQ(cuda::lt_scale_mode(blk.b.scaling), CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F);
  EXPECT_EQ(cuda::lt_scale_mode(make_recipe(Precision::FP8Current, fprop, o).a.scaling),
            CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F);
  o.fp8_block_via_mxfp8 = true;
  EXPECT_EQ(cuda::lt_scale_mode(make_recipe(Precision::FP8Block, fprop, o).b.scaling),
            CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0);
}

TEST(LtMappingHost, Sm100DescriptorsAndFp4LayoutsBuildWithoutAGpu) {
  cublasLtMatmulDesc_t d = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  for (auto mode : {CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3, CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0}) {
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode), CUBLAS_STATUS_SUCCESS);
  }
  const cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_DEVICE;  // NVFP4's alpha lives on the device
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm), CUBLAS_STATUS_SUCCESS);
  // FP4 operands: K and leading dimension counted in elements (two per byte), TN like FP8.
  cublasLtMatrixLayout_t a = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&a, CUDA_R_4F_E2M1, 4096, 12288, 4096), CUBLAS_STATUS_SUCCESS);
  uint64_t rows = 0;
  size_t written = 0;
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(a, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(rows, 4096u);
  cublasLtMatrixLayoutDestroy(a);
  cublasLtMatmulDescDestroy(d);
}
