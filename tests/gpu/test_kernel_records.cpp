// Kernel records on the GPU: CUPTI sees the expected kernels for each recipe and mode,
// autotune never keeps a slower algorithm than the heuristic (re-measured), --num-sms lowers a
// large GEMM's throughput, and power-of-two block scales reach the GEMM.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/gpu/arch_policy.hpp"
#include "core/formats/formats.hpp"
#include "core/plan/plan.hpp"
#include "core/providers/provider.hpp"
#include "core/providers/tuning.hpp"
#include "core/recipes/recipe.hpp"
#include "core/results/results.hpp"
#include "cuda/engine_cuda.hpp"
#include "cuda/timing/kernel_trace.hpp"
#include "cuda/quant/quantize.cuh"
#include "gpu_test_util.hpp"

namespace {

std::unique_ptr<gs::Engine> engine(const gs::GemmOptions& go, int iters = 20) {
  gs::EngineOptions o;
  o.timing.warmup = 3;
  o.timing.iters = iters;
  o.gemm = go;
  std::string why;
  auto e = gs::cuda::make_engine(o, why);
  EXPECT_NE(e, nullptr) << why;
  return e;
}

int count_class(const gs::CellKernels& k, gs::KernelClass c) {
  int n = 0;
  for (const auto& s : k.kernels) n += s.cls == c ? 1 : 0;
  return n;
}

std::string names(const gs::CellKernels& k) {
  std::string s;
  for (const auto& x : k.kernels) s += x.name + " [" + gs::to_string(x.cls) + "]; ";
  return s;
}

}  // namespace

TEST(KernelTrace, SeesTheExpectedKernelsPerRecipeAndMode) {
  GS_REQUIRE_GPU();
  if (!gs::cuda::KernelTracer::get().available())
    GTEST_SKIP() << "CUPTI not available: " << gs::cuda::KernelTracer::get().why_not();
  auto e = engine({});
  ASSERT_NE(e, nullptr);
  // A Dgrad GEMM: the weight is not K-contiguous, so autocast casts with a transpose.
  const gs::Plan plan = gs::build_model_plan(gs::default_config());
  const gs::Gemm* dgrad = nullptr;
  for (const auto& g : plan.gemms)
    if (g.pass == gs::Pass::Dgrad && g.op == gs::Op::Qkv) dgrad = &g;
  ASSERT_NE(dgrad, nullptr);
  for (gs::Precision p : {gs::Precision::BF16, gs::Precision::FP8Current, gs::Precision::FP8Delayed,
                          gs::Precision::FP8Block})
    for (gs::Mode m : {gs::Mode::PerGemm, gs::Mode::PreQuantized}) {
      SCOPED_TRACE(std::string(gs::to_string(p)) + " " + gs::to_string(m));
      const gs::Cell c = e->measure(*dgrad, p, m, gs::kProviderCublasLt);
      ASSERT_TRUE(c.ok) << c.reason;
      const gs::CellKernels& k = c.kernels;
      ASSERT_TRUE(k.traced) << k.trace_note;
      EXPECT_EQ(count_class(k, gs::KernelClass::Gemm), 1) << names(k);
      for (const auto& s : k.kernels)
        if (s.cls == gs::KernelClass::Gemm) {
          EXPECT_DOUBLE_EQ(s.count, 1.0) << "one GEMM launch per iteration: " << s.name;
          EXPECT_EQ(gs::gemm_kernel_inputs(s.name), p == gs::Precision::BF16 ? gs::KernelInputs::BF16 : gs::KernelInputs::FP8)
              << s.name;
        }
      EXPECT_EQ(gs::kernel_flag(p, k.kernels), "") << names(k);
      const bool quantizes = p != gs::Precision::BF16 && m == gs::Mode::PerGemm;
      EXPECT_EQ(count_class(k, gs::KernelClass::Quantize) > 0, quantizes) << names(k);
      // The traced kernels account for the measured time (back to back, launch gaps aside).
      const double sum = k.class_us(gs::KernelClass::Gemm) + k.class_us(gs::KernelClass::Quantize) +
                         k.class_us(gs::KernelClass::Other);
      EXPECT_GT(sum, 0.7 * c.stats.mean_ms * 1000.0) << names(k);
      EXPECT_LT(sum, 1.3 * c.stats.mean_ms * 1000.0) << names(k);
      ASSERT_TRUE(k.algo.has_value());
      EXPECT_GE(k.algo->id, 0);
      EXPECT_EQ(k.algo->rank, 0);
      EXPECT_FALSE(k.autotune.has_value());
    }
}

// Autotune and search: the kept algorithm is never slower than the heuristic's choice.
//
// Measured under the same conditions on both sides. The tuned engine's timed loop always runs
// right after its own tuning (a few hundred ms of sustained GEMMs), the heuristic engine's after a
// host gap of cell setup; a short loop (2048^3 BF16: 100 iterations of 28 us) runs at whatever
// clock the state before it left, so the two loops compared the GPU's loaded clock against a
// clock that had partly recovered towards boost: on a warm H200, 0.02827 ms against 0.02761 ms
// (2.4%), once in a whole suite, never alone. The rule itself compares the pick and the
// heuristic's choice in one state (interleaved rounds, alternating confirmation, pick / heuristic
// / pick timed loops, each by 2%), so the comparison here must too: --power-hold on both engines
// (every loop starts from the loaded state, as in a training step), loops of at least ~20 ms (the
// power cap acts within them), and the medians of three alternating loops per side.
static void never_keeps_a_slower_algorithm(gs::AlgoChoice choice) {
  gs::GemmOptions tuned;
  tuned.algo = choice;
  const auto loaded = [](const gs::GemmOptions& go, int iters) {
    gs::EngineOptions o;
    o.timing.warmup = 3;
    o.timing.iters = iters;
    o.timing.power_hold = true;
    o.gemm = go;
    std::string why;
    auto e = gs::cuda::make_engine(o, why);
    EXPECT_NE(e, nullptr) << why;
    return e;
  };
  const auto mhz = [](const gs::Cell& c) { return c.clock ? c.clock->sm_mhz : 0; };
  auto probe = engine({}, 100);
  ASSERT_TRUE(probe);
  for (const char* shape : {"15872x4096x4096", "4096x15872x16384", "2048x2048x2048"})
    for (gs::Precision p : {gs::Precision::BF16, gs::Precision::FP8Current, gs::Precision::FP8Block}) {
      SCOPED_TRACE(std::string(shape) + " " + gs::to_string(p));
      const gs::Gemm g = gs::build_shapes_plan(shape).gemms[0];
      const gs::Cell first = probe->measure(g, p, gs::Mode::PreQuantized, gs::kProviderCublasLt);
      ASSERT_TRUE(first.ok) << first.reason;
      const int iters = std::clamp(static_cast<int>(20.0 / first.stats.mean_ms), 100, 5000);
      auto h = loaded({}, iters);
      auto t = loaded(tuned, iters);
      ASSERT_TRUE(h && t);
      const gs::Cell ct = t->measure(g, p, gs::Mode::PreQuantized, gs::kProviderCublasLt);
      ASSERT_TRUE(ct.ok) << ct.reason;
      ASSERT_TRUE(ct.kernels.autotune.has_value());
      const gs::AutotuneRecord& r = *ct.kernels.autotune;
      EXPECT_GE(r.tried, 1);
      EXPECT_LE(r.chosen_us, r.heuristic_us * 1.0001) << "the tuning run itself";
      ASSERT_TRUE(ct.kernels.algo.has_value());
      if (choice == gs::AlgoChoice::Search) {
        // Every algorithm cuBLASLt runs for these has tiles or options beyond the heuristic's list.
        EXPECT_GT(r.searched, 0);
        EXPECT_LE(r.screen_faster, r.searched);
        // A searched pick was kept only with its output checked against the heuristic's.
        if (ct.kernels.algo->rank < 0) {
          EXPECT_TRUE(r.confirmed);
          EXPECT_GE(r.output_rel_diff, 0.0);
          EXPECT_LE(r.output_rel_diff, gs::tuning::kMaxOutputRelDiff);
        }
      } else {
        EXPECT_EQ(r.searched, 0);
        EXPECT_GE(ct.kernels.algo->rank, 0);
      }
      if (!r.confirmed) {
        // The heuristic's choice was kept: it must be exactly that algorithm (its time against
        // another engine's loop of the same kernel is run-to-run noise, which is not autotune's).
        EXPECT_EQ(ct.kernels.algo->summary(), r.heuristic.summary()) << "not confirmed, yet not the heuristic's";
        continue;
      }
      // A pick was kept: re-measured in separate timed loops under the same conditions, alternating
      // (so that a drift touches both alike), it is not slower than the heuristic's choice beyond
      // run-to-run noise (2%, median of three each).
      std::vector<gs::Cell> tc{ct}, hc;
      for (int i = 0; i < 3; ++i) {
        hc.push_back(h->measure(g, p, gs::Mode::PreQuantized, gs::kProviderCublasLt));
        ASSERT_TRUE(hc.back().ok) << hc.back().reason;
        if (i == 2) break;
        tc.push_back(t->measure(g, p, gs::Mode::PreQuantized, gs::kProviderCublasLt));
        ASSERT_TRUE(tc.back().ok) << tc.back().reason;
      }
      const auto by_time = [](const gs::Cell& a, const gs::Cell& b) { return a.stats.mean_ms < b.stats.mean_ms; };
      std::sort(tc.begin(), tc.end(), by_time);
      std::sort(hc.begin(), hc.end(), by_time);
      const gs::Cell& tm = tc[1];
      const gs::Cell& hm = hc[1];
      EXPECT_LE(tm.stats.mean_ms, hm.stats.mean_ms * 1.02)
          << "autotuned " << tm.stats.mean_ms << " ms at " << mhz(tm) << " MHz vs heuristic " << hm.stats.mean_ms
          << " ms at " << mhz(hm) << " MHz (" << iters << " iterations); chosen " << ct.kernels.algo->summary();
    }
}

TEST(KernelTrace, AutotuneNeverKeepsASlowerAlgorithm) {
  GS_REQUIRE_GPU();
  never_keeps_a_slower_algorithm(gs::AlgoChoice::Autotune);
}

TEST(KernelTrace, SearchNeverKeepsASlowerOrDifferentAlgorithm) {
  GS_REQUIRE_GPU();
  never_keeps_a_slower_algorithm(gs::AlgoChoice::Search);
}

TEST(KernelTrace, NumSmsLowersThroughputOnALargeGemm) {
  GS_REQUIRE_GPU();
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  gs::GemmOptions few;
  few.num_sms = prop.multiProcessorCount / 4;
  auto all = engine({});
  auto quarter = engine(few);
  ASSERT_TRUE(all && quarter);
  const gs::Gemm g = gs::build_shapes_plan("8192").gemms[0];
  for (gs::Precision p : {gs::Precision::BF16, gs::Precision::FP8Current}) {
    SCOPED_TRACE(gs::to_string(p));
    const gs::Cell a = all->measure(g, p, gs::Mode::PreQuantized, gs::kProviderCublasLt);
    const gs::Cell q = quarter->measure(g, p, gs::Mode::PreQuantized, gs::kProviderCublasLt);
    ASSERT_TRUE(a.ok && q.ok) << a.reason << q.reason;
    // A quarter of the SMs: compute-bound, so well over twice the time (ideally 4x).
    EXPECT_GT(q.stats.mean_ms, 2.0 * a.stats.mean_ms) << "all SMs " << a.stats.mean_ms << " ms, " << few.num_sms
                                                      << " SMs " << q.stats.mean_ms << " ms";
  }
}

// Power-of-two block scales: every scale the kernels write is a power of two and equals the host
// reference (1 / fp8_block_scale(amax, pow2)) for the block's amax.
TEST(KernelTrace, PowerOfTwoBlockScales) {
  GS_REQUIRE_GPU();
  const int rows = 256, cols = 512;
  std::vector<uint16_t> h(static_cast<size_t>(rows) * cols);
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = gs::nf::float_to_bf16_rne(std::sin(0.37f * static_cast<float>(i)) * (1.f + static_cast<float>(i % 977)));
  void *x = nullptr, *q = nullptr, *s = nullptr;
  ASSERT_EQ(cudaMalloc(&x, h.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&q, h.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&s, h.size() * 4), cudaSuccess);
  cudaMemcpy(x, h.data(), h.size() * 2, cudaMemcpyHostToDevice);
  gs::cuda::quantize_block_1x128(static_cast<const __nv_bfloat16*>(x), rows, cols, false, gs::cuda::Fp8Kind::E4M3,
                                 static_cast<uint8_t*>(q), static_cast<float*>(s), nullptr, /*pow2=*/true);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const int nkb = cols / 128;
  std::vector<float> sc(static_cast<size_t>(rows) * nkb);
  cudaMemcpy(sc.data(), s, sc.size() * 4, cudaMemcpyDeviceToHost);
  for (int r = 0; r < rows; ++r)
    for (int kb = 0; kb < nkb; ++kb) {
      float amax = 0;
      for (int c = kb * 128; c < kb * 128 + 128; ++c)
        amax = std::max(amax, std::fabs(gs::nf::bf16_to_float(h[static_cast<size_t>(r) * cols + c])));
      const float want = 1.f / gs::nf::fp8_block_scale(amax, gs::nf::Fp8::E4M3, true);
      ASSERT_EQ(sc[static_cast<size_t>(kb) * rows + r], want) << r << "," << kb;
      int e = 0;
      ASSERT_EQ(std::frexp(want, &e), 0.5f);
    }
  cudaFree(x);
  cudaFree(q);
  cudaFree(s);
}

// Engine::accuracy over a model plan with an LM head, in every precision: the LM head runs BF16
// in every column (--lm-head-precision bf16, the default), so its accuracy is BF16's and never
// emulated, also where the column's format has no kernel on this GPU (MXFP8/NVFP4 on Hopper: a
// BF16 recipe sent down the emulation path crashed). Other GEMMs are emulated exactly where the
// GPU has no kernel for the format.
TEST(EngineAccuracy, LmHeadStaysBf16AndEmulationOnlyWhereNeeded) {
  GS_REQUIRE_GPU();
  gs::ModelConfig mc;
  mc.hidden_size = 256; mc.intermediate_size = 512; mc.num_attention_heads = 4; mc.num_hidden_layers = 1;
  mc.micro_batch_size = 1; mc.sequence_length = 128; mc.vocab_size = 512;
  const gs::Plan plan = gs::build_model_plan(mc);
  auto e = engine({});
  ASSERT_TRUE(e);
  const int cc = e->device_info().compute_capability();
  bool saw_head = false;
  for (const gs::Gemm& g : plan.gemms) {
    SCOPED_TRACE(std::string(gs::pass_label(g.pass)) + " " + g.label());
    const gs::AccuracyCell bf16 = e->accuracy(g, gs::Precision::BF16, gs::Dist::Normal);
    ASSERT_TRUE(bf16.ok) << bf16.reason;
    for (gs::Precision p : {gs::Precision::FP8Current, gs::Precision::MXFP8, gs::Precision::NVFP4}) {
      SCOPED_TRACE(gs::to_string(p));
      const gs::AccuracyCell a = e->accuracy(g, p, gs::Dist::Normal);
      ASSERT_TRUE(a.ok) << a.reason;
      ASSERT_TRUE(std::isfinite(a.rel_error));
      if (g.op == gs::Op::LmHead) {
        saw_head = true;
        EXPECT_FALSE(a.emulated);
        // The same BF16 GEMM on the same data; cuBLASLt may pick another algorithm per column
        // (summation order), so equal to a part in 1e4, not bit for bit. A quantized head would
        // be off by percents.
        EXPECT_NEAR(a.rel_error, bf16.rel_error, 1e-4 * bf16.rel_error) << "the LM head is the BF16 GEMM in every column";
      } else {
        EXPECT_EQ(a.emulated, !gs::ArchPolicy(cc).times(p));
        EXPECT_GT(a.rel_error, 2 * bf16.rel_error) << "a quantized recipe is less accurate than BF16";
      }
    }
  }
  EXPECT_TRUE(saw_head);
}
