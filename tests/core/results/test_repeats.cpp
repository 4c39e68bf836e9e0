// --repeats: interleaving, pooling, intervals, JSON round trip and the text block, with a fake
// engine whose times are known.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "core/util/error.hpp"
#include "core/results/repeats.hpp"
#include "core/report/report.hpp"
#include "core/run/runner.hpp"
#include "test_util.hpp"

using namespace gs;

namespace {

// Time = 1 ms (BF16) or 0.5 ms (FP8Current) per GEMM, times (1 + 0.01 * call) so every repeat
// differs; records the order of calls.
class CountingEngine : public test::FakeEngineBase {
 public:
  Cell measure(const Gemm& g, Precision p, Mode, const std::string&) override {
    order.emplace_back(g.pass, g.op, p);
    const double ms = (p == Precision::BF16 ? 1.0 : 0.5) * (1.0 + 0.01 * static_cast<double>(order.size()));
    Stats s;
    s.mean_ms = s.median_ms = s.min_ms = s.max_ms = ms;
    s.stdev_ms = 0.01;
    s.iters = 10;
    return Cell::measured(s);
  }
  std::vector<std::tuple<Pass, Op, Precision>> order;
};

RunResult run_repeats(int n, CountingEngine& e) {
  RunRequest req;
  req.plan = build_model_plan(default_config());
  req.precisions = {Precision::BF16, Precision::FP8Current};
  req.modes = {Mode::PreQuantized};
  req.options.timing.gpu_warmup_s = 0;
  req.options.timing.repeats = n;
  return run(e, req);
}

}  // namespace

TEST(Repeats, IntervalOfTheMedianIsDeterministicAndHoldsTheMedian) {
  const std::vector<double> v = {10.0, 10.2, 9.9, 10.1, 10.05};
  const auto a = interval95(v), b = interval95(v);
  ASSERT_TRUE(a && b);
  EXPECT_DOUBLE_EQ(a->median, 10.05);
  EXPECT_EQ(a->n, 5);
  EXPECT_LE(a->lo, a->median);
  EXPECT_GE(a->hi, a->median);
  EXPECT_GE(a->lo, 9.9);   // a bootstrap median never leaves the sample's range
  EXPECT_LE(a->hi, 10.2);
  EXPECT_DOUBLE_EQ(a->lo, b->lo);
  EXPECT_DOUBLE_EQ(a->hi, b->hi);
  EXPECT_FALSE(interval95({1.0, 2.0}));  // fewer than 3 values: no interval
  // Identical values: a zero-width interval at the value.
  const auto z = interval95({3.0, 3.0, 3.0});
  ASSERT_TRUE(z);
  EXPECT_DOUBLE_EQ(z->lo, 3.0);
  EXPECT_DOUBLE_EQ(z->hi, 3.0);
}

TEST(Repeats, PoolingCombinesRepeatsAndKeepsTheirMeans) {
  Stats a, b;
  a.mean_ms = a.median_ms = 1.0; a.min_ms = 0.9; a.max_ms = 1.2; a.stdev_ms = 0.1; a.iters = 10;
  b.mean_ms = b.median_ms = 2.0; b.min_ms = 1.8; b.max_ms = 2.5; b.stdev_ms = 0.1; b.iters = 10;
  const Cell p = pool_repeats({Cell::measured(a), Cell::measured(b)});
  ASSERT_TRUE(p.ok);
  EXPECT_DOUBLE_EQ(p.stats.mean_ms, 1.5);
  EXPECT_DOUBLE_EQ(p.stats.min_ms, 0.9);
  EXPECT_DOUBLE_EQ(p.stats.max_ms, 2.5);
  EXPECT_EQ(p.stats.iters, 20);
  // within 0.01 + between ((0.5^2 + 0.5^2) / 2 = 0.25) -> sqrt(0.26)
  EXPECT_NEAR(p.stats.stdev_ms, std::sqrt(0.26), 1e-12);
  EXPECT_EQ(p.repeat_ms, (std::vector<double>{1.0, 2.0}));
  const Cell na = pool_repeats({Cell::measured(a), Cell::na("cuBLASLt NOT_SUPPORTED")});
  EXPECT_FALSE(na.ok);
  EXPECT_EQ(na.reason, "cuBLASLt NOT_SUPPORTED");
}

TEST(Repeats, RunnerInterleavesRepeatsGemmMajor) {
  CountingEngine e;
  const RunResult r = run_repeats(3, e);
  const size_t G = r.plan.gemms.size();
  ASSERT_EQ(e.order.size(), G * 3 * 2);
  // For each GEMM: repeat 1 of BF16 and FP8, then repeat 2, then repeat 3.
  for (size_t g = 0; g < G; ++g)
    for (size_t k = 0; k < 3; ++k)
      for (size_t p = 0; p < 2; ++p) {
        const auto& [pass, op, prec] = e.order[g * 6 + k * 2 + p];
        EXPECT_EQ(pass, r.plan.gemms[g].pass);
        EXPECT_EQ(op, r.plan.gemms[g].op);
        EXPECT_EQ(prec, r.precisions[p]);
      }
  // Every cell carries its three repeat means, in call order, and the pooled mean is their mean.
  const Cell& c = r.cell(0, 0, 0);
  ASSERT_EQ(c.repeat_ms.size(), 3u);
  EXPECT_DOUBLE_EQ(c.repeat_ms[0], 1.01);
  EXPECT_DOUBLE_EQ(c.repeat_ms[1], 1.03);
  EXPECT_DOUBLE_EQ(c.repeat_ms[2], 1.05);
  EXPECT_DOUBLE_EQ(c.stats.mean_ms, 1.03);
}

TEST(Repeats, SummaryIntervalsComeFromPerRepeatTotals) {
  CountingEngine e;
  const RunResult r = run_repeats(5, e);
  const auto rs = summarize_repeats(r);
  ASSERT_EQ(rs.size(), 1u);
  // Repeat k's per-layer BF16 total: the sum over the 12 GEMMs of repeat k's BF16 means.
  std::vector<double> totals(5, 0.0);
  for (size_t g = 0; g < r.plan.gemms.size(); ++g)
    for (size_t k = 0; k < 5; ++k) totals[k] += r.cell(0, g, 0).repeat_ms[k];
  const auto expect = interval95(totals);
  ASSERT_TRUE(rs[0].per_layer_total[0] && expect);
  EXPECT_DOUBLE_EQ(rs[0].per_layer_total[0]->median, expect->median);
  EXPECT_DOUBLE_EQ(rs[0].per_layer_total[0]->lo, expect->lo);
  ASSERT_EQ(rs[0].speedups.size(), 1u);
  ASSERT_TRUE(rs[0].speedups[0]);
  EXPECT_GT(rs[0].speedups[0]->median, 1.9);  // FP8 takes half the base time, drifting a little slower
  EXPECT_LT(rs[0].speedups[0]->median, 2.0);
  const std::string text = render_text(r);
  EXPECT_NE(text.find("Repeats: 5 (interleaved GEMM-major); median [95% interval"), std::string::npos) << text;
  EXPECT_NE(text.find("speedups (the full model's GEMMs)  FP8Current vs BF16 1.9"), std::string::npos) << text;
  EXPECT_NE(text.find("per-layer total (ms; every layer alike)"), std::string::npos) << text;
}

TEST(Repeats, JsonRoundTripKeepsRepeatTimesAndIntervals) {
  CountingEngine e;
  const RunResult r = run_repeats(4, e);
  const auto j = to_json(r);
  EXPECT_EQ(j["timing"]["repeats"].get<int>(), 4);
  EXPECT_EQ(gs::test::record(j, 0, "pre-quantized", "BF16")["repeat_ms"].size(), 4u);
  EXPECT_TRUE(j["summary"]["pre-quantized"]["intervals"]["per_layer_total"]["BF16"].is_object());
  const RunResult back = from_json(j, "r.json");
  EXPECT_EQ(back.timing.repeats, 4);
  EXPECT_EQ(back.cell(0, 3, 1).repeat_ms, r.cell(0, 3, 1).repeat_ms);
  const auto a = summarize_repeats(r), b = summarize_repeats(back);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_DOUBLE_EQ(a[0].per_layer_total[1]->hi, b[0].per_layer_total[1]->hi);
  // A single measurement writes neither field.
  CountingEngine e1;
  const auto j1 = to_json(run_repeats(1, e1));
  EXPECT_FALSE(j1["timing"].contains("repeats"));
  EXPECT_FALSE(gs::test::record(j1, 0, "pre-quantized", "BF16").contains("repeat_ms"));
}

TEST(Repeats, ResultFilesWithInconsistentRepeatsAreRefused) {
  CountingEngine e;
  auto j = to_json(run_repeats(3, e));
  auto bad = j;
  gs::test::record(bad, 2, "pre-quantized", "BF16")["repeat_ms"] = {1.0, 2.0};
  EXPECT_THROW(from_json(bad, "r.json"), UsageError);
  bad = j;
  gs::test::record(bad, 2, "pre-quantized", "BF16")["repeat_ms"] = {1.0, -2.0, 1.0};
  EXPECT_THROW(from_json(bad, "r.json"), UsageError);
  bad = j;
  bad["timing"]["repeats"] = 0;
  EXPECT_THROW(from_json(bad, "r.json"), UsageError);
}

// A cell whose launch gate opened by its timeout is never presented silently: a note names it and
// the JSON carries the flag through a round trip.
TEST(GateTimeout, NotedNamedAndKeptInJson) {
  struct TimingOut : CountingEngine {
    Cell measure(const Gemm& g, Precision p, Mode m, const std::string& provider) override {
      Cell c = CountingEngine::measure(g, p, m, provider);
      c.gate_timed_out = g.pass == Pass::Wgrad && g.op == Op::MlpUp && p == Precision::FP8Current;
      return c;
    }
  } e;
  RunRequest req;
  req.plan = build_model_plan(default_config());
  req.precisions = {Precision::BF16, Precision::FP8Current};
  req.modes = {Mode::PreQuantized};
  req.options.timing.gpu_warmup_s = 0;
  const RunResult r = run(e, req);
  bool noted = false;
  for (const auto& n : r.notes)
    noted |= n.find("WARNING: the launch gate opened by its timeout in 1 cell(s)") != std::string::npos &&
             n.find("pre-quantized Wgrad MLP Up") != std::string::npos && n.find("FP8Current") != std::string::npos;
  EXPECT_TRUE(noted);
  const RunResult back = from_json(to_json(r), "r.json");
  size_t flagged = 0;
  for (size_t g = 0; g < back.plan.gemms.size(); ++g) flagged += back.cell(0, g, 1).gate_timed_out;
  EXPECT_EQ(flagged, 1u);
  EXPECT_FALSE(back.cell(0, 0, 0).gate_timed_out);
}
