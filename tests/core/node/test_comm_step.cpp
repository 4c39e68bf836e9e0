// The per-layer summary of a run with --comm (core/node/comm_step.hpp): per recipe, the layer's GEMMs,
// its communication in the recipe's wire types, and the exposed part measured in BF16.
#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>

#include "core/node/comm_step.hpp"
#include "core/model/model_config.hpp"
#include "core/run/runner.hpp"
#include "test_util.hpp"

using namespace gs;

namespace {

// Collectives at 100 GB/s; beside its GEMM each BF16 one leaves `exposed` ms exposed.
class FakeComm : public CommEngine {
 public:
  explicit FakeComm(std::optional<double> exposed) : exposed_(exposed) {}
  std::string description() const override { return "fake NCCL"; }
  int64_t gpus() const override { return 8; }
  CommTiming time(const Collective& c, CommType t, int, int iters) override {
    const double ms = static_cast<double>(c.size_bytes(t)) / 1e8;
    return {ms, ms, ms, iters};
  }
  std::optional<OverlapTiming> overlap(const Collective&, CommType, const Gemm&, OverlapGemm k, int, int) override {
    if (!exposed_) return std::nullopt;
    // The FP8 GEMM half as long, its collective exposed twice as much.
    if (k == OverlapGemm::Fp8) return OverlapTiming{1.0, 1.1, 1.0, 1.0 + 2 * *exposed_};
    return OverlapTiming{2.0, 2.1, 1.0, 2.0 + *exposed_};
  }

 private:
  std::optional<double> exposed_;
};

class FixedEngine : public gs::test::FakeEngineBase {
 public:
  Cell measure(const Gemm&, Precision p, Mode, const std::string&) override {
    Stats s;
    s.mean_ms = s.median_ms = s.min_ms = s.max_ms = p == Precision::BF16 ? 1.0 : 0.6;
    s.iters = 10;
    return Cell::measured(s);
  }
};

RunResult gemms(const Plan& plan) {
  RunRequest q;
  q.plan = plan;
  q.precisions = {Precision::BF16, Precision::FP8Current};
  q.modes = {Mode::Training};
  FixedEngine e;
  return run(e, q);
}

Plan plan_of(const std::string& preset, int64_t tp, int64_t ep = 0) {
  ModelConfig c = find_preset(preset).config;
  c.tensor_parallel = tp;
  if (ep > 0) {
    c.moe.routing = "balanced";
    c.moe.expert_parallel = ep;
  }
  return build_model_plan(c);
}

}  // namespace

TEST(CommStep, DenseLayerPerRecipe) {
  const Plan p = plan_of("llama-3-8b", 2);
  const CommLayout l = layout_for(p, 0, true, 1, CommType::Fp32);
  FakeComm eng(0.25);
  const CommResult c = measure_collectives(p, l, eng, 1, 5);
  const RunResult r = gemms(p);
  const std::vector<LayerCommRow> rows = layer_comm_rows(c, r);
  ASSERT_EQ(rows.size(), 2u);  // dense layer x {BF16, FP8Current}
  // 10 TP/SP collectives per layer: 128 MiB each in BF16; the 6 all-gathers 64 MiB in FP8.
  const double mib = 1048576.0;
  EXPECT_EQ(rows[0].precision, Precision::BF16);
  EXPECT_FALSE(rows[0].moe_layer);
  EXPECT_NEAR(rows[0].comm_ms, 10 * 128 * mib / 1e8, 1e-9);
  ASSERT_TRUE(rows[0].exposed_ms.has_value());
  EXPECT_NEAR(*rows[0].exposed_ms, 10 * 0.25, 1e-12);
  const ModeSummary ms = summarize_mode(r, 0);
  ASSERT_TRUE(rows[0].gemm_ms && ms.sums[0].total);
  EXPECT_DOUBLE_EQ(*rows[0].gemm_ms, *ms.sums[0].total);
  EXPECT_NEAR(rows[1].comm_ms, (4 * 128 + 6 * 64) * mib / 1e8, 1e-9);
  ASSERT_TRUE(rows[1].exposed_ms.has_value());  // timed beside the FP8 GEMM
  EXPECT_NEAR(*rows[1].exposed_ms, 10 * 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(*rows[1].gemm_ms, *ms.sums[1].total);
  const std::string text = render_layer_comm(c, r);
  EXPECT_NE(text.find("Per layer with the layout's communication"), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("{:.3f}", *rows[0].gemm_ms + *rows[0].exposed_ms)), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("{:.3f}", *rows[1].gemm_ms + rows[1].comm_ms)), std::string::npos) << text;
  // No overlap figure: no exposed column values, and still the serial sum.
  FakeComm plain(std::nullopt);
  const std::vector<LayerCommRow> none = layer_comm_rows(measure_collectives(p, l, plain, 1, 5), r);
  ASSERT_EQ(none.size(), 2u);
  EXPECT_FALSE(none[0].exposed_ms.has_value());
}

// The table's layout, column by column: two spaces in, "{:<6} {:<14} {:>10} {:>10} {:>11} {:>13}
// {:>15}", "-" where a value is missing, then the legend.
TEST(CommStep, TableLayout) {
  const Plan p = plan_of("llama-3-8b", 2);
  const CommLayout l = layout_for(p, 0, true, 1, CommType::Fp32);
  const RunResult r = gemms(p);
  for (const std::optional<double> overlap : {std::optional<double>(0.25), std::optional<double>()}) {
    FakeComm eng(overlap);
    const CommResult c = measure_collectives(p, l, eng, 1, 5);
    const std::vector<LayerCommRow> rows = layer_comm_rows(c, r);
    ASSERT_EQ(rows.size(), 2u);
    const auto num = [](const std::optional<double>& v, int w) {
      return v ? fmt::format("{:>{}.3f}", *v, w) : fmt::format("{:>{}}", "-", w);
    };
    std::string want = fmt::format("\nPer layer with the layout's communication ({} mode, ms, measured)\n",
                                   to_string(r.modes[0]));
    want += fmt::format("  {:<6} {:<14} {:>10} {:>10} {:>11} {:>13} {:>15}\n", "layer", "recipe", "GEMMs", "comm",
                        "exposed", "GEMMs + comm", "GEMMs + exposed");
    for (const LayerCommRow& x : rows) {
      const double serial = *x.gemm_ms + x.comm_ms;
      const std::optional<double> hidden = x.exposed_ms ? std::optional<double>(*x.gemm_ms + *x.exposed_ms) : std::nullopt;
      want += fmt::format("  {:<6} {:<14} {} {:>10.3f} {} {} {}\n", x.moe_layer ? "MoE" : "dense",
                          to_string(x.precision), num(x.gemm_ms, 10), x.comm_ms, num(x.exposed_ms, 11),
                          num(serial, 13), num(hidden, 15));
    }
    const std::string got = render_layer_comm(c, r);
    ASSERT_EQ(got.rfind(want, 0), 0u) << got << "\nwant:\n" << want;
    EXPECT_EQ(got.substr(want.size()).rfind("  comm: the layer's collectives", 0), 0u) << got;
    EXPECT_EQ(std::count(got.begin(), got.end(), '\n'), 6) << got;
    // Without an overlap figure the last row ends in "-" (nothing exposed to add).
    EXPECT_EQ(got.find("-\n  comm:"), overlap ? std::string::npos : got.find("\n  comm:") - 1) << got;
  }
}

TEST(CommStep, MoeLayerHoldsTheAllToAllsAndNothingWithoutTimes) {
  const Plan p = plan_of("mixtral-8x7b", 1, 2);
  const CommLayout l = layout_for(p, 0, true, 1, CommType::Fp32);
  FakeComm eng(0.1);
  const CommResult c = measure_collectives(p, l, eng, 1, 5);
  const RunResult r = gemms(p);
  const std::vector<LayerCommRow> rows = layer_comm_rows(c, r);
  ASSERT_EQ(rows.size(), 2u);  // every Mixtral layer has experts: MoE rows only
  EXPECT_TRUE(rows[0].moe_layer);
  EXPECT_GT(rows[0].comm_ms, rows[1].comm_ms);  // the FP8 dispatch
  EXPECT_DOUBLE_EQ(*rows[0].gemm_ms, *summarize_mode(r, 0).sums[0].moe_total);
  // Sizes only (no times): no rows, no text.
  EXPECT_TRUE(layer_comm_rows(plan_comm(p, l), r).empty());
  EXPECT_EQ(render_layer_comm(plan_comm(p, l), r), "");
}
