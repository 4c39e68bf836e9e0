// The whole step of a run (core/run/step_run.hpp) on fake engines: which times are measured, which
// modelled, the JSON round trip, the report's lead block and the dry run's plan.
#include "core/run/step_run.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/model/model_config.hpp"
#include "core/report/report.hpp"
#include "core/report/report_whole_step.hpp"
#include "core/run/runner.hpp"
#include "core/util/error.hpp"
#include "test_util.hpp"

namespace gs {
namespace {

Plan plan3() {
  ModelConfig c = find_preset("llama-3-8b").config;
  c.num_hidden_layers = 3;
  c.micro_batch_size = 1;
  c.sequence_length = 2048;
  return build_model_plan(c);
}

// Every GEMM 1 ms; the tests' fake step context (test::fake_step_context()); the optimizer and the
// launch latency measured, every other step kernel N/A.
class StepEngine : public test::FakeEngineBase {
 public:
  explicit StepEngine(bool context = true) : context_(context) {}
  Cell measure(const Gemm&, Precision, Mode, const std::string&) override { return Cell::measured(summarize({1.0})); }
  std::optional<StepContextInfo> step_context() const override {
    return context_ ? std::optional<StepContextInfo>(test::fake_step_context()) : std::nullopt;
  }
  Cell measure_step_kernel(const StepKernelSpec& s) override {
    specs.push_back(s);
    if (s.kind == StepKernelKind::AdamW) return Cell::measured(summarize({10.0}));
    if (s.kind == StepKernelKind::LaunchLatency) return Cell::measured(summarize({0.004}));
    return Cell::na("fake engine: no such kernel");
  }
  DeviceInfo device_info() const override {
    DeviceInfo d = FakeEngineBase::device_info();
    d.memory_bytes = int64_t{141} * 1000 * 1000 * 1000;
    return d;
  }
  std::vector<StepKernelSpec> specs;

 private:
  bool context_;
};

RunRequest request() {
  RunRequest req;
  req.plan = plan3();
  req.precisions = {Precision::BF16, Precision::FP8Current};
  req.modes = {Mode::Training};
  req.options.timing.gpu_warmup_s = 0;
  req.options.timing.step_context_kind = StepContextKind::TransformerEngine;
  return req;
}

using test::step_group;

TEST(StepRun, MeasuredAndModelledParts) {
  StepEngine engine;
  const RunResult r = run(engine, request());
  ASSERT_TRUE(r.step);
  EXPECT_TRUE(r.step->timed);
  // Each step kernel once: zero-grad, embedding fwd/bwd, loss fwd/bwd, grad norm, AdamW, launch latency.
  EXPECT_EQ(engine.specs.size(), 8u);
  const StepBreakdown& b = r.step->steps[0][0];
  ASSERT_TRUE(b.step_ms) << (b.unknown.empty() ? "" : b.unknown[0]);
  EXPECT_EQ(step_group(b, "optimizer").time.source, TimeSource::Measured);
  EXPECT_DOUBLE_EQ(*step_group(b, "optimizer").time.ms, 10.0);
  EXPECT_EQ(step_group(b, "attention fwd").time.source, TimeSource::Measured);
  const StepContextInfo ctx = test::fake_step_context();
  EXPECT_DOUBLE_EQ(*step_group(b, "attention bwd").total_ms(), 3 * ctx.attention_bwd_ms);
  // The GEMMs: 4 Fprop cells of 1 ms per layer, 8 backward; the LM head 1 + 2.
  EXPECT_DOUBLE_EQ(*step_group(b, "GEMMs fwd, dense layer").time.ms, 4.0);
  EXPECT_DOUBLE_EQ(*step_group(b, "GEMMs bwd, dense layer").time.ms, 8.0);
  EXPECT_DOUBLE_EQ(*step_group(b, "LM head bwd").time.ms, 2.0);
  // Not measured by the engine: its bytes at the stand-in's rate, labelled modelled, with the reason.
  const StepGroupResult& loss = step_group(b, "loss fwd");
  EXPECT_EQ(loss.time.source, TimeSource::Modelled);
  EXPECT_DOUBLE_EQ(*loss.time.ms, loss.group.bytes / (ctx.stream_gb_per_s * 1e6 * ctx.efficiency));
  EXPECT_NE(loss.time.how.find("fake engine"), std::string::npos) << loss.time.how;
  EXPECT_EQ(step_group(b, "final norm fwd").time.source, TimeSource::Modelled);
  EXPECT_DOUBLE_EQ(*step_group(b, "other fwd").time.ms + *step_group(b, "other bwd").time.ms, ctx.other_ms);
  // The host: the measured launch latency (4 us) plus the eager default overhead.
  EXPECT_TRUE(b.host.launch_measured);
  EXPECT_DOUBLE_EQ(b.host.launch_us, 4.0);
  EXPECT_TRUE(b.memory.device_bytes);
  // The FP8 step: the same groups plus FP8 scale kernels, its own GEMM times.
  const StepBreakdown& f = r.step->steps[0][1];
  EXPECT_NE(std::find_if(f.groups.begin(), f.groups.end(),
                         [](const StepGroupResult& g) { return g.group.name == "FP8 scales from amax"; }),
            f.groups.end());
  // The report leads with the step block and says what is measured and what modelled.
  const std::string text = render_text(r);
  EXPECT_EQ(text.find("Whole training step on Fake GPU"), 0u) << text.substr(0, 300);
  EXPECT_NE(text.find("GEMMs measured; attention measured"), std::string::npos);
  EXPECT_NE(text.find("optimizer modelled and measured"), std::string::npos);  // zero-grad, grad norm N/A here
  EXPECT_NE(text.find("loss modelled"), std::string::npos);
  EXPECT_NE(text.find("MFU/HFU: N/A"), std::string::npos);
  EXPECT_NE(text.find("Whole step, group by group"), std::string::npos);
  test::expect_markdown_rows_in_text(render_markdown(r), text, {10, 10});
}

// Under a PyTorch step context the stand-ins stand for PyTorch's own kernels: their measured time
// at kPyTorchKernelRate, labelled modelled and saying so; Transformer Engine's stays as measured.
TEST(StepRun, PyTorchKernelsAtTheirRate) {
  StepEngine engine;
  RunRequest req = request();
  req.options.timing.step_context_kind = StepContextKind::Eager;
  const RunResult r = run(engine, req);
  ASSERT_TRUE(r.step);
  const StepBreakdown& b = r.step->steps[0][0];
  const StepGroupResult& opt = step_group(b, "optimizer");
  EXPECT_EQ(opt.time.source, TimeSource::Modelled);
  EXPECT_DOUBLE_EQ(*opt.time.ms, 10.0 / kPyTorchKernelRate);
  EXPECT_NE(opt.time.how.find("stand-in measured on this GPU"), std::string::npos) << opt.time.how;
  StepKernelSpec fused_loss{StepKernelKind::CrossEntropyFwd, 0, 1, 8, 128, 0, ParamStorage::Bf16, true};
  EXPECT_DOUBLE_EQ(step_kernel_rate(fused_loss, StepContextKind::Compiled), 1.0);
  fused_loss.fused = false;
  EXPECT_DOUBLE_EQ(step_kernel_rate(fused_loss, StepContextKind::Eager), kPyTorchKernelRate);
  EXPECT_DOUBLE_EQ(step_kernel_rate(fused_loss, StepContextKind::TransformerEngine), 1.0);
  EXPECT_DOUBLE_EQ(step_kernel_rate(StepKernelSpec{}, StepContextKind::Eager), 1.0);  // launch latency
}

// Each group's step kernel is looked up by its whole spec: with every kernel measured at its own
// time and, before each, a kernel that reads alike (describe() rounds the counts) at another, every
// group gets its own kernel's time. A kernel the engine did not run is modelled from its bytes, as
// when it ran and failed, and never takes a look-alike's time.
TEST(StepRun, EachGroupFindsItsOwnKernel) {
  StepEngine engine;
  RunResult r = run(engine, request());
  ASSERT_TRUE(r.step);
  std::vector<StepKernelRun> own = r.step->kernels, with_lookalikes;
  for (size_t i = 0; i < own.size(); ++i) {
    own[i].ok = true;
    own[i].mean_ms = 1.0 + static_cast<double>(i);
    own[i].reason.clear();
    StepKernelRun alike = own[i];
    alike.spec.elements += 1, alike.spec.rows += 1;  // reads alike in describe() for the multi-tensor kernels
    alike.mean_ms = 1000.0 + static_cast<double>(i);
    with_lookalikes.push_back(alike);
    with_lookalikes.push_back(own[i]);
  }
  const auto adamw = std::find_if(own.begin(), own.end(), [](const StepKernelRun& k) { return k.spec.kind == StepKernelKind::AdamW; });
  ASSERT_NE(adamw, own.end());
  StepKernelSpec alike = adamw->spec;
  alike.elements += 1;
  ASSERT_EQ(alike.describe(), adamw->spec.describe());  // the case a lookup by describe() got wrong
  const auto time_of = [&](const StepKernelSpec& s) {
    for (const StepKernelRun& k : own)
      if (k.spec.key() == s.key()) return k.mean_ms;
    ADD_FAILURE() << "no kernel " << s.describe();
    return 0.0;
  };
  const StepResult step = step_from_result(r, with_lookalikes, true);
  int kernel_groups = 0;
  for (const StepGroupResult& g : step.steps[0][0].groups) {
    if (g.group.basis != TimeBasis::StepKernel || !g.group.kernel) continue;
    ++kernel_groups;
    ASSERT_TRUE(g.time.ms) << g.group.name;
    EXPECT_EQ(g.time.source, TimeSource::Measured) << g.group.name;
    EXPECT_DOUBLE_EQ(*g.time.ms, time_of(*g.group.kernel)) << g.group.name;
  }
  EXPECT_GE(kernel_groups, 7);  // zero-grad, embedding fwd/bwd, loss fwd/bwd, grad norm, optimizer
  EXPECT_DOUBLE_EQ(step.steps[0][0].host.launch_us, time_of(StepKernelSpec{}) * 1e3);
  // The optimizer's kernel missing, its look-alike there: modelled from its bytes, saying so.
  std::vector<StepKernelRun> missing;
  for (const StepKernelRun& k : with_lookalikes)
    if (k.spec.key() != adamw->spec.key()) missing.push_back(k);
  const StepResult without_optimizer = step_from_result(r, missing, true);
  const StepGroupResult& opt = step_group(without_optimizer.steps[0][0], "optimizer");
  const StepContextInfo ctx = test::fake_step_context();
  EXPECT_EQ(opt.time.source, TimeSource::Modelled);
  EXPECT_DOUBLE_EQ(*opt.time.ms, opt.group.bytes / (ctx.stream_gb_per_s * 1e6 * ctx.efficiency));
  EXPECT_EQ(opt.time.how.find("measured"), std::string::npos) << opt.time.how;
  // measure_step asked the engine for each distinct kernel once.
  std::set<std::string> asked;
  for (const StepKernelSpec& s : engine.specs) asked.insert(s.describe());
  EXPECT_EQ(asked.size(), engine.specs.size());
}

TEST(StepRun, JsonRoundTripAndPeak) {
  StepEngine engine;
  RunResult r = run(engine, request());
  set_step_peak(*r.step, {989, "H100 datasheet"});
  ASSERT_TRUE(r.step->steps[0][0].mfu);
  const nlohmann::json j = to_json(r);
  ASSERT_TRUE(j.contains("step"));
  EXPECT_EQ(j["step_options"]["recompute"], "none");
  EXPECT_EQ(j["step_options"]["grad_clip"], true);
  const nlohmann::json& bf16 = j["step"]["modes"]["training"]["BF16"];
  EXPECT_DOUBLE_EQ(bf16["step_ms"].get<double>(), *r.step->steps[0][0].step_ms);
  EXPECT_FALSE(bf16["breakdown"]["gemm"].is_null());
  EXPECT_FALSE(j["step"]["modes"]["training"]["FP8Current"]["speedup_vs_bf16"]["gemm"].is_null());
  const RunResult back = from_json(j, "r.json");
  ASSERT_TRUE(back.step);
  EXPECT_DOUBLE_EQ(*back.step->steps[0][0].step_ms, *r.step->steps[0][0].step_ms);
  EXPECT_DOUBLE_EQ(*back.step->steps[0][0].mfu, *r.step->steps[0][0].mfu);
  EXPECT_EQ(render_text(back), render_text(r));
  // A broken record is refused with the field's name.
  nlohmann::json bad = j;
  bad["step"]["kernels"][0]["kind"] = "warp-drive";
  try {
    from_json(bad, "r.json");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("step.kernels[0].kind"), std::string::npos) << e.what();
  }
  bad = j;
  bad["step"]["kernels"][0]["status"] = "ok";
  bad["step"]["kernels"][0]["mean_ms"] = -1;
  EXPECT_THROW(from_json(bad, "r.json"), UsageError);
  // A step block listing more kernels than a step measures is refused with the bound named (each
  // is looked up per group, mode and precision by every command that reads the file).
  bad = j;
  while (bad["step"]["kernels"].size() <= 1024) bad["step"]["kernels"].push_back(j["step"]["kernels"][0]);
  try {
    from_json(bad, "r.json");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("more than the 1024"), std::string::npos) << e.what();
  }
}

TEST(StepRun, WithoutAContextTheStepIsUnknownNotGuessed) {
  StepEngine engine(false);
  const RunResult r = run(engine, request());
  ASSERT_TRUE(r.step);
  const StepBreakdown& b = r.step->steps[0][0];
  EXPECT_FALSE(b.step_ms);
  EXPECT_EQ(step_group(b, "GEMMs fwd, dense layer").time.source, TimeSource::Measured);
  EXPECT_EQ(step_group(b, "attention fwd").time.source, TimeSource::Unknown);
  EXPECT_EQ(step_group(b, "optimizer").time.source, TimeSource::Measured);
  const std::string text = render_text(r);
  EXPECT_NE(text.find("Step time unknown"), std::string::npos);
  EXPECT_THROW(step_trace_text(r), UsageError);
}

TEST(StepRun, DryRunPrintsThePlanWithoutTimes) {
  RunRequest req = request();
  const RunResult r = plan_only(req);
  ASSERT_TRUE(r.step);
  EXPECT_FALSE(r.step->timed);
  EXPECT_FALSE(r.step->steps[0][0].step_ms);
  const std::string text = render_plan_text(r);
  EXPECT_NE(text.find("Whole training step plan"), std::string::npos);
  EXPECT_NE(text.find("loss fwd"), std::string::npos);
  EXPECT_NE(text.find("step kernel (measured, else modelled)"), std::string::npos);
  EXPECT_NE(text.find("no GPU: not set against a device's memory"), std::string::npos);
  EXPECT_EQ(text.find(" ms per step"), std::string::npos);
  const RunResult back = from_json(to_json(r), "dry.json");
  ASSERT_TRUE(back.step);
  EXPECT_FALSE(back.step->timed);
  // No step for standalone shapes.
  req.plan = build_shapes_plan("1024");
  EXPECT_FALSE(plan_only(req).step);
}

TEST(StepRun, TraceOfEveryPrecision) {
  StepEngine engine;
  const RunResult r = run(engine, request());
  const nlohmann::json t = nlohmann::json::parse(step_trace_text(r));
  int processes = 0;
  for (const auto& e : t["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") ++processes;
  EXPECT_EQ(processes, 2);  // BF16 and FP8Current
}

}  // namespace
}  // namespace gs
