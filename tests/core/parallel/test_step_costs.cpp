// The parallel step's input (core/parallel/step_costs.hpp): from a measured run, the rank's GEMM
// cells as measured, and where the run timed its whole step (core/step), its embedding, loss and
// optimizer groups in place of the bytes-only estimates; predicted, the GEMMs at predict's published
// per-generation and per-format priors.
#include <gtest/gtest.h>

#include "core/model/model_config.hpp"
#include "core/parallel/layout_check.hpp"
#include "core/parallel/step_costs.hpp"
#include "core/run/runner.hpp"
#include "core/step/step_params.hpp"
#include "analysis/predict_test_data.hpp"
#include "test_util.hpp"

using namespace gs;

namespace {

// Every cell 1 ms.
class OneMsEngine : public gs::test::FakeEngineBase {
 public:
  Cell measure(const Gemm&, Precision, Mode, const std::string&) override {
    Stats s;
    s.mean_ms = s.median_ms = s.min_ms = s.max_ms = 1.0;
    s.iters = 10;
    return Cell::measured(s);
  }
};

const GpuSpec& gpu() {
  static const GpuSpec g = [] {
    GpuSpec x;
    x.key = "H100";
    x.arch = "hopper";
    x.cc_major = 9;
    x.tflops[static_cast<int>(PeakFormat::BF16)] = Sourced{989.4, "test"};
    x.tflops[static_cast<int>(PeakFormat::FP8)] = Sourced{1978.9, "test"};
    x.memory_bytes = Sourced{80e9, "test"};
    x.bandwidth_gbs = Sourced{3350, "test"};
    return x;
  }();
  return g;
}

struct MeasuredJob {
  ModelConfig c;
  ParallelLayout l;
  RunResult run;
};

MeasuredJob measured() {
  MeasuredJob s;
  s.c = find_preset("llama-3-8b").config;
  s.c.micro_batch_size = 1;
  parse_layout("tp2.dp4.mb1.gb8", s.l);
  check_layout(s.c, s.l);
  RunRequest q;
  q.plan = build_model_plan(rank_config(s.c, s.l));
  q.precisions = {Precision::BF16};
  q.modes = {Mode::Training};
  OneMsEngine e;
  s.run = run(e, q);
  return s;
}

StepGroupResult group(const std::string& name, StepCategory cat, double ms, double count = 1) {
  StepGroupResult g;
  g.group.name = name;
  g.group.category = cat;
  g.group.count = count;
  g.time = {ms, TimeSource::Measured, "test"};
  return g;
}

}  // namespace

TEST(StepCosts, MeasuredGemmsAreTheRunsCells) {
  const MeasuredJob s = measured();
  const StepCosts k = measured_step_costs(s.run, s.c, s.l, &gpu(), Precision::BF16, StepContextKind::TransformerEngine, {});
  EXPECT_EQ(k.source, CostSource::Measured);
  // Each linear of the layer: one cell per pass, 1 ms each.
  for (const auto& [op, cost] : k.dense.gemms) {
    EXPECT_GE(cost.fprop_ms, 1.0) << to_string(op);
    EXPECT_GE(cost.dgrad_ms, 1.0) << to_string(op);
  }
  EXPECT_GT(k.optimizer_ms_per_param, 0);
  EXPECT_NE(k.basis.find("the one-GPU step plans them, from their bytes"), std::string::npos) << k.basis;
}

TEST(StepCosts, TheRunsWholeStepGivesTheOnceParts) {
  MeasuredJob s = measured();
  StepBreakdown b;
  b.groups = {group("zero-grad", StepCategory::Optimizer, 0.5), group("embedding fwd", StepCategory::Other, 0.25),
              group("loss fwd", StepCategory::Loss, 3.0),        group("loss bwd", StepCategory::Loss, 4.0),
              group("embedding bwd", StepCategory::Other, 0.75), group("grad norm", StepCategory::Optimizer, 1.5),
              group("optimizer", StepCategory::Optimizer, 8.0)};
  StepResult step;
  step.timed = true;
  step.steps = {{b}};
  s.run.step = step;
  const StepCosts k = measured_step_costs(s.run, s.c, s.l, &gpu(), Precision::BF16, StepContextKind::TransformerEngine, {});
  EXPECT_DOUBLE_EQ(k.embed_fwd_ms, 0.25);
  EXPECT_DOUBLE_EQ(k.embed_bwd_ms, 0.75);
  EXPECT_DOUBLE_EQ(k.loss_fwd_ms, 3.0);
  EXPECT_DOUBLE_EQ(k.loss_bwd_ms, 4.0);
  EXPECT_DOUBLE_EQ(k.optimizer_ms_per_param, 10.0 / count_params(s.run.plan).total());
  EXPECT_NE(k.basis.find("from the run's whole step"), std::string::npos) << k.basis;
}

// Without a measured whole step, the embedding, loss and optimizer are the one-GPU step plan's
// groups (core/step/step_plan.hpp) for the rank, so the whole step's settings reach them: PyTorch's
// foreach AdamW moves more bytes than the fused kernel, an unfused loss more than a fused one.
TEST(StepCosts, PredictedOncePartsFollowTheWholeStepsSettings) {
  ModelConfig c = find_preset("llama-3-8b").config;
  c.micro_batch_size = 1;
  ParallelLayout l;
  parse_layout("tp2.dp4.mb1.gb8", l);
  check_layout(c, l);
  StepOptions fused, foreach_unfused;
  foreach_unfused.optimizer = OptimizerImpl::Foreach;
  foreach_unfused.loss = LossImpl::Unfused;
  const StepCosts a = predicted_step_costs(c, l, gpu(), Precision::BF16, StepContextKind::TransformerEngine, {}, fused);
  const StepCosts b =
      predicted_step_costs(c, l, gpu(), Precision::BF16, StepContextKind::TransformerEngine, {}, foreach_unfused);
  EXPECT_GT(a.optimizer_ms_per_param, 0);
  EXPECT_GT(b.optimizer_ms_per_param, 1.5 * a.optimizer_ms_per_param);
  EXPECT_GT(b.loss_fwd_ms + b.loss_bwd_ms, a.loss_fwd_ms + a.loss_bwd_ms);
  EXPECT_GT(a.embed_fwd_ms, 0);
  EXPECT_NE(a.basis.find("as the one-GPU step plans them"), std::string::npos) << a.basis;
}

namespace {

// The shipped priors (data/priors.json) with the points of one format on one generation scaled by
// `factor`: a prior that changed.
PriorDb scaled_priors(const std::string& format, const std::string& arch, double factor) {
  nlohmann::json d = read_json_file(std::string(GS_SOURCE_DIR) + "/data/priors.json", "priors file");
  for (nlohmann::json& p : d["points"]) {
    const GpuSpec& g = test::shipped_gpus().find(p["gpu"].get<std::string>());
    if (p["format"] == format && g.arch == arch) p["tflops"] = p["tflops"].get<double>() * factor;
  }
  return parse_priors(d, "scaled priors", test::shipped_gpus());
}

double gemm_ms(const StepCosts& s) { return s.dense.gemm_fwd_ms() + s.dense.gemm_bwd_ms(); }

struct PriorJob {
  ModelConfig c;
  ParallelLayout l;
};
PriorJob prior_job() {
  PriorJob j;
  j.c = find_preset("llama-3-8b").config;
  j.c.sequence_length = 2048;
  j.c.micro_batch_size = 1;
  parse_layout("dp8.mb1.gb64", j.l);
  check_layout(j.c, j.l);
  return j;
}

StepCosts predicted_on(const std::string& gpu_key, Precision p, const PriorDb* priors) {
  const PriorJob j = prior_job();
  return predicted_step_costs(j.c, j.l, test::shipped_gpus().find(gpu_key), p, StepContextKind::Eager, {}, {},
                              PredictData{priors, nullptr});
}

}  // namespace

// A GPU not at hand: the rank's GEMMs follow the published prior of their generation (A100: ampere's
// BF16 points). Scaling ampere's BF16 points scales the A100's GEMM time inversely; the H100's does
// not move (another generation), and without priors the GEMMs take the fallback fraction instead.
TEST(StepCosts, PredictedGemmsOfAnA100FollowAmperesPrior) {
  const PriorDb slower = scaled_priors("BF16", "ampere", 0.8);
  const StepCosts shipped = predicted_on("A100", Precision::BF16, &test::shipped_priors());
  const StepCosts changed = predicted_on("A100", Precision::BF16, &slower);
  const StepCosts none = predicted_on("A100", Precision::BF16, nullptr);
  EXPECT_NEAR(gemm_ms(changed) / gemm_ms(shipped), 1 / 0.8, 0.02);
  EXPECT_NE(gemm_ms(none), gemm_ms(shipped));
  // Ampere's published BF16 GEMMs reach 81-87% of the peak, above the 70% fallback: faster with them.
  EXPECT_LT(gemm_ms(shipped), gemm_ms(none));
  EXPECT_DOUBLE_EQ(gemm_ms(predicted_on("H100", Precision::BF16, &slower)),
                   gemm_ms(predicted_on("H100", Precision::BF16, &test::shipped_priors())));
  EXPECT_NE(shipped.basis.find("published prior of its format and size class on ampere"), std::string::npos) << shipped.basis;
  EXPECT_NE(none.basis.find("no priors given"), std::string::npos) << none.basis;
}

// FP8 on an H100: its GEMMs follow Hopper's FP8 prior, not BF16's: scaling the FP8 points moves the
// FP8 step's GEMMs and leaves the BF16 step's alone.
TEST(StepCosts, PredictedFp8GemmsOfAnH100FollowTheFp8Prior) {
  const PriorDb slower = scaled_priors("FP8", "hopper", 0.8);
  const StepCosts shipped = predicted_on("H100", Precision::FP8Current, &test::shipped_priors());
  const StepCosts changed = predicted_on("H100", Precision::FP8Current, &slower);
  EXPECT_GT(gemm_ms(changed), 1.1 * gemm_ms(shipped));
  EXPECT_LE(gemm_ms(changed), gemm_ms(shipped) / 0.8 * 1.001);
  EXPECT_DOUBLE_EQ(gemm_ms(predicted_on("H100", Precision::BF16, &slower)),
                   gemm_ms(predicted_on("H100", Precision::BF16, &test::shipped_priors())));
}
