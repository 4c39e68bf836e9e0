// Grouped (MoE expert) GEMMs on the GPU: every expert's GEMM equals an FP64 GEMM of its own
// operands (quantized ones decoded with their own scales) in every Hopper recipe, pass and mode;
// empty experts do nothing (Fprop/Dgrad) or get a zeroed weight gradient (Wgrad); serial and
// multi-stream runs are bit-identical; the engine's grouped cells are timed without a gate
// timeout, with a dense-equivalent time, and refuse what does not fit in memory.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/gpu/arch_policy.hpp"
#include "core/providers/provider.hpp"
#include "core/recipes/grouped.hpp"
#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"
#include "core/results/results.hpp"
#include "cuda/engine_cuda.hpp"
#include "cuda/providers/cublaslt/grouped_gemm.hpp"
#include "cuda/timing/power_hold.hpp"
#include "gemm_reference.hpp"
#include "gpu_test_util.hpp"

using namespace gs;
using namespace gs::cuda;
using namespace gs::test;

namespace {

// Real rows (tokens) per expert: an empty expert, sizes that are not multiples of 16, a big one.
const std::vector<int64_t> kGroup = {40, 0, 17, 64, 3, 0, 33};

// The expert up projection of a small MoE layer (hidden 256, gated expert FFN 2 x 192) in one pass.
Gemm grouped_gemm(Pass pass, const std::vector<int64_t>& group = kGroup, int64_t hidden = 256, int64_t ffn = 384) {
  return grouped_linear_gemm(pass, Op::ExpertUp, Scope::Layer, group, hidden, ffn);
}

struct LtContext {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace = make_lt_workspace();
  cudaStream_t stream = nullptr;
  LtContext() {
    GS_CUBLAS(cublasLtCreate(&handle));
    GS_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  ~LtContext() {
    cudaStreamDestroy(stream);
    cublasLtDestroy(handle);
  }
  LtContext(const LtContext&) = delete;
  LtContext& operator=(const LtContext&) = delete;
};

std::vector<double> to_double(const std::vector<uint16_t>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = gs::nf::bf16_to_float(v[i]);
  return out;
}

struct Case { Precision precision; Pass pass; Mode mode; int streams; };
void PrintTo(const Case& c, std::ostream* os) {
  *os << to_string(c.precision) << ' ' << pass_label(c.pass) << ' ' << to_string(c.mode) << " streams " << c.streams;
}

class GroupedRecipeTest : public ::testing::TestWithParam<Case> {};

TEST_P(GroupedRecipeTest, EveryExpertMatchesTheReferenceOfItsOwnOperands) {
  GS_REQUIRE_GPU();
  const Case c = GetParam();
  if (!gs::ArchPolicy(gs::test::compute_capability()).times(c.precision)) GTEST_SKIP() << "needs a newer GPU";
  const Gemm g = grouped_gemm(c.pass);
  const std::vector<int64_t> padded = padded_group(g, c.precision);
  LtContext lt;
  LtAlgoCache cache;
  RecipeOptions opts;
  opts.wgrad_fp32_accumulate = false;  // BF16 gradients: read as BF16 below (FP32: test_grouped_quant)
  auto src = GroupedSources::allocate(g, padded, 7, lt.stream);
  if (g.group_dim == GroupDim::M) GS_CUDA(cudaMemset(src->out.get(), 0xFF, src->out.bytes()));  // NaN until written
  // cudaMemset runs on the legacy stream, which the grouped GEMM's non-blocking streams do not
  // wait for: without this the poison can land after the GEMM's writes (it did under memcheck).
  GS_CUDA(cudaDeviceSynchronize());
  GroupedGemm gg(lt.handle, *src, c.precision, c.mode, opts, c.streams, lt.stream, lt.workspace.get(), &cache);
  gg.prepare();
  for (int i = 0; i < 3; ++i) gg.run_once();  // delayed scaling: scales from this data's history
  int checked = 0, empty = 0;
  for (int e = 0; e < gg.experts(); ++e) {
    SCOPED_TRACE("expert " + std::to_string(e));
    const Gemm eg = gg.expert_gemm_of(e);
    const GemmSources& v = gg.expert_sources(e);
    if (padded[static_cast<size_t>(e)] == 0) {
      ++empty;
      EXPECT_EQ(gg.expert(e), nullptr) << "an empty expert runs no GEMM";
      if (g.group_dim == GroupDim::K) {
        const auto out = to_host_u16(v.c);
        for (uint16_t x : out) ASSERT_EQ(x, 0) << "an empty expert's weight gradient is zeroed";
      }
      continue;
    }
    ASSERT_NE(gg.expert(e), nullptr);
    const RecipeGemm& rg = *gg.expert(e);
    const auto out = to_double(to_host_u16(v.c));
    const auto l_orig = bf16_operand(to_host_u16(v.l), eg.m, eg.k, eg.a.k_major);
    const auto r_orig = bf16_operand(to_host_u16(v.r), eg.n, eg.k, eg.b.k_major);
    const auto ref_orig = ref_gemm(l_orig, r_orig, eg.m, eg.n, eg.k);
    const auto ref_own = c.precision == Precision::BF16 ? ref_orig
                                                        : ref_gemm(dequantize(*rg.l()), dequantize(*rg.r()), eg.m, eg.n, eg.k);
    const double own = rel_frobenius(out, ref_own);
    const double recipe_err = rel_frobenius(out, ref_orig);
    EXPECT_LT(own, 4e-3) << eg.shape();
    EXPECT_LT(recipe_err, c.precision == Precision::BF16 ? 4e-3 : 0.12) << eg.shape();
    if (c.precision != Precision::BF16) EXPECT_GT(recipe_err, 1e-3) << "quantization left no trace";
    ++checked;
  }
  EXPECT_EQ(checked, 5);
  EXPECT_EQ(empty, 2);
  EXPECT_GE(cache.hits + cache.misses, 5u);
}

std::vector<Case> recipe_cases() {
  std::vector<Case> v;
  for (Precision p : {Precision::BF16, Precision::FP8Current, Precision::FP8Delayed, Precision::FP8Block})
    for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad})
      for (Mode m : {Mode::PerGemm, Mode::Training, Mode::PreQuantized}) v.push_back({p, pass, m, 4});
  v.push_back({Precision::FP8Current, Pass::Fprop, Mode::PerGemm, 0});
  v.push_back({Precision::FP8Block, Pass::Wgrad, Mode::PerGemm, 0});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Hopper, GroupedRecipeTest, ::testing::ValuesIn(recipe_cases()), [](const auto& info) {
  const Case& c = info.param;
  std::string mode = c.mode == Mode::PerGemm ? "PerGemm" : c.mode == Mode::Training ? "Training" : "PreQuantized";
  return std::string(to_string(c.precision)) + "_" + pass_label(c.pass) + "_" + mode + "_s" + std::to_string(c.streams);
});

// The output bytes of one grouped GEMM: M-grouped the shared output, K-grouped every expert's.
std::vector<uint16_t> outputs(const GroupedSources& s) {
  if (s.gemm.group_dim == GroupDim::M) return to_host_u16(s.out);
  std::vector<uint16_t> all;
  for (const DeviceBuffer& b : s.per_expert) {
    const auto h = to_host_u16(b);
    all.insert(all.end(), h.begin(), h.end());
  }
  return all;
}

TEST(Grouped, SerialAndMultiStreamAreBitIdentical) {
  GS_REQUIRE_GPU();
  LtContext lt;
  RecipeOptions opts;
  opts.wgrad_fp32_accumulate = false;  // BF16 gradients: read as BF16 below (FP32: test_grouped_quant)
  for (Precision p : {Precision::BF16, Precision::FP8Current, Precision::FP8Block})
    for (Pass pass : {Pass::Fprop, Pass::Dgrad, Pass::Wgrad}) {
      SCOPED_TRACE(std::string(to_string(p)) + " " + pass_label(pass));
      const Gemm g = grouped_gemm(pass);
      const auto padded = padded_group(g, p);
      auto src = GroupedSources::allocate(g, padded, 11, lt.stream);
      std::vector<std::vector<uint16_t>> results;
      for (int streams : {0, 1, 3, 4}) {
        if (g.group_dim == GroupDim::M) GS_CUDA(cudaMemset(src->out.get(), 0xFF, src->out.bytes()));
        for (auto& b : src->per_expert)
          if (g.group_dim == GroupDim::K) GS_CUDA(cudaMemset(b.get(), 0xFF, b.bytes()));
        GS_CUDA(cudaDeviceSynchronize());  // the legacy-stream poison before the non-blocking streams' work
        GroupedGemm gg(lt.handle, *src, p, Mode::PerGemm, opts, streams, lt.stream, lt.workspace.get(), nullptr);
        gg.prepare();
        gg.run_once();
        results.push_back(outputs(*src));
      }
      for (size_t i = 1; i < results.size(); ++i) EXPECT_EQ(results[i], results[0]) << "run " << i;
    }
}

// 256 experts (DeepSeek-V3's count) with skewed routing: hundreds of launches per iteration,
// more than one chunk of the launch queue holds; the gate must never open by its timeout.
std::vector<int64_t> skewed_group(int experts, uint64_t seed) {
  std::vector<int64_t> g(static_cast<size_t>(experts));
  uint64_t x = seed;
  for (auto& s : g) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t r = (x >> 33) % 100;
    s = r < 10 ? 0 : static_cast<int64_t>(r);  // ~10% empty
  }
  return g;
}

TEST(GroupedEngine, ManyExpertsNeverTimeOutAndHaveADenseEquivalent) {
  GS_REQUIRE_GPU();
  for (int streams : {0, 4}) {
    EngineOptions o;
    o.timing.warmup = 3;
    o.timing.iters = 50;
    o.grouped_streams = streams;
    std::string why;
    auto engine = make_engine(o, why);
    ASSERT_NE(engine, nullptr) << why;
    for (Pass pass : {Pass::Fprop, Pass::Wgrad})
      for (Precision p : {Precision::BF16, Precision::FP8Current}) {
        SCOPED_TRACE(std::string(to_string(p)) + " " + pass_label(pass) + " streams " + std::to_string(streams));
        const Gemm g = grouped_gemm(pass, skewed_group(256, 3), 512, 256);
        const Cell c = engine->measure(g, p, Mode::PerGemm, kProviderCublasLt);
        ASSERT_TRUE(c.ok) << c.reason;
        EXPECT_FALSE(c.gate_timed_out);
        ASSERT_TRUE(c.dense_equiv_ms.has_value());
        EXPECT_GT(*c.dense_equiv_ms, 0);
        EXPECT_GT(c.stats.mean_ms, 0);
        std::printf("    256 experts %-10s %-5s streams %d: grouped %.3f ms, dense equivalent %.3f ms\n", to_string(p),
                    pass_label(pass), streams, c.stats.mean_ms, *c.dense_equiv_ms);
      }
  }
}

TEST(GroupedEngine, RefusesWhatDoesNotFitWithAReason) {
  GS_REQUIRE_GPU();
  EngineOptions o;
  o.timing.warmup = 1;
  o.timing.iters = 2;
  std::string why;
  auto engine = make_engine(o, why);
  ASSERT_NE(engine, nullptr) << why;
  // Experts with 16384 x 16384 BF16 weights (512 MiB each), twice the GPU's memory in weights alone
  // (an H200 holds the 128 GiB of 256 such experts).
  size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  const int64_t experts = static_cast<int64_t>(2 * total_b / (size_t{16384} * 16384 * 2)) + 1;
  const Gemm g = grouped_gemm(Pass::Fprop, std::vector<int64_t>(static_cast<size_t>(experts), 16), 16384, 16384);
  const Cell c = engine->measure(g, Precision::BF16, Mode::PerGemm, kProviderCublasLt);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.reason.find("GiB of GPU memory"), std::string::npos) << c.reason;
  // The engine still measures afterwards.
  const Cell ok = engine->measure(grouped_gemm(Pass::Fprop), Precision::BF16, Mode::PerGemm, kProviderCublasLt);
  EXPECT_TRUE(ok.ok) << ok.reason;
  // All experts empty along M: nothing to run, said so.
  const Cell none = engine->measure(grouped_gemm(Pass::Fprop, {0, 0, 0}), Precision::BF16, Mode::PerGemm, kProviderCublasLt);
  EXPECT_FALSE(none.ok);
  EXPECT_NE(none.reason.find("no rows"), std::string::npos) << none.reason;
}

// Issue 15: a loop far longer than the launch queue (100000 iterations of a small FP8 autocast
// GEMM, ~8 launches each) is enqueued in gated chunks and reads the same per-iteration time as 100.
TEST(TimedLoop, HundredThousandIterationsReadLikeAHundred) {
  GS_REQUIRE_GPU();
  const Gemm g = build_shapes_plan("1024").gemms[0];
  auto engine_with = [](int iters) {
    EngineOptions o;
    o.timing.warmup = 10;
    o.timing.iters = iters;
    std::string why;
    auto e = make_engine(o, why);
    EXPECT_NE(e, nullptr) << why;
    return e;
  };
  auto e100 = engine_with(100), e100k = engine_with(100000);
  ASSERT_TRUE(e100 && e100k);
  auto mean = [&](Engine& e) {
    const Cell c = e.measure(g, Precision::FP8Current, Mode::PerGemm, kProviderCublasLt);
    EXPECT_TRUE(c.ok) << c.reason;
    EXPECT_FALSE(c.gate_timed_out) << c.stats.iters << " iterations";
    return c.stats.mean_ms;
  };
  // No BF16 warm-up (it leaves the clock power-capped for a while): the first long loop brings
  // the GPU to this workload's steady clock, then 100-iteration loops run around the measured
  // long one, so both read the same clock.
  mean(*e100k);
  std::vector<double> short_runs;
  for (int i = 0; i < 5; ++i) short_runs.push_back(mean(*e100));
  const double t100k = mean(*e100k);
  for (int i = 0; i < 5; ++i) short_runs.push_back(mean(*e100));
  std::sort(short_runs.begin(), short_runs.end());
  const double t100 = 0.5 * (short_runs[4] + short_runs[5]);
  std::printf("    1024^3 FP8Current autocast: %.2f us/iter at 100 iterations (median of 10 loops), %.2f us at 100000\n",
              t100 * 1e3, t100k * 1e3);
  EXPECT_NEAR(t100k / t100, 1.0, 0.05);
}

// Chunks split an iteration when it does not fit one (here: a tiny chunk budget): the loop still
// times every iteration, as the sum of its segments, without a gate timeout.
TEST(TimedLoop, IterationsSplitAcrossChunksAreSummed) {
  GS_REQUIRE_GPU();
  LtContext lt;
  RecipeOptions opts;
  opts.wgrad_fp32_accumulate = false;  // BF16 gradients: read as BF16 below (FP32: test_grouped_quant)
  const Gemm g = grouped_gemm(Pass::Fprop, skewed_group(64, 5), 512, 256);
  const auto padded = padded_group(g, Precision::BF16);
  auto src = GroupedSources::allocate(g, padded, 1, lt.stream);
  GroupedGemm gg(lt.handle, *src, Precision::BF16, Mode::PerGemm, opts, 4, lt.stream, lt.workspace.get(), nullptr);
  gg.prepare();
  LaunchGate gate;
  EventPool events;
  const LoopResult whole = run_timed_loop(gate, events, lt.stream, gg.body(), 5, 20, nullptr, 100000);
  const LoopResult split = run_timed_loop(gate, events, lt.stream, gg.body(), 5, 20, nullptr, 24);
  EXPECT_EQ(whole.chunks, 1);
  EXPECT_EQ(whole.segments_per_iteration_max, 1);
  EXPECT_GT(split.chunks, 20);
  EXPECT_GT(split.segments_per_iteration_max, 1);
  EXPECT_FALSE(whole.gate_timed_out);
  EXPECT_FALSE(split.gate_timed_out);
  ASSERT_EQ(split.samples_ms.size(), 20u);
  const Stats a = summarize(whole.samples_ms), b = summarize(split.samples_ms);
  std::printf("    64 experts BF16: %.1f us/iter in one chunk, %.1f us split over %d chunks\n", a.median_ms * 1e3,
              b.median_ms * 1e3, split.chunks);
  // Splits add a join/fork barrier per segment: a little slower, never faster by much, same order.
  EXPECT_GT(b.median_ms, 0.8 * a.median_ms);
  EXPECT_LT(b.median_ms, 2.0 * a.median_ms);
}

}  // namespace

namespace {

// The power hold (power_hold.hpp): called once, after the warm-up and before the gate, with the
// host's expected enqueue time of the first chunk; the samples are those of the loop alone.
TEST(TimedLoop, PowerHoldRunsOnceBeforeTheGate) {
  GS_REQUIRE_GPU();
  LtContext lt;
  RecipeOptions opts;
  opts.wgrad_fp32_accumulate = false;
  const Gemm g = grouped_gemm(Pass::Fprop, skewed_group(16, 5), 512, 256);
  const auto padded = padded_group(g, Precision::BF16);
  auto src = GroupedSources::allocate(g, padded, 1, lt.stream);
  GroupedGemm gg(lt.handle, *src, Precision::BF16, Mode::PerGemm, opts, 1, lt.stream, lt.workspace.get(), nullptr);
  gg.prepare();
  PowerHold hold(lt.handle, lt.workspace.get(), kWorkspaceBytes, lt.stream);
  EXPECT_GT(hold.gemm_ms(), 0.0);
  LaunchGate gate;
  EventPool events;
  int calls = 0;
  double host_ms = -1;
  const LoopResult plain = run_timed_loop(gate, events, lt.stream, gg.body(), 5, 40, nullptr);
  const LoopResult held = run_timed_loop(gate, events, lt.stream, gg.body(), 5, 40, nullptr, kChunkOps, [&](double ms) {
    ++calls;
    host_ms = ms;
    hold.enqueue(lt.stream, PowerHold::hold_ms(ms));
  });
  EXPECT_EQ(calls, 1);
  EXPECT_GT(host_ms, 0.0);
  EXPECT_LT(host_ms, 1000.0);
  EXPECT_FALSE(held.gate_timed_out);
  ASSERT_EQ(held.samples_ms.size(), 40u);
  const Stats a = summarize(plain.samples_ms), b = summarize(held.samples_ms);
  std::printf("    16 experts BF16: %.1f us/iter plain, %.1f us after a %.2f ms hold\n", a.median_ms * 1e3,
              b.median_ms * 1e3, PowerHold::hold_ms(host_ms));
  // The hold's GEMMs are not in the samples (the same loop, clocks aside: within 25%).
  EXPECT_GT(b.median_ms, 0.75 * a.median_ms);
  EXPECT_LT(b.median_ms, 1.25 * a.median_ms);
}

TEST(PowerHold, HoldsForAboutTheTimeAsked) {
  GS_REQUIRE_GPU();
  LtContext lt;
  PowerHold hold(lt.handle, lt.workspace.get(), kWorkspaceBytes, lt.stream);
  Event a = make_event(), b = make_event();
  GS_CUDA(cudaEventRecord(a.get(), lt.stream));
  hold.enqueue(lt.stream, 10.0);
  GS_CUDA(cudaEventRecord(b.get(), lt.stream));
  GS_CUDA(cudaEventSynchronize(b.get()));
  float ms = 0;
  GS_CUDA(cudaEventElapsedTime(&ms, a.get(), b.get()));
  std::printf("    asked 10 ms, held %.2f ms (%.3f ms per GEMM at construction)\n", ms, hold.gemm_ms());
  EXPECT_GT(ms, 8.0);   // the rate was timed at construction; under the cap it only gets slower
  EXPECT_LT(ms, 40.0);
  EXPECT_DOUBLE_EQ(PowerHold::hold_ms(0), PowerHold::kMinMs);
  EXPECT_DOUBLE_EQ(PowerHold::hold_ms(10), 15.0);
  EXPECT_DOUBLE_EQ(PowerHold::hold_ms(1e6), PowerHold::kMaxMs);
  EXPECT_DOUBLE_EQ(PowerHold::hold_ms(std::nan("")), PowerHold::kMaxMs);
}

}  // namespace
