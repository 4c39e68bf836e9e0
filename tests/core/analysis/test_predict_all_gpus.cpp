// Never inf: every GPU of the shipped database, predicted from a measured run and from the
// datasheet alone with the shipped priors and errors, gives finite numbers and a file the readers
// of report, plot and compare accept; a database row without a needed peak is refused, naming the
// field (CPU only).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "core/analysis/compare.hpp"
#include "core/analysis/predict.hpp"
#include "core/io/input_file.hpp"
#include "core/report/report.hpp"
#include "core/util/error.hpp"
#include "predict_test_data.hpp"

using namespace gs;
using nlohmann::json;

namespace {

const GpuDb& db() { return test::shipped_gpus(); }
const PriorDb& priors() { return test::shipped_priors(); }
const ErrorSet& errors() { return test::shipped_errors(); }
RunResult fixture(const std::string& name) { return test::fixture_run(name); }

// Every number of the document is finite.
void expect_finite(const json& j, const std::string& where) {
  if (j.is_number()) {
    EXPECT_TRUE(std::isfinite(j.get<double>())) << where;
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) expect_finite(*it, where + "." + it.key());
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) expect_finite(j[i], where + "[" + std::to_string(i) + "]");
  }
}

// What `gemmscope report`, `plot` and `compare` do with a file before they print or draw it.
void expect_readable(const Prediction& p, const std::string& what) {
  SCOPED_TRACE(what);
  const json j = prediction_json(p);
  expect_finite(j, what);
  const json reread = json::parse(j.dump());
  RunResult r;
  ASSERT_NO_THROW(r = from_json(reread, what));                 // report's and plot's reader
  EXPECT_NO_THROW(render_text(r));                              // report
  EXPECT_NO_THROW(with_derived_fields(reread, r));              // plot's chart document
  EXPECT_NO_THROW(compare_results(reread, reread));             // compare
  int ok = 0;
  for (const auto& mode : p.cells)
    for (const auto& row : mode)
      for (const PredictedCell& c : row)
        if (c.ok) {
          ++ok;
          EXPECT_GT(c.ms, 0);
          EXPECT_LE(c.low_ms, c.ms);
          EXPECT_GE(c.high_ms, c.ms);
          EXPECT_FALSE(c.band_basis.empty());
        } else {
          EXPECT_FALSE(c.reason.empty());
        }
  EXPECT_GT(ok, 0);
}

}  // namespace

TEST(PredictAllGpus, EveryDatabaseGpuGivesFiniteReadablePredictions) {
  const PredictData data{&priors(), &errors()};
  const RunResult run = fixture("model_5b_both_modes.json");
  const GpuSpec& source = *db().match_device(run.device->name);
  for (const GpuSpec& g : db().gpus) {
    expect_readable(predict_from_run(run, "model_5b_both_modes.json", source, g, data), "from a run onto " + g.key);
    expect_readable(predict_datasheet_only(run.plan, run.modes, run.recipe_options, g, data), "datasheet only on " + g.key);
    // Also without priors and errors (the library's bare form): wider bands, never inf.
    expect_readable(predict_from_run(run, "model_5b_both_modes.json", source, g), "no data, onto " + g.key);
  }
}

TEST(PredictAllGpus, AMissingPeakIsRefusedNamingTheField) {
  GpuSpec g = db().find("B300");
  g.key = "NO-BF16";
  g.tflops[static_cast<int>(PeakFormat::BF16)].reset();
  const RunResult run = fixture("model_5b_both_modes.json");
  const GpuSpec& source = *db().match_device(run.device->name);
  try {
    predict_from_run(run, "f.json", source, g, {&priors(), &errors()});
    FAIL() << "predicted without a BF16 peak";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("NO-BF16 has no dense BF16 peak in the GPU spec database (gpus.json: NO-BF16 "
                                         "tflops.BF16 is null)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(predict_datasheet_only(run.plan, run.modes, run.recipe_options, g), UsageError);
  // An NVFP4 peak missing on a GPU that runs NVFP4: refused for the NVFP4 column, unless it is left out.
  GpuSpec h = db().find("B200");
  h.tflops[static_cast<int>(PeakFormat::NVFP4)].reset();
  EXPECT_THROW(predict_from_run(run, "f.json", source, h), UsageError);
  const Prediction without = predict_from_run(run, "f.json", source, h, {}, {Precision::BF16, Precision::FP8Current, Precision::MXFP8});
  EXPECT_EQ(without.result.precisions.size(), 3u);
  // A column the architecture cannot run stays an N/A cell with its reason.
  const Prediction a100 = predict_from_run(run, "f.json", source, db().find("A100"));
  EXPECT_NE(a100.cells[0][0][static_cast<size_t>(Precision::NVFP4)].reason.find("compute capability"), std::string::npos);
}
