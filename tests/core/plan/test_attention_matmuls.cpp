// Attention's own matmuls (core/plan/attention_matmuls.hpp) and their block in reports
// (core/report/report_attention.hpp): hand-computed rows, causal halving, the step context's time per
// fused pass said as measured / modelled / not measured, and never in the GEMM totals or speedups.
#include <gtest/gtest.h>

#include <string>

#include "core/plan/attention_matmuls.hpp"
#include "core/model/model_config.hpp"
#include "core/plan/plan.hpp"
#include "core/report/report.hpp"
#include "core/report/report_attention.hpp"
#include "core/results/step_context_records.hpp"
#include "core/plan/step_model.hpp"
#include "test_util.hpp"

using namespace gs;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Qwen3-30B-A3B at 1 x 4096 has 32 query heads and 4 key/value heads of 128, 48 layers.
constexpr double kS = 4096, kD = 128, kHeads = 32;

// A measured dense run (llama-3-8b's layer, 2 layers, at 1 x 4096) with every GEMM cell 1 ms (BF16)
// and 0.5 ms (FP8Current), and a step context whose attention is `fwd` + `bwd` ms.
RunResult measured_run(double fwd, double bwd, bool attention_measured) {
  ModelConfig c = find_preset("llama-3-8b").config;
  c.num_hidden_layers = 2;
  c.micro_batch_size = 1;
  c.sequence_length = 4096;
  RunResult r;
  r.plan = build_model_plan(c);
  r.precisions = {Precision::BF16, Precision::FP8Current};
  r.modes = {Mode::Training};
  r.allocate_cells();
  for (size_t g = 0; g < r.plan.gemms.size(); ++g) {
    r.cell(0, g, 0) = Cell::measured(summarize({1.0}));
    r.cell(0, g, 1) = Cell::measured(summarize({0.5}));
  }
  r.timing.step_context_kind = StepContextKind::TransformerEngine;
  StepContextInfo info;
  info.kind = StepContextKind::TransformerEngine;
  info.attention_fwd_ms = fwd;
  info.attention_bwd_ms = bwd;
  info.attention_measured = attention_measured;
  info.attention_source = attention_measured ? "cuDNN SDPA test" : "modelled: test";
  info.attention_shape = describe(attention_shape(c));
  set_step_context_records(r, info);
  return r;
}

}  // namespace

TEST(AttentionMatmuls, RowsOfAHandWorkedGqaLayer) {
  const AttentionMatmuls a = attention_matmuls(find_preset("qwen3-30b-a3b").config);
  ASSERT_EQ(a.rows.size(), 6u);
  EXPECT_EQ(a.layers, 48);
  EXPECT_TRUE(a.shape.causal);
  // Forward: S = Q K^T is 32 products of 4096x128x4096, O = P V 32 of 4096x4096x128.
  EXPECT_EQ(a.rows[0].name, "S = Q K^T");
  EXPECT_EQ(a.rows[0].shape(), "32 x 4096x128x4096");
  EXPECT_EQ(a.rows[1].name, "O = P V");
  EXPECT_EQ(a.rows[1].shape(), "32 x 4096x4096x128");
  EXPECT_EQ(a.rows[0].pass, Pass::Fprop);
  EXPECT_EQ(a.rows[1].pass, Pass::Fprop);
  // Backward: dV, dP, dQ, dK, every one a data gradient (no weights).
  const char* back[] = {"dV = P^T dO", "dP = dO V^T", "dQ = dS K", "dK = dS^T Q"};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(a.rows[2 + i].name, back[i]);
    EXPECT_EQ(a.rows[2 + i].pass, Pass::Dgrad);
  }
  EXPECT_EQ(a.rows[3].shape(), "32 x 4096x128x4096");
  // Each row: 2 x 32 x 4096 x 4096 x 128 = 137.4 GFLOP, halved by the causal mask to 68.7.
  const double row = 2 * kHeads * kS * kS * kD;
  for (const AttentionMatmul& m : a.rows) {
    EXPECT_DOUBLE_EQ(m.flops(false), row) << m.name;
    EXPECT_DOUBLE_EQ(m.flops(true), row / 2) << m.name;
  }
  EXPECT_DOUBLE_EQ(a.flops(Pass::Fprop), row);           // 2 rows x half
  EXPECT_DOUBLE_EQ(a.flops(Pass::Dgrad), 2 * row);       // twice the forward
  EXPECT_DOUBLE_EQ(a.flops_per_layer(true), 3 * row);    // 412.3 GFLOP, the issue's 0.41T
  EXPECT_DOUBLE_EQ(a.flops_per_layer(false), 6 * row);
  EXPECT_DOUBLE_EQ(a.flops_per_step(), 48 * 3 * row);
  EXPECT_DOUBLE_EQ(a.recomputed_flops(), row / 2);
  // Unfused S = Q K^T: BF16 Q and K read, the full 4096 x 4096 S written, 32 times.
  EXPECT_DOUBLE_EQ(a.rows[0].unfused_bytes(), 2 * kHeads * (kS * kD + kD * kS + kS * kS));  // 1140.9 MB
  // Fused forward, each tensor once: Q and O of 32 heads, K and V of 4 heads (GQA), FP32 statistics.
  const double q = kS * 32 * kD, kv = kS * 4 * kD;
  EXPECT_DOUBLE_EQ(a.fused_bytes(Pass::Fprop), 2 * (q + kv + kv + q) + 4 * 32 * kS);  // 76.0 MB
  // Fused backward: reads Q, K, V, O, dO, statistics; writes dQ, dK, dV.
  EXPECT_DOUBLE_EQ(a.fused_bytes(Pass::Dgrad), 2 * (q + kv + kv + q + q) + 4 * 32 * kS + 2 * (q + kv + kv));
}

TEST(AttentionMatmuls, MlaHeadSizesAndTensorParallel) {
  // DeepSeek-V3 under TP 8: 16 heads per GPU, qk head 128 nope + 64 rope = 192, v head 128.
  ModelConfig d = find_preset("deepseek-v3").config;
  d.tensor_parallel = 8;
  const AttentionMatmuls a = attention_matmuls(d);
  EXPECT_EQ(a.rows[0].shape(), "16 x 4096x192x4096");
  EXPECT_EQ(a.rows[1].shape(), "16 x 4096x4096x128");
  EXPECT_EQ(a.rows[4].shape(), "16 x 4096x4096x192");  // dQ = dS K: the qk head size
  EXPECT_DOUBLE_EQ(a.flops_per_layer(true), 0.5 * 3 * 2.0 * kS * kS * 16 * (192 + 128));
  // MLA: every head its own key and value.
  EXPECT_EQ(a.shape.heads_kv, 16);
}

TEST(AttentionMatmuls, MeasuredTimeIsShownPerFusedPassAndNeverInTheGemmTotals) {
  const RunResult r = measured_run(1.25, 3.5, true);
  RunResult none = r;
  clear_step_context_records(none);
  none.timing.step_context_kind = StepContextKind::None;
  // The GEMM sums and speedups are the same with or without attention's time.
  const ModeSummary with = summarize_mode(r, 0), without = summarize_mode(none, 0);
  const double gemms = static_cast<double>(r.plan.gemms.size());
  ASSERT_TRUE(with.sums[0].full_model);
  EXPECT_DOUBLE_EQ(*with.sums[0].full_model, *without.sums[0].full_model);
  EXPECT_DOUBLE_EQ(*with.sums[0].full_model, (gemms - 3) * 2 + 3);  // layer GEMMs x 2 layers + the LM head once
  EXPECT_DOUBLE_EQ(*with.speedups[0].value, *without.speedups[0].value);
  EXPECT_DOUBLE_EQ(*with.speedups[0].value, 2.0);
  // The block: rows, the time of each fused pass, said as measured.
  const AttentionPassTimes t = attention_pass_times(r);
  EXPECT_EQ(t.source, "measured");
  EXPECT_DOUBLE_EQ(*t.forward_ms, 1.25);
  EXPECT_DOUBLE_EQ(*t.backward_ms, 3.5);
  const std::string text = render_text(r);
  const size_t block = text.find("Attention's own matmuls (QK^T and PV), per layer and GPU:\n"
                                 "  batch 1 x seq 4096, heads 32/8, head dims 128/128, causal\n");
  ASSERT_NE(block, std::string::npos) << text;
  EXPECT_TRUE(has(text, "  Not GEMM rows: fused with the softmax in flash attention, never timed as GEMMs, never in\n"
                        "  the GEMM totals or speedups."))
      << text;
  EXPECT_TRUE(has(text, "Fprop  S = Q K^T     32 x 4096x128x4096"));
  EXPECT_TRUE(has(text, "Forward, one fused kernel: 137.4 GFLOP, at least "));
  EXPECT_TRUE(has(text, "Backward, one fused kernel: 274.9 GFLOP + 68.7 recomputing S, at least "));
  EXPECT_TRUE(has(text, "1.250 ms measured by the step context (cuDNN SDPA test)")) << text;
  EXPECT_TRUE(has(text, "3.500 ms measured by the step context (cuDNN SDPA test)")) << text;
  // 137.4 GFLOP in 1.25 ms: 110.0 TFLOP/s; the backward executes 274.9 + 68.7 GFLOP in 3.5 ms: 98.2.
  EXPECT_TRUE(has(text, "110.0 TFLOP/s")) << text;
  EXPECT_TRUE(has(text, "98.2 TFLOP/s")) << text;
  EXPECT_TRUE(has(text, "with the causal mask (half the s x s scores; "));
  // Once, after the GEMM tables, and not as a GEMM row of them.
  EXPECT_EQ(text.find("Attention's own matmuls", block + 1), std::string::npos);
  EXPECT_GT(block, text.find("Throughput per GEMM"));
  EXPECT_FALSE(has(text.substr(0, block), "S = Q K^T"));
  // One document for both formats: markdown has the same rows as a pipe table, the text unwrapped,
  // no rules.
  print::Document d;
  add_attention_matmuls(d, r);
  EXPECT_EQ(print::render(d, print::Format::Text), attention_matmuls_block(r));
  const std::string md = print::render(d, print::Format::Markdown);
  EXPECT_EQ(md.rfind("### Attention's own matmuls (QK^T and PV), per layer and GPU:\n", 0), 0u) << md;
  EXPECT_TRUE(has(md, "| Pass | Matmul | Shape (products x MxKxN) | GFLOP (causal) | MB unfused |\n"
                      "|---|---|---|---:|---:|\n"
                      "| Fprop | S = Q K^T | 32 x 4096x128x4096 | "))
      << md;
  EXPECT_TRUE(has(md, "\nNot GEMM rows: fused with the softmax in flash attention, never timed as GEMMs, never in the GEMM "
                      "totals or speedups.\n"))
      << md;
  EXPECT_FALSE(has(md, "-----")) << md;
  // The CSV holds GEMM cells only.
  EXPECT_FALSE(has(render_csv(r), "Q K^T"));
}

TEST(AttentionMatmuls, JsonBlockOfItsOwn) {
  const RunResult r = measured_run(1.25, 3.5, true);
  const nlohmann::json j = to_json(r);
  ASSERT_TRUE(j.contains("attention_matmuls"));
  const nlohmann::json& a = j["attention_matmuls"];
  EXPECT_EQ(a["in_gemm_totals"], false);
  EXPECT_EQ(a["rows"].size(), 6u);
  EXPECT_EQ(a["rows"][0]["name"], "S = Q K^T");
  EXPECT_EQ(a["rows"][0]["pass"], "fprop");
  EXPECT_EQ(a["rows"][2]["pass"], "dgrad");
  EXPECT_DOUBLE_EQ(a["rows"][0]["flops"].get<double>(), kHeads * kS * kS * kD);  // causal half of 2 x ...
  EXPECT_EQ(a["shape"]["heads_kv"], 8);
  EXPECT_EQ(a["shape"]["causal"], true);
  EXPECT_DOUBLE_EQ(a["forward"]["time_ms"].get<double>(), 1.25);
  EXPECT_DOUBLE_EQ(a["backward"]["time_ms"].get<double>(), 3.5);
  EXPECT_EQ(a["forward"]["time_source"], "measured");
  EXPECT_EQ(a["layers"], 2);
  EXPECT_EQ(j["plan"]["flops_full_model_includes_attention"], false);
  // The full model's FLOPs are the linear layers' alone.
  EXPECT_DOUBLE_EQ(j["plan"]["flops_full_model"].get<double>(), plan_flops(r.plan).full_model(2));
  // A reader ignores the block (it is derived) and writes it again the same.
  const RunResult back = from_json(j, "a.json");
  EXPECT_EQ(to_json(back)["attention_matmuls"], a);
  // A shapes plan has none.
  RunResult s;
  s.plan = build_shapes_plan("1024x1024x1024");
  s.precisions = {Precision::BF16};
  s.modes = {Mode::PreQuantized};
  s.allocate_cells();
  s.cell(0, 0, 0) = Cell::measured(summarize({1.0}));
  EXPECT_FALSE(to_json(s).contains("attention_matmuls"));
  EXPECT_EQ(attention_matmuls_block(s), "");
  EXPECT_FALSE(has(render_text(s), "Attention's own matmuls"));
}

TEST(AttentionMatmuls, TimesAreLabelledHonestly) {
  // Modelled by the step context (no cuDNN): shown, and said not to be measured.
  const RunResult m = measured_run(1.25, 3.5, false);
  EXPECT_EQ(attention_pass_times(m).source, "modelled");
  EXPECT_TRUE(has(attention_matmuls_block(m), "1.250 ms from the step context, not measured (modelled: test)"));
  EXPECT_FALSE(has(attention_matmuls_block(m), "measured by the step context"));
  EXPECT_EQ(to_json(m)["attention_matmuls"]["forward"]["time_source"], "modelled");
  // No step context: no time.
  RunResult none = m;
  clear_step_context_records(none);
  none.timing.step_context_kind = StepContextKind::None;
  EXPECT_FALSE(attention_pass_times(none).forward_ms);
  EXPECT_TRUE(has(attention_matmuls_block(none),
                  "not measured (no step context in this run: --step-context none or an older file)\n"));
  EXPECT_TRUE(to_json(none)["attention_matmuls"]["forward"]["time_ms"].is_null());
  // The step context timed another shape (a hand-edited file): its time is not these rows'.
  RunResult other = measured_run(1.25, 3.5, true);
  StepContextInfo shifted = *step_context_view(other);
  shifted.attention_shape = "batch 9 x seq 9, heads 1/1, head dims 8/8, causal";
  set_step_context_records(other, shifted);
  EXPECT_FALSE(attention_pass_times(other).forward_ms);
  EXPECT_TRUE(has(attention_matmuls_block(other), "the step context timed another shape"));
  // A predicted document carries no attention time.
  RunResult p = measured_run(1.25, 3.5, true);
  p.timing.method = "predicted";
  EXPECT_EQ(attention_pass_times(p).source, "not predicted");
  EXPECT_FALSE(attention_pass_times(p).forward_ms);
}

TEST(AttentionMatmuls, DryRunPlansTheRowsUnmeasured) {
  static const auto dir = test::scratch_dir("attention_matmuls");
  const test::Out o = test::run_gemmscope("--model qwen3-30b-a3b --dry-run", dir);
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_TRUE(has(o.out, "the linear layers only (attention's QK^T and PV not included: below)")) << o.out;
  EXPECT_TRUE(has(o.out, "Attention's own matmuls (QK^T and PV), per layer and GPU:\n"
                         "  batch 1 x seq 4096, heads 32/4, head dims 128/128, causal\n"))
      << o.out;
  EXPECT_TRUE(has(o.out, "Dgrad  dK = dS^T Q   32 x 4096x4096x128")) << o.out;
  EXPECT_TRUE(has(o.out, "  not measured (dry run; a measurement's step context times it with cuDNN)\n")) << o.out;
  EXPECT_TRUE(has(o.out, "Per layer 0.41T with the causal mask (half the s x s scores; 0.82T without)\n"
                         "  48 layers: 19.79T per step, 26% on top of the linear layers' 75.11T\n"))
      << o.out;
  // --step-context none: no attention would run.
  const test::Out n = test::run_gemmscope("--model qwen3-30b-a3b --dry-run --step-context none", dir);
  ASSERT_EQ(n.rc, 0) << n.err;
  EXPECT_TRUE(has(n.out, "not measured (dry run; --step-context none runs no attention)")) << n.out;
  // The JSON of a dry run has the rows, without a time.
  const test::Out jo = test::run_gemmscope("--model qwen3-30b-a3b --dry-run --json " + (dir / "d.json").string(), dir);
  ASSERT_EQ(jo.rc, 0) << jo.err;
  const nlohmann::json j = read_json_file((dir / "d.json").string());
  EXPECT_EQ(j["attention_matmuls"]["rows"].size(), 6u);
  EXPECT_TRUE(j["attention_matmuls"]["backward"]["time_ms"].is_null());
  EXPECT_EQ(j["attention_matmuls"]["backward"]["time_source"], "not measured");
}

TEST(AttentionMatmuls, SlidingWindowLayersAreSaidNotHidden) {
  // The rows plan full causal attention in every layer; a config whose layers slide says so.
  auto notes_of = [](const std::string& text) {
    std::string all;
    for (const std::string& n : parse_hf_config(text, "c.json").notes) all += n + "\n";
    return all;
  };
  const std::string base =
      R"("hidden_size":1024,"intermediate_size":4096,"num_attention_heads":8,"num_key_value_heads":8,)"
      R"("num_hidden_layers":4,"vocab_size":1000,"max_position_embeddings":4096)";
  // layer_types: the sliding layers counted.
  const std::string gpt_oss = notes_of(R"({"model_type":"llama",)" + base +
                                       R"(,"sliding_window":128,"layer_types":["sliding_attention","full_attention",)"
                                       R"("sliding_attention","full_attention"]})");
  EXPECT_TRUE(has(gpt_oss, "c.json: 'sliding_window' = 128 in 2 of 4 layers (layer_types): those layers attend over at "
                           "most 128 keys; attention's own matmuls and the step context's attention are planned as full "
                           "causal attention"))
      << gpt_oss;
  // No layer_types (Mistral v0.1): said for the family's layers.
  EXPECT_TRUE(has(notes_of(R"({"model_type":"mistral",)" + base + R"(,"sliding_window":4096})"),
                  "'sliding_window' = 4096 in the layers its family applies it to"));
  // Switched off (Qwen2/3's use_sliding_window false), null, or every layer full: no note.
  EXPECT_FALSE(has(notes_of(R"({"model_type":"qwen2",)" + base + R"(,"sliding_window":4096,"use_sliding_window":false})"),
                   "sliding_window"));
  EXPECT_FALSE(has(notes_of(R"({"model_type":"qwen2",)" + base + R"(,"sliding_window":null})"), "sliding_window"));
  EXPECT_FALSE(has(notes_of(R"({"model_type":"llama",)" + base +
                            R"(,"sliding_window":128,"layer_types":["full_attention","full_attention",)"
                            R"("full_attention","full_attention"]})"),
                   "sliding_window"));
  // The gpt-oss-120b preset (alternating sliding layers) says it too, in its dry run.
  static const auto dir = test::scratch_dir("attention_sliding");
  const test::Out o = test::run_gemmscope("--model gpt-oss-120b --dry-run", dir);
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_TRUE(has(o.out, "Config note: sliding_window = 128 in 18 of 36 layers")) << o.out;
}
