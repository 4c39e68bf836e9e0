#include <cuda_runtime.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/gpu/arch_policy.hpp"
#include "core/plan/plan.hpp"
#include "core/providers/provider.hpp"
#include "cuda/common/build_info.hpp"
#include "cuda/timing/clock_probe.hpp"
#include "cuda/engine_cuda.hpp"
#include "cuda/timing/launch_gate.hpp"
#include "gpu_test_util.hpp"

// The build carries code this device runs: one of the architectures CMake built for runs here
// (machine code for its family, or PTX at or below it: core/gpu/arch_policy.hpp), and the CUDA
// runtime agrees by loading one of the backend's kernels. What the device can time is the
// ArchPolicy's business (the recipe tests skip what it cannot), not this test's.
TEST(GpuSmoke, TheBuildCarriesCodeForThisDevice) {
  GS_REQUIRE_GPU();
  const int cc = gs::test::compute_capability();
  const gs::ArchPolicy policy(cc);
  const std::vector<std::string> archs = gs::cuda::built_cuda_architectures();
  ASSERT_FALSE(archs.empty()) << "the build did not record its CUDA architectures (CMakeLists.txt)";
  std::string built;
  bool readable = true, runs = false;
  for (const std::string& a : archs) {
    built += (built.empty() ? "" : ", ") + a;
    readable &= a.find_first_not_of("0123456789afrealvirtu-") == std::string::npos;  // not "native" or "all"
    runs |= policy.runs_code_built_for(a);
  }
  if (readable) EXPECT_TRUE(runs) << "built for " << built << "; this device is sm_" << cc;
  std::string why;
  const int loaded = gs::cuda::loaded_kernel_architecture(0, why);
  ASSERT_GT(loaded, 0) << "built for " << built << "; this device is sm_" << cc << ": " << why;
  EXPECT_LE(loaded, cc) << "the runtime loaded code for sm_" << loaded;
  EXPECT_EQ(loaded / 10, cc / 10) << "the runtime loaded code of another family";
}

// NVML clock samples: plausible values from the probe, and on every measured cell.
TEST(ClockTelemetry, ProbeAndEngineSampleTheSmClock) {
  GS_REQUIRE_GPU();
  gs::cuda::ClockProbe probe(0);
  if (!probe.available()) GTEST_SKIP() << "NVML not available: " << probe.why();
  const auto s = probe.sample();
  ASSERT_TRUE(s.has_value());
  EXPECT_GT(s->max_sm_mhz, 500);
  EXPECT_GT(s->sm_mhz, 0);
  EXPECT_LE(s->sm_mhz, s->max_sm_mhz);

  gs::EngineOptions o;
  o.timing.warmup = 2;
  o.timing.iters = 100;  // ~20 ms of GEMMs: the sample lands while the GPU is busy
  std::string why;
  auto engine = gs::cuda::make_engine(o, why);
  ASSERT_NE(engine, nullptr) << why;
  const gs::Gemm g = gs::build_shapes_plan("4096").gemms[0];
  const gs::Cell c = engine->measure(g, gs::Precision::BF16, gs::Mode::PerGemm, gs::kProviderCublasLt);
  ASSERT_TRUE(c.ok) << c.reason;
  ASSERT_TRUE(c.clock.has_value()) << "a measured cell carries its clock sample";
  EXPECT_EQ(c.clock->max_sm_mhz, s->max_sm_mhz);
  // Sampled while 4096^3 BF16 GEMMs run: the GPU is not idle and well above its idle clock.
  EXPECT_FALSE(c.clock->reasons & 0x1) << "GPU-idle reason set during the timed loop";
  EXPECT_GT(c.clock->sm_mhz, s->max_sm_mhz / 3);
}

// The launch gate holds a stream until released (or its timeout), so a timed loop runs back to
// back on the GPU however slowly the host enqueues it.
TEST(LaunchGate, HoldsTheStreamUntilReleasedAndTimesOut) {
  GS_REQUIRE_GPU();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t after;
  ASSERT_EQ(cudaEventCreate(&after), cudaSuccess);
  {
    gs::cuda::LaunchGate gate;
    gate.close(s, /*timeout_ms=*/5000.0);
    ASSERT_EQ(cudaEventRecord(after, s), cudaSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(cudaEventQuery(after), cudaErrorNotReady) << "work behind a closed gate must wait";
    gate.release();
    ASSERT_EQ(cudaEventSynchronize(after), cudaSuccess);
    EXPECT_FALSE(gate.timed_out());

    try {  // the scoped form opens the gate when an exception leaves its scope
      const gs::cuda::LaunchGate::Closed closed(gate, s, /*timeout_ms=*/5000.0);
      ASSERT_EQ(cudaEventRecord(after, s), cudaSuccess);
      throw std::runtime_error("leaves the scope");
    } catch (const std::runtime_error&) {
    }
    ASSERT_EQ(cudaEventSynchronize(after), cudaSuccess);
    EXPECT_FALSE(gate.timed_out()) << "released by the destructor, not by the timeout";

    gate.close(s, /*timeout_ms=*/2.0);  // never released: opens by itself
    ASSERT_EQ(cudaEventRecord(after, s), cudaSuccess);
    ASSERT_EQ(cudaEventSynchronize(after), cudaSuccess);
    EXPECT_TRUE(gate.timed_out());
  }
  cudaEventDestroy(after);
  cudaStreamDestroy(s);
}
