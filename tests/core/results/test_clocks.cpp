// Clock-aware summaries: time-weighted mean clock per recipe, the steady clock, skew warnings and
// boosted cells, on hand-built results whose answers are worked out in the test.
#include <gtest/gtest.h>

#include "core/results/clocks.hpp"
#include "core/report/report.hpp"

using namespace gs;

namespace {

Cell cell(double ms, int mhz) {
  Stats s;
  s.mean_ms = s.median_ms = s.min_ms = s.max_ms = ms;
  s.iters = 10;
  Cell c = Cell::measured(s);
  if (mhz > 0) c.clock = ClockSample{mhz, 1980, 0};
  return c;
}

// Two GEMMs x {BF16, FP8Current}, one mode; clocks chosen per cell.
RunResult run_with(const std::vector<std::vector<Cell>>& per_gemm) {
  RunResult r;
  r.plan = build_shapes_plan("1024,2048");
  r.modes = {Mode::PreQuantized};
  r.precisions = {Precision::BF16, Precision::FP8Current};
  r.allocate_cells();
  for (size_t g = 0; g < per_gemm.size(); ++g)
    for (size_t p = 0; p < per_gemm[g].size(); ++p) r.cell(0, g, p) = per_gemm[g][p];
  return r;
}

}  // namespace

TEST(Clocks, TimeWeightedMeanPerRecipeAndSteadyClock) {
  // BF16: 1 ms at 1400 + 3 ms at 1600 -> (1400 + 4800) / 4 = 1550.
  // FP8:  1 ms at 1500 + 1 ms at 1500 -> 1500.
  const RunResult r = run_with({{cell(1, 1400), cell(1, 1500)}, {cell(3, 1600), cell(1, 1500)}});
  const ClockSummary s = summarize_clocks(r);
  ASSERT_TRUE(s.precision_mean_mhz[0] && s.precision_mean_mhz[1]);
  EXPECT_DOUBLE_EQ(*s.precision_mean_mhz[0], 1550.0);
  EXPECT_DOUBLE_EQ(*s.precision_mean_mhz[1], 1500.0);
  // Weights sorted by clock: 1400 (1), 1500 (2), 1600 (3); half of 6 is reached at 1500.
  ASSERT_TRUE(s.steady_mhz);
  EXPECT_DOUBLE_EQ(*s.steady_mhz, 1500.0);
  EXPECT_TRUE(s.boosted.empty());           // 1600 is within 10% of 1500
  EXPECT_TRUE(clock_warnings(r).empty());  // 1500 vs 1550 is -3.2%: no warning
}

TEST(Clocks, SkewBeyondFivePercentWarnsWithTheNumbers) {
  // FP8 at 1300 vs BF16 at 1400: -7.1%.
  const RunResult r = run_with({{cell(2, 1400), cell(1, 1300)}, {cell(2, 1400), cell(1, 1300)}});
  const auto w = clock_warnings(r);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("FP8Current ran at a mean SM clock of 1300 MHz, -7.1% from BF16's 1400 MHz"), std::string::npos) << w[0];
}

TEST(Clocks, BoostedCellIsFlaggedAndNamed) {
  // Steady 1400 (6 of 7 ms); one 1 ms FP8 cell at 1980 is > 10% above it.
  const RunResult r = run_with({{cell(3, 1400), cell(1, 1980)}, {cell(3, 1400), cell(0.0, 0)}});
  const ClockSummary s = summarize_clocks(r);
  ASSERT_EQ(s.boosted.size(), 1u);
  EXPECT_EQ(s.boosted[0].gemm, 0u);
  EXPECT_EQ(s.boosted[0].prec, 1u);
  const auto w = clock_warnings(r);
  bool found = false;
  for (const auto& x : w)
    if (x.find("1 cell(s) sampled more than 10% above the run's steady clock of 1400 MHz") != std::string::npos &&
        x.find("FP8Current (1980 MHz)") != std::string::npos)
      found = true;
  EXPECT_TRUE(found) << (w.empty() ? std::string("no warnings") : w.back());
}

// A cell far below its recipe's best TFLOP/s (a small or launch-bound GEMM) at a high clock is its
// own steady state: counted as light, not flagged as a transient; a heavy one still is.
TEST(Clocks, LightCellsAboveTheSteadyClockAreNotTransients) {
  // 1024^3 = 2.1 GFLOP, 2048^3 = 17.2 GFLOP. BF16: gemm 1 at 17.2 GFLOP/ms is the best; gemm 0 at
  // 2.1 GFLOP / 1 ms is 12% of it (light). FP8: gemm 0 in 0.1 ms = 21 GFLOP/ms is the best (heavy).
  const RunResult r = run_with({{cell(1, 1980), cell(0.1, 1980)}, {cell(1, 1400), cell(3, 1400)}});
  const ClockSummary s = summarize_clocks(r);
  ASSERT_TRUE(s.steady_mhz);
  EXPECT_DOUBLE_EQ(*s.steady_mhz, 1400.0);
  EXPECT_EQ(s.light_above, 1u);
  ASSERT_EQ(s.boosted.size(), 1u);
  EXPECT_EQ(s.boosted[0].prec, 1u);
  bool light_note = false;
  for (const auto& w : clock_warnings(r)) light_note |= w.find("1 light cell(s)") != std::string::npos;
  EXPECT_TRUE(light_note);
}

TEST(Clocks, NoSamplesMeansNoClaims) {
  const RunResult r = run_with({{cell(1, 0), cell(1, 0)}, {cell(1, 0), cell(1, 0)}});
  const ClockSummary s = summarize_clocks(r);
  EXPECT_FALSE(s.steady_mhz);
  EXPECT_FALSE(s.precision_mean_mhz[0]);
  EXPECT_TRUE(clock_warnings(r).empty());
  EXPECT_EQ(to_json(r).count("clocks"), 0u);
}

TEST(Clocks, JsonCarriesTheSummary) {
  const RunResult r = run_with({{cell(1, 1400), cell(1, 1500)}, {cell(3, 1600), cell(1, 1500)}});
  const auto j = to_json(r);
  ASSERT_TRUE(j.contains("clocks"));
  EXPECT_DOUBLE_EQ(j["clocks"]["steady_sm_mhz"].get<double>(), 1500.0);
  EXPECT_DOUBLE_EQ(j["clocks"]["mean_sm_mhz"]["BF16"].get<double>(), 1550.0);
}

// Above the steady clock at the power cap (NVML's power-cap reason in its samples): the cell's own
// clock under the cap, counted and noted, never flagged as a transient.
TEST(Clocks, CellsAboveTheSteadyClockAtThePowerCapAreNotTransients) {
  Cell capped = cell(1, 1900);
  capped.clock->reasons = ClockSample::kPowerCap;
  const RunResult r = run_with({{cell(3, 1400), capped}, {cell(3, 1400), cell(0.0, 0)}});
  const ClockSummary s = summarize_clocks(r);
  EXPECT_TRUE(s.boosted.empty());
  EXPECT_EQ(s.capped_above, 1u);
  bool note = false;
  for (const auto& w : clock_warnings(r)) {
    note |= w.find("1 cell(s) ran more than 10% above the steady clock of 1400 MHz at the power cap") != std::string::npos;
    EXPECT_EQ(w.find("boost transient"), std::string::npos) << w;
  }
  EXPECT_TRUE(note);
  EXPECT_EQ(to_json(r)["clocks"]["capped_above_cells"], 1);
  EXPECT_EQ(to_json(r)["clocks"]["boosted_cells"], 0);
}
