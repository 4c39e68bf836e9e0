// The CUTLASS provider's FP8 GEMMs (cuda/providers/cutlass/cutlass_fp8_run.hpp): dense GEMMs as one group and grouped
// GEMMs as one ptr-array launch, per-tensor in each pass's format pair of TE's hybrid recipe
// (Fprop E4M3 x E4M3 fast accumulation, Dgrad E5M2 x E4M3, Wgrad E4M3 x E5M2 into a BF16 gradient
// or an FP32 main gradient with beta = 1) and block-scaled (1x128 x 128x128 for Fprop/Dgrad, whose
// K of 256 / 384 / 320 makes the weight scales' padded rows compacted; 1x128 x 1x128 for Wgrad; K
// 512 reads them in place). Every output equals an FP64 GEMM of the same quantized
// operands (the recipe's own quantization, decoded with its scales: 4e-3 as test_grouped) and
// stays within the recipe's error of the BF16 sources (0.12, with a trace of quantization), with
// empty and uneven experts; current scaling quantized in the timed iteration (autocast) and delayed
// scaling pre-quantized. What the provider does not build is N/A with a reason.
#include <cuda_bf16.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/recipes/grouped.hpp"
#include "core/plan/plan.hpp"
#include "core/providers/provider.hpp"
#include "core/recipes/recipe.hpp"
#include "core/results/results.hpp"
#include "cuda/providers/cutlass/cutlass_grouped.hpp"
#include "cuda/engine_cuda.hpp"
#include "cuda/common/fill.cuh"
#include "cuda/providers/cublaslt/grouped_gemm.hpp"
#include "cuda/providers/provider.hpp"
#include "cuda/providers/cublaslt/recipe_gemm.hpp"
#include "gemm_reference.hpp"
#include "cutlass_test_util.hpp"
#include "gpu_test_util.hpp"
#include "provider_test_util.hpp"

using namespace gs;
using namespace gs::cuda;
using namespace gs::test;

namespace {

// Real rows per expert: empty experts, sizes no multiple of 16 (padded to 16 for FP8), one expert
// above a 128-row tile, one of a single row.
const std::vector<int64_t> kGroup = {40, 0, 17, 200, 1, 0, 33, 8};

Gemm pass_gemm(Pass pass, int64_t tokens, int64_t hidden, int64_t ffn) {
  return linear_gemm(pass, Op::ExpertUp, Scope::Layer, tokens, hidden, ffn);
}

Gemm grouped_gemm(Pass pass, const std::vector<int64_t>& group = kGroup) {
  return grouped_linear_gemm(pass, Op::ExpertUp, Scope::Layer, group, 256, 384);
}

constexpr float kInit = 0.25f;  // an FP32 main gradient's value before the GEMMs add to it

// The output of a GEMM as doubles: BF16, or what `iterations` accumulations added to kInit, per iteration.
std::vector<double> output(const DeviceBuffer& c, bool fp32, int iterations) {
  if (!fp32) return to_double(to_host_u16(c));
  std::vector<double> out;
  for (float x : to_host_f32(c)) out.push_back((static_cast<double>(x) - kInit) / iterations);
  return out;
}

void poison_or_init(const DeviceBuffer& c, bool fp32) {
  if (fp32) {
    std::vector<float> h(c.bytes() / 4, kInit);
    GS_CUDA(cudaMemcpy(c.get(), h.data(), c.bytes(), cudaMemcpyHostToDevice));
  } else {
    GS_CUDA(cudaMemset(c.get(), 0xFF, c.bytes()));  // NaN until written
  }
}

// out vs the FP64 GEMM of the recipe's quantized operands (own) and of the BF16 sources (orig).
void expect_fp8_close(const std::vector<double>& out, const std::vector<double>& ref_own, const std::vector<double>& ref_orig) {
  EXPECT_LT(rel_frobenius(out, ref_own), 4e-3);
  const double recipe_err = rel_frobenius(out, ref_orig);
  EXPECT_LT(recipe_err, 0.12);
  EXPECT_GT(recipe_err, 1e-3) << "quantization left no trace";
}

struct Case { Precision precision; Pass pass; bool fp32_acc; Mode mode; };
void PrintTo(const Case& c, std::ostream* os) {
  *os << to_string(c.precision) << ' ' << pass_label(c.pass) << (c.fp32_acc ? " fp32-accumulate " : " ") << to_string(c.mode);
}
std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(to_string(c.precision)) + "_" + pass_label(c.pass) + (c.fp32_acc ? "_Fp32Acc" : "_Bf16") + "_" +
         (c.mode == Mode::PerGemm ? "PerGemm" : "PreQuantized");
}

// Current scaling quantized in the iteration; delayed scaling pre-quantized (its alpha computed once).
const auto kCases = ::testing::Values(
    Case{Precision::FP8Current, Pass::Fprop, false, Mode::PerGemm}, Case{Precision::FP8Current, Pass::Dgrad, false, Mode::PerGemm},
    Case{Precision::FP8Current, Pass::Wgrad, false, Mode::PerGemm}, Case{Precision::FP8Current, Pass::Wgrad, true, Mode::PerGemm},
    Case{Precision::FP8Delayed, Pass::Fprop, false, Mode::PreQuantized},
    Case{Precision::FP8Delayed, Pass::Dgrad, false, Mode::PreQuantized},
    Case{Precision::FP8Delayed, Pass::Wgrad, true, Mode::PreQuantized},
    Case{Precision::FP8Block, Pass::Fprop, false, Mode::PerGemm}, Case{Precision::FP8Block, Pass::Dgrad, false, Mode::PerGemm},
    Case{Precision::FP8Block, Pass::Wgrad, true, Mode::PerGemm}, Case{Precision::FP8Block, Pass::Wgrad, false, Mode::PerGemm},
    Case{Precision::FP8Block, Pass::Fprop, false, Mode::PreQuantized});

class CutlassFp8Grouped : public ::testing::TestWithParam<Case> {};

TEST_P(CutlassFp8Grouped, EveryExpertMatchesTheFp64ReferenceOfItsQuantizedOperands) {
  GS_REQUIRE_CUTLASS();
  const Case c = GetParam();
  const Gemm g = grouped_gemm(c.pass);
  const auto padded = padded_group(g, c.precision);
  const bool fp32 = c.fp32_acc && c.pass == Pass::Wgrad;
  cudaStream_t s = nullptr;
  GS_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto src = GroupedSources::allocate(g, padded, 11, s, fp32);
  if (g.group_dim == GroupDim::M) poison_or_init(src->out, false);
  else for (DeviceBuffer& b : src->per_expert) poison_or_init(b, fp32);
  GS_CUDA(cudaDeviceSynchronize());
  RecipeOptions opts;
  opts.wgrad_fp32_accumulate = c.fp32_acc;
  const Recipe r = make_recipe(c.precision, expert_gemm(g, 64), opts);
  ASSERT_EQ(r.fp32_accumulate, fp32);
  auto provider = cutlass_with(opts);
  ASSERT_EQ(provider->cannot_run(g, c.precision, c.mode, r, 90), "");
  auto run = provider->grouped(*src, r, c.mode, 0);
  EXPECT_NE(run->config().find("fp8"), std::string::npos) << run->config();
  EXPECT_NE(run->config().find("groups in one launch"), std::string::npos) << run->config();
  if (c.precision == Precision::FP8Block && c.pass != Pass::Wgrad) {
    EXPECT_NE(run->config().find("compacted"), std::string::npos) << run->config();
  }
  const int iterations = fp32 ? 2 : 1;  // FP32 main gradients: two iterations add twice
  for (int i = 0; i < iterations; ++i) run->iteration(s);
  GS_CUDA(cudaStreamSynchronize(s));

  // The reference quantization: the same recipe's per-expert quantization of the same sources
  // (bit-identical to the multi-tensor launches, GPU test GroupedQuant.*).
  GroupedGemm ref(nullptr, *src, c.precision, Mode::PreQuantized, opts, 0, s, nullptr, nullptr, /*with_gemm=*/false);
  ref.prepare();
  const auto out_m = g.group_dim == GroupDim::M ? to_double(to_host_u16(src->out)) : std::vector<double>();
  int checked = 0, empty = 0;
  for (int e = 0; e < ref.experts(); ++e) {
    SCOPED_TRACE("expert " + std::to_string(e) + ", " + std::to_string(padded[static_cast<size_t>(e)]) + " rows");
    const GemmSources& v = ref.expert_sources(e);
    if (padded[static_cast<size_t>(e)] == 0) {
      ++empty;
      if (g.group_dim == GroupDim::K) {
        if (fp32) {
          for (float x : to_host_f32(v.c)) ASSERT_EQ(x, kInit) << "an empty expert adds nothing";
        } else {
          for (uint16_t x : to_host_u16(v.c)) ASSERT_EQ(x, 0) << "an empty expert's gradient is zeroed";
        }
      }
      continue;
    }
    const Gemm eg = ref.expert_gemm_of(e);
    const RecipeGemm& rg = *ref.expert(e);
    std::vector<double> out;
    if (g.group_dim == GroupDim::M) {
      const size_t off = static_cast<size_t>(src->offsets[static_cast<size_t>(e)] * g.n);
      out.assign(out_m.begin() + static_cast<long>(off), out_m.begin() + static_cast<long>(off + eg.m * eg.n));
    } else {
      out = output(v.c, fp32, iterations);
    }
    const auto ref_orig = ref_gemm(bf16_operand(to_host_u16(v.l), eg.m, eg.k, eg.a.k_major),
                                   bf16_operand(to_host_u16(v.r), eg.n, eg.k, eg.b.k_major), eg.m, eg.n, eg.k);
    expect_fp8_close(out, ref_gemm(dequantize(*rg.l()), dequantize(*rg.r()), eg.m, eg.n, eg.k), ref_orig);
    ++checked;
  }
  EXPECT_EQ(checked, 6);
  EXPECT_EQ(empty, 2);
  cudaStreamDestroy(s);
}

INSTANTIATE_TEST_SUITE_P(Hopper, CutlassFp8Grouped, kCases, case_name);

class CutlassFp8Dense : public ::testing::TestWithParam<Case> {};

// A dense GEMM as one group, in the pass's layout (m and n no multiple of the 128 tile).
TEST_P(CutlassFp8Dense, MatchesTheFp64ReferenceOfItsQuantizedOperands) {
  GS_REQUIRE_CUTLASS();
  const Case c = GetParam();
  const Gemm g = pass_gemm(c.pass, 272, 320, 144);
  const bool fp32 = c.fp32_acc && c.pass == Pass::Wgrad;
  GemmSources src = GemmSources::allocate(g, fp32);
  fill_normal_bf16(src.l.get<__nv_bfloat16>(), static_cast<size_t>(g.m * g.k), 5, 1.0f, nullptr);
  fill_normal_bf16(src.r.get<__nv_bfloat16>(), static_cast<size_t>(g.k * g.n), 6, g.b.role == Role::Weight ? 0.02f : 1.0f,
                   nullptr);
  poison_or_init(src.c, fp32);
  GS_CUDA(cudaDeviceSynchronize());
  RecipeOptions opts;
  opts.wgrad_fp32_accumulate = c.fp32_acc;
  const Recipe r = make_recipe(c.precision, g, opts);
  ASSERT_EQ(r.fp32_accumulate, fp32);
  auto provider = cutlass_with(opts);
  ASSERT_EQ(provider->cannot_run(g, c.precision, c.mode, r, 90), "");
  auto run = provider->dense(g, r, c.mode, src, 0);
  EXPECT_NE(run->config().find("one group"), std::string::npos) << run->config();
  const int iterations = fp32 ? 2 : 1;
  for (int i = 0; i < iterations; ++i) run->iteration(nullptr);
  GS_CUDA(cudaDeviceSynchronize());
  // The reference quantization of the same sources, as the cell's (pre-quantized: the same rounds).
  RecipeGemm ref(nullptr, g, r, src, nullptr, opts, /*with_gemm=*/false, QuantWork::None, QuantWork::None);
  ref.prequantize(nullptr);
  const auto ref_orig = ref_gemm(bf16_operand(to_host_u16(src.l), g.m, g.k, g.a.k_major),
                                 bf16_operand(to_host_u16(src.r), g.n, g.k, g.b.k_major), g.m, g.n, g.k);
  expect_fp8_close(output(src.c, fp32, iterations), ref_gemm(dequantize(*ref.l()), dequantize(*ref.r()), g.m, g.n, g.k),
                   ref_orig);
}

INSTANTIATE_TEST_SUITE_P(Hopper, CutlassFp8Dense, kCases, case_name);

// FP8Block with K a multiple of 512: the weight's 128x128 scales are read in place (no compaction).
TEST(CutlassFp8, BlockScalesReadInPlaceWhereTheLayoutsAgree) {
  GS_REQUIRE_CUTLASS();
  const Gemm g = pass_gemm(Pass::Fprop, 200, 512, 256);
  GemmSources src = GemmSources::allocate(g);
  fill_normal_bf16(src.l.get<__nv_bfloat16>(), static_cast<size_t>(g.m * g.k), 8, 1.0f, nullptr);
  fill_normal_bf16(src.r.get<__nv_bfloat16>(), static_cast<size_t>(g.k * g.n), 9, 0.02f, nullptr);
  poison_or_init(src.c, false);
  GS_CUDA(cudaDeviceSynchronize());
  const RecipeOptions opts;
  const Recipe r = make_recipe(Precision::FP8Block, g, opts);
  auto run = cutlass_with(opts)->dense(g, r, Mode::PerGemm, src, 0);
  EXPECT_NE(run->config().find("read in place"), std::string::npos) << run->config();
  run->iteration(nullptr);
  GS_CUDA(cudaDeviceSynchronize());
  RecipeGemm ref(nullptr, g, r, src, nullptr, opts, /*with_gemm=*/false, QuantWork::None, QuantWork::None);
  ref.prequantize(nullptr);
  expect_fp8_close(output(src.c, false, 1), ref_gemm(dequantize(*ref.l()), dequantize(*ref.r()), g.m, g.n, g.k),
                   ref_gemm(bf16_operand(to_host_u16(src.l), g.m, g.k, true), bf16_operand(to_host_u16(src.r), g.n, g.k, true),
                            g.m, g.n, g.k));
}

// What the provider does not build is N/A with a reason (no GPU needed).
TEST(CutlassFp8, CannotRunSaysWhy) {
  auto provider = make_cutlass_provider();
  const Gemm d = pass_gemm(Pass::Dgrad, 256, 256, 256);
  RecipeOptions e4m3;
  e4m3.fp8_format = Fp8Format::E4M3;  // Dgrad E4M3 x E4M3 split: not instantiated
  const std::string why = provider->cannot_run(d, Precision::FP8Current, Mode::PerGemm,
                                               make_recipe(Precision::FP8Current, d, e4m3), 90);
  if (!cutlass_built()) GTEST_SKIP() << "built without CUTLASS: " << why;
  EXPECT_NE(why.find("no FP8 kernel instantiated"), std::string::npos) << why;
  EXPECT_EQ(provider->cannot_run(d, Precision::FP8Current, Mode::PerGemm,
                                 make_recipe(Precision::FP8Current, d, RecipeOptions{}), 90), "");
  EXPECT_EQ(provider->cannot_run(d, Precision::FP8Block, Mode::PerGemm,
                                 make_recipe(Precision::FP8Block, d, RecipeOptions{}), 90), "");
  RecipeOptions hybrid_block;
  hybrid_block.block_fp8_format = Fp8Format::Hybrid;  // E5M2 gradients: not instantiated
  const std::string block = provider->cannot_run(d, Precision::FP8Block, Mode::PerGemm,
                                                 make_recipe(Precision::FP8Block, d, hybrid_block), 90);
  EXPECT_NE(block.find("no FP8 kernel instantiated"), std::string::npos) << block;
  const std::string mx = provider->cannot_run(d, Precision::MXFP8, Mode::PerGemm,
                                              make_recipe(Precision::MXFP8, d, RecipeOptions{}), 90);
  EXPECT_NE(mx.find("CUTLASS: no MXFP8 kernel"), std::string::npos) << mx;
  EXPECT_NE(provider->cannot_run(d, Precision::FP8Current, Mode::PerGemm,
                                 make_recipe(Precision::FP8Current, d, RecipeOptions{}), 89).find("sm_90a"),
            std::string::npos);
}

// Per-expert quantization in the timed iteration cannot feed one launch: the cell says so.
TEST(CutlassFp8, GroupedNeedsTheMultiTensorQuantization) {
  GS_REQUIRE_CUTLASS();
  const Gemm g = grouped_gemm(Pass::Fprop);
  const auto padded = padded_group(g, Precision::FP8Current);
  auto src = GroupedSources::allocate(g, padded, 3, nullptr, false);
  RecipeOptions opts;
  opts.grouped_quant_fused = false;
  const Recipe r = make_recipe(Precision::FP8Current, expert_gemm(g, 64), opts);
  try {
    cutlass_with(opts)->grouped(*src, r, Mode::PerGemm, 0);
    ADD_FAILURE() << "expected a refusal";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--grouped-quant fused"), std::string::npos) << e.what();
  }
  // Pre-quantized, nothing is quantized in the iteration: it runs.
  EXPECT_NO_THROW(cutlass_with(opts)->grouped(*src, r, Mode::PreQuantized, 0));
}

// Through the engine: FP8 cells measured by CUTLASS, one GEMM kernel per grouped iteration.
TEST(CutlassFp8, EngineCellsRecordTheProvider) {
  GS_REQUIRE_CUTLASS();
  EngineOptions o;
  o.timing.warmup = 2;
  o.timing.iters = 10;
  std::string why;
  auto engine = make_engine(o, why);
  ASSERT_NE(engine, nullptr) << why;
  for (Precision p : {Precision::FP8Current, Precision::FP8Block}) {
  for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad}) {
    SCOPED_TRACE(std::string(to_string(p)) + " " + pass_label(pass));
    const Cell c = engine->measure(grouped_gemm(pass), p, Mode::PerGemm, kProviderCutlass);
    ASSERT_TRUE(c.ok) << c.reason;
    EXPECT_EQ(c.kernels.provider, "cutlass");
    EXPECT_NE(c.kernels.config.find("fp8"), std::string::npos) << c.kernels.config;
    if (c.kernels.traced) {
      int gemm_kernels = 0;
      for (const KernelStat& k : c.kernels.kernels)
        if (k.cls == KernelClass::Gemm) gemm_kernels += static_cast<int>(std::lround(k.count));
      EXPECT_EQ(gemm_kernels, 1) << "the single launch";
    }
  }
  }
  const Cell dense = engine->measure(build_shapes_plan("1024").gemms[0], Precision::FP8Delayed, Mode::PreQuantized,
                                          kProviderCutlass);
  EXPECT_TRUE(dense.ok) << dense.reason;
  EXPECT_NE(dense.kernels.config.find("before the timed loop"), std::string::npos) << dense.kernels.config;
}

}  // namespace
