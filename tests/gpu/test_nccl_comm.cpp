// The NCCL engine on 2 GPUs: every collective of a TP/SP, an EP and a DP layout completes, at a
// bus bandwidth of the right order (NVLink: tens to hundreds of GB/s), FP8 gathers faster than
// BF16 ones, and the overlap figures are consistent. Skips (saying why) with fewer than 2 GPUs,
// in a build without nccl.h, or without libnccl.so.2 (a failure under GS_EXPECT_GPU=1).
#include <gtest/gtest.h>

#include <iostream>

#include "core/util/error.hpp"

#include "core/node/collectives.hpp"
#include "core/model/model_config.hpp"
#include "cuda/common/device_count.hpp"
#include "cuda/comm/nccl_comm.hpp"
#include "gpu_test_util.hpp"

using namespace gs;

namespace {

// Skips where NCCL is genuinely absent: a build without nccl.h (said); where the hardware is:
// fewer than two GPUs; and without libnccl.so.2 here (said; a failure under GS_EXPECT_GPU=1). With
// NCCL and two GPUs there, an engine that cannot be made fails the test.
#define GS_REQUIRE_TWO_GPUS_AND_NCCL(engine)                                                        \
  GS_REQUIRE_GPU();                                                                                \
  if (!cuda::nccl_built()) GTEST_SKIP() << "not built: " << cuda::nccl_unavailable_reason();      \
  if (std::string gs_n_why_; cuda::visible_device_count(gs_n_why_) < 2)                            \
    GTEST_SKIP() << "needs 2 GPUs: " << cuda::visible_device_count(gs_n_why_) << " GPU visible";  \
  GS_REQUIRE_RUNTIME(cuda::nccl_unavailable_reason());                                             \
  std::string engine##_why;                                                                        \
  std::unique_ptr<CommEngine> engine = cuda::make_nccl_engine(engine##_why);                       \
  ASSERT_NE(engine, nullptr) << "NCCL and 2 GPUs are there, yet no engine: " << engine##_why

}  // namespace

TEST(NcclComm, TensorSequenceParallelCollectives) {
  GS_REQUIRE_TWO_GPUS_AND_NCCL(engine);
  ModelConfig c = find_preset("llama-3-8b").config;
  c.tensor_parallel = 2;
  c.micro_batch_size = 1;  // 8192 x 4096: 64 MiB per gather in BF16
  const Plan p = build_model_plan(c);
  const CommLayout l = layout_for(p, 0, true, 1, CommType::Fp32);
  const CommResult r = measure_collectives(p, l, *engine, 3, 10);
  ASSERT_EQ(r.collectives.size(), 10u);
  for (const CommMeasurement& m : r.measured) {
    const Collective& x = r.collectives[m.index];
    SCOPED_TRACE(x.what);
    EXPECT_EQ(m.timing.iterations, 10);
    EXPECT_GT(m.timing.ms, 0.0);
    const double bw = x.bus_bandwidth_gbs(m.type, m.timing.ms);
    EXPECT_GT(bw, 10.0);    // NVLink or PCIe: not a stall
    EXPECT_LT(bw, 2000.0);  // and not faster than any link
    // Every TP/SP collective has its GEMM: timed beside the BF16 GEMM in its BF16-recipe type and
    // beside the FP8 GEMM in its FP8-recipe type (one measurement holds both where they match).
    for (const OverlapGemm k : {OverlapGemm::Bf16, OverlapGemm::Fp8}) {
      if (m.type != (k == OverlapGemm::Fp8 ? x.type_fp8 : x.type_bf16)) continue;
      SCOPED_TRACE(to_string(k));
      const std::optional<OverlapTiming>& o = m.beside(k);
      ASSERT_TRUE(o.has_value());
      EXPECT_GT(o->gemm_alone_ms, 0.0);
      EXPECT_GE(o->both_ms, o->gemm_overlap_ms * 0.999);
    }
  }
  // The FP8 all-gather moves half the bytes of the BF16 one, and beside it runs the FP8 GEMM, faster
  // than the BF16 one of the same shape (QKV Fprop, 8192 x 4096 x 3072).
  const CommMeasurement* b16 = r.find(0, CommType::Bf16);
  const CommMeasurement* b8 = r.find(0, CommType::Fp8);
  ASSERT_TRUE(b16 && b8 && b16->overlap && b8->overlap_fp8);
  EXPECT_LT(b8->timing.ms, b16->timing.ms);
  EXPECT_LT(b8->overlap_fp8->gemm_alone_ms, b16->overlap->gemm_alone_ms);
  EXPECT_FALSE(b16->overlap_fp8.has_value());
  EXPECT_FALSE(b8->overlap.has_value());
  std::cout << render_comm_text(r, p);
}

TEST(NcclComm, ExpertAllToAllvAndDataParallel) {
  GS_REQUIRE_TWO_GPUS_AND_NCCL(engine);
  ModelConfig c = find_preset("mixtral-8x7b").config;
  c.moe.expert_parallel = 2;
  c.moe.routing = "hot:0.6";  // uneven: one rank receives more rows
  c.num_hidden_layers = 2;
  const Plan p = build_model_plan(c);
  const CommLayout l = layout_for(p, 0, true, 3, CommType::Bf16);
  const CommResult r = measure_collectives(p, l, *engine, 2, 5, false);
  int a2a = 0;
  for (const CommMeasurement& m : r.measured) {
    const Collective& x = r.collectives[m.index];
    SCOPED_TRACE(x.what);
    EXPECT_GT(m.timing.ms, 0.0);
    if (x.kind == CollKind::AllToAll) {
      ++a2a;
      EXPECT_NE(x.rows_received(0), x.rows_received(1));
    }
  }
  EXPECT_EQ(a2a, 5);  // dispatch in BF16 and FP8, combine, the two backward
  std::cout << render_comm_text(r, p);
}

TEST(NcclComm, TooManyRanksRefused) {
  GS_REQUIRE_TWO_GPUS_AND_NCCL(engine);
  ModelConfig c = find_preset("llama-3-8b").config;
  c.tensor_parallel = static_cast<int64_t>(engine->gpus()) * 2;
  const Plan p = build_model_plan(c);
  EXPECT_THROW(measure_collectives(p, layout_for(p, 0, true, 1, CommType::Fp32), *engine, 1, 1), UsageError);
}
