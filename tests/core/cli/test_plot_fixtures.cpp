// The MoE chart fixture, tests/data/moe_mixtral_ep2_synthetic.json, and how it was made. There is
// no GPU here, so its times come from a deterministic fake engine (below), driven through the real
// runner (repeats, pooling, summaries, intervals) and written by the real writer (to_json): the
// file has the structure of a measured MoE result (grouped GEMMs, per-expert rows, routing, the
// busiest expert-parallel rank, repeats) and times that are NOT measurements. Its device name,
// timing method and notes say so, and its name ends in _synthetic.
//
// The test fails when the committed file differs from what the generator writes now (apart from
// the tool version), in the layout of schema 2 (test::legacy_layout: the cells inside each GEMM),
// which the file keeps so that the schema-2 reader and the chart script's reading of it are tested
// on a real writer's output; GS_WRITE_FIXTURES=1 rewrites it:
//   GS_WRITE_FIXTURES=1 build-cpu/gemmscope_core_tests --gtest_filter='PlotFixtures.*'
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/run/engine.hpp"
#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"
#include "core/recipes/recipe.hpp"
#include "core/report/report.hpp"
#include "core/run/runner.hpp"
#include "fixture_util.hpp"
#include "test_util.hpp"

using namespace gs;

namespace {

const std::string kFixture = std::string(GS_TEST_DATA_DIR) + "/moe_mixtral_ep2_synthetic.json";

// Time = FLOPs / a nominal rate per recipe (BF16 600, FP8 per-tensor 1100, FP8 block 950 TFLOP/s),
// + 12% for the quantization of a quantizing mode, + 4 us per expert for a grouped GEMM; each call
// varies by up to +-1% (a fixed pattern), per-iteration stdev 2% of the time.
class SyntheticEngine : public test::FakeEngineBase {
 public:
  SyntheticEngine() : FakeEngineBase("Fake GPU (synthetic times, not a measurement)", 132) {}
  Cell measure(const Gemm& g, Precision p, Mode m, const std::string&) override {
    ++calls_;
    const Precision actual = make_recipe(p, g, {}).precision;
    const double rate = actual == Precision::BF16 ? 600e12 : actual == Precision::FP8Block ? 950e12 : 1100e12;
    double ms = g.flops() / rate * 1e3;
    const double dense = ms;
    if (m != Mode::PreQuantized && actual != Precision::BF16) ms *= 1.12;
    if (g.grouped()) ms += 0.004 * static_cast<double>(g.group.size());
    ms *= 1.0 + 0.005 * static_cast<double>(static_cast<int>(calls_ * 7 % 5) - 2);
    Stats s;
    s.mean_ms = s.median_ms = ms;
    s.min_ms = ms * 0.97;
    s.max_ms = ms * 1.05;
    s.stdev_ms = ms * 0.02;
    s.iters = 100;
    Cell c = Cell::measured(s);
    if (g.grouped()) c.dense_equiv_ms = dense;
    return c;
  }
  AccuracyCell accuracy(const Gemm&, Precision, Dist) override { return AccuracyCell::na("synthetic"); }

 private:
  long calls_ = 0;
};

// Mixtral-8x7B, 8 experts top-2, expert parallel 2 (4 local experts per rank), lognormal routing:
// the busiest rank's experts get more rows than the other rank's. Training and pre-quantized, 3
// repeats (so the summary has 95% intervals).
nlohmann::json generate() {
  ModelConfig c = find_preset("mixtral-8x7b").config;
  c.moe.expert_parallel = 2;
  c.moe.routing = "lognormal:1";
  c.micro_batch_size = 1;
  c.sequence_length = 4096;
  RunRequest req;
  req.plan = build_model_plan(c);
  req.precisions = {Precision::BF16, Precision::FP8Current, Precision::FP8Block};
  req.modes = {Mode::Training, Mode::PreQuantized};
  req.options.timing.gpu_warmup_s = 0;
  req.options.timing.repeats = 3;
  req.options.timing.method = "synthetic (a fake engine in the tests; nothing measured)";
  SyntheticEngine e;
  RunResult r = run(e, req);
  r.created = "2026-01-01T00:00:00Z";
  r.notes.insert(r.notes.begin(),
                 "SYNTHETIC: times from tests/core/cli/test_plot_fixtures.cpp's fake engine, not GPU measurements "
                 "(a chart test fixture)");
  return test::legacy_layout(to_json(r));
}

}  // namespace

TEST(PlotFixtures, MoeSyntheticIsWhatTheGeneratorWrites) {
  const nlohmann::json now = generate();
  if (test::check_fixture(kFixture, now) == test::Fixture::Written) GTEST_SKIP() << "wrote " << kFixture;
  // What the chart reads: grouped GEMMs, routing with two EP ranks, intervals from 3 repeats.
  EXPECT_EQ(now["plan"]["routing"]["expert_parallel"], 2);
  EXPECT_EQ(now["plan"]["routing"]["counts"].size(), 8u);
  EXPECT_TRUE(now["summary"]["training"]["intervals"]["per_layer_total"]["BF16"].is_object());
  int grouped = 0;
  for (const auto& g : now["gemms"]) grouped += g.contains("group");
  EXPECT_EQ(grouped, 6);  // expert up and down, three passes
}
