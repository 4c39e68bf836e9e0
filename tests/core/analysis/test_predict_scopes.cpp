// `gemmscope predict` sums the same scopes as the measured report: dense layers, MoE layers (router,
// routed and shared experts), the LM head once. A prediction of a run on its own GPU reproduces the
// run's measured totals, for a dense and an MoE run.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <optional>
#include <sstream>
#include <string>

#include "core/gpu/gpu_spec.hpp"
#include "core/model/model_config.hpp"
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

RunResult shipped(const std::string& name) {
  const std::string path = std::string(GS_SOURCE_DIR) + "/docs/results/" + name;
  return from_json(read_json_file(path), name);
}

// The tolerance of a same-GPU prediction against the run it came from. With a pre-quantized mode
// the prediction is the measured cell itself (kernel + measured overhead); without one the
// overhead is estimated from bytes and cancels again, except where a memory-bound GEMM's kernel is
// held to the modelled roofs. 1% of the full model covers both.
constexpr double kSameGpuTolerance = 0.01;

void expect_reproduces(const RunResult& run, const std::string& name) {
  const GpuSpec& h100 = db().find("H100");
  ASSERT_EQ(db().match_device(run.device->name)->key, "H100");
  const Prediction p = predict_from_run(run, name, h100, h100);
  const json j = prediction_json(p);
  for (size_t m = 0; m < run.modes.size(); ++m) {
    const ModeSummary measured = summarize_mode(run, m);
    for (size_t i = 0; i < run.precisions.size(); ++i) {
      const std::string prec = to_string(run.precisions[i]);
      const std::string mode = to_string(run.modes[m]);
      SCOPED_TRACE(fmt::format("{} {} {}", name, mode, prec));
      const auto& want = measured.sums[i].full_model;
      ASSERT_TRUE(want.has_value());
      const json& got = j["prediction"]["full_model"][mode][prec];
      ASSERT_TRUE(got.is_object()) << got.dump();
      EXPECT_NEAR(got["ms"].get<double>(), *want, kSameGpuTolerance * *want);
      EXPECT_LE(got["low_ms"].get<double>(), *want * (1 + kSameGpuTolerance));
      EXPECT_GE(got["high_ms"].get<double>(), *want * (1 - kSameGpuTolerance));
      // The JSON summary of the predicted document (compare reads it) holds the same totals.
      EXPECT_NEAR(j["summary"][mode]["full_model"][prec].get<double>(), got["ms"].get<double>(), 1e-9 * *want);
    }
  }
}

// The number printed after `label` in the column of `prec` of the prediction's text (first match
// after `after`).
double printed(const std::string& text, const std::string& after, const std::string& label, size_t column) {
  size_t pos = text.find(after);
  EXPECT_NE(pos, std::string::npos) << after;
  pos = text.find(label, pos);
  EXPECT_NE(pos, std::string::npos) << label;
  std::string rest = text.substr(pos + label.size(), text.find('\n', pos) - pos - label.size());
  std::istringstream ss(rest);
  double v = 0;
  for (size_t i = 0; i <= column; ++i) ss >> v;
  return v;
}

}  // namespace

TEST(PredictScopes, SameGpuReproducesADenseRunsTotals) {
  // Qwen2.5-7B on an H100 (per-gemm, training and pre-quantized): 506.8 ms BF16 per step in training.
  expect_reproduces(shipped("h100_qwen7b.json"), "h100_qwen7b.json");
}

TEST(PredictScopes, SameGpuReproducesAnMoeRunsTotals) {
  // DeepSeek-V3 (3 dense + 58 MoE layers, a shared expert, MLA) and Qwen3-30B-A3B (48 MoE layers),
  // measured on an H100 (DeepSeek-V3 in training and pre-quantized mode, Qwen3 in training mode).
  expect_reproduces(shipped("h100_moe_deepseek-v3.json"), "h100_moe_deepseek-v3.json");
  expect_reproduces(shipped("h100_moe_qwen3-30b-a3b.json"), "h100_moe_qwen3-30b-a3b.json");
}

TEST(PredictScopes, MoeTextPrintsEveryScopeAndTheMeasuredTotal) {
  const RunResult run = shipped("h100_moe_deepseek-v3.json");
  const GpuSpec& h100 = db().find("H100");
  const std::string text = render_prediction_text(predict_from_run(run, "ds.json", h100, h100));
  for (const char* s : {"Dense layer (3 of 61):", "MoE layer (58 of 61):", "Attention projections", "Dense MLP",
                        "Router (BF16)", "Routed experts", "Shared experts", "LM Head (3 passes)",
                        "Predicted full model (3 dense + 58 MoE layers + LM head):",
                        "Predicted speedups vs BF16 (full model):"})
    EXPECT_NE(text.find(s), std::string::npos) << s << "\n" << text;
  // The measured run's BF16 full model (the report's "Total GEMM time"), read from the run itself.
  const std::optional<double> measured = summarize_mode(run, 0).sums[0].full_model;
  ASSERT_TRUE(measured);
  const double total = printed(text, "Predicted full model", "Total GEMM time (ms)", 0);
  EXPECT_NEAR(total, *measured, 0.01 * *measured);
  // Its MoE layer is far more than its attention projections (the experts are counted).
  EXPECT_GT(printed(text, "MoE layer (58 of 61):", "Per-layer total", 0),
            2 * printed(text, "Per layer, 3 passes:", "Attention projections", 0));
}

TEST(PredictScopes, SpeedupsAreOfTheFullModel) {
  // Qwen3-30B-A3B on an H100: the predicted FP8Current speedup over the full model equals the
  // measured one (from the run's own summary; FP8 is slower than BF16 there).
  const RunResult run = shipped("h100_moe_qwen3-30b-a3b.json");
  const GpuSpec& h100 = db().find("H100");
  const Prediction p = predict_from_run(run, "q.json", h100, h100);
  const std::string text = render_prediction_text(p);
  const ModeSummary s = summarize_mode(run, 0);
  std::optional<double> measured;
  for (const Speedup& sp : s.speedups)
    if (sp.num == Precision::FP8Current && sp.den == Precision::BF16) measured = sp.value;
  ASSERT_TRUE(measured);
  EXPECT_LT(*measured, 1.0);
  const size_t at = text.find("FP8Current ", text.find("Predicted speedups vs BF16 (full model):"));
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_NEAR(std::stod(text.substr(at + 11)), *measured, 0.01);
}

TEST(PredictScopes, DatasheetOnlyMoeCountsEveryScope) {
  // Qwen3-30B-A3B's config.json: 48 layers, all MoE (128 experts of 768, top-8), an LM head.
  const ModelConfig c = load_hf_config(std::string(GS_TEST_DATA_DIR) + "/configs/qwen3_30b_a3b.json");
  const Plan plan = build_model_plan(c);
  ASSERT_EQ(plan.moe_layers(), 48);
  const Prediction p = predict_datasheet_only(plan, {Mode::PreQuantized}, RecipeOptions{}, db().find("H100"));
  // By hand: every per-layer GEMM (attention projections, router, experts) 48 times, the LM head once.
  double layer = 0, once = 0, attention = 0;
  for (size_t g = 0; g < plan.gemms.size(); ++g) {
    const PredictedCell& cell = p.cells[0][g][static_cast<size_t>(Precision::BF16)];
    ASSERT_TRUE(cell.ok);
    const Gemm& x = plan.gemms[g];
    (x.scope == Scope::Model ? once : layer) += cell.ms;
    if (x.op == Op::Qkv || x.op == Op::AttnOut) attention += cell.ms;
  }
  const json j = prediction_json(p);
  const json& full = j["prediction"]["full_model"]["pre-quantized"]["BF16"];
  EXPECT_NEAR(full["ms"].get<double>(), 48 * layer + once, 1e-9 * full["ms"].get<double>());
  EXPECT_NEAR(j["prediction"]["moe_layer"]["pre-quantized"]["BF16"]["ms"].get<double>(), layer, 1e-9 * layer);
  EXPECT_GT(layer, 1.5 * attention);  // the experts are in it
  // No dense layer in this model: no dense-layer band that would only hold the attention projections.
  EXPECT_TRUE(j["prediction"]["per_layer"]["pre-quantized"]["BF16"].is_null());
  const std::string text = render_prediction_text(p);
  EXPECT_EQ(text.find("Dense layer"), std::string::npos);
  EXPECT_NE(text.find("Predicted full model (0 dense + 48 MoE layers + LM head):"), std::string::npos) << text;
  EXPECT_NEAR(printed(text, "Predicted full model", "Total GEMM time (ms)", 0), 48 * layer + once, 0.06);
}

TEST(PredictScopes, RouterIsPredictedAtTheBf16Peak) {
  // The router runs BF16 in every column: its FP8 cell on the datasheet is its BF16 cell.
  ModelConfig c = find_preset("mixtral-8x7b").config;
  const Plan plan = build_model_plan(c);
  const Prediction p = predict_datasheet_only(plan, {Mode::PreQuantized}, RecipeOptions{}, db().find("H100"));
  bool seen = false;
  for (size_t g = 0; g < plan.gemms.size(); ++g) {
    if (plan.gemms[g].op != Op::Router) continue;
    seen = true;
    EXPECT_DOUBLE_EQ(p.cells[0][g][static_cast<size_t>(Precision::FP8Current)].kernel_ms,
                     p.cells[0][g][static_cast<size_t>(Precision::BF16)].kernel_ms);
  }
  EXPECT_TRUE(seen);
}

TEST(PredictScopes, CommandLineDatasheetOnlyMoeConfig) {
  const auto dir = test::scratch_dir("predict_scopes");
  const test::Out o = test::run_gemmscope(
      "predict --gpu H100 --mode pre-quantized --config " + std::string(GS_TEST_DATA_DIR) + "/configs/qwen3_30b_a3b.json",
      dir);
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.out.find("MoE layer (48 of 48):"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Routed experts"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(PredictScopes, SpeedupsCarryTheirBand) {
  // Qwen3-30B-A3B measured on an H100, predicted on a B300: NVFP4's speedup is printed with its band,
  // BF16's low over NVFP4's high to BF16's high over NVFP4's low (the full-model bands of the JSON).
  const RunResult run = shipped("h100_moe_qwen3-30b-a3b.json");
  const Prediction p = predict_from_run(run, "q.json", db().find("H100"), db().find("B300"));
  const std::string text = render_prediction_text(p);
  const json j = prediction_json(p);
  const std::string mode = to_string(run.modes[0]);
  const json& bf = j["prediction"]["full_model"][mode]["BF16"];
  const json& nv = j["prediction"]["full_model"][mode]["NVFP4"];
  ASSERT_TRUE(bf.is_object() && nv.is_object()) << j["prediction"]["full_model"].dump();
  const double point = bf["ms"].get<double>() / nv["ms"].get<double>();
  const double lo = bf["low_ms"].get<double>() / nv["high_ms"].get<double>();
  const double hi = bf["high_ms"].get<double>() / nv["low_ms"].get<double>();
  EXPECT_LT(lo, point);
  EXPECT_GT(hi, point);
  const std::string want = fmt::format("NVFP4 {:.2f}x ({:.2f}-{:.2f}x)", point, lo, hi);
  EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
}

TEST(PredictScopes, H100RunPredictsTheMeasuredH200RunWithinItsBand) {
  // Qwen2.5-7B measured on an H100 and, separately, on an H200 (docs/results): the prediction for the
  // H200 holds the H200's measured full-model total in its band for every mode and precision.
  const RunResult h100 = shipped("h100_qwen7b.json");
  const RunResult h200 = shipped("h200_qwen7b.json");
  const Prediction p = predict_from_run(h100, "h100_qwen7b.json", db().find("H100"), db().find("H200"));
  const json j = prediction_json(p);
  int checked = 0;
  for (size_t m = 0; m < h200.modes.size(); ++m) {
    const ModeSummary measured = summarize_mode(h200, m);
    for (size_t i = 0; i < h200.precisions.size(); ++i) {
      const std::string mode = to_string(h200.modes[m]), prec = to_string(h200.precisions[i]);
      const json& got = j["prediction"]["full_model"][mode][prec];
      if (!got.is_object() || !measured.sums[i].full_model) continue;
      SCOPED_TRACE(mode + " " + prec);
      const double want = *measured.sums[i].full_model;
      EXPECT_LE(got["low_ms"].get<double>(), want);
      EXPECT_GE(got["high_ms"].get<double>(), want);
      ++checked;
    }
  }
  EXPECT_GE(checked, 6);
}
