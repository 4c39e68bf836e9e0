// gemmscope compare against a prediction: a value inside the prediction's band is never a
// regression, a value outside it is judged by the threshold; the bands of totals and speedups are
// the cells' bands summed as predict sums them; the band survives the JSON round trip.
//
// The hand-made pair: A = the same-GPU prediction of the shipped Qwen2.5-7B H100 run (gemmscope
// predict --gpu H100 of an H100 run), B = the same document made "measured" (bands and the
// predicted method removed, every stdev 0) with one cell, BF16 of the first GEMM of the first
// mode, 1.3x slower. Every other cell and total of B equals A's value exactly.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/analysis/compare.hpp"
#include "core/util/error.hpp"
#include "core/gpu/gpu_spec.hpp"
#include "core/analysis/predict.hpp"
#include "core/report/report.hpp"
#include "test_util.hpp"

using namespace gs;
using nlohmann::json;

namespace {

const GpuDb& db() {
  static const GpuDb d = read_gpu_db_file(std::string(GS_SOURCE_DIR) + "/data/gpus.json");
  return d;
}

const RunResult& qwen7b() {
  static const RunResult r = from_json(read_json_file(std::string(GS_SOURCE_DIR) + "/docs/results/h100_qwen7b.json"),
                                       "h100_qwen7b.json");
  return r;
}

json predicted_doc() {
  const GpuSpec& h100 = db().find("H100");
  return prediction_json(predict_from_run(qwen7b(), "h100_qwen7b.json", h100, h100));
}

// The prediction made "measured": no bands, a measuring method, stdev 0 (so only the band can
// hold a difference).
json as_measured(json doc) {
  doc["timing"]["method"] = "cuda-events";
  doc["timing"]["iters"] = 100;
  doc["device"]["name"] = "NVIDIA H100 80GB HBM3";
  doc.erase("prediction");
  for (json& c : doc["records"]) {
    c["source"] = "measured";
    c.erase("predicted");
    c.erase("low_ms");
    c.erase("high_ms");
    if (c["status"] == "ok") c["stdev_ms"] = 0.0;
  }
  return doc;
}

std::string first_mode(const json& doc) { return doc["modes"][0].get<std::string>(); }

json& first_cell(json& doc) { return test::record(doc, 0, first_mode(doc), "BF16"); }

const CompareCell& bf16_of_first_gemm(const CompareResult& r) {
  const CompareGemmRow& row = r.modes.at(0).gemms.at(0);
  for (const CompareCell& c : row.cells)
    if (c.precision == "BF16") return c;
  throw std::runtime_error("no BF16 cell");
}

}  // namespace

TEST(CompareBands, ReaderKeepsTheBandOfAPredictedCell) {
  const json p = predicted_doc();
  const RunResult r = from_json(p, "predicted");
  EXPECT_TRUE(r.predicted());
  const json& c = test::record(p, 0, first_mode(p), "BF16");
  ASSERT_EQ(c["status"], "ok");
  ASSERT_TRUE(r.cell(0, 0, 0).band.has_value());
  EXPECT_EQ(r.cell(0, 0, 0).band->low_ms, c["low_ms"].get<double>());
  EXPECT_EQ(r.cell(0, 0, 0).band->high_ms, c["high_ms"].get<double>());
  EXPECT_FALSE(qwen7b().predicted());
  EXPECT_FALSE(qwen7b().cell(0, 0, 0).band.has_value());
}

TEST(CompareBands, ReaderRefusesABandWithoutItsMean) {
  json p = predicted_doc();
  json& c = first_cell(p);
  c["low_ms"] = c["mean_ms"].get<double>() * 1.1;  // the band lies above the predicted time
  try {
    from_json(p, "bad.json");
    FAIL() << "a band that does not hold its mean was read";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("must hold its mean_ms"), std::string::npos) << e.what();
  }
}

TEST(CompareBands, SameGpuPredictionAgainstItsRunHasNoRegression) {
  // With a pre-quantized mode the same-GPU prediction is the measured cell itself: every value of
  // the run lies in the prediction's band (the run's own spread), whatever the threshold.
  const json p = predicted_doc();
  const json m = read_json_file(std::string(GS_SOURCE_DIR) + "/docs/results/h100_qwen7b.json");
  for (double t : {0.05, 0.0}) {
    CompareOptions o;
    o.threshold = t;
    const CompareResult r = compare_results(p, m, o);
    EXPECT_TRUE(r.a_predicted);
    EXPECT_FALSE(r.b_predicted);
    EXPECT_EQ(r.regressions, 0) << format_compare_text(r);
    for (const CompareMode& cm : r.modes) {
      EXPECT_EQ(cm.totals_noise, NoiseBasis::Band);
      for (const CompareTotalRow& tr : cm.totals)
        for (const CompareCell& c : tr.cells) {
          if (!c.a_ms) continue;
          EXPECT_EQ(c.noise, NoiseBasis::Band) << tr.what << " " << c.precision;
          EXPECT_TRUE(c.a_band.has_value()) << tr.what << " " << c.precision;
        }
    }
  }
}

TEST(CompareBands, TotalBandIsTheCellsBandsSummedAsPredictSumsThem) {
  // compare's full-model band of a predicted file equals the band predict itself wrote.
  const json p = predicted_doc();
  const CompareResult r = compare_results(p, as_measured(p));
  for (const CompareMode& cm : r.modes)
    for (const CompareTotalRow& tr : cm.totals) {
      if (tr.what != "full model") continue;
      for (const CompareCell& c : tr.cells) {
        const json& want = p["prediction"]["full_model"][cm.mode][c.precision];
        if (!want.is_object()) continue;
        ASSERT_TRUE(c.a_band.has_value());
        EXPECT_NEAR(c.a_band->lo, want["low_ms"].get<double>(), 1e-9 * want["low_ms"].get<double>());
        EXPECT_NEAR(c.a_band->hi, want["high_ms"].get<double>(), 1e-9 * want["high_ms"].get<double>());
        EXPECT_FALSE(c.b_band.has_value());  // B is measured
      }
    }
}

TEST(CompareBands, SlowerThanTheWholeBandIsARegression) {
  json a = predicted_doc();
  json b = as_measured(a);
  const double x = first_cell(a)["mean_ms"].get<double>();
  ASSERT_LT(first_cell(a)["high_ms"].get<double>(), 1.25 * x) << "premise: the same-GPU band is narrow";
  first_cell(b)["mean_ms"] = 1.3 * x;
  const CompareResult r = compare_results(a, b);
  const CompareCell& c = bf16_of_first_gemm(r);
  EXPECT_NEAR(*c.ratio, 1.3, 1e-9);
  EXPECT_EQ(c.noise, NoiseBasis::Band);
  EXPECT_FALSE(c.within_noise);
  EXPECT_EQ(c.verdict, Verdict::Regression);
  EXPECT_TRUE(r.has_regressions());
}

TEST(CompareBands, InsideTheBandIsNeverARegression) {
  // The first cell's band widened by hand to [0.5x, 1.5x]: B's 1.3x lies inside it. The totals'
  // bands widen by the same amounts (0.5x each side), so B's totals (+0.3x) lie inside theirs;
  // B's speedups over BF16 rise, inside [BF16 low / x high, BF16 high / x low].
  json a = predicted_doc();
  json b = as_measured(a);
  const double x = first_cell(a)["mean_ms"].get<double>();
  first_cell(a)["low_ms"] = 0.5 * x;
  first_cell(a)["high_ms"] = 1.5 * x;
  first_cell(b)["mean_ms"] = 1.3 * x;
  const CompareResult r = compare_results(a, b);
  const CompareCell& c = bf16_of_first_gemm(r);
  EXPECT_NEAR(*c.ratio, 1.3, 1e-9);  // far beyond the 5% threshold
  EXPECT_EQ(c.noise, NoiseBasis::Band);
  EXPECT_TRUE(c.within_noise);
  EXPECT_EQ(c.verdict, Verdict::Same);
  EXPECT_EQ(r.regressions, 0) << format_compare_text(r);
  EXPECT_EQ(r.improvements, 0) << format_compare_text(r);
  EXPECT_FALSE(r.different_gpus);  // a prediction names its GPU "... (predicted)": no "ran on" warning
  // The per-layer BF16 total: B's is A's + 0.3x, A's band reaches 0.5x - (old high - x) higher.
  for (const CompareTotalRow& tr : r.modes.at(0).totals) {
    if (tr.what != "per-layer total") continue;
    const CompareCell& t = tr.cells.at(0);
    ASSERT_EQ(t.precision, "BF16");
    EXPECT_NEAR(*t.b_ms - *t.a_ms, 0.3 * x, 1e-9 * *t.a_ms);
    EXPECT_GE(t.a_band->hi - *t.a_ms, 0.5 * x * (1 - 1e-9));  // the others' highs are above their means
    EXPECT_TRUE(t.within_noise);
  }
  const std::string text = format_compare_text(r);
  EXPECT_NE(text.find("A is PREDICTED"), std::string::npos) << text;
  EXPECT_NE(text.find("within band (~)"), std::string::npos) << text;
  EXPECT_NE(text.find("1.300 ~"), std::string::npos) << text;
  EXPECT_NE(format_compare_markdown(r).find("A is PREDICTED"), std::string::npos);
}

TEST(CompareBands, ExitStatusFollowsTheBand) {
  const auto dir = test::scratch_dir("compare_bands");
  json a = predicted_doc();
  json b = as_measured(a);
  const double x = first_cell(a)["mean_ms"].get<double>();
  first_cell(b)["mean_ms"] = 1.3 * x;
  const auto write = [&](const std::string& name, const json& doc) {
    const auto p = dir / name;
    std::ofstream(p) << doc.dump();
    return p.string();
  };
  const std::string pb = write("measured.json", b), narrow = write("predicted.json", a);
  first_cell(a)["low_ms"] = 0.5 * x;
  first_cell(a)["high_ms"] = 1.5 * x;
  const std::string wide = write("predicted_wide.json", a);
  const test::Out out_narrow = test::run_gemmscope("compare " + narrow + " " + pb, dir);
  EXPECT_EQ(out_narrow.rc, 1) << out_narrow.out << out_narrow.err;
  const test::Out out_wide = test::run_gemmscope("compare " + wide + " " + pb, dir);
  EXPECT_EQ(out_wide.rc, 0) << out_wide.out << out_wide.err;
  EXPECT_NE(out_wide.out.find("0 regressions"), std::string::npos) << out_wide.out;
  // Measured first, prediction second: the same judgement.
  const test::Out swapped = test::run_gemmscope("compare " + pb + " " + wide, dir);
  EXPECT_EQ(swapped.rc, 0) << swapped.out << swapped.err;
  EXPECT_NE(swapped.out.find("B is PREDICTED"), std::string::npos) << swapped.out;
  std::filesystem::remove_all(dir);
}
