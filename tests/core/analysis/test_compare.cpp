// gemmscope compare: ratios, flags, matching and input checks on the fixtures in tests/data.
// compare_b.json is compare_a.json with every FP8Current time x1.10 and every FP8Delayed time
// x0.95 (BF16 and FP8Block unchanged; FP8Block wgrad MLP Down is n/a in both).
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/analysis/compare.hpp"
#include "core/util/error.hpp"
#include "core/report/report.hpp"

namespace {

using gs::CompareOptions;
using gs::UsageError;
using gs::Verdict;
using nlohmann::json;

const std::string kData = GS_TEST_DATA_DIR;

json load(const std::string& name) { return gs::load_result_json(kData + "/" + name); }

const gs::CompareCell& cell_of(const gs::CompareGemmRow& row, const std::string& prec) {
  for (const auto& c : row.cells)
    if (c.precision == prec) return c;
  throw std::runtime_error("no cell " + prec);
}

std::filesystem::path scratch() {
  return std::filesystem::temp_directory_path() / ("gs_compare_test_" + std::to_string(getpid()));
}

class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(scratch(), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kCleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

std::string temp_file(const std::string& name, const std::string& content) {
  const auto dir = scratch();
  std::filesystem::create_directories(dir);
  const auto p = dir / name;
  std::ofstream(p) << content;
  return p.string();
}

template <class F>
std::string usage_error_of(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

TEST(Compare, KnownRatiosPerGemm) {
  const auto r = gs::compare_files(kData + "/compare_a.json", kData + "/compare_b.json");
  ASSERT_EQ(r.modes.size(), 1u);
  EXPECT_EQ(r.modes[0].mode, "per-gemm");  // the file's old name "autocast", read as per-gemm
  EXPECT_EQ(r.precisions, (std::vector<std::string>{"BF16", "FP8Current", "FP8Delayed", "FP8Block"}));
  const auto& rows = r.modes[0].gemms;
  ASSERT_EQ(rows.size(), 12u);
  EXPECT_TRUE(r.unmatched_a.empty());
  EXPECT_TRUE(r.unmatched_b.empty());
  for (const auto& row : rows) {
    SCOPED_TRACE(row.pass + " " + row.op);
    ASSERT_TRUE(cell_of(row, "BF16").ratio);
    EXPECT_NEAR(*cell_of(row, "BF16").ratio, 1.0, 1e-9);
    EXPECT_EQ(cell_of(row, "BF16").verdict, Verdict::Same);
    ASSERT_TRUE(cell_of(row, "FP8Current").ratio);
    EXPECT_NEAR(*cell_of(row, "FP8Current").ratio, 1.10, 1e-6);
    EXPECT_EQ(cell_of(row, "FP8Current").verdict, Verdict::Regression);
    ASSERT_TRUE(cell_of(row, "FP8Delayed").ratio);
    EXPECT_NEAR(*cell_of(row, "FP8Delayed").ratio, 0.95, 1e-6);
    EXPECT_EQ(cell_of(row, "FP8Delayed").verdict, Verdict::Improvement);
  }
  // the one n/a cell of the fixtures: FP8Block wgrad MLP Down, n/a in both files
  int both_na = 0;
  for (const auto& row : rows) {
    const auto& c = cell_of(row, "FP8Block");
    if (c.verdict == Verdict::BothNA) {
      ++both_na;
      EXPECT_EQ(row.pass, "wgrad");
      EXPECT_EQ(row.op, "mlp_down");
      EXPECT_FALSE(c.ratio);
    }
  }
  EXPECT_EQ(both_na, 1);
  // 12 GEMMs + per-layer + full-model totals + the speedup vs BF16, for FP8Current (slower) and
  // FP8Delayed (faster)
  EXPECT_EQ(r.regressions, 15);
  EXPECT_EQ(r.improvements, 15);
  EXPECT_TRUE(r.has_regressions());
}

TEST(Compare, TotalsFromSummaries) {
  const auto r = gs::compare_files(kData + "/compare_a.json", kData + "/compare_b.json");
  const auto& totals = r.modes.at(0).totals;
  ASSERT_EQ(totals.size(), 2u);
  EXPECT_EQ(totals[0].what, "per-layer total");
  EXPECT_EQ(totals[1].what, "full model");
  for (const auto& t : totals) {
    for (const auto& c : t.cells) {
      SCOPED_TRACE(t.what + " " + c.precision);
      if (c.precision == "FP8Block") {  // null in both summaries (one n/a cell)
        EXPECT_EQ(c.verdict, Verdict::BothNA);
        continue;
      }
      ASSERT_TRUE(c.ratio);
      const double want = c.precision == "FP8Current" ? 1.10 : c.precision == "FP8Delayed" ? 0.95 : 1.0;
      EXPECT_NEAR(*c.ratio, want, 1e-5);
    }
  }
  // the totals are summarize_mode's sums of the cells; for the fixture they are the summary it holds
  const json a = load("compare_a.json");
  EXPECT_DOUBLE_EQ(*totals[0].cells[0].a_ms, a["summary"]["autocast"]["per_layer"]["total"]["BF16"].get<double>());
}

// Totals come from the cells (summarize_mode), not from the file's "summary".
TEST(Compare, TotalsAreTheSumsOfTheCells) {
  const json a = load("compare_a.json");
  json b = a;  // every BF16 time x1.5, the summary left as it was
  for (auto& g : b["gemms"]) g["results"]["autocast"]["BF16"]["mean_ms"] = g["results"]["autocast"]["BF16"]["mean_ms"].get<double>() * 1.5;
  auto r = gs::compare_results(a, b);
  const auto& totals = r.modes.at(0).totals;
  ASSERT_EQ(totals.size(), 2u);
  for (const auto& t : totals) {
    SCOPED_TRACE(t.what);
    ASSERT_TRUE(t.cells.at(0).ratio);
    EXPECT_EQ(t.cells[0].precision, "BF16");
    EXPECT_NEAR(*t.cells[0].ratio, 1.5, 1e-9);
  }

  // full model = layers x per-layer total + the GEMMs run once per step (the LM head)
  const json lm = load("model_lmhead_b200.json");
  json lm2 = lm;
  double layer = 0, once = 0;
  for (auto& g : lm2["gemms"]) {
    const double ms = g["results"]["autocast"]["BF16"]["mean_ms"].get<double>();
    if (g["scope"] == "model") {
      once += ms;
      g["results"]["autocast"]["BF16"]["mean_ms"] = 2 * ms;  // only the LM head gets slower
    } else {
      layer += ms;
    }
  }
  ASSERT_GT(once, 0);
  const double layers = lm["config"]["num_hidden_layers"].get<double>();
  r = gs::compare_results(lm, lm2);
  const auto& lt = r.modes.at(0).totals;
  ASSERT_EQ(lt.at(0).cells.at(0).precision, "BF16");
  EXPECT_NEAR(*lt[0].cells[0].a_ms, layer, 1e-9);
  EXPECT_NEAR(*lt[0].cells[0].ratio, 1.0, 1e-12);
  EXPECT_NEAR(*lt[1].cells[0].a_ms, layers * layer + once, 1e-9);
  EXPECT_NEAR(*lt[1].cells[0].b_ms, layers * layer + 2 * once, 1e-9);
}

// compare_results on RunResults: cells are read from RunResult::cells, GEMMs from plan.gemms.
TEST(Compare, RunResultsDirectly) {
  const gs::RunResult a = gs::from_json(load("compare_a.json"), "A");
  gs::RunResult b = a;
  ASSERT_EQ(gs::to_string(b.precisions.at(0)), std::string("BF16"));
  b.cell(0, 4, 0).stats.mean_ms *= 2;  // autocast, dgrad QKV, BF16
  const auto r = gs::compare_results(a, b);
  const auto& row = r.modes.at(0).gemms.at(4);
  EXPECT_EQ(row.pass, "dgrad");
  EXPECT_EQ(row.op, "qkv");
  EXPECT_EQ(row.label, "QKV Proj");
  EXPECT_NEAR(*cell_of(row, "BF16").ratio, 2.0, 1e-12);
  EXPECT_EQ(cell_of(row, "BF16").verdict, Verdict::Regression);
  EXPECT_EQ(r.regressions, 3);  // the GEMM, the per-layer total, the full model

  b.dry_run = true;
  EXPECT_NE(usage_error_of([&] { gs::compare_results(a, b); }).find("B is a dry run"), std::string::npos);
  gs::RunResult accuracy_only = a;
  accuracy_only.modes.clear();
  accuracy_only.records.clear();
  EXPECT_NE(usage_error_of([&] { gs::compare_results(accuracy_only, a); }).find("A: \"modes\" must be a non-empty list"),
            std::string::npos);
}

// Modes are read with mode_from_string and compared by their names; --mode is matched as written.
TEST(Compare, ModesAreComparedByName) {
  const json both = load("model_5b_both_modes.json");
  json alias = both;  // an older spelling of pre-quantized
  alias["modes"] = {"autocast", "prequantized"};
  for (auto& g : alias["gemms"]) {
    g["results"]["prequantized"] = g["results"]["pre-quantized"];
    g["results"].erase("pre-quantized");
  }
  auto r = gs::compare_results(both, alias);
  ASSERT_EQ(r.modes.size(), 2u);
  EXPECT_EQ(r.modes[1].mode, "pre-quantized");
  EXPECT_TRUE(r.only_a_modes.empty());
  EXPECT_TRUE(r.only_b_modes.empty());
  EXPECT_EQ(r.regressions + r.improvements, 0);

  CompareOptions o;
  o.mode = "foo";
  EXPECT_NE(usage_error_of([&] { gs::compare_results(both, both, o); })
                .find("mode \"foo\" is not in either file (modes of A: per-gemm, pre-quantized; of B: per-gemm, pre-quantized)"),
            std::string::npos);
}

TEST(Compare, ThresholdDecidesTheFlags) {
  const json a = load("compare_a.json"), b = load("compare_b.json");
  CompareOptions o;
  o.threshold = 0.12;  // 1.10 and 1/0.95 = 1.053 both inside
  auto r = gs::compare_results(a, b, o);
  EXPECT_EQ(r.regressions, 0);
  EXPECT_EQ(r.improvements, 0);
  EXPECT_FALSE(r.has_regressions());
  o.threshold = 0.06;  // 1.10 flagged, 1.053 not
  r = gs::compare_results(a, b, o);
  EXPECT_EQ(r.regressions, 15);
  EXPECT_EQ(r.improvements, 0);
  o.threshold = 0.0;  // identical BF16 times are never flagged
  r = gs::compare_results(a, b, o);
  EXPECT_EQ(r.regressions, 15);
  EXPECT_EQ(r.improvements, 15);
}

TEST(Compare, SelfComparisonIsClean) {
  const json a = load("compare_a.json");
  const auto r = gs::compare_results(a, a);
  EXPECT_EQ(r.regressions, 0);
  EXPECT_EQ(r.improvements, 0);
  EXPECT_NE(gs::format_compare_text(r).find("Result: 0 regressions, 0 improvements"), std::string::npos);
}

TEST(Compare, UnmatchedGemmsAreReported) {
  const json a = load("compare_a.json");
  json b = load("compare_b.json");
  b["gemms"][1]["n"] = 4000;  // fprop attn_out no longer matches
  b["gemms"].erase(b["gemms"].begin() + 5);  // dgrad attn_out gone
  const auto r = gs::compare_results(a, b);
  EXPECT_EQ(r.modes.at(0).gemms.size(), 10u);
  EXPECT_EQ(r.unmatched_a, (std::vector<std::string>{"fprop attn_out 15872x4096x4096", "dgrad attn_out 15872x4096x4096"}));
  EXPECT_EQ(r.unmatched_b, (std::vector<std::string>{"fprop attn_out 15872x4096x4000"}));
  const std::string text = gs::format_compare_text(r);
  EXPECT_NE(text.find("only in A: dgrad attn_out 15872x4096x4096"), std::string::npos);
  EXPECT_NE(text.find("only in B: fprop attn_out 15872x4096x4000"), std::string::npos);
}

TEST(Compare, LostCellIsARegression) {
  const json a = load("compare_a.json");
  json b = a;
  b["gemms"][0]["results"]["autocast"]["BF16"] = {{"status", "n/a"}, {"reason", "cuBLASLt: NOT_SUPPORTED"}};
  const auto r = gs::compare_results(a, b);
  const auto& c = cell_of(r.modes.at(0).gemms.at(0), "BF16");
  EXPECT_EQ(c.verdict, Verdict::Regression);
  EXPECT_TRUE(c.a_ms);
  EXPECT_FALSE(c.b_ms);
  // the GEMM, B's BF16 per-layer and full-model totals, which the lost cell makes n/a, and the
  // speedups vs BF16 it makes n/a (FP8Current, FP8Delayed; FP8Block's is n/a in both)
  EXPECT_EQ(r.regressions, 5);
  EXPECT_NE(gs::format_compare_text(r).find("ok->n/a R"), std::string::npos);
  const auto back = gs::compare_results(b, a);
  EXPECT_EQ(back.regressions, 0);
  EXPECT_EQ(back.improvements, 5);
}

TEST(Compare, PrecisionsInOneFileOnlyAreListed) {
  const json a = load("compare_a.json");
  json b = a;
  b["precisions"] = {"BF16", "FP8Current"};
  const auto r = gs::compare_results(a, b);
  EXPECT_EQ(r.precisions, (std::vector<std::string>{"BF16", "FP8Current"}));
  EXPECT_EQ(r.only_a_precisions, (std::vector<std::string>{"FP8Delayed", "FP8Block"}));
  EXPECT_EQ(r.modes.at(0).gemms.at(0).cells.size(), 2u);
}

TEST(Compare, ModeOption) {
  const json both = load("model_5b_both_modes.json");
  CompareOptions o;
  auto r = gs::compare_results(both, both, o);
  ASSERT_EQ(r.modes.size(), 2u);
  EXPECT_EQ(r.modes[1].mode, "pre-quantized");
  o.mode = "pre-quantized";
  r = gs::compare_results(both, both, o);
  ASSERT_EQ(r.modes.size(), 1u);
  EXPECT_EQ(r.modes[0].mode, "pre-quantized");
  // the autocast-only file has no pre-quantized results
  const json a = load("compare_a.json");
  EXPECT_NE(usage_error_of([&] { gs::compare_results(a, both, o); }).find("mode \"pre-quantized\" is not in A"),
            std::string::npos);
  // without --mode the common mode is compared and the other one is listed
  r = gs::compare_results(a, both);
  ASSERT_EQ(r.modes.size(), 1u);
  EXPECT_EQ(r.only_b_modes, (std::vector<std::string>{"pre-quantized"}));
}

TEST(Compare, BadFilesAreUsageErrors) {
  EXPECT_NE(usage_error_of([] { gs::load_result_json(kData + "/no_such_file.json"); }).find("cannot read"),
            std::string::npos);
  const std::string not_json = temp_file("not_json.json", "{\"schema\": \"gemmscope.result/1\", ");
  EXPECT_NE(usage_error_of([&] { gs::load_result_json(not_json); }).find(not_json + ": not valid JSON"), std::string::npos);

  json doc = load("compare_a.json");
  doc["schema"] = "gemmscope.result/4";
  EXPECT_NE(usage_error_of([&] { gs::validate_result_json(doc, "x.json"); }).find("x.json has schema \"gemmscope.result/4\""),
            std::string::npos);

  json dry = load("compare_a.json");
  dry["dry_run"] = true;
  for (auto& g : dry["gemms"]) g.erase("results");
  dry.erase("summary");
  const std::string dry_path = temp_file("dry.json", dry.dump());
  EXPECT_NE(usage_error_of([&] { gs::load_result_json(dry_path); }).find("is a dry run"), std::string::npos);

  json bad_cell = load("compare_a.json");
  bad_cell["gemms"][2]["results"]["autocast"]["BF16"] = {{"status", "ok"}};
  EXPECT_NE(usage_error_of([&] { gs::validate_result_json(bad_cell, "c.json"); })
                .find("c.json: gemms[2].results.autocast.BF16: status \"ok\" needs a positive number mean_ms"),
            std::string::npos);

  json bad_shape = load("compare_a.json");
  bad_shape["gemms"][0]["m"] = "15872";
  EXPECT_NE(usage_error_of([&] { gs::validate_result_json(bad_shape, "s.json"); }).find("\"m\" must be a positive integer"),
            std::string::npos);

  EXPECT_THROW(gs::validate_result_json(json::array(), "arr.json"), UsageError);

  // a number that overflows a double is a read error naming the file, not a nlohmann exception
  std::string text = load("compare_a.json").dump();
  text.replace(text.find("\"mean_ms\":") + 10, 0, "1e400, \"x\":");
  const std::string overflow = temp_file("overflow.json", text);
  EXPECT_NE(usage_error_of([&] { gs::load_result_json(overflow); })
                .find(overflow + ": a number is too large: number overflow parsing '1e400'"),
            std::string::npos);

  // a wrong type where the reader has a default names the field
  json iters = load("compare_a.json");
  iters["timing"]["iters"] = "abc";
  EXPECT_NE(usage_error_of([&] { gs::validate_result_json(iters, "t.json"); }).find("t.json: timing.iters must be an integer"),
            std::string::npos);

  // a model result without layers cannot be compared (nor charted: the plot script refuses it too)
  json layers = load("compare_a.json");
  layers["config"]["num_hidden_layers"] = 0;
  EXPECT_NE(usage_error_of([&] { gs::validate_result_json(layers, "l.json"); })
                .find("l.json: config.num_hidden_layers must be from 1 to 16777216, got 0"),
            std::string::npos);

  // the same mode twice
  json dup = load("compare_a.json");
  dup["modes"] = {"autocast", "autocast"};
  EXPECT_NE(usage_error_of([&] { gs::validate_result_json(dup, "d.json"); }).find("d.json: \"modes\" lists per-gemm twice"),
            std::string::npos);
}

TEST(Compare, MismatchedFilesAreUsageErrors) {
  const json a = load("compare_a.json");
  EXPECT_NE(usage_error_of([&] { gs::compare_results(a, load("shapes_4.json")); }).find("cannot compare a \"model\" result"),
            std::string::npos);

  json other_precs = a;
  other_precs["precisions"] = {"MXFP8", "NVFP4"};
  for (auto& g : other_precs["gemms"])
    g["results"]["autocast"] = {{"MXFP8", g["results"]["autocast"]["BF16"]}, {"NVFP4", g["results"]["autocast"]["BF16"]}};
  EXPECT_NE(usage_error_of([&] { gs::compare_results(a, other_precs); }).find("no precision in common"), std::string::npos);

  json other_mode = a;
  other_mode["modes"] = {"pre-quantized"};
  for (auto& g : other_mode["gemms"]) g["results"] = {{"pre-quantized", g["results"]["autocast"]}};
  EXPECT_NE(usage_error_of([&] { gs::compare_results(a, other_mode); }).find("no mode in common"), std::string::npos);

  json other_gemms = a;
  for (auto& g : other_gemms["gemms"]) g["m"] = 1024;
  EXPECT_NE(usage_error_of([&] { gs::compare_results(a, other_gemms); }).find("no GEMM in common"), std::string::npos);

  CompareOptions o;
  o.threshold = 1.5;
  EXPECT_THROW(gs::compare_results(a, a, o), UsageError);
}

TEST(Compare, ParseThreshold) {
  EXPECT_DOUBLE_EQ(gs::parse_threshold("5%"), 0.05);
  EXPECT_DOUBLE_EQ(gs::parse_threshold("0.05"), 0.05);
  // One meaning each: '%' is a percentage, a bare number a fraction; a bare 5 is refused with the
  // percentage it probably meant, never read as 5 %.
  EXPECT_NE(usage_error_of([] { gs::parse_threshold("5"); }).find("did you mean 5%?"), std::string::npos);
  EXPECT_DOUBLE_EQ(gs::parse_threshold("0.5"), 0.5);
  EXPECT_DOUBLE_EQ(gs::parse_threshold(" 2.5% "), 0.025);
  EXPECT_DOUBLE_EQ(gs::parse_threshold("0"), 0.0);
  for (const char* bad : {"", "%", "abc", "5%%", "-1", "-0.05", "100%", "150", "1e400", "0.05x"})
    EXPECT_THROW(gs::parse_threshold(bad), UsageError) << bad;
  // decimal only: strtod would read 0x10 as 16 (%), and accept inf and nan spellings
  for (const char* bad : {"0x10", "0x10%", "0x1p-4", "inf", "nan", "infinity%", "+5%", "5 %"})
    EXPECT_THROW(gs::parse_threshold(bad), UsageError) << bad;
  EXPECT_DOUBLE_EQ(gs::parse_threshold("1e1%"), 0.10);
  // -0 is zero, printed as 0.0%
  for (const char* zero : {"-0", "-0%", "-0.0"}) {
    const double t = gs::parse_threshold(zero);
    EXPECT_EQ(t, 0.0) << zero;
    EXPECT_FALSE(std::signbit(t)) << zero;
  }
  gs::CompareResult r = gs::compare_results(load("compare_a.json"), load("compare_a.json"));
  r.threshold = gs::parse_threshold("-0");
  EXPECT_NE(gs::format_compare_text(r).find("threshold 0.0%:"), std::string::npos) << gs::format_compare_text(r);
}

// A and B that measured different things are compared (ratios as usual), with a note per difference
// at the top of both outputs.
TEST(Compare, DifferencesInWhatWasMeasuredAreNoted) {
  const json a = load("compare_a.json");
  json b = load("compare_b.json");
  EXPECT_TRUE(gs::compare_results(a, b).differences.empty());
  b["config"]["num_hidden_layers"] = 12;
  b["config"]["vocab_size"] = 0;  // same as A: no note
  b["timing"]["iters"] = 50;
  b["timing"]["warmup"] = 2;
  b["timing"]["seed"] = 7;        // A has no seed recorded: not compared
  b["recipe_options"] = {{"fp8_format", "e4m3"}, {"fp8_accumulation", "split"}, {"producer_amax", false},
                         {"amax_history_len", 16}};
  const auto r = gs::compare_results(a, b);
  EXPECT_EQ(r.differences, (std::vector<std::string>{
                               "config.num_hidden_layers: 24 vs 12",
                               "recipe_options.fp8_format: hybrid vs e4m3",
                               "recipe_options.fp8_accumulation: auto vs split",
                               "recipe_options.amax_history_len: 1024 vs 16",
                               "recipe_options.producer_amax: true vs false",
                               "timing.warmup: 10 vs 2",
                               "timing.iters: 100 vs 50",
                           }));
  // still compared: FP8Current x1.10 on the 12 GEMMs, the per-layer total and its speedup; B's
  // full model has half the layers, so it is no longer a regression
  EXPECT_EQ(r.regressions, 14);
  const std::string text = gs::format_compare_text(r);
  const size_t note = text.find("  note: A and B differ in config.num_hidden_layers: 24 vs 12\n");
  ASSERT_NE(note, std::string::npos) << text;
  EXPECT_LT(note, text.find("precisions compared"));  // at the top, with the file lines
  EXPECT_NE(text.find("  note: A and B differ in timing.iters: 100 vs 50\n"), std::string::npos);
  const std::string md = gs::format_compare_markdown(r);
  EXPECT_NE(md.find("- **note:** A and B differ in recipe_options.fp8_format: hybrid vs e4m3\n"), std::string::npos) << md;
  EXPECT_LT(md.find("**note:**"), md.find("**Result:"));
  // seeds are compared when both files have one
  json c = a;
  c["timing"]["seed"] = 1234;
  json d = a;
  d["timing"]["seed"] = 99;
  EXPECT_EQ(gs::compare_results(c, d).differences, (std::vector<std::string>{"timing.seed: 1234 vs 99"}));
  // a run in a training step's power context (--step-other-ms) against one back to back
  json s = a;
  s["timing"]["step_other_ms"] = 3;
  s["timing"]["step_gap_ms_per_gflop"] = 0.002;
  EXPECT_EQ(gs::compare_results(a, s).differences, (std::vector<std::string>{"timing.step_other_ms: 0 vs 3"}));
  // a different batch leaves no GEMM in common: the error says why
  json e = a;
  e["config"]["micro_batch_size"] = 2;
  for (auto& g : e["gemms"]) {
    if (g["m"] == 15872) g["m"] = 1024;
    if (g["k"] == 15872) g["k"] = 1024;
  }
  EXPECT_NE(usage_error_of([&] { gs::compare_results(a, e); })
                .find("no GEMM in common (matched by pass, op, m, k, n); A and B differ in config.micro_batch_size: 31 vs 2"),
            std::string::npos)
      << usage_error_of([&] { gs::compare_results(a, e); });
}

// Strings from the files reach the terminal without control characters.
TEST(Compare, FileStringsArePrintable) {
  const json a = load("compare_a.json");
  json b = a;
  b["device"]["name"] = "Evil\x1b[2J GPU\nline";
  b["created"] = "2026\r\x07";
  b["timing"]["method"] = "cuda\x1b]0;x\x07" "events";
  auto r = gs::compare_results(a, b);
  for (const std::string& out : {gs::format_compare_text(r), gs::format_compare_markdown(r)}) {
    EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
    EXPECT_EQ(out.find('\x07'), std::string::npos);
    EXPECT_EQ(out.find('\r'), std::string::npos);
    EXPECT_NE(out.find("Evil?[2J GPU?line, 2026??"), std::string::npos) << out;
    EXPECT_NE(out.find("timing.method: cuda-events vs cuda?]0;x?events"), std::string::npos) << out;
  }
}

TEST(Compare, TextAndMarkdownOutput) {
  const auto r = gs::compare_files(kData + "/compare_a.json", kData + "/compare_b.json");
  const std::string text = gs::format_compare_text(r);
  EXPECT_NE(text.find("1.100 R"), std::string::npos);
  EXPECT_NE(text.find("0.950 I"), std::string::npos);
  EXPECT_NE(text.find("Regressions (15)"), std::string::npos);
  EXPECT_NE(text.find("per-gemm FP8Current per-layer total: 20.883 -> 22.971 ms (+10.0%)"), std::string::npos);
  EXPECT_NE(text.find("per-gemm speedup FP8Current vs BF16: 1.543x -> 1.403x (-9.1%)"), std::string::npos) << text;
  EXPECT_NE(text.find("Result: 15 regressions, 15 improvements"), std::string::npos);
  const std::string md = gs::format_compare_markdown(r);
  EXPECT_NE(md.find("| Pass | Op | Shape (MxKxN) | BF16 | FP8Current | FP8Delayed | FP8Block |"), std::string::npos);
  EXPECT_NE(md.find("| fprop | QKV Proj | 15872x4096x12288 | 1.000 | **1.100 slower** | _0.950 faster_ | 1.000 |"),
            std::string::npos);
  EXPECT_NE(md.find("### Regressions (15)"), std::string::npos);
  EXPECT_NE(md.find("| FP8Current vs BF16 | 1.543x | 1.403x | **0.909 less** |"), std::string::npos) << md;
}

}  // namespace

// ---- totals and speedups: a real difference or noise ----

namespace noise {

// `doc` with every `prec` cell's mean (and median) times `factor` and stdev `sd_frac` of the mean.
json scaled(json doc, const std::string& prec, double factor, double sd_frac) {
  for (auto& g : doc["gemms"])
    for (auto& [mode, cells] : g["results"].items()) {
      json& c = cells[prec];
      if (c["status"] != "ok") continue;
      const double m = c["mean_ms"].get<double>() * factor;
      c["mean_ms"] = c["median_ms"] = m;
      c["min_ms"] = m * 0.9;
      c["max_ms"] = m * 1.1;
      c["stdev_ms"] = m * sd_frac;
    }
  return doc;
}

const gs::CompareTotalRow& total(const gs::CompareResult& r, const std::string& what) {
  for (const auto& t : r.modes.at(0).totals)
    if (t.what == what) return t;
  throw std::runtime_error("no total " + what);
}

const gs::CompareCell& prec_cell(const gs::CompareTotalRow& t, const std::string& prec) {
  for (const auto& c : t.cells)
    if (c.precision == prec) return c;
  throw std::runtime_error("no cell " + prec);
}

const gs::CompareSpeedupRow& speedup(const gs::CompareResult& r, const std::string& name) {
  for (const auto& s : r.modes.at(0).speedups)
    if (s.name == name) return s;
  throw std::runtime_error("no speedup " + name);
}

// A written result (gs::to_json of the document read back) with --repeats 3: every ok cell's
// repeat means are its mean times `spread` = {lo, mid, hi}, its mean their average, as
// pool_repeats writes them; the summary's intervals come from the writer.
json with_repeats(const json& doc, const std::string& prec, double factor, std::array<double, 3> spread) {
  json d = doc;
  d["timing"]["repeats"] = 3;
  for (auto& g : d["gemms"])
    for (auto& [mode, cells] : g["results"].items())
      for (auto& [p, c] : cells.items()) {
        if (c["status"] != "ok") continue;
        const double m = c["mean_ms"].get<double>() * (p == prec ? factor : 1.0);
        std::array<double, 3> s = p == prec ? spread : std::array<double, 3>{1.0, 1.0, 1.0};
        c["repeat_ms"] = {m * s[0], m * s[1], m * s[2]};
        c["mean_ms"] = m * (s[0] + s[1] + s[2]) / 3;
        c["median_ms"] = m * s[1];
        c["stdev_ms"] = m * 0.001;
      }
  return gs::to_json(gs::from_json(d, "repeats.json"));
}

}  // namespace noise

// Without repeats, a total's spread is the root-sum-square of its cells' stdevs (the full model
// weights each layer GEMM by the layers); a total beyond the threshold but within spread A +
// spread B is "within noise": not flagged, not counted, "~" in both outputs.
TEST(CompareNoise, TotalsUseTheCellsSpreadCombined) {
  const json a = noise::scaled(load("compare_a.json"), "BF16", 1.0, 0.04);
  // BF16 6% slower: each GEMM within its cells' spread (0.06 <= 0.04 + 0.0424), but the per-layer
  // total is not, since independent stdevs add as a root-sum-square
  json b = noise::scaled(load("compare_a.json"), "BF16", 1.06, 0.04);
  auto r = gs::compare_results(a, b);
  for (const auto& g : r.modes.at(0).gemms) {
    EXPECT_EQ(cell_of(g, "BF16").verdict, Verdict::Same);
    EXPECT_TRUE(cell_of(g, "BF16").within_noise);
  }
  double ss = 0, sum = 0;
  for (const auto& g : a["gemms"]) {
    const double sd = g["results"]["autocast"]["BF16"]["stdev_ms"].get<double>();
    ss += sd * sd;
    sum += g["results"]["autocast"]["BF16"]["mean_ms"].get<double>();
  }
  const auto& layer = noise::prec_cell(noise::total(r, "per-layer total"), "BF16");
  EXPECT_EQ(layer.noise, gs::NoiseBasis::Spread);
  EXPECT_NEAR(layer.a_spread, std::sqrt(ss), 1e-12);
  EXPECT_NEAR(layer.b_spread, 1.06 * std::sqrt(ss), 1e-9);
  EXPECT_NEAR(*layer.a_ms, sum, 1e-9);
  EXPECT_FALSE(layer.within_noise);
  EXPECT_EQ(layer.verdict, Verdict::Regression);
  const auto& full = noise::prec_cell(noise::total(r, "full model"), "BF16");
  EXPECT_NEAR(full.a_spread, 24 * std::sqrt(ss), 1e-9);  // 24 layers, no LM head
  EXPECT_EQ(full.verdict, Verdict::Regression);
  // The speedups vs BF16 all grow by 6%: each spread is the relative root-sum-square of the two
  // full models' spreads.
  const auto& sp = noise::speedup(r, "FP8Current vs BF16");
  ASSERT_TRUE(sp.cell.ratio);
  EXPECT_NEAR(*sp.cell.ratio, 1.06, 1e-9);
  EXPECT_EQ(sp.cell.verdict, Verdict::Improvement);
  EXPECT_GT(sp.cell.a_spread, 0);
  EXPECT_EQ(r.regressions, 2);  // the two BF16 totals
  EXPECT_EQ(r.improvements, 2);  // the speedups of FP8Current and FP8Delayed (FP8Block's is n/a)

  // One GEMM with a wide spread (stdev of its cells = the whole total) takes both totals and
  // the speedups into noise: not flagged, not counted, and compare's exit status (1 only with a
  // regression) is 0.
  json a2 = a, b2 = b;
  for (json* d : {&a2, &b2}) (*d)["gemms"][2]["results"]["autocast"]["BF16"]["stdev_ms"] = sum;
  r = gs::compare_results(a2, b2);
  for (const char* what : {"per-layer total", "full model"}) {
    const auto& c = noise::prec_cell(noise::total(r, what), "BF16");
    EXPECT_TRUE(c.within_noise) << what;
    EXPECT_EQ(c.verdict, Verdict::Same) << what;
  }
  EXPECT_TRUE(noise::speedup(r, "FP8Current vs BF16").cell.within_noise);
  EXPECT_EQ(r.regressions, 0);
  EXPECT_EQ(r.improvements, 0);
  EXPECT_FALSE(r.has_regressions());
  const std::string text = gs::format_compare_text(r);
  EXPECT_NE(text.find("Result: 0 regressions, 0 improvements"), std::string::npos) << text;
  EXPECT_NE(text.find("1.060 ~"), std::string::npos) << text;
  EXPECT_NE(text.find("spread A / B"), std::string::npos) << text;
  EXPECT_NE(text.find("no 95% intervals"), std::string::npos) << text;
  const std::string md = gs::format_compare_markdown(r);
  EXPECT_NE(md.find("**Result: 0 regressions, 0 improvements.**"), std::string::npos) << md;
  EXPECT_NE(md.find("| per-layer total | BF16 |"), std::string::npos) << md;
  EXPECT_EQ(md.find("### Regressions"), std::string::npos) << md;
}

// With >= 3 repeats in both files, totals and speedups are judged by their 95% intervals (the
// ones the writer stores in summary.<mode>.intervals): overlapping intervals are noise.
TEST(CompareNoise, TotalsAndSpeedupsUseRepeatIntervals) {
  const json base = load("compare_a.json");
  const json a = noise::with_repeats(base, "BF16", 1.0, {0.99, 1.0, 1.01});
  // B's BF16 is 9.5% slower on average, but its repeats range from 0.954 to 1.272 of A's: the
  // intervals overlap
  const json wide = noise::with_repeats(base, "BF16", 1.06, {0.9, 1.0, 1.2});
  auto r = gs::compare_results(a, wide);
  EXPECT_EQ(r.modes.at(0).totals_noise, gs::NoiseBasis::Intervals);
  const auto& layer = noise::prec_cell(noise::total(r, "per-layer total"), "BF16");
  ASSERT_TRUE(layer.ratio);
  EXPECT_GT(*layer.ratio, 1.09);
  EXPECT_EQ(layer.noise, gs::NoiseBasis::Intervals);
  ASSERT_TRUE(layer.a_interval && layer.b_interval);
  EXPECT_TRUE(layer.within_noise);
  EXPECT_EQ(layer.verdict, Verdict::Same);
  // the intervals are the writer's
  const json& iv = wide["summary"]["per-gemm"]["intervals"];
  EXPECT_DOUBLE_EQ(layer.b_interval->lo, iv["per_layer_total"]["BF16"]["lo"].get<double>());
  EXPECT_DOUBLE_EQ(layer.b_interval->hi, iv["per_layer_total"]["BF16"]["hi"].get<double>());
  const auto& sp = noise::speedup(r, "FP8Current vs BF16");
  EXPECT_EQ(sp.cell.noise, gs::NoiseBasis::Intervals);
  EXPECT_TRUE(sp.cell.within_noise);
  EXPECT_DOUBLE_EQ(sp.cell.b_interval->lo, iv["speedups"][0]["interval"]["lo"].get<double>());
  // the GEMMs keep the per-GEMM rule (stdev A + stdev B, small here): flagged
  EXPECT_EQ(cell_of(r.modes[0].gemms.at(0), "BF16").verdict, Verdict::Regression);
  EXPECT_EQ(r.regressions, 12);
  const std::string text = gs::format_compare_text(r);
  EXPECT_NE(text.find("95% interval A / B"), std::string::npos) << text;
  EXPECT_NE(text.find("the 95% intervals over the repeats of A and B overlap"), std::string::npos) << text;

  // Narrow repeats that do not reach A's: a real difference, flagged.
  const json narrow = noise::with_repeats(base, "BF16", 1.06, {0.995, 1.0, 1.005});
  r = gs::compare_results(a, narrow);
  const auto& l2 = noise::prec_cell(noise::total(r, "per-layer total"), "BF16");
  EXPECT_FALSE(l2.within_noise);
  EXPECT_EQ(l2.verdict, Verdict::Regression);
  EXPECT_EQ(noise::speedup(r, "FP8Current vs BF16").cell.verdict, Verdict::Improvement);
  EXPECT_EQ(r.regressions, 12 + 2);

  // One file without repeats: the spread rule for both.
  r = gs::compare_results(base, narrow);
  EXPECT_EQ(r.modes.at(0).totals_noise, gs::NoiseBasis::Spread);
  EXPECT_EQ(noise::prec_cell(noise::total(r, "per-layer total"), "BF16").noise, gs::NoiseBasis::Spread);
}

// ---- MoE results: grouped GEMMs, routing and expert-parallel notes, MoE-layer totals ----
// moe_mixtral_a.json: docs/results/h100_moe_mixtral-8x7b.json (a measured Mixtral-8x7B run, 32 MoE
// layers, random routing over 8 experts) without its kernel records and roofline.

namespace moe {

// Moves `rows` rows from expert `from` to expert `to` in every grouped GEMM and in the routing.
json reroute(json doc, int from, int to, int rows) {
  for (auto& g : doc["gemms"]) {
    if (!g.contains("group")) continue;
    g["group"][from] = g["group"][from].get<int64_t>() - rows;
    g["group"][to] = g["group"][to].get<int64_t>() + rows;
  }
  auto& counts = doc["plan"]["routing"]["counts"];
  counts[from] = counts[from].get<int64_t>() - rows;
  counts[to] = counts[to].get<int64_t>() + rows;
  return doc;
}

json scale_ops(json doc, const std::string& prec, std::initializer_list<const char*> ops, double f) {
  for (auto& g : doc["gemms"])
    for (const char* op : ops)
      if (g["op"] == op) {
        json& c = g["results"]["training"][prec];
        c["mean_ms"] = c["mean_ms"].get<double>() * f;
      }
  return doc;
}

}  // namespace moe

TEST(CompareMoe, GroupedGemmsAndMoeTotals) {
  const json a = load("moe_mixtral_a.json");
  auto r = gs::compare_results(a, a);
  const auto& rows = r.modes.at(0).gemms;
  ASSERT_EQ(rows.size(), 18u);
  EXPECT_TRUE(r.unmatched_a.empty());
  EXPECT_TRUE(r.group_differences.empty());
  size_t grouped = 0;
  for (const auto& g : rows) {
    grouped += g.experts == 8;
    EXPECT_TRUE(g.group_difference.empty());
  }
  EXPECT_EQ(grouped, 6u);  // expert up and down in three passes
  // Mixtral has no dense layers: a MoE layer's total, its routed experts, the full model
  const auto& totals = r.modes[0].totals;
  ASSERT_EQ(totals.size(), 3u);
  EXPECT_EQ(totals[0].what, "MoE-layer total");
  EXPECT_EQ(totals[1].what, "MoE layer: routed experts");
  EXPECT_EQ(totals[2].what, "full model");
  const json& sum = a["summary"]["training"];
  EXPECT_NEAR(*noise::prec_cell(totals[0], "BF16").a_ms, sum["per_moe_layer"]["total"]["BF16"].get<double>(), 1e-9);
  EXPECT_NEAR(*noise::prec_cell(totals[1], "FP8Current").a_ms,
              sum["per_moe_layer"]["routed_experts"]["FP8Current"].get<double>(), 1e-9);
  EXPECT_NEAR(*noise::prec_cell(totals[2], "BF16").a_ms, sum["full_model"]["BF16"].get<double>(), 1e-6);
  EXPECT_EQ(r.modes[0].speedups.size(), 2u);
  EXPECT_EQ(r.regressions + r.improvements, 0);
  EXPECT_TRUE(r.differences.empty());
  const std::string text = gs::format_compare_text(r);
  EXPECT_NE(text.find("fprop  Expert Up"), std::string::npos) << text;
  EXPECT_NE(text.find("8192x4096x28672 (8 experts)"), std::string::npos) << text;
  EXPECT_NE(text.find("MoE-layer total"), std::string::npos) << text;

  // Routed experts 10% slower in BF16: the routed-experts row by exactly 1.10, the MoE layer and
  // the full model by their share; the spread of the routed experts is the root-sum-square of
  // the six grouped cells' stdevs.
  const json b = moe::scale_ops(a, "BF16", {"expert_up", "expert_down"}, 1.10);
  r = gs::compare_results(a, b);
  const auto& routed = noise::prec_cell(noise::total(r, "MoE layer: routed experts"), "BF16");
  EXPECT_NEAR(*routed.ratio, 1.10, 1e-12);
  EXPECT_EQ(routed.verdict, Verdict::Regression);
  double ss = 0;
  for (const auto& g : a["gemms"])
    if (g["op"] == "expert_up" || g["op"] == "expert_down") {
      const double sd = g["results"]["training"]["BF16"]["stdev_ms"].get<double>();
      ss += sd * sd;
    }
  EXPECT_NEAR(routed.a_spread, std::sqrt(ss), 1e-12);
  const auto& layer = noise::prec_cell(noise::total(r, "MoE-layer total"), "BF16");
  const double share = sum["per_moe_layer"]["routed_experts"]["BF16"].get<double>() /
                       sum["per_moe_layer"]["total"]["BF16"].get<double>();
  EXPECT_NEAR(*layer.ratio, 1.0 + 0.10 * share, 1e-9);
  EXPECT_EQ(layer.verdict, Verdict::Regression);
  // full model: 32 MoE layers of the MoE-layer total and the LM head once
  double lm_ss = 0;
  for (const auto& g : a["gemms"])
    if (g["scope"] == "model") lm_ss += std::pow(g["results"]["training"]["BF16"]["stdev_ms"].get<double>(), 2);
  const double moe_spread = noise::prec_cell(noise::total(r, "MoE-layer total"), "BF16").a_spread;
  EXPECT_NEAR(noise::prec_cell(noise::total(r, "full model"), "BF16").a_spread,
              std::sqrt(32 * 32 * moe_spread * moe_spread + lm_ss), 1e-9);
}

// Another routing: the grouped GEMMs keep their shapes but not their rows per expert. They are
// still paired (pass, op, grouped dimension, experts, the other sizes), marked, and listed; the
// routing difference is a note.
TEST(CompareMoe, AnotherRoutingIsPairedAndNoted) {
  const json a = load("moe_mixtral_a.json");
  json b = moe::reroute(a, 0, 1, 10);
  b["config"]["moe"]["routing"] = "lognormal:0.5";
  b["plan"]["routing"]["routing"] = "lognormal:0.5";
  b["plan"]["routing"]["seed"] = 7;
  auto r = gs::compare_results(a, b);
  EXPECT_EQ(r.modes.at(0).gemms.size(), 18u);
  EXPECT_TRUE(r.unmatched_a.empty());
  EXPECT_TRUE(r.unmatched_b.empty());
  ASSERT_EQ(r.group_differences.size(), 6u);
  EXPECT_EQ(r.group_differences[0],
            "fprop expert_up 8192x4096x28672 (8 experts): rows per expert 983..1071 (sum 8192) vs 983..1071 (sum "
            "8192), 2 of 8 experts differ");
  for (const auto& d : {"config.moe.routing: random vs lognormal:0.5", "plan.routing.seed: 1234 vs 7"})
    EXPECT_NE(std::find(r.differences.begin(), r.differences.end(), d), r.differences.end()) << d;
  bool counts_note = false;
  for (const auto& d : r.differences) counts_note |= d.rfind("plan.routing.counts: max/mean rows per expert 1.05 vs", 0) == 0;
  EXPECT_TRUE(counts_note);
  const std::string text = gs::format_compare_text(r);
  EXPECT_NE(text.find("note: A and B differ in config.moe.routing: random vs lognormal:0.5"), std::string::npos) << text;
  EXPECT_NE(text.find("(8 experts*)"), std::string::npos) << text;
  EXPECT_NE(text.find("Grouped GEMMs paired although their rows per expert differ"), std::string::npos) << text;
  const std::string md = gs::format_compare_markdown(r);
  EXPECT_NE(md.find("- **note:** A and B differ in plan.routing.seed: 1234 vs 7"), std::string::npos) << md;
  EXPECT_NE(md.find("### Grouped GEMMs paired although their rows per expert differ"), std::string::npos) << md;

  // More rows on this rank (another expert-parallel split): the grouped size differs, the GEMM is
  // still paired with its sums named.
  json c = a;
  c["config"]["moe"]["expert_parallel"] = 2;
  for (auto& g : c["gemms"])
    if (g["op"] == "expert_up" && g["pass"] == "fprop") {
      g["m"] = 8200;
      g["group"][0] = g["group"][0].get<int64_t>() + 8;
    }
  r = gs::compare_results(a, c);
  EXPECT_TRUE(r.unmatched_a.empty());
  ASSERT_EQ(r.group_differences.size(), 1u);
  EXPECT_NE(r.group_differences[0].find("(sum 8192) vs 983..1071 (sum 8200)"), std::string::npos) << r.group_differences[0];
  EXPECT_NE(std::find(r.differences.begin(), r.differences.end(), "config.moe.expert_parallel: 1 vs 2"),
            r.differences.end());
}

// A model with dense and MoE layers compares both layer totals; the full model weights every
// layer GEMM by all layers and the dense/MoE-only ones by their own count.
TEST(CompareMoe, DenseAndMoeLayerTotals) {
  json a = load("moe_mixtral_a.json");
  a["config"]["moe"]["first_dense_layers"] = 2;  // layers 0 and 1 dense (here: attention only)
  auto r = gs::compare_results(a, a);
  const auto& totals = r.modes.at(0).totals;
  ASSERT_EQ(totals.size(), 4u);
  EXPECT_EQ(totals[0].what, "dense-layer total");
  EXPECT_EQ(totals[1].what, "MoE-layer total");
  const auto& dense = noise::prec_cell(totals[0], "BF16");
  const auto& moel = noise::prec_cell(totals[1], "BF16");
  const auto& full = noise::prec_cell(totals[3], "BF16");
  double once = 0, ss_layer = 0, ss_moe = 0, ss_once = 0;
  for (const auto& g : a["gemms"]) {
    const double sd = g["results"]["training"]["BF16"]["stdev_ms"].get<double>();
    if (g["scope"] == "model") {
      once += g["results"]["training"]["BF16"]["mean_ms"].get<double>();
      ss_once += sd * sd;
    } else if (g["scope"] == "layer") {
      ss_layer += sd * sd;
    } else {
      ss_moe += sd * sd;
    }
  }
  EXPECT_NEAR(*full.a_ms, 2 * *dense.a_ms + 30 * *moel.a_ms + once, 1e-9);
  EXPECT_NEAR(full.a_spread, std::sqrt(32 * 32 * ss_layer + 30 * 30 * ss_moe + ss_once), 1e-9);
  EXPECT_NEAR(dense.a_spread, std::sqrt(ss_layer), 1e-12);
}

// A file whose Wgrad was planned X^T.dY ([in, out], before Wgrad took the weight's orientation)
// against one planned dY^T.X: the same GEMMs are matched, and the note says the problems differ.
TEST(Compare, WgradOrientationsAreMatchedAndNoted) {
  const json a = load("compare_a.json");  // X^T.dY: left operand the activation
  json b = a;
  int turned = 0;
  for (auto& g : b["gemms"]) {
    if (g["pass"] != "wgrad") continue;
    std::swap(g["m"], g["n"]);
    g["a"] = {{"role", "grad"}, {"k_major", false}};
    g["b"] = {{"role", "activation"}, {"k_major", false}};
    ++turned;
  }
  ASSERT_EQ(turned, 4);
  const auto r = gs::compare_results(a, b);
  EXPECT_TRUE(r.unmatched_a.empty());
  EXPECT_TRUE(r.unmatched_b.empty());
  EXPECT_EQ(r.modes.at(0).gemms.size(), 12u);
  ASSERT_EQ(r.differences.size(), 1u);
  EXPECT_NE(r.differences[0].find("Wgrad orientation: X^T.dY [in, out] vs dY^T.X [out, in]"), std::string::npos);
  EXPECT_TRUE(gs::compare_results(b, b).differences.empty());
}
