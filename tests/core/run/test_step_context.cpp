// --step-other-ms: the memory-bound work that follows each timed iteration (core/run/step_context.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/util/error.hpp"
#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"
#include "core/report/report.hpp"
#include "core/run/step_context.hpp"

namespace {

using gs::Gemm;
using gs::Plan;
using gs::Scope;

// The work given to every GEMM of one layer (all three passes) adds up to the per-layer time.
double layer_work(const Plan& plan, const gs::TimingConfig& t, bool moe_layer) {
  double sum = 0;
  for (const Gemm& g : plan.gemms) {
    const bool in = g.scope == Scope::Layer || g.scope == (moe_layer ? Scope::MoeLayer : Scope::DenseLayer);
    if (in) sum += gs::step_gap_ms(t, g);
  }
  return sum;
}

TEST(StepContext, DenseLayerWorkAddsUpToTheGivenTime) {
  const Plan plan = gs::build_model_plan(gs::default_config());
  gs::TimingConfig t;
  t.step_gap_ms_per_gflop = gs::step_gap_ms_per_gflop(plan, 2.5);
  EXPECT_NEAR(layer_work(plan, t, false), 2.5, 1e-9);
  // In proportion to FLOPs: MLP-up Fprop (4096 -> 16384) gets four times Attn-out Fprop's work.
  double up = 0, out = 0;
  for (const Gemm& g : plan.gemms) {
    if (g.pass != gs::Pass::Fprop) continue;
    if (g.op == gs::Op::MlpUp) up = gs::step_gap_ms(t, g);
    if (g.op == gs::Op::AttnOut) out = gs::step_gap_ms(t, g);
  }
  EXPECT_NEAR(up / out, 4.0, 1e-9);
  // The LM head (not a layer's GEMM) gets work at the same rate per FLOP.
  gs::ModelConfig c = gs::default_config();
  c.vocab_size = 32000;
  const Plan with_head = gs::build_model_plan(c);
  t.step_gap_ms_per_gflop = gs::step_gap_ms_per_gflop(with_head, 2.5);
  EXPECT_NEAR(layer_work(with_head, t, false), 2.5, 1e-9);
  for (const Gemm& g : with_head.gemms)
    if (g.scope == Scope::Model) EXPECT_NEAR(gs::step_gap_ms(t, g), t.step_gap_ms_per_gflop * g.flops() * 1e-9, 1e-12);
}

// A model with dense and MoE layers: the time is that of an average layer, so the layers' work
// summed over the model is layers x the given time.
TEST(StepContext, MixedModelWorkAveragesOverItsLayers) {
  const Plan plan = gs::build_model_plan(gs::find_preset("deepseek-v3").config);
  ASSERT_GT(plan.moe_layers(), 0);
  ASSERT_GT(plan.dense_layers(), 0);
  gs::TimingConfig t;
  t.step_gap_ms_per_gflop = gs::step_gap_ms_per_gflop(plan, 4.0);
  const double total = layer_work(plan, t, false) * static_cast<double>(plan.dense_layers()) +
                       layer_work(plan, t, true) * static_cast<double>(plan.moe_layers());
  EXPECT_NEAR(total / static_cast<double>(plan.layers()), 4.0, 1e-6);
}

TEST(StepContext, RefusesWhatHasNoStep) {
  const Plan shapes = gs::build_shapes_plan("1024x1024x1024");
  EXPECT_EQ(gs::step_gap_ms_per_gflop(shapes, 0), 0);  // the default is fine anywhere
  EXPECT_THROW(gs::step_gap_ms_per_gflop(shapes, 1.0), gs::UsageError);
  const Plan plan = gs::build_model_plan(gs::default_config());
  EXPECT_THROW(gs::step_gap_ms_per_gflop(plan, -1.0), gs::UsageError);
  EXPECT_THROW(gs::step_gap_ms_per_gflop(plan, NAN), gs::UsageError);
  EXPECT_THROW(gs::step_gap_ms_per_gflop(plan, gs::kMaxStepOtherMs * 2), gs::UsageError);
}

// Written to JSON only when set, read back exactly; older files read as back to back; a hostile
// value is refused naming the field.
TEST(StepContext, JsonRoundTripAndRefusals) {
  gs::RunResult r;
  r.plan = gs::build_model_plan(gs::default_config());
  r.dry_run = true;
  nlohmann::json j = gs::to_json(r);
  EXPECT_FALSE(j["timing"].contains("step_other_ms"));
  EXPECT_FALSE(gs::from_json(j).timing.step_context());
  r.timing.step_other_ms = 2.5;
  r.timing.step_gap_ms_per_gflop = gs::step_gap_ms_per_gflop(r.plan, 2.5);
  j = gs::to_json(r);
  const gs::RunResult back = gs::from_json(j);
  EXPECT_EQ(back.timing.step_other_ms, 2.5);
  EXPECT_EQ(back.timing.step_gap_ms_per_gflop, r.timing.step_gap_ms_per_gflop);
  j["timing"]["step_other_ms"] = -3;
  try {
    gs::from_json(j);
    FAIL() << "a negative step_other_ms was accepted";
  } catch (const gs::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("timing.step_other_ms"), std::string::npos) << e.what();
  }
}

}  // namespace
