// The parallel step (core/parallel/parallel_step.hpp) on synthetic compute, against hand
// computations: one GPU, data parallelism with and without overlap, the pipeline's bubble, TP
// exposure and its overlap, memory and MFU.
#include <gtest/gtest.h>

#include <stdexcept>

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

namespace {

// Llama 3 8B's parameters on one rank without TP or PP, counted from its shapes: the FP8 linears
// (every layer's QKV, output projection and gated MLP) and the rest (the two norms of each layer,
// the embedding and the untied LM head over the vocabulary, 128256 = 1002 x 128, unpadded).
struct HandCount {
  double fp8_linear = 0, other = 0;
};
HandCount llama3_8b_by_hand() {
  const double h = 4096, kv = 8 * 128, ffn = 14336, layers = 32, vocab = 128256;
  HandCount n;
  n.fp8_linear = layers * (h * (h + 2 * kv) + h * h + 3 * h * ffn);
  n.other = layers * 2 * h + 2 * vocab * h;
  return n;
}

ParallelStepResult run_job(const ParallelJob& j, const StepCosts& costs) {
  check_layout(j.model, j.layout);
  const CollectiveModel net(cluster_presets().find("dgx-h100"));
  return simulate_parallel_step(j, costs, net, h100(), false);
}

ParallelJob job_of(const std::string& layout, bool fp8_param_gather) {
  ParallelJob job;
  job.model = small();
  job.layout = L(layout);
  job.compute_efficiency = 1.0;
  job.fp8_param_gather = fp8_param_gather;
  return job;
}

const StepCollective& dp_gather(const ParallelStepResult& r) {
  for (const StepCollective& x : r.collectives)
    if (x.group == "DP" && x.kind == CollKind::AllGather) return x;
  throw std::logic_error("no DP all-gather");
}

bool has_note(const ParallelStepResult& r, const std::string& text) {
  for (const std::string& n : r.notes)
    if (n.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

// Megatron's --fp8-param-gather under the distributed optimizer: the parameters gathered after the
// optimizer send 1 byte per FP8-linear parameter and 2 per other one; off, 2 bytes for all.
TEST(ParallelStep, Fp8ParamGatherSendsTheLinearsInFp8UnderZero1) {
  const HandCount n = llama3_8b_by_hand();
  const StepCosts fp8 = synthetic(Precision::FP8Current, 0.6);
  const ParallelStepResult on = run_job(job_of("dp16.gb16.zero1", true), fp8);
  const ParallelStepResult off = run_job(job_of("dp16.gb16.zero1", false), fp8);
  EXPECT_DOUBLE_EQ(dp_gather(on).bytes, 1 * n.fp8_linear + 2 * n.other);
  EXPECT_DOUBLE_EQ(dp_gather(off).bytes, 2 * (n.fp8_linear + n.other));  // off: BF16, as before the flag
  EXPECT_NE(dp_gather(on).what.find("--fp8-param-gather"), std::string::npos);
  EXPECT_LT(dp_gather(on).ms, dp_gather(off).ms);
  EXPECT_LE(part(on, TimeKind::ParamGather), part(off, TimeKind::ParamGather));
  EXPECT_TRUE(has_note(on, "FP8 parameter gathers (--fp8-param-gather)"));
  EXPECT_FALSE(has_note(off, "--fp8-param-gather"));
  // The gradients are what they were: FP32, 4 bytes a parameter.
  for (const StepCollective& x : on.collectives)
    if (x.group == "DP" && x.kind == CollKind::ReduceScatter) EXPECT_DOUBLE_EQ(x.bytes, 4 * (n.fp8_linear + n.other));
}

// ZeRO-3 (Megatron FSDP) and PyTorch FSDP: every unit's gathers send its FP8 linears at 1 byte, so
// one pass over the stage's units sends the FP8 linears' count fewer bytes.
TEST(ParallelStep, Fp8ParamGatherHalvesTheLinearsOfEveryShardedUnit) {
  const HandCount n = llama3_8b_by_hand();
  const StepCosts fp8 = synthetic(Precision::FP8Current, 0.6);
  for (const char* layout : {"dp8.gb8.zero3", "dp8.gb8.fsdp"}) {
    const ParallelStepResult on = run_job(job_of(layout, true), fp8);
    const ParallelStepResult off = run_job(job_of(layout, false), fp8);
    EXPECT_DOUBLE_EQ(dp_gather(off).bytes, 2 * (n.fp8_linear + n.other)) << layout;
    EXPECT_DOUBLE_EQ(dp_gather(on).bytes, 1 * n.fp8_linear + 2 * n.other) << layout;
    EXPECT_DOUBLE_EQ(dp_gather(on).per_step, 2 * 1.0) << layout;  // one micro-batch: its forward and its backward gather
    EXPECT_LT(dp_gather(on).ms, dp_gather(off).ms) << layout;
    EXPECT_LE(part(on, TimeKind::FsdpComm), part(off, TimeKind::FsdpComm)) << layout;
    EXPECT_LT(on.peak_memory_bytes, off.peak_memory_bytes) << layout;  // the gathered units in FP8
  }
}

// BF16 keeps nothing in FP8: the flag changes no number, and the step says so.
TEST(ParallelStep, Fp8ParamGatherChangesNothingInBf16AndSaysSo) {
  for (const char* layout : {"dp16.gb16.zero1", "dp8.gb8.zero3"}) {
    const ParallelStepResult on = run_job(job_of(layout, true), synthetic());
    const ParallelStepResult off = run_job(job_of(layout, false), synthetic());
    EXPECT_DOUBLE_EQ(on.step_ms, off.step_ms) << layout;
    EXPECT_DOUBLE_EQ(on.peak_memory_bytes, off.peak_memory_bytes) << layout;
    ASSERT_EQ(on.collectives.size(), off.collectives.size()) << layout;
    for (size_t i = 0; i < on.collectives.size(); ++i) {
      EXPECT_DOUBLE_EQ(on.collectives[i].bytes, off.collectives[i].bytes) << layout << " " << on.collectives[i].what;
      EXPECT_DOUBLE_EQ(on.collectives[i].ms, off.collectives[i].ms) << layout;
      EXPECT_EQ(on.collectives[i].what, off.collectives[i].what) << layout;
    }
    for (size_t s = 0; s < on.stages.size(); ++s) {
      EXPECT_EQ(on.stages[s].ms, off.stages[s].ms) << layout;
      EXPECT_DOUBLE_EQ(on.stages[s].memory.total_bytes(), off.stages[s].memory.total_bytes()) << layout;
    }
    EXPECT_TRUE(has_note(on, "--fp8-param-gather changes nothing in BF16")) << layout;
    EXPECT_EQ(on.notes.size(), off.notes.size() + 1) << layout;  // that note, nothing else
  }
  // NVFP4 (Megatron's own --fp4-param-gather) and ddp (no parameter gather) say so too.
  EXPECT_TRUE(has_note(run_job(job_of("dp16.gb16.zero1", true), synthetic(Precision::NVFP4, 0.5)), "under NVFP4"));
  EXPECT_TRUE(has_note(run_job(job_of("dp16.gb16.ddp", true), synthetic(Precision::FP8Current, 0.6)), "under ddp"));
}
