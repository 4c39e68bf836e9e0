// Every Hopper recipe in every pass: the cuBLASLt GEMM must equal an FP64 GEMM of the operands
// it was given (our quantized bytes decoded with our scales, in the layouts we claim), and the
// recipe's error against the original BF16 inputs is reported and bounded. A wrong scale layout,
// a wrong transpose or a wrong scale direction fails the first check.
#include <cuda_bf16.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/gpu/arch_policy.hpp"
#include "core/formats/formats.hpp"
#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"
#include "core/results/results.hpp"
#include "cuda/common/fill.cuh"
#include "cuda/providers/cublaslt/recipe_gemm.hpp"
#include "gemm_reference.hpp"
#include "gpu_test_util.hpp"

namespace gs {
// Found by ADL for Precision-parameterized tests: gtest/ctest print the name, not the bytes.
void PrintTo(Precision p, std::ostream* os) { *os << to_string(p); }
}  // namespace gs

using namespace gs;
using namespace gs::cuda;
using namespace gs::test;

namespace {

// A small model whose token count (2 x 168 = 336) and widths are not multiples of 128, so
// partial scale blocks are exercised in every direction.
Plan small_model_plan() {
  ModelConfig mc;
  mc.hidden_size = 384; mc.intermediate_size = 656; mc.num_attention_heads = 6; mc.num_hidden_layers = 1;
  mc.micro_batch_size = 2; mc.sequence_length = 168;
  return build_model_plan(mc);
}

// A cuBLASLt handle and workspace for one test.
struct LtContext {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace = make_lt_workspace();
  LtContext() { GS_CUBLAS(cublasLtCreate(&handle)); }
  ~LtContext() { cublasLtDestroy(handle); }
  LtContext(const LtContext&) = delete;
  LtContext& operator=(const LtContext&) = delete;
};

struct Case { Precision precision; Pass pass; Mode mode; };
// Readable parameter descriptions in gtest/ctest output (instead of the object's bytes).
void PrintTo(const Case& c, std::ostream* os) {
  *os << to_string(c.precision) << ' ' << pass_label(c.pass) << ' ' << to_string(c.mode);
}

class RecipeGemmTest : public ::testing::TestWithParam<Case> {};

TEST_P(RecipeGemmTest, MatchesReferenceOfItsOwnOperands) {
  GS_REQUIRE_GPU();
  const Case c = GetParam();
  if (!gs::ArchPolicy(gs::test::compute_capability()).times(c.precision)) GTEST_SKIP() << "needs a newer GPU";
  const Plan plan = small_model_plan();
  RecipeOptions opts;
  opts.wgrad_fp32_accumulate = false;  // BF16 outputs, read as BF16 below (FP32 Wgrad: test_grouped_quant)
  LtContext lt;
  cublasLtHandle_t handle = lt.handle;
  DeviceBuffer& ws = lt.workspace;
  int checked = 0;
  for (const Gemm& g : plan.gemms) {
    if (g.pass != c.pass) continue;
    SCOPED_TRACE(g.label() + " " + g.shape());
    GemmSources src = GemmSources::allocate(g);
    fill_normal_bf16(src.l.get<__nv_bfloat16>(), static_cast<size_t>(g.m * g.k), 11, 1.0f, 0);
    fill_normal_bf16(src.r.get<__nv_bfloat16>(), static_cast<size_t>(g.k * g.n), 12, g.b.role == Role::Weight ? 0.02f : 1.0f, 0);
    GS_CUDA(cudaMemset(src.c.get(), 0xFF, src.c.bytes()));  // poison: NaN in BF16
    GS_CUDA(cudaDeviceSynchronize());  // legacy-stream memset: finished before any other stream's work
    const Recipe recipe = make_recipe(c.precision, g, opts);
    RecipeGemm rg(handle, g, recipe, src, ws.get(), opts);
    if (c.mode == Mode::PerGemm) {
      for (int i = 0; i < 3; ++i) rg.per_gemm_step(0);  // delayed scaling: scale from real history
    } else {
      rg.prequantize(0);
      rg.gemm_only(0);
    }
    GS_CUDA(cudaDeviceSynchronize());
    const auto out16 = to_host_u16(src.c);
    std::vector<double> out(out16.size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = gs::nf::bf16_to_float(out16[i]);
    const auto l_orig = bf16_operand(to_host_u16(src.l), g.m, g.k, g.a.k_major);
    const auto r_orig = bf16_operand(to_host_u16(src.r), g.n, g.k, g.b.k_major);
    const auto ref_orig = ref_gemm(l_orig, r_orig, g.m, g.n, g.k);
    const auto ref_own = c.precision == Precision::BF16 ? ref_orig
                                                        : ref_gemm(dequantize(*rg.l()), dequantize(*rg.r()), g.m, g.n, g.k);
    const double own = rel_frobenius(out, ref_own);
    const double recipe_err = rel_frobenius(out, ref_orig);
    RecordProperty(std::string(to_string(g.op)) + "_recipe_error", std::to_string(recipe_err));
    std::printf("    %-9s %-6s %-9s %-17s layout %s  vs own operands %.2e  recipe error %.2e\n", to_string(c.precision),
                pass_label(g.pass), op_label(g.op), g.shape().c_str(), rg.layout().c_str(), own, recipe_err);
    // BF16 output rounding (2^-9 relative) plus FP32 accumulation: well under 4e-3.
    EXPECT_LT(own, 4e-3);
    // The recipe's own error: E4M3 ~ 2-4%, E5M2 gradients ~ 5-9%; BF16 only output rounding.
    EXPECT_LT(recipe_err, c.precision == Precision::BF16 ? 4e-3 : 0.12);
    if (c.precision != Precision::BF16) EXPECT_GT(recipe_err, 1e-3) << "quantization left no trace";
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (Precision p : {Precision::BF16, Precision::FP8Current, Precision::FP8Delayed, Precision::FP8Block})
    for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad})
      for (Mode m : {Mode::PerGemm, Mode::PreQuantized}) v.push_back({p, pass, m});
  return v;
}

// autocast-shared: a GEMM whose operands were cast by the dual pass (or prepared before the timed
// loop) computes exactly what the GEMM with its own casts computes, and the other-layout copy a
// dual pass writes is exactly what the consuming GEMM (dual_consumer) would quantize for itself.
class SharedQuantizationTest : public ::testing::TestWithParam<Precision> {};

TEST_P(SharedQuantizationTest, SameOutputAndSiblingsMatchTheirConsumers) {
  GS_REQUIRE_GPU();
  const Precision p = GetParam();
  if (!gs::ArchPolicy(gs::test::compute_capability()).times(p)) GTEST_SKIP() << "needs a newer GPU";
  const Plan plan = small_model_plan();
  RecipeOptions opts;
  opts.wgrad_fp32_accumulate = false;  // BF16 outputs, read as BF16 below (FP32 Wgrad: test_grouped_quant)
  LtContext lt;
  cublasLtHandle_t handle = lt.handle;
  DeviceBuffer& ws = lt.workspace;
  int duals = 0, reused = 0, producer_amaxes = 0;
  for (const Gemm& g : plan.gemms) {
    SCOPED_TRACE(std::string(pass_label(g.pass)) + " " + g.label() + " " + g.shape());
    GemmSources src = GemmSources::allocate(g);
    fill_normal_bf16(src.l.get<__nv_bfloat16>(), static_cast<size_t>(g.m * g.k), 21, 1.0f, 0);
    fill_normal_bf16(src.r.get<__nv_bfloat16>(), static_cast<size_t>(g.k * g.n), 22, g.b.role == Role::Weight ? 0.02f : 1.0f, 0);
    const Recipe recipe = make_recipe(p, g, opts);
    for (bool producer_amax : {true, false}) {
      SCOPED_TRACE(producer_amax ? "producer amax" : "own amax pass");
      opts.producer_amax = producer_amax;
      const OperandWork owl = operand_work(Mode::Training, g, Side::Left, recipe, opts);
      const OperandWork owr = operand_work(Mode::Training, g, Side::Right, recipe, opts);
      producer_amaxes += owl.producer_amax + owr.producer_amax;
      const QuantWork wl = owl.work, wr = owr.work;
      // Own casts, three steps (delayed scaling: the scale comes from this data's history).
      GS_CUDA(cudaMemset(src.c.get(), 0xFF, src.c.bytes()));
      GS_CUDA(cudaDeviceSynchronize());
      RecipeGemm own(handle, g, recipe, src, ws.get(), opts);
      for (int i = 0; i < 3; ++i) own.per_gemm_step(0);
      GS_CUDA(cudaDeviceSynchronize());
      const auto c_own = to_host_u16(src.c);
      GS_CUDA(cudaMemset(src.c.get(), 0xFF, src.c.bytes()));
      GS_CUDA(cudaDeviceSynchronize());
      RecipeGemm shared(handle, g, recipe, src, ws.get(), opts, true, owl, owr);
      if (shared.needs_prequantize()) shared.prequantize(0);
      for (int i = 0; i < 3; ++i) shared.step(0);
      GS_CUDA(cudaDeviceSynchronize());
      EXPECT_EQ(to_host_u16(src.c), c_own) << "autocast-shared GEMM output differs from autocast";
      reused += (wl == QuantWork::None) + (wr == QuantWork::None);
      for (Side side : {Side::Left, Side::Right}) {
        const QuantizedOperand* sib = side == Side::Left ? shared.l_sibling() : shared.r_sibling();
        if ((side == Side::Left ? wl : wr) != QuantWork::Dual || p == Precision::BF16) {  // BF16: nothing to cast
          EXPECT_EQ(sib, nullptr);
          continue;
        }
        ASSERT_NE(sib, nullptr);
        ++duals;
        if (p == Precision::FP8Delayed) continue;  // stateful scale: covered by the output check above
        // The consumer's own quantization of the same BF16 tensor.
        const DualConsumer dc = dual_consumer(g, side);
        const Recipe cr = make_recipe(p, dc.gemm, opts);
        const bool src_k_major = side == Side::Left ? g.a.k_major : g.b.k_major;
        const auto* source = (side == Side::Left ? src.l : src.r).get<__nv_bfloat16>();
        const QuantizedOperand& mine = side == Side::Left ? *shared.l() : *shared.r();
        QuantizedOperand expect(dc.side == Side::Left ? cr.a : cr.b, source, mine.k(), mine.outer(), !src_k_major, opts);
        const int64_t c_outer = dc.side == Side::Left ? dc.gemm.m : dc.gemm.n;
        EXPECT_EQ(expect.outer(), c_outer) << "the sibling has the consumer's outer dimension";
        EXPECT_EQ(expect.k(), dc.gemm.k);
        expect.quantize(0);
        GS_CUDA(cudaDeviceSynchronize());
        EXPECT_EQ(sib->data_host(), expect.data_host()) << "sibling bytes";
        EXPECT_EQ(sib->scales_host(), expect.scales_host()) << "sibling scales";
      }
    }
  }
  // Per option value: X, W per Fprop and dY per Dgrad of 4 linears are dual; W per Dgrad, X and dY
  // per Wgrad are reused; with producer amax, FP8Current takes 4 amaxes from their producers.
  EXPECT_EQ(duals, p == Precision::BF16 ? 0 : 24);
  EXPECT_EQ(reused, 24);
  EXPECT_EQ(producer_amaxes, p == Precision::FP8Current ? 4 : 0);
}

INSTANTIATE_TEST_SUITE_P(Hopper, SharedQuantizationTest,
                         ::testing::Values(Precision::BF16, Precision::FP8Current, Precision::FP8Delayed, Precision::FP8Block),
                         [](const auto& info) { return std::string(to_string(info.param)); });

INSTANTIATE_TEST_SUITE_P(Hopper, RecipeGemmTest, ::testing::ValuesIn(cases()), [](const auto& info) {
  return std::string(to_string(info.param.precision)) + "_" + pass_label(info.param.pass) + "_" +
         (info.param.mode == Mode::PerGemm ? "PerGemm" : "PreQuantized");
});

}  // namespace
