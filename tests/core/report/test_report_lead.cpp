// The lead of every run report is the model (every GEMM of one training step), labelled, and each
// speedup names what it covers. A MoE model's dense layers alone (PrecisionSums::total) never lead:
// with experts that FP8 slows down and dense GEMMs it speeds up, the two answers differ.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"
#include "core/report/report.hpp"
#include "core/run/runner.hpp"
#include "core/util/printer.hpp"
#include "test_util.hpp"

using namespace gs;

namespace {

// FP8 runs the dense GEMMs 3x faster than BF16 and the experts 0.8x as fast.
class SplitEngine : public test::FakeEngineBase {
 public:
  Cell measure(const Gemm& g, Precision p, Mode, const std::string&) override {
    const bool expert = g.op == Op::ExpertUp || g.op == Op::ExpertDown;
    const double rate = p == Precision::BF16 ? 1.0 : expert ? 0.8 : 3.0;
    Stats s;
    s.mean_ms = s.median_ms = s.min_ms = s.max_ms = g.flops() / 1e12 / rate;
    s.iters = 1;
    return Cell::measured(s);
  }
};

RunResult run_moe(const std::string& preset, std::vector<Mode> modes) {
  ModelConfig c = find_preset(preset).config;
  c.moe.routing = "balanced";
  SplitEngine e;
  RunRequest req;
  req.plan = build_model_plan(c);
  req.precisions = {Precision::BF16, Precision::FP8Current};
  req.modes = std::move(modes);
  req.options.timing.gpu_warmup_s = 0;
  return run(e, req);
}

// The line of `text` that starts with `start`, after position `from`.
std::string line_from(const std::string& text, const std::string& start, size_t from = 0) {
  const size_t at = text.find("\n" + start, from);
  if (at == std::string::npos) return "";
  const size_t end = text.find('\n', at + 1);
  return text.substr(at + 1, end - at - 1);
}

}  // namespace

TEST(ReportLead, AverageLayerCountsTheExperts) {
  const RunResult r = run_moe("deepseek-v3", {Mode::Training});
  const PrecisionSums s = summarize_mode(r, 0).sums[1];
  ASSERT_TRUE(s.total && s.moe_total && s.average_layer && s.full_model);
  EXPECT_DOUBLE_EQ(*s.average_layer, (3 * *s.total + 58 * *s.moe_total) / 61);
  EXPECT_DOUBLE_EQ(*s.full_model, 61 * *s.average_layer + *s.model_once);
}

// DeepSeek-V3 (3 dense + 58 MoE layers): the side-by-side table and each mode's lead are the full
// model's, and their speedups are the full model's, not the dense layer's.
TEST(ReportLead, MultiModeMoeReportLeadsWithTheModel) {
  const RunResult r = run_moe("deepseek-v3", {Mode::Training, Mode::PreQuantized});
  const std::string text = render_text(r);
  const ModeSummary ms = summarize_mode(r, 0);
  const std::string model = print::format_speedup(*ms.sums[0].full_model / *ms.sums[1].full_model);
  const std::string dense = print::format_speedup(*ms.sums[0].total / *ms.sums[1].total);
  ASSERT_NE(model, dense) << "the fake engine must tell the two apart";
  EXPECT_EQ(text.find("per-layer GEMM time"), std::string::npos) << text;
  const size_t lead = text.find(
      "Training vs Pre-quantized (full model: every GEMM of one training step, 3 dense + 58 MoE layers + LM head):");
  ASSERT_NE(lead, std::string::npos) << text;
  const std::string row = line_from(text, "FP8Current", lead);
  EXPECT_NE(row.find(model), std::string::npos) << row;
  EXPECT_EQ(row.find(dense), std::string::npos) << row;
  EXPECT_NE(row.find(fmt::format("{:.3f}", *ms.sums[1].full_model)), std::string::npos) << row;
  // Each mode's detail leads with the full model, then the average layer (experts included), and
  // its speedup line says what it covers.
  const size_t detail = text.find("GEMM Time of One Training Step (training mode): the full model, then per layer:");
  ASSERT_NE(detail, std::string::npos) << text;
  const size_t full = text.find("Full Model (3 dense + 58 MoE layers + LM head):", detail);
  const size_t average = text.find("Average layer (61 layers, experts included; LM head not included):", detail);
  const size_t dense_section = text.find("Dense layer (3 of 61):", detail);
  EXPECT_LT(full, average);
  EXPECT_LT(average, dense_section);
  EXPECT_NE(line_from(text, "Per-layer total:", average).find(fmt::format("{:.3f}", *ms.sums[1].average_layer)),
            std::string::npos);
  const size_t spd = text.find("Measured GEMM Speedups (full model: every GEMM of one training step, training mode):");
  ASSERT_NE(spd, std::string::npos) << text;
  EXPECT_EQ(line_from(text, "FP8Current vs BF16:", spd), "FP8Current vs BF16: " + model);
}

// An all-MoE model (Qwen3-30B-A3B): no dense layer to mislead; the lead is still the full model.
TEST(ReportLead, AllMoeModel) {
  const RunResult r = run_moe("qwen3-30b-a3b", {Mode::Training, Mode::PreQuantized});
  const std::string text = render_text(r);
  const ModeSummary ms = summarize_mode(r, 0);
  const size_t lead = text.find("(full model: every GEMM of one training step, 48 MoE layers + LM head):");
  ASSERT_NE(lead, std::string::npos) << text;
  EXPECT_NE(line_from(text, "FP8Current", lead).find(print::format_speedup(*ms.sums[0].full_model / *ms.sums[1].full_model)),
            std::string::npos);
  EXPECT_EQ(text.find("Dense layer ("), std::string::npos);
  EXPECT_EQ(text.find("Average layer ("), std::string::npos);  // the MoE layer is every layer
  EXPECT_NE(text.find("MoE layer (48 of 48):"), std::string::npos);
}

// One Wgrad convention everywhere, N x M x K (dY^T . X, as the dry run and docs/measurement.md
// write it): a file written before it (X^T . dY, K x M x N, operand a the activation) reads as
// today's in the report, the CSV and the document the chart script gets.
TEST(ReportLead, OldFilesWgradReadsNxMxK) {
  const std::string path = std::string(GS_SOURCE_DIR) + "/docs/results/h100_qwen7b.json";
  const nlohmann::json doc = nlohmann::json::parse(test::slurp(path));
  bool old_convention = false;
  for (const auto& g : doc["gemms"])
    if (g["pass"] == "wgrad" && g["op"] == "qkv") old_convention = g["a"]["role"] == "activation" && g["m"] == 3584;
  ASSERT_TRUE(old_convention) << "the fixture should still be written in the old convention";
  const RunResult r = from_json(doc, path);
  for (const Gemm& g : r.plan.gemms) {
    if (g.pass != Pass::Wgrad) continue;
    EXPECT_EQ(g.a.role, Role::Grad) << g.label();
    EXPECT_EQ(g.b.role, Role::Activation) << g.label();
    EXPECT_EQ(g.k, 8192) << g.label();  // the tokens
  }
  const std::string text = render_text(r);
  EXPECT_NE(text.find("4608x8192x3584"), std::string::npos);  // QKV Wgrad: N x M x K
  EXPECT_EQ(text.find("3584x8192x4608"), std::string::npos);
  EXPECT_NE(render_csv(r).find(",wgrad,qkv,layer,4608,8192,3584,"), std::string::npos);
  const nlohmann::json chart = with_derived_fields(doc, r);
  for (const auto& g : chart["gemms"])
    if (g["pass"] == "wgrad" && g["op"] == "qkv") {
      EXPECT_EQ(g["m"], 4608);
      EXPECT_EQ(g["n"], 3584);
      EXPECT_EQ(g["a"]["role"], "grad");
    }
  // The report says how those cells were timed; the file is written back as it was measured
  // (X^T.dY), so a round trip keeps both the shapes shown and the note, once.
  EXPECT_NE(text.find("Wgrad cells timed as the transposed product X^T.dY"), std::string::npos);
  EXPECT_TRUE(r.wgrad_transposed);
  const nlohmann::json written = to_json(r);
  for (const auto& g : written["gemms"])
    if (g["pass"] == "wgrad" && g["op"] == "qkv") EXPECT_EQ(g["m"], 3584);
  const RunResult back = from_json(written);
  EXPECT_TRUE(back.wgrad_transposed);
  for (size_t i = 0; i < r.plan.gemms.size(); ++i) EXPECT_EQ(back.plan.gemms[i].shape(), r.plan.gemms[i].shape());
  EXPECT_EQ(std::count(back.notes.begin(), back.notes.end(), r.notes.back()), 1);
  // A file written in today's convention is read as it is.
  RunResult today = r;
  today.wgrad_transposed = false;
  today.notes.pop_back();
  const RunResult again = from_json(to_json(today));
  EXPECT_FALSE(again.wgrad_transposed);
  for (size_t i = 0; i < r.plan.gemms.size(); ++i) EXPECT_EQ(again.plan.gemms[i].shape(), r.plan.gemms[i].shape());
}
