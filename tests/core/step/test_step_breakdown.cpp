// The step's time from its plan and the groups' times (core/step/step_breakdown.hpp), and its
// Chrome trace (core/step/step_trace.hpp), parsed back.
#include "core/step/step_breakdown.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include <map>

#include "core/model/model_config.hpp"
#include "core/step/step_trace.hpp"
#include "core/util/error.hpp"

namespace gs {
namespace {

Plan small_plan() {
  ModelConfig c = find_preset("llama-3-8b").config;
  c.num_hidden_layers = 3;
  c.micro_batch_size = 1;
  c.sequence_length = 1024;
  return build_model_plan(c);
}

// Every group 0.5 ms an instance, measured.
std::vector<GroupTime> half_ms(const StepPlan& sp) {
  return std::vector<GroupTime>(sp.groups.size(), GroupTime{0.5, TimeSource::Measured, "test"});
}

TEST(StepBreakdown, SumsTheGroupsAndSaysWhoseStepItIs) {
  const Plan plan = small_plan();
  const StepPlan sp = build_step_plan(plan, StepContextKind::TransformerEngine, {}, Precision::BF16, Mode::Training, {});
  double instances = 0, launches = 0;
  for (const StepGroup& g : sp.groups) {
    instances += g.count;
    launches += g.total_launches();
  }
  HostCost host = default_host_cost(HostForm::Eager);
  const StepBreakdown b = compute_step(sp, half_ms(sp), host, {}, StepPeak{1000, "test"});
  ASSERT_TRUE(b.gpu_ms);
  EXPECT_DOUBLE_EQ(*b.gpu_ms, 0.5 * instances);
  EXPECT_DOUBLE_EQ(b.launches, launches);
  EXPECT_DOUBLE_EQ(*b.host_ms, launches * (kDefaultLaunchUs + kEagerOverheadUs) * 1e-3);
  double cats = 0;
  for (StepCategory c : kAllStepCategories) cats += b.category(c).value_or(0);
  EXPECT_DOUBLE_EQ(cats, *b.gpu_ms);
  EXPECT_EQ(b.host_bound, *b.host_ms > *b.gpu_ms);
  EXPECT_DOUBLE_EQ(*b.step_ms, std::max(*b.gpu_ms, *b.host_ms));
  EXPECT_DOUBLE_EQ(*b.tokens_per_s, 1024 / (*b.step_ms * 1e-3));
  EXPECT_DOUBLE_EQ(*b.mfu, sp.model_flops / (*b.step_ms * 1e-3) / 1e12 / 1000);
  EXPECT_EQ(b.measured_groups(), static_cast<int>(sp.groups.size()));
  // A host that cannot keep up: the step is the host's, and the exposed part is the difference.
  host.overhead_us = 1e6;
  const StepBreakdown slow = compute_step(sp, half_ms(sp), host, {}, std::nullopt);
  EXPECT_TRUE(slow.host_bound);
  EXPECT_DOUBLE_EQ(*slow.step_ms, *slow.host_ms);
  EXPECT_DOUBLE_EQ(*slow.host_exposed_ms(), *slow.host_ms - *slow.gpu_ms);
  EXPECT_FALSE(slow.mfu);  // no peak
  // A CUDA graph: one replay.
  const StepBreakdown graph = compute_step(sp, half_ms(sp), default_host_cost(HostForm::CudaGraph), {}, std::nullopt);
  EXPECT_DOUBLE_EQ(*graph.host_ms, kGraphReplayUs * 1e-3);
}

TEST(StepBreakdown, AGroupWithoutATimeLeavesTheStepUnknown) {
  const StepPlan sp =
      build_step_plan(small_plan(), StepContextKind::TransformerEngine, {}, Precision::BF16, Mode::Training, {});
  std::vector<GroupTime> t = half_ms(sp);
  t[1] = GroupTime{std::nullopt, TimeSource::Unknown, "no stand-in"};
  const StepBreakdown b = compute_step(sp, t, default_host_cost(HostForm::Eager), {}, StepPeak{1000, "x"});
  EXPECT_FALSE(b.step_ms);
  EXPECT_FALSE(b.mfu);
  ASSERT_EQ(b.unknown.size(), 1u);
  EXPECT_EQ(b.unknown[0], sp.groups[1].name);
  EXPECT_THROW(compute_step(sp, {}, default_host_cost(HostForm::Eager), {}, std::nullopt), std::invalid_argument);
}

TEST(StepTrace, TracksNestingAndFormat) {
  const Plan plan = small_plan();
  StepOptions o;
  o.recompute = Recompute::Full;
  const StepPlan sp = build_step_plan(plan, StepContextKind::TransformerEngine, o, Precision::BF16, Mode::Training, {});
  const StepBreakdown b = compute_step(sp, half_ms(sp), default_host_cost(HostForm::Eager), {}, std::nullopt);
  std::vector<TraceTrack> tracks = step_trace_tracks(b, plan, 1, "estimated BF16 step");
  const nlohmann::json doc = nlohmann::json::parse(chrome_trace(tracks, {{"tool", "gemmscope"}}));
  ASSERT_TRUE(doc["traceEvents"].is_array());
  std::map<int, std::string> threads;
  std::vector<nlohmann::json> gpu;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") threads[e["tid"].get<int>()] = e["args"]["name"];
    if (e["ph"] == "X") {
      EXPECT_GE(e["dur"].get<double>(), 0);
      EXPECT_GE(e["ts"].get<double>(), 0);
      if (e["tid"] == 1) gpu.push_back(e);
    }
  }
  EXPECT_EQ(threads[1], "GPU stream (compute)");
  EXPECT_EQ(threads[2], "host (eager launches)");
  auto find = [&](const std::string& name) {
    for (const auto& e : gpu)
      if (e["name"] == name) return e;
    return nlohmann::json();
  };
  auto inside = [](const nlohmann::json& child, const nlohmann::json& parent) {
    const double eps = 1e-6;
    return child["ts"].get<double>() >= parent["ts"].get<double>() - eps &&
           child["ts"].get<double>() + child["dur"].get<double>() <=
               parent["ts"].get<double>() + parent["dur"].get<double>() + eps;
  };
  const nlohmann::json stepe = find("step"), fwd = find("forward"), bwd = find("backward");
  const nlohmann::json l0f = find("layer 0 fwd"), l2b = find("layer 2 bwd"), l0b = find("layer 0 bwd");
  ASSERT_FALSE(stepe.is_null());
  ASSERT_FALSE(l0f.is_null());
  ASSERT_FALSE(l2b.is_null());
  EXPECT_DOUBLE_EQ(stepe["dur"].get<double>(), *b.gpu_ms * 1e3);
  EXPECT_TRUE(inside(fwd, stepe));
  EXPECT_TRUE(inside(l0f, fwd));
  EXPECT_TRUE(inside(l2b, bwd));
  EXPECT_LT(l2b["ts"].get<double>(), l0b["ts"].get<double>());  // the backward runs the layers in reverse
  // Every group event of a layer lies inside it; the recomputed forward leads the layer's backward.
  int in_l0f = 0;
  for (const auto& e : gpu)
    if (e["cat"] != "layer" && e["cat"] != "phase" && e["cat"] != "step" && inside(e, l0f)) ++in_l0f;
  EXPECT_GE(in_l0f, 4);
  bool recompute_first = false;
  for (const auto& e : gpu)
    if (e["cat"] == "recompute" && e["ts"] == l2b["ts"]) recompute_first = true;
  EXPECT_TRUE(recompute_first);
  // Every GPU event nests: in file order (by start, the longest first) each one lies inside the events
  // still open, as a trace viewer stacks them.
  std::vector<double> open_ends;
  double last_ts = -1;
  for (const auto& e : gpu) {
    const double ts = e["ts"].get<double>(), end = ts + e["dur"].get<double>();
    EXPECT_GE(ts, last_ts) << e["name"];
    last_ts = ts;
    while (!open_ends.empty() && open_ends.back() <= ts) open_ends.pop_back();
    if (!open_ends.empty()) EXPECT_LE(end, open_ends.back() + 1e-9) << e["name"];
    open_ends.push_back(end);
  }
  // A step without times has no trace.
  const StepBreakdown none =
      compute_step(sp, std::vector<GroupTime>(sp.groups.size()), default_host_cost(HostForm::Eager), {}, std::nullopt);
  EXPECT_THROW(step_trace_tracks(none, plan, 1, "x"), UsageError);
}

}  // namespace
}  // namespace gs
