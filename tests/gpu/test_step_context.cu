// --step-other-ms on the GPU: the memory-bound stand-in lasts about as long as asked, and the
// work runs between timed iterations, never inside a sample or a cell's kernel records.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/plan/plan.hpp"
#include "core/providers/provider.hpp"
#include "core/results/results.hpp"
#include "core/run/step_context.hpp"
#include "cuda/engine_cuda.hpp"
#include "cuda/stepwork/step_work.hpp"
#include "gpu_test_util.hpp"

namespace {

float enqueue_ms(const gs::cuda::StepWork& w, double ms, cudaStream_t s) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  float best = 1e30f;
  for (int i = 0; i < 3; ++i) {  // the least of three: the calibration's clocks, not a stall
    cudaEventRecord(a, s);
    w.enqueue(ms, s);
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    best = std::min(best, t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return best;
}

}  // namespace

TEST(StepContext, MemoryWorkLastsAboutAsLongAsAsked) {
  GS_REQUIRE_GPU();
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  {
    gs::cuda::StepWork w(prop.l2CacheSize, s);
    // HBM bandwidth of any GPU this runs on: between 100 GB/s and 20 TB/s.
    EXPECT_GT(w.bytes_per_ms(), 100e9 / 1e3);
    EXPECT_LT(w.bytes_per_ms(), 20e12 / 1e3);
    const float short_ms = enqueue_ms(w, 0.2, s), long_ms = enqueue_ms(w, 1.0, s);
    EXPECT_GT(short_ms, 0.1f);
    EXPECT_LT(short_ms, 0.4f);
    EXPECT_GT(long_ms, 0.6f);
    EXPECT_LT(long_ms, 1.6f);
    EXPECT_EQ(enqueue_ms(w, 0, s) < 0.05f, true);  // nothing asked, nothing run
  }
  cudaStreamDestroy(s);
}

// A gap as long as the GEMM itself after every iteration: were it inside the samples, the cell
// would read about twice the GEMM; the GEMM alone (on the cooler GPU) reads no slower.
TEST(StepContext, WorkStaysOutsideTheSamplesAndTheKernelRecords) {
  GS_REQUIRE_GPU();
  const gs::Gemm g = gs::build_shapes_plan("8192").gemms[0];
  auto make = [](double rate) {
    gs::EngineOptions o;
    o.timing.warmup = 5;
    o.timing.iters = 30;
    o.timing.step_gap_ms_per_gflop = rate;
    o.timing.step_other_ms = rate > 0 ? 1.0 : 0.0;
    std::string why;
    auto e = gs::cuda::make_engine(o, why);
    EXPECT_NE(e, nullptr) << why;
    return e;
  };
  auto plain = make(0);
  ASSERT_TRUE(plain);
  const gs::Cell base = plain->measure(g, gs::Precision::BF16, gs::Mode::PreQuantized, gs::kProviderCublasLt);
  ASSERT_TRUE(base.ok) << base.reason;
  plain.reset();
  auto stepped = make(base.stats.mean_ms / (g.flops() * 1e-9));  // gap = the GEMM's own time
  ASSERT_TRUE(stepped);
  const gs::Cell c = stepped->measure(g, gs::Precision::BF16, gs::Mode::PreQuantized, gs::kProviderCublasLt);
  ASSERT_TRUE(c.ok) << c.reason;
  EXPECT_LT(c.stats.mean_ms, 1.3 * base.stats.mean_ms) << "back to back " << base.stats.mean_ms << " ms";
  for (const auto& k : c.kernels.kernels) EXPECT_EQ(k.name.find("step_work"), std::string::npos) << k.name;
}
