// Host-only checks of the sm_100 (and sm_90) cuBLASLt mapping: runs on the CPU CI machine too
// (no GS_REQUIRE_GPU), because it needs no device: recipe -> cuBLASLt data type and scale mode,
// and the descriptor/layout objects cuBLASLt builds for them (cublasLtCreate needs a GPU; the
// descriptor and layout calls do not).
#include <cublasLt.h>
#include <gtest/gtest.h>

#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"
#include "cuda/providers/cublaslt/gemm_lt.hpp"
#include "cuda/providers/cublaslt/recipe_gemm.hpp"

using namespace gs;

TEST(LtMappingHost, RecipesMapToTheDocumentedTypesAndScaleModes) {
  Plan p = build_model_plan(default_config());
  RecipeOptions o;
  const Gemm& fprop = p.gemms[0];
  const Gemm& wgrad = p.gemms[8];
  // TE's MXFP8BlockScaling default: E4M3 for dY too; the hybrid option maps dY to E5M2.
  EXPECT_EQ(cuda::cuda_type(make_recipe(Precision::MXFP8, wgrad, o).a.format), CUDA_R_8F_E4M3);
  o.block_fp8_format = Fp8Format::Hybrid;
  Recipe mx = make_recipe(Precision::MXFP8, wgrad, o);
  EXPECT_EQ(cuda::cuda_type(mx.a.format), CUDA_R_8F_E5M2);  // dY^T under the hybrid format
  EXPECT_EQ(cuda::cuda_type(mx.b.format), CUDA_R_8F_E4M3);
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

namespace {

template <class T>
T desc_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a) {
  T v{};
  size_t written = 0;
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(d, a, &v, sizeof v, &written), CUBLAS_STATUS_SUCCESS);
  return v;
}

template <class T>
T layout_attr(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a) {
  T v{};
  size_t written = 0;
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, a, &v, sizeof v, &written), CUBLAS_STATUS_SUCCESS);
  return v;
}

// The problem RecipeGemm hands cuBLASLt for a quantized recipe, with stand-in pointers.
cuda::LtProblem problem(const Gemm& g, const Recipe& r, bool device_alpha) {
  static const char l_data = 0, l_scale = 0, r_data = 0, r_scale = 0;
  static const float alpha[2] = {1.f, 0.f};
  cuda::LtProblem p;
  p.m = g.m; p.n = g.n; p.k = g.k;
  p.l = cuda::lt_operand(r.a, &l_data, &l_scale);
  p.r = cuda::lt_operand(r.b, &r_data, &r_scale);
  p.fast_accum = r.fast_accum;
  if (device_alpha) p.alpha_device = alpha;
  return p;
}

}  // namespace

// What gemm_lt.cpp builds for the Blackwell recipes, read back from cuBLASLt's own descriptor
// objects (no GPU needed): TN transposes, the operand swap (A = R, B = L) with its scale pointers
// and modes, FP4 layouts counted in elements, device pointer mode for NVFP4's alpha.
TEST(LtMappingHost, BlackwellRecipeDescriptorsReadBack) {
  const Plan plan = build_model_plan(default_config());
  RecipeOptions o;
  o.fp8_block_via_mxfp8 = true;  // sm_100
  o.block_fp8_format = Fp8Format::Hybrid;  // E5M2 dY: both FP8 types reach the descriptors
  struct Want { Precision p; int gemm; cudaDataType_t a_type, b_type; cublasLtMatmulMatrixScale_t mode; bool alpha; };
  for (const Want& w : {Want{Precision::NVFP4, 0, CUDA_R_4F_E2M1, CUDA_R_4F_E2M1, CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3, true},
                        Want{Precision::NVFP4, 8, CUDA_R_4F_E2M1, CUDA_R_4F_E2M1, CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3, true},
                        Want{Precision::MXFP8, 4, CUDA_R_8F_E5M2, CUDA_R_8F_E4M3,  // Dgrad: L = dY
                        CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0, false},
                        Want{Precision::MXFP8, 8, CUDA_R_8F_E5M2, CUDA_R_8F_E4M3,  // Wgrad: L = dY^T
                        CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0, false},
                        Want{Precision::FP8Block, 0, CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0, false}}) {
    const Gemm& g = plan.gemms[static_cast<size_t>(w.gemm)];
    SCOPED_TRACE(std::string(to_string(w.p)) + " " + g.label());
    const Recipe r = make_recipe(w.p, g, o);
    const cuda::LtProblem p = problem(g, r, w.alpha);
    const cuda::LtDescriptors d(p);
    EXPECT_EQ(d.layout(), "TN");
    EXPECT_EQ(desc_attr<cublasOperation_t>(d.desc(), CUBLASLT_MATMUL_DESC_TRANSA), CUBLAS_OP_T);
    EXPECT_EQ(desc_attr<cublasOperation_t>(d.desc(), CUBLASLT_MATMUL_DESC_TRANSB), CUBLAS_OP_N);
    // cuBLASLt's A is our R (weights in Fprop), B is our L.
    EXPECT_EQ(desc_attr<const void*>(d.desc(), CUBLASLT_MATMUL_DESC_A_SCALE_POINTER), p.r.scale);
    EXPECT_EQ(desc_attr<const void*>(d.desc(), CUBLASLT_MATMUL_DESC_B_SCALE_POINTER), p.l.scale);
    EXPECT_EQ(desc_attr<cublasLtMatmulMatrixScale_t>(d.desc(), CUBLASLT_MATMUL_DESC_A_SCALE_MODE), w.mode);
    EXPECT_EQ(desc_attr<cublasLtMatmulMatrixScale_t>(d.desc(), CUBLASLT_MATMUL_DESC_B_SCALE_MODE), w.mode);
    EXPECT_EQ(desc_attr<int8_t>(d.desc(), CUBLASLT_MATMUL_DESC_FAST_ACCUM), r.fast_accum ? 1 : 0);
    EXPECT_EQ(desc_attr<cublasLtPointerMode_t>(d.desc(), CUBLASLT_MATMUL_DESC_POINTER_MODE),
              w.alpha ? CUBLASLT_POINTER_MODE_DEVICE : CUBLASLT_POINTER_MODE_HOST);
    // A = R: k x n, ld k (K-contiguous); B = L: k x m, ld k; C: n x m BF16. FP4 counts elements.
    EXPECT_EQ(layout_attr<cudaDataType_t>(d.a(), CUBLASLT_MATRIX_LAYOUT_TYPE), w.b_type);
    EXPECT_EQ(layout_attr<cudaDataType_t>(d.b(), CUBLASLT_MATRIX_LAYOUT_TYPE), w.a_type);
    EXPECT_EQ(layout_attr<uint64_t>(d.a(), CUBLASLT_MATRIX_LAYOUT_ROWS), static_cast<uint64_t>(g.k));
    EXPECT_EQ(layout_attr<uint64_t>(d.a(), CUBLASLT_MATRIX_LAYOUT_COLS), static_cast<uint64_t>(g.n));
    EXPECT_EQ(layout_attr<int64_t>(d.a(), CUBLASLT_MATRIX_LAYOUT_LD), g.k);
    EXPECT_EQ(layout_attr<uint64_t>(d.b(), CUBLASLT_MATRIX_LAYOUT_COLS), static_cast<uint64_t>(g.m));
    EXPECT_EQ(layout_attr<int64_t>(d.b(), CUBLASLT_MATRIX_LAYOUT_LD), g.k);
    EXPECT_EQ(layout_attr<cudaDataType_t>(d.c(), CUBLASLT_MATRIX_LAYOUT_TYPE), CUDA_R_16BF);
    EXPECT_EQ(layout_attr<int64_t>(d.c(), CUBLASLT_MATRIX_LAYOUT_LD), g.n);
  }
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
