// Fleet mode's summary: per-GPU totals, spread, slow GPUs with evidence, the fleet JSON round trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/util/error.hpp"
#include "core/node/fleet.hpp"
#include "core/model/model_config.hpp"
#include "core/report/report.hpp"
#include "core/run/runner.hpp"
#include "test_util.hpp"

using namespace gs;
namespace fs = std::filesystem;

namespace {

// Every GEMM takes `ms` x its FLOPs / 1 TFLOP (so the per-layer total is `scale` x the plan's
// FLOPs / 1e9 ms) at `mhz`, with the given throttle reasons.
class ScaledEngine : public gs::test::FakeEngineBase {
 public:
  ScaledEngine(double scale, int mhz, uint64_t reasons) : scale_(scale), mhz_(mhz), reasons_(reasons) {}
  Cell measure(const Gemm& g, Precision, Mode, const std::string&) override {
    Stats s;
    s.mean_ms = s.median_ms = s.min_ms = s.max_ms = scale_ * g.flops() / 1e12;
    s.iters = 10;
    Cell c = Cell::measured(s);
    c.clock = ClockSample{mhz_, 1980, reasons_};
    return c;
  }

 private:
  double scale_;
  int mhz_;
  uint64_t reasons_;
};

RunRequest request() {
  RunRequest q;
  q.plan = build_model_plan(default_config());
  q.precisions = {Precision::BF16};
  q.modes = {Mode::Training};
  return q;
}

FleetRun run_on(const std::string& label, double scale, int mhz, uint64_t reasons = 0) {
  ScaledEngine e(scale, mhz, reasons);
  return {label, run(e, request())};
}

}  // namespace

TEST(Fleet, PerGpuTotalsSpreadAndSlowGpu) {
  // GPU 2 is 10% slower and power-capped; GPUs 0, 1 within 1% of each other.
  const std::vector<FleetRun> runs = {run_on("GPU 0", 1.0, 1755), run_on("GPU 1", 1.01, 1740),
                                      run_on("GPU 2", 1.10, 1600, ClockSample::kPowerCap)};
  const FleetSummary s = summarize_fleet(runs, 0.03);
  ASSERT_EQ(s.gpus.size(), 3u);
  const double flops = plan_flops(request().plan).per_layer();
  ASSERT_TRUE(s.gpus[0].layer_ms[0].has_value());
  EXPECT_NEAR(*s.gpus[0].layer_ms[0], flops / 1e12, 1e-9);
  EXPECT_NEAR(*s.median_ms[0], 1.01 * flops / 1e12, 1e-9);
  EXPECT_NEAR(*s.spread[0], 0.10 / 1.01, 1e-9);
  ASSERT_EQ(s.slow.size(), 1u);
  EXPECT_EQ(s.slow[0].gpu, 2u);
  EXPECT_NEAR(s.slow[0].over_median, 1.10 / 1.01 - 1, 1e-9);
  EXPECT_NE(s.slow[0].evidence.find("mean SM clock 1600 MHz against the median GPU's 1740 MHz"), std::string::npos)
      << s.slow[0].evidence;
  EXPECT_NE(s.slow[0].evidence.find("power-capped"), std::string::npos);
  EXPECT_EQ(s.gpus[2].power_capped_cells, s.gpus[2].clock_cells);
  const std::string text = render_fleet_text(s);
  EXPECT_NE(text.find("SLOW: GPU 2 is 8.9% slower than the median in BF16"), std::string::npos) << text;
  // A looser threshold names none.
  EXPECT_TRUE(summarize_fleet(runs, 0.10).slow.empty());
  EXPECT_NE(render_fleet_text(summarize_fleet(runs, 0.10)).find("none"), std::string::npos);
}

TEST(Fleet, JsonRoundTrip) {
  const std::vector<FleetRun> runs = {run_on("GPU 0", 1.0, 1755), run_on("GPU 1", 1.2, 1500)};
  const FleetSummary s = summarize_fleet(runs, 0.05);
  const nlohmann::json j = fleet_to_json(runs, s);
  EXPECT_TRUE(is_fleet_json(j));
  EXPECT_FALSE(is_fleet_json(to_json(runs[0].run)));
  const std::vector<FleetRun> back = fleet_from_json(nlohmann::json::parse(j.dump()), "fleet.json");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].label, "GPU 1");
  const FleetSummary s2 = summarize_fleet(back, 0.05);
  EXPECT_NEAR(*s2.gpus[1].layer_ms[0], *s.gpus[1].layer_ms[0], 1e-9);
  EXPECT_EQ(j["slow"].size(), 1u);
  EXPECT_THROW(fleet_from_json(nlohmann::json::object(), "x.json"), UsageError);
  nlohmann::json bad = j;
  bad["gpus"][0].erase("label");
  EXPECT_THROW(fleet_from_json(bad, "x.json"), UsageError);
}

TEST(Fleet, BadInputRefused) {
  EXPECT_THROW(summarize_fleet({}, 0.03), UsageError);
  const std::vector<FleetRun> one = {run_on("GPU 0", 1.0, 1755)};
  EXPECT_THROW(summarize_fleet(one, 0.0), UsageError);
  EXPECT_THROW(summarize_fleet(one, -1.0), UsageError);
  // A run that measured nothing, and runs of different plans.
  FleetRun dry{"GPU 1", plan_only(request())};
  EXPECT_THROW(summarize_fleet({one[0], dry}, 0.03), UsageError);
  RunRequest other = request();
  ModelConfig c = default_config();
  c.micro_batch_size = 1;
  other.plan = build_model_plan(c);
  ScaledEngine e(1.0, 1755, 0);
  EXPECT_THROW(summarize_fleet({one[0], FleetRun{"GPU 1", run(e, other)}}, 0.03), UsageError);
}

#ifdef GS_BINARY
TEST(Fleet, CliRefusals) {
  const auto dir = gs::test::scratch_dir("fleet_cli");
  // No GPU here (the tests hide them; a CPU build has no backend): one line, exit 2.
  gs::test::Out r = gs::test::run_gemmscope("--all-gpus --bf16-only", dir);
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("--all-gpus needs a GPU"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  r = gs::test::run_gemmscope("--all-gpus --device 1", dir);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--device cannot be combined with --all-gpus"), std::string::npos) << r.err;
  r = gs::test::run_gemmscope("--all-gpus --fleet-threshold 0%", dir);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--fleet-threshold must be above 0"), std::string::npos) << r.err;
  r = gs::test::run_gemmscope("--help", dir);
  EXPECT_NE(r.out.find("--all-gpus"), std::string::npos);
}
#endif

#ifdef GS_BINARY
// `report` and `compare` read fleet files: the summary again; each GPU against a single run.
TEST(Fleet, ReportAndCompareReadFleetFiles) {
  const auto dir = gs::test::scratch_dir("fleet_files");
  const std::vector<FleetRun> runs = {run_on("GPU 0", 1.0, 1755), run_on("GPU 1", 1.2, 1500)};
  const std::string fleet = (dir / "fleet.json").string(), single = (dir / "single.json").string();
  std::ofstream(fleet) << fleet_to_json(runs, summarize_fleet(runs, 0.05)).dump(2);
  std::ofstream(single) << to_json(runs[0].run).dump(2);
  gs::test::Out r = gs::test::run_gemmscope("report " + fleet, dir);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("SLOW: GPU 1 is"), std::string::npos) << r.out;
  r = gs::test::run_gemmscope("compare " + single + " " + fleet + " --threshold 5%", dir);
  EXPECT_EQ(r.rc, 1) << r.err;  // GPU 1 is 20% slower than the single run
  EXPECT_NE(r.out.find("== A: " + single + "  B: GPU 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("B: GPU 1"), std::string::npos) << r.out;
}

TEST(Fleet, PlotDrawsFleetFiles) {
  const auto dir = gs::test::scratch_dir("fleet_plot");
  const std::vector<FleetRun> runs = {run_on("GPU 0", 1.0, 1755), run_on("GPU 1", 1.2, 1500)};
  const std::string fleet = (dir / "fleet.json").string(), single = (dir / "single.json").string();
  std::ofstream(fleet) << fleet_to_json(runs, summarize_fleet(runs, 0.05)).dump(2);
  std::ofstream(single) << to_json(runs[0].run).dump(2);
  // The chart document the script gets: per GPU and precision, the median and the slow GPU.
  const nlohmann::json chart = fleet_chart_json(summarize_fleet(runs, 0.05));
  EXPECT_EQ(chart["schema"], "gemmscope-fleet-chart/1");
  ASSERT_EQ(chart["gpus"].size(), 2u);
  ASSERT_EQ(chart["slow"].size(), 1u);
  EXPECT_EQ(chart["slow"][0]["gpu"], 1);
  EXPECT_GT(chart["gpus"][1]["layer_ms"][0].get<double>(), chart["gpus"][0]["layer_ms"][0].get<double>());
  // Other kinds are refused for a fleet file, and the fleet kind for a single run, before any Python.
  gs::test::Out r = gs::test::run_gemmscope("plot " + fleet + " -o " + (dir / "x.png").string() + " --kind model", dir);
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("is a fleet file"), std::string::npos) << r.err;
  r = gs::test::run_gemmscope("plot " + single + " -o " + (dir / "x.png").string() + " --kind fleet", dir);
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("needs a fleet file"), std::string::npos) << r.err;
  const fs::path png = dir / "fleet.png";
  r = gs::test::run_gemmscope("plot " + fleet + " -o " + png.string(), dir);
  if (r.rc == 3) GTEST_SKIP() << "no Python with matplotlib: " << r.err;
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("fleet chart"), std::string::npos) << r.out;
  EXPECT_GT(fs::file_size(png), 1000u);
}
#endif

TEST(Fleet, TemperatureAndPowerPerGpu) {
  // GPU 1 runs hot and at a lower power draw (a power-capped board): its evidence says so, the table
  // shows each GPU's means, and the result JSON keeps the samples through a round trip.
  class HotEngine : public gs::test::FakeEngineBase {
   public:
    HotEngine(double scale, int temp, double watts) : scale_(scale), temp_(temp), watts_(watts) {}
    Cell measure(const Gemm& g, Precision, Mode, const std::string&) override {
      Stats s;
      s.mean_ms = s.median_ms = s.min_ms = s.max_ms = scale_ * g.flops() / 1e12;
      s.iters = 10;
      Cell c = Cell::measured(s);
      ClockSample k{1700, 1980, 0};
      k.temp_c = temp_;
      k.power_w = watts_;
      c.clock = k;
      return c;
    }

   private:
    double scale_;
    int temp_;
    double watts_;
  };
  HotEngine cool(1.0, 45, 690), hot(1.2, 83, 520), mid(1.0, 47, 700);
  std::vector<FleetRun> runs = {{"GPU 0", run(cool, request())}, {"GPU 1", run(hot, request())},
                                {"GPU 2", run(mid, request())}};
  const FleetSummary s = summarize_fleet(runs, 0.05);
  ASSERT_TRUE(s.gpus[1].mean_temp_c.has_value());
  EXPECT_DOUBLE_EQ(*s.gpus[1].mean_temp_c, 83);
  EXPECT_DOUBLE_EQ(*s.gpus[1].mean_power_w, 520);
  ASSERT_EQ(s.slow.size(), 1u);
  EXPECT_NE(s.slow[0].evidence.find("83 C against 47 C"), std::string::npos) << s.slow[0].evidence;
  EXPECT_NE(s.slow[0].evidence.find("520 W against 690 W"), std::string::npos) << s.slow[0].evidence;
  const std::string text = render_fleet_text(s);
  EXPECT_NE(text.find("temp C"), std::string::npos) << text;
  const nlohmann::json j = fleet_to_json(runs, s);
  EXPECT_DOUBLE_EQ(j["gpus"][1]["mean_temp_c"].get<double>(), 83);
  const std::vector<FleetRun> back = fleet_from_json(nlohmann::json::parse(j.dump()), "f.json");
  const FleetSummary s2 = summarize_fleet(back, 0.05);
  EXPECT_DOUBLE_EQ(*s2.gpus[1].mean_power_w, 520);
  // An older file without the samples: no temperature, no power, and no error.
  const RunResult plain = run_on("x", 1.0, 1700).run;
  const FleetSummary s3 = summarize_fleet({{"a", plain}, {"b", plain}}, 0.05);
  EXPECT_FALSE(s3.gpus[0].mean_temp_c.has_value());
  EXPECT_EQ(render_fleet_text(s3).find(" 83 "), std::string::npos);
}
