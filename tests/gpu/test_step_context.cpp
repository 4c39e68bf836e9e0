// The step context on the GPU (cuda/stepwork/step_context_runner.hpp): the stand-in kernel streams and its
// calibration holds, and the work run between iterations adds up to each GEMM's share of the
// layer's modelled other work and measured attention.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"
#include "core/plan/step_model.hpp"
#include "core/providers/provider.hpp"
#include "cuda/attention/attention_cudnn.hpp"
#include "cuda/engine_cuda.hpp"
#include "cuda/stepwork/step_context_runner.hpp"
#include "cuda/stepwork/step_work.hpp"
#include "gpu_test_util.hpp"

namespace {

float elapsed_ms(cudaStream_t s, const std::function<void()>& f) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a, s);
  f();
  cudaEventRecord(b, s);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms;
}

gs::ModelConfig small_layer() {
  gs::ModelConfig c = gs::default_config();
  c.hidden_size = 2048;
  c.intermediate_size = 5632;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 4;
  c.head_dim = 128;
  c.num_hidden_layers = 1;
  c.micro_batch_size = 2;
  c.sequence_length = 2048;
  c.gated_mlp = true;
  c.vocab_size = 0;
  return c;
}

gs::DeviceInfo device() {
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, 0);
  gs::DeviceInfo d;
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.l2_bytes = p.l2CacheSize;
  return d;
}

// The stand-in streams through HBM (well above 300 GB/s on any datacenter GPU) and "2 ms of
// work" takes about 2 ms: the calibration is what turns modelled bytes into time.
TEST(StepContextGpu, StandInStreamsAndHoldsItsCalibration) {
  GS_REQUIRE_GPU();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  {
    gs::cuda::StepWork w(device().l2_bytes, s);
    EXPECT_GT(w.bytes_per_ms() * 1e-6, 300.0) << "GB/s";
    w.enqueue(2.0, s);  // warm
    const float ms = elapsed_ms(s, [&] { w.enqueue(2.0, s); });
    EXPECT_GT(ms, 2.0 * 0.75);
    EXPECT_LT(ms, 2.0 * 1.33);
    // The gather stand-in (MoE dispatch and combine) too.
    EXPECT_GT(w.gather_bytes_per_ms() * 1e-6, 300.0) << "GB/s";
    w.enqueue_gather(2.0, s);
    const float gms = elapsed_ms(s, [&] { w.enqueue_gather(2.0, s); });
    EXPECT_GT(gms, 2.0 * 0.75);
    EXPECT_LT(gms, 2.0 * 1.33);
  }
  cudaStreamDestroy(s);
}

// Over many iterations of one GEMM the context runs that GEMM's share (by FLOPs) of the layer's
// other work plus attention: whole attention passes, alternating, when their time is owed.
TEST(StepContextGpu, WorkBetweenIterationsIsTheGemmsShare) {
  GS_REQUIRE_GPU();
  const gs::Plan plan = gs::build_model_plan(small_layer());
  const gs::StepWorkModel model = gs::step_work_model(plan, gs::StepContextKind::TransformerEngine);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  {
    int clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    gs::cuda::StepContextRunner runner(model, 0, device(), clock_khz, s);
    const gs::StepContextInfo& info = runner.info();
    EXPECT_GT(info.other_ms, 0);
    EXPECT_GT(info.attention_fwd_ms, 0);
    EXPECT_GT(info.attention_bwd_ms, info.attention_fwd_ms);  // 2.5x the FLOPs
    std::string why;
    const bool cudnn = gs::cuda::CudnnAttention::create(model.attention, gs::cuda::AttentionDtype::BF16, 1, why) != nullptr;
    EXPECT_EQ(info.attention_measured, cudnn) << why << " | " << info.attention_source;
    // The MLP-up Fprop: its share of the layer's work, 200 times.
    const gs::Gemm* up = nullptr;
    for (const gs::Gemm& g : plan.gemms)
      if (g.pass == gs::Pass::Fprop && g.op == gs::Op::MlpUp) up = &g;
    ASSERT_NE(up, nullptr);
    const double share = up->flops() * 1e-9 / model.layer_gflops;
    const int n = 200;
    auto between = runner.between(*up, /*casts=*/false);
    ASSERT_TRUE(between);
    between();  // warm
    const float ms = elapsed_ms(s, [&] {
      for (int i = 0; i < n; ++i) between();
    });
    const double expect = n * share * (info.other_ms + info.attention_ms());
    EXPECT_GT(ms, 0.75 * expect) << "share " << share;
    EXPECT_LT(ms, 1.33 * expect + 2 * info.attention_bwd_ms) << "share " << share;
    // Pre-quantized FP8 cells add the casts.
    auto with_casts = runner.between(*up, /*casts=*/true);
    const float ms_casts = elapsed_ms(s, [&] {
      for (int i = 0; i < n; ++i) with_casts();
    });
    EXPECT_GT(ms_casts, ms + 0.5 * n * share * info.cast_ms);
  }
  cudaStreamDestroy(s);
}

// A measured cell with the default context records it (what ran, and how attention was timed).
TEST(StepContextGpu, EngineRecordsTheContext) {
  GS_REQUIRE_GPU();
  gs::EngineOptions o;
  o.timing.warmup = 2;
  o.timing.iters = 10;
  o.timing.gpu_warmup_s = 0;
  const gs::Plan plan = gs::build_model_plan(small_layer());
  o.timing.step_context_kind = gs::StepContextKind::Eager;
  o.step_model = gs::step_work_model(plan, gs::StepContextKind::Eager);
  std::string why;
  auto e = gs::cuda::make_engine(o, why);
  ASSERT_NE(e, nullptr) << why;
  EXPECT_FALSE(e->step_context());  // nothing measured yet
  const gs::Cell c = e->measure(plan.gemms.front(), gs::Precision::BF16, gs::Mode::PreQuantized, gs::kProviderCublasLt);
  ASSERT_TRUE(c.ok) << c.reason;
  const auto info = e->step_context();
  ASSERT_TRUE(info);
  EXPECT_EQ(info->kind, gs::StepContextKind::Eager);
  EXPECT_NEAR(info->efficiency, gs::kEagerRate, 1e-12);
  EXPECT_FALSE(info->attention_source.empty());
}

}  // namespace
