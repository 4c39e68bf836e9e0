// Reports from a fixed fake result: golden text, JSON round trip, CSV, and the runner's
// capability gating driven by a fake engine.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>
#include <tuple>
#include <string>
#include <vector>

#include "core/util/error.hpp"
#include "core/report/report.hpp"
#include "core/run/runner.hpp"
#include "core/util/printer.hpp"
#include "test_util.hpp"

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
  Cell measure(const Gemm& g, Precision p, Mode m, const std::string&) override {
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
  req.modes = {Mode::PerGemm};
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

// Measurements are GEMM-major: all precisions and modes of one GEMM back to back, each in its
// cell (the order is what keeps drift out of the ratios; the cells must still land in place).
TEST(Runner, MeasuresGemmByGemmAndFillsEveryCell) {
  struct Recorder : FakeEngine {
    Recorder() : FakeEngine(90) {}
    std::vector<std::tuple<Pass, Op, Precision, Mode>> order;
    Cell measure(const Gemm& g, Precision p, Mode m, const std::string&) override {
      order.emplace_back(g.pass, g.op, p, m);
      Stats s;
      s.mean_ms = s.median_ms = s.min_ms = s.max_ms = 1.0 + static_cast<int>(p) * 0.1 + static_cast<int>(m) * 0.01;
      s.iters = 1;
      return Cell::measured(s);
    }
  } e;
  RunRequest req;
  req.plan = build_model_plan(default_config());
  req.precisions = {Precision::BF16, Precision::FP8Current};
  req.modes = {Mode::PerGemm, Mode::Training, Mode::PreQuantized};
  req.options.timing.gpu_warmup_s = 0;
  const RunResult r = run(e, req);
  ASSERT_EQ(e.order.size(), 12u * 2 * 3);
  for (size_t g = 0; g < 12; ++g)
    for (size_t i = 0; i < 6; ++i) {
      const auto& [pass, op, p, m] = e.order[g * 6 + i];
      EXPECT_EQ(pass, r.plan.gemms[g].pass);
      EXPECT_EQ(op, r.plan.gemms[g].op);
      EXPECT_EQ(p, req.precisions[i / 3]);
      EXPECT_EQ(m, req.modes[i % 3]);
      EXPECT_DOUBLE_EQ(r.cell(i % 3, g, i / 3).stats.mean_ms,
                       1.0 + static_cast<int>(p) * 0.1 + static_cast<int>(m) * 0.01);
    }
}

TEST(Report, ClockSamplesInTextAndJson) {
  RunResult r = fake_run({Mode::PerGemm});
  EXPECT_NE(render_text(r).find("SM clock: not sampled (NVML not available)"), std::string::npos);
  ClockSample a, b;
  a.sm_mhz = 1980; a.max_sm_mhz = 1980;
  b.sm_mhz = 1545; b.max_sm_mhz = 1980; b.reasons = 0x4;  // SW power cap
  r.cells[0][0][0].clock = a;
  r.cells[0][1][1].clock = b;
  int ok = 0;
  for (const auto& g : r.cells[0])
    for (const Cell& c : g) ok += c.ok;
  EXPECT_NE(render_text(r).find(fmt::format("SM clock (mean of 3 samples per cell, 2 of {} cells): 1545-1980 MHz, device max 1980 "
                                            "MHz; power cap active in 1, thermal slowdown in 0", ok)),
            std::string::npos)
      << render_text(r);
  const RunResult back = from_json(to_json(r));
  ASSERT_TRUE(back.cell(0, 1, 1).clock.has_value());
  EXPECT_EQ(back.cell(0, 1, 1).clock->sm_mhz, 1545);
  EXPECT_TRUE(back.cell(0, 1, 1).clock->power_capped());
  EXPECT_FALSE(back.cell(0, 0, 1).clock.has_value());
}

TEST(Runner, BlackwellRunsEverythingAndLabelsFp8BlockEmulated) {
  FakeEngine e(100);
  RunRequest req;
  req.plan = build_shapes_plan("4096");
  req.precisions = {Precision::BF16, Precision::FP8Block, Precision::MXFP8, Precision::NVFP4};
  req.modes = {Mode::PerGemm};
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
  RunResult r = fake_run({Mode::PerGemm});
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
  const std::string got = render_text(fake_run({Mode::PerGemm, Mode::PreQuantized}));
  const std::string path = std::string(GS_TEST_DATA_DIR) + "/golden_report.txt";
  if (std::getenv("GS_UPDATE_GOLDEN")) {
    std::ofstream(path) << got;
    FAIL() << "rewrote " << path << ": review the diff, then run again without GS_UPDATE_GOLDEN";
  }
  const std::string want = slurp(path);
  ASSERT_FALSE(want.empty()) << "missing " << path << " (run with GS_UPDATE_GOLDEN=1 once and review it)";
  EXPECT_EQ(got, want);
}

// The run report is one document: text prints it as render_text does, markdown prints each of its
// tables as a pipe table whose every row is a line of the text, the same cells in the same order
// (a header without a label in its first column is skipped: the text leaves it blank).
TEST(Report, MarkdownHasTheTextsTables) {
  for (const char* name : {"model_5b_both_modes.json", "moe_mixtral_a.json", "shapes_4.json", "model_lmhead_b200.json"}) {
    SCOPED_TRACE(name);
    const std::string path = std::string(GS_TEST_DATA_DIR) + "/" + name;
    const RunResult r = from_json(read_json_file(path), path);
    const std::string text = render_text(r), md = render_markdown(r);
    EXPECT_EQ(print::render(report_document(r), print::Format::Text), text);
    EXPECT_EQ(md.rfind("## GEMM Benchmark (", 0), 0u) << md;
    EXPECT_EQ(md.find("====="), std::string::npos) << md;
    EXPECT_EQ(md.find("-----"), std::string::npos) << md;
    // Every GEMM once per mode in the time table and once in the throughput table, at least.
    const size_t gemm_rows = r.modes.size() * 2 * r.plan.gemms.size();
    test::expect_markdown_rows_in_text(md, text, {.rows = gemm_rows, .numbers = gemm_rows});
  }
}

// Golden-free: every table of the run report's document is one markdown table (one alignment row
// each), with as many rows as the text prints for it; every title is a heading; the text's rules
// and blank lines are text's only.
TEST(Report, MarkdownStructure) {
  const RunResult r = fake_run({Mode::PerGemm, Mode::PreQuantized});
  const print::Document d = report_document(r);
  const std::string md = print::render(d, print::Format::Markdown);
  EXPECT_EQ(md, render_markdown(r));
  size_t tables = 0, table_rows = 0, titles = 0, rules = 0;
  for (const print::Block& b : d.blocks) {
    if (b.kind == print::Block::Kind::Rule) ++rules;
    if (b.kind == print::Block::Kind::Heading) {
      ++titles;
      const std::string h = std::string(static_cast<size_t>(b.level), '#') + " " + b.text.in(print::Format::Markdown).render(print::Format::Markdown) + "\n";
      EXPECT_NE(md.find(h), std::string::npos) << h;
    }
    if (b.kind != print::Block::Kind::Table || b.only == print::Only::Text) continue;
    ++tables;
    size_t n = 0;
    for (const auto& l : b.table.lines) n += l.kind == print::Table::Line::Kind::Header || l.kind == print::Table::Line::Kind::Row;
    ASSERT_GT(n, 0u);
    // A table whose first row is not its header gets its columns' headers in markdown.
    const auto first = std::find_if(b.table.lines.begin(), b.table.lines.end(), [](const print::Table::Line& l) {
      return l.kind != print::Table::Line::Kind::Rule && l.kind != print::Table::Line::Kind::Note;
    });
    const bool named = std::any_of(b.table.columns.begin(), b.table.columns.end(), [](const print::Column& c) { return !c.header.empty(); });
    if (named && first->kind != print::Table::Line::Kind::Header) ++n;
    table_rows += n + 1;  // and the alignment row
  }
  EXPECT_GE(tables, 2 * (1 + 3 + 1) + 1);  // per mode: per-layer sums, one per pass, throughput; the modes side by side
  EXPECT_GE(rules, 4u);
  EXPECT_GE(titles, 10u);
  size_t align = 0, md_rows = 0;
  std::istringstream in(md);
  for (std::string l; std::getline(in, l);) {
    if (l.empty() || l[0] != '|') continue;
    ++md_rows;
    if (l.rfind("|---", 0) == 0) ++align;
  }
  EXPECT_EQ(align, tables);
  EXPECT_EQ(md_rows, table_rows);
  EXPECT_EQ(md.find("\n\n\n"), std::string::npos);
  // The notes: footnotes and run notes as one markdown list.
  EXPECT_NE(md.find("### Notes:\n\n- [1] cuBLASLt NOT_SUPPORTED (fake)\n"), std::string::npos) << md;
}

TEST(Report, JsonRoundTrip) {
  RunResult a = fake_run({Mode::PerGemm, Mode::PreQuantized});
  nlohmann::json j = to_json(a);
  EXPECT_EQ(j["schema"], "gemmscope.result/2");
  EXPECT_EQ(j["gemms"][0]["results"]["per-gemm"]["BF16"]["status"], "ok");
  EXPECT_EQ(j["gemms"][9]["results"]["per-gemm"]["FP8Block"]["status"], "n/a");
  EXPECT_TRUE(j["summary"]["per-gemm"]["per_layer"]["total"]["FP8Block"].is_null());
  RunResult b = from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(to_json(b), j);
  EXPECT_EQ(render_text(b), render_text(a));
}

TEST(Report, JsonRejectsForeignDocuments) {
  EXPECT_THROW(from_json(nlohmann::json::parse(R"({"schema":"other"})")), UsageError);
  EXPECT_THROW(from_json(nlohmann::json::parse("[]")), UsageError);
  nlohmann::json j = to_json(fake_run({Mode::PerGemm}));
  j["gemms"][0]["results"]["per-gemm"].erase("BF16");
  EXPECT_THROW(from_json(j), UsageError);
}

// from_json is the one reader of result files (gemmscope compare loads with it): every malformed
// document is a UsageError naming the document and the field, never a nlohmann exception.
TEST(Report, JsonErrorsNameTheFileAndField) {
  using nlohmann::json;
  const json good = to_json(fake_run({Mode::PerGemm}));
  const auto error_of = [](const json& doc) -> std::string {
    try {
      from_json(doc, "x.json");
    } catch (const UsageError& e) {
      return e.what();
    } catch (const std::exception& e) {
      return std::string("not a UsageError: ") + e.what();
    }
    return "(accepted)";
  };
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"array", [](json& j) { j = json::array(); }, "x.json is not a gemmscope result (top level is not an object)"},
      {"schema", [](json& j) { j["schema"] = "gemmscope.result/3"; },
       "x.json has schema \"gemmscope.result/3\", expected \"gemmscope.result/2\" (or \"gemmscope.result/1\")"},
      {"no schema", [](json& j) { j.erase("schema"); }, "x.json has schema (none), expected"},
      {"kind", [](json& j) { j["kind"] = "sweep"; }, "x.json: \"kind\" must be \"model\" or \"shapes\""},
      {"modes not a list", [](json& j) { j["modes"] = "autocast"; }, "x.json: \"modes\" must be a list of strings"},
      {"unknown mode", [](json& j) { j["modes"] = {"bogus"}; }, "x.json: \"modes\": unknown mode 'bogus'"},
      {"precision not a string", [](json& j) { j["precisions"] = {1}; }, "x.json: \"precisions\" must be a list of strings"},
      {"unknown precision", [](json& j) { j["precisions"] = {"FP9"}; }, "x.json: \"precisions\": unknown precision 'FP9'"},
      {"no gemms", [](json& j) { j["gemms"] = json::array(); }, "x.json: \"gemms\" must be a non-empty list"},
      {"gemm not an object", [](json& j) { j["gemms"][3] = "qkv"; }, "x.json: gemms[3] is not an object"},
      {"pass", [](json& j) { j["gemms"][0]["pass"] = 3; }, "x.json: gemms[0]: \"pass\" must be a string"},
      {"unknown op", [](json& j) { j["gemms"][0]["op"] = "conv"; }, "x.json: gemms[0]: unknown op 'conv'"},
      {"m as text", [](json& j) { j["gemms"][0]["m"] = "15872"; }, "x.json: gemms[0]: \"m\" must be a positive integer"},
      {"k zero", [](json& j) { j["gemms"][1]["k"] = 0; }, "x.json: gemms[1]: \"k\" must be a positive integer"},
      {"n fractional", [](json& j) { j["gemms"][1]["n"] = 4096.5; }, "x.json: gemms[1]: \"n\" must be a positive integer"},
      {"no scope", [](json& j) { j["gemms"][1].erase("scope"); }, "x.json: gemms[1]: \"scope\" must be a string"},
      {"no results", [](json& j) { j["gemms"][3].erase("results"); }, "x.json: gemms[3] has no \"results\" (not a measured run?)"},
      {"no mode object", [](json& j) { j["gemms"][3]["results"].erase("per-gemm"); },
       "x.json: gemms[3].results has no object for mode \"per-gemm\""},
      {"no cell", [](json& j) { j["gemms"][0]["results"]["per-gemm"].erase("BF16"); },
       "x.json: gemms[0].results.per-gemm has no BF16 cell"},
      {"ok without mean", [](json& j) { j["gemms"][2]["results"]["per-gemm"]["BF16"] = {{"status", "ok"}}; },
       "x.json: gemms[2].results.per-gemm.BF16: status \"ok\" needs a positive number mean_ms"},
      {"ok with zero mean", [](json& j) { j["gemms"][2]["results"]["per-gemm"]["BF16"]["mean_ms"] = 0; },
       "x.json: gemms[2].results.per-gemm.BF16: status \"ok\" needs a positive number mean_ms"},
      {"ok with text mean", [](json& j) { j["gemms"][2]["results"]["per-gemm"]["BF16"]["mean_ms"] = "1.5"; },
       "x.json: gemms[2].results.per-gemm.BF16: status \"ok\" needs a positive number mean_ms"},
      {"status", [](json& j) { j["gemms"][2]["results"]["per-gemm"]["FP8Current"]["status"] = "skipped"; },
       "x.json: gemms[2].results.per-gemm.FP8Current: a cell must be an object with status \"ok\" or \"n/a\""},
      {"bad cell of an unlisted precision", [](json& j) { j["gemms"][2]["results"]["per-gemm"]["NVFP4"] = 1.5; },
       "x.json: gemms[2].results.per-gemm.NVFP4: a cell must be an object with status"},
      {"created not text", [](json& j) { j["created"] = 2026; }, "x.json: created must be a string"},
      // every field read with a default is type-checked and named, not a bare nlohmann message
      {"iters as text", [](json& j) { j["timing"]["iters"] = "abc"; }, "x.json: timing.iters must be an integer"},
      {"iters out of int range", [](json& j) { j["timing"]["iters"] = 1e10; }, "x.json: timing.iters must be an integer"},
      {"warmup fractional", [](json& j) { j["timing"]["warmup"] = 2.5; }, "x.json: timing.warmup must be an integer"},
      {"gpu warmup as text", [](json& j) { j["timing"]["gpu_warmup_s"] = "5"; }, "x.json: timing.gpu_warmup_s must be a number"},
      {"timing not an object", [](json& j) { j["timing"] = 5; }, "x.json: timing must be an object"},
      {"sm_count negative overflow", [](json& j) { j["device"] = {{"name", "GPU"}, {"sm_count", -1e12}}; },
       "x.json: device.sm_count must be an integer"},
      {"device name", [](json& j) { j["device"] = {{"name", 5}}; }, "x.json: device.name must be a string"},
      {"fp8 format", [](json& j) { j["recipe_options"]["fp8_format"] = "e5m2"; },
       "x.json: recipe_options.fp8_format must be \"hybrid\" or \"e4m3\""},
      {"producer amax", [](json& j) { j["recipe_options"]["producer_amax"] = "yes"; },
       "x.json: recipe_options.producer_amax must be true or false"},
      {"n/a reason", [](json& j) { j["gemms"][2]["results"]["per-gemm"]["MXFP8"] = {{"status", "n/a"}, {"reason", 7}}; },
       "x.json: gemms[2].results.per-gemm.MXFP8.reason must be a string"},
      {"cell iters", [](json& j) { j["gemms"][2]["results"]["per-gemm"]["BF16"]["iters"] = "100"; },
       "x.json: gemms[2].results.per-gemm.BF16.iters must be an integer"},
      {"clock reasons", [](json& j) { j["gemms"][2]["results"]["per-gemm"]["BF16"]["clock"] = {{"reasons", -4}}; },
       "x.json: gemms[2].results.per-gemm.BF16.clock.reasons must be an integer"},
      {"k_major", [](json& j) { j["gemms"][2]["a"]["k_major"] = 1; }, "x.json: gemms[2].a.k_major must be true or false"},
      {"note", [](json& j) { j["notes"] = {"ok", 3}; }, "x.json: notes[1] must be a string"},
      {"notes not a list", [](json& j) { j["notes"] = "n"; }, "x.json: notes must be a list of strings"},
      // duplicates would pair cells with the wrong column
      {"mode twice", [](json& j) { j["modes"] = {"autocast", "autocast"}; }, "x.json: \"modes\" lists per-gemm twice"},
      {"mode twice by alias", [](json& j) { j["modes"] = {"pre-quantized", "prequantized"}; },
       "x.json: \"modes\" lists pre-quantized twice"},
      {"precision twice", [](json& j) { j["precisions"] = {"BF16", "FP8Current", "bf16"}; },
       "x.json: \"precisions\" lists BF16 twice"},
      // a model config the plan builder would refuse
      {"no layers", [](json& j) { j["config"]["num_hidden_layers"] = 0; },
       "x.json: config.num_hidden_layers must be from 1 to 16777216, got 0"},
      {"negative hidden", [](json& j) { j["config"]["hidden_size"] = -4096; }, "x.json: config.hidden_size must be from 1"},
      {"layers fractional", [](json& j) { j["config"]["num_hidden_layers"] = 24.5; },
       "x.json: config.num_hidden_layers must be an integer"},
      {"huge batch", [](json& j) { j["config"]["micro_batch_size"] = 1e9; }, "x.json: config.micro_batch_size must be"},
      {"zero tensor parallel", [](json& j) { j["config"]["tensor_parallel"] = 0; }, "x.json: config.tensor_parallel must be from 1"},
      {"heads do not divide", [](json& j) { j["config"]["num_attention_heads"] = 30; },
       "x.json: config: num_key_value_heads (32) does not divide num_attention_heads (30)"},
      {"gated not bool", [](json& j) { j["config"]["gated_mlp"] = "false"; }, "x.json: config.gated_mlp must be true or false"},
  };
  ASSERT_EQ(error_of(good), "(accepted)");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    json doc = good;
    c.edit(doc);
    EXPECT_NE(error_of(doc).find(c.message), std::string::npos) << error_of(doc);
  }
  // without a name the messages say "result JSON"
  json bad = good;
  bad["kind"] = "sweep";
  EXPECT_THROW(
      {
        try {
          from_json(bad);
        } catch (const UsageError& e) {
          EXPECT_STREQ(e.what(), "result JSON: \"kind\" must be \"model\" or \"shapes\"");
          throw;
        }
      },
      UsageError);
}

// A dry run (no "results") and an --accuracy-only run (no modes) are valid documents.
TEST(Report, JsonAcceptsDryAndAccuracyOnlyRuns) {
  RunRequest req;
  req.plan = build_model_plan(default_config());
  req.precisions = {Precision::BF16, Precision::FP8Current};
  req.modes = {Mode::PerGemm, Mode::PreQuantized};
  const RunResult dry = plan_only(req);
  const nlohmann::json jd = to_json(dry);
  ASSERT_FALSE(jd["gemms"][0].contains("results"));
  const RunResult dry_back = from_json(jd, "dry.json");
  EXPECT_TRUE(dry_back.dry_run);
  EXPECT_EQ(to_json(dry_back), jd);

  FakeEngine e(90);
  req.accuracy_only = true;
  const RunResult acc = run(e, req);
  ASSERT_TRUE(acc.modes.empty());
  const nlohmann::json ja = to_json(acc);
  const RunResult acc_back = from_json(ja, "acc.json");
  EXPECT_TRUE(acc_back.modes.empty());
  EXPECT_EQ(to_json(acc_back), ja);
}

// The operand seed is recorded under "timing" and read back; files without it stay readable.
TEST(Report, SeedRoundTrips) {
  FakeEngine e(90);
  RunRequest req;
  req.plan = build_shapes_plan("64");
  req.precisions = {Precision::BF16};
  req.modes = {Mode::PerGemm};
  req.options.seed = 18446744073709551615ull;
  const RunResult r = run(e, req);
  ASSERT_TRUE(r.seed.has_value());
  nlohmann::json j = to_json(r);
  EXPECT_EQ(j["timing"]["seed"].get<uint64_t>(), 18446744073709551615ull);
  const RunResult back = from_json(j, "s.json");
  ASSERT_TRUE(back.seed.has_value());
  EXPECT_EQ(*back.seed, 18446744073709551615ull);
  EXPECT_EQ(to_json(back), j);
  // an older file without a seed
  j["timing"].erase("seed");
  const RunResult old = from_json(j, "old.json");
  EXPECT_FALSE(old.seed.has_value());
  EXPECT_FALSE(to_json(old)["timing"].contains("seed"));
  // a seed that is not a uint64 is named
  j["timing"]["seed"] = -1;
  EXPECT_THROW(
      {
        try {
          from_json(j, "neg.json");
        } catch (const UsageError& e) {
          EXPECT_NE(std::string(e.what()).find("neg.json: timing.seed must be an integer from 0 to"), std::string::npos)
              << e.what();
          throw;
        }
      },
      UsageError);
}

TEST(Report, CsvHasOneRowPerCell) {
  RunResult r = fake_run({Mode::PerGemm});
  std::string csv = render_csv(r);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 12 * 3);
  EXPECT_NE(csv.find("per-gemm,wgrad,attn_out,layer,4096,15872,4096,"), std::string::npos);
  EXPECT_NE(csv.find("n/a,,,,,,,,\"cuBLASLt NOT_SUPPORTED (fake)\""), std::string::npos);
}

TEST(Report, AccuracyTableAndJson) {
  FakeEngine e(90);
  RunRequest req;
  req.plan = build_model_plan(default_config());
  req.precisions = {Precision::BF16, Precision::FP8Current, Precision::MXFP8};
  req.modes = {Mode::PerGemm};
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
