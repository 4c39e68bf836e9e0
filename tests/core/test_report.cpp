// Reports from a fixed fake result: golden text, JSON round trip, CSV, and the runner's
// capability gating driven by a fake engine.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/report.hpp"
#include "core/runner.hpp"

using namespace gs;

namespace {

// Deterministic fake measurements: time = flops / rate, rate depending on precision.
class FakeEngine : public Engine {
 public:
  explicit FakeEngine(int cc) : cc_(cc) {}
  DeviceInfo device_info() const override {
    DeviceInfo d;
    d.name = "Fake GPU";
    d.cc_major = cc_ / 10;
    d.cc_minor = cc_ % 10;
    d.sm_count = 132;
    return d;
  }
  void gpu_warmup(double) override { ++warmups; }
  Cell measure(const Gemm& g, Precision p, Mode m) override {
    ++calls;
    if (p == Precision::FP8Block && g.pass == Pass::Wgrad && g.op == Op::AttnOut)
      return Cell::na("cuBLASLt NOT_SUPPORTED (fake)");
    double rate = p == Precision::BF16 ? 700e12 : p == Precision::FP8Current ? 1200e12 : 1100e12;
    if (m == Mode::PreQuantized && p != Precision::BF16) rate *= 1.25;
    double ms = g.flops() / rate * 1e3;
    Stats s;
    s.mean_ms = ms; s.median_ms = ms; s.min_ms = ms * 0.99; s.max_ms = ms * 1.02; s.stdev_ms = ms * 0.005; s.iters = 100;
    return Cell::measured(s);
  }
  AccuracyCell accuracy(const Gemm& g, Precision p, Dist d) override {
    AccuracyCell c;
    c.ok = true;
    c.emulated = p == Precision::MXFP8 || p == Precision::NVFP4;
    c.rel_error = (p == Precision::BF16 ? 1e-3 : 3e-2) * (d == Dist::Outliers ? 2 : 1) * (g.pass == Pass::Wgrad ? 1.5 : 1);
    return c;
  }
  int cc_, calls = 0, warmups = 0;
};

RunResult fake_run(std::vector<Mode> modes) {
  FakeEngine e(90);
  RunRequest req;
  req.plan = build_model_plan(default_config());
  req.precisions = {Precision::BF16, Precision::FP8Current, Precision::FP8Block, Precision::MXFP8};
  req.modes = modes;
  req.options.timing.gpu_warmup_s = 1;
  RunResult r = run(e, req);
  r.created = "2026-01-01T00:00:00Z";
  return r;
}

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST(Runner, GatesByCapabilityAndMeasuresTheRest) {
  FakeEngine e(90);
  RunRequest req;
  req.plan = build_model_plan(default_config());
  req.precisions = {Precision::BF16, Precision::MXFP8, Precision::NVFP4, Precision::FP8Current};
  req.modes = {Mode::Autocast};
  req.options.timing.gpu_warmup_s = 0;
  RunResult r = run(e, req);
  ASSERT_EQ(r.precisions.size(), 2u);
  EXPECT_EQ(r.precisions[1], Precision::FP8Current);
  EXPECT_EQ(e.calls, 24);
  EXPECT_EQ(e.warmups, 0);
  int skipped_notes = 0;
  for (const auto& n : r.notes) skipped_notes += n.find("skipped, needs compute capability >= 10.0") != std::string::npos;
  EXPECT_EQ(skipped_notes, 2);
}

TEST(Runner, BlackwellRunsEverythingAndLabelsFp8BlockEmulated) {
  FakeEngine e(100);
  RunRequest req;
  req.plan = build_shapes_plan("4096");
  req.precisions = {Precision::BF16, Precision::FP8Block, Precision::MXFP8, Precision::NVFP4};
  req.modes = {Mode::Autocast};
  req.options.timing.gpu_warmup_s = 0;
  RunResult r = run(e, req);
  EXPECT_EQ(r.precisions.size(), 4u);
  EXPECT_TRUE(r.recipe_options.fp8_block_via_mxfp8);
  bool labelled = false;
  for (const auto& n : r.notes) labelled |= n.rfind("FP8Block: emulated on this GPU via MXFP8", 0) == 0;
  EXPECT_TRUE(labelled);
  EXPECT_TRUE(to_json(r)["recipe_options"]["fp8_block_via_mxfp8"].get<bool>());
}

TEST(Summary, SumsSpeedupsAndNa) {
  RunResult r = fake_run({Mode::Autocast});
  ModeSummary s = summarize_mode(r, 0);
  ASSERT_EQ(s.sums.size(), 3u);  // MXFP8 gated out on cc 9.0
  const double f = plan_flops(r.plan).fprop;
  EXPECT_NEAR(*s.sums[0].fprop, f / 700e12 * 1e3, 1e-9);
  EXPECT_NEAR(*s.sums[0].full_model, 24 * 3 * f / 700e12 * 1e3, 1e-6);
  EXPECT_FALSE(s.sums[2].wgrad.has_value());  // one N/A cell poisons the sum
  EXPECT_FALSE(s.sums[2].full_model.has_value());
  EXPECT_TRUE(s.sums[2].fprop.has_value());
  ASSERT_EQ(s.speedups.size(), 2u);
  EXPECT_EQ(s.speedups[0].name(), "FP8Current vs BF16");
  EXPECT_NEAR(*s.speedups[0].value, 1200.0 / 700.0, 1e-9);
  EXPECT_FALSE(s.speedups[1].value.has_value());
}

TEST(Report, GoldenText) {
  const std::string got = render_text(fake_run({Mode::Autocast, Mode::PreQuantized}));
  const std::string path = std::string(GS_TEST_DATA_DIR) + "/golden_report.txt";
  if (std::getenv("GS_UPDATE_GOLDEN")) { std::ofstream(path) << got; }
  const std::string want = slurp(path);
  ASSERT_FALSE(want.empty()) << "missing " << path << " (run with GS_UPDATE_GOLDEN=1 once and review it)";
  EXPECT_EQ(got, want);
}

TEST(Report, JsonRoundTrip) {
  RunResult a = fake_run({Mode::Autocast, Mode::PreQuantized});
  nlohmann::json j = to_json(a);
  EXPECT_EQ(j["schema"], "gemmscope.result/1");
  EXPECT_EQ(j["gemms"][0]["results"]["autocast"]["BF16"]["status"], "ok");
  EXPECT_EQ(j["gemms"][9]["results"]["autocast"]["FP8Block"]["status"], "n/a");
  EXPECT_TRUE(j["summary"]["autocast"]["per_layer"]["total"]["FP8Block"].is_null());
  RunResult b = from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(to_json(b), j);
  EXPECT_EQ(render_text(b), render_text(a));
}

TEST(Report, JsonRejectsForeignDocuments) {
  EXPECT_THROW(from_json(nlohmann::json::parse(R"({"schema":"other"})")), UsageError);
  EXPECT_THROW(from_json(nlohmann::json::parse("[]")), UsageError);
  nlohmann::json j = to_json(fake_run({Mode::Autocast}));
  j["gemms"][0]["results"]["autocast"].erase("BF16");
  EXPECT_THROW(from_json(j), UsageError);
}

TEST(Report, CsvHasOneRowPerCell) {
  RunResult r = fake_run({Mode::Autocast});
  std::string csv = render_csv(r);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 12 * 3);
  EXPECT_NE(csv.find("autocast,wgrad,attn_out,layer,4096,15872,4096,"), std::string::npos);
  EXPECT_NE(csv.find("n/a,,,,,,,,\"cuBLASLt NOT_SUPPORTED (fake)\""), std::string::npos);
}

TEST(Report, AccuracyTableAndJson) {
  FakeEngine e(90);
  RunRequest req;
  req.plan = build_model_plan(default_config());
  req.precisions = {Precision::BF16, Precision::FP8Current, Precision::MXFP8};
  req.modes = {Mode::Autocast};
  req.accuracy_only = true;
  req.dist = Dist::Outliers;
  RunResult r = run(e, req);
  EXPECT_EQ(e.calls, 0);  // no timing
  ASSERT_TRUE(r.has_accuracy);
  ASSERT_EQ(r.accuracy_precisions.size(), 3u);  // MXFP8 kept: emulated
  const std::string txt = render_text(r);
  EXPECT_NE(txt.find("outliers inputs"), std::string::npos);
  EXPECT_NE(txt.find("9.00e-02*"), std::string::npos) << txt;  // MXFP8 Wgrad, emulated marker
  EXPECT_NE(txt.find("MXFP8 accuracy is emulated"), std::string::npos);
  nlohmann::json j = to_json(r);
  EXPECT_EQ(j["accuracy"]["dist"], "outliers");
  EXPECT_DOUBLE_EQ(j["gemms"][0]["accuracy"]["FP8Current"]["rel_error"].get<double>(), 6e-2);
  EXPECT_TRUE(j["gemms"][0]["accuracy"]["MXFP8"]["emulated"].get<bool>());
  RunResult b = from_json(j);
  EXPECT_EQ(to_json(b), j);
}

TEST(Stats, Summary) {
  Stats s = summarize({3, 1, 2, 10});
  EXPECT_DOUBLE_EQ(s.mean_ms, 4);
  EXPECT_DOUBLE_EQ(s.median_ms, 2.5);
  EXPECT_DOUBLE_EQ(s.min_ms, 1);
  EXPECT_DOUBLE_EQ(s.max_ms, 10);
  EXPECT_NEAR(s.stdev_ms, 4.0825, 1e-4);
  EXPECT_THROW(summarize({}), std::invalid_argument);
}
