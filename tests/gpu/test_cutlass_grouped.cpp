// The CUTLASS provider's single-launch grouped BF16 GEMMs (cuda/providers/cutlass/cutlass_grouped.hpp,
// cuda/providers/cutlass/cutlass_provider.cpp): every expert's output equals an FP64 GEMM of its own operands, with
// empty and uneven experts, in Fprop (B K-major), Dgrad (B N-major) and Wgrad (per-expert K) with
// a BF16 gradient (empty experts zeroed) and with FP32 main gradients accumulated (beta = 1: two
// iterations add twice, empty experts untouched); dense BF16 GEMMs as one group in each layout of a
// training step. Through the engine: cells recorded as CUTLASS
// with their configuration, and N/A with a reason for what the provider does not run.
#include <cuda_bf16.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/gpu/arch_policy.hpp"
#include "core/recipes/grouped.hpp"
#include "core/plan/plan.hpp"
#include "core/providers/provider.hpp"
#include "core/recipes/recipe.hpp"
#include "core/results/results.hpp"
#include "cuda/providers/cutlass/cutlass_grouped.hpp"
#include "cuda/engine_cuda.hpp"
#include "cuda/common/fill.cuh"
#include "cuda/providers/cublaslt/recipe_gemm.hpp"
#include "cuda/providers/cublaslt/grouped_gemm.hpp"
#include "cuda/providers/provider.hpp"
#include "gemm_reference.hpp"
#include "cutlass_test_util.hpp"
#include "gpu_test_util.hpp"
#include "provider_test_util.hpp"

using namespace gs;
using namespace gs::cuda;
using namespace gs::test;

namespace {

// Real rows (tokens) per expert: empty experts, sizes that are no multiple of anything, one expert
// bigger than a 128-row tile, one of a single row.
const std::vector<int64_t> kGroup = {40, 0, 17, 200, 1, 0, 33, 8};

Gemm grouped_gemm(Pass pass, const std::vector<int64_t>& group = kGroup, int64_t hidden = 256, int64_t ffn = 384) {
  return grouped_linear_gemm(pass, Op::ExpertUp, Scope::Layer, group, hidden, ffn);
}

// Expert e's operands as [outer, K] doubles and the FP64 reference of its output [m, n].
std::vector<double> expert_reference(const GroupedSources& s, size_t e) {
  const Gemm& g = s.gemm;
  const int64_t size = s.sizes[e], off = s.offsets[e];
  const auto tl = to_host_u16(s.tokens_l);
  if (g.group_dim == GroupDim::M) {
    const std::vector<uint16_t> l(tl.begin() + off * g.k, tl.begin() + (off + size) * g.k);
    const auto w = to_host_u16(s.per_expert[e]);
    return ref_gemm(bf16_operand(l, size, g.k, true), bf16_operand(w, g.n, g.k, g.b.k_major), size, g.n, g.k);
  }
  const auto tr = to_host_u16(s.tokens_r);
  const std::vector<uint16_t> l(tl.begin() + off * g.m, tl.begin() + (off + size) * g.m);
  const std::vector<uint16_t> r(tr.begin() + off * g.n, tr.begin() + (off + size) * g.n);
  return ref_gemm(bf16_operand(l, g.m, size, false), bf16_operand(r, g.n, size, false), g.m, g.n, size);
}

struct Case { Pass pass; bool fp32_acc; };
void PrintTo(const Case& c, std::ostream* os) { *os << pass_label(c.pass) << (c.fp32_acc ? " fp32-accumulate" : ""); }

class CutlassGroupedTest : public ::testing::TestWithParam<Case> {};

TEST_P(CutlassGroupedTest, EveryExpertMatchesTheFp64Reference) {
  GS_REQUIRE_CUTLASS();
  const Case c = GetParam();
  const Gemm g = grouped_gemm(c.pass);
  const auto padded = padded_group(g, Precision::BF16);
  cudaStream_t s = nullptr;
  GS_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto src = GroupedSources::allocate(g, padded, 7, s, c.fp32_acc);
  // BF16 outputs: NaN until written. FP32 main gradients: a known starting value, added to.
  const float init = 0.25f;
  if (g.group_dim == GroupDim::M) GS_CUDA(cudaMemset(src->out.get(), 0xFF, src->out.bytes()));
  for (DeviceBuffer& b : src->per_expert)
    if (g.group_dim == GroupDim::K) {
      if (c.fp32_acc) {
        std::vector<float> h(b.bytes() / 4, init);
        GS_CUDA(cudaMemcpy(b.get(), h.data(), b.bytes(), cudaMemcpyHostToDevice));
      } else {
        GS_CUDA(cudaMemset(b.get(), 0xFF, b.bytes()));
      }
    }
  GS_CUDA(cudaDeviceSynchronize());
  RecipeOptions opts;
  opts.wgrad_fp32_accumulate = c.fp32_acc;
  const Recipe r = make_recipe(Precision::BF16, expert_gemm(g, 64), opts);
  ASSERT_EQ(r.fp32_accumulate, c.fp32_acc && c.pass == Pass::Wgrad);
  auto provider = cutlass_with(opts);
  ASSERT_EQ(provider->cannot_run(g, Precision::BF16, Mode::PerGemm, r, 90), "");
  auto run = provider->grouped(*src, r, Mode::PerGemm, 0);
  EXPECT_NE(run->config().find("ptr-array grouped"), std::string::npos) << run->config();
  EXPECT_EQ(run->ops(), c.pass == Pass::Wgrad && !c.fp32_acc ? 3 : 1) << "one launch (+ a memset per empty BF16 gradient)";
  const int iterations = c.fp32_acc ? 2 : 1;
  for (int i = 0; i < iterations; ++i) run->iteration(s);
  GS_CUDA(cudaStreamSynchronize(s));

  const auto out_m = g.group_dim == GroupDim::M ? to_double(to_host_u16(src->out)) : std::vector<double>();
  int checked = 0, empty = 0;
  for (size_t e = 0; e < padded.size(); ++e) {
    SCOPED_TRACE("expert " + std::to_string(e) + ", " + std::to_string(padded[e]) + " rows");
    if (padded[e] == 0) {
      ++empty;
      if (g.group_dim == GroupDim::K) {
        if (c.fp32_acc) {
          for (float x : to_host_f32(src->per_expert[e])) ASSERT_EQ(x, init) << "an empty expert adds nothing";
        } else {
          for (uint16_t x : to_host_u16(src->per_expert[e])) ASSERT_EQ(x, 0) << "an empty expert's gradient is zeroed";
        }
      }
      continue;
    }
    const auto ref = expert_reference(*src, e);
    std::vector<double> out;
    if (g.group_dim == GroupDim::M) {
      const size_t off = static_cast<size_t>(src->offsets[e] * g.n);
      out.assign(out_m.begin() + static_cast<long>(off), out_m.begin() + static_cast<long>(off + ref.size()));
    } else if (c.fp32_acc) {
      for (float x : to_host_f32(src->per_expert[e])) out.push_back((static_cast<double>(x) - init) / iterations);
    } else {
      out = to_double(to_host_u16(src->per_expert[e]));
    }
    ASSERT_EQ(out.size(), ref.size());
    // BF16 output: its rounding (2^-9 relative); FP32 accumulated: FP32 accumulation order only.
    EXPECT_LT(rel_frobenius(out, ref), c.fp32_acc && c.pass == Pass::Wgrad ? 1e-4 : 4e-3);
    ++checked;
  }
  EXPECT_EQ(checked, 6);
  EXPECT_EQ(empty, 2);
  cudaStreamDestroy(s);
}

INSTANTIATE_TEST_SUITE_P(Hopper, CutlassGroupedTest,
                         ::testing::Values(Case{Pass::Fprop, false}, Case{Pass::Dgrad, false}, Case{Pass::Wgrad, false},
                                           Case{Pass::Wgrad, true}, Case{Pass::Fprop, true}),
                         [](const auto& info) {
                           return std::string(pass_label(info.param.pass)) + (info.param.fp32_acc ? "_Fp32Acc" : "_Bf16");
                         });

// Many uneven experts (a skewed routing over 64 experts, about 10% empty) in one launch: a sample
// of experts checked against FP64.
TEST(CutlassGrouped, SkewedRoutingOverManyExperts) {
  GS_REQUIRE_CUTLASS();
  std::vector<int64_t> group(64);
  uint64_t x = 99;
  for (auto& sz : group) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t v = (x >> 33) % 300;
    sz = v < 30 ? 0 : static_cast<int64_t>(v);
  }
  for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad}) {
    SCOPED_TRACE(pass_label(pass));
    const Gemm g = grouped_gemm(pass, group, 512, 256);
    const auto padded = padded_group(g, Precision::BF16);
    cudaStream_t s = nullptr;
    GS_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    auto src = GroupedSources::allocate(g, padded, 3, s, /*fp32=*/false);
    RecipeOptions opts;
    opts.wgrad_fp32_accumulate = false;
    auto run = cutlass_with(opts)->grouped(*src, make_recipe(Precision::BF16, expert_gemm(g, 64), opts),
                                           Mode::PerGemm, 0);
    run->iteration(s);
    GS_CUDA(cudaStreamSynchronize(s));
    const auto out_m = g.group_dim == GroupDim::M ? to_double(to_host_u16(src->out)) : std::vector<double>();
    int checked = 0;
    for (size_t e = 0; e < padded.size(); e += 7) {
      if (padded[e] == 0) continue;
      const auto ref = expert_reference(*src, e);
      std::vector<double> out;
      if (g.group_dim == GroupDim::M) {
        const size_t off = static_cast<size_t>(src->offsets[e] * g.n);
        out.assign(out_m.begin() + static_cast<long>(off), out_m.begin() + static_cast<long>(off + ref.size()));
      } else {
        out = to_double(to_host_u16(src->per_expert[e]));
      }
      EXPECT_LT(rel_frobenius(out, ref), 4e-3) << "expert " << e;
      ++checked;
    }
    EXPECT_GE(checked, 5);
    cudaStreamDestroy(s);
  }
}

// Dense BF16 GEMMs as one group, in the three layouts a training step has (Fprop: both operands
// K-major; Dgrad: the weight N-major; Wgrad: both token-major, into a BF16 or an FP32 gradient).
TEST(CutlassDense, EveryLayoutMatchesTheFp64Reference) {
  GS_REQUIRE_CUTLASS();
  const int64_t m = 264, k = 320, n = 136;  // no multiple of the 128 tile in m and n
  struct Layout { const char* name; bool l_k, r_k, fp32; };
  for (const Layout& lay : {Layout{"Fprop", true, true, false}, Layout{"Dgrad", true, false, false},
                            Layout{"Wgrad bf16", false, false, false}, Layout{"Wgrad fp32", false, false, true}}) {
    SCOPED_TRACE(lay.name);
    Gemm g{Pass::Shape, Op::Shape, Scope::Shape, m, k, n, {Role::Activation, lay.l_k}, {Role::Weight, lay.r_k}};
    GemmSources src = GemmSources::allocate(g, lay.fp32);
    fill_normal_bf16(src.l.get<__nv_bfloat16>(), static_cast<size_t>(m * k), 5, 1.0f, nullptr);
    fill_normal_bf16(src.r.get<__nv_bfloat16>(), static_cast<size_t>(k * n), 6, 1.0f, nullptr);
    const float init = 0.5f;
    if (lay.fp32) {
      std::vector<float> h(static_cast<size_t>(m * n), init);
      GS_CUDA(cudaMemcpy(src.c.get(), h.data(), src.c.bytes(), cudaMemcpyHostToDevice));
    } else {
      GS_CUDA(cudaMemset(src.c.get(), 0xFF, src.c.bytes()));
    }
    GS_CUDA(cudaDeviceSynchronize());
    Recipe r = make_recipe(Precision::BF16, g, RecipeOptions{});
    r.fp32_accumulate = lay.fp32;
    auto provider = cutlass_with({});
    ASSERT_EQ(provider->cannot_run(g, Precision::BF16, Mode::PerGemm, r, 90), "");
    auto run = provider->dense(g, r, Mode::PerGemm, src, 0);
    run->iteration(nullptr);
    GS_CUDA(cudaDeviceSynchronize());
    const auto ref = ref_gemm(bf16_operand(to_host_u16(src.l), m, k, lay.l_k), bf16_operand(to_host_u16(src.r), n, k, lay.r_k),
                              m, n, k);
    std::vector<double> out;
    if (lay.fp32) {
      for (float x : to_host_f32(src.c)) out.push_back(static_cast<double>(x) - init);
    } else {
      out = to_double(to_host_u16(src.c));
    }
    EXPECT_LT(rel_frobenius(out, ref), lay.fp32 ? 1e-5 : 4e-3);
  }
  // A layout no family serves: N/A with the reason.
  Gemm bad{Pass::Shape, Op::Shape, Scope::Shape, 256, 256, 256, {Role::Activation, false}, {Role::Weight, true}};
  EXPECT_NE(make_cutlass_provider()->cannot_run(bad, Precision::BF16, Mode::PerGemm,
                                                make_recipe(Precision::BF16, bad, RecipeOptions{}), 90)
                .find("no kernel for this operand layout"),
            std::string::npos);
}

TEST(CutlassEngine, CellsRecordTheProviderOrSayWhyNot) {
  GS_REQUIRE_GPU();
  EngineOptions o;
  o.timing.warmup = 2;
  o.timing.iters = 10;
  std::string why;
  auto engine = make_engine(o, why);
  ASSERT_NE(engine, nullptr) << why;
  const Gemm g = grouped_gemm(Pass::Fprop);
  const Cell c = engine->measure(g, Precision::BF16, Mode::PerGemm, kProviderCutlass);
  if (!cutlass_built() || !ArchPolicy(compute_capability()).kernel_target()) {
    EXPECT_FALSE(c.ok);
    EXPECT_NE(c.reason.find("CUTLASS"), std::string::npos) << c.reason;
    GTEST_SKIP() << "CUTLASS cannot run here: " << c.reason;
  }
  ASSERT_TRUE(c.ok) << c.reason;
  EXPECT_EQ(c.kernels.provider, "cutlass");
  EXPECT_NE(c.kernels.config.find("ptr-array grouped"), std::string::npos) << c.kernels.config;
  EXPECT_FALSE(c.gate_timed_out);
  EXPECT_GT(c.stats.mean_ms, 0);
  if (c.kernels.traced) {  // one GEMM kernel per iteration: the single launch
    int gemm_kernels = 0;
    for (const KernelStat& k : c.kernels.kernels)
      if (k.cls == KernelClass::Gemm) gemm_kernels += static_cast<int>(std::lround(k.count));
    EXPECT_EQ(gemm_kernels, 1);
  }
  // The same cell through cuBLASLt, for the record; and what CUTLASS does not run is N/A with a reason.
  const Cell lt = engine->measure(g, Precision::BF16, Mode::PerGemm, kProviderCublasLt);
  EXPECT_TRUE(lt.ok) << lt.reason;
  std::printf("    grouped Fprop %s over %zu experts: cuBLASLt %.1f us, CUTLASS %.1f us\n", g.shape().c_str(),
              g.group.size(), lt.stats.mean_ms * 1e3, c.stats.mean_ms * 1e3);
  const Cell fp8 = engine->measure(g, Precision::MXFP8, Mode::PerGemm, kProviderCutlass);
  EXPECT_FALSE(fp8.ok);
  EXPECT_NE(fp8.reason.find("CUTLASS"), std::string::npos) << fp8.reason;
  const Cell dense = engine->measure(build_shapes_plan("1024").gemms[0], Precision::BF16, Mode::PerGemm, kProviderCutlass);
  EXPECT_TRUE(dense.ok) << dense.reason;
  EXPECT_NE(dense.kernels.config.find("one group"), std::string::npos) << dense.kernels.config;
  const Cell odd = engine->measure(build_shapes_plan("1000x1004x1000").gemms[0], Precision::BF16, Mode::PerGemm,
                                        kProviderCutlass);
  EXPECT_FALSE(odd.ok) << "k = 1004 is no multiple of 8";
  EXPECT_NE(odd.reason.find("multiple of 8"), std::string::npos) << odd.reason;
  const Cell wgrad = engine->measure(grouped_gemm(Pass::Wgrad), Precision::BF16, Mode::PerGemm, kProviderCutlass);
  EXPECT_TRUE(wgrad.ok) << wgrad.reason;
}

}  // namespace
