// The parallel step (core/parallel/parallel_step.hpp) on synthetic compute, against hand
// computations: one GPU, data parallelism with and without overlap, the pipeline's bubble, TP
// exposure and its overlap, memory and MFU.
#include <gtest/gtest.h>

#include "core/model/model_config.hpp"
#include "core/parallel/cluster.hpp"
#include "core/parallel/layout_check.hpp"
#include "core/parallel/parallel_step.hpp"

using namespace gs;

namespace {

ParallelLayout L(const std::string& s) {
  ParallelLayout l;
  parse_layout(s, l);
  return l;
}

// Every layer: 1 ms of GEMMs forward (QKV and the MLP's down projection), 2 ms backward, nothing else.
StepCosts synthetic(Precision p = Precision::BF16, double scale = 1.0) {
  StepCosts s;
  s.precision = p;
  s.basis = "synthetic";
  for (LayerCost* lc : {&s.dense, &s.moe}) {
    lc->gemms[Op::Qkv] = {0.5 * scale, 0.5 * scale, 0.5 * scale};
    lc->gemms[Op::MlpDown] = {0.5 * scale, 0.5 * scale, 0.5 * scale};
  }
  s.optimizer_ms_per_param = 1e-9;
  return s;
}

ModelConfig small() {
  ModelConfig c = find_preset("llama-3-8b").config;
  c.micro_batch_size = 1;
  return c;
}

// A datasheet entry with what the step reads: the BF16 peak (MFU) and the memory size.
const GpuSpec& h100() {
  static const GpuSpec g = [] {
    GpuSpec x;
    x.key = "H100";
    x.tflops[static_cast<int>(PeakFormat::BF16)] = Sourced{989.4, "test"};
    x.memory_bytes = Sourced{80e9, "test"};
    return x;
  }();
  return g;
}

ParallelStepResult run(const ModelConfig& c, const ParallelLayout& l, const StepCosts& costs) {
  check_layout(c, l);
  ParallelJob job;
  job.model = c;
  job.layout = l;
  job.compute_efficiency = 1.0;  // the synthetic costs as they are
  const CollectiveModel net(cluster_presets().find("dgx-h100"));
  return simulate_parallel_step(job, costs, net, h100(), true);
}

double part(const ParallelStepResult& r, TimeKind k) { return r.critical().ms[static_cast<size_t>(k)]; }

}  // namespace

TEST(ParallelStep, OneGpuIsItsComputeAndOptimizer) {
  const ModelConfig c = small();
  const ParallelStepResult r = run(c, L("dp1.gb4"), synthetic());
  const double params = rank_memory(c, L("dp1.gb4"), 0).params;
  EXPECT_NEAR(r.step_ms, 4 * 32 * 3.0 + params * 1e-9, 1e-6);
  EXPECT_NEAR(part(r, TimeKind::Gemm), 4 * 32 * 3.0, 1e-9);
  EXPECT_DOUBLE_EQ(part(r, TimeKind::DpComm), 0);
  EXPECT_NEAR(r.tokens_per_s_per_gpu, 4.0 * c.sequence_length / (r.step_ms * 1e-3), 1e-6);
  double sum = 0;
  for (double x : r.critical().ms) sum += x;
  EXPECT_NEAR(sum, r.step_ms, 1e-6);  // the parts add up to the step
}

TEST(ParallelStep, DataParallelGradientsOverlapTheLastBackward) {
  const ModelConfig c = small();
  ParallelLayout l = L("dp16.gb16.zero1");
  l.overlap_grad_reduce = l.overlap_param_gather = false;
  const ParallelStepResult off = run(c, l, synthetic());
  l.overlap_grad_reduce = l.overlap_param_gather = true;
  const ParallelStepResult on = run(c, l, synthetic());
  EXPECT_GT(part(off, TimeKind::DpComm), 0);
  EXPECT_LT(part(on, TimeKind::DpComm), part(off, TimeKind::DpComm));
  EXPECT_LT(part(on, TimeKind::ParamGather), part(off, TimeKind::ParamGather));
  EXPECT_LT(on.step_ms, off.step_ms);
  // Without overlap the reduction is exposed whole: the reduce-scatter of the FP32 gradients.
  const StepCollective* rs = nullptr;
  for (const StepCollective& x : off.collectives)
    if (x.group == "DP" && x.kind == CollKind::ReduceScatter) rs = &x;
  ASSERT_NE(rs, nullptr);
  EXPECT_NEAR(part(off, TimeKind::DpComm), rs->ms, 1e-9);
}

TEST(ParallelStep, PipelineBubbleAsTheScheduleLeavesIt) {
  ModelConfig c = small();
  c.vocab_size = 0;  // no embedding or LM head: every stage does the same work
  const ParallelStepResult r = run(c, L("pp4.dp1.gb8"), synthetic());
  // The closed form (p-1)/(m+p-1), give or take the blocking sends inside the passes.
  EXPECT_NEAR(r.bubble_fraction, 3.0 / 11.0, 0.01);
  EXPECT_GT(part(r, TimeKind::Bubble), 0);
  const ParallelStepResult v = run(c, L("pp4.vpp2.dp1.gb8"), synthetic());
  EXPECT_LT(v.bubble_fraction, r.bubble_fraction);
}

TEST(ParallelStep, TensorParallelCollectivesAreExposedUnlessOverlapped) {
  const ModelConfig c = small();
  ParallelLayout l = L("tp8.dp1.gb2");
  const ParallelStepResult plain = run(c, l, synthetic());
  double expected = 0;
  for (const StepCollective& x : plain.collectives)
    if (x.group == "TP") expected += x.ms * x.per_step;
  EXPECT_GT(expected, 0);
  EXPECT_NEAR(part(plain, TimeKind::TpComm), expected, 1e-6);
  l.tp_comm_overlap = true;
  const ParallelStepResult overlapped = run(c, l, synthetic());
  EXPECT_LT(part(overlapped, TimeKind::TpComm), part(plain, TimeKind::TpComm));
}

TEST(ParallelStep, FasterComputeIsAFasterStep) {
  const ModelConfig c = small();
  const ParallelLayout l = L("tp2.pp2.dp4.gb32");
  const ParallelStepResult bf16 = run(c, l, synthetic());
  const ParallelStepResult fp8 = run(c, l, synthetic(Precision::FP8Current, 0.6));
  EXPECT_LT(fp8.step_ms, bf16.step_ms);
  EXPECT_GT(fp8.step_ms, 0.6 * bf16.step_ms);  // communication does not shrink with the GEMMs
}

TEST(ParallelStep, ModelFlopsAreTheUnshardedPlansAndAttention) {
  const ModelConfig c = small();
  const ParallelLayout l = L("tp4.dp2.gb8");
  ModelConfig one = c;
  one.tensor_parallel = 1;
  const double gemms = plan_flops(build_model_plan(one)).full_model(c.num_hidden_layers);
  // Causal attention: 4 s^2 h fwd / 2, backward 2.5x.
  const double attn = 3.5 * 2.0 * c.sequence_length * static_cast<double>(c.sequence_length) * 32 * 128 * c.num_hidden_layers;
  EXPECT_NEAR(model_flops_per_step(c, l), 8 * (gemms + attn), 1e-6 * 8 * (gemms + attn));
}

TEST(ParallelStep, ShardedParametersGatherPerLayer) {
  const ModelConfig c = small();
  ParallelLayout l = L("dp8.gb8.fsdp");
  const ParallelStepResult r = run(c, l, synthetic());
  EXPECT_GE(part(r, TimeKind::FsdpComm), 0);
  EXPECT_DOUBLE_EQ(part(r, TimeKind::ParamGather), 0);  // no gather after the optimizer
  EXPECT_LT(r.peak_memory_bytes, run(c, L("dp8.gb8.zero1"), synthetic()).peak_memory_bytes);
}

TEST(ParallelStep, ContentionComesFromTheMeasuredOverlap) {
  CommResult r;
  EXPECT_DOUBLE_EQ(contention_from(r).compute_slowdown, ContentionModel{}.compute_slowdown);  // nothing timed: default
  CommMeasurement a, b;
  a.overlap = OverlapTiming{2.0, 2.2, 1.0, 2.5};      // GEMM +10%
  b.overlap_fp8 = OverlapTiming{1.0, 1.3, 1.0, 1.4};  // GEMM +30%
  r.measured = {a, b};
  const ContentionModel c = contention_from(r);
  EXPECT_NEAR(c.compute_slowdown, 0.2, 1e-12);
  EXPECT_NE(c.source.find("measured beside 2 collectives"), std::string::npos);
  // The measured slowdown feeds the step: more contention, a longer step where DP overlaps backward.
  const ModelConfig m = small();
  ParallelLayout l = L("dp16.gb16.zero1");
  ParallelJob job;
  job.model = m;
  job.layout = l;
  job.compute_efficiency = 1.0;
  const CollectiveModel net(cluster_presets().find("dgx-h100"));
  const double base = simulate_parallel_step(job, synthetic(), net, h100()).step_ms;
  job.contention.compute_slowdown = 0.5;
  EXPECT_GT(simulate_parallel_step(job, synthetic(), net, h100()).step_ms, base);
}

TEST(ParallelStep, SustainedRateScalesPredictedComputeOnly) {
  ParallelJob job;
  StepCosts costs;
  costs.source = CostSource::Predicted;
  EXPECT_DOUBLE_EQ(sustained_rate(job, costs), kStepComputeEfficiency);
  costs.source = CostSource::Measured;
  EXPECT_DOUBLE_EQ(sustained_rate(job, costs), 1.0);
  job.compute_efficiency = 0.5;  // --step-efficiency wins for either source
  EXPECT_DOUBLE_EQ(sustained_rate(job, costs), 0.5);
  costs.source = CostSource::Predicted;
  EXPECT_DOUBLE_EQ(sustained_rate(job, costs), 0.5);
  // ... and it reaches the step: the same synthetic costs, measured, run faster than predicted.
  const ModelConfig c = small();
  ParallelJob a;
  a.model = c;
  a.layout = L("dp1.gb4");
  check_layout(c, a.layout);
  const CollectiveModel net(cluster_presets().find("dgx-h100"));
  StepCosts pred = synthetic(), meas = synthetic();
  pred.source = CostSource::Predicted;
  meas.source = CostSource::Measured;
  const double tp = simulate_parallel_step(a, pred, net, h100(), false).step_ms;
  const double tm = simulate_parallel_step(a, meas, net, h100(), false).step_ms;
  EXPECT_GT(tp, tm * 1.1);
}

TEST(ParallelStep, EagerTensorParallelAndFsdpAreSaidToBeLowerBounds) {
  const ModelConfig c = small();
  const CollectiveModel net(cluster_presets().find("dgx-h100"));
  auto noted = [&](const char* layout, StepContextKind fw) {
    ParallelJob job;
    job.model = c;
    job.layout = L(layout);
    job.framework = fw;
    check_layout(c, job.layout);
    for (const std::string& n : simulate_parallel_step(job, synthetic(), net, h100(), false).notes)
      if (n.find("lower bound for eager torch.distributed") != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(noted("tp2.gb4", StepContextKind::Eager));
  EXPECT_TRUE(noted("dp2.gb4.fsdp", StepContextKind::Eager));
  EXPECT_FALSE(noted("dp2.gb4.ddp", StepContextKind::Eager));
  EXPECT_FALSE(noted("tp2.gb4", StepContextKind::TransformerEngine));
}
