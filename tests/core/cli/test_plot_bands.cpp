// Charts of a prediction draw its bands, not stdevs: gemmscope sums them into "totals"
// (report_json.cpp) and the chart script reads them (tools/gemmscope_charts/common.py: is_predicted,
// run_total_band). The reading runs wherever some python3 exists (no matplotlib needed), the
// rendering where matplotlib is installed.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/gpu/gpu_spec.hpp"
#include "core/analysis/predict.hpp"
#include "core/report/report.hpp"
#include "core/util/error.hpp"
#include "test_util.hpp"

using namespace gs;
using nlohmann::json;

namespace {

const std::string kScript = std::string(GS_SOURCE_DIR) + "/tools/gemmscope_plot.py";

// Prints "<predicted|measured> <low> <high>" (or "... none") of run_total_band(doc, mode, prec).
constexpr const char* kBandProbe = R"(import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("gp", sys.argv[1])
gp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gp)
doc = json.load(open(sys.argv[2]))
b = gp.run_total_band(doc, sys.argv[3], sys.argv[4])
print("predicted" if gp.is_predicted(doc) else "measured", "none" if b is None else "%.17g %.17g" % b)
)";

struct Probe {
  test::fs::path dir;
  Probe() : dir(test::scratch_dir("plot_bands")) { std::ofstream(dir / "probe.py") << kBandProbe; }
  ~Probe() {
    std::error_code ec;
    test::fs::remove_all(dir, ec);
  }
  test::Out band(const json& doc, const std::string& mode, const std::string& prec) const {
    std::ofstream(dir / "doc.json") << doc.dump();
    return test::run_shell(fmt::format("python3 {} {} {} {} {}", (dir / "probe.py").string(), kScript,
                                       (dir / "doc.json").string(), mode, prec),
                           dir);
  }
};

bool have_python() { return std::system("python3 -c pass >/dev/null 2>&1") == 0; }

// The interpreter the CLI would pick for charts: $GEMMSCOPE_PYTHON, python3, /usr/bin/python3, the
// first that imports matplotlib; empty when none does.
std::string matplotlib_python() {
  std::vector<std::string> cands;
  if (const char* e = std::getenv("GEMMSCOPE_PYTHON"); e && *e) cands.emplace_back(e);
  cands.emplace_back("python3");
  cands.emplace_back("/usr/bin/python3");
  for (const auto& c : cands)
    if (std::system(("'" + c + "' -c 'import matplotlib; matplotlib.use(\"Agg\"); import matplotlib.pyplot' >/dev/null 2>&1").c_str()) == 0)
      return c;
  return "";
}

// Two shapes, BF16 predicted 2.0 ms in [1.5, 3.0] and 1.0 ms in [0.75, 1.25], and the totals
// gemmscope wrote for them (here by hand: [2.25, 4.25]).
json two_shapes() {
  return json::parse(R"({"kind": "shapes", "timing": {"method": "predicted"}, "gemms": [
    {"m": 1, "k": 1, "n": 1, "results": {"per-gemm": {"BF16":
      {"status": "ok", "mean_ms": 2.0, "predicted": true, "low_ms": 1.5, "high_ms": 3.0}}}},
    {"m": 1, "k": 1, "n": 1, "results": {"per-gemm": {"BF16":
      {"status": "ok", "mean_ms": 1.0, "predicted": true, "low_ms": 0.75, "high_ms": 1.25}}}}],
    "totals": {"per-gemm": {"BF16": {"ms": 3.0, "spread_ms": 0.0, "low_ms": 2.25, "high_ms": 4.25}}}})");
}

json predicted_qwen7b() {
  static const GpuDb db = read_gpu_db_file(std::string(GS_SOURCE_DIR) + "/data/gpus.json");
  const RunResult run =
      from_json(read_json_file(std::string(GS_SOURCE_DIR) + "/docs/results/h100_qwen7b.json"), "h100_qwen7b.json");
  const GpuSpec& h100 = db.find("H100");
  return prediction_json(predict_from_run(run, "h100_qwen7b.json", h100, h100));
}

}  // namespace

TEST(PlotBands, TheScriptReadsTheWrittenBand) {
  if (!have_python()) GTEST_SKIP() << "no python3";
  const Probe p;
  test::Out o = p.band(two_shapes(), "per-gemm", "BF16");
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out, "predicted 2.25 4.25\n") << o.err;
  // gemmscope's band, not a sum of the cells' (which would be [2.25, 4.25] too)
  json edited = two_shapes();
  edited["totals"]["per-gemm"]["BF16"]["low_ms"] = 2.5;
  o = p.band(edited, "per-gemm", "BF16");
  EXPECT_EQ(o.out, "predicted 2.5 4.25\n") << o.err;
  // A measured file has no band.
  json m = two_shapes();
  m["timing"]["method"] = "cuda-events";
  for (json& g : m["gemms"]) g["results"]["per-gemm"]["BF16"].erase("predicted");
  o = p.band(m, "per-gemm", "BF16");
  EXPECT_EQ(o.out, "measured none\n") << o.err;
}

TEST(PlotBands, BandWithoutItsMeanIsRefused) {
  // gemmscope's reader refuses it (and `gemmscope plot` with it, before the script runs).
  json d = predicted_qwen7b();
  const int at = test::record_index(d, 0, "training", "BF16");
  json& c = test::record(d, 0, "training", "BF16");
  c["low_ms"] = c["mean_ms"].get<double>() * 1.5;
  std::string err;
  try {
    (void)from_json(d, "pred.json");
  } catch (const UsageError& e) {
    err = e.what();
  }
  EXPECT_NE(err.find(fmt::format("pred.json: records[{}]: a predicted cell's band low_ms..high_ms", at)),
            std::string::npos) << err;
  EXPECT_NE(err.find("must hold its mean_ms"), std::string::npos) << err;
}

TEST(PlotBands, FullModelBandIsPredictsOwn) {
  // The chart draws the full-model band gemmscope wrote into "totals": the one predict sums.
  if (!have_python()) GTEST_SKIP() << "no python3";
  const Probe p;
  const json doc = predicted_qwen7b();
  for (const std::string mode : {"training", "pre-quantized"})
    for (const std::string prec : {"BF16", "FP8Current"}) {
      SCOPED_TRACE(mode + " " + prec);
      const json& want = doc["prediction"]["full_model"][mode][prec];
      ASSERT_TRUE(want.is_object());
      const test::Out o = p.band(doc, mode, prec);
      ASSERT_EQ(o.rc, 0) << o.err;
      std::istringstream ss(o.out);
      std::string kind;
      double lo = 0, hi = 0;
      ss >> kind >> lo >> hi;
      EXPECT_EQ(kind, "predicted");
      EXPECT_NEAR(lo, want["low_ms"].get<double>(), 1e-9 * want["low_ms"].get<double>());
      EXPECT_NEAR(hi, want["high_ms"].get<double>(), 1e-9 * want["high_ms"].get<double>());
    }
}

TEST(PlotBands, PredictedModelChartDrawsBandsWithATrueLegend) {
  const std::string py = matplotlib_python();
  if (py.empty()) GTEST_SKIP() << "no python3 with matplotlib: apt-get install python3-matplotlib";
  const Probe p;
  std::ofstream(p.dir / "pred.json") << predicted_qwen7b().dump();
  const auto svg = p.dir / "pred.svg";
  const test::Out o = test::run_shell(
      fmt::format("'{}' {} {} -o {} --mode training", py, kScript, (p.dir / "pred.json").string(), svg.string()), p.dir);
  ASSERT_EQ(o.rc, 0) << o.out << o.err;
  const std::string text = test::slurp(svg);
  EXPECT_NE(text.find("id=\"err:BF16\""), std::string::npos);  // a band drawn on the BF16 bar
  EXPECT_NE(text.find("band: predicted"), std::string::npos);
  EXPECT_EQ(text.find("all passes measured"), std::string::npos);  // no stdev legend for predicted times
}
