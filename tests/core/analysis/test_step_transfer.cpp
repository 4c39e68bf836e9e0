// The step hook of predict (core/analysis/step_transfer.hpp): attention by BF16 peak and attention
// efficiency, memory-bound work by bandwidth, the rest carried (CPU only).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "core/analysis/predict.hpp"
#include "core/analysis/step_transfer.hpp"
#include "core/model/model_config.hpp"
#include "core/report/report.hpp"
#include "core/run/runner.hpp"
#include "core/util/error.hpp"
#include "predict_test_data.hpp"
#include "test_util.hpp"

using namespace gs;

namespace {
const GpuDb& db() { return test::shipped_gpus(); }
}  // namespace

TEST(StepTransfer, EachPartByItsOwnRoofline) {
  const StepParts h100{28.0, 6.0, 4.0, 1.0};
  const GpuSpec &s = db().find("H100"), &t = db().find("B300");
  const StepTransfer x = transfer_step(h100, 14.0, s, t, 1e15);
  EXPECT_NEAR(x.attention_factor, 989.4 / 2250, 1e-9);
  EXPECT_NEAR(x.memory_factor, 3350.0 / 8000, 1e-9);
  EXPECT_NEAR(x.target.attention_ms, 6.0 * 989.4 / 2250, 1e-9);
  EXPECT_NEAR(x.target.memory_ms, 4.0 * 3350.0 / 8000, 1e-9);
  EXPECT_EQ(x.target.unscaled_ms, 1.0);
  EXPECT_EQ(x.target.gemm_ms, 14.0);
  EXPECT_NEAR(x.mfu, 1e15 / (x.target.total() * 1e-3) / 2250e12, 1e-12);
  EXPECT_NE(x.basis.find("no attention prior"), std::string::npos) << x.basis;
  // With attention efficiencies: the target's lower efficiency lengthens its attention.
  const StepTransfer y = transfer_step(h100, 14.0, s, t, 1e15, 0.75, 0.60);
  EXPECT_NEAR(y.attention_factor, (989.4 * 0.75) / (2250 * 0.60), 1e-9);
}

TEST(StepTransfer, RefusesAGpuWithoutABf16Peak) {
  GpuSpec t = db().find("B300");
  t.tflops[static_cast<int>(PeakFormat::BF16)].reset();
  EXPECT_THROW(transfer_step(StepParts{1, 1, 1, 0}, 1, db().find("H100"), t, 1e12), UsageError);
}

namespace {
// A measured run with a whole step: the tests' fake step engine, every step kernel 2 ms (the
// launch latency 4 us).
class StepFake : public test::FakeStepEngine {
 public:
  Cell measure_step_kernel(const StepKernelSpec& s) override {
    return Cell::measured(summarize({s.kind == StepKernelKind::LaunchLatency ? 0.004 : 2.0}));
  }
};

RunResult measured_step_run() {
  RunRequest req;
  ModelConfig c = find_preset("llama-3-8b").config;
  c.num_hidden_layers = 2;
  req.plan = build_model_plan(c);
  req.precisions = {Precision::BF16, Precision::FP8Current};
  req.modes = {Mode::Training};
  req.options.timing.gpu_warmup_s = 0;
  req.options.timing.step_context_kind = StepContextKind::TransformerEngine;
  StepFake engine;
  return run(engine, req);
}

}  // namespace

// predict carries the run's whole step to the target: attention by the BF16 peaks, the memory-bound
// work and the step kernels by the bandwidths, the launch latency as measured; every measured part
// becomes predicted, the JSON reads back to the same step.
TEST(StepTransfer, PredictCarriesTheWholeStep) {
  const RunResult r = measured_step_run();
  ASSERT_TRUE(r.step && r.step->timed);
  const GpuSpec &s = db().find("H100"), &t = db().find("B300");
  const Prediction pr = predict_from_run(r, "r.json", s, t);
  ASSERT_TRUE(pr.result.step);
  const StepBreakdown& src = r.step->steps[0][0];
  const StepBreakdown& dst = pr.result.step->steps[0][0];
  ASSERT_TRUE(src.step_ms && dst.step_ms);
  const double att = 989.4 / 2250, mem = 3350.0 / 8000;
  EXPECT_NEAR(*test::step_group(dst, "attention fwd").time.ms, *test::step_group(src, "attention fwd").time.ms * att, 1e-9);
  EXPECT_NEAR(*test::step_group(dst, "optimizer").time.ms, *test::step_group(src, "optimizer").time.ms * mem, 1e-9);
  EXPECT_NEAR(*test::step_group(dst, "other fwd").time.ms, *test::step_group(src, "other fwd").time.ms * mem, 1e-9);
  EXPECT_EQ(test::step_group(dst, "attention fwd").time.source, TimeSource::Predicted);
  EXPECT_EQ(test::step_group(dst, "optimizer").time.source, TimeSource::Predicted);
  EXPECT_EQ(test::step_group(dst, "GEMMs fwd, dense layer").time.source, TimeSource::Predicted);
  EXPECT_EQ(dst.host.launch_us, src.host.launch_us);  // the host is not the GPU's
  EXPECT_LT(*dst.step_ms, *src.step_ms);              // B300 is faster than H100 in every roof
  ASSERT_TRUE(dst.mfu);
  const std::string text = render_prediction_text(pr);
  EXPECT_NE(text.find("Whole training step"), std::string::npos) << text.substr(0, 400);
  const RunResult back = from_json(prediction_json(pr), "p.json");
  ASSERT_TRUE(back.step);
  EXPECT_NEAR(*back.step->steps[0][0].step_ms, *dst.step_ms, 1e-9);
  // A run without a step (a shapes run) predicts none.
  RunResult shapes = r;
  shapes.step.reset();
  EXPECT_FALSE(predict_from_run(shapes, "r.json", s, t).result.step);
}
