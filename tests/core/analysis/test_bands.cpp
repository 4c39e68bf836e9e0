// Bands from measured prediction errors (core/analysis/bands.hpp) and the overhead split
// (core/analysis/overhead_fit.hpp), on synthetic leave-one-out sets (CPU only).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/analysis/bands.hpp"
#include "core/analysis/overhead_fit.hpp"
#include "core/util/error.hpp"
#include "predict_test_data.hpp"

using namespace gs;
using nlohmann::json;

namespace {

json sample(const std::string& model, const std::string& transfer, const std::string& prec, int cls, double dev,
            const std::string& arch = "hopper") {
  return {{"model", model}, {"arch", arch}, {"transfer", transfer}, {"precision", prec}, {"mode", "training"},
          {"size_class", cls}, {"deviation", dev}};
}
// A list parameter: `doc({x})` with a json parameter is x itself under clang, a one-element list under gcc.
json doc(const std::vector<json>& samples) {
  return {{"schema", "gemmscope.predict_errors/1"}, {"sources", {"a.json"}}, {"samples", json(samples)}};
}

// A synthetic set: model A's FP8 cells in class 2 read 1-4% slow, model B's 2-3% fast; a few BF16.
ErrorSet synthetic(bool with_b = true) {
  json s = json::array();
  for (int i = 0; i < 8; ++i) s.push_back(sample("A", "same-arch", "FP8Current", 2, 0.01 + 0.004 * i));
  if (with_b)
    for (int i = 0; i < 8; ++i) s.push_back(sample("B", "same-arch", "FP8Current", 2, -0.02 - 0.001 * i));
  for (int i = 0; i < 3; ++i) s.push_back(sample("A", "same-arch", "BF16", 3, 0.05));
  s.push_back(sample("A", "datasheet-only", "BF16", 3, 0.20));
  return parse_error_set(doc(s), "e.json");
}

}  // namespace

TEST(Bands, MeasuredBandIsTheRangeOfLikeCells) {
  const ErrorSet set = synthetic();
  const RelBand b = measured_band(set, Transfer::SameArch, Precision::FP8Current, 2, "hopper");
  EXPECT_EQ(b.samples, 16);
  EXPECT_NEAR(b.hi, 0.01 + 0.004 * 7, 1e-12);  // the slowest measurement
  EXPECT_NEAR(b.lo, 0.027, 1e-12);             // the fastest
  EXPECT_TRUE(b.arch_matched);
  EXPECT_NE(b.basis.find("16 FP8Current size-class-mid cells of 2 models on hopper"), std::string::npos) << b.basis;
}

TEST(Bands, LeaveOneOutFallsBackToWiderPoolsAndAlwaysContainsThePrediction) {
  // Without model B, A's FP8 cells all read slow: the band still contains the prediction (lo 0).
  const ErrorSet only_a = synthetic(false);
  const RelBand a = measured_band(only_a, Transfer::SameArch, Precision::FP8Current, 2, "hopper");
  EXPECT_EQ(a.lo, 0);
  EXPECT_GT(a.hi, 0.03);
  // BF16 has 3 cells in its class (< kMinSamples) and 3 overall: every same-arch cell is used.
  const RelBand bf = measured_band(only_a, Transfer::SameArch, Precision::BF16, 3, "hopper");
  EXPECT_EQ(bf.samples, 11);
  EXPECT_NE(bf.basis.find("(all precisions)"), std::string::npos) << bf.basis;
  // Another generation: the Hopper samples are used, and the band says they are not its own.
  const RelBand bw = measured_band(only_a, Transfer::SameArch, Precision::FP8Current, 2, "blackwell");
  EXPECT_FALSE(bw.arch_matched);
  EXPECT_EQ(bw.samples, 8);
  // A transfer kind with no samples: not measured.
  EXPECT_EQ(measured_band(only_a, Transfer::OtherArch, Precision::BF16, 3, "hopper").samples, 0);
}

TEST(Bands, CombinationAndTimes) {
  const RelBand c = combine({{0.03, 0.04, 5, "a"}, {0.04, 0.03, 0, "b"}});
  EXPECT_NEAR(c.lo, 0.05, 1e-12);
  EXPECT_NEAR(c.hi, 0.05, 1e-12);
  EXPECT_EQ(c.basis, "a + b");
  const auto [lo, hi] = band_range_ms(10, c);
  EXPECT_NEAR(lo, 9.5, 1e-12);
  EXPECT_NEAR(hi, 10.5, 1e-12);
  // An efficiency 20% above its prior is 1/1.2 of the time; 20% below, 1/0.8.
  const RelBand s = band_from_efficiency_spread(0.2, 0.2, "spread");
  EXPECT_NEAR(s.lo, 1 - 1 / 1.2, 1e-12);
  EXPECT_NEAR(s.hi, 1 / 0.8 - 1, 1e-12);
}

TEST(Bands, ParserRefusesBadSamples) {
  const auto refused = [](json d, const std::string& part) {
    try {
      parse_error_set(d, "e.json");
      ADD_FAILURE() << "accepted: " << d.dump();
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  refused(json{{"schema", "gemmscope.priors/1"}}, "not a gemmscope prediction-error file");
  refused(doc({sample("A", "sideways", "BF16", 1, 0)}), "transfer must be");
  refused(doc({sample("A", "same-arch", "FP9", 1, 0)}), "precision");
  refused(doc({sample("A", "same-arch", "BF16", 4, 0)}), "size_class must be an integer in 0..3");
  refused(doc({sample("A", "same-arch", "BF16", 1, -1.5)}), "deviation must be a number above -1");
}

TEST(Bands, ShippedErrorsCoverTheHopperRuns) {
  const ErrorSet& set = test::shipped_errors();
  int same = 0, sheet = 0;
  for (const ErrorSample& s : set.samples) {
    same += s.transfer == Transfer::SameArch;
    sheet += s.transfer == Transfer::DatasheetOnly;
  }
  EXPECT_GE(same, 200);
  EXPECT_GE(sheet, 200);
  EXPECT_GE(set.sources.size(), 4u);
}

TEST(OverheadFit, SplitsAFixedPartFromTheBytes) {
  // overhead = 50 us + 1 ns per byte, exactly: the fit recovers both.
  std::vector<std::pair<double, double>> pts;
  for (double b : {1e5, 2e5, 4e5, 8e5}) pts.emplace_back(b, 50e-6 + 1e-9 * b);
  const OverheadFit f = fit_overhead(pts);
  ASSERT_TRUE(f.fitted);
  EXPECT_NEAR(f.fixed_s, 50e-6, 1e-12);
  EXPECT_NEAR(f.per_byte_s, 1e-9, 1e-15);
  // Carried: the fixed part unchanged, the rest scaled (half the bytes ratio x a 0.5 bandwidth ratio).
  EXPECT_NEAR(transfer_overhead(f, 250e-6, 1.0, 0.5), 50e-6 + 100e-6, 1e-12);
  // Too few GEMMs, or bytes that hardly vary: no fit, everything scales.
  EXPECT_FALSE(fit_overhead({{1e5, 1e-4}, {2e5, 2e-4}}).fitted);
  EXPECT_FALSE(fit_overhead({{1e5, 1e-4}, {1.1e5, 2e-4}, {1.2e5, 1e-4}, {1.3e5, 3e-4}}).fitted);
  EXPECT_NEAR(transfer_overhead(OverheadFit{}, 250e-6, 1.0, 0.5), 125e-6, 1e-12);
  // A negative measured overhead (noise) is scaled as a whole, never given a fixed part.
  EXPECT_NEAR(transfer_overhead(f, -20e-6, 1.0, 0.5), -10e-6, 1e-12);
}
